"""Fetch (key 1): consumers read up to the HW, followers up to the LEO; a long poll waits.

Each partition is read at once (the follower's fetch also records its progress on the leader);
records travel as zero-copy ``RecordsRef`` holes. A response smaller than ``min_bytes`` with no
error and time left waits (``AwaitData``) until one of its partitions gets data or the wait
(``max_wait_ms``, at most the request timeout) ends, then is read again. This is the one
long-poll mechanism: the partition machines never park fetches themselves.
"""

from __future__ import annotations

import attrs

from replog.broker.convert import (
    fetch_partition_requests,
    fetch_response_partition,
    records_of,
)
from replog.broker.requests.base import (
    AwaitData,
    Handler,
    Outcome,
    Reply,
    RequestContext,
    RequestServices,
)
from replog.errors import ErrorCode
from replog.protocol import messages as m
from replog.protocol.schema import Message

__all__ = ["HANDLERS", "handle_fetch"]


def handle_fetch(ctx: RequestContext, body: m.FetchRequest, services: RequestServices) -> Outcome:
    """See the module docstring."""
    wait_ms = min(max(body.max_wait_ms, 0), services.config.request_timeout_ms)
    deadline_ms = ctx.now_ms + wait_ms
    tps = frozenset(tp for tp, _ in fetch_partition_requests(body))

    def attempt(now_ms: int, final: bool) -> Outcome:
        topics, total, any_error = _read_all(services, body, now_ms)
        if final or total >= body.min_bytes or any_error or now_ms >= deadline_ms or not tps:
            return Reply(m.FetchResponse(error_code=0, session_id=0, responses=topics))
        return AwaitData(tps, deadline_ms, attempt)

    return attempt(ctx.now_ms, False)


def _read_all(
    services: RequestServices, body: m.FetchRequest, now_ms: int
) -> tuple[list[m.FetchResponseTopic], int, bool]:
    """Every partition of the request, read now: (topics, record bytes, any error)."""
    budget = min(max(body.max_bytes, 1), services.config.fetch_bytes_max)
    total, any_error = 0, False
    by_topic: dict[str, list[m.FetchResponsePartition]] = {}
    for (topic, partition), request in fetch_partition_requests(body):
        room = budget - total
        bounded = attrs.evolve(request, max_bytes=max(1, min(request.max_bytes, room)))
        answer = services.fetch(topic, partition, bounded, now_ms)
        records, size = records_of(answer, room if total > 0 else max(room, 1))
        total += size
        any_error = any_error or answer.error_code is not ErrorCode.NONE
        any_error = any_error or answer.diverging_epoch is not None
        by_topic.setdefault(topic, []).append(fetch_response_partition(partition, answer, records))
    topics = [m.FetchResponseTopic(topic=t, partitions=ps) for t, ps in by_topic.items()]
    return topics, total, any_error


HANDLERS: dict[type[Message], Handler] = {m.FetchRequest: handle_fetch}
