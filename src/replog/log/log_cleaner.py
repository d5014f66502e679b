"""The log cleaner on the loop: which log to clean, what to clean of it, and swapping the
cleaned segments in (Kafka's LogCleanerManager and LocalLog.replaceSegments, by their rules).

Theory of operation. `LogCleanerManager.maybe_begin` looks at every open compacted log
(``cleanup.policy`` with ``compact``) and measures it (`measure`):

- the **first dirty offset** is the log's clean offset (its ``cleaner-offset-checkpoint``
  entry), or the log start when that lies outside the log or a crash cut the last cleaning
  short;
- the **first uncleanable offset** is the lowest of the high watermark (nothing uncommitted is
  cleaned), the active segment's base offset, the recovery point (nothing that could still be
  lost: replog's addition, so that every offset gap below the clean offset is one a cleaner
  made, never one a crash left), and, with ``min.compaction.lag.ms``, the first segment
  holding a record younger than the lag; rounded down to the base of the segment holding it;
- its **dirty ratio** is the bytes of the segments from the first dirty to the first
  uncleanable offset over those plus the bytes before the first dirty offset.

The log with the highest ratio above its ``min.cleanable.dirty.ratio``, or one whose oldest
dirty record is older than ``max.compaction.lag.ms``, is cleaned: `begin_cleaning` captures a
`CleaningPlan` and hands back a `CleaningTask` whose ``run`` (`replog.log.cleaner`) does the
reading and writing off the loop. `complete_cleaning` takes the result back on the loop:

- a task the log aborted (truncated, retention, closed: ``Log.cleaning_generation`` moved) or
  that failed leaves nothing behind (its ``.cleaned`` files are deleted); a failure other than
  an abort marks the log uncleanable until the broker restarts (Kafka does the same);
- otherwise the clean offset moves to the end of what was cleaned, durably, *before* anything
  else (reads and recovery then accept the gaps the cleaned segments have), and each group is
  swapped in: its ``.cleaned`` files renamed ``.swap``, the old segments deleted, the ``.swap``
  files renamed to their final names, the directory fsynced after each step. A crash anywhere
  in between is settled by the loader (`replog.log.loader`): before the ``.swap`` renames
  finish the old segments stay; after, the swap completes.
"""

from __future__ import annotations

import enum
import logging
from collections.abc import Iterable, Mapping

import attrs

from replog.errors import StorageError, invariant, unreachable
from replog.log.cleaner import (
    CleanedGroup,
    CleaningAbortedError,
    CleaningPlan,
    CleaningTask,
    SourceSegment,
)
from replog.log.loader import CLEANED_SUFFIX, SWAP_SUFFIX
from replog.log.log import Log
from replog.log.segment import LogSegment, log_file_name
from replog.topics import TopicPartition

__all__ = [
    "CleaningResult",
    "LogCleanerManager",
    "LogToClean",
    "begin_cleaning",
    "complete_cleaning",
    "measure",
]

_log = logging.getLogger(__name__)
_SEGMENT_SUFFIXES = (".index", ".timeindex", ".log")  # the .log last: it names the segment


@attrs.frozen
class LogToClean:
    """A compacted log's dirty section as measured now (module docstring)."""

    first_dirty_offset: int
    first_uncleanable_offset: int
    clean_bytes: int
    cleanable_bytes: int
    needs_compaction_now: bool

    @property
    def total_bytes(self) -> int:
        """Clean plus cleanable bytes."""
        return self.clean_bytes + self.cleanable_bytes

    @property
    def cleanable_ratio(self) -> float:
        """Cleanable bytes over total bytes (0 for an empty log)."""
        return self.cleanable_bytes / self.total_bytes if self.total_bytes else 0.0


def measure(log: Log, now_ms: int) -> LogToClean:
    """The dirty section of ``log`` at wall time ``now_ms`` (module docstring)."""
    start = log.log_start_offset
    first_dirty = log.clean_offset
    if log.clean_from_log_start or not start <= first_dirty <= log.log_end_offset:
        first_dirty = start
    active_base = log.active_segment.base_offset
    bound = min(log.high_watermark, active_base, log.recovery_point)
    lag_ms = log.config.min_compaction_lag_ms
    segments: list[LogSegment] = list(log.segments.values())
    ends = log.segments.ends(log.log_end_offset)
    dirty = [s for s in segments[:-1] if ends[s.base_offset] > first_dirty]  # non-active
    if lag_ms > 0:
        young = [s.base_offset for s in dirty if s.largest_timestamp() > now_ms - lag_ms]
        bound = min([bound, *young])
    bound = max(first_dirty, bound)
    first_uncleanable = log.segments.floor_base(bound)
    clean_bytes = sum(s.size_bytes for s in segments if s.base_offset < first_dirty)
    low = log.segments.floor_base(min(first_dirty, first_uncleanable))
    cleanable = sum(s.size_bytes for s in segments if low <= s.base_offset < first_uncleanable)
    first_timestamps = [t for s in dirty if (t := s.first_batch_timestamp()) > 0]
    max_lag_ms = log.config.max_compaction_lag_ms
    needs_now = bool(first_timestamps) and min(first_timestamps) < now_ms - max_lag_ms
    return LogToClean(first_dirty, first_uncleanable, clean_bytes, cleanable, needs_now)


