"""Record batch v2 (magic 2) codec, Kafka's format: the unit replog stores, replicates and serves.

Batch layout, big-endian, 61-byte header then the records section::

     0  base_offset             int64
     8  batch_length            int32   size_bytes - 12 (LOG_OVERHEAD)
    12  partition_leader_epoch  int32
    16  magic                   int8    = 2
    17  crc                     uint32  CRC-32C of bytes [21, end of batch)
    21  attributes              int16   bits 0-2 codec, 3 timestamp type (1 = log append time),
                                        4 transactional, 5 control, 6 delete horizon
    23  last_offset_delta       int32
    27  base_timestamp          int64
    35  max_timestamp           int64
    43  producer_id             int64
    51  producer_epoch          int16
    53  base_sequence           int32
    57  records_count           int32
    61  records                 compressed as one unit when the codec is not NONE

Each record, with varint = zig-zag int32 and varlong = zig-zag int64, both unsigned LEB128::

    length varint (bytes after itself) | attributes int8 (0) | timestamp_delta varlong
    | offset_delta varint | key_length varint (-1 = null) | key | value_length varint (-1 = null)
    | value | header_count varint | per header: key_length varint, UTF-8 key,
    value_length varint (-1 = null), value

The CRC leaves out the first 21 bytes, so ``stamp_batch`` can rewrite the base offset and leader
epoch of a validated batch without recomputing it. Readers accept bytes, bytearray and memoryview
(and so numpy memmaps); every inconsistency in a batch is a ``CorruptRecordError``.

This module is the one home of the layout: ``HEADER`` declares every header field (its byte
position and encoding, in the table's order) and the structs below are built from it. Code
elsewhere that reads or writes a field or two without parsing a whole header (the file scans,
the leader's stamping, the time lookups) takes the position and encoding from ``HEADER``, never
a number of its own. Writing batches is ``replog.log.encoding`` (``encode_batch``); reading
their records is ``replog.log.decoding`` (``decode_records``, ``decode_columns``).
"""

from __future__ import annotations

import enum
import itertools
import struct
from collections.abc import Iterator
from typing import NamedTuple

import attrs
import crc32c

from replog.errors import CorruptRecordError, InvalidOffsetError, invariant
from replog.log.compression import Compression

__all__ = [
    "COMPRESSION_MASK",
    "CONTROL_BIT",
    "CRC_START",
    "HEADER",
    "HEADER_FROM_CRC",
    "HEADER_SIZE_UP_TO_MAGIC",
    "HEADER_STRUCT",
    "HEADER_UP_TO_CRC",
    "LOG_OVERHEAD",
    "MAGIC",
    "MAX_RECORD_OVERHEAD",
    "MIN_SIZE_FIELD",
    "NO_PARTITION_LEADER_EPOCH",
    "NO_PRODUCER_EPOCH",
    "NO_PRODUCER_ID",
    "NO_SEQUENCE",
    "NO_TIMESTAMP",
    "OFFSET_AND_LENGTH",
    "RECORD_BATCH_OVERHEAD",
    "TIMESTAMP_TYPE_BIT",
    "TRANSACTIONAL_BIT",
    "BatchHeader",
    "Buffer",
    "HeaderField",
    "HeaderLayout",
    "Headers",
    "Record",
    "RecordColumns",
    "TimestampType",
    "iter_batches",
    "read_header",
    "stamp_batch",
    "validate_batch",
]

Buffer = bytes | bytearray | memoryview

RECORD_BATCH_OVERHEAD = 61
LOG_OVERHEAD = 12
HEADER_SIZE_UP_TO_MAGIC = 17
MIN_SIZE_FIELD = 14
"""Smallest legal batch_length field (Kafka's v0 record overhead); below it the file is corrupt."""
MAX_RECORD_OVERHEAD = 21
MAGIC = 2
NO_TIMESTAMP = -1
NO_PARTITION_LEADER_EPOCH = -1
NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
NO_SEQUENCE = -1

