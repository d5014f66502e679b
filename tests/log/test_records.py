"""Record batch v2 codec (Kafka's magic 2 format) and its compression codecs."""

from __future__ import annotations

import struct

import attrs
import cramjam
import crc32c
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from replog.errors import CorruptRecordError
from replog.log import (
    RECORD_BATCH_OVERHEAD,
    BatchHeader,
    Compression,
    Record,
    RecordColumns,
    TimestampType,
    decode_columns,
    decode_records,
    decoding,
    encode_batch,
    encoding,
    iter_batches,
    read_header,
    stamp_batch,
    validate_batch,
)
from replog.log.compression import compress, decompress
from replog.log.encoding import encode_varint, encode_varlong
from replog.log.records import HEADER

BASE_TS = 1_700_000_000_000


def with_fixed_crc(batch: bytes | bytearray) -> bytes:
    """Recompute the CRC of a hand-edited batch so only the edit itself is under test."""
    patched = bytearray(batch)
    struct.pack_into(">I", patched, 17, crc32c.crc32c(bytes(patched[21:])))
    return bytes(patched)


def replace_records(batch: bytes, section: bytes, *, count: int | None = None) -> bytes:
    """Swap the records section (and optionally the count), fixing length and CRC."""
    patched = bytearray(batch[:RECORD_BATCH_OVERHEAD] + section)
    struct.pack_into(">i", patched, 8, len(patched) - 12)
    if count is not None:
        struct.pack_into(">i", patched, 57, count)
    return with_fixed_crc(patched)


# --- checksums and varints ---------------------------------------------------------------------


def test_crc32c_is_castagnoli_with_the_standard_check_value() -> None:
    assert crc32c.crc32c(b"123456789") == 0xE3069283


@pytest.mark.parametrize(
    ("value", "encoded"),
    [
        (0, "00"),
        (-1, "01"),
        (1, "02"),
        (63, "7e"),
        (-64, "7f"),
        (64, "8001"),
        (300, "d804"),
        (2**31 - 1, "feffffff0f"),
        (-(2**31), "ffffffff0f"),
    ],
)
def test_varint_is_zigzag_then_unsigned_leb128(value: int, encoded: str) -> None:
    assert encode_varint(value).hex() == encoded
    assert encode_varlong(value).hex() == encoded


def test_varlong_covers_int64_and_varint_rejects_values_outside_int32() -> None:
    assert encode_varlong(-(2**63)).hex() == "ff" * 9 + "01"
    with pytest.raises(ValueError):
        encode_varint(2**31)
    with pytest.raises(ValueError):
        encode_varlong(2**63)


@given(st.integers(min_value=-(2**63), max_value=2**63 - 1))
def test_varlong_round_trips(value: int) -> None:
    encoded = encode_varlong(value)
    assert decoding._read_long(encoded, 0, len(encoded)) == (value, len(encoded))


# --- golden bytes ------------------------------------------------------------------------------

GOLDEN_BATCH = bytes.fromhex(
    "0000000000000000"  # base offset 0
    "0000003a"  # batch length 58 = 49 + 9 bytes of records
    "ffffffff"  # partition leader epoch -1
    "02"  # magic
    "716a6189"  # CRC-32C of everything from the attributes on
    "0000"  # attributes: no compression, create time
    "00000000"  # last offset delta
    "00000000000003e8"  # base timestamp 1000
    "00000000000003e8"  # max timestamp 1000
    "ffffffffffffffff"  # producer id -1
    "ffff"  # producer epoch -1
    "ffffffff"  # base sequence -1
    "00000001"  # one record
    "10"  # record length varint(8)
    "00"  # record attributes
    "00"  # timestamp delta 0
    "00"  # offset delta 0
    "02"  # key length varint(1)
    "6b"  # b"k"
    "02"  # value length varint(1)
    "76"  # b"v"
    "00"  # header count 0
)


def test_one_record_batch_matches_hand_computed_bytes() -> None:
    assert crc32c.crc32c(GOLDEN_BATCH[21:]) == 0x716A6189
    assert encode_batch([b"v"], keys=[b"k"], base_timestamp=1000) == GOLDEN_BATCH


def test_golden_batch_decodes_to_its_fields() -> None:
    header = validate_batch(GOLDEN_BATCH)
    assert header == BatchHeader(0, 58, -1, 2, 0x716A6189, 0, 0, 1000, 1000, -1, -1, -1, 1)
    assert (header.last_offset, header.next_offset, header.size_bytes) == (0, 1, 70)
    assert decode_records(GOLDEN_BATCH) == [Record(0, 1000, b"k", b"v")]


