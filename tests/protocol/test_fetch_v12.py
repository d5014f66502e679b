"""The fixed-layout Fetch v12 codec (``replog.protocol.fetch_v12``) against the reference
interpreter: the same bytes (and ``RecordsRef`` holes) for every request and response it
accepts, the same decoded message for every body it reads, and the shapes of the replication
path (a follower's request; answers with data, errors, diverging epochs, a current leader,
aborted transactions, no records, no topics) taken by the fast path rather than declined."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from replog.protocol import (
    Reader,
    RecordsRef,
    RequestHeader,
    Writer,
    decode_request,
    decode_response,
    encode_request,
    encode_response_parts,
)
from replog.protocol import messages as m
from replog.protocol.fetch_v12 import (
    decode_fetch_request,
    decode_fetch_response,
    encode_fetch_request,
    encode_fetch_response,
)
from replog.protocol.interpreter import _slow_decode_struct, _slow_encode_struct

from .strategies import message_strategy

V = 12


def reference_parts(message: Any) -> list[bytes | RecordsRef[Any]]:
    w = Writer()
    _slow_encode_struct(w, message, V, True, message.DROPS_IGNORABLE)
    return w.parts()


def reference_decode(cls: type[Any], data: bytes) -> Any:
    return _slow_decode_struct(Reader(data), cls, V, True)


def fast_parts(message: Any) -> list[bytes | RecordsRef[Any]]:
    w = Writer()
    encode = encode_fetch_request if isinstance(message, m.FetchRequest) else encode_fetch_response
    assert encode(w, message), "the fast codec declined"
    return w.parts()


def check_both_ways(message: Any) -> None:
    """The fast codec takes ``message``, writes the reference bytes, and reads them back as
    the reference decoder does."""
    expected = reference_parts(message)
    assert fast_parts(message) == expected
    if any(isinstance(p, RecordsRef) for p in expected):
        return
    data = b"".join(p for p in expected if isinstance(p, bytes))
    decode = decode_fetch_request if isinstance(message, m.FetchRequest) else decode_fetch_response
    found = decode(memoryview(b"xy" + data), 2)
    assert found is not None, "the fast decoder declined"
    decoded, end = found
    assert end == 2 + len(data)
    assert decoded == reference_decode(type(message), data) == message


@pytest.mark.parametrize("cls", [m.FetchRequest, m.FetchResponse])
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_random_messages_take_the_reference_bytes_or_are_declined(
    cls: type[Any], data: st.DataObject
) -> None:
    message = data.draw(message_strategy(cls, V))
    expected = reference_parts(message)
    w = Writer()
    encode = encode_fetch_request if cls is m.FetchRequest else encode_fetch_response
    if encode(w, message):
        assert w.parts() == expected
    else:
        assert w.parts() == []  # declined: nothing written
    assert message.encode(V) == b"".join(p for p in expected if isinstance(p, bytes))
    body = b"".join(p for p in expected if isinstance(p, bytes))
    decode = decode_fetch_request if cls is m.FetchRequest else decode_fetch_response
    found = decode(memoryview(body), 0)
    reference = reference_decode(cls, body)
    if found is not None:
        assert found == (reference, len(body))
    assert cls.decode(body, V) == reference


def test_random_bytes_are_declined_or_read_as_the_reference_reads_them() -> None:
    import random

    rng = random.Random(16)
    base = reference_parts(follower_answer([b"r" * 30, b""]))
    body = b"".join(p for p in base if isinstance(p, bytes))
    for _ in range(3000):
        mutated = bytearray(body)
        for _ in range(rng.randint(1, 3)):
            mutated[rng.randrange(len(mutated))] = rng.randrange(256)
        cut = bytes(mutated[: rng.randint(0, len(mutated))]) if rng.random() < 0.3 else mutated
        found = decode_fetch_response(memoryview(bytes(cut)), 0)
        if found is None:
            continue
        reference = _slow_decode_struct(Reader(bytes(cut)), m.FetchResponse, V, True)
        assert found[0] == reference


def follower_request(topics: dict[str, list[int]]) -> m.FetchRequest:
    return m.FetchRequest(
        replica_id=2,
        max_wait_ms=500,
        min_bytes=1,
        max_bytes=10 << 20,
        isolation_level=0,
        session_id=0,
        session_epoch=-1,
        topics=[
            m.FetchTopic(
                topic=topic,
                partitions=[
                    m.FetchPartition(
                        partition=p,
                        current_leader_epoch=7,
                        fetch_offset=1_000_000 + p,
                        last_fetched_epoch=6,
                        log_start_offset=0,
                        partition_max_bytes=1 << 20,
                    )
                    for p in partitions
                ],
            )
            for topic, partitions in topics.items()
        ],
        forgotten_topics_data=[],
        rack_id="",
    )


def follower_answer(records: list[Any], **partition: Any) -> m.FetchResponse:
    return m.FetchResponse(
        throttle_time_ms=0,
        error_code=0,
        session_id=0,
        responses=[
            m.FetchResponseTopic(
                topic="bench",
                partitions=[
                    m.FetchResponsePartition(
                        partition_index=i,
                        error_code=partition.get("error_code", 0),
                        high_watermark=99,
                        last_stable_offset=99,
                        log_start_offset=0,
                        diverging_epoch=partition.get("diverging_epoch"),
                        current_leader=partition.get("current_leader"),
                        snapshot_id=partition.get("snapshot_id"),
                        aborted_transactions=partition.get("aborted_transactions"),
                        records=r,
                    )
                    for i, r in enumerate(records)
                ],
            )
        ],
    )


@pytest.mark.parametrize(
    "topics", [{}, {"t": [0]}, {"bench": [0, 3], "other-topic": [1]}, {"ü" * 40: [5]}]
)
def test_follower_requests_take_the_fast_path(topics: dict[str, list[int]]) -> None:
    check_both_ways(follower_request(topics))


def test_a_request_with_forgotten_topics_and_a_rack_takes_the_fast_path() -> None:
    request = follower_request({"t": [0]})
    check_both_ways(
        m.FetchRequest(
            replica_id=-1,
            max_wait_ms=0,
            min_bytes=0,
            max_bytes=1,
            isolation_level=1,
            session_id=12,
            session_epoch=3,
            topics=request.topics,
            forgotten_topics_data=[m.ForgottenTopic(topic="gone", partitions=[1, 2, 300])],
            rack_id="rack-a",
        )
    )


def test_a_request_with_a_cluster_id_is_left_to_the_generic_codec() -> None:
    request = m.FetchRequest(cluster_id="c", max_wait_ms=0, min_bytes=1, isolation_level=0)
    w = Writer()
    assert not encode_fetch_request(w, request)
    data = request.encode(V)
    assert decode_fetch_request(memoryview(data), 0) is None
    assert m.FetchRequest.decode(data, V) == request


@pytest.mark.parametrize(
    "records",
    [[b"x" * 100], [b"a" * 200, b"b" * 3], [None], [b""], [], [b"y" * 70_000, None]],
)
def test_answers_with_data_or_none_take_the_fast_path(records: list[Any]) -> None:
    check_both_ways(follower_answer(records))


def test_an_empty_answer_takes_the_fast_path() -> None:
    check_both_ways(m.FetchResponse(throttle_time_ms=5, error_code=0, session_id=9, responses=[]))
    check_both_ways(m.FetchResponse(error_code=71, session_id=0, responses=[]))


@pytest.mark.parametrize(
    "extra",
    [
        {"error_code": 1},  # OFFSET_OUT_OF_RANGE
        {"error_code": 74},  # FENCED_LEADER_EPOCH
        {"diverging_epoch": m.EpochEndOffset(epoch=4, end_offset=1234)},
        {"diverging_epoch": m.EpochEndOffset(epoch=-1, end_offset=-1)},
        {"current_leader": m.LeaderIdAndEpoch(leader_id=3, leader_epoch=8)},
        {"snapshot_id": m.SnapshotId(end_offset=10, epoch=2)},
        {
            "diverging_epoch": m.EpochEndOffset(epoch=4, end_offset=12),
            "current_leader": m.LeaderIdAndEpoch(leader_id=3, leader_epoch=8),
            "snapshot_id": m.SnapshotId(end_offset=10, epoch=2),
        },
        {"aborted_transactions": []},
        {
            "aborted_transactions": [
                m.AbortedTransaction(producer_id=77, first_offset=5),
                m.AbortedTransaction(producer_id=78, first_offset=9),
            ]
        },
    ],
)
def test_errors_divergence_leaders_and_aborted_transactions_take_the_fast_path(
    extra: dict[str, Any],
) -> None:
    check_both_ways(follower_answer([b"r" * 10, None], **extra))


def test_record_holes_are_left_where_the_generic_codec_leaves_them() -> None:
    refs = [RecordsRef(size_bytes=300, source="a"), RecordsRef(size_bytes=0, source="b")]
    answer = follower_answer([refs[0], b"inline", refs[1]])
    check_both_ways(answer)
    header_parts = encode_response_parts(7, V, answer)
    assert [p for p in header_parts if isinstance(p, RecordsRef)] == refs


def test_an_unknown_tagged_field_is_left_to_the_generic_codec() -> None:
    body = b"".join(p for p in reference_parts(follower_answer([b"r"])) if isinstance(p, bytes))
    # The partition's tagged fields are its last byte before the topic's and the body's.
    assert body[-3:] == b"\x00\x00\x00"
    tagged = body[:-3] + b"\x01\x05\x02\xaa\xbb" + b"\x00\x00"
    assert decode_fetch_response(memoryview(tagged), 0) is None
    assert m.FetchResponse.decode(tagged, V) == follower_answer([b"r"])


def test_whole_frames_match_the_generic_codec() -> None:
    request = follower_request({"bench": [0, 3]})
    header = RequestHeader(api_key=1, api_version=V, correlation_id=41, client_id="replica-2")
    frame = encode_request(header, request)
    reference = Writer()
    reference.write_int32(0)
    reference.write_int16(1)
    reference.write_int16(V)
    reference.write_int32(41)
    reference.write_nullable_string("replica-2")
    reference.write_empty_tagged_fields()
    _slow_encode_struct(reference, request, V, True, False)
    expected = reference.to_bytes()
    assert frame == (len(expected) - 4).to_bytes(4, "big") + expected[4:]
    assert decode_request(memoryview(frame)[4:]) == (header, request)
    answer = follower_answer([b"x" * 100, None])
    response = b"".join(p for p in encode_response_parts(41, V, answer) if isinstance(p, bytes))
    assert decode_response(response[4:], api_key=1, api_version=V) == (41, answer)
