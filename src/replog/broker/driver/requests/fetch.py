"""Fetch (key 1): consumers read up to the HW, followers up to the LEO; a long poll waits.

Each partition is read at once (the follower's fetch also records its progress on the leader);
records travel as zero-copy ``RecordsRef`` holes. A response smaller than ``min_bytes`` with no
error and time left waits (``AwaitData``) until one of its partitions gets data or the wait
(``max_wait_ms``, at most the request timeout) ends, then is read again. This is the one
long-poll mechanism: the partition machines never park fetches themselves. A follower's fetch
reads up to the LEO, so a move of the HW alone does not read it again (as Kafka's delayed
fetch, whose follower side counts the bytes past the fetch offset only): on the leader, the
follower fetch that advances the HW would otherwise re-read every other parked follower fetch
for nothing, ahead of the produce responses that HW completes.

Incremental fetch sessions (KIP-227, ``replog.broker.driver.fetch_session_cache``) decide what
is read and what is answered: a fetch of a session reads the session's partitions that can
have something new (not the quiet ones nothing changed on) and answers only those that do. A
session error is a whole-response error.

A follower's fetch is subject to the leader's replication quota (KIP-73,
``replog.broker.driver.replication_throttle``): a partition in this broker's leader-throttled set
whose fetching replica is not in the ISR is answered without records while the quota is
exceeded (its HW and log start still go back, and the follower's fetch state still moves);
the bytes of the leader-throttled partitions in the response that is sent are recorded
against the quota. A throttled partition adds no bytes, so such a fetch waits out its
``max_wait_ms`` like any other that found too little.
"""

from __future__ import annotations

import attrs

from replog.broker.driver.convert import (
    fetch_partition_request,
    fetch_response_partition,
    records_of,
)
from replog.broker.driver.requests.base import (
    AwaitData,
    Handler,
    Outcome,
    Reply,
    RequestContext,
    RequestServices,
)
from replog.errors import ErrorCode
from replog.isr import PartitionFetchRequest, PartitionFetchResponse
from replog.isr.replica_log import BytesSlice
from replog.protocol import messages as m
from replog.protocol.schema import Message
from replog.topics import TopicPartition

__all__ = ["HANDLERS", "handle_fetch"]


def handle_fetch(ctx: RequestContext, body: m.FetchRequest, services: RequestServices) -> Outcome:
    """See the module docstring."""
    feed = services.partition_changes
    context = services.fetch_session_cache.context(body, ctx.now_ms, feed)
    if isinstance(context, ErrorCode):
        return Reply(m.FetchResponse(error_code=int(context), session_id=0, responses=[]))
    config = services.config
    wait_ms = min(max(body.max_wait_ms, 0), config.request_timeout_ms)
    deadline_ms = ctx.now_ms + wait_ms
    refresh_ms = max(config.replica_lag_ms_max // 4, 1)
    tps = context.watched

    def attempt(now_ms: int, final: bool) -> Outcome:
        partitions = context.to_read(feed, now_ms, refresh_ms)
        read, total, any_error, throttled_bytes = _read_all(services, body, partitions, now_ms)
        if final or total >= body.min_bytes or any_error or now_ms >= deadline_ms or not tps:
            if throttled_bytes:
                services.replication_throttle.leader.record(throttled_bytes, now_ms)
            topics = context.answer(read, now_ms)
            return Reply(
                m.FetchResponse(error_code=0, session_id=context.session_id, responses=topics)
            )
        return AwaitData(tps, deadline_ms, attempt, on_hw=body.replica_id < 0)

    return attempt(ctx.now_ms, False)


def _read_all(
    services: RequestServices,
    body: m.FetchRequest,
    partitions: list[tuple[TopicPartition, m.FetchPartition]],
    now_ms: int,
) -> tuple[list[tuple[TopicPartition, m.FetchResponsePartition, int, bool]], int, bool, int]:
    """Every partition to read, read now: (each partition's answer, record bytes and whether
    a fetch session must keep reading it, the record bytes in all, any error, the record bytes
    of leader-throttled partitions). A session keeps reading a partition the leader quota
    covers, and one whose fetching follower is outside the ISR (its read may expand it)."""
    budget = min(max(body.max_bytes, 1), services.config.fetch_bytes_max)
    total, any_error, throttled_bytes = 0, False, 0
    throttle = services.replication_throttle
    throttle.sync_rates(services.broker_configs)
    read: list[tuple[TopicPartition, m.FetchResponsePartition, int, bool]] = []
    for tp, wire in partitions:
        topic, partition = tp
        room = budget - total
        request = fetch_partition_request(body.replica_id, wire, room)
        answer = services.fetch(topic, partition, request, now_ms)
        throttled = request.is_from_follower and throttle.leader_covers(
            services.topics.get(topic), partition
        )
        if throttled:
            answer = _maybe_hold(services, tp, request.replica_id, answer, now_ms)
        records, size = records_of(answer, room if total > 0 else max(room, 1))
        total += size
        throttled_bytes += size if throttled else 0
        any_error = any_error or answer.error_code is not ErrorCode.NONE
        any_error = any_error or answer.diverging_epoch is not None
        keep = throttled or (
            size == 0 and request.is_from_follower and not _in_isr(services, tp, request)
        )
        read.append((tp, fetch_response_partition(partition, answer, records), size, keep))
    return read, total, any_error, throttled_bytes


def _in_isr(services: RequestServices, tp: TopicPartition, request: PartitionFetchRequest) -> bool:
    replica = services.partition(*tp)
    return replica is not None and request.replica_id in replica.isr


def _maybe_hold(
    services: RequestServices,
    tp: tuple[str, int],
    replica_id: int,
    answer: PartitionFetchResponse,
    now_ms: int,
) -> PartitionFetchResponse:
    """``answer`` without its records when the leader quota holds follower ``replica_id``
    back."""
    if answer.records is None or answer.records.size_bytes == 0:
        return answer
    topic, partition = tp
    replica = services.partition(topic, partition)
    in_sync = replica is not None and replica_id in replica.isr
    holds = services.replication_throttle.leader_holds(
        services.topics.get(topic), partition, in_sync=in_sync, now_ms=now_ms
    )
    return attrs.evolve(answer, records=BytesSlice(b"")) if holds else answer


HANDLERS: dict[type[Message], Handler] = {m.FetchRequest: handle_fetch}
