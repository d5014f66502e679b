"""The coordinator contract suite against a real etcd (the JSON-gateway backend)."""

from __future__ import annotations

import pytest

from replog.coord.testing import CoordinatorContract, CoordinatorFactory
from tests.coord.etcd_fixtures import etcd_factory, etcd_server
from tests.servers_etcd import EtcdServer

__all__ = ["etcd_server"]  # the fixture, re-exported so pytest finds it here


class TestEtcdCoordinator(CoordinatorContract):
    """Every contract test on one shared etcd, a fresh key prefix per test. Session faults:
    expire = lease revoke; suspend/resume = stop renewing the lease and refuse calls."""

    @pytest.fixture
    def coordinator_factory(self, etcd_server: EtcdServer) -> CoordinatorFactory:
        return etcd_factory(etcd_server)