def is_cleanable(log: Log, measured: LogToClean) -> bool:
    """Kafka's choice: something to clean, and either dirty enough or overdue."""
    if measured.total_bytes == 0 or measured.cleanable_bytes == 0:
        return False
    if measured.needs_compaction_now:
        return True
    return measured.cleanable_ratio > log.config.min_cleanable_dirty_ratio


def begin_cleaning(
    log: Log, measured: LogToClean, now_ms: int, map_memory_bytes: int
) -> CleaningTask:
    """Plan a cleaning of ``log`` (loop side) and register it there, so that truncation,
    retention or closing the log aborts it. Run ``task.run()`` anywhere, then
    `complete_cleaning` on the loop."""
    invariant(log.cleaning is None, f"{log.dir_path} is already being cleaned")
    end = measured.first_uncleanable_offset
    first_dirty = measured.first_dirty_offset
    sources = []
    ends = log.segments.ends(log.log_end_offset)
    with log.storage_errors("cleaning plan"):
        for segment in list(log.segments.values()):
            if segment.base_offset >= end:
                break
            map_start = 0
            next_base = ends[segment.base_offset]
            if segment.base_offset < first_dirty < next_base:
                found = segment.translate_offset(first_dirty)
                map_start = 0 if found is None else found.position
            sources.append(
                SourceSegment(
                    base_offset=segment.base_offset,
                    next_base_offset=next_base,
                    size_bytes=segment.size_bytes,
                    offset_index_bytes=segment.offset_index.entries * 8,
                    time_index_bytes=segment.time_index.entries * 12,
                    last_modified_ms=segment.last_modified_ms,
                    map_start_position=map_start,
                )
            )
    plan = CleaningPlan(
        dir_path=log.dir_path,
        fs=log.fs,
        config=log.config,
        clock=log.clock,
        segments=tuple(sources),
        first_dirty_offset=first_dirty,
        first_uncleanable_offset=end,
        gaps_below=log.clean_offset,
        now_ms=now_ms,
        map_memory_bytes=map_memory_bytes,
        producer_expiration_ms=log.config.producer_id_expiration_ms,
    )
    task = CleaningTask(plan, log.cleaning_generation)
    log.cleaning = task
    return task


class CleaningResult(enum.Enum):
    """What `complete_cleaning` did."""

    SWAPPED = "swapped"  # the cleaned segments replaced the old ones
    DISCARDED = "discarded"  # the log changed (or was aborted) meanwhile: try again later
    FAILED = "failed"  # the pass failed: the log is uncleanable until a restart


def complete_cleaning(log: Log, task: CleaningTask) -> CleaningResult:
    """Swap a finished task's segments into ``log``, or discard them (module docstring). A
    failed swap takes the log offline (`StorageError`)."""
    if log.cleaning is task:
        log.cleaning = None
    stale = task.aborted or task.generation != log.cleaning_generation or log.is_offline
    outcome = task.outcome
    if stale or outcome is None:
        _discard(log, task)
        if stale or isinstance(task.error, CleaningAbortedError):
            return CleaningResult.DISCARDED
        _log.error("cleaning %s failed: %s", log.dir_path, task.error, exc_info=task.error)
        return CleaningResult.FAILED
    with log.storage_errors("cleaning swap"):
        if outcome.end_offset > log.clean_offset:
            log.set_clean_offset(outcome.end_offset)
        for group in outcome.groups:
            _swap(log, group)
    log.clean_from_log_start = False
    stats = outcome.stats
    _log.info(
        "cleaned %s up to offset %d: %d of %d bytes kept (%d of %d records), %d ms",
        log.dir_path, outcome.end_offset, stats.bytes_written, stats.bytes_read,
        stats.records_written, stats.records_read, stats.elapsed_ms,
    )  # fmt: skip
    return CleaningResult.SWAPPED


