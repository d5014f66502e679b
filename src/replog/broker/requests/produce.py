"""Produce (key 0): append each partition's batch as leader; acks=all waits for the HW.

Every partition is appended at once (a partition whose append fails gets its error); acks=all
partitions that are not complete yet are waited for together (``AwaitProduces``: the partition's
purgatory ends each one, by the HW reaching it or by its timeout). With acks=0 nothing is sent
back, and a failure closes the connection (the client learns nothing otherwise). Clients may
not write ``__consumer_offsets`` (INVALID_TOPIC_EXCEPTION, as in Kafka): only the group
coordinator does, through the replica manager.
"""

from __future__ import annotations

from collections.abc import Mapping

from replog.broker.requests.base import (
    TP,
    AwaitProduces,
    Close,
    Handler,
    NoReply,
    Outcome,
    Reply,
    RequestContext,
    RequestServices,
)
from replog.errors import ErrorCode
from replog.groups import OFFSETS_TOPIC
from replog.isr import Acks, ProduceResult
from replog.protocol import RecordsRef
from replog.protocol import messages as m
from replog.protocol.schema import Message

__all__ = ["HANDLERS", "handle_produce"]


def handle_produce(
    ctx: RequestContext, body: m.ProduceRequest, services: RequestServices
) -> Outcome:
    """See the module docstring."""
    timeout_ms = max(0, body.timeout_ms)
    order: list[tuple[TP, int]] = []
    done: dict[tuple[TP, int], ProduceResult] = {}
    waiting: set[tuple[TP, int]] = set()
    for topic in body.topic_data:
        for data in topic.partition_data:
            tp = (topic.name, data.index)
            records = b"" if data.records is None else data.records
            if topic.name == OFFSETS_TOPIC:  # the group coordinator's own: no client writes it
                key = (tp, -len(order) - 1)
                done[key] = ProduceResult(0, -1, ErrorCode.INVALID_TOPIC_EXCEPTION)
            elif isinstance(records, RecordsRef) or not records:
                key = (tp, -len(order) - 1)  # no request id: a key of its own
                done[key] = ProduceResult(0, -1, ErrorCode.CORRUPT_MESSAGE)
            else:
                request_id, result = services.produce(
                    topic.name, data.index, bytes(records), body.acks, ctx.now_ms,
                    timeout_ms=timeout_ms,
                )  # fmt: skip
                key = (tp, request_id)
                if result is None:
                    waiting.add(key)
                else:
                    done[key] = result
            order.append(key)

    def finish(results: Mapping[tuple[TP, int], ProduceResult]) -> Outcome:
        return _answer(services, body, order, {**done, **results})

    if waiting:
        return AwaitProduces(frozenset(waiting), finish)
    return finish({})


def _answer(
    services: RequestServices,
    body: m.ProduceRequest,
    order: list[tuple[TP, int]],
    results: Mapping[tuple[TP, int], ProduceResult],
) -> Outcome:
    if body.acks == Acks.NONE:
        if any(r.error_code is not ErrorCode.NONE for r in results.values()):
            return Close("acks=0 produce failed")
        return NoReply()
    by_topic: dict[str, list[m.PartitionProduceResponse]] = {}
    for key in order:
        (topic, partition), _ = key
        result = results[key]
        log = services.log(topic, partition)
        by_topic.setdefault(topic, []).append(
            m.PartitionProduceResponse(
                index=partition,
                error_code=int(result.error_code),
                base_offset=result.base_offset,
                log_start_offset=-1 if log is None else log.log_start_offset,
            )
        )
    return Reply(
        m.ProduceResponse(
            responses=[
                m.TopicProduceResponse(name=name, partition_responses=parts)
                for name, parts in by_topic.items()
            ]
        )
    )


HANDLERS: dict[type[Message], Handler] = {m.ProduceRequest: handle_produce}
