"""Fetched record batches as numpy columns, with no Python object per record (no pyspark).

The Spark readers turn ``RecordArrays`` into Arrow arrays (the DataFrame source), into ``RddRecord``
tuples (the RDD) or just count them. ``slice_arrays`` is ``replog.client.fetching.slice_columns``
with this output: the same records, positions and epochs, plus each batch's timestamp type.

Fast path. The producer writes batches whose records come in runs of one shape: the same length
prefix, key length and value length, no headers, one- or two-byte timestamp and offset deltas.
Such a run has a fixed stride, so it is a 2-D view of the records section, one row per record:
the constant fields are compared column-wise (the run ends at the first row that differs), the
varint widths are checked on their continuation bits, the deltas are decoded as whole columns,
and the keys and values are one strided copy each, already laid out as an Arrow binary column.
This is ``decode_columns``'s run decoder (``replog.log.records``) done with numpy.

Anything else (compressed batches, headers, mixed shapes, offsets out of order) goes through
``slice_columns`` for that batch and is converted, so malformed input raises the same
``CorruptRecordError`` as the consumer's path. The CRC of every batch is checked either way.
"""

from __future__ import annotations

from collections.abc import Sequence

import attrs
import numpy as np
import numpy.typing as npt

from replog.client.fetching import ColumnSlice, slice_columns
from replog.log.compression import Compression
from replog.log.records import (
    RECORD_BATCH_OVERHEAD,
    BatchHeader,
    Buffer,
    iter_batches,
    validate_batch,
)

__all__ = ["BinaryColumn", "FetchArrays", "RecordArrays", "decode_batch", "slice_arrays"]

Headers = tuple[tuple[str, bytes | None], ...]
Int64s = npt.NDArray[np.int64]
Bytes = npt.NDArray[np.uint8]
Bools = npt.NDArray[np.bool_]

_RUNS_MAX_PER_RECORD = 1 / 32  # more runs than this (plus a few) means mixed shapes: fall back
_RUNS_SLACK = 8
_EMPTY_BYTES: Bytes = np.zeros(0, np.uint8)


@attrs.frozen
class BinaryColumn:
    """A nullable binary column laid out as Arrow's: ``data[ends[i] : ends[i + 1]]`` is value i
    (``ends`` has one more entry than there are values), ``nulls[i]`` marks a null (None: none)."""

    ends: Int64s
    data: Bytes
    nulls: Bools | None = None

    def __len__(self) -> int:
        return len(self.ends) - 1

    @classmethod
    def uniform(cls, count: int, length: int, data: Bytes) -> BinaryColumn:
        """``count`` values of ``length`` bytes each (-1: all null) stored back to back."""
        if length < 0:
            return cls(np.zeros(count + 1, np.int64), _EMPTY_BYTES, np.ones(count, np.bool_))
        return cls(np.arange(count + 1, dtype=np.int64) * length, data)

    @classmethod
    def from_values(cls, values: Sequence[bytes | None]) -> BinaryColumn:
        """From Python values (the slow path's lists)."""
        lengths = np.fromiter(
            (-1 if v is None else len(v) for v in values), np.int64, count=len(values)
        )
        nulls = lengths < 0
        ends = np.zeros(len(values) + 1, np.int64)
        np.cumsum(np.maximum(lengths, 0), out=ends[1:])
        joined = b"".join([v for v in values if v is not None])
        data = np.frombuffer(joined, np.uint8) if joined else _EMPTY_BYTES
        return cls(ends, data, nulls if nulls.any() else None)

    def slice(self, start: int, stop: int) -> BinaryColumn:
        """Values [start, stop) (views, no copy of the data)."""
        ends = self.ends[start : stop + 1]
        data = self.data[int(ends[0]) : int(ends[-1])]
        nulls = None if self.nulls is None else self.nulls[start:stop]
        return BinaryColumn(ends - ends[0], data, nulls)

    def to_list(self) -> list[bytes | None]:
        """The values as Python ``bytes`` (None for nulls)."""
        count = len(self)
        if self.nulls is not None and self.nulls.all():
            return [None] * count
        raw = self.data.tobytes()
        ends = self.ends.tolist()
        out: list[bytes | None] = list(map(raw.__getitem__, map(slice, ends[:-1], ends[1:])))
        if self.nulls is not None:
            for index in np.flatnonzero(self.nulls).tolist():
                out[index] = None
        return out

    @staticmethod
    def concat(columns: Sequence[BinaryColumn]) -> BinaryColumn:
        """One column holding ``columns`` one after another."""
        if len(columns) == 1:
            return columns[0]
        sizes = [int(c.ends[-1]) for c in columns]
        shifts = np.cumsum([0, *sizes[:-1]])
        ends = np.concatenate(
            [np.zeros(1, np.int64)] + [c.ends[1:] + s for c, s in zip(columns, shifts, strict=True)]
        )
        data = np.concatenate([c.data for c in columns]) if any(sizes) else _EMPTY_BYTES
        nulls = None
        if any(c.nulls is not None for c in columns):
            nulls = np.concatenate(
                [np.zeros(len(c), np.bool_) if c.nulls is None else c.nulls for c in columns]
            )
        return BinaryColumn(ends, data, nulls)


