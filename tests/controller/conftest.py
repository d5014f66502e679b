"""The coordinator every store-involving controller test runs against: the memory backend, plus
ZooKeeper and etcd when their modules import and their servers can be started (else those
parameters skip, or fail under ``REPLOG_REQUIRE_BACKENDS=1``; see ``tests/servers*.py``).

To add a backend, add its name to ``BACKENDS`` and a branch to ``_open``.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest

from replog.coord.contract import Coordinator
from replog.coord.memory import MemoryCoordinator

BACKENDS = ("memory", "zookeeper", "etcd")


@pytest.fixture(scope="session")
def controller_zk_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[object]:
    """One ZooKeeper for the controller tests (each test gets its own chroot)."""
    from tests.servers import require_zookeeper, start_zookeeper

    require_zookeeper()
    pytest.importorskip("kazoo.client")
    server = start_zookeeper(tmp_path_factory.mktemp("zk-controller"))
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="session")
def controller_etcd_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[object]:
    """One etcd for the controller tests (each test gets its own key prefix)."""
    from tests.servers_etcd import require_etcd, start_etcd

    require_etcd()
    pytest.importorskip("httpx")
    server = start_etcd(tmp_path_factory.mktemp("etcd-controller"))
    try:
        yield server
    finally:
        server.stop()


def _open(backend: str, request: pytest.FixtureRequest) -> Coordinator:
    suffix = uuid.uuid4().hex[:12]
    if backend == "memory":
        return MemoryCoordinator()
    if backend == "zookeeper":
        from replog.coord.zookeeper import ZooKeeperCoordinator

        zk = request.getfixturevalue("controller_zk_server")
        return ZooKeeperCoordinator.from_url(zk.url(f"/c-{suffix}"))
    if backend == "etcd":
        from replog.coord.etcd import EtcdCoordinator

        etcd = request.getfixturevalue("controller_etcd_server")
        host_port = etcd.client_url.removeprefix("http://")
        return EtcdCoordinator.from_url(f"etcd://{host_port}/c-{suffix}")
    raise ValueError(f"unknown backend {backend}")


@pytest.fixture(params=BACKENDS)
def coordinator(request: pytest.FixtureRequest) -> Iterator[Coordinator]:
    """A fresh, empty store of each backend."""
    coord = _open(request.param, request)
    try:
        yield coord
    finally:
        coord.close()
