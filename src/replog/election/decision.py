"""``Decision``: what every election decision returns.

A decision is a pair ``(outcome, state_changes)``: the outcome is either the next
``PartitionRegistration`` (for the driver to write with compare-and-set on the partition epoch) or
an ``ErrorCode`` (nothing to write). A decision that changes nothing returns the *current*
registration, identical epochs included, and no state changes: the driver writes nothing.
"""

from __future__ import annotations

from typing import NamedTuple

from replog.election.state import PartitionRegistration
from replog.election.state_change import StateChange
from replog.errors import ErrorCode, unreachable

__all__ = ["Decision"]


class Decision(NamedTuple):
    """``(outcome, state_changes)``; unpack it or use the named accessors."""

    outcome: PartitionRegistration | ErrorCode
    state_changes: list[StateChange]

    @property
    def ok(self) -> bool:
        """True when the outcome is a registration (changed or not)."""
        return isinstance(self.outcome, PartitionRegistration)

    @property
    def error(self) -> ErrorCode:
        """The error code, or ``ErrorCode.NONE`` when the outcome is a registration."""
        return ErrorCode.NONE if isinstance(self.outcome, PartitionRegistration) else self.outcome

    @property
    def registration(self) -> PartitionRegistration:
        """The resulting registration; asking for it on an error outcome is a bug."""
        if isinstance(self.outcome, PartitionRegistration):
            return self.outcome
        unreachable(f"decision failed with {self.outcome.name}; it has no registration")

    def changed(self, current: PartitionRegistration) -> bool:
        """Whether the driver has something to write: a registration other than ``current``."""
        return self.ok and self.registration != current