@attrs.frozen
class RecordArrays:
    """Records of one batch of one partition as columns, in offset order (strictly ascending).

    ``headers`` is None when no record has headers; ``timestamp_type`` is the batch's
    attributes bit 3 (0 CreateTime, 1 LogAppendTime)."""

    topic: str
    partition: int
    leader_epoch: int
    timestamp_type: int
    offsets: Int64s
    timestamps: Int64s
    keys: BinaryColumn
    values: BinaryColumn
    headers: list[Headers] | None = None

    def __len__(self) -> int:
        return len(self.offsets)

    def slice(self, start: int, stop: int) -> RecordArrays:
        """Records [start, stop)."""
        return attrs.evolve(
            self,
            offsets=self.offsets[start:stop],
            timestamps=self.timestamps[start:stop],
            keys=self.keys.slice(start, stop),
            values=self.values.slice(start, stop),
            headers=None if self.headers is None else self.headers[start:stop],
        )

    def header_list(self) -> list[Headers]:
        """Headers per record (empty tuples when the batch has none)."""
        return [()] * len(self) if self.headers is None else self.headers

    @classmethod
    def from_column_slice(cls, piece: ColumnSlice, timestamp_type: int) -> RecordArrays:
        """The same records from the consumer's columns (the slow path)."""
        c = piece.columns
        return cls(
            piece.topic,
            piece.partition,
            piece.leader_epoch,
            timestamp_type,
            np.array(c.offsets, np.int64),
            np.array(c.timestamps, np.int64),
            BinaryColumn.from_values(c.keys),
            BinaryColumn.from_values(c.values),
            c.headers if any(c.headers) else None,
        )


@attrs.frozen
class FetchArrays:
    """What one partition's records bytes yield (``FetchColumns`` as ``RecordArrays``)."""

    pieces: list[RecordArrays]
    next_offset: int
    last_epoch: int


def _timestamp_type(header: BatchHeader) -> int:
    return int(header.timestamp_type)  # attributes bit 3: 0 CreateTime, 1 LogAppendTime


def _small_varint(data: memoryview, at: int, limit: int) -> tuple[int, int] | None:
    """(value, width) of a zig-zag varint of one or two bytes at ``at``; None otherwise."""
    if at >= limit:
        return None
    first = data[at]
    if first < 0x80:
        return (first >> 1) ^ -(first & 1), 1
    if at + 1 >= limit or data[at + 1] >= 0x80:
        return None
    unsigned = (first & 0x7F) | (data[at + 1] << 7)
    return (unsigned >> 1) ^ -(unsigned & 1), 2


def _zigzag_column(block: Bytes, at: int, width: int) -> Int64s:
    """The one- or two-byte zig-zag varints at column ``at`` of every row of ``block``."""
    unsigned = block[:, at].astype(np.int64)
    if width == 2:
        unsigned = (unsigned & 0x7F) | (block[:, at + 1].astype(np.int64) << 7)
    return (unsigned >> 1) ^ -(unsigned & 1)


@attrs.frozen
class _Run:
    offsets: Int64s
    timestamps: Int64s
    keys: BinaryColumn
    values: BinaryColumn
    stop: int  # position after the run


