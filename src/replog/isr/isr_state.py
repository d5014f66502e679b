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

from replog.coord.types import AlterPartition

__all__ = [
    "Assignment",
    "CommittedIsr",
    "IsrState",
    "PendingExpandIsr",
    "PendingShrinkIsr",
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
    seeds' RAR (the replica set being reassigned to) is ``replicas - removing`` while one runs.
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