#: attributes bits (the layout above)
COMPRESSION_MASK = 0x07
TIMESTAMP_TYPE_BIT = 0x08
TRANSACTIONAL_BIT = 0x10
CONTROL_BIT = 0x20

_INT32_MIN, _INT32_MAX = -(1 << 31), (1 << 31) - 1
_INT64_MAX = (1 << 63) - 1


class HeaderField(NamedTuple):
    """One field of the batch header: its byte position in the batch and its encoding."""

    name: str
    position: int
    codec: struct.Struct

    @property
    def size_bytes(self) -> int:
        """Bytes the field takes."""
        return self.codec.size

    @property
    def end(self) -> int:
        """Byte position right after the field."""
        return self.position + self.codec.size

    def read(self, buf: Buffer, batch_position: int = 0) -> int:
        """The field of the batch at ``batch_position`` in ``buf``."""
        return int(self.codec.unpack_from(buf, batch_position + self.position)[0])

    def decode(self, raw: bytes) -> int:
        """The field from exactly its own bytes (e.g. a ``pread`` of ``size_bytes`` at
        ``position``)."""
        return int(self.codec.unpack(raw)[0])

    def write(self, buf: bytearray | memoryview, batch_position: int, value: int) -> None:
        """Overwrite the field of the batch at ``batch_position`` in ``buf``."""
        self.codec.pack_into(buf, batch_position + self.position, value)


def _field(name: str, position: int, fmt: str) -> HeaderField:
    return HeaderField(name, position, struct.Struct(">" + fmt))


class HeaderLayout(NamedTuple):
    """Every field of the 61-byte header, in order (the table in the module docstring)."""

    base_offset: HeaderField
    batch_length: HeaderField
    partition_leader_epoch: HeaderField
    magic: HeaderField
    crc: HeaderField
    attributes: HeaderField
    last_offset_delta: HeaderField
    base_timestamp: HeaderField
    max_timestamp: HeaderField
    producer_id: HeaderField
    producer_epoch: HeaderField
    base_sequence: HeaderField
    records_count: HeaderField


HEADER = HeaderLayout(
    _field("base_offset", 0, "q"),
    _field("batch_length", 8, "i"),
    _field("partition_leader_epoch", 12, "i"),
    _field("magic", 16, "b"),
    _field("crc", 17, "I"),
    _field("attributes", 21, "h"),
    _field("last_offset_delta", 23, "i"),
    _field("base_timestamp", 27, "q"),
    _field("max_timestamp", 35, "q"),
    _field("producer_id", 43, "q"),
    _field("producer_epoch", 51, "h"),
    _field("base_sequence", 53, "i"),
    _field("records_count", 57, "i"),
)
"""The header's fields by name: ``HEADER.max_timestamp.position`` is 35."""


def _struct_of(fields: tuple[HeaderField, ...]) -> struct.Struct:
    """One struct reading ``fields``, which must be adjacent, from the first one's position."""
    for before, after in itertools.pairwise(fields):
        invariant(before.end == after.position, f"{after.name} does not follow {before.name}")
    return struct.Struct(">" + "".join(f.codec.format[1:] for f in fields))


invariant(
    HeaderLayout._fields == tuple(f.name for f in HEADER) and HEADER.base_offset.position == 0,
    "HEADER lists its fields by name, from byte 0",
)
HEADER_STRUCT = _struct_of(HEADER)
"""The 61-byte header as one ``struct`` (fields in `BatchHeader` order), for scans that read
many headers without building a `BatchHeader` each time."""
CRC_START = HEADER.attributes.position
"""Byte position where the CRC-covered part of a batch begins (attributes onwards)."""
HEADER_UP_TO_CRC = _struct_of(HEADER[: HEADER.index(HEADER.attributes)])
"""Bytes [0, 21): the fields outside the CRC (the encoder packs them once the CRC is known)."""
HEADER_FROM_CRC = _struct_of(HEADER[HEADER.index(HEADER.attributes) :])
"""Bytes [21, 61): the header fields the CRC covers."""
OFFSET_AND_LENGTH = _struct_of((HEADER.base_offset, HEADER.batch_length))
"""The log framing (``LOG_OVERHEAD`` bytes): base offset and batch length."""
invariant(HEADER_STRUCT.size == RECORD_BATCH_OVERHEAD, "batch header is 61 bytes")
invariant(HEADER_UP_TO_CRC.size == CRC_START == 21, "the CRC starts at byte 21")
invariant(OFFSET_AND_LENGTH.size == LOG_OVERHEAD, "the framing is base offset and length")
invariant(HEADER.magic.end == HEADER_SIZE_UP_TO_MAGIC, "magic ends the first 17 bytes")

