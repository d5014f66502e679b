"""Reading the records of a batch (v2, the layout in ``replog.log.records``):
``decode_records`` (``Record`` objects) and ``decode_columns`` (parallel lists, for consumers
that turn batches into arrays), with the zig-zag varint readers of the record format. Both
validate the batch (CRC once) and check the record framing in full; any inconsistency is a
``CorruptRecordError``.
"""

from __future__ import annotations

from typing import NamedTuple

from replog.errors import CorruptRecordError
from replog.log.compression import DEFAULT_MAX_DECOMPRESSED_BYTES, Compression, decompress
from replog.log.records import (
    RECORD_BATCH_OVERHEAD,
    BatchHeader,
    Buffer,
    Headers,
    Record,
    RecordColumns,
    validate_batch,
)

__all__ = ["decode_columns", "decode_records"]

_MIN_RECORD_BYTES = 7  # length, attributes, ts, offset, key length, value length, header count


def _read_varint(data: bytes, position: int, limit: int, max_bytes: int) -> tuple[int, int]:
    """Decode a zig-zag varint of at most ``max_bytes`` bytes from data[position:limit]."""
    unsigned = 0
    shift = 0
    stop = position + max_bytes
    if stop > limit:
        stop = limit
    for index in range(position, stop):
        byte = data[index]
        unsigned |= (byte & 0x7F) << shift
        if byte < 0x80:
            return (unsigned >> 1) ^ -(unsigned & 1), index + 1
        shift += 7
    if limit < position + max_bytes:
        raise CorruptRecordError(f"varint at {position} runs past the end of its record")
    raise CorruptRecordError(f"varint at {position} is longer than {max_bytes} bytes")


def _read_int(data: bytes, position: int, limit: int) -> tuple[int, int]:
    if position + 1 < limit:  # one- and two-byte fast paths: every length under 8 KiB
        first = data[position]
        if first < 0x80:
            return (first >> 1) ^ -(first & 1), position + 1
        second = data[position + 1]
        if second < 0x80:
            unsigned = (first & 0x7F) | (second << 7)
            return (unsigned >> 1) ^ -(unsigned & 1), position + 2
    return _read_varint(data, position, limit, 5)


def _read_long(data: bytes, position: int, limit: int) -> tuple[int, int]:
    if position < limit and data[position] < 0x80:
        unsigned = data[position]
        return (unsigned >> 1) ^ -(unsigned & 1), position + 1
    return _read_varint(data, position, limit, 10)


def decode_records(
    buf: Buffer,
    position: int = 0,
    *,
    max_decompressed_bytes: int = DEFAULT_MAX_DECOMPRESSED_BYTES,
) -> list[Record]:
    """Validate the batch at ``position`` and decode all its records (inflating if compressed).

    Record framing is checked in full: every length inside the batch, each record consuming
    exactly its declared length, and the record count matching the header. Any inconsistency is
    a ``CorruptRecordError``; the inflated records may not exceed ``max_decompressed_bytes``.
    """
    header, data = _records_section(buf, position, max_decompressed_bytes)
    count = header.records_count
    records: list[Record] = []
    cursor = 0
    for _ in range(count):
        record, cursor = _decode_record(data, cursor, header)
        records.append(record)
    if cursor != len(data):
        raise CorruptRecordError(
            f"batch at {position} has {len(data) - cursor} bytes after its {count} records",
            position,
        )
    return records


def _records_section(
    buf: Buffer, position: int, max_decompressed_bytes: int
) -> tuple[BatchHeader, bytes]:
    """Validate the batch at ``position``; its header and its (inflated) records section, with
    the record count checked against the section size."""
    header = validate_batch(buf, position)
    section = memoryview(buf)[position + RECORD_BATCH_OVERHEAD : position + header.size_bytes]
    codec = header.compression
    if codec == Compression.NONE:
        data = bytes(section)
    else:
        data = decompress(codec, section, max_bytes=max_decompressed_bytes)
    count = header.records_count
    if count < 0 or count * _MIN_RECORD_BYTES > len(data):
        raise CorruptRecordError(
            f"batch at {position} claims {count} records in {len(data)} bytes", position
        )
    return header, data


