"""Time index (``.timeindex``): maps timestamps in a segment to offsets (Kafka's format).

Byte layout: a headerless array of 12-byte entries, both fields big-endian::

    0               8       12
    +---------------+-------+
    | timestamp     | rel   |   timestamp: int64 ms; rel = offset - base_offset (int32, >= 0)
    +---------------+-------+

Entry ``(T, O)`` means "the largest timestamp seen before offset ``O`` is ``T``", so every record
with a timestamp above ``T`` comes after ``O``. Timestamps strictly increase along the file and
offsets never decrease. The segment appends ``(max timestamp so far, its offset)`` next to each
offset-index entry, and once more when it becomes inactive or closes. That last append may use the
one slot ``is_full`` keeps in reserve.
"""

from __future__ import annotations

import struct
from typing import ClassVar, NamedTuple

import attrs
import numpy as np

from replog.errors import CorruptIndexError, InvalidOffsetError, invariant
from replog.log.fs import FileSystem
from replog.log.index_base import (
    WARM_SECTION_BYTES,
    IndexBase,
    IndexField,
    IndexFullError,
    check_layout,
)
from replog.log.records import NO_TIMESTAMP

__all__ = ["TIME_INDEX_ENTRY", "TimeIndex", "TimestampOffset"]

TIME_INDEX_ENTRY = np.dtype([("timestamp", ">i8"), ("relative_offset", ">i4")])
_ENTRY_CODEC = struct.Struct(">qi")
_TIMESTAMP = IndexField("timestamp", 0, struct.Struct(">q"))
_RELATIVE_OFFSET = IndexField("relative_offset", 8, struct.Struct(">i"))
invariant(TIME_INDEX_ENTRY.itemsize == 12, "time index entries are 12 bytes")
check_layout(TIME_INDEX_ENTRY, _ENTRY_CODEC, _TIMESTAMP, _RELATIVE_OFFSET)


class TimestampOffset(NamedTuple):
    """A timestamp and the offset at which the log had reached it."""

    timestamp: int
    offset: int


