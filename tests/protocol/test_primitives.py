"""Primitive encodings: known vectors, round trips, and every malformed read as ProtocolError."""

from __future__ import annotations

import uuid
from collections.abc import Callable

import pytest
from hypothesis import given
from hypothesis import strategies as st

from replog.errors import ProtocolError
from replog.protocol import EncodeError, Reader, RecordsRef, Writer

TEXT = st.text(st.characters(codec="utf-8"), max_size=40)


def _written(fill: Callable[[Writer], None]) -> bytes:
    w = Writer()
    fill(w)
    return w.to_bytes()


@pytest.mark.parametrize(
    ("value", "encoded"),
    [(0, "00"), (1, "01"), (127, "7f"), (128, "8001"), (300, "ac02"), (2**32 - 1, "ffffffff0f")],
)
def test_unsigned_varint_vectors(value: int, encoded: str) -> None:
    assert _written(lambda w: w.write_unsigned_varint(value)).hex() == encoded
    assert Reader(bytes.fromhex(encoded)).read_unsigned_varint() == value


@pytest.mark.parametrize(
    ("value", "encoded"), [(0, "00"), (-1, "01"), (1, "02"), (-2, "03"), (63, "7e"), (-64, "7f")]
)
def test_zigzag_varint_vectors(value: int, encoded: str) -> None:
    assert _written(lambda w: w.write_varint(value)).hex() == encoded
    assert Reader(bytes.fromhex(encoded)).read_varint() == value


@given(st.integers(-(2**31), 2**31 - 1))
def test_varint_round_trips(value: int) -> None:
    assert Reader(_written(lambda w: w.write_varint(value))).read_varint() == value


@given(st.integers(-(2**63), 2**63 - 1))
def test_varlong_round_trips(value: int) -> None:
    data = _written(lambda w: w.write_varlong(value))
    assert len(data) <= 10
    assert Reader(data).read_varlong() == value


@given(
    i8=st.integers(-128, 127),
    i16=st.integers(-(2**15), 2**15 - 1),
    i32=st.integers(-(2**31), 2**31 - 1),
    i64=st.integers(-(2**63), 2**63 - 1),
    u32=st.integers(0, 2**32 - 1),
    flag=st.booleans(),
    ident=st.uuids(),
    text=TEXT,
    maybe_text=st.none() | TEXT,
    blob=st.binary(max_size=50),
    maybe_blob=st.none() | st.binary(max_size=50),
    compact=st.booleans(),
)
def test_scalars_round_trip(
    i8: int,
    i16: int,
    i32: int,
    i64: int,
    u32: int,
    flag: bool,
    ident: uuid.UUID,
    text: str,
    maybe_text: str | None,
    blob: bytes,
    maybe_blob: bytes | None,
    compact: bool,
) -> None:
    w = Writer()
    w.write_int8(i8)
    w.write_int16(i16)
    w.write_int32(i32)
    w.write_int64(i64)
    w.write_uint32(u32)
    w.write_bool(flag)
    w.write_uuid(ident)
    w.write_string(text, compact=compact)
    w.write_nullable_string(maybe_text, compact=compact)
    w.write_bytes(blob, compact=compact)
    w.write_nullable_bytes(maybe_blob, compact=compact)
    w.write_array_length(2, compact=compact)
    w.write_int32(1)
    w.write_int32(2)
    w.write_array_length(None, compact=compact)
    w.write_empty_tagged_fields()
    r = Reader(w.to_bytes())
    assert r.read_int8() == i8
    assert r.read_int16() == i16
    assert r.read_int32() == i32
    assert r.read_int64() == i64
    assert r.read_uint32() == u32
    assert r.read_bool() is flag
    assert r.read_uuid() == ident
    assert r.read_string(compact=compact) == text
    assert r.read_nullable_string(compact=compact) == maybe_text
    assert r.read_bytes(compact=compact) == blob
    assert r.read_nullable_bytes(compact=compact) == maybe_blob
    assert r.read_array(r.read_int32, compact=compact) == [1, 2]
    assert r.read_nullable_array(r.read_int32, compact=compact) is None
    assert r.read_tagged_fields() == []
    r.expect_end("test")


