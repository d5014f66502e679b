"""The compiled codec (``compiled._compiled_encoder`` / ``_compiled_decoder``) against the reference
interpreter it replaces (``interpreter._slow_encode_struct`` / ``_slow_decode_struct``): same bytes,
same decoded messages, for random messages of every API at every served version."""

from __future__ import annotations

from typing import Any

import attrs
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from replog.protocol import Message, Reader, RecordsRef, Writer
from replog.protocol.compiled import _compiled_decoder, _compiled_encoder
from replog.protocol.interpreter import _slow_decode_struct, _slow_encode_struct
from replog.protocol.messages import (
    PRODUCE,
    FetchResponse,
    FetchResponsePartition,
    FetchResponseTopic,
    PartitionProduceData,
    PartitionProduceResponse,
    ProduceRequest,
    ProduceResponse,
    TopicProduceData,
    TopicProduceResponse,
)

from .strategies import all_versions, case_id, message_strategy

CASES = all_versions()


def _reference_bytes(message: Any, version: int) -> bytes:
    w = Writer()
    _slow_encode_struct(
        w, message, version, message.API.is_flexible(version), message.DROPS_IGNORABLE
    )
    return w.to_bytes()


@pytest.mark.parametrize("case", CASES, ids=[case_id(c) for c in CASES])
@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_compiled_codec_matches_the_interpreter(
    case: tuple[type[Message], int], data: st.DataObject
) -> None:
    cls, version = case
    flexible = cls.API.is_flexible(version)
    message = data.draw(message_strategy(cls, version))
    expected = _reference_bytes(message, version)

    w = Writer()
    _compiled_encoder(cls, version, flexible, cls.DROPS_IGNORABLE)(
        w, message
    )  # no fallback: it must not raise
    assert w.to_bytes() == expected
    assert message.encode(version) == expected

    decoded, position = _compiled_decoder(cls, version, flexible)(memoryview(expected), 0)
    assert position == len(expected)
    assert decoded == _slow_decode_struct(Reader(expected), cls, version, flexible)


def test_records_ref_parts_match_the_interpreter() -> None:
    ref = RecordsRef(size_bytes=200, source="segment")
    partition = FetchResponsePartition(
        partition_index=0, error_code=0, high_watermark=5, records=ref
    )
    message = FetchResponse(responses=[FetchResponseTopic(topic="t", partitions=[partition])])
    for version in (11, 12):
        compiled, reference = Writer(), Writer()
        compiled.write_int32(7)
        reference.write_int32(7)
        message.encode_into(compiled, version)
        _slow_encode_struct(
            reference, message, version, FetchResponse.API.is_flexible(version), True
        )
        assert compiled.parts() == reference.parts()


def _long_produce_request() -> ProduceRequest:
    """Lengths on both sides of the one-byte compact length (0x7F): the compiled codec reads
    and writes short ones inline and hands the others to the general path."""
    topics = [
        TopicProduceData(
            name=("t" * 200 if n % 2 else f"t{n}"),
            partition_data=[
                PartitionProduceData(index=p, records=bytes([p]) * (300 if p % 2 else 125))
                for p in range(3 if n else 130)
            ],
        )
        for n in range(140)
    ]
    return ProduceRequest(transactional_id=None, acks=1, timeout_ms=5, topic_data=topics)


@pytest.mark.parametrize("version", range(PRODUCE.min_version, PRODUCE.max_version + 1))
@pytest.mark.parametrize("transactional_id", [None, "", "x" * 126, "x" * 127, "y" * 300])
def test_lengths_around_one_compact_byte_match_the_interpreter(
    version: int, transactional_id: str | None
) -> None:
    message = attrs.evolve(_long_produce_request(), transactional_id=transactional_id)
    flexible = PRODUCE.is_flexible(version)
    expected = _reference_bytes(message, version)
    w = Writer()
    _compiled_encoder(ProduceRequest, version, flexible, False)(w, message)
    assert w.to_bytes() == expected
    decoded, position = _compiled_decoder(ProduceRequest, version, flexible)(
        memoryview(expected), 0
    )
    assert position == len(expected)
    assert decoded == _slow_decode_struct(Reader(expected), ProduceRequest, version, flexible)
    assert decoded == attrs.evolve(
        message,
        topic_data=[
            attrs.evolve(
                t,
                partition_data=[
                    attrs.evolve(p, records=memoryview(p.records)) for p in t.partition_data
                ],
            )
            for t in message.topic_data
        ],
    )


@pytest.mark.parametrize("count", [0, 1, 126, 127, 128, 300])
def test_response_arrays_around_one_compact_byte_match_the_interpreter(count: int) -> None:
    partitions = [PartitionProduceResponse(index=n, base_offset=n) for n in range(count)]
    message = ProduceResponse(
        responses=[TopicProduceResponse(name="t" * count, partition_responses=partitions)]
    )
    for version in range(PRODUCE.min_version, PRODUCE.max_version + 1):
        flexible = PRODUCE.is_flexible(version)
        w = Writer()
        _compiled_encoder(ProduceResponse, version, flexible, True)(w, message)
        assert w.to_bytes() == _reference_bytes(message, version)
