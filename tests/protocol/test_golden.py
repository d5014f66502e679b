"""Golden bytes, worked out by hand from the Kafka protocol guide and the JSON schemas."""

from __future__ import annotations

import uuid

from replog.protocol import RequestHeader, decode_request, encode_request, encode_response
from replog.protocol.framing import decode_response
from replog.protocol.messages import (
    ApiVersion,
    ApiVersionsRequest,
    ApiVersionsResponse,
    EpochEndOffset,
    FetchResponse,
    FetchResponsePartition,
    FetchResponseTopic,
    MetadataRequest,
    MetadataRequestTopic,
)


def test_api_versions_v0_request() -> None:
    header = RequestHeader(api_key=18, api_version=0, correlation_id=1, client_id="replog")
    expected = bytes.fromhex(
        "00000010"  # size: 16 bytes follow
        "0012"  # api_key 18
        "0000"  # api_version 0
        "00000001"  # correlation_id 1
        "0006" + b"replog".hex()  # client_id: int16 length + bytes (header v1)
        # body: ApiVersionsRequest v0 has no fields
    )
    assert encode_request(header, ApiVersionsRequest()) == expected
    assert decode_request(expected[4:]) == (header, ApiVersionsRequest())


def test_api_versions_v0_response() -> None:
    response = ApiVersionsResponse(
        error_code=0,
        api_keys=[
            ApiVersion(api_key=18, min_version=0, max_version=3),
            ApiVersion(api_key=3, min_version=0, max_version=12),
        ],
    )
    expected = bytes.fromhex(
        "00000016"  # size: 22 bytes follow
        "00000001"  # response header v0: correlation_id 1
        "0000"  # error_code 0
        "00000002"  # api_keys: int32 count 2
        "0012"
        "0000"
        "0003"  # ApiVersions 0-3
        "0003"
        "0000"
        "000c"  # Metadata 0-12
        # no throttle_time_ms in v0
    )
    assert encode_response(1, 0, response) == expected
    assert decode_response(expected[4:], api_key=18, api_version=0) == (1, response)


def test_api_versions_v3_response_uses_header_v0_and_compact_body() -> None:
    response = ApiVersionsResponse(
        api_keys=[ApiVersion(api_key=18, min_version=0, max_version=3)], throttle_time_ms=0
    )
    expected = bytes.fromhex(
        "00000013"  # size: 4 + 2 + 1 + 7 + 4 + 1 = 19
        "00000005"  # header v0 (no tagged fields, even though v3 is flexible)
        "0000"  # error_code
        "02"  # compact array: 1 item + 1
        "0012"
        "0000"
        "0003"
        "00"  # item + its empty tagged fields
        "00000000"  # throttle_time_ms
        "00"  # top-level tagged fields: none
    )
    assert encode_response(5, 3, response) == expected


def test_api_versions_v3_request_uses_header_v2_with_classic_client_id() -> None:
    header = RequestHeader(api_key=18, api_version=3, correlation_id=2, client_id="c")
    request = ApiVersionsRequest(client_software_name="rdk", client_software_version="2.3")
    expected = bytes.fromhex(
        "00000015"  # size: header 2+2+4+3+1 = 12, body 4+4+1 = 9: 21
        "0012"
        "0003"
        "00000002"
        "0001"
        "63"  # client_id stays a classic int16 string in header v2
        "00"  # header tagged fields
        "04"
        + b"rdk".hex()  # compact string: length + 1
        + "04"
        + b"2.3".hex()
        + "00"  # body tagged fields
    )
    assert encode_request(header, request) == expected
    assert decode_request(expected[4:]) == (header, request)


def test_metadata_v1_request() -> None:
    header = RequestHeader(api_key=3, api_version=1, correlation_id=42, client_id=None)
    request = MetadataRequest(topics=[MetadataRequestTopic(name="foo")])
    expected = bytes.fromhex(
        "00000013"  # size: 19
        "0003"
        "0001"
        "0000002a"  # Metadata v1, correlation 42
        "ffff"  # client_id null
        "00000001"  # topics: int32 count 1
        "0003" + b"foo".hex()  # name
    )
    assert encode_request(header, request) == expected
    assert decode_request(expected[4:]) == (header, request)


def test_metadata_v1_request_for_all_topics_is_a_null_array() -> None:
    header = RequestHeader(api_key=3, api_version=1, correlation_id=1, client_id=None)
    frame = encode_request(header, MetadataRequest(topics=None))
    assert frame[-4:] == b"\xff\xff\xff\xff"
    assert decode_request(frame[4:])[1] == MetadataRequest(topics=None)


def test_metadata_v10_request_topic_carries_a_uuid_before_the_name() -> None:
    topic_id = uuid.UUID("00112233-4455-6677-8899-aabbccddeeff")
    request = MetadataRequest(
        topics=[MetadataRequestTopic(topic_id=topic_id, name="t")],
        allow_auto_topic_creation=False,
    )
    expected = bytes.fromhex(
        "02"  # compact array, 1 item
        "00112233445566778899aabbccddeeff"  # topic_id
        "02"
        "74"  # compact nullable name "t"
        "00"  # item tagged fields
        "00"  # allow_auto_topic_creation false
        "00"  # include_topic_authorized_operations false (cluster one is 8-10 only)
        "00"  # tagged fields
    )
    assert request.encode(11) == expected


def test_fetch_v12_response_partition_with_diverging_epoch() -> None:
    partition = FetchResponsePartition(
        partition_index=0,
        error_code=0,
        high_watermark=5,
        last_stable_offset=5,
        log_start_offset=0,
        diverging_epoch=EpochEndOffset(epoch=1, end_offset=3),
        aborted_transactions=None,
        preferred_read_replica=-1,
        records=b"",
    )
    response = FetchResponse(
        session_id=0, responses=[FetchResponseTopic(topic="t", partitions=[partition])]
    )
    expected = bytes.fromhex(
        "00000000"  # throttle_time_ms
        "0000"  # error_code
        "00000000"  # session_id
        "02"  # responses: 1
        "02"
        "74"  # topic "t"
        "02"  # partitions: 1
        "00000000"  # partition_index
        "0000"  # error_code
        "0000000000000005"  # high_watermark
        "0000000000000005"  # last_stable_offset
        "0000000000000000"  # log_start_offset
        "00"  # aborted_transactions: null (compact 0)
        "ffffffff"  # preferred_read_replica -1
        "01"  # records: compact bytes, length 0
        "01"  # partition tagged fields: 1
        "00"
        "0d"  # tag 0 (diverging_epoch), 13 bytes
        "00000001"
        "0000000000000003"
        "00"  # epoch, end_offset, struct tagged fields
        "00"  # topic tagged fields
        "00"  # response tagged fields
    )
    assert response.encode(12) == expected
    assert FetchResponse.decode(expected, 12) == response
