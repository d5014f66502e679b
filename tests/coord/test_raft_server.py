"""`QuorumServer` behaviour that needs real voters on loopback (`LocalQuorum`)."""

from __future__ import annotations

from pathlib import Path

from replog.clock import SYSTEM_CLOCK
from replog.quorum.client import RaftCoordinator
from replog.quorum.local import LocalQuorum

#: a fetch timeout far above the election timeout: a follower that is not told the leader
#: left waits this long before it stands
FETCH_TIMEOUT_MS = 5_000


def test_a_stopping_leader_hands_over_without_the_fetch_timeout(tmp_path: Path) -> None:
    """SIGTERM on the leader voter (``stop``) resigns first (E8): the others hear
    EndQuorumEpoch and elect a successor well inside their fetch timeout."""
    with LocalQuorum.start(
        3,
        str(tmp_path / "quorum"),
        election_timeout_ms=150,
        fetch_timeout_ms=FETCH_TIMEOUT_MS,
        request_timeout_ms=600,
    ) as quorum:
        leader = quorum.wait_for_leader()
        start_ms = SYSTEM_CLOCK.monotonic_ms()
        quorum.stop_node(leader)
        successor = quorum.wait_for_leader(timeout_ms=FETCH_TIMEOUT_MS // 2)
        handover_ms = SYSTEM_CLOCK.monotonic_ms() - start_ms
        assert successor != leader
        assert handover_ms < FETCH_TIMEOUT_MS // 2


def test_voters_start_again_on_their_data_after_a_stop_or_a_crash(tmp_path: Path) -> None:
    """A follower comes back as Follower of the leader it knew, which its node reports while it
    opens (before the frontend is attached); a crashed leader comes back Resigned and a sole
    voter leads again. Each serves writes afterwards."""
    with LocalQuorum.start(
        3, str(tmp_path / "three"), election_timeout_ms=150, fetch_timeout_ms=600
    ) as quorum:
        leader = quorum.wait_for_leader()
        follower = next(i for i in quorum.nodes if i != leader)
        quorum.stop_node(follower)
        quorum.start_node(follower)
        quorum.kill_node(follower)
        quorum.start_node(follower)
        quorum.kill_node(leader)
        quorum.start_node(leader)
        _write_through(quorum.url)
    with LocalQuorum.start(1, str(tmp_path / "one")) as quorum:
        _write_through(quorum.url)
        quorum.kill_node(1)
        quorum.start_node(1)
        _write_through(quorum.url)


def _write_through(url: str) -> None:
    coord = RaftCoordinator.from_url(url)
    try:
        info = coord.register_broker(1, "127.0.0.1", 9001, session_timeout_ms=10_000)
        assert coord.elect_controller(1, info.incarnation_epoch).controller_id == 1
        assert coord.unregister_broker(1, info.incarnation_epoch)
    finally:
        coord.close()
