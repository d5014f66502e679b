"""The in-process store of feed records, kept by the memory backend and by the raft quorum's
state machine (the clocks are ``replog.clock``'s, re-exported here).

``FeedLog`` assigns seqs (1, 2, 3, ... per atomic write), keeps the newest ``retention_max``
records in whole seq groups, and remembers the trim boundary: every record with a seq below
``trimmed_before`` is gone, so a reader asking for one must resync.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Sequence

from replog.clock import ManualClock, monotonic_ms
from replog.coord.errors import MustResyncError
from replog.errors import invariant
from replog.metadata.types import ChangeBatch, MetadataChange

__all__ = ["FeedLog", "ManualClock", "monotonic_ms"]


def _seq(change: MetadataChange) -> int:
    return change.seq


class FeedLog:
    """Retained feed records (not thread-safe: the backend's lock guards it)."""

    def __init__(self, retention_max: int) -> None:
        invariant(retention_max >= 1, "a feed keeps at least one record")
        self._retention_max = retention_max
        self._records: list[MetadataChange] = []
        self.next_seq = 1
        self.trimmed_before = 0

    def append(self, build: Callable[[int], Sequence[MetadataChange]]) -> ChangeBatch:
        """Record one atomic write: ``build(seq)`` makes its records. Returns them as a batch."""
        seq = self.next_seq
        self.next_seq += 1
        changes = tuple(build(seq))
        invariant(all(c.seq == seq for c in changes), "records of one write share its seq")
        self._records.extend(changes)
        if len(self._records) > self._retention_max:
            self.trim(self._records[len(self._records) - self._retention_max].seq)
        return ChangeBatch(changes, seq + 1)

    def read(self, seq: int, max_changes: int) -> ChangeBatch:
        """Records with seq >= ``seq``, about ``max_changes`` of them, never splitting a group."""
        if seq < self.trimmed_before:
            raise MustResyncError(seq, self.trimmed_before)
        start = bisect.bisect_left(self._records, seq, key=_seq)
        end = min(start + max_changes, len(self._records))
        while end < len(self._records) and self._records[end].seq == self._records[end - 1].seq:
            end += 1
        changes = tuple(self._records[start:end])
        return ChangeBatch(changes, changes[-1].seq + 1 if changes else seq)

    def tail(self, seq: int) -> tuple[MetadataChange, ...]:
        """Every retained record with seq >= ``seq`` (the caller checked ``trimmed_before``)."""
        return tuple(self._records[bisect.bisect_left(self._records, seq, key=_seq) :])

    def trim(self, before_seq: int) -> int:
        """Drop records with seq < ``before_seq`` (at most up to ``next_seq``); return the
        new boundary."""
        before_seq = min(before_seq, self.next_seq)
        del self._records[: bisect.bisect_left(self._records, before_seq, key=_seq)]
        self.trimmed_before = max(self.trimmed_before, before_seq)
        return self.trimmed_before
