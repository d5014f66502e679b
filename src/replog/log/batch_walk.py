"""Walking the record batches of a segment file: a fast header scan, and a validating walk.

Two ways to go through a ``.log`` file from a byte position:

- `scan_headers` reads only each batch's framing (base offset, length, last offset delta) and
  trusts it. It is what lookups use inside data already known to be good: bytes this process
  appended, or bytes a `BatchWalk` has already checked.
- `BatchWalk` checks every batch the way recovery does and stops at the first one that fails:
  the file ends inside it (a torn write), its length is under the 61-byte header, its magic is
  not 2, its CRC-32C does not match, it does not start at the offset after the previous batch
  (offsets are dense; the base offset is outside the CRC) -- except in compacted data, below
  ``gaps_below`` (the log's clean offset, see `replog.log.cleaner`), where a batch may start
  later than that, never earlier -- its last offset goes past the end of
  the segment's offset range, or its partition leader epoch is below the previous batch's (a
  leader epoch never falls along a log; the field is outside the CRC; -1, "no epoch", after an
  epoch >= 0 is a fall too, while -1 before any epoch is fine), or, when the walk is given the
  leader-epoch cache as the log was opened (`EpochStarts`), its epoch is not the one the cache
  says wrote its base offset (the cache is written and fsynced before the data it describes,
  so a batch whose epoch rose past it is damage, not news). The walk keeps its position,
  next offset and last epoch, so a caller can resume it later to check a segment lazily,
  prefix by prefix.

Both read the file in large chunks with ``pread``; neither decodes records. `PrefixCheck` keeps
a `BatchWalk` per segment to check, lazily and once, the bytes reads may not trust.
"""

from __future__ import annotations

import bisect
import logging
from collections.abc import Iterable, Iterator
from typing import NamedTuple

import attrs
import crc32c

from replog.errors import CorruptRecordError, unreachable
from replog.log.epoch_cache import EpochEntry
from replog.log.fs import FileHandle
from replog.log.records import (
    CRC_START,
    HEADER,
    HEADER_STRUCT,
    LOG_OVERHEAD,
    MAGIC,
    NO_PARTITION_LEADER_EPOCH,
    OFFSET_AND_LENGTH,
    RECORD_BATCH_OVERHEAD,
)

__all__ = [
    "BatchPosition",
    "BatchWalk",
    "EpochStarts",
    "PrefixCheck",
    "ValidBatch",
    "WalkStop",
    "scan_headers",
]

_log = logging.getLogger(__name__)

_SCAN_CHUNK_BYTES = 64 * 1024
_WALK_CHUNK_BYTES = 4 * 1024 * 1024
_MIN_CHUNK_BYTES = 64 * 1024
_unpack_framing = OFFSET_AND_LENGTH.unpack_from
_unpack_delta = HEADER.last_offset_delta.codec.unpack_from
_LAST_OFFSET_DELTA_AT = HEADER.last_offset_delta.position


class BatchPosition(NamedTuple):
    """Where a batch sits in a segment file (a tuple: made for every batch a scan passes)."""

    base_offset: int
    last_offset: int
    position: int
    size_bytes: int


def scan_headers(
    handle: FileHandle, position: int, end_position: int, first_chunk_bytes: int
) -> Iterator[BatchPosition]:
    """Batches from ``position`` to ``end_position``, by their framing alone. Stops at a length
    that cannot be right (under the header, or past ``end_position``). The first read is
    ``first_chunk_bytes`` (a lookup usually ends within an index interval); later reads
    double up to 64 KiB."""
    chunk_bytes = min(max(first_chunk_bytes, 4096), _SCAN_CHUNK_BYTES)
    while position + LOG_OVERHEAD <= end_position:
        chunk = handle.pread(position, min(chunk_bytes, end_position - position))
        chunk_bytes = min(chunk_bytes * 2, _SCAN_CHUNK_BYTES)
        cursor = 0
        while cursor + RECORD_BATCH_OVERHEAD <= len(chunk):
            base_offset, length = _unpack_framing(chunk, cursor)
            size = length + LOG_OVERHEAD
            if size < RECORD_BATCH_OVERHEAD or position + cursor + size > end_position:
                return
            (delta,) = _unpack_delta(chunk, cursor + _LAST_OFFSET_DELTA_AT)
            yield BatchPosition(base_offset, base_offset + delta, position + cursor, size)
            cursor += size
        if cursor == 0:
            return  # a header that does not fit before the end: nothing more to read
        position += cursor


