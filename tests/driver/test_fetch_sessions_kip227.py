"""Incremental fetch sessions (KIP-227): the leader's ``FetchSessionCache`` and the fetcher's
``IncrementalFetch``, played against each other with the wire messages a broker sees."""

from __future__ import annotations

import attrs
import pytest

from replog.broker.driver.convert import follower_fetch_request
from replog.broker.driver.fetch_session_cache import EVICTION_MS, FetchContext, FetchSessionCache
from replog.broker.driver.incremental_fetch import IncrementalFetch
from replog.errors import ErrorCode
from replog.isr import PartitionFetchRequest
from replog.protocol import messages as m
from replog.topics import TopicPartition

TPS = [TopicPartition("t", p) for p in range(4)]


def full_request(offsets: dict[TopicPartition, int], replica_id: int = 2) -> m.FetchRequest:
    requests = [
        (tp, PartitionFetchRequest(replica_id=replica_id, fetch_offset=o, current_leader_epoch=0))
        for tp, o in offsets.items()
    ]
    return follower_fetch_request(replica_id, requests, max_wait_ms=0, min_bytes=1, max_bytes=1)


def listed(body: m.FetchRequest) -> list[TopicPartition]:
    return [TopicPartition(t.topic, p.partition) for t in body.topics for p in t.partitions]


def part(tp: TopicPartition, hw: int) -> m.FetchResponsePartition:
    return m.FetchResponsePartition(
        partition_index=tp.partition, error_code=0, high_watermark=hw, records=None
    )


def answered(context: FetchContext, hws: dict[TopicPartition, int], data: set[int]) -> list[int]:
    """The partitions an answer carries when the partitions read have ``hws`` and those in
    ``data`` have records."""
    read = [
        (tp, part(tp, hws[tp]), 10 if tp.partition in data else 0) for tp, _ in context.partitions
    ]
    return [p.partition_index for t in context.answer(read) for p in t.partitions]


def open_session(
    cache: FetchSessionCache, fetcher: IncrementalFetch, offsets: dict[TopicPartition, int]
) -> FetchContext:
    context = cache.context(fetcher.request(full_request(offsets)), 0)
    assert isinstance(context, FetchContext)
    hws = dict.fromkeys(offsets, 5)
    topics = context.answer([(tp, part(tp, hws[tp]), 0) for tp, _ in context.partitions])
    response = m.FetchResponse(error_code=0, session_id=context.session_id, responses=topics)
    assert fetcher.on_response(response)
    return context


def test_after_the_first_fetch_only_changed_partitions_travel_both_ways() -> None:
    cache, fetcher = FetchSessionCache(10), IncrementalFetch()
    offsets = dict.fromkeys(TPS, 5)
    first = open_session(cache, fetcher, offsets)
    assert first.session_id != 0 and fetcher.session_id == first.session_id
    assert fetcher.epoch == 1

    offsets[TPS[2]] = 6  # the follower appended on partition 2 only
    body = fetcher.request(full_request(offsets))
    assert (body.session_id, body.session_epoch) == (first.session_id, 1)
    assert listed(body) == [TPS[2]]
    context = cache.context(body, 10)
    assert isinstance(context, FetchContext)
    assert [tp for tp, _ in context.partitions] == TPS  # every session partition is read
    assert {p.fetch_offset for tp, p in context.partitions if tp == TPS[2]} == {6}
    hws = dict.fromkeys(TPS, 5) | {TPS[2]: 6}
    assert answered(context, hws, data={0}) == [0, 2]  # records on 0, a new HW on 2
    assert answered(context, hws, data=set()) == []  # nothing new since: an empty answer
    # Partition 0 was answered with records: it goes to the back of the session's order.
    assert cache.partitions_of(first.session_id) == [TPS[1], TPS[2], TPS[3], TPS[0]]


