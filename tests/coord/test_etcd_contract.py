"""The coordinator contract suite against a real etcd (the JSON-gateway backend)."""

from __future__ import annotations

import json
import uuid

import attrs
import pytest

from replog.coord.testing import CoordinatorFactory, SecondHandleContract
from tests.coord.etcd_fixtures import etcd_factory, etcd_server
from tests.servers_etcd import EtcdServer

pytestmark = pytest.mark.system

__all__ = ["etcd_server"]  # the fixture, re-exported so pytest finds it here


class TestEtcdCoordinator(SecondHandleContract):
    """Every contract test on one shared etcd, a fresh key prefix per test (every handle of a
    test opens that prefix). Session faults: expire = lease revoke; suspend/resume = stop
    renewing the lease and refuse calls."""

    @pytest.fixture
    def coordinator_factory(self, etcd_server: EtcdServer) -> CoordinatorFactory:
        return etcd_factory(etcd_server, prefix=f"t-{uuid.uuid4().hex}")

    @pytest.fixture
    def peer_factory(self, coordinator_factory: CoordinatorFactory) -> CoordinatorFactory:
        """The factory reopens this test's key prefix: another handle on the same store."""
        return coordinator_factory


def test_a_topic_written_before_configs_reads_with_none(etcd_server: EtcdServer) -> None:
    """A ``topics/<t>`` value in the shape written before topics had configs (no "configs")
    reads as a topic without configs, and can still grow and be deleted."""
    from replog.coord.etcd.client import EtcdClient, op_put

    prefix = f"t-{uuid.uuid4().hex}"
    with etcd_factory(etcd_server, prefix=prefix)() as coord:
        broker = coord.register_broker(1, "127.0.0.1", 9001, session_timeout_ms=6_000)
        ctl = coord.elect_controller(1, broker.incarnation_epoch).controller_epoch
        created = coord.create_topic("t", [[1]], controller_epoch=ctl, configs={"k": "v"})
        raw = EtcdClient([etcd_server.client_url], timeout_ms=5_000)
        try:
            old = json.dumps({"topic_id": created.topic_id, "partition_count": 1})
            raw.txn((), [op_put(f"{prefix}/topics/t", old)])
        finally:
            raw.close()
        without = attrs.evolve(created, configs=())
        assert coord.get_topic("t") == without
        assert coord.snapshot().topics == {"t": without}
        grown = coord.add_partitions("t", [[1]], controller_epoch=ctl)
        assert grown == attrs.evolve(without, replicas=((1,), (1,)))
        assert coord.get_topic("t") == grown
        assert coord.delete_topic("t", controller_epoch=ctl) == grown
