"""Incremental fetch sessions (KIP-227): the leader's ``FetchSessionCache`` and the fetcher's
``IncrementalFetch``, played against each other with the wire messages a broker sees; and the
leader reading only the partitions of a session that can have something new."""

from __future__ import annotations

import attrs
import pytest

from replog.broker.driver.change_feed import ChangeFeed
from replog.broker.driver.convert import follower_fetch_request
from replog.broker.driver.fetch_session_cache import EVICTION_MS, FetchContext, FetchSessionCache
from replog.broker.driver.incremental_fetch import IncrementalFetch
from replog.errors import ErrorCode
from replog.isr import PartitionFetchRequest
from replog.protocol import messages as m
from replog.topics import TopicPartition

TPS = [TopicPartition("t", p) for p in range(4)]
REFRESH_MS = 1_000
FEED = ChangeFeed()  # nothing changes unless a test says so


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


def read_now(
    context: FetchContext, now_ms: int = 0, feed: ChangeFeed = FEED
) -> list[TopicPartition]:
    return [tp for tp, _ in context.to_read(feed, now_ms, REFRESH_MS)]


def answered(
    context: FetchContext,
    hws: dict[TopicPartition, int],
    data: set[int],
    *,
    now_ms: int = 0,
    feed: ChangeFeed = FEED,
    keep: frozenset[int] = frozenset(),
) -> list[int]:
    """The partitions an answer carries when the partitions read have ``hws``, those in
    ``data`` have records and those in ``keep`` must stay active."""
    read = [
        (tp, part(tp, hws[tp]), 10 if tp.partition in data else 0, tp.partition in keep)
        for tp in read_now(context, now_ms, feed)
    ]
    return [p.partition_index for t in context.answer(read, now_ms) for p in t.partitions]


def open_session(
    cache: FetchSessionCache,
    fetcher: IncrementalFetch,
    offsets: dict[TopicPartition, int],
    feed: ChangeFeed = FEED,
) -> FetchContext:
    context = cache.context(fetcher.request(full_request(offsets)), 0, feed)
    assert isinstance(context, FetchContext)
    hws = dict.fromkeys(offsets, 5)
    read = [(tp, part(tp, hws[tp]), 0, False) for tp in read_now(context, 0, feed)]
    topics = context.answer(read, 0)
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
    context = cache.context(body, 10, FEED)
    assert isinstance(context, FetchContext)
    # Every partition was answered last time, so every one is read once more.
    assert read_now(context) == TPS
    assert {p.fetch_offset for tp, p in context.to_read(FEED, 0, 1) if tp == TPS[2]} == {6}
    hws = dict.fromkeys(TPS, 5) | {TPS[2]: 6}
    assert answered(context, hws, data={0}) == [0, 2]  # records on 0, a new HW on 2
    # Partition 0 was answered with records: it goes to the back of the session's order; 1
    # and 3 had nothing new and went quiet.
    assert cache.partitions_of(first.session_id) == [TPS[2], TPS[0], TPS[1], TPS[3]]
    assert answered(context, hws, data=set()) == []  # nothing new since: an empty answer


def test_a_partition_no_longer_fetched_is_forgotten() -> None:
    cache, fetcher = FetchSessionCache(10), IncrementalFetch()
    offsets = dict.fromkeys(TPS, 5)
    first = open_session(cache, fetcher, offsets)
    del offsets[TPS[1]]
    body = fetcher.request(full_request(offsets))
    assert listed(body) == []
    assert [(f.topic, f.partitions) for f in body.forgotten_topics_data] == [("t", [1])]
    assert isinstance(cache.context(body, 1, FEED), FetchContext)
    assert cache.partitions_of(first.session_id) == [TPS[0], TPS[2], TPS[3]]


def test_session_errors_and_starting_over() -> None:
    cache, fetcher = FetchSessionCache(10), IncrementalFetch()
    first = open_session(cache, fetcher, dict.fromkeys(TPS, 5))
    body = fetcher.request(full_request(dict.fromkeys(TPS, 5)))
    stale = attrs.evolve(body, session_epoch=7)
    assert cache.context(stale, 1, FEED) is ErrorCode.INVALID_FETCH_SESSION_EPOCH
    unknown = attrs.evolve(body, session_id=first.session_id + 1)
    assert cache.context(unknown, 1, FEED) is ErrorCode.FETCH_SESSION_ID_NOT_FOUND
    other_replica = attrs.evolve(body, replica_id=3)
    assert cache.context(other_replica, 1, FEED) is ErrorCode.FETCH_SESSION_ID_NOT_FOUND
    assert isinstance(cache.context(body, 1, FEED), FetchContext)  # the right epoch still works

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
    context = cache.context(closing, 1, FEED)
    assert isinstance(context, FetchContext) and context.session_id == 0
    assert len(cache) == 0


