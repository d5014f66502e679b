"""pytest fixtures for the etcd backend tests: one shared etcd per test session (tests isolate
themselves by key prefix) and a dedicated server per fault test."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

pytest.importorskip("httpx")

from replog.coord.etcd import EtcdCoordinator
from tests.servers_etcd import EtcdServer, require_etcd, start_etcd

__all__ = ["etcd_server", "dedicated_etcd", "etcd_factory"]


@pytest.fixture(scope="session")
def etcd_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EtcdServer]:
    """One etcd for the whole session (contract tests use a fresh key prefix each)."""
    require_etcd()
    server = start_etcd(tmp_path_factory.mktemp("etcd-shared"))
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def dedicated_etcd(tmp_path: Path) -> Iterator[EtcdServer]:
    """A server of this test's own, for faults (kill -9, SIGSTOP); always resumed and stopped."""
    require_etcd()
    server = start_etcd(tmp_path / "etcd")
    try:
        yield server
    finally:
        server.resume()
        server.stop()


def etcd_factory(
    server: EtcdServer, prefix: str | None = None, **options: object
) -> Callable[[], EtcdCoordinator]:
    """Open coordinators on ``server``, each under a fresh key prefix, or all under ``prefix``
    (handles on one store)."""
    host_port = server.client_url.removeprefix("http://")

    def make() -> EtcdCoordinator:
        key_prefix = prefix or f"t-{uuid.uuid4().hex}"
        return EtcdCoordinator.from_url(f"etcd://{host_port}/{key_prefix}", **options)

    return make
