"""ZooKeeper fixtures for the coordinator tests: one shared server per session (each test gets
its own chroot) and a dedicated server per fault test. The etcd fixtures live in their module."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.servers import ZkServer, require_zookeeper, start_zookeeper


@pytest.fixture(scope="session")
def zk_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ZkServer]:
    """A standalone ZooKeeper shared by the whole session (never faulted)."""
    require_zookeeper()
    pytest.importorskip("kazoo.client")
    server = start_zookeeper(tmp_path_factory.mktemp("zk-shared"))
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def zk_chroot() -> str:
    """A chroot no other test uses."""
    return f"/t-{uuid.uuid4().hex[:12]}"


@pytest.fixture
def zk_dedicated(tmp_path: Path) -> Iterator[ZkServer]:
    """A ZooKeeper for one fault test (kill -9, SIGSTOP); always resumed and stopped."""
    require_zookeeper()
    pytest.importorskip("kazoo.client")
    server = start_zookeeper(tmp_path / "zk")
    try:
        yield server
    finally:
        server.resume()
        server.stop()