def test_single_record_fast_path_gives_the_same_bytes_as_the_general_encoder() -> None:
    for value in (None, b"", b"x" * 100, b"y" * 20_000):
        fast = encode_batch([value], base_timestamp=BASE_TS, base_offset=9)
        general = encoding._encode_records([value], None, None, None, BASE_TS)
        assert fast[RECORD_BATCH_OVERHEAD:] == general
        assert decode_records(fast) == [Record(9, BASE_TS, None, value)]


def test_header_attribute_bits_map_to_properties() -> None:
    header = BatchHeader(100, 49, 3, 2, 0, 0b11_1011, 4, 0, 0, 7, 1, 0, 5)
    assert header.compression is Compression.LZ4
    assert header.timestamp_type is TimestampType.LOG_APPEND_TIME
    assert header.is_transactional and header.is_control
    assert (header.last_offset, header.next_offset, header.size_bytes) == (104, 105, 61)
    plain = BatchHeader(0, 49, 0, 2, 0, 0, 0, 0, 0, -1, -1, -1, 1)
    assert plain.timestamp_type is TimestampType.CREATE_TIME
    assert not plain.is_transactional and not plain.is_control


def test_unknown_compression_id_is_corrupt() -> None:
    header = BatchHeader(0, 49, 0, 2, 0, 6, 0, 0, 0, -1, -1, -1, 1)
    with pytest.raises(CorruptRecordError):
        _ = header.compression


# --- round trips -------------------------------------------------------------------------------

nullable_bytes = st.none() | st.binary(max_size=300)
header_lists = st.lists(st.tuples(st.text(max_size=10), nullable_bytes), max_size=3)


@st.composite
def batches(draw: st.DrawFn) -> dict[str, object]:
    count = draw(st.integers(min_value=1, max_value=20))
    column = lambda strategy: st.lists(strategy, min_size=count, max_size=count)  # noqa: E731
    return {
        "values": draw(column(nullable_bytes)),
        "keys": draw(st.none() | column(nullable_bytes)),
        "headers": draw(st.none() | column(header_lists)),
        "timestamps": draw(
            st.none() | column(st.integers(min_value=BASE_TS - 10**6, max_value=BASE_TS + 10**9))
        ),
        "base_offset": draw(st.integers(min_value=0, max_value=2**62)),
        "compression": draw(st.sampled_from(Compression)),
    }


@settings(max_examples=200, deadline=None)
@given(batches())
def test_records_round_trip_with_nulls_headers_negative_deltas_and_every_codec(
    batch: dict[str, object],
) -> None:
    encoded = encode_batch(base_timestamp=BASE_TS, **batch)  # type: ignore[arg-type]
    values: list[bytes | None] = batch["values"]  # type: ignore[assignment]
    keys = batch["keys"] or [None] * len(values)  # type: ignore[operator]
    headers = batch["headers"] or [[] for _ in values]  # type: ignore[operator]
    timestamps = batch["timestamps"] or [BASE_TS] * len(values)  # type: ignore[operator]
    base_offset: int = batch["base_offset"]  # type: ignore[assignment]
    expected = [
        Record(base_offset + i, timestamps[i], keys[i], values[i], tuple(headers[i]))
        for i in range(len(values))
    ]
    assert decode_records(encoded) == expected
    header = validate_batch(encoded)
    assert header.compression == batch["compression"]
    assert header.records_count == len(values)
    assert header.last_offset == base_offset + len(values) - 1
    assert header.max_timestamp == max(timestamps)
    assert header.size_bytes == len(encoded)


@given(
    st.lists(st.binary(max_size=200), min_size=1, max_size=50),
    st.none() | st.binary(max_size=20),
    st.none() | st.just(True),
)
def test_plain_fast_path_writes_the_same_bytes_as_the_general_path(
    values: list[bytes], key: bytes | None, with_timestamps: bool | None
) -> None:
    timestamps = [BASE_TS - 5 + 3 * i for i in range(len(values))] if with_timestamps else None
    keys = [key] * len(values)
    plain = encoding._encode_plain_records(values, key, timestamps, BASE_TS)
    assert plain == encoding._encode_records(values, keys, None, timestamps, BASE_TS)


