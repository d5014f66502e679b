"""Fetch responses with RecordsRef holes: the parts, with the holes filled, are exactly the frame
encode_response would have produced with the bytes in place."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from replog.protocol import (
    EncodeError,
    RecordsRef,
    encode_fetch_response_parts,
    encode_response,
)
from replog.protocol.framing import decode_response
from replog.protocol.messages import (
    AbortedTransaction,
    FetchResponse,
    FetchResponsePartition,
    FetchResponseTopic,
)


def _response(records: list[Any]) -> FetchResponse:
    partitions = [
        FetchResponsePartition(
            partition_index=index,
            high_watermark=100 + index,
            log_start_offset=3,
            aborted_transactions=[AbortedTransaction(producer_id=9, first_offset=4)],
            records=payload,
        )
        for index, payload in enumerate(records)
    ]
    return FetchResponse(
        session_id=0, responses=[FetchResponseTopic(topic="orders", partitions=partitions)]
    )


def _fill(parts: list[bytes | RecordsRef[Any]]) -> bytes:
    out = bytearray()
    for part in parts:
        if isinstance(part, RecordsRef):
            data = part.source
            assert isinstance(data, bytes) and len(data) == part.size_bytes
            out += data  # the broker would os.sendfile() these bytes instead
        else:
            out += part
    return bytes(out)


SIZES = st.sampled_from([0, 1, 126, 127, 128, 16382, 16383, 16384]) | st.integers(0, 3000)


@settings(max_examples=40, deadline=None)
@given(version=st.integers(4, 12), sizes=st.lists(SIZES, min_size=1, max_size=3))
def test_parts_with_filled_holes_equal_the_plain_encoding(version: int, sizes: list[int]) -> None:
    payloads = [bytes([i % 251]) * size for i, size in enumerate(sizes)]
    refs = [RecordsRef(size_bytes=len(p), source=p) for p in payloads]
    parts = encode_fetch_response_parts(17, version, _response(list(refs)))
    assert sum(isinstance(p, RecordsRef) for p in parts) == len(refs)
    frame = _fill(parts)
    assert frame == encode_response(17, version, _response(list(payloads)))
    assert int.from_bytes(frame[:4], "big") == len(frame) - 4
    correlation_id, decoded = decode_response(frame[4:], api_key=1, api_version=version)
    assert correlation_id == 17
    assert isinstance(decoded, FetchResponse)
    got = [p.records for p in decoded.responses[0].partitions]
    assert got == payloads


def test_plain_encoding_refuses_records_refs() -> None:
    response = _response([RecordsRef(size_bytes=3, source=b"abc")])
    with pytest.raises(EncodeError, match="RecordsRef"):
        encode_response(1, 11, response)
