"""`Log`: one partition's log, a sequence of segments keyed by base offset (a `SegmentList`).

Theory of operation: offsets are dense and assigned by the leader (``append_as_leader``) or
copied from the leader (``append_as_follower``). The log end offset (LEO) is the offset the next
record gets. Three other offsets bound what is safe: the log start offset (earliest readable),
the recovery point (everything below it was fsynced: the flushed offset) and the high watermark
(HW, everything below it is committed; the replication layer decides its value, the log only
keeps it within [log start, LEO] and persists nothing itself).

Every OS error while appending, flushing or truncating takes the log offline: the error
surfaces as `StorageError`, and every later call raises it too, so nothing continues silently
after a failed write or fsync.

Producer state (``producers``, a `ProducerStateManager`) follows every change of the log: a
leader's append of an idempotent producer's batch is checked against it first (a retried batch
is answered with its first offsets and not written again; a gap or an old epoch is refused),
every append updates it, and roll, retention, truncation, open and close keep its snapshot files
in step (see ``producer_manager``). Cleaning leaves it alone: the state is built from batches as
they are appended, and the cleaner keeps the last batch of every producer (as Kafka's does).

Compaction: a compacted log (``cleanup.policy`` holding ``compact``) is cleaned by
`replog.log.log_cleaner`, which keeps the latest record of each key. Offsets stay, with gaps:
below the log's ``clean_offset`` (its ``cleaner-offset-checkpoint`` entry, made durable before
any cleaned data depends on it) offsets may be missing between batches and at the end of a
segment, and reads step over them; above it the log is dense. A follower appending a leader's
compacted batches moves its own clean offset past the gaps it receives (after flushing what it
holds), so its recovery accepts them too. Truncating below the clean offset lowers it.

Time: the log reads its injected `Clock`'s wall time (what record timestamps are compared with)
for segment creation, roll by ``segment.ms`` and retention by ``retention.ms``; no method takes
a time argument.
"""

from __future__ import annotations

import contextlib
import struct
from collections.abc import Iterator
from typing import TYPE_CHECKING, NamedTuple, NoReturn

import attrs

from replog.clock import SYSTEM_CLOCK, Clock
from replog.errors import (
    CorruptRecordError,
    FencedLeaderEpochError,
    InvalidOffsetError,
    OffsetOutOfRangeError,
    StorageError,
    invariant,
    unreachable,
)
from replog.log.checkpoints import LEADER_EPOCH_CHECKPOINT_FILE, CleanerOffsetCheckpoint
from replog.log.config import LogConfig
from replog.log.epoch_cache import LeaderEpochCache
from replog.log.fs import REAL_FS, FileSystem
from replog.log.incoming import (
    check_follower_batches,
    check_producer_batch,
    parse_batches,
    producer_batch,
    require_keys,
    stamp_producer_batches,
)
from replog.log.loader import RecoveryReport
from replog.log.producer_manager import ProducerStateManager
from replog.log.producer_state import ProducerAppend, ProducerState
from replog.log.read_path import FetchSlice, SegmentReadError, read_slice
from replog.log.records import LOG_OVERHEAD, NO_PARTITION_LEADER_EPOCH, RECORD_BATCH_OVERHEAD
from replog.log.recovered import RecoveredLog
from replog.log.retention import retention_cut
from replog.log.segment import BatchMeta, LogSegment
from replog.log.segment_list import PendingFlush, SegmentList

if TYPE_CHECKING:
    from replog.log.cleaner import CleaningTask

__all__ = ["AppendInfo", "FetchSlice", "Log", "PendingFlush", "LEADER_EPOCH_CHECKPOINT"]

LEADER_EPOCH_CHECKPOINT = LEADER_EPOCH_CHECKPOINT_FILE
"""The name of a partition directory's leader-epoch checkpoint file."""


# What a failed write, read or fsync raises: OSError from a segment file, StorageError from a
# checkpoint file (the leader-epoch checkpoint wraps its OSError itself).
_IO_ERRORS = (OSError, StorageError)