def _decode_run(
    view: memoryview, rows: Bytes, start: int, wanted: int, header: BatchHeader
) -> _Run | None:
    """Records from ``start`` sharing the first one's shape (at most ``wanted``); None when the
    first record has no run shape (see module doc)."""
    limit = len(view)
    size = _small_varint(view, start, limit)
    if size is None:
        return None
    size_bytes, size_width = size
    end = start + size_width + size_bytes
    timestamp_at = start + size_width + 1  # after the record attributes byte
    timestamp = _small_varint(view, timestamp_at, end)
    if size_bytes < 6 or end > limit or timestamp is None:
        return None
    offset_at = timestamp_at + timestamp[1]
    offset = _small_varint(view, offset_at, end)
    if offset is None:
        return None
    key_length_at = offset_at + offset[1]
    key_length = _small_varint(view, key_length_at, end)
    if key_length is None or key_length[0] < -1:
        return None
    key_at = key_length_at + key_length[1]
    value_length_at = key_at + max(key_length[0], 0)
    value_length = _small_varint(view, value_length_at, end)
    if value_length is None or value_length[0] < -1:
        return None
    value_at = value_length_at + value_length[1]
    header_count_at = value_at + max(value_length[0], 0)
    if header_count_at + 1 != end or view[header_count_at] != 0:
        return None
    stride = end - start
    count = min(wanted, (limit - start) // stride)
    block = rows[start : start + count * stride].reshape(count, stride)
    constant = [
        *range(size_width),
        *range(key_length_at - start, key_at - start),
        *range(value_length_at - start, value_at - start),
        header_count_at - start,
    ]
    bad = (block[:, constant] != block[0, constant]).any(axis=1)
    for at, width in ((timestamp_at - start, timestamp[1]), (offset_at - start, offset[1])):
        if width == 2:
            bad |= block[:, at] < 0x80
        bad |= block[:, at + width - 1] >= 0x80
    if bad.any():
        count = int(bad.argmax())
        block = block[:count]
    offsets = header.base_offset + _zigzag_column(block, offset_at - start, offset[1])
    timestamps = header.base_timestamp + _zigzag_column(block, timestamp_at - start, timestamp[1])
    columns = []
    for at, length in ((key_at, key_length[0]), (value_at, value_length[0])):
        data = _EMPTY_BYTES
        if length > 0:
            data = np.ascontiguousarray(block[:, at - start : at - start + length]).reshape(-1)
        columns.append(BinaryColumn.uniform(count, length, data))
    return _Run(offsets, timestamps, columns[0], columns[1], start + count * stride)


def decode_batch(
    buf: Buffer, position: int, topic: str = "", partition: int = -1
) -> RecordArrays | None:
    """Validate the batch at ``position`` (CRC included) and decode it with the fast path;
    None when it does not apply (compressed, headers, mixed shapes, offsets out of order,
    malformed framing), for the caller to decode it with ``decode_columns`` instead."""
    header = validate_batch(buf, position)
    if header.compression != Compression.NONE or header.is_control:
        return None
    count = header.records_count
    view = memoryview(buf)[position + RECORD_BATCH_OVERHEAD : position + header.size_bytes]
    rows = np.frombuffer(view, np.uint8)
    runs: list[_Run] = []
    cursor = done = 0
    runs_max = _RUNS_SLACK + int(count * _RUNS_MAX_PER_RECORD)
    while done < count:
        run = _decode_run(view, rows, cursor, count - done, header)
        if run is None or len(runs) >= runs_max:
            return None
        runs.append(run)
        done += len(run.offsets)
        cursor = run.stop
    if cursor != len(view) or not runs:
        return None
    offsets = np.concatenate([r.offsets for r in runs])
    if not bool((offsets[1:] > offsets[:-1]).all()):
        return None
    return RecordArrays(
        topic,
        partition,
        header.partition_leader_epoch,
        _timestamp_type(header),
        offsets,
        np.concatenate([r.timestamps for r in runs]),
        BinaryColumn.concat([r.keys for r in runs]),
        BinaryColumn.concat([r.values for r in runs]),
    )


def slice_arrays(
    topic: str, partition: int, buf: Buffer, fetch_offset: int, until_offset: int
) -> FetchArrays:
    """``slice_columns`` as ``RecordArrays``: the records at offsets in ``[fetch_offset,
    until_offset)`` from the whole batches in ``buf``, the new position and the leader epoch
    of the batch the last consumed offset came from (-1: nothing consumed)."""
    out: list[RecordArrays] = []
    next_offset = fetch_offset
    last_epoch = -1
    for position, header in iter_batches(buf):
        if header.next_offset <= next_offset:
            continue  # entirely below the position
        if next_offset >= until_offset:
            break
        if header.is_control:
            next_offset, last_epoch = header.next_offset, header.partition_leader_epoch
            continue
        arrays = decode_batch(buf, position, topic, partition)
        if arrays is None:  # the consumer's decoder, for this batch alone
            whole = memoryview(buf)[position : position + header.size_bytes]
            sliced = slice_columns(topic, partition, whole, next_offset, until_offset - next_offset)
            kind = _timestamp_type(header)
            for piece in sliced.slices:
                arrays = RecordArrays.from_column_slice(piece, kind)
                if arrays.offsets[-1] >= until_offset:
                    arrays = arrays.slice(0, int(np.searchsorted(arrays.offsets, until_offset)))
                if len(arrays):
                    out.append(arrays)
            if sliced.next_offset > next_offset:  # it consumed something
                last_epoch = sliced.last_epoch
            next_offset = sliced.next_offset
            continue
        offsets = arrays.offsets
        first = int(np.searchsorted(offsets, next_offset))
        stop = int(np.searchsorted(offsets, until_offset))
        batch_done = stop == len(offsets)
        picked = arrays if first == 0 and batch_done else arrays.slice(first, stop)
        if len(picked):
            out.append(picked)
            next_offset = int(picked.offsets[-1]) + 1
            last_epoch = header.partition_leader_epoch
        if batch_done:
            next_offset = max(next_offset, header.next_offset)
            last_epoch = header.partition_leader_epoch
    return FetchArrays(out, next_offset, last_epoch)
