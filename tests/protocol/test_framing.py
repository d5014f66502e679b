"""Frames, headers, and how unsupported requests are reported."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from replog.errors import ErrorCode, ProtocolError
from replog.protocol import (
    FrameReader,
    FrameTooLargeError,
    Reader,
    RequestHeader,
    UnknownApiKeyError,
    UnsupportedVersionError,
    decode_request,
    encode_request,
    encode_response,
    read_frame_size,
    unsupported_version_response,
)
from replog.protocol.framing import (
    _read_request_header,
    _read_request_header_fast,
    decode_response,
    request_header_version,
)
from replog.protocol.messages import (
    ApiVersion,
    ApiVersionsResponse,
    FetchRequest,
    MetadataRequest,
    ProduceResponse,
)


def _header_bytes(api_key: int, api_version: int, correlation_id: int) -> bytes:
    return (
        api_key.to_bytes(2, "big", signed=True)
        + api_version.to_bytes(2, "big", signed=True)
        + correlation_id.to_bytes(4, "big", signed=True)
        + b"\x00\x03cli"
    )


def test_unknown_api_key_raises_a_typed_error_with_the_correlation_id() -> None:
    with pytest.raises(UnknownApiKeyError) as caught:
        decode_request(_header_bytes(4242, 0, 77))
    assert caught.value.correlation_id == 77
    assert caught.value.api_key == 4242
    assert caught.value.client_id == "cli"
    assert isinstance(caught.value, ProtocolError)
    assert unsupported_version_response(caught.value) is None  # type: ignore[arg-type]


def test_unsupported_version_of_a_served_api_is_typed_and_has_no_answer() -> None:
    with pytest.raises(UnsupportedVersionError) as caught:
        decode_request(_header_bytes(0, 2, 5))  # Produce v2: below v3
    assert (caught.value.api_key, caught.value.api_version) == (0, 2)
    assert caught.value.correlation_id == 5
    assert caught.value.code == ErrorCode.UNSUPPORTED_VERSION
    assert unsupported_version_response(caught.value) is None  # Kafka closes the connection


def test_unsupported_api_versions_version_is_answered_with_v0_and_error_35() -> None:
    with pytest.raises(UnsupportedVersionError) as caught:
        decode_request(_header_bytes(18, 9, 31) + b"\x00garbage-the-broker-never-reads")
    frame = unsupported_version_response(caught.value)
    assert frame is not None
    correlation_id, response = decode_response(frame[4:], api_key=18, api_version=0)
    assert correlation_id == 31
    assert response == ApiVersionsResponse(
        error_code=35, api_keys=[ApiVersion(api_key=18, min_version=0, max_version=3)]
    )


def test_oversized_frames_are_rejected() -> None:
    with pytest.raises(FrameTooLargeError) as caught:
        decode_request(_header_bytes(3, 1, 1) + b"\x00" * 100, frame_bytes_max=64)
    assert caught.value.frame_bytes_max == 64
    with pytest.raises(FrameTooLargeError):
        read_frame_size((1 << 20).to_bytes(4, "big"), frame_bytes_max=1024)
    with pytest.raises(FrameTooLargeError):
        read_frame_size(b"\xff\xff\xff\xfe", frame_bytes_max=1024)
    with pytest.raises(ProtocolError):
        read_frame_size(b"\x00\x01", frame_bytes_max=1024)


def test_frame_reader_rejects_an_oversized_prefix_before_buffering_its_body() -> None:
    reader = FrameReader(frame_bytes_max=10)
    with pytest.raises(FrameTooLargeError):
        reader.feed((11).to_bytes(4, "big"))


@given(
    payloads=st.lists(st.binary(max_size=30), max_size=5),
    cuts=st.lists(st.integers(0, 200), max_size=6),
)
def test_frame_reader_returns_frames_whatever_the_chunking(
    payloads: list[bytes], cuts: list[int]
) -> None:
    stream = b"".join(len(p).to_bytes(4, "big") + p for p in payloads)
    points = sorted({min(c, len(stream)) for c in cuts} | {0, len(stream)})
    reader = FrameReader(frame_bytes_max=64)
    frames = []
    for start, end in itertools.pairwise(points):
        frames.extend(reader.feed(stream[start:end]))
    assert frames == payloads
    assert reader.buffered_bytes == 0


# librdkafka 2.x's Metadata v12 request for all topics, as confluent-kafka sent it to a replog
# broker: header (key 3, v12, correlation id 3, client "rdkafka", no tags), then the body (null
# topics, allow_auto_topic_creation false, include_topic_authorized_operations false, no tags)
# and three bytes more.
RDKAFKA_METADATA_V12_ALL_TOPICS = bytes.fromhex(
    "0003000c00000003000772646b61666b61000000000000010000"
)


def test_trailing_bytes_after_a_request_body_are_ignored_as_kafka_does() -> None:
    header, body = decode_request(RDKAFKA_METADATA_V12_ALL_TOPICS)
    assert (header.api_key, header.api_version, header.correlation_id) == (3, 12, 3)
    assert header.client_id == "rdkafka"
    assert body == MetadataRequest(topics=None, allow_auto_topic_creation=False)
    header = RequestHeader(api_key=3, api_version=1, correlation_id=1)
    frame = encode_request(header, MetadataRequest(topics=None))[4:]
    assert decode_request(frame + b"\x00\x01")[1] == MetadataRequest(topics=None)


def test_trailing_bytes_after_a_whole_body_are_rejected() -> None:
    body = MetadataRequest(topics=None).encode(1)
    with pytest.raises(ProtocolError, match="trailing"):
        MetadataRequest.decode(body + b"\x00", 1)
    response = ProduceResponse(responses=[])
    frame = encode_response(9, 3, response)[4:]
    with pytest.raises(ProtocolError, match="trailing"):
        decode_response(frame + b"\x00", api_key=0, api_version=3)


def test_frames_shorter_than_a_header_are_protocol_errors() -> None:
    for frame in (b"", b"\x00", b"\x00\x03\x00\x01\x00\x00"):
        with pytest.raises(ProtocolError):
            decode_request(frame)


def test_flexible_request_header_skips_unknown_tagged_fields() -> None:
    header = RequestHeader(api_key=1, api_version=12, correlation_id=8, client_id="f")
    frame = bytearray(encode_request(header, FetchRequest(replica_id=2))[4:])
    header_end = 2 + 2 + 4 + 2 + 1
    assert frame[header_end] == 0  # empty tag buffer
    frame[header_end : header_end + 1] = b"\x01\x05\x02hi"  # one unknown tag (5), 2 bytes
    decoded_header, request = decode_request(bytes(frame))
    assert decoded_header == header
    assert request == FetchRequest(replica_id=2)


def test_header_versions_follow_flexibility() -> None:
    assert request_header_version(1, 11) == 1
    assert request_header_version(1, 12) == 2
    flexible = encode_response(3, 9, ProduceResponse())
    rigid = encode_response(3, 8, ProduceResponse())
    assert flexible[4:8] == rigid[4:8] == b"\x00\x00\x00\x03"
    assert flexible[8] == 0  # response header v1 tagged fields, then the body


def test_encode_request_refuses_a_body_of_another_api() -> None:
    from replog.protocol import EncodeError

    with pytest.raises(EncodeError):
        encode_request(RequestHeader(api_key=0, api_version=3, correlation_id=1), FetchRequest())


@settings(max_examples=400)
@given(
    api=st.sampled_from([(0, 3), (0, 9), (0, 10), (1, 11), (1, 12), (3, 9), (18, 3), (99, 0)]),
    client_id=st.one_of(st.none(), st.binary(max_size=6), st.text(max_size=4)),
    client_id_length=st.one_of(st.none(), st.none(), st.integers(-3, 9)),
    rest=st.one_of(
        st.sampled_from([b"", b"\x00", b"\x00\x07", b"\x01\x05\x02hi"]), st.binary(max_size=6)
    ),
)
def test_the_one_unpack_header_reader_agrees_with_the_field_reader(
    api: tuple[int, int],
    client_id: bytes | str | None,
    client_id_length: int | None,
    rest: bytes,
) -> None:
    """``decode_request`` reads a well-formed header with one unpack and leaves anything else
    (unknown APIs and versions, null or bad client ids, tagged header fields, short frames) to
    the field-by-field reader: where the fast reader answers, it answers the same."""
    raw = client_id.encode() if isinstance(client_id, str) else client_id
    length = (-1 if raw is None else len(raw)) if client_id_length is None else client_id_length
    frame = (
        _header_bytes(*api, 5)[:8] + length.to_bytes(2, "big", signed=True) + (raw or b"") + rest
    )
    fast_reader = Reader(frame)
    fast = _read_request_header_fast(fast_reader)
    if fast is None:
        assert fast_reader.position == 0
        return
    reader = Reader(frame)
    assert _read_request_header(reader) == fast
    assert reader.position == fast_reader.position
