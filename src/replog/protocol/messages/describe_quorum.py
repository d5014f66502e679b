"""DescribeQuorum (key 55, KIP-595/KIP-836): the metadata quorum's leader, epoch, high
watermark and how far each voter's log is, as ``kafka-metadata-quorum describe`` prints it.

Field order, version ranges and defaults follow Kafka's DescribeQuorumRequest/Response.json, up
to v1 (v1 adds each replica's ``last_fetch_timestamp`` and ``last_caught_up_timestamp``, wall
clock ms, -1 when unknown; ignorable, so a v0 answer leaves them out). Flexible from v0.
Served by the quorum node's Kafka port (``replog.quorum.kafka_port``), so it is a
``CONTROLLER_APIS`` entry: a broker's client port neither serves nor advertises it. The one
partition described is the metadata log, ``__cluster_metadata``-0.
"""

# `field(...)` is an attrs field specifier (schema.field wraps attrs.field); ruff cannot tell.
# ruff: noqa: RUF009

from __future__ import annotations

import attrs

from replog.protocol.schema import (
    INT16,
    INT32,
    INT64,
    STRING,
    ApiInfo,
    Request,
    Response,
    array,
    field,
)

__all__ = [
    "DESCRIBE_QUORUM",
    "METADATA_TOPIC",
    "DescribeQuorumPartition",
    "DescribeQuorumPartitionData",
    "DescribeQuorumReplicaState",
    "DescribeQuorumRequest",
    "DescribeQuorumResponse",
    "DescribeQuorumTopic",
    "DescribeQuorumTopicData",
]

DESCRIBE_QUORUM = ApiInfo(55, "DescribeQuorum", min_version=0, max_version=1, flexible_from=0)
METADATA_TOPIC = "__cluster_metadata"
"""The metadata log's topic name (its one partition is 0), as in KRaft."""


@attrs.frozen(kw_only=True)
class DescribeQuorumPartition:
    """A partition asked about."""

    partition_index: int = field(INT32, "0+")


@attrs.frozen(kw_only=True)
class DescribeQuorumTopic:
    """A topic asked about (the metadata topic)."""

    topic_name: str = field(STRING, "0+")
    partitions: list[DescribeQuorumPartition] = field(array(DescribeQuorumPartition), "0+")


@attrs.frozen(kw_only=True)
class DescribeQuorumRequest(Request):
    """Which quorum partitions to describe."""

    API = DESCRIBE_QUORUM

    topics: list[DescribeQuorumTopic] = field(array(DescribeQuorumTopic), "0+")


@attrs.frozen(kw_only=True)
class DescribeQuorumReplicaState:
    """One replica's log end and (v1) when it last fetched and was last caught up."""

    replica_id: int = field(INT32, "0+")
    log_end_offset: int = field(INT64, "0+")
    last_fetch_timestamp: int = field(INT64, "1+", default=-1, ignorable=True)
    last_caught_up_timestamp: int = field(INT64, "1+", default=-1, ignorable=True)


@attrs.frozen(kw_only=True)
class DescribeQuorumPartitionData:
    """The quorum's state for one partition."""

    partition_index: int = field(INT32, "0+")
    error_code: int = field(INT16, "0+")
    leader_id: int = field(INT32, "0+")
    leader_epoch: int = field(INT32, "0+")
    high_watermark: int = field(INT64, "0+")
    current_voters: list[DescribeQuorumReplicaState] = field(
        array(DescribeQuorumReplicaState), "0+"
    )
    observers: list[DescribeQuorumReplicaState] = field(array(DescribeQuorumReplicaState), "0+")


@attrs.frozen(kw_only=True)
class DescribeQuorumTopicData:
    """The answer for one topic."""

    topic_name: str = field(STRING, "0+")
    partitions: list[DescribeQuorumPartitionData] = field(array(DescribeQuorumPartitionData), "0+")


@attrs.frozen(kw_only=True)
class DescribeQuorumResponse(Response):
    """The top-level error (NOT_LEADER_OR_FOLLOWER from a node that does not lead) and the
    described partitions."""

    API = DESCRIBE_QUORUM

    error_code: int = field(INT16, "0+")
    topics: list[DescribeQuorumTopicData] = field(array(DescribeQuorumTopicData), "0+")
