"""What the offset index and the time index share: a preallocated, memory-mapped file of fixed-size
big-endian entries, and the cache-friendly binary search over it (Kafka's AbstractIndex).

Theory of operation. An index is a sparse, sorted array of ``(key, value)`` entries. Each entry is
``entry_size`` bytes, with no header and no padding. A new file is preallocated to
``round_down(max_index_size_bytes, entry_size)`` and mapped whole, with zero entries in use. When
an existing file is opened, all of ``round_down(length, entry_size)`` counts as entries, because
the file does not record how many slots are used. That is why ``close()`` trims the file to the
entries in use, and why an untrimmed file left by a crash must be rebuilt, not trusted: indexes
are caches that can be rebuilt from the ``.log``, and they have no checksum.

The mapping comes from ``FileSystem.map_file`` as a uint8 ``np.memmap``. Subclasses describe
their entry with a structured big-endian numpy dtype. Reads and writes of single entries go
through ``struct`` on a memoryview of the same mapping, because that costs far less per call than
indexing numpy scalars (see ``IndexBase._slot_for``).
"""

from __future__ import annotations

import struct
from typing import Any, ClassVar, Final, Self

import attrs
import numpy as np

from replog.errors import (
    CorruptIndexError,
    InvalidOffsetError,
    ReplogError,
    invariant,
    unreachable,
)
from replog.log.fs import FileSystem

__all__ = [
    "INT32_MAX",
    "WARM_SECTION_BYTES",
    "IndexBase",
    "IndexField",
    "IndexFullError",
    "round_down",
]

INT32_MAX: Final = 2**31 - 1
"""Largest relative offset (and file position) an index entry can hold."""

WARM_SECTION_BYTES: Final = 8192
"""Size of the index tail that lookups search first (see ``IndexBase._slot_for``)."""


class IndexFullError(ReplogError, ValueError):
    """An append found no free slot. The segment should have checked ``is_full`` and rolled."""

    def __init__(self, path: str, entries: int) -> None:
        super().__init__(f"{path}: cannot append to a full index ({entries} entries)")
        self.path = path
        self.entries = entries


@attrs.frozen
class IndexField:
    """One big-endian integer column of an index entry: its name, byte offset and codec."""

    name: str
    offset_bytes: int
    codec: struct.Struct


def round_down(value: int, multiple: int) -> int:
    """The largest multiple of ``multiple`` that is <= ``value`` (both non-negative)."""
    return value - value % multiple


def check_layout(dtype: np.dtype[Any], entry: struct.Struct, *fields: IndexField) -> None:
    """Check at import that the numpy dtype, the whole-entry codec and the field codecs agree."""
    invariant(entry.size == dtype.itemsize, f"entry codec {entry.format} != dtype {dtype}")
    for field in fields:
        field_dtype, offset_bytes = dtype.fields[field.name][:2]  # type: ignore[index]
        invariant(offset_bytes == field.offset_bytes, f"{field.name}: byte offset mismatch")
        invariant(field_dtype.itemsize == field.codec.size, f"{field.name}: size mismatch")