def new_session(cache: FetchSessionCache, replica_id: int, now_ms: int) -> object:
    return cache.context(
        IncrementalFetch().request(full_request({TPS[0]: 0}, replica_id)), now_ms, FEED
    )


def test_no_free_slot_means_full_fetches_and_followers_take_consumer_slots() -> None:
    off = FetchSessionCache(0)
    context = off.context(IncrementalFetch().request(full_request({TPS[0]: 0})), 0, FEED)
    assert isinstance(context, FetchContext) and context.session_id == 0

    cache = FetchSessionCache(1)
    consumer = new_session(cache, -1, 0)
    assert isinstance(consumer, FetchContext) and consumer.session_id != 0
    second_consumer = new_session(cache, -1, 1)
    assert isinstance(second_consumer, FetchContext) and second_consumer.session_id == 0
    follower = new_session(cache, 2, 2)
    assert isinstance(follower, FetchContext) and follower.session_id != 0
    another_follower = new_session(cache, 3, 3)
    assert isinstance(another_follower, FetchContext) and another_follower.session_id == 0
    late = new_session(cache, -1, EVICTION_MS + 2)
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


def test_quiet_partitions_are_read_only_once_they_change() -> None:
    cache, fetcher, feed = FetchSessionCache(10), IncrementalFetch(), ChangeFeed()
    offsets = dict.fromkeys(TPS, 5)
    open_session(cache, fetcher, offsets, feed)
    hws = dict.fromkeys(TPS, 5)

    def incremental(now_ms: int = 0) -> FetchContext:
        context = cache.context(fetcher.request(full_request(offsets)), now_ms, feed)
        assert isinstance(context, FetchContext)
        assert fetcher.on_response(m.FetchResponse(error_code=0, session_id=context.session_id))
        return context

    assert answered(incremental(), hws, data=set(), feed=feed) == []  # all four go quiet
    assert read_now(incremental(), feed=feed) == []  # nothing read at all
    feed.note(TPS[1])  # an append on partition 1
    context = incremental()
    assert answered(context, hws, data={1}, feed=feed) == [1]
    assert read_now(context, feed=feed) == [TPS[1]]  # answered with records: still read
    assert answered(context, hws, data=set(), feed=feed) == []  # and quiet again

    offsets[TPS[3]] = 6  # the fetcher lists partition 3 again: it is read
    assert read_now(incremental(), feed=feed) == [TPS[3]]
    assert answered(incremental(), hws, data=set(), feed=feed, keep=frozenset({3})) == []
    assert read_now(incremental(), feed=feed) == [TPS[3]]  # kept active (e.g. throttled)

    feed.note_all()  # retention may have moved every log start
    assert set(read_now(incremental(), feed=feed)) == set(TPS)


def test_a_quiet_partition_is_read_again_after_the_refresh_interval() -> None:
    cache, fetcher = FetchSessionCache(10), IncrementalFetch()
    offsets = dict.fromkeys(TPS, 5)
    open_session(cache, fetcher, offsets)
    context = cache.context(fetcher.request(full_request(offsets)), 0, FEED)
    assert isinstance(context, FetchContext)
    assert answered(context, dict.fromkeys(TPS, 5), data=set(), now_ms=100) == []
    assert read_now(context, now_ms=100 + REFRESH_MS - 1) == []
    assert read_now(context, now_ms=100 + REFRESH_MS) == TPS  # a follower's caught-up time


def test_a_change_feed_too_far_behind_means_every_partition() -> None:
    feed = ChangeFeed(keep=4)
    start = feed.seq
    feed.note(TPS[0])
    assert feed.since(start) == {TPS[0]}
    for tp in TPS * 2:
        feed.note(tp)
    assert feed.since(start) is None  # its entries were dropped: assume all changed
    assert feed.since(feed.seq) == set()
    with pytest.raises(ValueError, match="at least 2"):
        ChangeFeed(keep=1)
