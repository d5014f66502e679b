"""Offset index (``.index``): maps offsets in a segment to byte positions in its ``.log``.

Byte layout: a headerless array of 8-byte entries, both fields big-endian::

    0       4       8
    +-------+-------+
    | rel   | pos   |   rel = offset - base_offset (int32, >= 0), pos = position in .log (int32)
    +-------+-------+

The index is sparse: the segment adds an entry about every ``index.interval.bytes`` of log, for
the last offset of the batch that starts at ``pos``. Offsets strictly increase along the file, and
so do positions. ``lookup(o)`` gives the entry with the largest offset <= ``o``, where a reader
starts scanning the log for ``o``.
"""

from __future__ import annotations

import struct
from typing import ClassVar, NamedTuple

import attrs
import numpy as np

from replog.errors import CorruptIndexError, InvalidOffsetError, invariant
from replog.log.fs import FileSystem
from replog.log.index_base import (
    INT32_MAX,
    WARM_SECTION_BYTES,
    IndexBase,
    IndexField,
    IndexFullError,
    check_layout,
)
from replog.log.records import RECORD_BATCH_OVERHEAD

__all__ = ["OFFSET_INDEX_ENTRY", "OffsetIndex", "OffsetPosition"]

OFFSET_INDEX_ENTRY = np.dtype([("relative_offset", ">i4"), ("position", ">i4")])
_ENTRY_CODEC = struct.Struct(">ii")
_RELATIVE_OFFSET = IndexField("relative_offset", 0, struct.Struct(">i"))
_POSITION = IndexField("position", 4, struct.Struct(">i"))
invariant(OFFSET_INDEX_ENTRY.itemsize == 8, "offset index entries are 8 bytes")
check_layout(OFFSET_INDEX_ENTRY, _ENTRY_CODEC, _RELATIVE_OFFSET, _POSITION)


class OffsetPosition(NamedTuple):
    """An offset and the byte position in the ``.log`` where its batch starts."""

    offset: int
    position: int


@attrs.define(eq=False)
class OffsetIndex(IndexBase):
    """A segment's sparse offset -> position index on a memory-mapped file."""

    ENTRY: ClassVar[np.dtype[np.void]] = OFFSET_INDEX_ENTRY
    ENTRY_CODEC: ClassVar[struct.Struct] = _ENTRY_CODEC
    ENTRY_SIZE: ClassVar[int] = 8
    WARM_ENTRIES: ClassVar[int] = WARM_SECTION_BYTES // 8  # 1024
    KEY: ClassVar[IndexField] = _RELATIVE_OFFSET
    VALUE: ClassVar[IndexField] = _POSITION
    OFFSET_FIELD: ClassVar[IndexField] = _RELATIVE_OFFSET
    EMPTY_LAST_RAW: ClassVar[tuple[int, int]] = (0, 0)  # reads as (base_offset, 0)

    @classmethod
    def open(
        cls,
        fs: FileSystem,
        path: str,
        base_offset: int,
        max_index_size_bytes: int,
        *,
        writable: bool = True,
    ) -> OffsetIndex:
        """Open ``path``, or create it preallocated to ``max_index_size_bytes`` (rounded down to
        whole entries). An existing file counts all its whole entries as in use and must pass
        ``sanity_check`` (else ``CorruptIndexError``)."""
        return cls._open_file(fs, path, base_offset, max_index_size_bytes, writable)

    @property
    def last_offset(self) -> int:
        """The offset of the last entry, or ``base_offset`` when the index is empty."""
        return self._base_offset + self._last_key

    @property
    def last_entry(self) -> OffsetPosition:
        """The last entry, or ``(base_offset, 0)`` when the index is empty."""
        return OffsetPosition(self._base_offset + self._last_key, self._last_value)

    def append(self, offset: int, position: int) -> None:
        """Add an entry for ``offset`` at byte ``position``.

        Raises ``IndexFullError`` if no slot is free, and ``InvalidOffsetError`` if ``offset``
        is not above the last entry's offset or does not fit int32 relative to the base offset.
        """
        self._check_writable()
        if self.is_full:
            raise IndexFullError(self._path, self._entries)
        if self._entries and offset <= self.last_offset:
            raise InvalidOffsetError(
                f"{self._path}: offset {offset} is not above the last indexed offset "
                f"{self.last_offset}"
            )
        relative = self._relative_offset(offset)
        invariant(0 <= position <= INT32_MAX, f"{self._path}: position {position} not int32")
        invariant(
            not self._entries or position >= self._last_value,
            f"{self._path}: position {position} before the last indexed {self._last_value}",
        )
        self._write_entry(relative, position)

    def lookup(self, target_offset: int) -> OffsetPosition:
        """The entry with the largest offset <= ``target_offset``, or ``(base_offset, 0)``."""
        relative = target_offset - self._base_offset
        if self._entries and relative >= self._last_key:
            # The common read is at the tail. Offsets strictly increase, so the answer is the
            # last entry, which is cached as ints: no search and no read of the mapping.
            return OffsetPosition(self._base_offset + self._last_key, self._last_value)
        slot = self._slot_for(relative, _RELATIVE_OFFSET, smallest_upper_bound=False)
        if slot < 0:
            return OffsetPosition(self._base_offset, 0)
        return self.entry(slot)

    def fetch_upper_bound_offset(
        self, start_position: int, fetch_size_bytes: int
    ) -> OffsetPosition | None:
        """The first entry at or after byte ``start_position + fetch_size_bytes``, or None.

        A reader fetching ``fetch_size_bytes`` from ``start_position`` need not look past it.
        """
        target = start_position + fetch_size_bytes
        slot = self._slot_for(target, _POSITION, smallest_upper_bound=True)
        return None if slot < 0 else self.entry(slot)

    def entry(self, n: int) -> OffsetPosition:
        """The ``n``-th entry, 0-based; ``n`` must be below ``entries``."""
        relative, position = self._raw_entry(n)
        return OffsetPosition(self._base_offset + relative, position)

    def find_bad_entries(self, log_size_bytes: int, end_offset: int | None) -> str | None:
        """Why the entries cannot be right, or None. Kafka only runs `sanity_check` and trusts
        the rest; replog checks every entry once, when the index is first used, because a junk
        entry would send a read to a negative or wrong file position: offsets and positions
        strictly increase, positions lie inside the ``.log`` (``log_size_bytes``), and offsets
        inside the segment's range (below ``end_offset``, the next segment's base, if known)."""
        if not self._entries:
            return None
        relative, position = self._columns()
        if relative[0] < 0 or position[0] < 0:
            return f"first entry ({relative[0]}, {position[0]}) is negative"
        if self._entries > 1 and (np.diff(relative) <= 0).any():
            return "offsets do not strictly increase"
        if self._entries > 1 and (np.diff(position) <= 0).any():
            return "positions do not strictly increase"
        if position[-1] > log_size_bytes - RECORD_BATCH_OVERHEAD:
            return f"position {position[-1]} is past the last batch of a {log_size_bytes}-byte log"
        if end_offset is not None and self._base_offset + relative[-1] >= end_offset:
            return f"offset {self._base_offset + relative[-1]} is past the segment end {end_offset}"
        return None

    def sanity_check(self) -> None:
        """Raise ``CorruptIndexError`` if the last offset is below the base offset or the file
        length is not a whole number of entries (Kafka's O(1) check, not a full scan)."""
        if self._entries and self._last_key < 0:
            raise CorruptIndexError(
                f"{self._path}: last offset {self.last_offset} is below the base offset "
                f"{self._base_offset} ({self._entries} entries)"
            )
        super().sanity_check()
