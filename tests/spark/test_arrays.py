"""``slice_arrays`` (numpy columns) gives exactly what the consumer's ``slice_columns`` gives."""

from __future__ import annotations

import random
import struct

import crc32c
import pytest

from replog.client.fetching import slice_columns
from replog.errors import CorruptRecordError
from replog.log import Compression, encode_batch
from replog.spark.arrays import FetchArrays, decode_batch, slice_arrays

Row = tuple[str, int, int, int, bytes | None, bytes | None, tuple[tuple[str, bytes | None], ...]]


def _rows(fetched: FetchArrays) -> list[Row]:
    out: list[Row] = []
    for a in fetched.pieces:
        out += zip(
            [a.topic] * len(a),
            [a.partition] * len(a),
            a.offsets.tolist(),
            a.timestamps.tolist(),
            a.keys.to_list(),
            a.values.to_list(),
            a.header_list(),
            strict=True,
        )
    return out


def _expected(buf: bytes, fetch_offset: int, until_offset: int) -> tuple[list[Row], int, int]:
    sliced = slice_columns("t", 3, buf, fetch_offset, until_offset - fetch_offset)
    rows: list[Row] = []
    for piece in sliced.slices:
        c = piece.columns
        rows += [
            ("t", 3, o, ts, k, v, h)
            for o, ts, k, v, h in zip(
                c.offsets, c.timestamps, c.keys, c.values, c.headers, strict=True
            )
            if o < until_offset
        ]
    return rows, sliced.next_offset, sliced.last_epoch


def _batches() -> bytes:
    rng = random.Random(7)
    parts: list[bytes] = []
    base = 0
    # the producer's shape: same-sized values, null keys, growing timestamp deltas
    n = 8000
    parts.append(
        encode_batch(
            [b"x" * 100] * n,
            timestamps=[1_700_000_000_000 + i // 50 for i in range(n)],
            base_timestamp=1_700_000_000_000,
            base_offset=base,
            partition_leader_epoch=4,
        )
    )
    base += n
    parts.append(encode_batch([b"w" * 20] * 9000, base_timestamp=7, base_offset=base))
    base += 9000
    # keys, empty values, null values, mixed sizes, headers, negative timestamp deltas
    shapes: list[dict[str, object]] = [
        {"values": [b"v%d" % i for i in range(300)], "keys": [b"k"] * 300},
        {"values": [b""] * 40, "keys": [None] * 40},
        {"values": [None] * 20, "keys": [b"key"] * 20},
        {"values": [rng.randbytes(rng.randrange(200)) for _ in range(500)]},
        {"values": [b"h"] * 30, "headers": [[("a", b"1"), ("b", None)]] * 30},
        {"values": [b"y" * 10] * 100, "timestamps": [5_000 - i for i in range(100)]},
        {"values": [b"z" * 9000] * 3},
    ]
    for shape in shapes:
        values = shape["values"]
        assert isinstance(values, list)
        parts.append(
            encode_batch(
                values,
                keys=shape.get("keys"),  # type: ignore[arg-type]
                headers=shape.get("headers"),  # type: ignore[arg-type]
                timestamps=shape.get("timestamps"),  # type: ignore[arg-type]
                base_timestamp=5_000,
                base_offset=base,
                partition_leader_epoch=5,
            )
        )
        base += len(values)
    parts.append(
        encode_batch(
            [b"c" * 50] * 200,
            base_timestamp=9,
            base_offset=base,
            compression=Compression.GZIP,
            partition_leader_epoch=6,
        )
    )
    return b"".join(parts)


BUF = _batches()
LAST = 8000 + 9000 + 300 + 40 + 20 + 500 + 30 + 100 + 3 + 200


@pytest.mark.parametrize(
    ("fetch_offset", "until_offset"),
    [(0, LAST), (0, 10), (63, 64), (100, 8050), (7990, 8400), (8890, LAST), (LAST - 1, LAST)],
)
def test_slice_arrays_matches_slice_columns(fetch_offset: int, until_offset: int) -> None:
    got = slice_arrays("t", 3, BUF, fetch_offset, until_offset)
    rows, next_offset, last_epoch = _expected(BUF, fetch_offset, until_offset)
    assert _rows(got) == rows
    assert len(rows) == until_offset - fetch_offset
    assert got.last_epoch == last_epoch
    if until_offset == LAST:
        assert got.next_offset == next_offset == LAST


def test_fast_path_covers_the_producer_shape() -> None:
    arrays = decode_batch(BUF, 0)
    assert arrays is not None and len(arrays) == 8000
    assert arrays.offsets.tolist() == list(range(8000))
    assert arrays.keys.nulls is not None and arrays.keys.nulls.all()


def _with_attributes(batch: bytes, set_bits: int) -> bytes:
    raw = bytearray(batch)
    (attributes,) = struct.unpack_from(">h", raw, 21)
    struct.pack_into(">h", raw, 21, attributes | set_bits)
    struct.pack_into(">I", raw, 17, crc32c.crc32c(bytes(raw[21:])))
    return bytes(raw)


def test_timestamp_type_comes_from_the_batch_attributes() -> None:
    create = encode_batch([b"a", b"b"], base_timestamp=1, base_offset=0)
    append = _with_attributes(encode_batch([b"c"], base_timestamp=2, base_offset=2), 0x08)
    got = slice_arrays("t", 0, create + append, 0, 3)
    assert [(len(a), a.timestamp_type) for a in got.pieces] == [(2, 0), (1, 1)]


def test_corrupt_batch_raises_like_the_consumer() -> None:
    broken = bytearray(BUF)
    broken[5_000] ^= 0xFF
    with pytest.raises(CorruptRecordError):
        slice_arrays("t", 0, bytes(broken), 0, LAST)


def test_arrow_batch_has_the_same_rows_and_the_batch_timestamp_type() -> None:
    pytest.importorskip("pyspark")
    pytest.importorskip("pyarrow")
    from replog.spark.datasource import _arrow_schema, arrays_to_record_batch

    append = _with_attributes(
        encode_batch([b"late"], keys=[b"k"], base_timestamp=2, base_offset=LAST), 0x08
    )
    fetched = slice_arrays("t", 3, BUF + append, 0, LAST + 1)
    batch = arrays_to_record_batch(fetched.pieces, _arrow_schema(True), True)
    rows = _rows(fetched)
    assert batch.num_rows == len(rows) == LAST + 1
    got = batch.to_pydict()
    assert got["key"] == [r[4] for r in rows] and got["value"] == [r[5] for r in rows]
    assert got["offset"] == list(range(LAST + 1))
    assert set(got["topic"]) == {"t"} and set(got["partition"]) == {3}
    micros = batch.column(5).cast("int64").to_pylist()
    assert micros == [r[3] * 1000 for r in rows]
    assert got["timestampType"] == [0] * LAST + [1]
    headers = [[(h["key"], h["value"]) for h in hs] for hs in got["headers"]]
    assert headers == [list(r[6]) for r in rows]
