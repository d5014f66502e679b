"""Helpers for the log cleaner's tests: compacted logs on a fault-injecting filesystem, keyed
appends, what a log serves, and one cleaning run in place (plan, pass, swap)."""

from __future__ import annotations

from collections.abc import Sequence

from replog.clock import ManualClock
from replog.log import decode_records, encode_batch, iter_batches
from replog.log.cleaner import CleaningTask
from replog.log.config import LogConfig
from replog.log.fs import FileSystem
from replog.log.log import Log
from replog.log.log_cleaner import CleaningResult, begin_cleaning, complete_cleaning, measure
from replog.log.records import NO_PRODUCER_ID

# Small segments and indexes: many segments, and index entries in each.
COMPACT = LogConfig(
    segment_bytes=600,
    segment_index_bytes=4096,
    index_interval_bytes=100,
    cleanup_policy="compact",
    min_cleanable_dirty_ratio=0.0,
    delete_retention_ms=1_000,
)
MEMORY_BYTES = 1 << 20

Item = tuple[bytes | None, bytes | None]  # (key, value); a None value is a tombstone
Served = tuple[int, bytes | None, bytes | None]  # (offset, key, value)


def open_log(
    fs: FileSystem,
    root: str,
    config: LogConfig = COMPACT,
    *,
    clock: ManualClock,
    name: str = "topic-0",
    **kwargs: int | bool,
) -> Log:
    return Log.open(f"{root}/{name}", config, fs=fs, clock=clock, **kwargs)  # type: ignore[arg-type]


def append(
    log: Log,
    items: Sequence[Item],
    *,
    clock: ManualClock,
    epoch: int = 0,
    producer_id: int = NO_PRODUCER_ID,
    producer_epoch: int = -1,
    base_sequence: int = -1,
) -> int:
    """One batch of ``items`` as leader; returns its first offset."""
    batch = encode_batch(
        [value for _, value in items],
        keys=[key for key, _ in items],
        base_timestamp=clock.wall_ms(),
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        base_sequence=base_sequence,
    )
    return log.append_as_leader(batch, epoch).first_offset


def served(log: Log) -> list[Served]:
    """Every record the log serves, in order."""
    out = []
    for data in log.batches():
        for position, _ in iter_batches(data):
            out += [(r.offset, r.key, r.value) for r in decode_records(data, position)]
    return out


def commit(log: Log) -> None:
    """Flush and move the HW to the LEO: everything below the active segment is cleanable."""
    log.flush()
    log.update_high_watermark(log.log_end_offset)


def plan(log: Log, clock: ManualClock, memory_bytes: int = MEMORY_BYTES) -> CleaningTask:
    """Plan a cleaning of ``log`` whatever its dirty ratio."""
    now_ms = clock.wall_ms()
    return begin_cleaning(log, measure(log, now_ms), now_ms, memory_bytes)


def clean(log: Log, clock: ManualClock, memory_bytes: int = MEMORY_BYTES) -> CleaningResult:
    """One whole cleaning: plan, run the pass here, swap."""
    task = plan(log, clock, memory_bytes)
    task.run()
    return complete_cleaning(log, task)


def latest_by_key(records: Sequence[Served]) -> dict[bytes | None, Served]:
    """key -> its last record."""
    out: dict[bytes | None, Served] = {}
    for record in records:
        out[record[1]] = record
    return out
