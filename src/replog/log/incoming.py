"""Checks of the record batches handed to `Log` to append: a producer's (leader appends, which
also get their offsets and leader epoch stamped here) and a leader's (follower appends).

A producer's batch is checked for framing, magic, CRC-32C and an offset delta that matches its
record count (so the offsets the leader assigns stay dense); the records inside are checked when
decoded. Fetched batches are checked with `validate_batch` each; a partial batch at the end of a
fetch (cut at the byte limit) is not an error.
"""

from __future__ import annotations

from typing import NamedTuple

import crc32c

from replog.errors import (
    CorruptRecordError,
    InvalidOffsetError,
    InvalidRecordError,
    RecordBatchTooLargeError,
)
from replog.log.decoding import decode_columns
from replog.log.producer_state import ProducerAppend
from replog.log.records import (
    CRC_START,
    HEADER,
    HEADER_STRUCT,
    LOG_OVERHEAD,
    MAGIC,
    RECORD_BATCH_OVERHEAD,
    BatchHeader,
    validate_batch,
)
from replog.log.segment import BatchMeta

__all__ = [
    "require_keys",
    "IncomingBatches",
    "ProducedBatch",
    "check_follower_batches",
    "check_producer_batch",
    "parse_batches",
    "producer_batch",
    "stamp_producer_batches",
]

_unpack_header = HEADER_STRUCT.unpack_from


def parse_batches(
    data: bytes | bytearray | memoryview, whole: bool
) -> list[tuple[int, BatchHeader]]:
    """Validate every batch in ``data``. With ``whole`` the batches must fill ``data`` exactly;
    otherwise a partial batch at the end (a fetch cut at max bytes) is ignored."""
    view = memoryview(data)
    found: list[tuple[int, BatchHeader]] = []
    position = 0
    while position < len(view):
        if len(view) - position < LOG_OVERHEAD:
            if whole:
                raise CorruptRecordError("trailing bytes after the last batch", position)
            break
        size = HEADER.batch_length.read(view, position) + LOG_OVERHEAD
        if position + size > len(view) and not whole and size >= RECORD_BATCH_OVERHEAD:
            break
        header = validate_batch(view[position : position + size])
        found.append((position, header))
        position += size
    return found


ProducedBatch = tuple[int, int, int, int, int, int]
"""What `check_producer_batch` reads of a producer's batch: ``(size_bytes, last_offset_delta,
max_timestamp, producer_id, producer_epoch, base_sequence)``. A plain tuple, not a named one:
one is built per produce, and a named tuple's constructor costs a Python call (~0.3 us)."""

_CRC_COPY_BYTES_MAX = 4096
"""Batches up to this size are CRC-checked from a copied slice (cheaper than a memoryview
slice at that size); larger ones through a view, without the copy."""


def check_producer_batch(data: bytearray, position: int) -> ProducedBatch:
    """Validate the batch a producer sent at ``position`` (framing, magic, CRC, and an offset
    delta that matches the record count, so the leader's offsets stay dense; an idempotent
    batch -- one with a producer id -- must carry a sequence). Records inside are checked
    when decoded."""
    if len(data) - position < RECORD_BATCH_OVERHEAD:
        raise CorruptRecordError("trailing bytes after the last batch", position)
    (_, length, _, magic, crc, _, delta, _, max_timestamp, producer_id, epoch, sequence, count) = (
        _unpack_header(data, position)
    )
    size = length + LOG_OVERHEAD
    if magic != MAGIC or size < RECORD_BATCH_OVERHEAD or position + size > len(data):
        validate_batch(data, position)  # raises with the precise reason
    if delta < 0 or count != delta + 1:
        raise CorruptRecordError(
            f"batch at {position} has {count} records but last offset delta {delta}", position
        )
    if size <= _CRC_COPY_BYTES_MAX:
        covered: bytearray | memoryview = data[position + CRC_START : position + size]
    else:
        covered = memoryview(data)[position + CRC_START : position + size]
    if crc32c.crc32c(covered) != crc:
        validate_batch(data, position)  # raises with the precise reason
    if producer_id >= 0 and (sequence < 0 or epoch < 0):
        raise CorruptRecordError(
            f"batch at {position} of producer {producer_id} has epoch {epoch} and sequence "
            f"{sequence}",
            position,
        )
    return (size, delta, max_timestamp, producer_id, epoch, sequence)


def producer_batch(checked: ProducedBatch, base_offset: int, last_offset: int) -> ProducerAppend:
    """What producer state needs of a producer's batch given offsets [base, last]."""
    _, _, max_timestamp, producer_id, producer_epoch, base_sequence = checked
    return ProducerAppend(
        producer_id, producer_epoch, base_sequence, base_offset, last_offset, max_timestamp
    )


class IncomingBatches(NamedTuple):
    """Batches about to be appended: what the segment needs of each, the idempotent
    producers' ones (applied to the producer state once written), and where the last gap in
    their offsets ends (0: none; only a leader's compacted batches have gaps)."""

    metas: list[BatchMeta]
    produced: list[ProducerAppend]
    gap_end: int = 0


def stamp_producer_batches(
    data: bytearray, first_offset: int, leader_epoch: int, size_bytes_max: int
) -> IncomingBatches:
    """Check every batch a producer sent (`check_producer_batch`, and at most
    ``size_bytes_max``: `RecordBatchTooLargeError`) and stamp the offsets from
    ``first_offset`` and ``leader_epoch`` into ``data`` (outside the CRC)."""
    metas: list[BatchMeta] = []
    produced: list[ProducerAppend] = []
    offset, position = first_offset, 0
    while position < len(data):
        checked = check_producer_batch(data, position)
        size, last_offset_delta, max_timestamp, producer_id = checked[:4]
        if size > size_bytes_max:
            raise RecordBatchTooLargeError(size, size_bytes_max)
        HEADER.base_offset.write(data, position, offset)
        HEADER.partition_leader_epoch.write(data, position, leader_epoch)
        last = offset + last_offset_delta
        metas.append(BatchMeta(last, max_timestamp, size))
        if producer_id >= 0:
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
    leader epoch ``last_epoch``: offsets that never go back (`InvalidOffsetError`; they may
    skip what the leader's cleaner removed), no falling epoch (`CorruptRecordError`), at most
    ``size_bytes_max`` each."""
    metas: list[BatchMeta] = []
    produced: list[ProducerAppend] = []
    expected = expected_offset
    gap_end = 0
    for _, header in found:
        if header.base_offset > expected:
            gap_end = header.base_offset
        elif header.base_offset != expected:
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
                ProducerAppend(
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
    return IncomingBatches(metas, produced, gap_end)


def require_keys(data: bytes | bytearray | memoryview) -> None:
    """Refuse record batches holding a record without a key (`InvalidRecordError`): a
    compacted log keeps the latest record of each key, so a keyless one has no place in it
    (Kafka's LogValidator)."""
    for position, _ in parse_batches(data, whole=True):
        for key in decode_columns(data, position).keys:
            if key is None:
                raise InvalidRecordError(
                    f"compacted topic cannot accept a record without a key (batch at {position})"
                )
