"""Fixtures of the fault suite: a fresh 3-broker process cluster per test, on the built-in
metadata quorum (three ``replog controller`` voters per test, the default) or on ZooKeeper (one
server per session, each test in its own chroot) with ``REPLOG_FAULTS_COORDINATOR=zookeeper``,
or in combined mode (each broker process runs a voter too) with ``=combined``. A failing test
gets every broker's (and voter's) log tail in its report."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.faults.availability import AVAILABILITY_PROPERTY
from tests.faults.harness import ProcessCluster, QuorumProcesses, free_port
from tests.faults.workload import FAULT_SETTINGS, TOPIC, create_topic
from tests.servers import ZkServer, start_zookeeper

#: "raft" (the built-in quorum, default) or "zookeeper"
COORDINATOR = os.environ.get("REPLOG_FAULTS_COORDINATOR", "raft")
#: quick quorum elections, well inside the brokers' 2 s sessions
VOTER_ARGS = ["--election-timeout-ms", "300", "--fetch-timeout-ms", "1000"]
#: ``REPLOG_FAULTS_COORDINATOR=combined``: no coordinator process, each broker runs a voter
COMBINED = "combined://"
COMBINED_QUORUM = {"election_timeout_ms": 300, "fetch_timeout_ms": 1_000, "request_timeout_ms": 500}


@pytest.fixture(scope="session")
def fault_zk(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ZkServer]:
    """A standalone ZooKeeper shared by the suite (brokers are faulted, never ZooKeeper)."""
    pytest.importorskip("kazoo.client")
    server = start_zookeeper(tmp_path_factory.mktemp("fault-zk"))
    try:
        yield server
    finally:
        server.stop()


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """Each fault's availability figures (``tests.faults.availability``): recorded by the
    tests as a ``user_properties`` entry, which xdist brings back from its workers."""
    lines = [
        str(value)
        for reports in terminalreporter.stats.values()
        for report in reports
        if getattr(report, "when", None) == "call"
        for name, value in getattr(report, "user_properties", ())
        if name == AVAILABILITY_PROPERTY
    ]
    if lines:
        terminalreporter.section("fault availability")
        for line in lines:
            terminalreporter.write_line(line)


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> object:
    report = yield
    setattr(item, f"rep_{report.when}", report)
    return report


@pytest.fixture
def fault_quorum(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[QuorumProcesses]:
    """Three ``replog controller`` voters of the test's own, as processes."""
    quorum = QuorumProcesses.start(tmp_path / "quorum", 3, VOTER_ARGS)
    try:
        yield quorum
    finally:
        quorum.discard()
        if _failed(request):
            print(f"\n===== voter log tails =====\n{quorum.log_tails(30)}")


@pytest.fixture
def fault_coordinator(request: pytest.FixtureRequest) -> str:
    """The test's coordinator URL (see the module docstring); a fresh quorum per test."""
    if COORDINATOR == "zookeeper":
        zk: ZkServer = request.getfixturevalue("fault_zk")
        return zk.url(f"faults-{uuid.uuid4().hex[:8]}")
    if COORDINATOR == "combined":
        return COMBINED
    if COORDINATOR != "raft":
        raise ValueError(f"REPLOG_FAULTS_COORDINATOR={COORDINATOR!r}: raft, zookeeper or combined")
    quorum: QuorumProcesses = request.getfixturevalue("fault_quorum")
    return quorum.url


def _failed(request: pytest.FixtureRequest) -> bool:
    return any(
        getattr(getattr(request.node, f"rep_{when}", None), "failed", False)
        for when in ("setup", "call")
    )


def make_cluster(
    request: pytest.FixtureRequest,
    coordinator_url: str,
    tmp_path: Path,
    *,
    module: str = "replog.broker",
    **overrides: object,
) -> Iterator[ProcessCluster]:
    """Start 3 brokers and the test topic; on failure print the log tails; always stop. With
    ``COMBINED`` each broker process also runs a voter of the metadata quorum."""
    settings = {**FAULT_SETTINGS, **overrides}
    if coordinator_url == COMBINED:
        voters = ",".join(f"{i}@127.0.0.1:{free_port()}" for i in (1, 2, 3))
        settings |= {
            "process_roles": ["broker", "controller"],
            "controller_voters": voters,
            "quorum": COMBINED_QUORUM,
        }
    cluster = ProcessCluster.create(
        tmp_path / "cluster",
        coordinator_url,
        3,
        settings=settings,
        modules={i: module for i in (1, 2, 3)},
    )
    if coordinator_url == COMBINED:
        for broker in cluster.brokers.values():
            del broker.settings["coordinator"]  # derived from controller_voters
    cluster.start()
    try:
        create_topic(cluster)
        yield cluster
    finally:
        failed = _failed(request)
        cluster.discard()
        if failed:
            print(f"\n===== broker log tails ({TOPIC}) =====\n{cluster.log_tails(40)}")


@pytest.fixture
def cluster(
    request: pytest.FixtureRequest, fault_coordinator: str, tmp_path: Path
) -> Iterator[ProcessCluster]:
    """Three ordinary broker processes (fsync durability), topic RF 3, min ISR 2."""
    yield from make_cluster(request, fault_coordinator, tmp_path)


@pytest.fixture
def long_session_cluster(
    request: pytest.FixtureRequest, fault_coordinator: str, tmp_path: Path
) -> Iterator[ProcessCluster]:
    """Sessions (8 s) outlast the ISR lag limit (2 s): a stalled follower leaves the ISR
    without losing its registration."""
    yield from make_cluster(request, fault_coordinator, tmp_path, session_timeout_ms=8_000)


@pytest.fixture
def powerloss_cluster(
    request: pytest.FixtureRequest, fault_coordinator: str, tmp_path: Path
) -> Iterator[ProcessCluster]:
    """Brokers on a power-cut-capable filesystem (``tests.faults.powerloss_broker``)."""
    module = "tests.faults.powerloss_broker"
    yield from make_cluster(request, fault_coordinator, tmp_path, module=module)


@pytest.fixture
def replicated_cluster(
    request: pytest.FixtureRequest, fault_coordinator: str, tmp_path: Path
) -> Iterator[ProcessCluster]:
    """Three brokers in REPLICATED durability: a crashed broker registers as not cleanly shut
    down (KIP-966), so the controller takes it out of every ISR and ELR."""
    yield from make_cluster(request, fault_coordinator, tmp_path, durability="replicated")
