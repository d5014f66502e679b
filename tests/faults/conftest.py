"""Fixtures of the fault suite: one ZooKeeper server per session (each test in its own chroot)
and a fresh 3-broker process cluster per test. A failing test gets every broker's log tail in
its report."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.faults.harness import ProcessCluster
from tests.faults.workload import FAULT_SETTINGS, TOPIC, create_topic
from tests.servers import ZkServer, start_zookeeper

pytest.importorskip("kazoo.client")


@pytest.fixture(scope="session")
def fault_zk(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ZkServer]:
    """A standalone ZooKeeper shared by the suite (brokers are faulted, never ZooKeeper)."""
    server = start_zookeeper(tmp_path_factory.mktemp("fault-zk"))
    try:
        yield server
    finally:
        server.stop()


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> object:
    report = yield
    setattr(item, f"rep_{report.when}", report)
    return report


def make_cluster(
    request: pytest.FixtureRequest,
    fault_zk: ZkServer,
    tmp_path: Path,
    *,
    module: str = "replog.broker",
    **overrides: object,
) -> Iterator[ProcessCluster]:
    """Start 3 brokers and the test topic; on failure print the log tails; always stop."""
    cluster = ProcessCluster.create(
        tmp_path / "cluster",
        fault_zk.url(f"faults-{uuid.uuid4().hex[:8]}"),
        3,
        settings={**FAULT_SETTINGS, **overrides},
        modules={i: module for i in (1, 2, 3)},
    )
    cluster.start()
    try:
        create_topic(cluster)
        yield cluster
    finally:
        failed = any(
            getattr(getattr(request.node, f"rep_{when}", None), "failed", False)
            for when in ("setup", "call")
        )
        cluster.close()
        if failed:
            print(f"\n===== broker log tails ({TOPIC}) =====\n{cluster.log_tails(40)}")


@pytest.fixture
def cluster(
    request: pytest.FixtureRequest, fault_zk: ZkServer, tmp_path: Path
) -> Iterator[ProcessCluster]:
    """Three ordinary broker processes (fsync durability), topic RF 3, min ISR 2."""
    yield from make_cluster(request, fault_zk, tmp_path)


@pytest.fixture
def long_session_cluster(
    request: pytest.FixtureRequest, fault_zk: ZkServer, tmp_path: Path
) -> Iterator[ProcessCluster]:
    """Sessions (8 s) outlast the ISR lag limit (2 s): a stalled follower leaves the ISR
    without losing its registration."""
    yield from make_cluster(request, fault_zk, tmp_path, session_timeout_ms=8_000)


@pytest.fixture
def powerloss_cluster(
    request: pytest.FixtureRequest, fault_zk: ZkServer, tmp_path: Path
) -> Iterator[ProcessCluster]:
    """Brokers on a power-cut-capable filesystem (``tests.faults.powerloss_broker``)."""
    yield from make_cluster(request, fault_zk, tmp_path, module="tests.faults.powerloss_broker")


@pytest.fixture
def replicated_cluster(
    request: pytest.FixtureRequest, fault_zk: ZkServer, tmp_path: Path
) -> Iterator[ProcessCluster]:
    """Three brokers in REPLICATED durability: a crashed broker registers as not cleanly shut
    down (KIP-966), so the controller takes it out of every ISR and ELR."""
    yield from make_cluster(request, fault_zk, tmp_path, durability="replicated")
