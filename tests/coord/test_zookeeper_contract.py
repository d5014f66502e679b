"""The coordinator contract suite against ZooKeeper (a shared server, one chroot per test)."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from replog.coord.contract import SessionFaults
from replog.coord.testing import CoordinatorContract, CoordinatorFactory
from tests.servers import ZkServer

pytest.importorskip("kazoo.client")

from replog.coord.zookeeper import ZooKeeperCoordinator


class TestZooKeeperCoordinator(CoordinatorContract):
    """Every contract test on a fresh chroot; sessions expire by twin-session close."""

    session_timeout_ms = 6_000

    @pytest.fixture
    def coordinator_factory(self, zk_server: ZkServer, zk_chroot: str) -> CoordinatorFactory:
        url = zk_server.url(zk_chroot)
        factory: Callable[[], ZooKeeperCoordinator] = lambda: ZooKeeperCoordinator.from_url(url)  # noqa: E731
        return factory


def test_implements_session_faults(zk_server: ZkServer, zk_chroot: str) -> None:
    with ZooKeeperCoordinator.from_url(zk_server.url(zk_chroot)) as coord:
        assert isinstance(coord, SessionFaults)