@attrs.frozen
class EpochStarts:
    """The leader-epoch cache's entries as they were when a log was opened: which epoch wrote
    an offset. A walk checks the batches found on disk against it (`BatchWalk`)."""

    epochs: tuple[int, ...]
    start_offsets: tuple[int, ...]

    @classmethod
    def of(cls, entries: Iterable[EpochEntry]) -> EpochStarts | None:
        """The entries, or None when there are none (a lost checkpoint: nothing to check)."""
        pairs = [(entry.epoch, entry.start_offset) for entry in entries]
        if not pairs:
            return None
        return cls(tuple(e for e, _ in pairs), tuple(o for _, o in pairs))

    def epoch_at(self, offset: int) -> int | None:
        """The epoch that wrote ``offset`` (None: before the first entry)."""
        index = bisect.bisect_right(self.start_offsets, offset) - 1
        return self.epochs[index] if index >= 0 else None


class ValidBatch(NamedTuple):
    """A batch `BatchWalk` checked: where it is and the header fields callers index by."""

    position: int
    size_bytes: int
    base_offset: int
    last_offset: int
    leader_epoch: int
    max_timestamp: int


@attrs.frozen
class WalkStop:
    """Where and why a `BatchWalk` stopped before its end position. ``torn`` means the file
    ends inside the batch (what a crash leaves); otherwise the batch itself is bad."""

    position: int
    next_offset: int
    reason: str
    torn: bool = False