_BATCH_LENGTH_AT = HEADER.batch_length.position
_unpack_batch_length = HEADER.batch_length.codec.unpack_from


class TimestampType(enum.IntEnum):
    """Attributes bit 3: who set the record timestamps."""

    CREATE_TIME = 0
    LOG_APPEND_TIME = 1


@attrs.frozen
class Record:
    """One decoded record with its absolute offset and timestamp."""

    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...] = ()


Headers = tuple[tuple[str, bytes | None], ...]


@attrs.frozen
class RecordColumns:
    """The records of one batch as parallel lists (what ``decode_columns`` returns): entry i of
    each list is field i of the record ``decode_records`` would give at index i."""

    offsets: list[int]
    timestamps: list[int]
    keys: list[bytes | None]
    values: list[bytes | None]
    headers: list[Headers]

    def __len__(self) -> int:
        return len(self.offsets)

    def slice(self, start: int, stop: int) -> RecordColumns:
        """Records [start, stop) as new columns (list slicing: C speed)."""
        return RecordColumns(
            self.offsets[start:stop],
            self.timestamps[start:stop],
            self.keys[start:stop],
            self.values[start:stop],
            self.headers[start:stop],
        )

    def records(self) -> list[Record]:
        """The same records as ``Record`` objects."""
        return list(
            map(Record, self.offsets, self.timestamps, self.keys, self.values, self.headers)
        )


@attrs.frozen
class BatchHeader:
    """The 61-byte batch header, field for field, plus the values derived from it."""

    base_offset: int
    batch_length: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    records_count: int

    @property
    def last_offset(self) -> int:
        """Offset of the last record the batch was written with (compaction may remove it)."""
        return self.base_offset + self.last_offset_delta

    @property
    def next_offset(self) -> int:
        """The offset right after this batch: where the next batch starts."""
        return self.base_offset + self.last_offset_delta + 1

    @property
    def size_bytes(self) -> int:
        """Total batch size on disk, header included."""
        return LOG_OVERHEAD + self.batch_length

    @property
    def compression(self) -> Compression:
        """The records-section codec; ``CorruptRecordError`` for an id Kafka does not define."""
        codec_id = self.attributes & COMPRESSION_MASK
        try:
            return Compression(codec_id)
        except ValueError:
            raise CorruptRecordError(f"unknown compression codec id {codec_id}") from None

    @property
    def timestamp_type(self) -> TimestampType:
        """CREATE_TIME (set by the producer) or LOG_APPEND_TIME (set by the broker)."""
        if self.attributes & TIMESTAMP_TYPE_BIT:
            return TimestampType.LOG_APPEND_TIME
        return TimestampType.CREATE_TIME

    @property
    def is_transactional(self) -> bool:
        """Whether the batch belongs to a transaction."""
        return bool(self.attributes & TRANSACTIONAL_BIT)

    @property
    def is_control(self) -> bool:
        """Whether the batch holds a control record (transaction marker)."""
        return bool(self.attributes & CONTROL_BIT)


invariant(
    tuple(a.name for a in attrs.fields(BatchHeader)) == HeaderLayout._fields,
    "BatchHeader has the header's fields in order",
)


