"""The schema interpreter's rules: tagged fields, nullability, and error messages with paths."""

from __future__ import annotations

import pytest

from replog.errors import ProtocolError
from replog.protocol import EncodeError
from replog.protocol.messages import (
    EpochEndOffset,
    FetchPartition,
    FetchRequest,
    FetchResponse,
    FetchResponsePartition,
    FetchResponseTopic,
    FetchTopic,
    MetadataRequest,
)
from replog.protocol.schema import Versions


def _v12_response_with_partition_tags(tag_buffer: bytes) -> bytes:
    """A FetchResponse v12 whose only partition ends with ``tag_buffer``."""
    partition = FetchResponsePartition(partition_index=0, records=b"")
    body = FetchResponse(responses=[FetchResponseTopic(topic="t", partitions=[partition])]).encode(
        12
    )
    # The body ends: partition tags (00), topic tags (00), response tags (00).
    assert body[-3:] == b"\x00\x00\x00"
    return body[:-3] + tag_buffer + b"\x00\x00"


def test_unknown_tags_are_skipped() -> None:
    data = _v12_response_with_partition_tags(b"\x01\x07\x03abc")  # tag 7, 3 bytes
    partition = FetchResponse.decode(data, 12).responses[0].partitions[0]
    assert partition.diverging_epoch is None


def test_known_tag_is_decoded_and_must_fill_its_size_exactly() -> None:
    payload = bytes.fromhex("00000002000000000000000900")
    data = _v12_response_with_partition_tags(b"\x01\x00" + bytes([len(payload)]) + payload)
    partition = FetchResponse.decode(data, 12).responses[0].partitions[0]
    assert partition.diverging_epoch == EpochEndOffset(epoch=2, end_offset=9)
    padded = payload + b"\xee"
    data = _v12_response_with_partition_tags(b"\x01\x00" + bytes([len(padded)]) + padded)
    with pytest.raises(ProtocolError, match="diverging_epoch: 1 unexpected trailing bytes"):
        FetchResponse.decode(data, 12)


def test_decode_errors_name_the_message_and_field_path() -> None:
    request = FetchRequest(
        topics=[FetchTopic(topic="t", partitions=[FetchPartition(partition=1, fetch_offset=2)])]
    )
    data = request.encode(12)
    with pytest.raises(ProtocolError) as caught:
        FetchRequest.decode(data[:40], 12)
    assert str(caught.value).startswith("FetchRequest v12: topics[0].partitions[0].")


def test_encode_errors_name_the_field_path() -> None:
    request = FetchRequest(
        topics=[FetchTopic(topic="t", partitions=[FetchPartition(partition=2**40)])]
    )
    with pytest.raises(EncodeError, match=r"topics\[0\]\.partitions\[0\]\.partition: .* int32"):
        request.encode(5)


def test_null_where_the_version_forbids_it_is_an_encode_error() -> None:
    with pytest.raises(EncodeError, match="topics: null array"):
        MetadataRequest(topics=None).encode(0)  # v0 asks for all topics with []
    assert MetadataRequest.decode(MetadataRequest(topics=None).encode(1), 1).topics is None


def test_unserved_versions_are_refused_both_ways() -> None:
    with pytest.raises(EncodeError, match="Fetch v13 is not supported"):
        FetchRequest().encode(13)
    with pytest.raises(ProtocolError, match="Fetch v3 is not supported"):
        FetchRequest.decode(b"", 3)


def test_version_ranges_parse_kafka_notation() -> None:
    assert 7 in Versions.parse("3+")
    assert 2 not in Versions.parse("3+")
    assert 10 in Versions.parse("8-10") and 11 not in Versions.parse("8-10")
    assert 0 in Versions.parse("0") and 1 not in Versions.parse("0")
    assert 0 not in Versions.parse("none")
