"""`QuorumServer` behaviour that needs real voters on loopback (`LocalQuorum`)."""

from __future__ import annotations

from pathlib import Path

from replog.clock import SYSTEM_CLOCK
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