def test_large_batches_with_offsets_and_lengths_past_the_varint_table_round_trip() -> None:
    values = [b"%d" % i for i in range(20_000)] + [b"z" * 40_000]
    encoded = encode_batch(values, keys=[b"k"] * len(values), base_timestamp=BASE_TS)
    decoded = decode_records(encoded)
    assert [r.value for r in decoded] == values
    assert decoded[-1].offset == 20_000


def test_readers_accept_bytes_bytearray_memoryview_and_numpy() -> None:
    batch = encode_batch([b"a", b"b"], base_timestamp=BASE_TS)
    for buf in (batch, bytearray(batch), memoryview(batch), np.frombuffer(batch, dtype=np.uint8)):
        assert validate_batch(buf).records_count == 2  # type: ignore[arg-type]
        assert [p for p, _ in iter_batches(buf)] == [0]  # type: ignore[arg-type]
        assert len(decode_records(buf)) == 2  # type: ignore[arg-type]


def test_encode_rejects_empty_batches_and_mismatched_columns() -> None:
    with pytest.raises(ValueError):
        encode_batch([], base_timestamp=0)
    with pytest.raises(ValueError):
        encode_batch([b"a", b"b"], keys=[b"k"], base_timestamp=0)
    with pytest.raises(ValueError):
        encode_batch([b"a"], producer_epoch=2**15, base_timestamp=0)


# --- stamping ----------------------------------------------------------------------------------


def test_stamp_batch_changes_base_offset_and_epoch_and_keeps_the_crc_valid() -> None:
    batch = encode_batch([b"a", b"b", b"c"], base_timestamp=BASE_TS, compression=Compression.GZIP)
    buf = bytearray(b"\xff" * 5 + batch)
    stamp_batch(buf, 5, 1_000_000, 42)
    header = validate_batch(buf, 5)
    assert (header.base_offset, header.partition_leader_epoch, header.crc) == (
        1_000_000,
        42,
        read_header(batch).crc,
    )
    assert [r.offset for r in decode_records(buf, 5)] == [1_000_000, 1_000_001, 1_000_002]
    assert buf[:5] == b"\xff" * 5


# --- corruption --------------------------------------------------------------------------------

SAMPLE = encode_batch(
    [b"alpha", None, b"gamma" * 10],
    keys=[b"k1", b"k2", None],
    headers=[[("h", b"1")], [], [("x", None)]],
    timestamps=[BASE_TS, BASE_TS - 7, BASE_TS + 70],
    base_timestamp=BASE_TS,
)


