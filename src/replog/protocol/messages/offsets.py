"""ListOffsets (key 2) and OffsetForLeaderEpoch (key 23): offset lookups by time and by epoch.

Fields follow Kafka's ListOffsetsRequest/Response.json and OffsetForLeaderEpochRequest/
Response.json.

- ListOffsets v1-v7: v0 (several "old style" offsets per partition) is not served; v2 adds the
  isolation level, v4 ``current_leader_epoch`` and the returned leader epoch, v6 is flexible,
  v7 allows timestamp -3 (max timestamp, KIP-734) with the same layout.
- OffsetForLeaderEpoch v2-v4: v2 adds ``current_leader_epoch`` (fencing), v3 the ``replica_id``
  (-1 consumer, -2 debug, a broker id for followers), v4 is flexible.
"""

# `field(...)` is an attrs field specifier (schema.field wraps attrs.field); ruff cannot tell.
# ruff: noqa: RUF009

from __future__ import annotations

import attrs

from replog.protocol.schema import (
    INT8,
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
    "LIST_OFFSETS",
    "OFFSET_FOR_LEADER_EPOCH",
    "EARLIEST_TIMESTAMP",
    "LATEST_TIMESTAMP",
    "MAX_TIMESTAMP",
    "EpochEndOffsetResult",
    "ListOffsetsPartition",
    "ListOffsetsPartitionResponse",
    "ListOffsetsRequest",
    "ListOffsetsResponse",
    "ListOffsetsTopic",
    "ListOffsetsTopicResponse",
    "OffsetForLeaderEpochRequest",
    "OffsetForLeaderEpochResponse",
    "OffsetForLeaderPartition",
    "OffsetForLeaderTopic",
    "OffsetForLeaderTopicResult",
]

LIST_OFFSETS = ApiInfo(2, "ListOffsets", min_version=1, max_version=7, flexible_from=6)
OFFSET_FOR_LEADER_EPOCH = ApiInfo(
    23, "OffsetForLeaderEpoch", min_version=2, max_version=4, flexible_from=4
)

# Special ListOffsets timestamps.
LATEST_TIMESTAMP = -1
EARLIEST_TIMESTAMP = -2
MAX_TIMESTAMP = -3  # v7+


@attrs.frozen(kw_only=True)
class ListOffsetsPartition:
    """Look up the first offset at or after ``timestamp`` (or a special timestamp)."""

    partition_index: int = field(INT32, "0+")
    current_leader_epoch: int = field(INT32, "4+", default=-1, ignorable=True)
    timestamp: int = field(INT64, "0+")


@attrs.frozen(kw_only=True)
class ListOffsetsTopic:
    """The partitions to look up of one topic."""

    name: str = field(STRING, "0+")
    partitions: list[ListOffsetsPartition] = field(array(ListOffsetsPartition), "0+")


@attrs.frozen(kw_only=True)
class ListOffsetsRequest(Request):
    """Offsets by timestamp; ``replica_id`` is -1 for consumers."""

    API = LIST_OFFSETS

    replica_id: int = field(INT32, "0+")
    isolation_level: int = field(INT8, "2+")
    topics: list[ListOffsetsTopic] = field(array(ListOffsetsTopic), "0+")


@attrs.frozen(kw_only=True)
class ListOffsetsPartitionResponse:
    """The offset found (and the timestamp of its record, and its leader epoch)."""

    partition_index: int = field(INT32, "0+")
    error_code: int = field(INT16, "0+")
    timestamp: int = field(INT64, "1+", default=-1)
    offset: int = field(INT64, "1+", default=-1)
    leader_epoch: int = field(INT32, "4+", default=-1)


@attrs.frozen(kw_only=True)
class ListOffsetsTopicResponse:
    """The results for one topic."""

    name: str = field(STRING, "0+")
    partitions: list[ListOffsetsPartitionResponse] = field(
        array(ListOffsetsPartitionResponse), "0+"
    )


@attrs.frozen(kw_only=True)
class ListOffsetsResponse(Response):
    """Per-partition offsets."""

    API = LIST_OFFSETS

    throttle_time_ms: int = field(INT32, "2+", ignorable=True)
    topics: list[ListOffsetsTopicResponse] = field(array(ListOffsetsTopicResponse), "0+")


@attrs.frozen(kw_only=True)
class OffsetForLeaderPartition:
    """Ask for the end offset of ``leader_epoch`` on the leader."""

    partition: int = field(INT32, "0+")
    current_leader_epoch: int = field(INT32, "2+", default=-1, ignorable=True)
    leader_epoch: int = field(INT32, "0+")


@attrs.frozen(kw_only=True)
class OffsetForLeaderTopic:
    """The partitions to ask about of one topic."""

    topic: str = field(STRING, "0+")
    partitions: list[OffsetForLeaderPartition] = field(array(OffsetForLeaderPartition), "0+")


@attrs.frozen(kw_only=True)
class OffsetForLeaderEpochRequest(Request):
    """A follower (or consumer) asks where each epoch ended, to find where its log diverged."""

    API = OFFSET_FOR_LEADER_EPOCH

    replica_id: int = field(INT32, "3+", default=-2, ignorable=True)
    topics: list[OffsetForLeaderTopic] = field(array(OffsetForLeaderTopic), "0+")


@attrs.frozen(kw_only=True)
class EpochEndOffsetResult:
    """The largest epoch <= the one asked for, and its end offset (Kafka's ``EpochEndOffset``)."""

    error_code: int = field(INT16, "0+")
    partition: int = field(INT32, "0+")
    leader_epoch: int = field(INT32, "1+", default=-1, ignorable=True)
    end_offset: int = field(INT64, "0+", default=-1)


@attrs.frozen(kw_only=True)
class OffsetForLeaderTopicResult:
    """The results for one topic."""

    topic: str = field(STRING, "0+")
    partitions: list[EpochEndOffsetResult] = field(array(EpochEndOffsetResult), "0+")


@attrs.frozen(kw_only=True)
class OffsetForLeaderEpochResponse(Response):
    """Per-partition (epoch, end offset) answers."""

    API = OFFSET_FOR_LEADER_EPOCH

    throttle_time_ms: int = field(INT32, "2+", ignorable=True)
    topics: list[OffsetForLeaderTopicResult] = field(array(OffsetForLeaderTopicResult), "0+")