def _decode_record(data: bytes, position: int, header: BatchHeader) -> tuple[Record, int]:
    size_bytes, position = _read_int(data, position, len(data))
    end = position + size_bytes
    if size_bytes < _MIN_RECORD_BYTES - 1 or end > len(data):
        raise CorruptRecordError(f"record at {position} declares {size_bytes} bytes")
    position += 1  # record attributes: unused
    timestamp_delta, position = _read_long(data, position, end)
    offset_delta, position = _read_int(data, position, end)
    key, position = _read_nullable_bytes(data, position, end)
    value, position = _read_nullable_bytes(data, position, end)
    header_count, position = _read_int(data, position, end)
    record_headers: tuple[tuple[str, bytes | None], ...] = ()
    if header_count:
        record_headers, position = _read_headers(data, position, end, header_count)
    if position != end:
        raise CorruptRecordError(
            f"record declares {size_bytes} bytes but its fields use {size_bytes + position - end}"
        )
    record = Record(
        header.base_offset + offset_delta,
        header.base_timestamp + timestamp_delta,
        key,
        value,
        record_headers,
    )
    return record, position


def _read_nullable_bytes(data: bytes, position: int, end: int) -> tuple[bytes | None, int]:
    length, position = _read_int(data, position, end)
    if length == -1:
        return None, position
    if length < -1 or position + length > end:
        raise CorruptRecordError(f"field of {length} bytes at {position} runs outside its record")
    return data[position : position + length], position + length


def _read_headers(
    data: bytes, position: int, end: int, header_count: int
) -> tuple[tuple[tuple[str, bytes | None], ...], int]:
    # each header takes at least two bytes (key length, value length)
    if header_count < 0 or 2 * header_count > end - position:
        raise CorruptRecordError(f"record claims {header_count} headers at {position}")
    parsed: list[tuple[str, bytes | None]] = []
    for _ in range(header_count):
        raw_key, position = _read_nullable_bytes(data, position, end)
        if raw_key is None:
            raise CorruptRecordError(f"record header at {position} has a null key")
        try:
            header_key = raw_key.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise CorruptRecordError(f"record header key is not UTF-8: {exc}") from None
        header_value, position = _read_nullable_bytes(data, position, end)
        parsed.append((header_key, header_value))
    return tuple(parsed), position


# ---------------------------------------------------------------------------------------------
# Columnar decoding
#
# ``decode_columns`` gives what ``decode_records`` gives, as parallel lists and with no object
# per record. Most batches are runs of records with one shape: the same length prefix, key
# length, value length and no headers, with single- or two-byte timestamp and offset deltas
# (the producer writes exactly that for same-sized values). Such a run has a fixed stride, so
# each byte position of its record layout is one strided slice of the section (C speed): the
# constant fields are checked with ``lstrip`` (the run ends at the first record that differs),
# varint widths with ``lstrip`` over the high/low byte sets, and the keys and values are sliced
# with the stride. Records outside runs take a per-record decoder with the framing checks of
# ``_decode_record``; both paths raise ``CorruptRecordError`` on the same inputs.

_HIGH_BYTES = bytes(range(0x80, 0x100))
_LOW_BYTES = bytes(range(0x80))
_MAX_RUN_DELTA = 1 << 13  # offset deltas below this fit two varint bytes
_DELTA1 = bytes(range(0, 0x80, 2))  # varint(d) for d < 64: the consecutive offset deltas
_DELTA2_LOW = bytes(((d << 1) & 0x7F) | 0x80 for d in range(_MAX_RUN_DELTA))
_DELTA2_HIGH = bytes((d << 1) >> 7 for d in range(_MAX_RUN_DELTA))
_ZIGZAG1: tuple[int, ...] = tuple((b >> 1) ^ -(b & 1) for b in range(0x80))
_MIN_RUN = 16  # a shorter run means mixed shapes: decode record by record for a while
_RETRY_AFTER = 32
_FIRST_WINDOW = 256