def test_a_partition_no_longer_fetched_is_forgotten() -> None:
    cache, fetcher = FetchSessionCache(10), IncrementalFetch()
    offsets = dict.fromkeys(TPS, 5)
    first = open_session(cache, fetcher, offsets)
    del offsets[TPS[1]]
    body = fetcher.request(full_request(offsets))
    assert listed(body) == []
    assert [(f.topic, f.partitions) for f in body.forgotten_topics_data] == [("t", [1])]
    assert isinstance(cache.context(body, 1), FetchContext)
    assert cache.partitions_of(first.session_id) == [TPS[0], TPS[2], TPS[3]]


def test_session_errors_and_starting_over() -> None:
    cache, fetcher = FetchSessionCache(10), IncrementalFetch()
    first = open_session(cache, fetcher, dict.fromkeys(TPS, 5))
    body = fetcher.request(full_request(dict.fromkeys(TPS, 5)))
    stale = attrs.evolve(body, session_epoch=7)
    assert cache.context(stale, 1) is ErrorCode.INVALID_FETCH_SESSION_EPOCH
    unknown = attrs.evolve(body, session_id=first.session_id + 1)
    assert cache.context(unknown, 1) is ErrorCode.FETCH_SESSION_ID_NOT_FOUND
    other_replica = attrs.evolve(body, replica_id=3)
    assert cache.context(other_replica, 1) is ErrorCode.FETCH_SESSION_ID_NOT_FOUND
    assert isinstance(cache.context(body, 1), FetchContext)  # the right epoch still works

    error = m.FetchResponse(
        error_code=int(ErrorCode.FETCH_SESSION_ID_NOT_FOUND), session_id=0, responses=[]
    )
    assert not fetcher.on_response(error)
    again = fetcher.request(full_request(dict.fromkeys(TPS, 5)))
    assert (again.session_id, again.session_epoch, listed(again)) == (0, 0, TPS)


def test_epoch_minus_one_closes_the_session_and_fetches_without_one() -> None:
    cache, fetcher = FetchSessionCache(10), IncrementalFetch()
    first = open_session(cache, fetcher, dict.fromkeys(TPS, 5))
    closing = attrs.evolve(full_request(dict.fromkeys(TPS, 5)), session_id=first.session_id)
    context = cache.context(closing, 1)
    assert isinstance(context, FetchContext) and context.session_id == 0
    assert len(cache) == 0


def test_no_free_slot_means_full_fetches_and_followers_take_consumer_slots() -> None:
    off = FetchSessionCache(0)
    context = off.context(IncrementalFetch().request(full_request({TPS[0]: 0})), 0)
    assert isinstance(context, FetchContext) and context.session_id == 0

    cache = FetchSessionCache(1)
    consumer = cache.context(IncrementalFetch().request(full_request({TPS[0]: 0}, -1)), 0)
    assert isinstance(consumer, FetchContext) and consumer.session_id != 0
    second_consumer = cache.context(IncrementalFetch().request(full_request({TPS[0]: 0}, -1)), 1)
    assert isinstance(second_consumer, FetchContext) and second_consumer.session_id == 0
    follower = cache.context(IncrementalFetch().request(full_request({TPS[0]: 0}, 2)), 2)
    assert isinstance(follower, FetchContext) and follower.session_id != 0
    another_follower = cache.context(IncrementalFetch().request(full_request({TPS[0]: 0}, 3)), 3)
    assert isinstance(another_follower, FetchContext) and another_follower.session_id == 0
    late = cache.context(IncrementalFetch().request(full_request({TPS[0]: 0}, -1)), EVICTION_MS + 2)
    assert isinstance(late, FetchContext) and late.session_id != 0  # the idle one made room
    assert len(cache) == 1


def test_a_leader_without_sessions_gets_full_requests_forever() -> None:
    fetcher = IncrementalFetch()
    for _ in range(3):
        body = fetcher.request(full_request(dict.fromkeys(TPS, 5)))
        assert (body.session_id, body.session_epoch, listed(body)) == (0, 0, TPS)
        assert fetcher.on_response(m.FetchResponse(error_code=0, session_id=0, responses=[]))


def test_negative_slots_are_refused() -> None:
    with pytest.raises(ValueError, match="slots"):
        FetchSessionCache(-1)
