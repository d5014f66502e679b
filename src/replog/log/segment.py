"""`LogSegment`: one ``.log`` file of record batches plus its ``.index`` and ``.timeindex``.

Files are named by the segment's base offset, zero-padded to 20 digits
(``00000000000000000000.log``). The ``.log`` holds record batches back to back, exactly as they
go on the wire. The indexes are sparse, rebuildable caches: an entry is added when
more than ``index_interval_bytes`` were appended since the last one, mapping the last offset of
the appended batch to the file position where the batch starts.

Indexes are opened lazily (a closed segment's indexes are mapped only when something reads
them), which keeps reopening a large log cheap.

Segment time is wall time from the injected ``Clock`` (record timestamps are wall time too):
``created_ms`` is the clock when the segment was created or opened, ``last_modified_ms`` the
clock at the last append that went through `Log`'s general path. A segment's age for
``segment.ms`` follows Kafka: the incoming batch's max timestamp minus the first batch's (read
from the file after a restart), or the clock minus ``created_ms`` when the first batch has no
timestamp.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence
from typing import NamedTuple

import attrs

from replog.clock import Clock
from replog.errors import CorruptRecordError, InvariantError
from replog.log.batch_walk import BatchPosition, BatchWalk, EpochStarts, PrefixCheck, scan_headers
from replog.log.config import LogConfig
from replog.log.epoch_cache import LeaderEpochCache
from replog.log.fs import FileHandle, FileSlice, FileSystem
from replog.log.index_build import index_batches, open_checked_indexes
from replog.log.offset_index import OffsetIndex
from replog.log.records import (
    HEADER,
    NO_PARTITION_LEADER_EPOCH,
    NO_TIMESTAMP,
    RECORD_BATCH_OVERHEAD,
)
from replog.log.time_index import TimeIndex

__all__ = [
    "BatchMeta",
    "Recovered",
    "BatchPosition",
    "LogSegment",
    "log_file_name",
    "offset_from_file_name",
]

_log = logging.getLogger(__name__)

_INT32_MAX = 2**31 - 1
_MAX_TIMESTAMP = HEADER.max_timestamp


def log_file_name(base_offset: int, suffix: str) -> str:
    """``00000000000000000042.log`` for base offset 42 and suffix ``.log``."""
    return f"{base_offset:020d}{suffix}"


def offset_from_file_name(name: str) -> int:
    """The base offset a segment file name encodes (the text before the first dot)."""
    return int(name.split(".", 1)[0])


class Recovered(NamedTuple):
    """What `LogSegment.recover` did: the bytes it cut, the leader epoch of the last batch it
    kept (what the next segment's first batch may not fall below), and why it cut."""

    bytes_truncated: int
    last_epoch: int
    truncation_reason: str | None


class BatchMeta(NamedTuple):
    """What a segment needs to know about one batch being appended (a tuple: it is made once
    per appended batch on the hot path)."""

    last_offset: int
    max_timestamp: int
    size_bytes: int


_NEXT_BATCH_HINTS_MAX = 4096


@attrs.define(eq=False)
class LogSegment:
    """One segment. Create with `LogSegment.open`; all offsets here are absolute."""

    base_offset: int
    dir_path: str
    fs: FileSystem
    config: LogConfig
    log_file: FileHandle
    size_bytes: int
    clock: Clock
    created_ms: int
    #: What reads may serve without checking: everything this process appended or recovered;
    #: the rest of the file as found at open is checked on first read (see `read`).
    _prefix_check: PrefixCheck
    _offset_index: OffsetIndex | None = None
    _time_index: TimeIndex | None = None
    _bytes_since_last_index_entry: int = 0
    _max_timestamp: int = NO_TIMESTAMP
    _offset_of_max_timestamp: int = -1
    _max_timestamp_loaded: bool = False
    #: The first batch's max timestamp; None until known (read from the file on first use
    #: after a restart).
    _rolling_based_timestamp: int | None = None
    last_modified_ms: int = 0
    indexes_rebuilt: bool = False
    #: False for the indexes of a segment found after an unclean shutdown (a crash may have
    #: lost their unflushed pages, so a rebuild is routine, not a warning).
    indexes_expected_valid: bool = True
    #: The base offset of the segment after this one (None for the active segment), kept by
    #: `Log`: the end of this segment's offset range, which index entries must stay below.
    next_base_offset: int | None = None
    _index_full: bool = False
    #: offsets below this may be missing between batches (the log's clean offset: compacted
    #: data), see `BatchWalk`; set by `Log` and the loader
    _gaps_below: int = 0
    _epoch_starts: EpochStarts | None = None
    #: appended to every file name: ``.cleaned`` while the log cleaner writes a segment
    file_suffix: str = ""
    #: where the batch after each recently appended one starts: offset -> file position. A
    #: follower's next fetch asks for exactly such an offset, so `translate_offset` starts
    #: there instead of scanning up to index_interval_bytes of batches from the index entry.
    _next_batch_at: dict[int, int] = attrs.field(factory=dict)

    @classmethod
    def open(
        cls,
        fs: FileSystem,
        dir_path: str,
        base_offset: int,
        config: LogConfig,
        clock: Clock,
        *,
        create: bool,
        file_suffix: str = "",
    ) -> LogSegment:
        """Open (or with ``create=True`` create) the segment starting at ``base_offset``; its
        ``created_ms`` is ``clock.wall_ms()`` now. ``file_suffix`` follows every file name
        (``00000000000000000000.log.cleaned``)."""
        path = f"{dir_path}/{log_file_name(base_offset, '.log')}{file_suffix}"
        handle = fs.open(path, create=create)
        size = handle.size()
        now_ms = clock.wall_ms()
        segment = cls(
            base_offset=base_offset,
            dir_path=dir_path,
            fs=fs,
            config=config,
            log_file=handle,
            size_bytes=size,
            clock=clock,
            created_ms=now_ms,
            prefix_check=PrefixCheck(handle, base_offset, unchecked_end=size),
            last_modified_ms=now_ms,
            file_suffix=file_suffix,
        )
        if size == 0:
            segment._max_timestamp_loaded = True
            # Empty indexes are full only when too small for even one entry (tiny test configs).
            segment._index_full = (
                config.segment_index_bytes // 12 <= 1 or config.segment_index_bytes // 8 <= 0
            )
        return segment

    # -- files ------------------------------------------------------------------------------

    def path(self, suffix: str) -> str:
        """Path of this segment's file with ``suffix`` (``.log``, ``.index``, ``.timeindex``)."""
        return f"{self.dir_path}/{log_file_name(self.base_offset, suffix)}{self.file_suffix}"

    @property
    def gaps_below(self) -> int:
        """Offsets below this may be missing between batches (compacted data)."""
        return self._gaps_below

    @gaps_below.setter
    def gaps_below(self, offset: int) -> None:
        self._gaps_below = offset
        self._prefix_check.gaps_below = offset

    @property
    def epoch_starts(self) -> EpochStarts | None:
        """The leader-epoch cache as the log was opened, for walks to check (`BatchWalk`)."""
        return self._epoch_starts

    @epoch_starts.setter
    def epoch_starts(self, starts: EpochStarts | None) -> None:
        self._epoch_starts = starts
        self._prefix_check.epoch_starts = starts

    def mark_checked(self) -> None:
        """Every byte of the file may be served unchecked: this process wrote it from batches
        it validated (a segment the log cleaner wrote)."""
        self._prefix_check = PrefixCheck(self.log_file, self.base_offset, unchecked_end=0)
        self._prefix_check.gaps_below = self._gaps_below

    @property
    def offset_index(self) -> OffsetIndex:
        """The offset index, mapped on first use."""
        if self._offset_index is None:
            self._offset_index, self._time_index = self._open_indexes()
        return self._offset_index

    @property
    def time_index(self) -> TimeIndex:
        """The time index, mapped on first use."""
        if self._time_index is None:
            self._offset_index, self._time_index = self._open_indexes()
        return self._time_index

    def _open_indexes(self) -> tuple[OffsetIndex, TimeIndex]:
        """Map both indexes and check every entry once (`open_checked_indexes`). A corrupt
        index (wrong size, junk entries) is a cache gone bad, not lost data: it is rebuilt
        from the ``.log``."""
        opened = open_checked_indexes(
            self.fs,
            (self.path(".index"), self.path(".timeindex")),
            self.base_offset,
            self.config.segment_index_bytes,
            log_size_bytes=self.size_bytes,
            end_offset=self.next_base_offset,
        )
        if isinstance(opened, str):
            return self.rebuild_indexes(opened)
        return opened

    def rebuild_indexes(
        self, reason: str, *, log_level: int | None = None
    ) -> tuple[OffsetIndex, TimeIndex]:
        """Replace both index files with ones built from the ``.log``, and log why: at WARNING
        when the indexes should have been good (written by this process or kept through a
        clean shutdown: the disk, or something else, wrote where it should not), at INFO when
        a crash may have left them unflushed. The log is not cut: a bad batch ends the
        indexes, not the data."""
        if log_level is None:
            log_level = logging.WARNING if self.indexes_expected_valid else logging.INFO
        _log.log(log_level, "segment %s: rebuilding its indexes: %s", self.path(".log"), reason)
        offset_index, time_index = self._new_index_files()
        self.indexes_rebuilt = True
        walk = self._index_from_log(None, NO_PARTITION_LEADER_EPOCH)
        self._prefix_check.on_walked(walk)  # the rebuild checked every batch on its way
        if self.next_base_offset is not None:  # sealed: trimmed, as on roll
            offset_index.trim_to_valid_size()
            time_index.trim_to_valid_size()
        self._index_full = self._indexes_full()
        return offset_index, time_index

    def _new_index_files(self) -> tuple[OffsetIndex, TimeIndex]:
        """Replace both index files, whatever they held, with empty ones of the maximum size."""
        for index in (self._offset_index, self._time_index):
            if index is not None:
                index.delete()
        self.fs.remove(self.path(".index"))
        self.fs.remove(self.path(".timeindex"))
        size = self.config.segment_index_bytes
        offset_index = OffsetIndex.open(self.fs, self.path(".index"), self.base_offset, size)
        time_index = TimeIndex.open(self.fs, self.path(".timeindex"), self.base_offset, size)
        self._offset_index, self._time_index = offset_index, time_index
        return offset_index, time_index

    # -- append -----------------------------------------------------------------------------

    def append(self, data: bytes | bytearray | memoryview, batches: Sequence[BatchMeta]) -> None:
        """Append ``data`` (whole batches described by ``batches``) at the end of the file."""
        position = self.size_bytes
        if position == 0:
            self._rolling_based_timestamp = batches[0].max_timestamp
        if not self._max_timestamp_loaded:
            self._ensure_max_timestamp_loaded()
        last_offset = batches[-1].last_offset
        if not 0 <= last_offset - self.base_offset <= _INT32_MAX:
            raise InvariantError(f"offset {last_offset} overflows segment {self.base_offset}")
        self.log_file.append(data)
        interval = self.config.index_interval_bytes
        for meta in batches:
            if meta.max_timestamp > self._max_timestamp:
                self._max_timestamp = meta.max_timestamp
                self._offset_of_max_timestamp = meta.last_offset
            if self._bytes_since_last_index_entry > interval and not self._index_full:
                # (`Log` rolls before an index fills; a segment the cleaner writes in one go
                # keeps a sparser index instead, as a rebuilt one does)
                self._add_index_entry(meta.last_offset, position)
            self._bytes_since_last_index_entry += meta.size_bytes
            position += meta.size_bytes
            self._remember_next_batch(meta.last_offset + 1, position)
        if position - self.size_bytes != len(data):
            raise InvariantError("batch sizes do not add up to the appended data")
        self.size_bytes = position

    def try_append_one(self, data: bytearray, last_offset: int, max_timestamp: int) -> bool:
        """Append one batch if that needs nothing but the write and, when one is due, an index
        entry (the ones `append` would make); False (nothing written) otherwise: the segment is
        empty (no first-batch timestamp recorded yet), its indexes are full, a roll trigger
        fires, or the time roll would need wall-clock age (a segment without record
        timestamps). One call on the produce path, so its checks are inline."""
        position = self.size_bytes
        size_bytes = len(data)
        rolling = self._rolling_based_timestamp
        config = self.config
        if (
            position == 0
            or self._index_full
            or not self._max_timestamp_loaded
            or position > config.segment_bytes - size_bytes
            or rolling is None
            or rolling < 0
            or max_timestamp - rolling > config.segment_ms - config.segment_jitter_ms
            or not 0 <= last_offset - self.base_offset <= _INT32_MAX
        ):
            return False
        self.log_file.append(data)
        if max_timestamp > self._max_timestamp:
            self._max_timestamp = max_timestamp
            self._offset_of_max_timestamp = last_offset
        if self._bytes_since_last_index_entry > config.index_interval_bytes:
            self._add_index_entry(last_offset, position)
        self._bytes_since_last_index_entry += size_bytes
        self.size_bytes = position = position + size_bytes
        hints = self._next_batch_at
        if len(hints) >= _NEXT_BATCH_HINTS_MAX:
            hints.clear()  # bounded; the newest positions are the ones fetched next
        hints[last_offset + 1] = position
        return True

    def _remember_next_batch(self, offset: int, position: int) -> None:
        hints = self._next_batch_at
        if len(hints) >= _NEXT_BATCH_HINTS_MAX:
            hints.clear()  # bounded; the newest positions are the ones fetched next
        hints[offset] = position

    def _add_index_entry(self, last_offset: int, position: int) -> None:
        offset_index = self.offset_index
        offset_index.append(last_offset, position)
        time_index = self.time_index
        time_index.maybe_append(self._max_timestamp, self._offset_of_max_timestamp)
        self._bytes_since_last_index_entry = 0
        # Fullness only changes when an entry is added (or on truncate/reset, which clear it).
        self._index_full = offset_index.is_full or time_index.is_full

    def _indexes_full(self) -> bool:
        return self.offset_index.is_full or self.time_index.is_full

    def should_roll(self, incoming_bytes: int, max_timestamp: int, last_offset: int) -> bool:
        """Kafka's four roll triggers: size, age, a full index, and relative-offset overflow."""
        size = self.size_bytes
        config = self.config
        if size > config.segment_bytes - incoming_bytes:
            return True
        if size > 0:
            waited_ms = self.time_waited_for_roll(max_timestamp)
            if waited_ms > config.segment_ms - config.segment_jitter_ms:
                return True
        if self._index_full:
            return True
        return not 0 <= last_offset - self.base_offset <= _INT32_MAX

    def time_waited_for_roll(self, max_timestamp: int) -> int:
        """The segment's age for ``segment.ms`` when a batch with ``max_timestamp`` arrives:
        that timestamp minus the first batch's max timestamp, or, when the first batch has no
        timestamp, the clock's wall time minus ``created_ms`` (Kafka's rule)."""
        rolling = self._rolling_timestamp()
        if rolling is not None and rolling >= 0:
            return max_timestamp - rolling
        return self.clock.wall_ms() - self.created_ms

    def first_batch_timestamp(self) -> int:
        """The first batch's max timestamp (-1 when the segment is empty or it has none): when
        the segment's data began, for ``max.compaction.lag.ms``."""
        rolling = self._rolling_timestamp()
        return NO_TIMESTAMP if rolling is None else rolling

    def _rolling_timestamp(self) -> int | None:
        """The first batch's max timestamp, read from the file once (after a restart the
        segment was not written by this process); None while the segment is empty."""
        if self._rolling_based_timestamp is None and self.size_bytes >= RECORD_BATCH_OVERHEAD:
            raw = self.log_file.pread(_MAX_TIMESTAMP.position, _MAX_TIMESTAMP.size_bytes)
            self._rolling_based_timestamp = _MAX_TIMESTAMP.decode(raw)
        return self._rolling_based_timestamp

    # -- read -------------------------------------------------------------------------------

    def translate_offset(self, offset: int) -> BatchPosition | None:
        """The first batch whose last offset is >= ``offset``, or None if there is none."""
        position = self._next_batch_at.get(offset, -1)
        if 0 <= position < self.size_bytes:
            batches = self._scan(position)  # where this process appended that batch
        else:
            batches = self._scan_from_index(offset)
        for found in batches:
            if found.last_offset >= offset:
                return found
        return None

    def batches_from(self, offset: int) -> Iterator[BatchPosition]:
        """Every batch from the one holding ``offset`` (or the first after it) to the end."""
        for found in self._scan_from_index(offset):
            if found.last_offset >= offset:
                yield found

    def read(
        self,
        start_offset: int,
        max_bytes: int,
        max_position: int,
        *,
        min_one_batch: bool,
        end_offset: int,
    ) -> FileSlice | None:
        """Batches from the one holding ``start_offset``, up to ``max_bytes`` and
        ``max_position``; with ``min_one_batch`` the first batch is returned whole even if it is
        larger than ``max_bytes``. None when no batch holds ``start_offset``. ``end_offset`` is
        where the segment's offsets end (the next segment's base, or the LEO).

        Only checked batches are served (`PrefixCheck`: bad CRC, magic, length, offsets or a
        falling leader epoch): the slice ends before the first bad batch, and a read that
        starts at or after it raises `CorruptRecordError`. What this process appended or
        recovered is served unchecked; the rest is checked once, when a read first reaches it."""
        start = self.translate_offset(start_offset)
        if start is None:
            return None
        limit = max(max_bytes, start.size_bytes) if min_one_batch else max_bytes
        size = max(0, min(max_position - start.position, limit))
        end = start.position + max(size, start.size_bytes)  # the first batch whole, at least
        good = self._prefix_check.good_end(start.position, end, self._end_offset_bound())
        if good < end:
            if good <= start.position:
                raise self._prefix_check.error(end_offset)
            size = min(size, good - start.position)
        return FileSlice(self.log_file, start.position, size)

    def check_batch(self, batch: BatchPosition, end_offset: int) -> None:
        """Make sure ``batch`` (found by a header scan) may be served, or raise
        `CorruptRecordError` (for readers that decode a batch themselves: time lookups)."""
        end = batch.position + batch.size_bytes
        if self._prefix_check.good_end(batch.position, end, self._end_offset_bound()) < end:
            raise self._prefix_check.error(end_offset)

    def check_complete(self, end_offset: int) -> None:
        """Raise `CorruptRecordError` unless every batch may be served and they reach
        ``end_offset`` (for readers that scan a whole segment by its headers, which stop
        quietly at broken framing: time lookups)."""
        error = self.missing_offset_error(end_offset)
        if error is not None:
            raise error

    def missing_offset_error(self, end_offset: int) -> CorruptRecordError | None:
        """Why the segment cannot serve every offset below ``end_offset`` (damage, or offsets
        missing at its end), or None: for a read that found no batch where one should be."""
        size = self.size_bytes
        if self._prefix_check.good_end(0, size, self._end_offset_bound()) < size:
            return self._prefix_check.error(end_offset)
        first_missing = self.read_next_offset()
        if first_missing >= end_offset or end_offset <= self._gaps_below:
            return None  # complete, or the cleaner removed the offsets at its end
        return self._prefix_check.missing_error(first_missing, end_offset, size)

    def _end_offset_bound(self) -> int:
        """The end of the offsets this segment may hold: the next segment's base offset, or
        what a relative offset can reach for the active segment."""
        if self.next_base_offset is not None:
            return self.next_base_offset
        return self.base_offset + _INT32_MAX + 1

    def _scan(self, position: int) -> Iterator[BatchPosition]:
        """Batches from ``position`` to the end of the file, by their headers."""
        # The index puts the target within about index_interval_bytes of ``position``, so start
        # with a read of that size and grow it only when the scan goes on (a full-log scan).
        first_chunk_bytes = self.config.index_interval_bytes + 2 * RECORD_BATCH_OVERHEAD
        return scan_headers(self.log_file, position, self.size_bytes, first_chunk_bytes)

    def _scan_from_index(self, offset: int) -> Iterator[BatchPosition]:
        """Batches from the offset-index entry for ``offset`` to the end of the file.

        The entry must point at the start of the batch whose last offset it names; one that
        does not (junk that passed the checks at open) gets the indexes rebuilt, not a read
        from the middle of a batch."""
        entry = self.offset_index.lookup(offset)
        batches = self._scan(entry.position)
        first = next(batches, None)
        if entry.position > 0 and (first is None or first.last_offset != entry.offset):
            found = "nothing" if first is None else f"a batch ending at {first.last_offset}"
            self.rebuild_indexes(
                f"entry ({entry.offset}, {entry.position}) points at {found}, not at the batch "
                f"ending at offset {entry.offset}"
            )
            entry = self.offset_index.lookup(offset)
            batches = self._scan(entry.position)
            first = next(batches, None)
        if first is not None:
            yield first
            yield from batches

    def read_next_offset(self) -> int:
        """The offset after the last batch, or the base offset if the segment is empty."""
        return self.read_end()[0]

    def read_end(self) -> tuple[int, int]:
        """(The offset after the last batch, the position where that batch ends), reading the
        batches from the last index entry on. The position is the file's size unless a
        batch's framing is broken there (and then the offset cannot be trusted)."""
        next_offset, end = self.base_offset, self.offset_index.last_entry.position
        for found in self._scan_from_index(2**63 - 1):
            next_offset, end = found.last_offset + 1, found.position + found.size_bytes
        return next_offset, end

    # -- timestamps -------------------------------------------------------------------------

    def _ensure_max_timestamp_loaded(self) -> None:
        if self._max_timestamp_loaded:
            return
        self._max_timestamp_loaded = True
        timestamp, offset = self.time_index.last_entry
        self._max_timestamp, self._offset_of_max_timestamp = timestamp, offset
        for found in self._scan_from_index(offset):
            if found.last_offset < offset:
                continue
            raw = self.log_file.pread(
                found.position + _MAX_TIMESTAMP.position, _MAX_TIMESTAMP.size_bytes
            )
            batch_max = _MAX_TIMESTAMP.decode(raw)
            if batch_max > self._max_timestamp:
                self._max_timestamp, self._offset_of_max_timestamp = batch_max, found.last_offset

    @property
    def max_timestamp(self) -> int:
        """The largest record timestamp in the segment (-1 when none has a timestamp)."""
        self._ensure_max_timestamp_loaded()
        return self._max_timestamp

    @property
    def offset_of_max_timestamp(self) -> int:
        """The last offset of the batch holding ``max_timestamp`` (-1 when none)."""
        self._ensure_max_timestamp_loaded()
        return self._offset_of_max_timestamp

    def largest_timestamp(self) -> int:
        """The age reference for time retention: the max timestamp, else the last write time
        (``last_modified_ms``, wall time; Kafka uses the file's mtime)."""
        return self.max_timestamp if self.max_timestamp >= 0 else self.last_modified_ms

    # -- recovery and truncation ------------------------------------------------------------

    def recover(
        self, epoch_cache: LeaderEpochCache | None, last_epoch: int = NO_PARTITION_LEADER_EPOCH
    ) -> Recovered:
        """Rebuild the indexes from the ``.log``, validating every batch (`BatchWalk`), and cut
        the file at the first invalid or partial batch: the log ends there. ``last_epoch`` is
        the leader epoch of the batch before this segment (a batch below it is invalid)."""
        self._new_index_files()  # rebuilt from scratch: what the old files held does not matter
        walk = self._index_from_log(epoch_cache, last_epoch)
        valid_bytes = walk.position
        truncated = self.size_bytes - valid_bytes
        if truncated:
            self.log_file.truncate(valid_bytes)
            self.size_bytes = valid_bytes
            self._bytes_since_last_index_entry -= truncated
        self.mark_checked()
        self.offset_index.trim_to_valid_size()
        self.time_index.trim_to_valid_size()
        stop = walk.stop
        reason = None if stop is None else f"batch at position {stop.position}: {stop.reason}"
        return Recovered(truncated, walk.last_epoch, reason)

    def _index_from_log(self, epoch_cache: LeaderEpochCache | None, last_epoch: int) -> BatchWalk:
        """Index every valid batch from the start of the file into the (new, empty) indexes,
        assigning new leader epochs to ``epoch_cache`` on the way; returns the finished walk.
        Nothing is cut here: the walk says where the valid batches end."""
        self.size_bytes = self.log_file.size()
        walk = BatchWalk(
            self.log_file,
            0,
            self.size_bytes,
            next_offset=self.base_offset,
            last_epoch=last_epoch,
            end_offset=self._end_offset_bound(),
            gaps_below=self._gaps_below,
            epoch_starts=self._epoch_starts,
        )
        interval = self.config.index_interval_bytes
        found = index_batches(walk, self.offset_index, self.time_index, interval, epoch_cache)
        self._next_batch_at.clear()
        self._rolling_based_timestamp = None  # read again from the file if needed
        self._bytes_since_last_index_entry = self.size_bytes - found.last_entry_position
        self._max_timestamp = found.max_timestamp
        self._offset_of_max_timestamp = found.offset_of_max_timestamp
        self._max_timestamp_loaded = True
        self._append_final_time_entry()
        return walk

    def truncate_to(self, offset: int) -> int:
        """Remove every batch whose last offset is >= ``offset``, and, if the file holds a bad
        batch before that, everything from the bad batch on (a follower truncating to the
        first damaged offset gets a consistent log). The cut lands on a checked batch
        boundary. Returns the bytes removed."""
        damage = self._prefix_check.check_past_offset(offset, self._end_offset_bound())
        if damage is not None:
            cut_offset, cut_position = damage.next_offset, damage.position
        else:
            found = self.translate_offset(offset)
            if found is None:
                return 0
            cut_offset, cut_position = offset, found.position
        self.offset_index.truncate_to(cut_offset)
        self.time_index.truncate_to(cut_offset)
        self.resize_indexes(self.config.segment_index_bytes)
        removed = self.size_bytes - cut_position
        self._next_batch_at.clear()
        self.log_file.truncate(cut_position)
        self._prefix_check.on_truncate(cut_position)
        self.size_bytes = cut_position
        self._bytes_since_last_index_entry = 0
        if self.size_bytes == 0:
            self.created_ms = self.clock.wall_ms()  # empty again: its age starts over
            self._rolling_based_timestamp = None
        self._max_timestamp_loaded = False
        self._max_timestamp, self._offset_of_max_timestamp = NO_TIMESTAMP, -1
        if self.size_bytes == 0:
            self._max_timestamp_loaded = True
        return removed

    # -- lifecycle --------------------------------------------------------------------------

    def on_become_inactive(self) -> None:
        """The segment stops being the active one: write the final time-index entry, trim."""
        self._ensure_max_timestamp_loaded()
        self._append_final_time_entry()
        self.offset_index.trim_to_valid_size()
        self.time_index.trim_to_valid_size()

    def _append_final_time_entry(self) -> None:
        """Index the segment's max timestamp (kept in the slot reserved for it) unless the last
        entry already says so (e.g. the segment was trimmed when it became inactive).

        A sealed segment's index is trimmed to its entries, so it has no reserved slot: when
        its max timestamp had to be found by scanning the log (the index lost entries, or was
        written by a process that died before adding the final one), the file grows by one
        entry for it. Closing never fails because an index is full."""
        time_index = self.time_index
        if self._max_timestamp <= time_index.last_entry[0]:
            return
        if time_index.entries >= time_index.max_entries:
            time_index.resize((time_index.entries + 1) * time_index.ENTRY_SIZE)
        time_index.maybe_append(
            self._max_timestamp, self._offset_of_max_timestamp, skip_full_check=True
        )

    def resize_indexes(self, size_bytes: int) -> None:
        """Grow (or shrink) both index files, e.g. back to max size for the active segment."""
        self.offset_index.resize(size_bytes)
        self.time_index.resize(size_bytes)
        self._index_full = self.offset_index.is_full or self.time_index.is_full

    def flush(self) -> None:
        """fsync the log file and both indexes."""
        self.log_file.fsync()
        if self._offset_index is not None:
            self._offset_index.flush()
        if self._time_index is not None:
            self._time_index.flush()

    def close(self) -> None:
        """Write the final time-index entry, trim and unmap the indexes, close the file."""
        if self._max_timestamp_loaded and self._time_index is not None:
            self._append_final_time_entry()
        if self._offset_index is not None:
            self._offset_index.close()
        if self._time_index is not None:
            self._time_index.close()
        self.log_file.close()

    def close_without_trim(self) -> None:
        """Release descriptors only (after a storage error or a simulated crash)."""
        self.log_file.close()

    def delete(self) -> None:
        """Close and remove the segment's files."""
        if self._offset_index is not None:
            self._offset_index.close()
            self._offset_index = None
        if self._time_index is not None:
            self._time_index.close()
            self._time_index = None
        self.log_file.close()
        for suffix in (".log", ".index", ".timeindex"):
            self.fs.remove(self.path(suffix))

    def __repr__(self) -> str:
        return f"LogSegment(base_offset={self.base_offset}, size_bytes={self.size_bytes})"