def decode_columns(
    buf: Buffer,
    position: int = 0,
    *,
    max_decompressed_bytes: int = DEFAULT_MAX_DECOMPRESSED_BYTES,
) -> RecordColumns:
    """``decode_records`` as columns: the same validation (CRC once per batch, full record
    framing, ``CorruptRecordError`` on any inconsistency) and the same values, returned as
    parallel lists without building a ``Record`` per record (see the comment above)."""
    header, data = _records_section(buf, position, max_decompressed_bytes)
    count = header.records_count
    columns = RecordColumns([], [], [], [], [])
    cursor = 0
    done = 0
    retry_at = 0
    window = _FIRST_WINDOW
    base_offset = header.base_offset
    base_timestamp = header.base_timestamp
    while done < count:
        if done >= retry_at:
            wanted = min(count - done, window)
            taken, cursor = _decode_run(data, cursor, wanted, base_offset, base_timestamp, columns)
            done += taken
            if taken == wanted:
                window *= 4
            if taken >= _MIN_RUN:
                continue
            retry_at = done + _RETRY_AFTER
            if done >= count:
                break
        cursor = _decode_record_into(data, cursor, base_offset, base_timestamp, columns)
        done += 1
    if cursor != len(data):
        raise CorruptRecordError(
            f"batch at {position} has {len(data) - cursor} bytes after its {count} records",
            position,
        )
    return columns


def _decode_record_into(
    data: bytes, position: int, base_offset: int, base_timestamp: int, columns: RecordColumns
) -> int:
    """``_decode_record`` appending to ``columns``; the position after the record."""
    limit = len(data)
    if position + 1 < limit and data[position] < 0x80:
        first = data[position]
        size_bytes = (first >> 1) ^ -(first & 1)
        position += 1
    else:
        size_bytes, position = _read_int(data, position, limit)
    end = position + size_bytes
    if size_bytes < _MIN_RECORD_BYTES - 1 or end > limit:
        raise CorruptRecordError(f"record at {position} declares {size_bytes} bytes")
    position += 1  # record attributes: unused
    timestamp_delta, position = _read_long(data, position, end)
    offset_delta, position = _read_int(data, position, end)
    key, position = _read_nullable_bytes(data, position, end)
    value, position = _read_nullable_bytes(data, position, end)
    header_count, position = _read_int(data, position, end)
    record_headers: Headers = ()
    if header_count:
        record_headers, position = _read_headers(data, position, end, header_count)
    if position != end:
        raise CorruptRecordError(
            f"record declares {size_bytes} bytes but its fields use {size_bytes + position - end}"
        )
    columns.offsets.append(base_offset + offset_delta)
    columns.timestamps.append(base_timestamp + timestamp_delta)
    columns.keys.append(key)
    columns.values.append(value)
    columns.headers.append(record_headers)
    return position


class _RunShape(NamedTuple):
    """Where the fields of a run's first record sit (absolute positions), and their values."""

    stride: int
    timestamp_at: int
    timestamp_width: int
    timestamp_delta: int
    offset_at: int
    offset_width: int
    offset_delta: int
    key_length_at: int
    key_at: int
    key_length: int
    value_length_at: int
    value_at: int
    value_length: int
    header_count_at: int


def _run_shape(data: bytes, start: int) -> _RunShape | None:
    """The shape of the record at ``start`` if a run can repeat it (one- or two-byte deltas,
    no headers), else None (also when it is malformed: the per-record decoder reports it)."""
    limit = len(data)
    try:
        size_bytes, position = _read_int(data, start, limit)
        end = position + size_bytes
        if size_bytes < _MIN_RECORD_BYTES - 1 or end > limit:
            return None
        timestamp_at = position + 1  # after the record attributes
        first_delta, position = _read_long(data, timestamp_at, end)
        timestamp_width = position - timestamp_at
        offset_at = position
        offset_delta, position = _read_int(data, position, end)
        offset_width = position - offset_at
        key_length_at = position
        key_length, key_at = _read_int(data, position, end)
        value_length_at = key_at + max(key_length, 0)
        value_length, value_at = _read_int(data, value_length_at, end)
    except CorruptRecordError:
        return None
    header_count_at = value_at + max(value_length, 0)
    if (
        timestamp_width > 2
        or offset_width > 2
        or key_length < -1
        or value_length < -1
        or value_length_at > end
        or header_count_at + 1 != end
        or data[header_count_at] != 0
    ):
        return None
    return _RunShape(
        end - start,
        timestamp_at,
        timestamp_width,
        first_delta,
        offset_at,
        offset_width,
        offset_delta,
        key_length_at,
        key_at,
        key_length,
        value_length_at,
        value_at,
        value_length,
        header_count_at,
    )