@given(st.integers(min_value=16 * 8, max_value=len(SAMPLE) * 8 - 1))
def test_a_flipped_bit_from_the_magic_on_fails_validation(bit: int) -> None:
    corrupted = bytearray(SAMPLE)
    corrupted[bit // 8] ^= 1 << (bit % 8)
    with pytest.raises(CorruptRecordError):
        validate_batch(corrupted)


def test_validate_rejects_short_truncated_and_wrong_magic_batches() -> None:
    with pytest.raises(CorruptRecordError):
        validate_batch(SAMPLE[:60])
    with pytest.raises(CorruptRecordError):
        validate_batch(SAMPLE[:-1])
    short = bytearray(SAMPLE)
    struct.pack_into(">i", short, 8, 48)  # 60 bytes in all: below the header size
    with pytest.raises(CorruptRecordError):
        validate_batch(with_fixed_crc(short))
    magic1 = bytearray(SAMPLE)
    magic1[16] = 1
    with pytest.raises(CorruptRecordError, match="magic"):
        validate_batch(magic1)


def test_corrupt_record_error_carries_the_batch_position() -> None:
    buf = SAMPLE + SAMPLE[:30] + b"\x00" * 100
    with pytest.raises(CorruptRecordError) as info:
        validate_batch(buf, len(SAMPLE))
    assert info.value.position == len(SAMPLE)


@pytest.mark.parametrize(
    ("section", "count"),
    [
        (encode_varint(200) + b"\x00" * 6, 1),  # record length runs past the batch
        (bytes.fromhex("0c 00 00 00 01 01 00"), 2),  # fewer records than the count
        (bytes.fromhex("0c 00 00 00 01 01 00") + b"\x00", 1),  # bytes after the last record
        (bytes.fromhex("0e 00 00 00 01 01 00 00"), 1),  # a record longer than its fields
        (bytes.fromhex("0c 00 00 00 05 01 00"), 1),  # key length beyond the record
        (bytes.fromhex("0c 00 00 00 03 01 00"), 1),  # key length -2
        (bytes.fromhex("0c 00 ff ff 01 01 00"), 1),  # varint running off the record
        (bytes.fromhex("10 00 00 00 01 01 02 00 01 00"), 1),  # header with a null key
        (bytes.fromhex("12 00 00 00 01 01 02 02 ff 01"), 1),  # header key not UTF-8
        (bytes.fromhex("0c 00 00 00 01 01 7f"), 1),  # negative header count
        (b"\x0c" + b"\x00" * 6, -1),  # negative record count
        (b"\x0c" + b"\x00" * 6, 10**6),  # record count that cannot fit the bytes
        (b"", 1),
    ],
)
def test_inconsistent_record_framing_is_corrupt(section: bytes, count: int) -> None:
    with pytest.raises(CorruptRecordError):
        decode_records(replace_records(SAMPLE, section, count=count))
    with pytest.raises(CorruptRecordError):
        decode_columns(replace_records(SAMPLE, section, count=count))


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_mangled_records_raise_only_corrupt_record_error(data: st.DataObject) -> None:
    section = bytearray(SAMPLE[RECORD_BATCH_OVERHEAD:])
    for _ in range(data.draw(st.integers(min_value=1, max_value=4))):
        index = data.draw(st.integers(min_value=0, max_value=len(section) - 1))
        section[index] = data.draw(st.integers(min_value=0, max_value=255))
    cut = data.draw(st.integers(min_value=0, max_value=len(section)))
    try:
        decode_records(replace_records(SAMPLE, bytes(section[:cut])))
    except CorruptRecordError:
        pass


# --- iterating a log file ------------------------------------------------------------------------

LOG = b"".join(
    encode_batch([b"v%d" % i] * (i + 1), base_offset=10 * i, base_timestamp=i) for i in range(3)
)


def batch_positions(buf: bytes | bytearray | memoryview) -> list[int]:
    return [position for position, _ in iter_batches(buf)]


def test_iter_batches_yields_every_whole_batch_with_its_header() -> None:
    found = list(iter_batches(LOG))
    assert [h.base_offset for _, h in found] == [0, 10, 20]
    assert found[1][0] == found[0][1].size_bytes
    assert sum(h.size_bytes for _, h in found) == len(LOG)


def test_iter_batches_stops_quietly_at_a_truncated_last_batch() -> None:
    last_start = batch_positions(LOG)[-1]
    for cut in range(last_start, len(LOG)):
        assert batch_positions(LOG[:cut]) == batch_positions(LOG)[:2], cut


def test_iter_batches_stops_when_seventeen_or_fewer_bytes_remain() -> None:
    # even a size field below 14 is not read when the tail is too short to hold it and the magic
    tail = struct.pack(">qi", 0, 0) + b"\x00" * 5
    assert len(tail) == 17
    assert batch_positions(LOG + tail) == batch_positions(LOG)


def test_iter_batches_raises_when_the_size_field_is_below_14() -> None:
    bad = struct.pack(">qi", 0, 13) + b"\x00" * 49
    with pytest.raises(CorruptRecordError) as info:
        batch_positions(LOG + bad)
    assert info.value.position == len(LOG)
    zeroed_tail = b"\x00" * 100  # a preallocated, never written tail
    with pytest.raises(CorruptRecordError):
        batch_positions(LOG + zeroed_tail)


def test_iter_batches_rejects_a_whole_batch_too_small_for_a_header() -> None:
    tiny = struct.pack(">qi", 0, 14) + b"\x00" * 14
    with pytest.raises(CorruptRecordError):
        batch_positions(tiny + b"\x00" * 100)
    assert batch_positions(tiny[:-1]) == []  # partial: stops, as for any torn write


def test_iter_batches_does_not_check_crcs() -> None:
    corrupted = bytearray(LOG)
    corrupted[-1] ^= 0xFF
    assert batch_positions(corrupted) == batch_positions(LOG)


# --- compression -------------------------------------------------------------------------------

PAYLOAD = b"".join(b"record %d, " % i for i in range(20_000))


@pytest.mark.parametrize("codec", list(Compression))
def test_every_codec_round_trips(codec: Compression) -> None:
    for data in (b"", b"a", PAYLOAD):
        assert decompress(codec, compress(codec, data)) == data


@pytest.mark.parametrize("codec", [c for c in Compression if c != Compression.NONE])
def test_decompression_stops_at_the_cap_instead_of_inflating_a_bomb(codec: Compression) -> None:
    bomb = compress(codec, bytes(50_000_000))
    assert len(bomb) < 3_000_000
    with pytest.raises(CorruptRecordError, match="cap"):
        decompress(codec, bomb, max_bytes=1_000_000)
    batch = encode_batch([bytes(1_000_000)] * 5, base_timestamp=0, compression=codec)
    with pytest.raises(CorruptRecordError, match="cap"):
        decode_records(batch, max_decompressed_bytes=1_000_000)


@pytest.mark.parametrize("codec", [c for c in Compression if c != Compression.NONE])
@pytest.mark.parametrize("garbage", [b"", b"\xff", b"not compressed at all" * 3, bytes(range(256))])
def test_garbage_compressed_payload_is_corrupt(codec: Compression, garbage: bytes) -> None:
    with pytest.raises(CorruptRecordError):
        decompress(codec, garbage)
    batch = bytearray(encode_batch([b"x"], base_timestamp=0, compression=codec))
    with pytest.raises(CorruptRecordError):
        decode_records(replace_records(bytes(batch), garbage))


def test_snappy_writes_xerial_framing_and_reads_raw_blocks_too() -> None:
    framed = compress(Compression.SNAPPY, PAYLOAD)
    assert framed[:16] == b"\x82SNAPPY\x00" + struct.pack(">ii", 1, 1)
    (first_block_bytes,) = struct.unpack_from(">i", framed, 16)
    first_block = framed[20 : 20 + first_block_bytes]
    assert cramjam.snappy.decompress_raw_len(first_block) == 32 * 1024
    raw = bytes(cramjam.snappy.compress_raw(PAYLOAD))
    assert decompress(Compression.SNAPPY, raw) == PAYLOAD
    assert decompress(Compression.SNAPPY, framed + framed) == PAYLOAD * 2  # concatenated streams


def test_lz4_frames_use_independent_blocks_as_kafka_requires() -> None:
    frame = compress(Compression.LZ4, PAYLOAD)
    assert frame[:4] == b"\x04\x22\x4d\x18"
    flags = frame[4]
    assert flags >> 6 == 0b01  # frame version 1
    assert flags & 0x20  # block independence


@pytest.mark.parametrize("value_length", [0, 1, 63, 64, 127, 128, 8191, 8192, 16384])
@pytest.mark.parametrize("key", [None, b"", b"k", b"x" * 200])
@pytest.mark.parametrize("count", [2, 64, 65, 300])
def test_uniform_fast_path_writes_the_same_bytes_as_the_general_encoder(
    value_length: int, key: bytes | None, count: int
) -> None:
    values = [bytes([i % 251]) * value_length for i in range(count)]
    fast = encode_batch(values, keys=[key] * count, base_timestamp=5)
    general = encode_batch(
        values, keys=[key] * count, headers=[()] * count, base_timestamp=5
    )  # headers force the general per-record encoder
    assert fast == general
    records = decode_records(fast)
    assert [r.value for r in records] == values
    assert [r.offset for r in records] == list(range(count))


# --- columnar decoding ---------------------------------------------------------------------------


def assert_same_decoding(buf: bytes) -> None:
    """decode_columns gives decode_records' records field by field, or both raise."""
    try:
        expected = decode_records(buf)
    except CorruptRecordError:
        with pytest.raises(CorruptRecordError):
            decode_columns(buf)
        return
    columns = decode_columns(buf)
    assert isinstance(columns, RecordColumns)
    assert len(columns) == len(expected)
    assert columns.offsets == [r.offset for r in expected]
    assert columns.timestamps == [r.timestamp for r in expected]
    assert columns.keys == [r.key for r in expected]
    assert columns.values == [r.value for r in expected]
    assert columns.headers == [r.headers for r in expected]
    assert columns.records() == expected


@settings(max_examples=200, deadline=None)
@given(batches())
def test_columns_match_records_with_nulls_headers_negative_deltas_and_every_codec(
    batch: dict[str, object],
) -> None:
    assert_same_decoding(encode_batch(base_timestamp=BASE_TS, **batch))  # type: ignore[arg-type]


@st.composite
def uniform_batches(draw: st.DrawFn) -> bytes:
    """Same-shape records (the run fast path): fixed key and value lengths, small or large
    timestamp deltas, counts across the one/two-byte offset delta boundary at 64."""
    count = draw(st.integers(min_value=1, max_value=300))
    value_length = draw(st.sampled_from([0, 1, 10, 63, 64, 100, 200]))
    key_length = draw(st.sampled_from([None, 0, 1, 8]))
    column = lambda strategy: st.lists(strategy, min_size=count, max_size=count)  # noqa: E731
    values = draw(column(st.binary(min_size=value_length, max_size=value_length)))
    keys = None
    if key_length is not None:
        keys = draw(column(st.binary(min_size=key_length, max_size=key_length)))
    spread = draw(st.sampled_from([0, 1, 63, 64, 100, 10_000, 10**6]))
    timestamps = draw(st.none() | column(st.integers(BASE_TS - spread, BASE_TS + spread)))
    mixed = draw(st.booleans())  # a few records of another shape in the middle
    if mixed and count > 2:
        values[count // 2] = None
        values[count // 3] = b"x" * (value_length + 1)
    return encode_batch(
        values,
        keys=keys,
        headers=[()] * count if draw(st.booleans()) else None,
        timestamps=timestamps,
        base_offset=draw(st.integers(min_value=0, max_value=2**40)),
        base_timestamp=BASE_TS,
        compression=draw(st.sampled_from([Compression.NONE, Compression.GZIP])),
    )


@settings(max_examples=300, deadline=None)
@given(uniform_batches())
def test_columns_match_records_on_uniform_and_mixed_runs(encoded: bytes) -> None:
    assert_same_decoding(encoded)


@pytest.mark.parametrize("count", [1, 63, 64, 65, 5000, 9000])
def test_columns_of_producer_shaped_batches(count: int) -> None:
    timestamps = [BASE_TS + i // 40 for i in range(count)]  # deltas grow past one varint byte
    encoded = encode_batch(
        [b"v" * 100] * count,
        keys=[None] * count,
        headers=[()] * count,
        timestamps=timestamps,
        base_offset=7,
        base_timestamp=BASE_TS,
    )
    columns = decode_columns(encoded)
    assert columns.offsets == list(range(7, 7 + count))
    assert columns.timestamps == timestamps
    assert_same_decoding(encoded)


RUN_SAMPLE = encode_batch(
    [b"%03d" % i for i in range(80)],
    keys=[b"k"] * 80,
    timestamps=[BASE_TS + (i % 5) * 30 for i in range(80)],
    base_timestamp=BASE_TS,
)


@settings(max_examples=500, deadline=None)
@given(st.data())
def test_mangled_runs_decode_exactly_like_decode_records(data: st.DataObject) -> None:
    section = bytearray(RUN_SAMPLE[RECORD_BATCH_OVERHEAD:])
    for _ in range(data.draw(st.integers(min_value=1, max_value=4))):
        index = data.draw(st.integers(min_value=0, max_value=len(section) - 1))
        section[index] = data.draw(st.integers(min_value=0, max_value=255))
    cut = data.draw(st.integers(min_value=len(section) - 40, max_value=len(section)))
    count = data.draw(st.none() | st.integers(min_value=0, max_value=90))
    assert_same_decoding(replace_records(RUN_SAMPLE, bytes(section[:cut]), count=count))


def test_columns_check_the_crc() -> None:
    broken = bytearray(RUN_SAMPLE)
    broken[-3] ^= 0x01
    with pytest.raises(CorruptRecordError):
        decode_columns(bytes(broken))


def test_columns_read_at_a_position_in_a_memoryview() -> None:
    log = memoryview(b"".join((SAMPLE, RUN_SAMPLE)))
    assert decode_columns(log, len(SAMPLE)).records() == decode_records(RUN_SAMPLE)


def test_header_fields_are_the_layout_every_reader_shares() -> None:
    """``HEADER`` is the one declaration of the header: each field reads (and writes) exactly
    what ``read_header`` parses, at the position the format table gives."""
    batch = bytearray(
        encode_batch(
            [b"a", b"bb"],
            base_timestamp=1_000,
            timestamps=[1_000, 1_007],
            base_offset=41,
            partition_leader_epoch=6,
            producer_id=9,
            producer_epoch=2,
            base_sequence=3,
        )
    )
    header = read_header(batch)
    assert [f.name for f in HEADER] == [a.name for a in attrs.fields(BatchHeader)]
    assert (HEADER.max_timestamp.position, HEADER.records_count.end) == (35, 61)
    for field in HEADER:
        assert field.read(batch) == getattr(header, field.name), field.name
        assert field.decode(bytes(batch[field.position : field.end])) == getattr(header, field.name)
    HEADER.partition_leader_epoch.write(batch, 0, 11)
    assert read_header(batch).partition_leader_epoch == 11
    validate_batch(batch)  # the CRC does not cover the leader epoch
