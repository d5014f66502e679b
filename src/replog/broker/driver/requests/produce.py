"""Produce (key 0): append each partition's batch as leader; acks=all waits for the HW.

Every partition is appended at once (a partition whose append fails gets its error); acks=all
partitions that are not complete yet are waited for together (``AwaitProduces``: the partition's
purgatory ends each one, by the HW reaching it or by its timeout). With acks=0 nothing is sent
back, and a failure closes the connection (the client learns nothing otherwise). Clients may
not write ``__consumer_offsets`` (INVALID_TOPIC_EXCEPTION, as in Kafka): only the group
coordinator does, through the replica manager.

A topic whose ``compression.type`` (its own, else the dynamic broker default) names a codec
gets its batches recompressed to it before the append (``producer``: stored as sent). A topic
that does not exist is UNKNOWN_TOPIC_OR_PARTITION (INVALID_TOPIC_EXCEPTION for a name that
could not be one) and, with automatic topic creation on, is created for the client's retry
(``metadata.unknown_topic_error``).
"""

from __future__ import annotations

import functools
from collections.abc import Mapping

from replog.broker.driver.requests.base import (
    AwaitProduces,
    Close,
    Handler,
    NoReply,
    Outcome,
    Reply,
    RequestContext,
    RequestServices,
)
from replog.broker.driver.requests.metadata import unknown_topic_error
from replog.config_layers import ConfigLayers, topic_settings
from replog.errors import CorruptRecordError, ErrorCode, InvalidRecordError
from replog.groups import OFFSETS_TOPIC
from replog.isr import Acks, ProduceResult
from replog.log.batch_rewrite import recompress_batches
from replog.log.compression import Compression
from replog.log.produce_validation import validate_client_batches
from replog.metadata.types import ALL_BROKERS, TopicConfigs
from replog.protocol import RecordsRef
from replog.protocol import messages as m
from replog.protocol.schema import Message
from replog.topics import TopicPartition

__all__ = ["HANDLERS", "handle_produce"]


def handle_produce(
    ctx: RequestContext, body: m.ProduceRequest, services: RequestServices
) -> Outcome:
    """See the module docstring."""
    timeout_ms = max(0, body.timeout_ms)
    order: list[tuple[TopicPartition, int]] = []
    done: dict[tuple[TopicPartition, int], ProduceResult] = {}
    waiting: set[tuple[TopicPartition, int]] = set()
    for topic in body.topic_data:
        for data in topic.partition_data:
            tp = TopicPartition(topic.name, data.index)
            batch: bytes | ErrorCode = ErrorCode.INVALID_TOPIC_EXCEPTION
            if topic.name != OFFSETS_TOPIC:  # the group coordinator's own: no client writes it
                batch = _prepared(services, topic.name, data.records)
            if isinstance(batch, ErrorCode):
                key = (tp, -len(order) - 1)  # no request id: a key of its own
                done[key] = ProduceResult(0, -1, batch)
            else:
                request_id, result = services.produce(
                    topic.name, data.index, batch, body.acks, ctx.now_ms,
                    timeout_ms=timeout_ms,
                )  # fmt: skip
                key = (tp, request_id)
                if result is None:
                    waiting.add(key)
                else:
                    done[key] = result
            order.append(key)

    def finish(results: Mapping[tuple[TopicPartition, int], ProduceResult]) -> Outcome:
        return _answer(services, body, order, {**done, **results})

    if waiting:
        return AwaitProduces(frozenset(waiting), finish)
    return finish({})


def _prepared(services: RequestServices, topic: str, records: object) -> bytes | ErrorCode:
    """A partition's batches as they are to be appended (in the topic's codec), or why they
    are refused before any append: no batches, damaged ones or records no reader could decode
    (CORRUPT_MESSAGE), control batches (INVALID_RECORD), or an unknown topic."""
    if (
        isinstance(records, RecordsRef)
        or not isinstance(records, bytes | bytearray | memoryview)
        or not records
    ):
        return ErrorCode.CORRUPT_MESSAGE
    if topic not in services.topics:
        code = unknown_topic_error(services, topic, create=True)
        return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION if code.retriable else code
    try:
        validate_client_batches(records)
        return _as_stored(services, topic, bytes(records))
    except CorruptRecordError:
        return ErrorCode.CORRUPT_MESSAGE
    except InvalidRecordError:
        return ErrorCode.INVALID_RECORD


_CODECS = {
    "uncompressed": Compression.NONE,
    "gzip": Compression.GZIP,
    "snappy": Compression.SNAPPY,
    "lz4": Compression.LZ4,
    "zstd": Compression.ZSTD,
}


@functools.lru_cache(maxsize=1024)
def _target_codec(
    topic: TopicConfigs, broker: TopicConfigs, cluster: TopicConfigs
) -> Compression | None:
    """The codec a topic's batches are stored in (None: ``producer``, as sent)."""
    layers = ConfigLayers(topic=dict(topic), broker=dict(broker), cluster=dict(cluster))
    return _CODECS.get(topic_settings(layers).compression_type or "producer")


def _as_stored(services: RequestServices, topic: str, batch: bytes) -> bytes:
    """``batch`` in the topic's ``compression.type`` (``CorruptRecordError`` if damaged)."""
    assignment = services.topics[topic]
    configs = services.broker_configs
    codec = _target_codec(
        assignment.configs,
        configs.get(services.broker_id, ()),
        configs.get(ALL_BROKERS, ()),
    )
    return batch if codec is None else recompress_batches(batch, codec)


def _answer(
    services: RequestServices,
    body: m.ProduceRequest,
    order: list[tuple[TopicPartition, int]],
    results: Mapping[tuple[TopicPartition, int], ProduceResult],
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
                log_append_time_ms=result.log_append_time_ms,
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