@attrs.define(eq=False)
class TimeIndex(IndexBase):
    """A segment's sparse timestamp -> offset index on a memory-mapped file."""

    ENTRY: ClassVar[np.dtype[np.void]] = TIME_INDEX_ENTRY
    ENTRY_CODEC: ClassVar[struct.Struct] = _ENTRY_CODEC
    ENTRY_SIZE: ClassVar[int] = 12
    WARM_ENTRIES: ClassVar[int] = WARM_SECTION_BYTES // 12  # 682
    KEY: ClassVar[IndexField] = _TIMESTAMP
    VALUE: ClassVar[IndexField] = _RELATIVE_OFFSET
    OFFSET_FIELD: ClassVar[IndexField] = _RELATIVE_OFFSET
    EMPTY_LAST_RAW: ClassVar[tuple[int, int]] = (NO_TIMESTAMP, 0)  # (NO_TIMESTAMP, base_offset)

    @classmethod
    def open(
        cls,
        fs: FileSystem,
        path: str,
        base_offset: int,
        max_index_size_bytes: int,
        *,
        writable: bool = True,
    ) -> TimeIndex:
        """Open ``path``, or create it preallocated to ``max_index_size_bytes`` (rounded down to
        whole entries). An existing file counts all its whole entries as in use and must pass
        ``sanity_check`` (else ``CorruptIndexError``)."""
        return cls._open_file(fs, path, base_offset, max_index_size_bytes, writable)

    @property
    def is_full(self) -> bool:
        """Whether only the reserved slot is left. The segment must roll; the final entry it
        writes on becoming inactive (``skip_full_check=True``) still fits."""
        return self._entries >= self.max_entries - 1

    @property
    def last_entry(self) -> TimestampOffset:
        """The last entry, or ``(NO_TIMESTAMP, base_offset)`` when the index is empty."""
        return TimestampOffset(self._last_key, self._base_offset + self._last_value)

    def maybe_append(self, timestamp: int, offset: int, skip_full_check: bool = False) -> bool:
        """Add ``(timestamp, offset)`` if ``timestamp`` is above the last entry's; return whether
        an entry was written.

        An equal timestamp (such as the segment re-appending its last entry on roll or close) is
        ignored. Raises ``IndexFullError`` if full (or, with ``skip_full_check``, if not even the
        reserved slot is free) and ``InvalidOffsetError`` if ``offset`` is below the last
        entry's or does not fit int32 relative to the base offset. A timestamp below the last
        one is a caller bug (the segment passes its running maximum): ``InvariantError``.
        """
        self._check_writable()
        entries = self._entries
        if (not skip_full_check and self.is_full) or entries >= self.max_entries:
            raise IndexFullError(self._path, entries)
        last_timestamp, last_relative = self._last_key, self._last_value
        if entries and offset < self._base_offset + last_relative:
            raise InvalidOffsetError(
                f"{self._path}: offset {offset} is below the last time-indexed offset "
                f"{self._base_offset + last_relative}"
            )
        invariant(
            not entries or timestamp >= last_timestamp,
            f"{self._path}: timestamp {timestamp} is below the last indexed {last_timestamp}",
        )
        if timestamp <= last_timestamp:
            return False
        self._write_entry(timestamp, self._relative_offset(offset))
        return True

    def lookup(self, target_timestamp: int) -> TimestampOffset:
        """The entry with the largest timestamp <= ``target_timestamp``, or
        ``(NO_TIMESTAMP, base_offset)`` when there is none."""
        if self._entries and target_timestamp >= self._last_key:
            # Timestamps strictly increase, so the answer is the cached last entry.
            return TimestampOffset(self._last_key, self._base_offset + self._last_value)
        slot = self._slot_for(target_timestamp, _TIMESTAMP, smallest_upper_bound=False)
        if slot < 0:
            return TimestampOffset(NO_TIMESTAMP, self._base_offset)
        return self.entry(slot)

    def entry(self, n: int) -> TimestampOffset:
        """The ``n``-th entry, 0-based; ``n`` must be below ``entries``."""
        timestamp, relative = self._raw_entry(n)
        return TimestampOffset(timestamp, self._base_offset + relative)

    def find_bad_entries(self, end_offset: int | None) -> str | None:
        """Why the entries cannot be right, or None (checked once, at first use, as for the
        offset index): timestamps strictly increase, offsets never decrease and lie inside the
        segment's range (below ``end_offset``, the next segment's base, if known)."""
        if not self._entries:
            return None
        timestamp, relative = self._columns()
        if relative[0] < 0:
            return f"first offset {self._base_offset + relative[0]} is below the base offset"
        if self._entries > 1 and (np.diff(timestamp) <= 0).any():
            return "timestamps do not strictly increase"
        if self._entries > 1 and (np.diff(relative) < 0).any():
            return "offsets decrease"
        if end_offset is not None and self._base_offset + relative[-1] >= end_offset:
            return f"offset {self._base_offset + relative[-1]} is past the segment end {end_offset}"
        return None

    def sanity_check(self) -> None:
        """Raise ``CorruptIndexError`` if the last timestamp is below the first, the last offset
        is below the base offset, or the file length is not a whole number of entries. This is
        Kafka's O(1) check, not a scan: after a crash the segment is rebuilt regardless."""
        if self._entries:
            first_timestamp = self._raw_entry(0)[0]
            if self._last_key < first_timestamp:
                raise CorruptIndexError(
                    f"{self._path}: last timestamp {self._last_key} is below the first "
                    f"{first_timestamp} ({self._entries} entries)"
                )
            if self._last_value < 0:
                raise CorruptIndexError(
                    f"{self._path}: last offset {self._base_offset + self._last_value} is below "
                    f"the base offset {self._base_offset}"
                )
        super().sanity_check()