@pytest.mark.parametrize(
    ("data", "read", "match"),
    [
        (b"\x00", Reader.read_int16, "truncated int16"),
        (b"\x00\x00\x00", Reader.read_int32, "truncated int32"),
        (b"\x01" * 7, Reader.read_int64, "truncated int64"),
        (b"\x00" * 15, Reader.read_uuid, "truncated uuid"),
        (b"\x80\x80", Reader.read_unsigned_varint, "truncated unsigned varint"),
        (b"\x80\x80\x80\x80\x80\x01", Reader.read_unsigned_varint, "longer than 5"),
        (b"\xff\xff\xff\xff\x7f", Reader.read_unsigned_varint, "does not fit 32"),
        (b"\x80" * 10 + b"\x01", Reader.read_varlong, "longer than 10"),
        (b"\x00\x05abc", Reader.read_string, "truncated string"),
        (b"\xff\xff", Reader.read_string, "null string"),
        (b"\xff\xfe", Reader.read_nullable_string, "negative string length"),
        (b"\x00\x02\xc3\x28", Reader.read_string, "UTF-8"),
        (b"\x00\x00\x00\x09ab", Reader.read_bytes, "truncated bytes"),
        (b"\xff\xff\xff\xff", Reader.read_bytes, "null bytes"),
        (b"\x7f\xff\xff\xff", Reader.read_array_length, "cannot fit"),
        (b"\x80\x80\x80\x80\x08", lambda r: r.read_array_length(compact=True), "cannot fit"),
        (b"\x02\x01\x09ab", Reader.read_tagged_fields, "truncated tagged field 1"),
        (b"\x7f", Reader.read_tagged_fields, "cannot fit"),
    ],
)
def test_malformed_reads_raise_protocol_error_saying_what(
    data: bytes, read: Callable[[Reader], object], match: str
) -> None:
    with pytest.raises(ProtocolError, match=match):
        read(Reader(data))


def test_null_array_where_none_is_allowed_is_a_protocol_error() -> None:
    r = Reader(b"\xff\xff\xff\xff")
    with pytest.raises(ProtocolError, match="null array"):
        r.read_array(r.read_int32)


@pytest.mark.parametrize(
    "write",
    [
        lambda w: w.write_int8(128),
        lambda w: w.write_int16(-(2**15) - 1),
        lambda w: w.write_int32(2**31),
        lambda w: w.write_int64(2**63),
        lambda w: w.write_uint32(-1),
        lambda w: w.write_unsigned_varint(2**32),
        lambda w: w.write_varint(2**31),
        lambda w: w.write_varlong(-(2**63) - 1),
        lambda w: w.write_string("x" * 40000),
        lambda w: w.write_string("\ud800"),
        lambda w: w.write_tagged_fields([(2, b""), (1, b"")]),
    ],
)
def test_values_that_do_not_fit_raise_encode_error(write: Callable[[Writer], None]) -> None:
    with pytest.raises(EncodeError):
        write(Writer())


def test_records_ref_leaves_a_hole_counted_in_sizes() -> None:
    w = Writer()
    w.write_int8(7)
    w.write_records_ref(RecordsRef(size_bytes=300, source="file"), compact=True)
    w.write_int8(9)
    assert w.parts() == [b"\x07\xad\x02", RecordsRef(size_bytes=300, source="file"), b"\x09"]
    assert w.size_bytes == 3 + 300 + 1
    with pytest.raises(EncodeError):
        w.to_bytes()


def test_reader_accepts_memoryviews_and_returns_zero_copy_slices() -> None:
    backing = bytearray(b"\x00\x00\x00\x03abcZ")
    view = Reader(memoryview(backing)).read_bytes()
    backing[4] = ord("X")
    assert bytes(view) == b"Xbc"