@attrs.define(eq=False)
class BatchWalk:
    """Iterate to get the valid batches from ``position`` up to ``end_position``; afterwards
    ``position``/``next_offset``/``last_epoch`` describe the end of the valid prefix and
    ``stop`` says why the walk ended early (None: it reached ``end_position``).

    ``end_offset`` (exclusive) bounds the offsets the batches may hold: the next segment's base
    offset, or the largest offset a relative index entry can reach. A batch whose base offset
    is at most ``gaps_below`` may start after the offset the previous batch ended at (offsets a
    log cleaner removed). ``epoch_starts``, if given, is the leader-epoch cache to check each
    batch's epoch against."""

    handle: FileHandle
    position: int
    end_position: int
    next_offset: int
    last_epoch: int
    end_offset: int
    stop: WalkStop | None = None
    gaps_below: int = 0
    epoch_starts: EpochStarts | None = None

    def __iter__(self) -> Iterator[ValidBatch]:
        return self._batches(_WALK_CHUNK_BYTES)

    def advance(self, target_position: int) -> None:
        """Check batches until ``position`` reaches ``target_position`` (the end of the batch
        holding it), the end position, or a bad batch. Reads only about as far as needed."""
        chunk_bytes = min(max(target_position - self.position, _MIN_CHUNK_BYTES), _WALK_CHUNK_BYTES)
        for _ in self._batches(chunk_bytes):
            if self.position >= target_position:
                return

    def advance_past_offset(self, offset: int) -> None:
        """Check batches until the batch holding ``offset`` is checked (``next_offset`` is past
        it), the end position, or a bad batch."""
        for _ in self._batches(_MIN_CHUNK_BYTES):
            if self.next_offset > offset:
                return

    def _batches(self, chunk_bytes: int) -> Iterator[ValidBatch]:
        read_bytes = chunk_bytes
        while self.stop is None and self.position < self.end_position:
            chunk_start = self.position
            requested = min(read_bytes, self.end_position - chunk_start)
            chunk = self.handle.pread(chunk_start, requested)
            read_bytes = chunk_bytes
            view = memoryview(chunk)
            while self.position < self.end_position:
                cursor = self.position - chunk_start
                size = self._check_framing(chunk, cursor)
                if size < 0:
                    return
                if cursor + size > len(chunk):
                    if cursor == 0 and len(chunk) < min(requested, size):
                        self._stop("the file is shorter than its recorded size", torn=True)
                        return
                    # Read again from this batch: enough for it (a little more than it, not a
                    # whole chunk, so an `advance` to a target inside it reads little extra).
                    read_bytes = max(size, _MIN_CHUNK_BYTES)
                    break
                batch = self._check_batch(view, cursor, size)
                if batch is None:
                    return
                yield batch

    def _check_framing(self, chunk: bytes, cursor: int) -> int:
        """The size of the batch at ``self.position`` (``cursor`` in ``chunk``), ``LOG_OVERHEAD``
        when the chunk ends inside its framing (read again), or -1 after setting ``stop``."""
        left = self.end_position - self.position
        if left < LOG_OVERHEAD:
            self._stop(f"{left} trailing bytes cannot hold a batch", torn=True)
            return -1
        if len(chunk) - cursor < LOG_OVERHEAD:
            return len(chunk) - cursor + 1  # more than the chunk holds: read again from here
        size = HEADER.batch_length.read(chunk, cursor) + LOG_OVERHEAD
        if size < RECORD_BATCH_OVERHEAD:
            self._stop(f"batch declares {size} bytes, under the 61-byte header")
            return -1
        if size > left:
            self._stop(f"batch declares {size} bytes, only {left} remain", torn=True)
            return -1
        return size

    def _check_batch(self, view: memoryview, cursor: int, size: int) -> ValidBatch | None:
        """Check the whole batch at ``cursor`` and step past it; None after setting ``stop``."""
        (base, _, epoch, magic, crc, _, delta, _, max_timestamp, *_) = HEADER_STRUCT.unpack_from(
            view, cursor
        )
        last = base + delta
        if magic != MAGIC:
            reason = f"magic {magic}, not {MAGIC}"
        elif crc32c.crc32c(view[cursor + CRC_START : cursor + size]) != crc:
            reason = f"CRC {crc:#010x} does not match its bytes"
        elif base != self.next_offset and not self.next_offset < base <= self.gaps_below:
            reason = f"base offset {base}, expected {self.next_offset}"
        elif delta < 0 or last >= self.end_offset:
            reason = f"last offset {last} outside [{base}, {self.end_offset})"
        elif epoch < self.last_epoch:
            reason = f"partition leader epoch {epoch} falls below {self.last_epoch}"
        elif (known := self._cached_epoch(base, epoch)) is not None:
            reason = f"partition leader epoch {epoch}, the leader-epoch cache has {known} there"
        else:
            batch = ValidBatch(self.position, size, base, last, epoch, max_timestamp)
            self.position += size
            self.next_offset = last + 1
            self.last_epoch = epoch
            return batch
        self._stop(reason)
        return None

    def _cached_epoch(self, base: int, epoch: int) -> int | None:
        """The epoch the leader-epoch cache gives ``base`` when it differs from ``epoch``."""
        starts = self.epoch_starts
        if starts is None or epoch < 0:
            return None
        known = starts.epoch_at(base)
        return None if known is None or known == epoch else known

    def _stop(self, reason: str, *, torn: bool = False) -> None:
        self.stop = WalkStop(self.position, self.next_offset, reason, torn)


