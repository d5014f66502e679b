"""The fixed-layout Produce v3-v9 codec (``replog.protocol.produce_fast``) against the reference
interpreter: the same bytes for every request and response it accepts, the same decoded
message for every body it reads, nothing written or read for what it declines; and the shapes
every producer sends and gets back (one or several partitions, null records, a transactional
id, errors) taken by the fast path rather than declined."""

from __future__ import annotations

import random
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from replog.protocol import Reader, RequestHeader, Writer, decode_request, encode_request
from replog.protocol import messages as m
from replog.protocol.interpreter import _slow_decode_struct, _slow_encode_struct
from replog.protocol.produce_fast import decoder, encoder

from .strategies import message_strategy

VERSIONS = list(range(3, 10))
CLASSES = [m.ProduceRequest, m.ProduceResponse]


def flexible(version: int) -> bool:
    return m.PRODUCE.is_flexible(version)


def reference_bytes(message: Any, version: int) -> bytes:
    w = Writer()
    _slow_encode_struct(w, message, version, flexible(version), message.DROPS_IGNORABLE)
    return w.to_bytes()


def reference_decode(cls: type[Any], data: bytes, version: int) -> Any:
    return _slow_decode_struct(Reader(data), cls, version, flexible(version))


def check_both_ways(message: Any, version: int) -> None:
    """The fast codec takes ``message`` at ``version``, writes the reference bytes, and reads
    them back (after two bytes of something else) as the reference decoder does."""
    expected = reference_bytes(message, version)
    w = Writer()
    assert encoder(type(message), version)(w, message), "the fast codec declined"
    assert w.to_bytes() == expected
    found = decoder(type(message), version)(memoryview(b"xy" + expected), 2)
    assert found is not None, "the fast decoder declined"
    decoded, end = found
    assert end == 2 + len(expected)
    assert decoded == reference_decode(type(message), expected, version)


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("cls", CLASSES)
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_random_messages_take_the_reference_bytes_or_are_declined(
    cls: type[Any], version: int, data: st.DataObject
) -> None:
    message = data.draw(message_strategy(cls, version))
    expected = reference_bytes(message, version)
    w = Writer()
    if encoder(cls, version)(w, message):
        assert w.to_bytes() == expected
    else:
        assert w.parts() == []  # declined: nothing written
    assert message.encode(version) == expected
    found = decoder(cls, version)(memoryview(expected), 0)
    reference = reference_decode(cls, expected, version)
    if found is not None:
        assert found == (reference, len(expected))
    assert cls.decode(expected, version) == reference


def produce_request(partitions: dict[str, list[Any]], **fields: Any) -> m.ProduceRequest:
    return m.ProduceRequest(
        transactional_id=fields.get("transactional_id"),
        acks=fields.get("acks", -1),
        timeout_ms=30_000,
        topic_data=[
            m.TopicProduceData(
                name=topic,
                partition_data=[
                    m.PartitionProduceData(index=i, records=r) for i, r in enumerate(batches)
                ],
            )
            for topic, batches in partitions.items()
        ],
    )


def produce_response(results: list[tuple[int, int]], **partition: Any) -> m.ProduceResponse:
    return m.ProduceResponse(
        responses=[
            m.TopicProduceResponse(
                name="bench",
                partition_responses=[
                    m.PartitionProduceResponse(
                        index=i,
                        error_code=code,
                        base_offset=offset,
                        log_append_time_ms=partition.get("log_append_time_ms", -1),
                        log_start_offset=partition.get("log_start_offset", 0),
                    )
                    for i, (code, offset) in enumerate(results)
                ],
            )
        ],
        throttle_time_ms=partition.get("throttle_time_ms", 0),
    )


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize(
    "partitions",
    [
        {},
        {"bench": [b"b" * 70]},
        {"bench": [b"b" * 200, None], "other": [b"x" * 20_000]},
        {"ü" * 40: [b""]},
    ],
)
def test_producer_requests_take_the_fast_path(
    version: int, partitions: dict[str, list[Any]]
) -> None:
    check_both_ways(produce_request(partitions), version)
    check_both_ways(produce_request(partitions, transactional_id="tx-1", acks=1), version)


@pytest.mark.parametrize("version", VERSIONS)
def test_answers_take_the_fast_path(version: int) -> None:
    check_both_ways(produce_response([(0, 41)]), version)
    check_both_ways(produce_response([(0, 0), (6, -1), (87, -1)], throttle_time_ms=5), version)
    check_both_ways(produce_response([(0, 9)], log_append_time_ms=1_700_000_000_000), version)
    check_both_ways(m.ProduceResponse(responses=[], throttle_time_ms=0), version)


@pytest.mark.parametrize("version", [8, 9])
def test_record_errors_are_left_to_the_generic_codec(version: int) -> None:
    answer = m.ProduceResponse(
        responses=[
            m.TopicProduceResponse(
                name="t",
                partition_responses=[
                    m.PartitionProduceResponse(
                        index=0,
                        error_code=87,
                        base_offset=-1,
                        record_errors=[m.BatchIndexAndErrorMessage(batch_index=2)],
                        error_message="bad record",
                    )
                ],
            )
        ],
        throttle_time_ms=0,
    )
    w = Writer()
    assert not encoder(m.ProduceResponse, version)(w, answer)
    assert w.parts() == []
    body = reference_bytes(answer, version)
    assert decoder(m.ProduceResponse, version)(memoryview(body), 0) is None
    assert m.ProduceResponse.decode(body, version) == answer


def test_a_tagged_field_is_left_to_the_generic_codec() -> None:
    body = reference_bytes(produce_request({"t": [b"r"]}), 9)
    assert body[-1:] == b"\x00"
    tagged = body[:-1] + b"\x01\x05\x02\xaa\xbb"
    assert decoder(m.ProduceRequest, 9)(memoryview(tagged), 0) is None
    assert m.ProduceRequest.decode(tagged, 9) == produce_request({"t": [b"r"]})


@pytest.mark.parametrize("version", [3, 8, 9])
@pytest.mark.parametrize("cls", CLASSES)
def test_random_bytes_are_declined_or_read_as_the_reference_reads_them(
    cls: type[Any], version: int
) -> None:
    rng = random.Random(version)
    if cls is m.ProduceRequest:
        message: Any = produce_request({"bench": [b"r" * 30, None]}, transactional_id="t")
    else:
        message = produce_response([(0, 5), (3, -1)])
    body = reference_bytes(message, version)
    read = decoder(cls, version)
    for _ in range(1500):
        mutated = bytearray(body)
        for _ in range(rng.randint(1, 3)):
            mutated[rng.randrange(len(mutated))] = rng.randrange(256)
        cut = bytes(mutated[: rng.randint(0, len(mutated))]) if rng.random() < 0.3 else mutated
        found = read(memoryview(bytes(cut)), 0)
        if found is None:
            continue
        reference = _slow_decode_struct(Reader(bytes(cut)), cls, version, flexible(version))
        assert found[0] == reference


@pytest.mark.parametrize("version", [7, 9])
def test_whole_frames_decode_as_the_generic_codec_reads_them(version: int) -> None:
    request = produce_request({"bench": [b"r" * 100]}, acks=1)
    header = RequestHeader(api_key=0, api_version=version, correlation_id=7, client_id="p")
    frame = encode_request(header, request)
    assert decode_request(memoryview(frame)[4:]) == (header, request)
