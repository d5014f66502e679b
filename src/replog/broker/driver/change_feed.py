"""Which partitions changed since a point: ``ChangeFeed``.

The replica manager notes every partition whose data, role or HW changes (``note``), and
``note_all`` when any partition may have changed (retention moved log starts, a new metadata
image). A reader keeps the ``seq`` it last looked at and asks ``since(seq)`` for what changed
after it: the set of partitions, or None when it must assume every partition changed (a
``note_all`` after ``seq``, or ``seq`` so old its entries were dropped). Entries are a bounded
list, so a reader that looks rarely pays with a full read, never with a missed change.

An incremental fetch session (``replog.broker.driver.fetch_session_cache``) reads through it
only the partitions that can have something new, so idle partitions cost nothing per fetch.
"""

from __future__ import annotations

from replog.topics import TopicPartition

__all__ = ["ChangeFeed"]

#: Entries kept; past this the older half is dropped (a reader that far behind reads all).
_KEEP = 1 << 15


class ChangeFeed:
    """See the module docstring."""

    def __init__(self, keep: int = _KEEP) -> None:
        if keep < 2:
            raise ValueError(f"a change feed keeps at least 2 entries, got {keep}")
        self._keep = keep
        self._entries: list[TopicPartition] = []
        self._base = 0  # the seq of _entries[0]
        self._all_at = 0  # the seq of the last note_all

    @property
    def seq(self) -> int:
        """The position after the last change."""
        return self._base + len(self._entries)

    def note(self, tp: TopicPartition) -> None:
        """``tp`` changed."""
        entries = self._entries
        entries.append(tp)
        if len(entries) > self._keep:
            drop = len(entries) // 2
            del entries[:drop]
            self._base += drop

    def note_all(self) -> None:
        """Any partition may have changed."""
        self.note(TopicPartition("", -1))  # a position of its own, so since(seq) sees it
        self._all_at = self.seq

    def since(self, seq: int) -> set[TopicPartition] | None:
        """The partitions that changed after ``seq`` (None: assume all of them)."""
        if seq < self._all_at or seq < self._base:
            return None
        return set(self._entries[seq - self._base :])