def _run_length(data: bytes, start: int, wanted: int, shape: _RunShape) -> int:
    """How many records from ``start`` (at most ``wanted``) have ``shape``: the bytes that
    must repeat do, and the delta varints keep their widths."""
    stride = shape.stride
    taken = min(wanted, (len(data) - start) // stride)
    span = taken * stride
    constant = [
        *range(start, shape.timestamp_at - 1),
        *range(shape.key_length_at, shape.key_at),
        *range(shape.value_length_at, shape.value_at),
        shape.header_count_at,
    ]
    for at in constant:
        column = data[at : at + span : stride]
        taken = min(taken, len(column) - len(column.lstrip(data[at : at + 1])))
    widths = ((shape.timestamp_at, shape.timestamp_width), (shape.offset_at, shape.offset_width))
    for at, width in widths:
        if width == 2:
            column = data[at : at + span : stride]
            taken = min(taken, len(column) - len(column.lstrip(_HIGH_BYTES)))
        column = data[at + width - 1 : at + span : stride]
        taken = min(taken, len(column) - len(column.lstrip(_LOW_BYTES)))
    return taken


def _decode_run(
    data: bytes,
    start: int,
    wanted: int,
    base_offset: int,
    base_timestamp: int,
    columns: RecordColumns,
) -> tuple[int, int]:
    """Decode up to ``wanted`` records from ``start`` that share the shape of the first one
    (see the comment above); (records taken, position after them). Takes 0 when the first
    record does not have a run shape or is malformed (the per-record decoder then reports it).
    """
    shape = _run_shape(data, start)
    if shape is None:
        return 0, start
    taken = _run_length(data, start, wanted, shape)
    span = taken * shape.stride
    _extend_offsets(data, shape, taken, span, base_offset, columns.offsets)
    _extend_timestamps(data, shape, taken, span, base_timestamp, columns.timestamps)
    stride = shape.stride
    for field_at, length, column_list in (
        (shape.key_at, shape.key_length, columns.keys),
        (shape.value_at, shape.value_length, columns.values),
    ):
        if length < 0:
            column_list.extend([None] * taken)
        elif length == 0:
            column_list.extend([b""] * taken)
        else:
            starts = range(field_at, field_at + span, stride)
            stops = range(field_at + length, field_at + length + span, stride)
            column_list.extend(map(data.__getitem__, map(slice, starts, stops)))
    columns.headers.extend([()] * taken)
    return taken, start + span


def _extend_offsets(
    data: bytes, shape: _RunShape, taken: int, span: int, base_offset: int, out: list[int]
) -> None:
    """The absolute offsets of a run's ``taken`` records, appended to ``out``."""
    at, stride, first = shape.offset_at, shape.stride, shape.offset_delta
    if shape.offset_width == 1:
        deltas = data[at : at + span : stride]
        if deltas == _DELTA1[first : first + taken]:
            out.extend(range(base_offset + first, base_offset + first + taken))
        else:
            out.extend([base_offset + d for d in map(_ZIGZAG1.__getitem__, deltas)])
        return
    low = data[at : at + span : stride]
    high = data[at + 1 : at + 1 + span : stride]
    last = first + taken
    if (
        last <= _MAX_RUN_DELTA
        and low == _DELTA2_LOW[first:last]
        and high == _DELTA2_HIGH[first:last]
    ):
        out.extend(range(base_offset + first, base_offset + last))
    else:
        out.extend(_two_byte_values(low, high, base_offset))


def _extend_timestamps(
    data: bytes, shape: _RunShape, taken: int, span: int, base_timestamp: int, out: list[int]
) -> None:
    """The timestamps of a run's ``taken`` records, appended to ``out``."""
    at, stride = shape.timestamp_at, shape.stride
    if shape.timestamp_width == 1:
        deltas = data[at : at + span : stride]
        if deltas.count(deltas[0]) == taken:
            out.extend([base_timestamp + shape.timestamp_delta] * taken)
        else:
            table = [base_timestamp + d for d in _ZIGZAG1]
            out.extend(map(table.__getitem__, deltas))
        return
    low = data[at : at + span : stride]
    high = data[at + 1 : at + 1 + span : stride]
    out.extend(_two_byte_values(low, high, base_timestamp))


def _two_byte_values(low: bytes, high: bytes, base: int) -> list[int]:
    """``base`` plus the zig-zag varints whose two bytes are low[i], high[i]."""
    return [
        base + ((((lo & 0x7F) | (hi << 7)) >> 1) ^ -(lo & 1))
        for lo, hi in zip(low, high, strict=True)
    ]
