"""Checks of the record batches handed to `Log` to append: a producer's (leader appends) and a
leader's (follower appends).

A producer's batch is checked for framing, magic, CRC-32C and an offset delta that matches its
record count (so the offsets the leader assigns stay dense); the records inside are checked when
decoded. Fetched batches are checked with `validate_batch` each; a partial batch at the end of a
fetch (cut at the byte limit) is not an error.
"""

from __future__ import annotations

import crc32c

from replog.errors import CorruptRecordError
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

__all__ = ["check_producer_batch", "parse_batches"]

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


def check_producer_batch(data: bytearray, position: int) -> tuple[int, int, int]:
    """Validate the batch a producer sent at ``position`` (framing, magic, CRC, and an offset
    delta that matches the record count, so the leader's offsets stay dense). Returns (size,
    last offset delta, max timestamp). Records inside are checked when decoded."""
    if len(data) - position < RECORD_BATCH_OVERHEAD:
        raise CorruptRecordError("trailing bytes after the last batch", position)
    (_, length, _, magic, crc, _, delta, _, max_timestamp, _, _, _, count) = _unpack_header(
        data, position
    )
    size = length + LOG_OVERHEAD
    if magic != MAGIC or size < RECORD_BATCH_OVERHEAD or position + size > len(data):
        validate_batch(data, position)  # raises with the precise reason
    if delta < 0 or count != delta + 1:
        raise CorruptRecordError(
            f"batch at {position} has {count} records but last offset delta {delta}", position
        )
    if crc32c.crc32c(memoryview(data)[position + CRC_START : position + size]) != crc:
        validate_batch(data, position)
    return size, delta, max_timestamp
