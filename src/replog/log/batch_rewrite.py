"""Rewriting a record batch the log cleaner keeps only part of (Kafka's ``MemoryRecords.filterTo``
output). The batch layout is `replog.log.records`'; this module only fills it in differently:

- a batch keeps its **base offset and last offset delta** (so its offset range, and the last
  sequence number of its producer, survive), its leader epoch, producer id, epoch and base
  sequence, its codec, timestamp type and transactional/control flags; the records kept keep
  their offsets (the record offset deltas are no longer dense) and timestamps;
- ``records_count`` is the number kept; ``max_timestamp`` their largest (the broker's time for a
  LogAppendTime batch, whose records all carry it);
- the **delete horizon** (attributes bit 6): the first cleaning that keeps a tombstone (a record
  with a null value) sets it to that cleaning's time + ``delete.retention.ms``, stored in the
  ``base_timestamp`` field; the record timestamp deltas are taken from it. A later cleaning drops
  the tombstones once its time reaches the horizon;
- an **empty batch**: a 61-byte header with no records, the original offsets, producer fields,
  epoch and max timestamp, no codec and base timestamp -1 (``writeEmptyHeader``), written when
  the cleaner must keep a batch's offsets though none of its records.
"""

from __future__ import annotations

from collections.abc import Sequence

import crc32c

from replog.log.compression import compress
from replog.log.encoding import encode_varint, encode_varlong
from replog.log.records import (
    CRC_START,
    HEADER_STRUCT,
    LOG_OVERHEAD,
    MAGIC,
    NO_TIMESTAMP,
    RECORD_BATCH_OVERHEAD,
    BatchHeader,
    RecordColumns,
    TimestampType,
)

__all__ = ["DELETE_HORIZON_BIT", "delete_horizon_ms", "empty_batch", "rewrite_batch"]

DELETE_HORIZON_BIT = 0x40
"""Attributes bit 6: ``base_timestamp`` holds the delete horizon (KIP-534)."""
_FLAGS_KEPT_EMPTY = 0x08 | 0x10 | 0x20  # timestamp type, transactional, control
_NULL = encode_varint(-1)


def delete_horizon_ms(header: BatchHeader) -> int | None:
    """The batch's delete horizon (wall ms), or None if no cleaning set one."""
    return header.base_timestamp if header.attributes & DELETE_HORIZON_BIT else None


def rewrite_batch(
    header: BatchHeader,
    columns: RecordColumns,
    kept: Sequence[int],
    delete_horizon: int | None,
) -> bytes:
    """The batch ``header`` with only the records at indexes ``kept`` of ``columns`` (in
    order, at least one), and ``delete_horizon`` (wall ms) set if not None."""
    log_append_time = header.timestamp_type is TimestampType.LOG_APPEND_TIME
    if log_append_time:
        timestamps = [header.max_timestamp] * len(kept)
    else:
        timestamps = [columns.timestamps[i] for i in kept]
    base_timestamp = timestamps[0] if delete_horizon is None else delete_horizon
    max_timestamp = header.max_timestamp if log_append_time else max(timestamps)
    pieces: list[bytes] = []
    base_offset = header.base_offset
    for i, timestamp in zip(kept, timestamps, strict=True):
        body = _record_body(
            timestamp - base_timestamp,
            columns.offsets[i] - base_offset,
            columns.keys[i],
            columns.values[i],
            columns.headers[i],
        )
        pieces.append(encode_varint(len(body)))
        pieces.append(body)
    records = b"".join(pieces)
    codec = header.compression
    if codec:
        records = compress(codec, records)
    attributes = header.attributes & ~DELETE_HORIZON_BIT
    if delete_horizon is not None:
        attributes |= DELETE_HORIZON_BIT
    return _pack(header, attributes, base_timestamp, max_timestamp, len(kept), records)


def empty_batch(header: BatchHeader) -> bytes:
    """A header-only batch with ``header``'s offsets, producer fields, epoch, flags and max
    timestamp (Kafka's ``writeEmptyHeader``)."""
    attributes = header.attributes & _FLAGS_KEPT_EMPTY
    return _pack(header, attributes, NO_TIMESTAMP, header.max_timestamp, 0, b"")


def _pack(
    header: BatchHeader,
    attributes: int,
    base_timestamp: int,
    max_timestamp: int,
    count: int,
    records: bytes,
) -> bytes:
    head = bytearray(
        HEADER_STRUCT.pack(
            header.base_offset,
            len(records) + RECORD_BATCH_OVERHEAD - LOG_OVERHEAD,
            header.partition_leader_epoch,
            MAGIC,
            0,  # the CRC, filled in below
            attributes,
            header.last_offset_delta,
            base_timestamp,
            max_timestamp,
            header.producer_id,
            header.producer_epoch,
            header.base_sequence,
            count,
        )
    )
    crc = crc32c.crc32c(records, crc32c.crc32c(bytes(head[CRC_START:])))
    head[CRC_START - 4 : CRC_START] = crc.to_bytes(4, "big")  # the CRC field ends at CRC_START
    return bytes(head) + records


def _record_body(
    timestamp_delta: int,
    offset_delta: int,
    key: bytes | None,
    value: bytes | None,
    headers: tuple[tuple[str, bytes | None], ...],
) -> bytes:
    """One record after its length varint (attributes 0, as every record v2 has)."""
    parts = [b"\x00", encode_varlong(timestamp_delta), encode_varint(offset_delta)]
    for field in (key, value):
        if field is None:
            parts.append(_NULL)
        else:
            parts += (encode_varint(len(field)), field)
    parts.append(encode_varint(len(headers)))
    for name, header_value in headers:
        raw = name.encode("utf-8")
        parts += (encode_varint(len(raw)), raw)
        if header_value is None:
            parts.append(_NULL)
        else:
            parts += (encode_varint(len(header_value)), header_value)
    return b"".join(parts)
