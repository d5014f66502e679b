"""The simulated clients' requests as Kafka frames, and their answers decoded: what a real
client puts on the wire, so the simulator drives the product's request layer through the same
codec as kafka-python or librdkafka would."""

from __future__ import annotations

from typing import Any

import attrs

from replog.errors import ErrorCode
from replog.protocol import RequestHeader, decode_response, encode_request
from replog.protocol import messages as m
from replog.protocol.schema import Message

__all__ = [
    "CREATE_TOPICS_VERSION",
    "FETCH_VERSION",
    "PRODUCE_VERSION",
    "FetchAnswer",
    "ProduceAnswer",
    "create_topics_answer",
    "create_topics_frame",
    "fetch_answer",
    "fetch_frame",
    "produce_answer",
    "produce_frame",
    "request_frame",
]

PRODUCE_VERSION = 9
FETCH_VERSION = 12


def request_frame(body: Message, version: int, correlation_id: int, client_id: str) -> bytes:
    """A request's framed payload (without the 4-byte size, as the network delivers it)."""
    header = RequestHeader(
        api_key=body.API.api_key,
        api_version=version,
        correlation_id=correlation_id,
        client_id=client_id,
    )
    return encode_request(header, body)[4:]


def produce_frame(
    tp: tuple[str, int], batch: bytes, acks: int, timeout_ms: int, correlation_id: int
) -> bytes:
    """A one-partition Produce request (v9)."""
    body = m.ProduceRequest(
        acks=acks,
        timeout_ms=timeout_ms,
        topic_data=[
            m.TopicProduceData(
                name=tp[0],
                partition_data=[m.PartitionProduceData(index=tp[1], records=batch)],
            )
        ],
    )
    return request_frame(body, PRODUCE_VERSION, correlation_id, "sim-producer")


@attrs.frozen
class ProduceAnswer:
    """One partition's produce answer."""

    error_code: ErrorCode
    base_offset: int


def produce_answer(frame: bytes) -> ProduceAnswer:
    """The (only) partition's answer in a Produce response frame."""
    _, body = decode_response(frame, api_key=m.PRODUCE.api_key, api_version=PRODUCE_VERSION)
    if not isinstance(body, m.ProduceResponse):
        raise TypeError(f"not a produce response: {type(body).__name__}")
    part = body.responses[0].partition_responses[0]
    return ProduceAnswer(_code(part.error_code), part.base_offset)


def fetch_frame(
    tp: tuple[str, int], position: int, leader_epoch: int, correlation_id: int, *, max_bytes: int
) -> bytes:
    """A consumer's one-partition Fetch request (v12, no wait)."""
    body = m.FetchRequest(
        replica_id=-1,
        max_wait_ms=0,
        min_bytes=1,
        max_bytes=max_bytes,
        isolation_level=0,
        session_id=0,
        session_epoch=-1,
        topics=[
            m.FetchTopic(
                topic=tp[0],
                partitions=[
                    m.FetchPartition(
                        partition=tp[1],
                        current_leader_epoch=leader_epoch,
                        fetch_offset=position,
                        last_fetched_epoch=-1,
                        log_start_offset=-1,
                        partition_max_bytes=max_bytes,
                    )
                ],
            )
        ],
        forgotten_topics_data=[],
        rack_id="",
    )
    return request_frame(body, FETCH_VERSION, correlation_id, "sim-consumer")


@attrs.frozen
class FetchAnswer:
    """One partition's fetch answer: its error, HW and record batches."""

    error_code: ErrorCode
    high_watermark: int
    records: bytes


def fetch_answer(frame: bytes) -> FetchAnswer:
    """The (only) partition's answer in a Fetch response frame."""
    _, body = decode_response(frame, api_key=m.FETCH.api_key, api_version=FETCH_VERSION)
    if not isinstance(body, m.FetchResponse):
        raise TypeError(f"not a fetch response: {type(body).__name__}")
    part = body.responses[0].partitions[0]
    records: Any = part.records
    data = bytes(records) if isinstance(records, (bytes, bytearray, memoryview)) else b""
    return FetchAnswer(_code(part.error_code), part.high_watermark, data)


def _code(value: int) -> ErrorCode:
    try:
        return ErrorCode(value)
    except ValueError:
        return ErrorCode.UNKNOWN_SERVER_ERROR


CREATE_TOPICS_VERSION = 7


def create_topics_frame(
    topic: str,
    partitions: int,
    replication_factor: int,
    configs: dict[str, str],
    correlation_id: int,
) -> bytes:
    """A CreateTopics request (v7) for one topic, placed by the controller."""
    body = m.CreateTopicsRequest(
        topics=[
            m.CreatableTopic(
                name=topic,
                num_partitions=partitions,
                replication_factor=replication_factor,
                assignments=[],
                configs=[m.CreatableTopicConfig(name=k, value=v) for k, v in configs.items()],
            )
        ],
        timeout_ms=1_000,
        validate_only=False,
    )
    return request_frame(body, CREATE_TOPICS_VERSION, correlation_id, "sim-admin")


def create_topics_answer(frame: bytes) -> ErrorCode:
    """The (only) topic's error code in a CreateTopics response frame."""
    _, body = decode_response(
        frame, api_key=m.CREATE_TOPICS.api_key, api_version=CREATE_TOPICS_VERSION
    )
    if not isinstance(body, m.CreateTopicsResponse):
        raise TypeError(f"not a create-topics response: {type(body).__name__}")
    return _code(body.topics[0].error_code)
