"""The coordinator contract suite against ZooKeeper (a shared server, one chroot per test)."""

from __future__ import annotations

import json
from collections.abc import Callable

import attrs
import pytest

from replog.coord.contract import SessionFaults
from replog.coord.testing import CoordinatorFactory, SecondHandleContract
from tests.servers import ZkServer

pytest.importorskip("kazoo.client")

from replog.coord.zookeeper import ZooKeeperCoordinator

pytestmark = pytest.mark.system


class TestZooKeeperCoordinator(SecondHandleContract):
    """Every contract test on a fresh chroot; sessions expire by twin-session close."""

    session_timeout_ms = 6_000

    @pytest.fixture
    def coordinator_factory(self, zk_server: ZkServer, zk_chroot: str) -> CoordinatorFactory:
        url = zk_server.url(zk_chroot)
        factory: Callable[[], ZooKeeperCoordinator] = lambda: ZooKeeperCoordinator.from_url(url)  # noqa: E731
        return factory

    @pytest.fixture
    def peer_factory(self, coordinator_factory: CoordinatorFactory) -> CoordinatorFactory:
        """The factory reopens this test's chroot: another handle on the same store."""
        return coordinator_factory


def test_implements_session_faults(zk_server: ZkServer, zk_chroot: str) -> None:
    with ZooKeeperCoordinator.from_url(zk_server.url(zk_chroot)) as coord:
        assert isinstance(coord, SessionFaults)


def test_a_topic_written_before_configs_reads_with_none(
    zk_server: ZkServer, zk_chroot: str
) -> None:
    """A topic znode in the shape written before topics had configs (no "configs") reads as a
    topic without configs, and can still grow and be deleted."""
    from kazoo.client import KazooClient

    with ZooKeeperCoordinator.from_url(zk_server.url(zk_chroot)) as coord:
        broker = coord.register_broker(1, "127.0.0.1", 9001, session_timeout_ms=6_000)
        ctl = coord.elect_controller(1, broker.incarnation_epoch).controller_epoch
        created = coord.create_topic("t", [[1]], controller_epoch=ctl, configs={"k": "v"})
        old = {
            "version": 3,
            "topic_id": created.topic_id,
            "partitions": {"0": [1]},
            "adding_replicas": {},
            "removing_replicas": {},
        }
        raw = KazooClient(hosts=zk_server.hosts)
        raw.start(timeout=10)
        try:
            raw.set(f"{zk_chroot}/brokers/topics/t", json.dumps(old).encode())
        finally:
            raw.stop()
            raw.close()
        without = attrs.evolve(created, configs=())
        assert coord.get_topic("t") == without
        assert coord.snapshot().topics == {"t": without}
        grown = coord.add_partitions("t", [[1]], controller_epoch=ctl)
        assert grown == attrs.evolve(without, replicas=((1,), (1,)))
        assert coord.get_topic("t") == grown
        assert coord.delete_topic("t", controller_epoch=ctl) == grown
