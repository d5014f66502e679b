"""`validate_client_batches`: a produced batch whose CRC holds but whose records no reader
could decode is refused before the append, one test per malformation the wire fuzzer found."""

from __future__ import annotations

import crc32c
import pytest

from replog.errors import CorruptRecordError, InvalidRecordError
from replog.log import encode_batch
from replog.log.compression import Compression, compress
from replog.log.encoding import encode_varint
from replog.log.produce_validation import INFLATED_BYTES_MAX, validate_client_batches
from replog.log.records import (
    CONTROL_BIT,
    CRC_START,
    HEADER,
    HEADER_STRUCT,
    LOG_OVERHEAD,
    MAGIC,
    RECORD_BATCH_OVERHEAD,
)


def _batch(section: bytes, count: int, attributes: int = 0) -> bytes:
    """A v2 batch with ``section`` as its records section, its CRC right."""
    length = len(section) + RECORD_BATCH_OVERHEAD - LOG_OVERHEAD
    fields = (0, length, -1, MAGIC, 0, attributes, count - 1, 1000, 1000, -1, -1, -1, count)
    head = bytearray(HEADER_STRUCT.pack(*fields))
    data = head + section
    HEADER.crc.write(data, 0, crc32c.crc32c(bytes(data[CRC_START:])))
    return bytes(data)


def _record(body: bytes) -> bytes:
    return encode_varint(len(body)) + body


_GOOD_BODY = b"\x00\x00\x00" + encode_varint(-1) + encode_varint(1) + b"v" + encode_varint(0)


@pytest.mark.parametrize("codec", list(Compression))
def test_well_formed_batches_pass_in_every_codec(codec: Compression) -> None:
    batch = encode_batch(
        [b"a", None, b"c" * 300],
        keys=[b"k", None, b""],
        headers=[[("h", b"1")], [], [("x", None)]],
        base_timestamp=5,
        compression=codec,
    )
    validate_client_batches(batch + batch)


def test_a_record_longer_than_its_batch_is_corrupt() -> None:
    section = encode_varint(len(_GOOD_BODY) + 50) + _GOOD_BODY
    with pytest.raises(CorruptRecordError):
        validate_client_batches(_batch(section, 1))


def test_an_overlong_varint_is_corrupt() -> None:
    # the timestamp delta as an 11-byte varlong (at most 10 are legal)
    body = b"\x00" + b"\x80" * 10 + b"\x00" + _GOOD_BODY[2:]
    with pytest.raises(CorruptRecordError, match="longer than"):
        validate_client_batches(_batch(_record(body), 1))


def test_a_negative_header_count_is_corrupt() -> None:
    body = _GOOD_BODY[:-1] + encode_varint(-3)
    with pytest.raises(CorruptRecordError, match="headers"):
        validate_client_batches(_batch(_record(body), 1))


@pytest.mark.parametrize(
    "codec", [Compression.GZIP, Compression.SNAPPY, Compression.LZ4, Compression.ZSTD]
)
def test_bytes_that_are_not_the_named_codec_are_corrupt(codec: Compression) -> None:
    garbage = b"\x00\x01 certainly not compressed \xff" * 4
    with pytest.raises(CorruptRecordError):
        validate_client_batches(_batch(garbage, 1, attributes=int(codec)))


@pytest.mark.parametrize("codec_id", [5, 6, 7])
def test_codec_ids_kafka_does_not_define_are_corrupt(codec_id: int) -> None:
    with pytest.raises(CorruptRecordError, match="codec"):
        validate_client_batches(_batch(_record(_GOOD_BODY), 1, attributes=codec_id))


def test_a_control_batch_from_a_client_is_an_invalid_record() -> None:
    with pytest.raises(InvalidRecordError, match="control"):
        validate_client_batches(_batch(_record(_GOOD_BODY), 1, attributes=CONTROL_BIT))


def test_a_decompression_bomb_is_refused_at_the_inflated_cap() -> None:
    # one record whose value is 256 MiB of zeros: a few KiB once compressed
    value_bytes = 256 * 1024 * 1024
    body = b"\x00\x00\x00" + encode_varint(-1) + encode_varint(value_bytes)
    records = encode_varint(len(body) + value_bytes + 1) + body + bytes(value_bytes) + b"\x00"
    bomb = _batch(compress(Compression.ZSTD, records), 1, attributes=int(Compression.ZSTD))
    assert len(bomb) < 1024 * 1024 < INFLATED_BYTES_MAX < value_bytes
    with pytest.raises(CorruptRecordError, match="cap"):
        validate_client_batches(bomb)


def test_a_bomb_under_a_smaller_cap_is_refused_too() -> None:
    batch = encode_batch([bytes(4096)], base_timestamp=0, compression=Compression.GZIP)
    validate_client_batches(batch, inflated_bytes_max=8192)
    with pytest.raises(CorruptRecordError, match="cap"):
        validate_client_batches(batch, inflated_bytes_max=1024)
