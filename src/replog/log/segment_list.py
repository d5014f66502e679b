"""`SegmentList`: a log's segments in base-offset order, the lookups over them, and the
changes a log makes to the list (roll, truncation, retention, a cleaner's swap).

Theory of operation. Each segment holds the offsets from its base offset up to the next one's
(the last, the *active* segment, up to the log end offset): so the segment holding an offset is
the one with the largest base at or below it, and a segment's end is the next base. Offsets
below the first base are held by no segment; lookups for them answer the first segment, which
is what every reader of the list wants (a read, a replay or a flush starts there). The list is
never empty once a log is open (an active segment always remains).

Removing a segment from the list and deleting its files go together, in base-offset order, and
the list changes first: an IO error half way leaves the list naming only segments whose files
are still there. `PendingFlush` is a flush of some of the list's segments, captured on the
thread that appends and run on any other.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping

import attrs
from sortedcontainers import SortedDict

from replog.errors import StorageError, invariant
from replog.log.segment import LogSegment

__all__ = ["PendingFlush", "SegmentList"]


class SegmentList(Mapping[int, LogSegment]):
    """Base offset -> `LogSegment`, in offset order (see the module docstring). Read as a
    mapping; change only through the methods below."""

    __slots__ = ("_by_base", "active")

    def __init__(self, segments: Iterable[LogSegment]) -> None:
        self._by_base = SortedDict({segment.base_offset: segment for segment in segments})
        invariant(bool(self._by_base), "a log has at least one segment")
        #: the segment appends go to (the last one); an attribute, read on every append
        self.active: LogSegment = self._by_base.peekitem(-1)[1]

    # -- the mapping ------------------------------------------------------------------------

    def __getitem__(self, base_offset: int) -> LogSegment:
        segment: LogSegment = self._by_base[base_offset]
        return segment

    def __iter__(self) -> Iterator[int]:
        return iter(self._by_base)

    def __len__(self) -> int:
        return len(self._by_base)

    # -- lookups ----------------------------------------------------------------------------

    @property
    def first_base(self) -> int:
        """The base offset of the oldest segment."""
        return int(self._by_base.keys()[0])

    @property
    def size_bytes(self) -> int:
        """Bytes across all segments."""
        return sum(segment.size_bytes for segment in self._by_base.values())

    def floor_base(self, offset: int) -> int:
        """The base offset of the segment holding ``offset`` (the first one if it is below
        all)."""
        return int(self._by_base.keys()[self._floor_index(offset)])

    def next_base(self, base_offset: int) -> int | None:
        """The base offset of the segment after the one at ``base_offset`` (None for the
        active segment)."""
        index = self._by_base.bisect_right(base_offset)
        return int(self._by_base.keys()[index]) if index < len(self._by_base) else None

    def end_of(self, base_offset: int, log_end_offset: int) -> int:
        """Where the offsets of the segment at ``base_offset`` end: the next base offset, or
        ``log_end_offset`` for the active segment."""
        following = self.next_base(base_offset)
        return log_end_offset if following is None else following

    def ends(self, log_end_offset: int) -> dict[int, int]:
        """Base offset -> where that segment's offsets end (the next base, or the LEO)."""
        bases = list(self._by_base)
        return dict(zip(bases, [*bases[1:], log_end_offset], strict=True))

    def from_offset(self, offset: int) -> list[LogSegment]:
        """The segment holding ``offset`` (the first one if it is below all) and every later
        one, in order."""
        segments: list[LogSegment] = self._by_base.values()[self._floor_index(offset) :]
        return segments

    def walk_from(self, offset: int) -> Iterator[tuple[LogSegment, int | None]]:
        """The segment holding ``offset`` (the first one if it is below all) and each later one,
        lazily, with the base offset of the segment after it (None for the active segment): a
        read that ends in the first segment, as most do, costs one bisection, not a copy of the
        list."""
        keys, values = self._by_base.keys(), self._by_base.values()
        count = len(keys)
        for index in range(self._floor_index(offset), count):
            following = int(keys[index + 1]) if index + 1 < count else None
            yield values[index], following

    def _floor_index(self, offset: int) -> int:
        index: int = self._by_base.bisect_right(offset) - 1
        return max(index, 0)

    # -- changes ----------------------------------------------------------------------------

    def add(self, segment: LogSegment) -> None:
        """Put ``segment`` in the list (a rolled, recreated or cleaned segment); one after
        every other becomes the active one."""
        self._by_base[segment.base_offset] = segment
        self.active = self._by_base.peekitem(-1)[1]

    def remove(self, base_offset: int) -> LogSegment:
        """Take the segment at ``base_offset`` out of the list (its files stay: the caller
        deletes them, as a cleaner's swap does between its renames)."""
        segment: LogSegment = self._by_base.pop(base_offset)
        if self._by_base:
            self.active = self._by_base.peekitem(-1)[1]
        return segment

    def delete_above(self, offset: int) -> None:
        """Remove and delete every segment whose base offset is above ``offset`` (truncation:
        the segment holding ``offset`` stays)."""
        for base in list(self._by_base.irange(minimum=offset, inclusive=(False, True))):
            self.remove(base).delete()

    def delete_oldest(self, count: int) -> list[int]:
        """Remove and delete the ``count`` oldest segments (retention, which leaves at least
        one); returns their base offsets."""
        invariant(count < len(self._by_base), f"retention of all {count} segments")
        bases = [int(base) for base in self._by_base.keys()[:count]]
        for base in bases:
            self.remove(base).delete()
        return bases

    def delete_all(self) -> None:
        """Remove and delete every segment (a full truncation, which then `add`s the segment
        the log restarts with: the list is empty only in between)."""
        for base in list(self._by_base):
            self._by_base.pop(base).delete()

    def set_gaps_below(self, offset: int) -> None:
        """Tell every segment that offsets below ``offset`` may be missing (the clean offset)."""
        for segment in self._by_base.values():
            segment.gaps_below = offset

    def flush_from(self, offset: int, target_offset: int) -> PendingFlush:
        """A flush of the segment holding ``offset`` (the recovery point) and every later one,
        which makes the log durable below ``target_offset`` once it has run."""
        return PendingFlush(target_offset, self.from_offset(offset))

    def close_all(self, *, trim: bool) -> OSError | StorageError | None:
        """Close every segment, trimming indexes while ``trim`` holds and no close has failed
        (after a failure the rest only release their descriptors); returns the first error
        (every segment is closed regardless)."""
        failure: OSError | StorageError | None = None
        for segment in self._by_base.values():
            try:
                if trim and failure is None:
                    segment.close()
                else:
                    segment.close_without_trim()
            except (OSError, StorageError) as exc:
                failure = failure or exc
                try:
                    segment.close_without_trim()
                except OSError:
                    pass  # the descriptor is gone either way; the first error is reported
        return failure

    def abandon_all(self) -> None:
        """Release every segment's descriptors without writing anything (a simulated crash)."""
        for segment in self._by_base.values():
            try:
                segment.close_without_trim()
            except OSError:
                pass  # nothing was to be written; a descriptor that will not close is dropped

    def __repr__(self) -> str:
        return f"SegmentList({list(self._by_base)})"


@attrs.define(eq=False)
class PendingFlush:
    """A flush split in two so the fsyncs can run on a worker thread (group commit): every
    batch appended before `Log.begin_flush` is durable once `run` returns."""

    target_offset: int
    segments: list[LogSegment]

    def run(self) -> None:
        """fsync the segments (thread-safe: touches only file descriptors). `StorageError` if
        one fails; the caller takes the log offline (`Log.mark_offline`)."""
        for segment in self.segments:
            try:
                segment.flush()
            except OSError as exc:
                raise StorageError(f"fsync of {segment!r} failed: {exc}", segment.dir_path) from exc