def read_header(buf: Buffer, position: int = 0) -> BatchHeader:
    """Parse the 61-byte header at ``position`` without checking magic, size or CRC.

    ``CorruptRecordError`` if fewer than 61 bytes remain: no header can be read there.
    """
    if position < 0 or len(buf) - position < RECORD_BATCH_OVERHEAD:
        raise CorruptRecordError(
            f"{max(0, len(buf) - position)} bytes at {position} cannot hold a batch header",
            position,
        )
    return BatchHeader(*HEADER_STRUCT.unpack_from(buf, position))


def validate_batch(buf: Buffer, position: int = 0) -> BatchHeader:
    """Check the batch at ``position``: size >= 61, magic 2, fully present, CRC-32C matches.

    Returns its header; any failure is a ``CorruptRecordError`` carrying ``position``.
    """
    header = read_header(buf, position)
    if header.magic != MAGIC:
        raise CorruptRecordError(f"batch at {position} has magic {header.magic}, not 2", position)
    size_bytes = header.size_bytes
    if size_bytes < RECORD_BATCH_OVERHEAD:
        raise CorruptRecordError(
            f"batch at {position} declares {size_bytes} bytes, under the 61-byte header", position
        )
    end = position + size_bytes
    if end > len(buf):
        raise CorruptRecordError(
            f"batch at {position} declares {size_bytes} bytes, only {len(buf) - position} remain",
            position,
        )
    computed = crc32c.crc32c(memoryview(buf)[position + CRC_START : end])
    if computed != header.crc:
        raise CorruptRecordError(
            f"batch at {position} has CRC {header.crc:#010x}, its bytes give {computed:#010x}",
            position,
        )
    return header


def iter_batches(buf: Buffer) -> Iterator[tuple[int, BatchHeader]]:
    """Yield (position, header) for each whole batch from the start of ``buf``; no CRC check.

    Follows Kafka's file reader: stops quietly when 17 bytes or fewer remain or when the next
    batch runs past the end (a partial write), and raises ``CorruptRecordError`` when a
    batch_length field is below 14. A complete batch too short for a 61-byte header also raises
    (Kafka's reader yields it and fails it at validation; replog cannot parse its header).
    """
    end = len(buf)
    position = 0
    while end - position > HEADER_SIZE_UP_TO_MAGIC:
        (batch_length,) = _unpack_batch_length(buf, position + _BATCH_LENGTH_AT)
        if batch_length < MIN_SIZE_FIELD:
            raise CorruptRecordError(
                f"batch at {position} has batch_length {batch_length}, under {MIN_SIZE_FIELD}",
                position,
            )
        size_bytes = LOG_OVERHEAD + batch_length
        if size_bytes > end - position:
            return
        if size_bytes < RECORD_BATCH_OVERHEAD:
            raise CorruptRecordError(
                f"batch at {position} is {size_bytes} bytes, under the 61-byte header", position
            )
        yield position, BatchHeader(*HEADER_STRUCT.unpack_from(buf, position))
        position += size_bytes


def stamp_batch(
    buf: bytearray | memoryview, position: int, base_offset: int, leader_epoch: int
) -> None:
    """Overwrite the base offset and partition leader epoch of the batch at ``position`` in place.

    Both fields sit before byte 21, where the CRC's coverage starts, so the batch stays valid.
    """
    invariant(
        position >= 0 and len(buf) - position >= RECORD_BATCH_OVERHEAD,
        f"no batch header at {position} in a buffer of {len(buf)} bytes",
    )
    if not 0 <= base_offset <= _INT64_MAX:
        raise InvalidOffsetError(f"base offset {base_offset} is outside [0, 2**63)")
    if not _INT32_MIN <= leader_epoch <= _INT32_MAX:
        raise ValueError(f"leader epoch {leader_epoch} does not fit int32")
    HEADER.base_offset.write(buf, position, base_offset)
    HEADER.partition_leader_epoch.write(buf, position, leader_epoch)