@attrs.define(eq=False)
class PrefixCheck:
    """Which bytes of one segment file reads may serve, checking the rest on demand.

    Bytes a process appended itself (validated on the way in) or that recovery walked at open
    need no further check. The others, from ``[0, unchecked_end)`` (a file as it was found at
    open, below the recovery point, which Kafka trusts), are checked with a `BatchWalk` the
    first time a read reaches them, prefix by prefix, so each byte is checked once and a read of
    checked bytes costs one comparison. The first bad batch is logged once and every read that
    reaches it gets a `CorruptRecordError` naming the offsets that cannot be served."""

    handle: FileHandle
    base_offset: int
    unchecked_end: int
    walk: BatchWalk | None = None
    _reported_position: int = -1
    #: offsets below this may be missing (compacted data): see `BatchWalk`
    _gaps_below: int = 0
    #: the leader-epoch cache as the log was opened: see `BatchWalk`
    epoch_starts: EpochStarts | None = None

    @property
    def gaps_below(self) -> int:
        """Where offset gaps stop being legal (the log's clean offset)."""
        return self._gaps_below

    @gaps_below.setter
    def gaps_below(self, offset: int) -> None:
        self._gaps_below = offset
        if self.walk is not None:
            self.walk.gaps_below = offset

    @property
    def damage(self) -> WalkStop | None:
        """The first bad batch found so far (None if none has been found)."""
        return None if self.walk is None else self.walk.stop

    def good_end(self, start: int, end: int, end_offset: int) -> int:
        """How far ``[start, end)`` may be served: ``end``, or the position of the first bad
        batch when it lies inside (reads end before it). ``end_offset`` bounds the offsets the
        segment may hold (the next segment's base, or the relative-offset limit)."""
        if start >= self.unchecked_end:
            return end  # appended by this process, or already checked
        walk = self.walk
        if walk is not None and end <= walk.position:
            return end
        if walk is None:
            walk = self.walk = BatchWalk(
                self.handle,
                0,
                self.unchecked_end,
                next_offset=self.base_offset,
                last_epoch=NO_PARTITION_LEADER_EPOCH,
                end_offset=end_offset,
                gaps_below=self._gaps_below,
                epoch_starts=self.epoch_starts,
            )
        if walk.stop is None:
            walk.advance(min(end, self.unchecked_end))
            self._after_walk(walk)
        return end if walk.stop is None or end <= walk.position else walk.position

    def check_past_offset(self, offset: int, end_offset: int) -> WalkStop | None:
        """Check the batches up to the one holding ``offset`` (for a truncation to cut at a
        checked batch boundary); returns the first bad batch if it lies before that."""
        if self.unchecked_end == 0:
            return None
        self.good_end(0, 0, end_offset)  # makes the walk
        walk = self.walk
        if walk is not None and walk.stop is None and walk.next_offset <= offset:
            walk.advance_past_offset(offset)
            self._after_walk(walk)
        damage = self.damage
        return damage if damage is not None and damage.next_offset <= offset else None

    def on_walked(self, walk: BatchWalk) -> None:
        """A walk over the whole file (an index rebuild) checked it: adopt its outcome."""
        self.unchecked_end = walk.end_position
        self.walk = walk
        self._after_walk(walk)

    def on_truncate(self, position: int) -> None:
        """The file was cut at ``position``: what is gone needs no check, nor is its damage."""
        self.unchecked_end = min(self.unchecked_end, position)
        walk = self.walk
        if walk is None:
            return
        walk.end_position = min(walk.end_position, position)
        if walk.stop is not None and walk.stop.position >= position:
            walk.stop = None
        if walk.stop is None and walk.position >= walk.end_position:
            self.unchecked_end, self.walk = 0, None

    def error(self, end_offset: int) -> CorruptRecordError:
        """The error for a read that reached the first bad batch; the offsets it names are the
        ones from that batch to the end of the segment (``end_offset``, exclusive)."""
        damage = self.damage
        if damage is None:
            unreachable(f"{self.handle.path}: no damage to report")
        path = self.handle.path
        return CorruptRecordError(
            f"{path}: damaged record batch at position {damage.position} ({damage.reason}); "
            f"offsets {damage.next_offset} to {end_offset - 1} cannot be served",
            damage.position,
            path=path,
            first_offset=damage.next_offset,
            last_offset=end_offset - 1,
        )

    def missing_error(self, first_offset: int, end_offset: int, size: int) -> CorruptRecordError:
        """The error for offsets missing at the end of a ``size``-byte segment that should reach
        ``end_offset`` (exclusive): its tail was lost behind the log's back."""
        path = self.handle.path
        return CorruptRecordError(
            f"{path}: offsets {first_offset} to {end_offset - 1} are missing (the segment "
            f"ends at position {size})",
            size,
            path=path,
            first_offset=first_offset,
            last_offset=end_offset - 1,
        )

    def _after_walk(self, walk: BatchWalk) -> None:
        stop = walk.stop
        if stop is not None:
            if stop.position != self._reported_position:  # once per (segment, position)
                self._reported_position = stop.position
                _log.error(
                    "segment %s: damaged record batch at position %d (%s): offsets from %d on "
                    "will not be served",
                    self.handle.path,
                    stop.position,
                    stop.reason,
                    stop.next_offset,
                )
        elif walk.position >= self.unchecked_end:
            self.unchecked_end, self.walk = 0, None  # all checked: reads take the fast path