# The leader stamps each batch's base offset and leader epoch in place (outside the CRC), with
# the fields' own codecs bound here: two calls per batch on the produce path.
_new_tuple = tuple.__new__
"""Builds a named tuple without its Python-level constructor (0.17 vs 0.48 us per append)."""
_stamp_offset_and_epoch = struct.Struct(">qii").pack_into
"""Base offset, batch length and partition leader epoch: a v2 batch's first 16 bytes."""


class AppendInfo(NamedTuple):
    """What an append wrote: offsets [first_offset, last_offset], and sizes. A ``duplicate``
    wrote nothing: it repeats an idempotent producer's batch, which is at [first_offset,
    last_offset] with max timestamp ``max_timestamp`` (what the producer is answered)."""

    first_offset: int
    last_offset: int
    max_timestamp: int
    batch_count: int
    size_bytes: int
    duplicate: bool = False


@attrs.define(eq=False)
class Log:
    """A partition log. Open with `Log.open`; see the module docstring for the offsets."""

    dir_path: str
    config: LogConfig
    fs: FileSystem
    clock: Clock
    segments: SegmentList
    epoch_cache: LeaderEpochCache
    log_start_offset: int
    recovery_point: int
    high_watermark: int
    recovery_report: RecoveryReport
    producers: ProducerStateManager
    _next_offset: int
    _offline_reason: str | None = None
    #: below this offset the log is compacted and offsets may be missing (module docstring)
    clean_offset: int = 0
    _clean_checkpoint: CleanerOffsetCheckpoint | None = None
    #: a crash cut a cleaning short: the next one starts from the log start (Kafka does so
    #: when it has no checkpoint), since the clean offset may cover data never cleaned
    clean_from_log_start: bool = False
    #: grows whenever segments go away under a running cleaning (truncation, retention,
    #: close), which makes its outcome stale
    cleaning_generation: int = 0
    #: the cleaning running off the loop on this log, aborted when the log changes under it
    cleaning: CleaningTask | None = None

    @classmethod
    def open(
        cls,
        dir_path: str,
        config: LogConfig | None = None,
        *,
        fs: FileSystem = REAL_FS,
        clock: Clock = SYSTEM_CLOCK,
        recovery_point: int = 0,
        log_start_offset: int = 0,
        high_watermark: int = 0,
        had_clean_shutdown: bool = False,
    ) -> Log:
        """Open (creating if needed) and recover the log in ``dir_path`` (`RecoveredLog`).
        ``clock`` gives the wall time segment ages and time retention are measured with.
        `CorruptRecordError` when a batch the producer state is rebuilt from is damaged."""
        config = config or LogConfig()
        recovered = RecoveredLog.open(
            fs,
            dir_path,
            config,
            clock=clock,
            recovery_point=recovery_point,
            log_start_offset=log_start_offset,
            had_clean_shutdown=had_clean_shutdown,
        )
        start, end = recovered.log_start_offset, recovered.log_end_offset
        log = cls(
            dir_path=dir_path,
            config=config,
            fs=fs,
            clock=clock,
            segments=recovered.segments,
            epoch_cache=recovered.epoch_cache,
            log_start_offset=start,
            recovery_point=recovered.recovery_point,
            high_watermark=min(max(high_watermark, start), end),
            recovery_report=recovered.report,
            producers=recovered.producers,
            next_offset=end,
            clean_offset=recovered.clean_offset,
            clean_checkpoint=recovered.clean_checkpoint,
            clean_from_log_start=recovered.report.interrupted_cleaning,
        )
        if log.clean_offset > end:
            # What the clean offset covered was lost (the entry was written before data that
            # never became durable): new appends there are dense again.
            log.clean_from_log_start = True
            with log.storage_errors("cleaner checkpoint write"):
                log.set_clean_offset(end)
        return log

    # -- state ------------------------------------------------------------------------------

    @property
    def log_end_offset(self) -> int:
        """LEO: the offset the next appended record will get."""
        return self._next_offset

    @property
    def active_segment(self) -> LogSegment:
        """The segment appends go to (the last one)."""
        return self.segments.active

    @property
    def size_bytes(self) -> int:
        """Bytes across all segments."""
        return self.segments.size_bytes

    @property
    def is_offline(self) -> bool:
        """True after a storage error: the log accepts nothing until reopened."""
        return self._offline_reason is not None

    @property
    def producer_state(self) -> ProducerState:
        """The idempotent producers' state (what a log cleaner must keep rebuildable: the last
        batch of every producer in ``producer_state.active_producers``)."""
        return self.producers.state

    def latest_epoch(self) -> int | None:
        """The newest leader epoch in the epoch cache (the last fetched epoch of a follower)."""
        return self.epoch_cache.latest_epoch

    def end_offset_for_epoch(self, epoch: int) -> tuple[int, int]:
        """OffsetsForLeaderEpoch: (largest epoch <= ``epoch``, its end offset)."""
        return self.epoch_cache.end_offset_for(epoch, self._next_offset)

    def set_clean_offset(self, offset: int) -> None:
        """Make ``offset`` the clean offset: durable in ``cleaner-offset-checkpoint`` first,
        then offsets below it may be missing. `StorageError` if the checkpoint cannot be
        written; `InvalidOffsetError` if this log's directory name is no partition's (its entry
        could not be written) and gaps would be allowed."""
        if offset == self.clean_offset:
            return
        if self._clean_checkpoint is None:
            if offset > self.clean_offset:
                raise InvalidOffsetError(
                    f"{self.dir_path} is not named <topic>-<partition>: it cannot record a "
                    "clean offset, so it cannot hold compacted data"
                )
        else:
            self._clean_checkpoint.write(offset)
        self.clean_offset = offset
        self.segments.set_gaps_below(offset)

    def _segments_changed(self) -> None:
        """Segments went away or were cut: a running cleaning read what is no longer there."""
        self.cleaning_generation += 1
        if self.cleaning is not None:
            self.cleaning.abort()

    def _check_online(self) -> None:
        if self._offline_reason is not None:
            raise StorageError(
                f"log {self.dir_path} is offline: {self._offline_reason}", self.dir_path
            )

    def _fail(self, action: str, exc: OSError | StorageError | CorruptRecordError) -> NoReturn:
        self._offline_reason = f"{action} failed: {exc}"
        raise StorageError(f"log {self.dir_path}: {action} failed: {exc}", self.dir_path) from exc

    @contextlib.contextmanager
    def storage_errors(self, action: str) -> Iterator[None]:
        """Run the file IO of ``action`` as every `Log` method does: on an offline log raise
        `StorageError`; an `OSError` takes the log offline and surfaces as `StorageError`.
        (For readers of the segments outside this class, such as the time lookups.)"""
        self._check_online()
        try:
            yield
        except _IO_ERRORS as exc:
            self._fail(action, exc)

    # -- append -----------------------------------------------------------------------------

    def append_as_leader(
        self, batch: bytes | bytearray | memoryview, leader_epoch: int
    ) -> AppendInfo:
        """Validate ``batch`` (one or more record batches), give it offsets from the LEO,
        stamp ``leader_epoch`` into it, and append it. The CRC does not cover either field.
        `FencedLeaderEpochError` if ``leader_epoch`` is below the last batch's: leader epochs
        never fall along a log (recovery would end the log there). On a compacted log every
        record needs a key (`InvalidRecordError`, Kafka's INVALID_RECORD).

        Idempotent producers' batches are checked against the producer state first: a retry of
        a batch already written returns its offsets (``duplicate``) and writes nothing; a
        sequence gap or an old epoch raise `OutOfOrderSequenceError` or
        `InvalidProducerEpochError` and write nothing."""
        if self._offline_reason is not None:
            self._check_online()
        data = bytearray(batch)
        if self.config.compact:
            require_keys(data)
        offset = first_offset = self._next_offset
        if len(data) >= RECORD_BATCH_OVERHEAD and self.epoch_cache.latest_epoch == leader_epoch:
            fast = self._append_one_fast(data, offset, leader_epoch)
            if fast is not None:
                return fast
        last_batch_epoch = self._last_batch_epoch()
        if leader_epoch < last_batch_epoch:
            raise FencedLeaderEpochError(leader_epoch, last_batch_epoch)
        metas, produced, _ = stamp_producer_batches(data, offset, leader_epoch, self._size_limit)
        duplicate = self._check_producers(produced)
        if duplicate is not None:
            return duplicate
        if self.epoch_cache.latest_epoch != leader_epoch:
            self._assign_epoch(leader_epoch, first_offset)
        info = self._append(data, metas, first_offset)
        self.producers.on_append(produced)
        return info

    def _check_producers(self, produced: list[ProducerAppend]) -> AppendInfo | None:
        """The answer to a retried idempotent batch (nothing is written), or None to append;
        raises for a batch the producer state refuses."""
        if not produced:
            return None
        duplicate = self.producers.state.check_append(produced)
        if duplicate is None:
            return None
        return AppendInfo(
            duplicate.first_offset, duplicate.last_offset, duplicate.timestamp, 0, 0, True
        )

    def _append_one_fast(
        self, data: bytearray, offset: int, leader_epoch: int
    ) -> AppendInfo | None:
        """The common produce: one batch that needs no roll (an index entry, when due, is made
        as the general path makes it). Same checks as the general path, fewer steps; None means
        "take the general path". It reads no clock:
        the segment's first batch has a timestamp, so neither the time roll nor retention looks
        at ``last_modified_ms``."""
        checked = check_producer_batch(data, 0)
        size, last_offset_delta, max_timestamp, producer_id = checked[:4]
        config = self.config
        if size != len(data) or size > config.max_message_bytes or size > config.segment_bytes:
            return None
        last = offset + last_offset_delta
        produced = None
        if producer_id >= 0:  # an idempotent producer's batch
            produced = [producer_batch(checked, offset, last)]
            duplicate = self._check_producers(produced)
            if duplicate is not None:
                return duplicate
        _stamp_offset_and_epoch(data, 0, offset, size - LOG_OVERHEAD, leader_epoch)
        segment = self.segments.active
        try:
            if not segment.try_append_one(data, last, max_timestamp):
                return None
        except _IO_ERRORS as exc:
            self._fail("append", exc)
        self._next_offset = last + 1
        if produced is not None:
            self.producers.on_append(produced)
        return _new_tuple(AppendInfo, (offset, last, max_timestamp, 1, size, False))

    @property
    def _size_limit(self) -> int:
        return min(self.config.max_message_bytes, self.config.segment_bytes)

    def append_as_follower(self, batches: bytes | bytearray | memoryview) -> AppendInfo | None:
        """Append batches copied from the leader, keeping their offsets and epochs. A partial
        batch at the end (the fetch hit its byte limit) is dropped; None if nothing is whole.

        The batches must continue the log as recovery expects it to: each starts at the offset
        after the previous one, or later (the leader's cleaner removed the offsets between;
        they become part of this log's clean section), never earlier (`InvalidOffsetError`),
        and no leader epoch falls below the one before it (`CorruptRecordError`)."""
        self._check_online()
        found = parse_batches(batches, whole=False)
        if not found:
            return None
        metas, produced, gap_end = check_follower_batches(
            found, self._next_offset, self._last_batch_epoch(), self._size_limit, self.dir_path
        )
        if gap_end > self.clean_offset:
            self._allow_gaps_below(gap_end)
        for _, header in found:
            epoch = header.partition_leader_epoch
            if epoch >= 0 and epoch != self.epoch_cache.latest_epoch:
                self._assign_epoch(epoch, header.base_offset)
        first_position = found[0][0]
        end_position = found[-1][0] + found[-1][1].size_bytes
        view = memoryview(batches)[first_position:end_position]
        info = self._append(view, metas, found[0][1].base_offset)
        self.producers.on_append(produced)
        return info

    def _allow_gaps_below(self, offset: int) -> None:
        """Before appending batches with offsets missing below ``offset``: make everything the
        log holds durable, then the clean offset. Recovery then takes the gaps for compacted
        data, never for a tail a crash cut (nothing below ``offset`` can be lost)."""
        self.flush()
        try:
            self.set_clean_offset(offset)
        except StorageError as exc:
            self._fail("cleaner checkpoint write", exc)

    def _append(
        self, data: bytes | bytearray | memoryview, metas: list[BatchMeta], first_offset: int
    ) -> AppendInfo:
        last = metas[-1]
        if len(metas) == 1:
            max_timestamp = last.max_timestamp
        else:
            max_timestamp = max(meta.max_timestamp for meta in metas)
        segment = self.segments.active
        try:
            if segment.should_roll(len(data), max_timestamp, last.last_offset):
                segment = self._roll(max(first_offset, self._next_offset))
            segment.append(data, metas)
        except _IO_ERRORS as exc:
            self._fail("append", exc)
        segment.last_modified_ms = self.clock.wall_ms()
        self._next_offset = last.last_offset + 1
        return AppendInfo(first_offset, last.last_offset, max_timestamp, len(metas), len(data))

    def _last_batch_epoch(self) -> int:
        """The leader epoch of the last batch (-1 if it has none, or the log is empty): the
        epoch cache's entry for the last offset (an entry a new leader assigned without
        writing starts at the LEO, so it does not count)."""
        if self._next_offset <= self.log_start_offset:
            return NO_PARTITION_LEADER_EPOCH
        epoch = self.epoch_cache.epoch_for_offset(self._next_offset - 1)
        return NO_PARTITION_LEADER_EPOCH if epoch is None else epoch

    def _assign_epoch(self, epoch: int, start_offset: int) -> None:
        try:
            self.epoch_cache.assign(epoch, start_offset)
        except _IO_ERRORS as exc:
            self._fail("leader-epoch checkpoint write", exc)

    def assign_epoch_start_offset(self, epoch: int, start_offset: int) -> None:
        """Record that ``epoch`` starts at ``start_offset`` (a new leader does this at once)."""
        self._check_online()
        self._assign_epoch(epoch, start_offset)

    # -- roll -------------------------------------------------------------------------------

    def roll(self) -> LogSegment:
        """Start a new segment at the LEO (no-op if the active segment is empty)."""
        self._check_online()
        try:
            return self._roll(self._next_offset)
        except _IO_ERRORS as exc:
            self._fail("roll", exc)

    def _roll(self, new_base: int) -> LogSegment:
        active = self.active_segment
        if active.base_offset == new_base:
            invariant(active.size_bytes == 0, f"roll onto non-empty segment {new_base}")
            return active
        invariant(new_base > active.base_offset, f"roll base {new_base} not after active")
        active.next_base_offset = new_base
        active.on_become_inactive()
        self.producers.on_roll(new_base)
        segment = LogSegment.open(
            self.fs, self.dir_path, new_base, self.config, self.clock, create=True
        )
        segment.gaps_below = self.clean_offset
        self.segments.add(segment)
        return segment

    # -- read -------------------------------------------------------------------------------

    def read(
        self,
        start_offset: int,
        max_bytes: int,
        *,
        max_offset: int | None = None,
        min_one_batch: bool = True,
    ) -> FetchSlice:
        """Batches from the one holding ``start_offset``, at most ``max_bytes`` (the first batch
        whole when ``min_one_batch``), never reaching ``max_offset`` (exclusive, e.g. the HW).
        Raises `OffsetOutOfRangeError` outside [log start, LEO].

        Never serves a damaged batch (see `LogSegment.read`): the slice ends before one, and a
        read that starts at one raises `CorruptRecordError` naming the segment, the position
        and the offsets that cannot be served (``first_offset``: where a follower truncates)."""
        self._check_online()
        end = self._next_offset
        if start_offset < self.log_start_offset or start_offset > end:
            raise OffsetOutOfRangeError(start_offset, self.log_start_offset, end)
        try:
            return read_slice(
                self.segments,
                start_offset,
                max_bytes,
                limit_offset=end if max_offset is None else min(max_offset, end),
                log_end_offset=end,
                clean_offset=self.clean_offset,
                min_one_batch=min_one_batch,
            )
        except SegmentReadError as failed:
            self._fail("read", failed.cause)

    def batches(self, start_offset: int | None = None) -> Iterator[bytes]:
        """Every batch from ``start_offset`` (default: log start) to the LEO, as bytes."""
        offset = self.log_start_offset if start_offset is None else start_offset
        while offset < self._next_offset:
            with self.storage_errors("read"):
                data = self.read(offset, 1 << 20).to_bytes()
            found = parse_batches(data, whole=False)
            if not found:
                return
            for position, header in found:
                if header.last_offset >= offset:
                    yield bytes(data[position : position + header.size_bytes])
                    offset = header.last_offset + 1

    # -- high watermark and log start -------------------------------------------------------

    def update_high_watermark(self, high_watermark: int) -> int:
        """Set the HW clamped to [log start, LEO] (a follower's HW may go backwards)."""
        self.high_watermark = min(max(high_watermark, self.log_start_offset), self._next_offset)
        return self.high_watermark

    def maybe_increment_high_watermark(self, high_watermark: int) -> bool:
        """Advance the HW if ``high_watermark`` is larger; it must not pass the LEO."""
        if high_watermark > self._next_offset:  # (every produce comes here: no eager message)
            unreachable(f"HW {high_watermark} past LEO {self._next_offset} in {self.dir_path}")
        if high_watermark <= self.high_watermark:
            return False
        self.high_watermark = high_watermark
        return True

    def maybe_increment_log_start_offset(self, offset: int) -> bool:
        """Move the log start forward (DeleteRecords, or the leader's on a follower); never past
        the HW. Whole segments below it go at the next retention pass."""
        if offset <= self.log_start_offset:
            return False
        invariant(
            offset <= self.high_watermark, f"log start {offset} past HW {self.high_watermark}"
        )
        self.log_start_offset = offset
        try:
            self.epoch_cache.truncate_from_start(offset)
        except _IO_ERRORS as exc:
            self._fail("leader-epoch checkpoint write", exc)
        return True

    # -- flush ------------------------------------------------------------------------------

    def begin_flush(self) -> PendingFlush | None:
        """Capture what a flush must cover (every segment holding unflushed data); None if all
        is flushed. Call on the thread that appends."""
        self._check_online()
        target = self._next_offset
        if target <= self.recovery_point:
            return None
        return self.segments.flush_from(self.recovery_point, target)

    def complete_flush(self, pending: PendingFlush) -> None:
        """Advance the recovery point after ``pending.run()`` succeeded."""
        self.recovery_point = max(
            self.recovery_point, min(pending.target_offset, self._next_offset)
        )

    def flush(self) -> None:
        """fsync everything appended so far and advance the recovery point (group commit: one
        call covers every batch appended before it)."""
        pending = self.begin_flush()
        if pending is None:
            return
        try:
            pending.run()
        except _IO_ERRORS as exc:
            self._fail("fsync", exc)
        self.complete_flush(pending)

    def mark_offline(self, reason: str) -> None:
        """Take the log offline after an error seen elsewhere (e.g. a worker thread's fsync)."""
        self._offline_reason = reason

    # -- truncation -------------------------------------------------------------------------

    def truncate_to(self, offset: int) -> bool:
        """Remove everything at or after ``offset``. Returns whether data was removed. A
        damaged batch met replaying the producer state takes the log offline (`StorageError`)."""
        self._check_online()
        if offset < 0:
            raise InvalidOffsetError(f"cannot truncate to negative offset {offset}")
        if offset >= self._next_offset:
            try:
                self.epoch_cache.truncate_from_end(self._next_offset)
            except _IO_ERRORS as exc:
                self._fail("leader-epoch checkpoint write", exc)
            return False
        if offset < self.segments.first_base:
            self.truncate_fully_and_start_at(offset)
            return True
        self._segments_changed()
        try:
            self.segments.delete_above(offset)
            active = self.segments.active
            active.next_base_offset = None
            active.truncate_to(offset)
            self._next_offset = active.read_next_offset()
            active.resize_indexes(self.config.segment_index_bytes)
            self.epoch_cache.truncate_from_end(self._next_offset)
            self.producers.truncate_to(self.segments, self._next_offset, self.clock.wall_ms())
            if self.clean_offset > self._next_offset:
                self.set_clean_offset(self._next_offset)  # what is appended next is dense
        except _IO_ERRORS as exc:
            self._fail("truncate", exc)
        except CorruptRecordError as exc:  # the producer state's replay met a damaged batch:
            self._fail("truncate", exc)  # the state no longer matches the files
        self.log_start_offset = min(self.log_start_offset, self._next_offset)
        self.recovery_point = min(self.recovery_point, self._next_offset)
        self.high_watermark = min(self.high_watermark, self._next_offset)
        return True

    def truncate_fully_and_start_at(self, offset: int) -> None:
        """Delete every segment and restart empty at ``offset`` (follower out of range)."""
        self._check_online()
        self._segments_changed()
        try:
            self.segments.delete_all()
            self.segments.add(
                LogSegment.open(
                    self.fs, self.dir_path, offset, self.config, self.clock, create=True
                )
            )
            self.epoch_cache.clear_and_flush()
            self.producers.truncate_fully(offset)
            if self.clean_offset > offset:
                self.set_clean_offset(offset)
        except _IO_ERRORS as exc:
            self._fail("truncate", exc)
        self._next_offset = offset
        self.log_start_offset = offset
        self.recovery_point = offset
        self.high_watermark = offset

    # -- retention --------------------------------------------------------------------------

    def delete_old_segments(self) -> int:
        """Apply retention (log start breach, size, time), whole segments only, oldest first,
        never a segment that reaches past the HW. Time retention compares the clock's wall time
        with each segment's largest timestamp. Returns the number deleted."""
        with self.storage_errors("retention"):
            return self._delete_old_segments()

    def _delete_old_segments(self) -> int:
        segments: list[LogSegment] = list(self.segments.values())
        count = retention_cut(
            segments,
            log_end_offset=self._next_offset,
            high_watermark=self.high_watermark,
            log_start_offset=self.log_start_offset,
            config=self.config,
            now_ms=self.clock.wall_ms(),
        )
        if count == 0:
            return 0
        self._segments_changed()
        if count == len(segments):
            self._roll(self._next_offset)  # an active segment always remains
        deleted = self.segments.delete_oldest(count)
        self.producers.on_segments_deleted(deleted)
        new_start = self.segments.first_base
        if new_start > self.log_start_offset:
            self.log_start_offset = new_start
            self.epoch_cache.truncate_from_start(new_start)
        return count

    # -- lifecycle --------------------------------------------------------------------------

    def close(self) -> None:
        """Close every segment (trimming indexes). Does not flush: call `flush` first.

        A full index never makes this fail. An IO error does: every segment is still closed,
        then the log goes offline and `StorageError` is raised (so no clean-shutdown marker
        vouches for what may not have reached the disk). A running cleaning is aborted."""
        self._segments_changed()
        failure: OSError | StorageError | None = None
        if self._offline_reason is None:
            try:  # the clean-shutdown snapshot: the next open replays nothing
                self.producers.on_close(self._next_offset)
            except _IO_ERRORS as exc:
                failure = exc
        closing = self.segments.close_all(trim=self._offline_reason is None and failure is None)
        failure = failure or closing
        if failure is not None:
            self._fail("close", failure)

    def remove_expired_producers(self) -> int:
        """Drop the state of idempotent producers idle for ``producer_id_expiration_ms`` (by
        the clock's wall time against their last batch's timestamp); returns how many."""
        return len(self.producers.remove_expired(self.clock.wall_ms()))

    def abandon(self) -> None:
        """Drop file descriptors without writing anything (after a simulated crash)."""
        self._segments_changed()
        self.segments.abandon_all()

    def __repr__(self) -> str:
        return (
            f"Log({self.dir_path!r}, start={self.log_start_offset}, hw={self.high_watermark}, "
            f"leo={self._next_offset}, segments={len(self.segments)})"
        )
