"""The coordinator contract suite against the built-in quorum (``raft://``), with one voter
and with three, every voter in this process on loopback (a fresh quorum per test)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from replog.coord import connect, registry
from replog.coord.testing import CoordinatorFactory, SecondHandleContract
from replog.quorum.client import RaftCoordinator
from replog.quorum.local import LocalQuorum

#: short timeouts: a fresh 3-voter quorum elects within about 0.2-0.4 s on loopback
FAST = {"election_timeout_ms": 150, "fetch_timeout_ms": 600, "request_timeout_ms": 600}


@pytest.fixture
def quorum_1(tmp_path: Path) -> Iterator[LocalQuorum]:
    with LocalQuorum.start(1, str(tmp_path / "quorum"), **FAST) as quorum:
        yield quorum


@pytest.fixture
def quorum_3(tmp_path: Path) -> Iterator[LocalQuorum]:
    with LocalQuorum.start(3, str(tmp_path / "quorum"), **FAST) as quorum:
        yield quorum


class TestRaftCoordinatorOneVoter(SecondHandleContract):
    """Every contract test on a single-voter quorum (it elects itself at once)."""

    @pytest.fixture
    def coordinator_factory(self, quorum_1: LocalQuorum) -> CoordinatorFactory:
        return lambda: RaftCoordinator.from_url(quorum_1.url)

    @pytest.fixture
    def peer_factory(self, coordinator_factory: CoordinatorFactory) -> CoordinatorFactory:
        return coordinator_factory


class TestRaftCoordinatorThreeVoters(SecondHandleContract):
    """Every contract test on a three-voter quorum."""

    @pytest.fixture
    def coordinator_factory(self, quorum_3: LocalQuorum) -> CoordinatorFactory:
        return lambda: RaftCoordinator.from_url(quorum_3.url)

    @pytest.fixture
    def peer_factory(self, coordinator_factory: CoordinatorFactory) -> CoordinatorFactory:
        return coordinator_factory


def test_connect_finds_the_backend_by_its_entry_point(quorum_1: LocalQuorum) -> None:
    """``raft://`` is the ``raft`` entry point of ``replog.coordinators`` (what a broker's
    ``coordinator`` setting goes through)."""
    assert "raft" in registry.known_schemes()
    coordinator = connect(quorum_1.url)
    try:
        assert isinstance(coordinator, RaftCoordinator)
        assert coordinator.list_topics() == []
    finally:
        coordinator.close()
