"""Volatile bookkeeping of the core's roles: a leader's view of its voters, a follower's
snapshot download. Nothing here is persisted; a role change throws it away.

`LeaderProgress` answers the leader's three questions:

- which offset a majority of voters hold (the high watermark candidate, KRaft rule F3 in
  ``core.py``): the leader counts its own *flushed* offset, every other voter the fetch offset
  of its last valid fetch in this epoch (-1 until it fetched);
- whether a majority fetched within the check-quorum timeout (KIP-595 / KAFKA-15489): every
  Fetch or FetchSnapshot from a voter marks it; once the marked voters and the leader make a
  majority, the marks are cleared and the deadline moves on;
- which voters have not acknowledged the new epoch (answered BeginQuorumEpoch or fetched):
  they get BeginQuorumEpoch again every ``fetch_timeout_ms / 2``.
"""

from __future__ import annotations

import attrs

from replog.errors import invariant
from replog.raft.messages import RaftSnapshotId

__all__ = ["LeaderProgress", "ReplicaProgress", "SnapshotDownload"]


@attrs.define
class ReplicaProgress:
    """What the leader knows of one other voter in this epoch; the two times (the core's
    ``now_ms``, -1 until known) are what DescribeQuorum reports."""

    end_offset: int = -1
    acknowledged: bool = False
    last_fetch_ms: int = -1
    last_caught_up_ms: int = -1


@attrs.define
class LeaderProgress:
    """The leader's per-voter state (see the module docstring)."""

    local_id: int
    majority: int
    check_quorum_timeout_ms: int
    replicas: dict[int, ReplicaProgress]
    check_quorum_deadline_ms: int
    next_begin_quorum_ms: int
    fetched_voters: set[int] = attrs.field(factory=set)

    @classmethod
    def start(
        cls, local_id: int, voters: frozenset[int], check_quorum_timeout_ms: int, now_ms: int
    ) -> LeaderProgress:
        """Progress of a leader elected at ``now_ms``: nobody has fetched yet."""
        return cls(
            local_id=local_id,
            majority=len(voters) // 2 + 1,
            check_quorum_timeout_ms=check_quorum_timeout_ms,
            replicas={v: ReplicaProgress() for v in sorted(voters) if v != local_id},
            check_quorum_deadline_ms=now_ms + check_quorum_timeout_ms,
            next_begin_quorum_ms=now_ms,
        )

    def on_contact(self, voter_id: int, now_ms: int) -> None:
        """``voter_id`` sent a Fetch or FetchSnapshot in this epoch (it is alive and follows)."""
        replica = self.replicas.get(voter_id)
        if replica is None:
            return
        replica.acknowledged = True
        replica.last_fetch_ms = now_ms
        self.fetched_voters.add(voter_id)
        if len(self.fetched_voters) + 1 >= self.majority:
            self.fetched_voters.clear()
            self.check_quorum_deadline_ms = now_ms + self.check_quorum_timeout_ms

    def on_acknowledged(self, voter_id: int) -> None:
        """``voter_id`` answered BeginQuorumEpoch for this epoch."""
        replica = self.replicas.get(voter_id)
        if replica is not None:
            replica.acknowledged = True

    def on_valid_fetch(
        self, voter_id: int, fetch_offset: int, *, leader_end_offset: int, now_ms: int
    ) -> None:
        """A fetch that passed the divergence check: the voter's log matches ours below
        ``fetch_offset`` and is durable there (caught up if that is the leader's log end)."""
        replica = self.replicas.get(voter_id)
        if replica is not None:
            replica.end_offset = fetch_offset
            if fetch_offset >= leader_end_offset:
                replica.last_caught_up_ms = now_ms

    def majority_end_offset(self, own_flushed_offset: int) -> int:
        """The largest offset that a majority of voters (this leader included, counted at its
        flushed offset) have reached; -1 if no majority has fetched yet."""
        ends = sorted(
            [own_flushed_offset, *(r.end_offset for r in self.replicas.values())], reverse=True
        )
        invariant(len(ends) >= self.majority, f"{len(ends)} voters, majority {self.majority}")
        return ends[self.majority - 1]

    def check_quorum_expired(self, now_ms: int) -> bool:
        """True if a majority has not fetched within the check-quorum timeout (never for a
        single voter)."""
        return self.majority > 1 and now_ms >= self.check_quorum_deadline_ms

    def unacknowledged(self) -> list[int]:
        """Voters that have not acknowledged this leader yet."""
        return [v for v, r in self.replicas.items() if not r.acknowledged]

    def successors(self) -> tuple[int, ...]:
        """Other voters, the most caught up first (the order a resigning leader suggests)."""
        return tuple(sorted(self.replicas, key=lambda v: (-self.replicas[v].end_offset, v)))


@attrs.define
class SnapshotDownload:
    """A follower fetching ``snapshot_id`` chunk by chunk; ``position`` bytes are written."""

    snapshot_id: RaftSnapshotId
    position: int = 0
    sent_ms: int | None = None