def _swap(log: Log, group: CleanedGroup) -> None:
    """Replace the group's old segments by its cleaned one, crash-safely (module docstring)."""
    fs, dir_path, base = log.fs, log.dir_path, group.base_offset
    old = [log.segments[b] for b in group.old_bases]

    def path(suffix: str, temp: str) -> str:
        return f"{dir_path}/{log_file_name(base, suffix)}{temp}"

    for suffix in _SEGMENT_SUFFIXES:
        fs.rename(path(suffix, CLEANED_SUFFIX), path(suffix, SWAP_SUFFIX))
    fs.fsync_dir(dir_path)
    for segment in old:
        log.segments.remove(segment.base_offset)
        segment.delete()
    for suffix in _SEGMENT_SUFFIXES:
        fs.rename(path(suffix, SWAP_SUFFIX), path(suffix, ""))
    fs.fsync_dir(dir_path)
    cleaned = LogSegment.open(fs, dir_path, base, log.config, log.clock, create=False)
    cleaned.next_base_offset = group.next_base_offset
    cleaned.gaps_below = log.clean_offset
    cleaned.mark_checked()
    cleaned.last_modified_ms = group.last_modified_ms
    log.segments.add(cleaned)


def _discard(log: Log, task: CleaningTask) -> None:
    """Delete whatever ``.cleaned`` files the task wrote (best effort: the loader deletes any
    left over at the next open)."""
    try:
        for source in task.plan.segments:
            for suffix in _SEGMENT_SUFFIXES:
                name = log_file_name(source.base_offset, suffix) + CLEANED_SUFFIX
                log.fs.remove(f"{log.dir_path}/{name}")
    except OSError as exc:
        _log.warning("%s: cannot delete a discarded cleaning's files: %s", log.dir_path, exc)


@attrs.define
class LogCleanerManager:
    """Which logs of a broker get cleaned: at most one cleaning at a time, the dirtiest log
    first, logs whose cleaning failed left alone until a restart."""

    uncleanable: set[TopicPartition] = attrs.field(factory=set)
    in_flight: tuple[TopicPartition, CleaningTask] | None = None

    def maybe_begin(
        self, logs: Mapping[TopicPartition, Log], now_ms: int, map_memory_bytes: int
    ) -> CleaningTask | None:
        """Plan a cleaning of the dirtiest cleanable log (None: nothing to clean, or one is
        already running)."""
        if self.in_flight is not None:
            return None
        chosen = choose_filthiest(logs.items(), now_ms, self.uncleanable)
        if chosen is None:
            return None
        tp, measured = chosen
        log = logs[tp]
        try:
            task = begin_cleaning(log, measured, now_ms, map_memory_bytes)
        except StorageError as exc:
            _log.error("cannot plan a cleaning of %s: %s", tp, exc)
            return None
        self.in_flight = (tp, task)
        return task

    def complete(self, logs: Mapping[TopicPartition, Log], task: CleaningTask) -> CleaningResult:
        """Take a finished task back (its log may be gone: then its files went with it)."""
        in_flight = self.in_flight
        if in_flight is None or in_flight[1] is not task:
            unreachable(f"an unknown cleaning of {task.plan.dir_path}")
        tp = in_flight[0]
        self.in_flight = None
        log = logs.get(tp)
        if log is None:
            return CleaningResult.DISCARDED
        result = complete_cleaning(log, task)
        if result is CleaningResult.FAILED:
            self.uncleanable.add(tp)
        return result

    def forget(self, tp: TopicPartition) -> None:
        """The log of ``tp`` was deleted."""
        self.uncleanable.discard(tp)


def choose_filthiest(
    logs: Iterable[tuple[TopicPartition, Log]], now_ms: int, skip: set[TopicPartition]
) -> tuple[TopicPartition, LogToClean] | None:
    """The compacted log with the highest cleanable ratio among those `is_cleanable`."""
    best: tuple[TopicPartition, LogToClean] | None = None
    for tp, log in logs:
        if not log.config.compact or log.is_offline or tp in skip or log.cleaning is not None:
            continue
        try:
            with log.storage_errors("log cleaner"):
                measured = measure(log, now_ms)
        except StorageError as exc:
            _log.error("cannot measure %s for cleaning: %s", tp, exc)
            continue  # the log went offline
        if not is_cleanable(log, measured):
            continue
        if best is None or measured.cleanable_ratio > best[1].cleanable_ratio:
            best = (tp, measured)
    return best
