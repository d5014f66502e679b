"""ISR states (committed vs pending) and the replica assignment, as explicit values.

Theory of operation. The coordinator stores the committed ISR with a partition epoch. A leader
that wants to change the ISR proposes it with a conditional write and, until the answer comes
back, is *pending*. While pending it uses the **maximal ISR**, the larger of the two candidate
sets, for the HW and for acks=all:

- ``PendingExpandIsr``: maximal = committed + the joining replica (it must hold the HW back at
  once, because the coordinator may already have committed it);
- ``PendingShrinkIsr``: maximal = committed (the old, larger set) until the shrink commits.

Only one change is in flight at a time. Every state is an immutable value; the partition swaps
them, so a failed transition leaves nothing half-changed.
"""

from __future__ import annotations

import attrs

from replog.errors import ErrorCode
from replog.metadata.types import AlterPartition, AlterPartitionResult

__all__ = [
    "ALTER_REJECTED",
    "ALTER_STALE",
    "Assignment",
    "CommittedIsr",
    "IsrState",
    "PendingExpandIsr",
    "PendingShrinkIsr",
    "keeps_leader",
]


@attrs.frozen
class CommittedIsr:
    """No change in flight: the ISR is what the coordinator stored."""

    isr: frozenset[int]

    @property
    def maximal_isr(self) -> frozenset[int]:
        """Same as ``isr``."""
        return self.isr

    @property
    def is_inflight(self) -> bool:
        """False: a new change may be proposed."""
        return False


@attrs.frozen
class PendingExpandIsr:
    """``joining`` was proposed for the ISR; ``isr`` is still the committed set."""

    isr: frozenset[int]
    joining: int
    request: AlterPartition
    last_committed: CommittedIsr

    @property
    def maximal_isr(self) -> frozenset[int]:
        """Committed ISR plus the joining replica."""
        return self.isr | {self.joining}

    @property
    def is_inflight(self) -> bool:
        """True: no other change until this one resolves."""
        return True


@attrs.frozen
class PendingShrinkIsr:
    """``leaving`` were proposed for removal; ``isr`` is still the committed set."""

    isr: frozenset[int]
    leaving: frozenset[int]
    request: AlterPartition
    last_committed: CommittedIsr

    @property
    def maximal_isr(self) -> frozenset[int]:
        """The committed (larger) ISR, until the shrink commits."""
        return self.isr

    @property
    def is_inflight(self) -> bool:
        """True: no other change until this one resolves."""
        return True


IsrState = CommittedIsr | PendingExpandIsr | PendingShrinkIsr


@attrs.frozen
class Assignment:
    """The assigned replicas (AR) in preference order, plus an ongoing reassignment.

    Kafka today models a reassignment as ``adding``/``removing`` sets inside ``replicas``; the
    original design's RAR (the replica set being reassigned to) is ``replicas - removing`` while
    one runs.
    """

    replicas: tuple[int, ...]
    adding: frozenset[int] = frozenset()
    removing: frozenset[int] = frozenset()

    @property
    def is_reassigning(self) -> bool:
        """True while replicas are being added or removed."""
        return bool(self.adding or self.removing)

    @property
    def target_replicas(self) -> frozenset[int]:
        """RAR: the replicas the partition is moving to (empty when not reassigning)."""
        if not self.is_reassigning:
            return frozenset()
        return frozenset(self.replicas) - self.removing

    @property
    def replication_factor(self) -> int:
        """Replicas that count toward the factor (the ones being added do not)."""
        return len(self.replicas) - len(self.adding)


#: AlterPartition errors after which the leader reverts to its last committed ISR.
ALTER_REJECTED = frozenset({ErrorCode.OPERATION_NOT_ATTEMPTED, ErrorCode.INELIGIBLE_REPLICA})
#: AlterPartition errors meaning this leader is stale: stay pending until new metadata arrives.
ALTER_STALE = frozenset(
    {
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        ErrorCode.UNKNOWN_TOPIC_ID,
        ErrorCode.FENCED_LEADER_EPOCH,
        ErrorCode.INVALID_UPDATE_VERSION,
        ErrorCode.INVALID_REQUEST,
        ErrorCode.NEW_LEADER_ELECTED,
    }
)


def keeps_leader(
    result: AlterPartitionResult,
    leader: int,
    leader_epoch: int,
    partition_epoch: int,
    replicas: tuple[int, ...],
) -> bool:
    """A refused proposal's ``result`` is a newer state of the partition (a higher partition
    epoch, at the same leader epoch) that keeps ``leader`` leading: it can be committed as
    metadata would bring it, and the proposal made again on it at once."""
    isr = frozenset(result.isr)
    return (
        (result.leader, result.leader_epoch) == (leader, leader_epoch)
        and result.partition_epoch > partition_epoch
        and {leader} <= isr <= set(replicas)
    )
