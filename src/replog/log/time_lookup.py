"""Offsets by timestamp, for ListOffsets: the earliest record at or after a time, and the
record with the largest timestamp (KIP-734).

The search follows Kafka's: skip whole segments whose largest timestamp is before the target,
start inside the first candidate from its time index (the entry with the largest timestamp at
or before the target), skip batches by their max timestamp read from the batch header, and
decode only the batch that holds the answer. Record timestamps inside a CreateTime batch need
not increase, so the answer is the first record (in offset order) whose timestamp reaches the
target. Only offsets below ``max_offset`` (a consumer's HW) are ever returned. Every batch the
search looks at is one reads may serve (`LogSegment.check_batch`): a damaged one raises
`CorruptRecordError`, as `Log.read` does.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, NamedTuple

from replog.log.decoding import decode_records
from replog.log.records import HEADER, TimestampType, read_header

if TYPE_CHECKING:
    from replog.log.log import Log
    from replog.log.segment import BatchPosition, LogSegment

__all__ = ["TimestampAndOffset", "offset_for_timestamp", "offset_of_max_timestamp"]

_MAX_TIMESTAMP = HEADER.max_timestamp


class TimestampAndOffset(NamedTuple):
    """A record's timestamp and offset."""

    timestamp: int
    offset: int


def offset_for_timestamp(log: Log, target: int, max_offset: int) -> TimestampAndOffset | None:
    """The first record at or after ``log.log_start_offset`` whose timestamp is >= ``target``,
    if its offset is below ``max_offset``; None otherwise (Kafka answers offset -1).
    `StorageError` if the files cannot be read."""
    if target < 0:
        raise ValueError(f"timestamp must be >= 0, got {target}")
    with log.storage_errors("time lookup"):
        return _offset_for_timestamp(log, target, max_offset)


def _offset_for_timestamp(log: Log, target: int, max_offset: int) -> TimestampAndOffset | None:
    start = log.log_start_offset
    for base, segment in list(log.segments.items()):
        end = log.segments.end_of(base, log.log_end_offset)
        if segment.max_timestamp < target or end <= start:
            continue
        from_offset = max(start, base, segment.time_index.lookup(target).offset)
        for batch in segment.batches_from(from_offset):
            segment.check_batch(batch, end)  # never answer from (or skip by) a damaged batch
            if batch.base_offset >= max_offset:
                return None
            if _batch_max_timestamp(segment, batch) < target:
                continue
            for timestamp, offset in _records(segment, batch):
                # Every record of the batch counts (the index points at a batch's last offset),
                # except those below the log start.
                if offset >= start and timestamp >= target:
                    return TimestampAndOffset(timestamp, offset) if offset < max_offset else None
        segment.check_complete(end)  # the scan did not stop early at broken framing
    return None


def offset_of_max_timestamp(log: Log, max_offset: int) -> TimestampAndOffset | None:
    """The record with the largest timestamp (the first one, if several share it) below
    ``max_offset``; None if the log holds no timestamped record there. `StorageError` if the
    files cannot be read."""
    with log.storage_errors("time lookup"):
        return _offset_of_max_timestamp(log, max_offset)


def _offset_of_max_timestamp(log: Log, max_offset: int) -> TimestampAndOffset | None:
    best: TimestampAndOffset | None = None
    for base, segment in list(log.segments.items()):
        if segment.max_timestamp < 0 or (best is not None and segment.max_timestamp <= best[0]):
            continue
        end = log.segments.end_of(base, log.log_end_offset)
        for batch in segment.batches_from(max(log.log_start_offset, segment.base_offset)):
            segment.check_batch(batch, end)
            if batch.base_offset >= max_offset:
                break
            if best is not None and _batch_max_timestamp(segment, batch) <= best[0]:
                continue
            for timestamp, offset in _records(segment, batch):
                if offset < log.log_start_offset or offset >= max_offset:
                    continue
                if best is None or timestamp > best[0]:
                    best = TimestampAndOffset(timestamp, offset)
        else:
            segment.check_complete(end)  # the scan did not stop early at broken framing
    return best


def _batch_max_timestamp(segment: LogSegment, batch: BatchPosition) -> int:
    """The max timestamp in the header of ``batch`` (one field read from the file)."""
    raw = segment.log_file.pread(
        batch.position + _MAX_TIMESTAMP.position, _MAX_TIMESTAMP.size_bytes
    )
    return _MAX_TIMESTAMP.decode(raw)


def _records(segment: LogSegment, batch: BatchPosition) -> list[tuple[int, int]]:
    """(timestamp, offset) of every record in the batch, in offset order."""
    data = segment.log_file.pread(batch.position, batch.size_bytes)
    header = read_header(data)
    if header.timestamp_type is TimestampType.LOG_APPEND_TIME:
        # The broker's time applies to every record; the record deltas are meaningless.
        return [(header.max_timestamp, record.offset) for record in decode_records(data)]
    return [(record.timestamp, record.offset) for record in decode_records(data)]