@attrs.define(eq=False)
class IndexBase:
    """A memory-mapped file of fixed-size sorted entries. Subclasses add the typed API.

    Subclasses set ``ENTRY`` (the numpy dtype), ``ENTRY_CODEC`` (a ``struct`` for the whole
    entry), ``KEY`` (the search column, strictly increasing), ``VALUE`` (the other column),
    ``OFFSET_FIELD`` (the column holding the relative offset, which ``truncate_to`` searches)
    and ``EMPTY_LAST_RAW`` (what ``_last_key``/``_last_value`` hold when there are no entries).
    """

    ENTRY: ClassVar[np.dtype[Any]]
    ENTRY_CODEC: ClassVar[struct.Struct]
    ENTRY_SIZE: ClassVar[int]
    WARM_ENTRIES: ClassVar[int]
    KEY: ClassVar[IndexField]
    VALUE: ClassVar[IndexField]
    OFFSET_FIELD: ClassVar[IndexField]
    EMPTY_LAST_RAW: ClassVar[tuple[int, int]]

    _fs: FileSystem
    _path: str
    _base_offset: int
    _max_index_size_bytes: int
    _writable: bool
    _mapped: np.memmap[Any, np.dtype[np.uint8]] | None = None
    _buffer: memoryview | None = None
    _length_bytes: int = 0
    _entries: int = 0
    # Whether the mapping may hold writes (or a new length) that no msync has covered: a flush
    # of a clean index is skipped (on Linux an msync is an fsync of the file, needed or not).
    _dirty: bool = False
    # The last entry's raw columns as Python ints. The hot path (appends, and lookups at the
    # tail of the log) reads these instead of the mapping.
    _last_key: int = 0
    _last_value: int = 0

    @classmethod
    def _open_file(
        cls,
        fs: FileSystem,
        path: str,
        base_offset: int,
        max_index_size_bytes: int,
        writable: bool,
    ) -> Self:
        """Map ``path`` (preallocating it if new), count its entries and sanity-check it."""
        invariant(max_index_size_bytes >= 0, f"max_index_size_bytes {max_index_size_bytes} < 0")
        invariant(base_offset >= 0, f"base offset {base_offset} < 0")
        index = cls(
            fs=fs,
            path=path,
            base_offset=base_offset,
            max_index_size_bytes=max_index_size_bytes,
            writable=writable,
        )
        if fs.exists(path):
            length_bytes = fs.file_size(path)
            entries = length_bytes // cls.ENTRY_SIZE
        elif writable:
            length_bytes = round_down(max_index_size_bytes, cls.ENTRY_SIZE)
            entries = 0
        else:
            raise FileNotFoundError(f"{path}: no such index file (opened read-only)")
        index._map(length_bytes)
        index._entries = entries
        index._refresh_last_entry()
        try:
            index.sanity_check()
        except CorruptIndexError:
            index._unmap()
            raise
        return index

    # -- properties --------------------------------------------------------------------------

    @property
    def path(self) -> str:
        """The index file's path."""
        return self._path

    @property
    def base_offset(self) -> int:
        """The base offset of the segment; entries store offsets relative to it."""
        return self._base_offset

    @property
    def entries(self) -> int:
        """How many entries are in use."""
        return self._entries

    @property
    def max_entries(self) -> int:
        """How many entries the current mapping can hold."""
        return self._length_bytes // self.ENTRY_SIZE

    @property
    def length_bytes(self) -> int:
        """The mapped length of the file."""
        return self._length_bytes

    @property
    def is_full(self) -> bool:
        """Whether no further entry fits (the segment must roll before the next append)."""
        return self._entries >= self.max_entries

    def can_append_offset(self, offset: int) -> bool:
        """Whether ``offset - base_offset`` fits the int32 relative offset of an entry."""
        return 0 <= offset - self._base_offset <= INT32_MAX

    # -- maintenance -------------------------------------------------------------------------

    def sanity_check(self) -> None:
        """Raise ``CorruptIndexError`` if the file length is not a whole number of entries.

        Subclasses extend this with checks on the entries themselves.
        """
        if self._length_bytes % self.ENTRY_SIZE != 0:
            raise CorruptIndexError(
                f"{self._path}: length {self._length_bytes} bytes is not a multiple of the "
                f"entry size {self.ENTRY_SIZE}"
            )

    def truncate_to(self, offset: int) -> None:
        """Remove every entry for an offset >= ``offset`` (the log is being cut there)."""
        self._check_writable()
        self._truncate_to_relative(offset - self._base_offset, self.OFFSET_FIELD)

    def reset(self) -> None:
        """Remove all entries and grow the file back to its maximum size."""
        self._check_writable()
        self._truncate_to_entries(0)
        self.resize(self._max_index_size_bytes)

    def trim_to_valid_size(self) -> None:
        """Cut the file to exactly the entries in use, so that reopening it counts only those."""
        self.resize(self._entries * self.ENTRY_SIZE)

    def resize(self, size_bytes: int) -> bool:
        """Set the file length to ``round_down(size_bytes, entry_size)`` and remap it.

        Used to trim on close and roll, and to grow the active segment's index back to its maximum
        size after the log loads or truncates. Returns False if the length was already right.
        """
        self._check_writable()
        new_length_bytes = round_down(size_bytes, self.ENTRY_SIZE)
        if new_length_bytes == self._length_bytes:
            return False
        invariant(
            new_length_bytes >= self._entries * self.ENTRY_SIZE,
            f"{self._path}: resize to {new_length_bytes} bytes would cut {self._entries} entries",
        )
        # Shrinking a file under a live mapping makes touching the cut pages a SIGBUS, so the old
        # mapping is flushed and dropped before map_file sets the new length.
        self.flush()
        self._unmap()
        self._map(new_length_bytes)
        return True

    def flush(self) -> None:
        """Write the mapped pages to disk (msync)."""
        mapped = self._mapped
        if mapped is None or not self._dirty:
            return
        self._dirty = False  # before the msync: a write during it marks the index again
        try:
            self._fs.sync_mapped(self._path, mapped)
        except OSError:
            self._dirty = True
            raise
        except ValueError:
            # A group-commit flush on a worker thread can meet a mapping the appending thread
            # has just replaced (a roll trims the index: flush, unmap, map again): the old
            # mapping was flushed before it closed, so only a still-current one is an error.
            # Nothing was synced here, and the clear above may have hidden the new mapping's
            # mark: the index stays dirty.
            self._dirty = True
            if self._mapped is mapped:
                raise

    def close(self) -> None:
        """Trim the file to its entries (if writable), then drop the mapping. Idempotent."""
        if self._mapped is None:
            return
        if self._writable:
            self.trim_to_valid_size()
        self._unmap()

    def delete(self) -> None:
        """Drop the mapping and remove the file. No trim first: the file is going away."""
        self._unmap()
        self._fs.remove(self._path)

    def _columns(self) -> tuple[np.ndarray[Any, np.dtype[np.int64]], ...]:
        """The entries in use as one int64 array per column (key, value), read in one pass."""
        mapped = self._require_mapped()
        used = np.frombuffer(mapped, dtype=self.ENTRY, count=self._entries)
        return tuple(used[name].astype(np.int64) for name in self.ENTRY.names or ())

    def to_array(self) -> np.ndarray[Any, np.dtype[Any]]:
        """A copy of the entries in use as a structured array of raw (relative) columns."""
        mapped = self._require_mapped()
        used = mapped[: self._entries * self.ENTRY_SIZE]
        return np.array(used.view(self.ENTRY), copy=True)

    # -- the search both indexes share -------------------------------------------------------

    def _slot_for(self, target: int, field: IndexField, *, smallest_upper_bound: bool) -> int:
        """The slot of the entry whose ``field`` is the largest <= ``target`` (or, with
        ``smallest_upper_bound``, the smallest >= ``target``); -1 if there is none.

        Why not a plain binary search: lookups almost always ask about recent offsets, and a plain
        search would first touch the middle of the file, then pages scattered over it. The
        page cache keeps the last few KB of the index hot (they were written recently and are
        read by every tail fetch), so a search that stays in the last ``WARM_SECTION_BYTES``
        whenever the target lies there touches no cold page; only older targets search the
        rest. The algorithm follows Kafka's ``indexSlotRangeFor``, with one fix for the
        smallest-upper-bound variant noted below.

        ``field`` is read with ``struct`` from the mapping, not through numpy: a numpy scalar
        read costs several times more, and a search does up to ~20 of them.
        """
        entries = self._entries
        if entries == 0:
            return -1
        buf = self._buffer
        if buf is None:
            unreachable(f"{self._path}: index used after close")
        unpack = field.codec.unpack_from
        stride = self.ENTRY_SIZE
        at = field.offset_bytes
        first_hot = max(0, entries - 1 - self.WARM_ENTRIES)
        if unpack(buf, first_hot * stride + at)[0] < target:
            lo, hi = first_hot, entries - 1
        else:
            first = unpack(buf, at)[0]
            # Kafka only returns early when first > target. When first == target, its search
            # over [0, first_hot] never probes slot 0 and answers slot 1 for the upper bound.
            if first > target or (smallest_upper_bound and first == target):
                return 0 if smallest_upper_bound else -1
            lo, hi = 0, first_hot
        while lo < hi:
            mid = (lo + hi + 1) >> 1
            found = unpack(buf, mid * stride + at)[0]
            if found > target:
                hi = mid - 1
            elif found < target:
                lo = mid
            else:
                return int(mid)
        if not smallest_upper_bound:
            return int(lo)
        return -1 if lo == entries - 1 else int(lo) + 1

    def _raw_entry(self, n: int) -> tuple[int, int]:
        """The raw (key, value) columns of slot ``n``."""
        invariant(0 <= n < self._entries, f"{self._path}: entry {n} outside [0, {self._entries})")
        buf = self._buffer
        if buf is None:
            unreachable(f"{self._path}: index used after close")
        key, value = self.ENTRY_CODEC.unpack_from(buf, n * self.ENTRY_SIZE)
        return int(key), int(value)

    # -- helpers for subclasses --------------------------------------------------------------

    def _relative_offset(self, offset: int) -> int:
        """``offset - base_offset``, or ``InvalidOffsetError`` if that does not fit int32."""
        relative = offset - self._base_offset
        if not 0 <= relative <= INT32_MAX:
            raise InvalidOffsetError(
                f"{self._path}: offset {offset} is outside [{self._base_offset}, "
                f"{self._base_offset + INT32_MAX}] (base offset + int32)"
            )
        return relative

    def _write_entry(self, key: int, value: int) -> None:
        """Write raw columns into the next free slot; the caller has checked order and room."""
        buf = self._buffer
        if buf is None:
            unreachable(f"{self._path}: index used after close")
        invariant(self._entries < self.max_entries, f"{self._path}: no free slot for entry {key}")
        self.ENTRY_CODEC.pack_into(buf, self._entries * self.ENTRY_SIZE, key, value)
        self._dirty = True
        self._entries += 1
        self._last_key = key
        self._last_value = value

    def _truncate_to_relative(self, relative: int, field: IndexField) -> None:
        """Kafka's three truncation cases, with ``relative`` compared to ``field``."""
        slot = self._slot_for(relative, field, smallest_upper_bound=False)
        if slot < 0:
            new_entries = 0  # no entry at or before the cut: nothing survives
        elif self._raw_field(slot, field) == relative:
            new_entries = slot  # an entry exactly at the cut: keep the ones before it
        else:
            new_entries = slot + 1  # keep up to the largest entry before the cut
        self._truncate_to_entries(new_entries)

    def _truncate_to_entries(self, entries: int) -> None:
        invariant(0 <= entries <= self._entries, f"cannot truncate to {entries} entries")
        self._entries = entries
        self._refresh_last_entry()

    def _raw_field(self, n: int, field: IndexField) -> int:
        buf = self._buffer
        if buf is None:
            unreachable(f"{self._path}: index used after close")
        return int(field.codec.unpack_from(buf, n * self.ENTRY_SIZE + field.offset_bytes)[0])

    def _refresh_last_entry(self) -> None:
        if self._entries == 0:
            self._last_key, self._last_value = self.EMPTY_LAST_RAW
        else:
            self._last_key, self._last_value = self._raw_entry(self._entries - 1)

    def _check_writable(self) -> None:
        invariant(self._writable, f"{self._path}: index opened read-only")
        invariant(self._mapped is not None, f"{self._path}: index used after close")

    def _require_mapped(self) -> np.memmap[Any, np.dtype[np.uint8]]:
        mapped = self._mapped
        if mapped is None:
            unreachable(f"{self._path}: index used after close")
        return mapped

    def _map(self, length_bytes: int) -> None:
        mapped = self._fs.map_file(self._path, length_bytes)
        self._mapped = mapped
        self._buffer = mapped.data  # a memoryview of the mapping itself, no copy
        self._length_bytes = length_bytes
        self._dirty = True  # a new length is durable only once synced

    def _unmap(self) -> None:
        # Release the memoryview first: a live export keeps the mmap (and the pages) alive.
        if self._buffer is not None:
            self._buffer.release()
        self._buffer = None
        self._mapped = None
