"""Checks of the record batches handed to `Log` to append: a producer's (leader appends, which
also get their offsets and leader epoch stamped here) and a leader's (follower appends).

A producer's batch is checked for framing, magic, CRC-32C and an offset delta that matches its
record count (so the offsets the leader assigns stay dense); the records inside are checked when
decoded. Fetched batches are checked with `validate_batch` each; a partial batch at the end of a
fetch (cut at the byte limit) is not an error.
"""

from __future__ import annotations

import struct
from typing import NamedTuple

import crc32c

from replog.errors import CorruptRecordError, InvalidOffsetError, RecordBatchTooLargeError
from replog.log.producer_state import ProducerBatch
from replog.log.records import (
    LOG_OVERHEAD,
    RECORD_BATCH_OVERHEAD,
    BatchHeader,
    validate_batch,
)
from replog.log.segment import BatchMeta

__all__ = [
    "IncomingBatches",
    "ProducedBatch",
    "check_follower_batches",
    "check_producer_batch",
    "parse_batches",
    "producer_batch",
    "stamp_producer_batches",
]


def parse_batches(
    data: bytes | bytearray | memoryview, whole: bool
) -> list[tuple[int, BatchHeader]]:
    """Validate every batch in ``data``. With ``whole`` the batches must fill ``data`` exactly;
    otherwise a partial batch at the end (a fetch cut at max bytes) is ignored."""
    view = memoryview(data)
    found: list[tuple[int, BatchHeader]] = []
    position = 0
    while position < len(view):
        if len(view) - position < 12:
            if whole:
                raise CorruptRecordError("trailing bytes after the last batch", position)
            break
        size = int.from_bytes(view[position + 8 : position + 12], "big", signed=True) + 12
        if position + size > len(view) and not whole and size >= 61:
            break
        header = validate_batch(view[position : position + size])
        found.append((position, header))
        position += size
    return found


_PRODUCER_HEADER = struct.Struct(">qiibIhiqqqhi")  # base offset .. base sequence (bytes 0-57)
_RECORDS_COUNT = struct.Struct(">i")
_STAMP_OFFSET = struct.Struct(">q")
_STAMP_EPOCH = struct.Struct(">i")


class ProducedBatch(NamedTuple):
    """What `check_producer_batch` reads of a producer's batch (a tuple: one per produce)."""

    size_bytes: int
    last_offset_delta: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int


def check_producer_batch(data: bytearray, position: int) -> ProducedBatch:
    """Validate the batch a producer sent at ``position`` (framing, magic, CRC, and an offset
    delta that matches the record count, so the leader's offsets stay dense; an idempotent
    batch -- one with a producer id -- must carry a sequence). Records inside are checked
    when decoded."""
    if len(data) - position < RECORD_BATCH_OVERHEAD:
        raise CorruptRecordError("trailing bytes after the last batch", position)
    _, length, _, magic, crc, _, delta, _, max_timestamp, producer_id, epoch, sequence = (
        _PRODUCER_HEADER.unpack_from(data, position)
    )
    size = length + LOG_OVERHEAD
    if magic != 2 or size < RECORD_BATCH_OVERHEAD or position + size > len(data):
        validate_batch(data, position)  # raises with the precise reason
    (count,) = _RECORDS_COUNT.unpack_from(data, position + 57)
    if delta < 0 or count != delta + 1:
        raise CorruptRecordError(
            f"batch at {position} has {count} records but last offset delta {delta}", position
        )
    if crc32c.crc32c(memoryview(data)[position + 21 : position + size]) != crc:
        validate_batch(data, position)
    if producer_id >= 0 and (sequence < 0 or epoch < 0):
        raise CorruptRecordError(
            f"batch at {position} of producer {producer_id} has epoch {epoch} and sequence "
            f"{sequence}",
            position,
        )
    return ProducedBatch(size, delta, max_timestamp, producer_id, epoch, sequence)


def producer_batch(checked: ProducedBatch, base_offset: int, last_offset: int) -> ProducerBatch:
    """What producer state needs of a producer's batch given offsets [base, last]."""
    return ProducerBatch(
        checked.producer_id,
        checked.producer_epoch,
        checked.base_sequence,
        base_offset,
        last_offset,
        checked.max_timestamp,
    )


class IncomingBatches(NamedTuple):
    """Batches about to be appended: what the segment needs of each, and the idempotent
    producers' ones (applied to the producer state once written)."""

    metas: list[BatchMeta]
    produced: list[ProducerBatch]


def stamp_producer_batches(
    data: bytearray, first_offset: int, leader_epoch: int, size_bytes_max: int
) -> IncomingBatches:
    """Check every batch a producer sent (`check_producer_batch`, and at most
    ``size_bytes_max``: `RecordBatchTooLargeError`) and stamp the offsets from
    ``first_offset`` and ``leader_epoch`` into ``data`` (outside the CRC)."""
    metas: list[BatchMeta] = []
    produced: list[ProducerBatch] = []
    offset, position = first_offset, 0
    while position < len(data):
        checked = check_producer_batch(data, position)
        size = checked.size_bytes
        if size > size_bytes_max:
            raise RecordBatchTooLargeError(size, size_bytes_max)
        _STAMP_OFFSET.pack_into(data, position, offset)
        _STAMP_EPOCH.pack_into(data, position + 12, leader_epoch)
        last = offset + checked.last_offset_delta
        metas.append(BatchMeta(last, checked.max_timestamp, size))
        if checked.producer_id >= 0:
            produced.append(producer_batch(checked, offset, last))
        offset = last + 1
        position += size
    if not metas:
        raise CorruptRecordError("no record batch in the appended data")
    return IncomingBatches(metas, produced)


def check_follower_batches(
    found: list[tuple[int, BatchHeader]],
    expected_offset: int,
    last_epoch: int,
    size_bytes_max: int,
    dir_path: str,
) -> IncomingBatches:
    """Check fetched batches continue a log ending at ``expected_offset`` whose last batch has
    leader epoch ``last_epoch``: dense offsets (`InvalidOffsetError`), no falling epoch
    (`CorruptRecordError`), at most ``size_bytes_max`` each."""
    metas: list[BatchMeta] = []
    produced: list[ProducerBatch] = []
    expected = expected_offset
    for _, header in found:
        if header.base_offset != expected:
            raise InvalidOffsetError(
                f"follower append at offset {header.base_offset} does not continue "
                f"{dir_path} at {expected}"
            )
        if header.size_bytes > size_bytes_max:
            raise RecordBatchTooLargeError(header.size_bytes, size_bytes_max)
        epoch = header.partition_leader_epoch
        if epoch < last_epoch:
            raise CorruptRecordError(
                f"follower append at offset {expected} has leader epoch {epoch}, below "
                f"{last_epoch} before it in {dir_path}"
            )
        metas.append(BatchMeta(header.last_offset, header.max_timestamp, header.size_bytes))
        if header.producer_id >= 0 and not header.is_control:
            produced.append(
                ProducerBatch(
                    header.producer_id,
                    header.producer_epoch,
                    header.base_sequence,
                    header.base_offset,
                    header.last_offset,
                    header.max_timestamp,
                )
            )
        expected = header.last_offset + 1
        last_epoch = epoch
    return IncomingBatches(metas, produced)
