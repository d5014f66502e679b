"""Produce (key 0): a client appends record batches to partition leaders.

Fields follow Kafka's ProduceRequest/Response.json. Records are opaque record-batch bytes; decoding
returns a zero-copy ``memoryview`` of the request frame, which the log validates and stamps.
Versions 3-9: v3 is the first that carries record batch v2 (magic 2) and a transactional id;
v9 is the first flexible one. v10 (KIP-951: current leader and node endpoints as tagged fields)
and v11 are not served.
"""

# `field(...)` is an attrs field specifier (schema.field wraps attrs.field); ruff cannot tell.
# ruff: noqa: RUF009

from __future__ import annotations

import attrs

from replog.protocol.schema import (
    INT16,
    INT32,
    INT64,
    RECORDS,
    STRING,
    ApiInfo,
    Records,
    Request,
    Response,
    array,
    field,
)

__all__ = [
    "PRODUCE",
    "BatchIndexAndErrorMessage",
    "PartitionProduceData",
    "PartitionProduceResponse",
    "ProduceRequest",
    "ProduceResponse",
    "TopicProduceData",
    "TopicProduceResponse",
]

PRODUCE = ApiInfo(0, "Produce", min_version=3, max_version=9, flexible_from=9)


@attrs.frozen(kw_only=True)
class PartitionProduceData:
    """Record batches for one partition."""

    index: int = field(INT32, "0+")
    records: Records = field(RECORDS, "0+", nullable="0+")


@attrs.frozen(kw_only=True)
class TopicProduceData:
    """Record batches for the partitions of one topic."""

    name: str = field(STRING, "0-12", ignorable=True)
    partition_data: list[PartitionProduceData] = field(array(PartitionProduceData), "0+")


@attrs.frozen(kw_only=True)
class ProduceRequest(Request):
    """Append batches; ``acks`` is 0 (no response), 1 (leader) or -1 (all ISR)."""

    API = PRODUCE

    transactional_id: str | None = field(STRING, "3+", nullable="3+", default=None)
    acks: int = field(INT16, "0+")
    timeout_ms: int = field(INT32, "0+")
    topic_data: list[TopicProduceData] = field(array(TopicProduceData), "0+")


@attrs.frozen(kw_only=True)
class BatchIndexAndErrorMessage:
    """Which record of the batch caused it to be rejected (KIP-467)."""

    batch_index: int = field(INT32, "8+")
    batch_index_error_message: str | None = field(STRING, "8+", nullable="8+", default=None)


@attrs.frozen(kw_only=True)
class PartitionProduceResponse:
    """The outcome of one partition's append."""

    index: int = field(INT32, "0+")
    error_code: int = field(INT16, "0+")
    base_offset: int = field(INT64, "0+")
    log_append_time_ms: int = field(INT64, "2+", default=-1, ignorable=True)
    log_start_offset: int = field(INT64, "5+", default=-1, ignorable=True)
    record_errors: list[BatchIndexAndErrorMessage] = field(
        array(BatchIndexAndErrorMessage), "8+", ignorable=True
    )
    error_message: str | None = field(STRING, "8+", nullable="8+", default=None, ignorable=True)


@attrs.frozen(kw_only=True)
class TopicProduceResponse:
    """The outcomes for one topic."""

    name: str = field(STRING, "0-12", ignorable=True)
    partition_responses: list[PartitionProduceResponse] = field(
        array(PartitionProduceResponse), "0+"
    )


@attrs.frozen(kw_only=True)
class ProduceResponse(Response):
    """Per-partition append results."""

    API = PRODUCE

    responses: list[TopicProduceResponse] = field(array(TopicProduceResponse), "0+")
    throttle_time_ms: int = field(INT32, "1+", ignorable=True)
