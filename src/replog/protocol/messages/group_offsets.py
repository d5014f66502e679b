"""OffsetCommit (key 8), OffsetFetch (9) and OffsetDelete (47): a group's committed offsets.

Fields follow Kafka's OffsetCommitRequest/Response.json, OffsetFetchRequest/Response.json and
OffsetDeleteRequest/Response.json (the versions below; later ones name topics by id).

- OffsetCommit v0-v8: v1 adds generation, member id and a per-partition commit timestamp, v2
  replaces the timestamp with a request-wide retention time (v2-v4), v5 drops the retention
  (the broker's ``offsets.retention.minutes`` applies), v6 adds the leader epoch, v7 the group
  instance id, v8 is flexible. v0 and v1 are deprecated in Kafka 3.x and removed in 4.0.
- OffsetFetch v0-v8: v2 adds a group-level error and ``topics = None`` for all partitions, v5 the
  leader epoch, v6 is flexible, v7 ``require_stable``, v8 (KIP-709) fetches several groups in
  one request (``groups``), each answered with its own error. v0 read ZooKeeper in old brokers;
  its layout is v1's.
- OffsetDelete v0: delete a group's offsets for partitions it no longer consumes.

The broker's group coordinator serves these APIs (``messages.GROUP_APIS``).
"""

# `field(...)` is an attrs field specifier (schema.field wraps attrs.field); ruff cannot tell.
# ruff: noqa: RUF009

from __future__ import annotations

import attrs

from replog.protocol.schema import (
    BOOL,
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
    "OFFSET_COMMIT",
    "OFFSET_DELETE",
    "OFFSET_FETCH",
    "OffsetCommitRequest",
    "OffsetCommitRequestPartition",
    "OffsetCommitRequestTopic",
    "OffsetCommitResponse",
    "OffsetCommitResponsePartition",
    "OffsetCommitResponseTopic",
    "OffsetDeleteRequest",
    "OffsetDeleteRequestPartition",
    "OffsetDeleteRequestTopic",
    "OffsetDeleteResponse",
    "OffsetDeleteResponsePartition",
    "OffsetDeleteResponseTopic",
    "OffsetFetchRequest",
    "OffsetFetchRequestGroup",
    "OffsetFetchRequestTopic",
    "OffsetFetchRequestTopics",
    "OffsetFetchResponse",
    "OffsetFetchResponseGroup",
    "OffsetFetchResponsePartition",
    "OffsetFetchResponsePartitions",
    "OffsetFetchResponseTopic",
    "OffsetFetchResponseTopics",
]

OFFSET_COMMIT = ApiInfo(8, "OffsetCommit", min_version=2, max_version=8, flexible_from=8)
OFFSET_FETCH = ApiInfo(9, "OffsetFetch", min_version=1, max_version=8, flexible_from=6)
# Kafka has no flexible OffsetDelete version; 1 is past the only one.
OFFSET_DELETE = ApiInfo(47, "OffsetDelete", min_version=0, max_version=0, flexible_from=1)


# -- OffsetCommit --------------------------------------------------------------------------------


@attrs.frozen(kw_only=True)
class OffsetCommitRequestPartition:
    """The offset to commit for one partition."""

    partition_index: int = field(INT32, "0+")
    committed_offset: int = field(INT64, "0+")
    committed_leader_epoch: int = field(INT32, "6+", default=-1, ignorable=True)
    commit_timestamp: int = field(INT64, "1", default=-1)
    committed_metadata: str | None = field(STRING, "0+", nullable="0+")


@attrs.frozen(kw_only=True)
class OffsetCommitRequestTopic:
    """The offsets to commit for one topic."""

    name: str = field(STRING, "0+")
    partitions: list[OffsetCommitRequestPartition] = field(
        array(OffsetCommitRequestPartition), "0+"
    )


@attrs.frozen(kw_only=True)
class OffsetCommitRequest(Request):
    """Commit offsets for a group: as a member of a generation, or (generation -1) as a simple
    consumer of an empty group."""

    API = OFFSET_COMMIT

    group_id: str = field(STRING, "0+")
    generation_id_or_member_epoch: int = field(INT32, "1+", default=-1, ignorable=True)
    member_id: str = field(STRING, "1+", ignorable=True)
    group_instance_id: str | None = field(STRING, "7+", nullable="7+", default=None)
    retention_time_ms: int = field(INT64, "2-4", default=-1, ignorable=True)
    topics: list[OffsetCommitRequestTopic] = field(array(OffsetCommitRequestTopic), "0+")


@attrs.frozen(kw_only=True)
class OffsetCommitResponsePartition:
    """The outcome for one partition."""

    partition_index: int = field(INT32, "0+")
    error_code: int = field(INT16, "0+")


@attrs.frozen(kw_only=True)
class OffsetCommitResponseTopic:
    """The outcomes for one topic."""

    name: str = field(STRING, "0+")
    partitions: list[OffsetCommitResponsePartition] = field(
        array(OffsetCommitResponsePartition), "0+"
    )


@attrs.frozen(kw_only=True)
class OffsetCommitResponse(Response):
    """Per-partition commit results."""

    API = OFFSET_COMMIT

    throttle_time_ms: int = field(INT32, "3+", ignorable=True)
    topics: list[OffsetCommitResponseTopic] = field(array(OffsetCommitResponseTopic), "0+")


# -- OffsetFetch ---------------------------------------------------------------------------------


@attrs.frozen(kw_only=True)
class OffsetFetchRequestTopic:
    """The partitions to fetch of one topic (v0-v7)."""

    name: str = field(STRING, "0-7")
    partition_indexes: list[int] = field(array(INT32), "0-7")


@attrs.frozen(kw_only=True)
class OffsetFetchRequestTopics:
    """The partitions to fetch of one topic (v8+)."""

    name: str = field(STRING, "8+")
    partition_indexes: list[int] = field(array(INT32), "8+")


@attrs.frozen(kw_only=True)
class OffsetFetchRequestGroup:
    """One group's offsets to fetch (v8+); ``topics`` None asks for all of them."""

    group_id: str = field(STRING, "8+")
    topics: list[OffsetFetchRequestTopics] | None = field(
        array(OffsetFetchRequestTopics), "8+", nullable="8+"
    )


@attrs.frozen(kw_only=True)
class OffsetFetchRequest(Request):
    """Fetch committed offsets: of one group (v0-v7) or of several ``groups`` (v8+)."""

    API = OFFSET_FETCH

    group_id: str = field(STRING, "0-7")
    topics: list[OffsetFetchRequestTopic] | None = field(
        array(OffsetFetchRequestTopic), "0-7", nullable="2-7"
    )
    groups: list[OffsetFetchRequestGroup] = field(array(OffsetFetchRequestGroup), "8+")
    require_stable: bool = field(BOOL, "7+", default=False)


@attrs.frozen(kw_only=True)
class OffsetFetchResponsePartition:
    """One partition's committed offset, -1 when there is none (v0-v7)."""

    partition_index: int = field(INT32, "0-7")
    committed_offset: int = field(INT64, "0-7")
    committed_leader_epoch: int = field(INT32, "5-7", default=-1, ignorable=True)
    metadata: str | None = field(STRING, "0-7", nullable="0-7")
    error_code: int = field(INT16, "0-7")


@attrs.frozen(kw_only=True)
class OffsetFetchResponseTopic:
    """The committed offsets of one topic (v0-v7)."""

    name: str = field(STRING, "0-7")
    partitions: list[OffsetFetchResponsePartition] = field(
        array(OffsetFetchResponsePartition), "0-7"
    )


@attrs.frozen(kw_only=True)
class OffsetFetchResponsePartitions:
    """One partition's committed offset, -1 when there is none (v8+)."""

    partition_index: int = field(INT32, "8+")
    committed_offset: int = field(INT64, "8+")
    committed_leader_epoch: int = field(INT32, "8+", default=-1, ignorable=True)
    metadata: str | None = field(STRING, "8+", nullable="8+")
    error_code: int = field(INT16, "8+")


@attrs.frozen(kw_only=True)
class OffsetFetchResponseTopics:
    """The committed offsets of one topic (v8+)."""

    name: str = field(STRING, "8+")
    partitions: list[OffsetFetchResponsePartitions] = field(
        array(OffsetFetchResponsePartitions), "8+"
    )


@attrs.frozen(kw_only=True)
class OffsetFetchResponseGroup:
    """One group's committed offsets and group-level error (v8+)."""

    group_id: str = field(STRING, "8+")
    topics: list[OffsetFetchResponseTopics] = field(array(OffsetFetchResponseTopics), "8+")
    error_code: int = field(INT16, "8+", default=0)


@attrs.frozen(kw_only=True)
class OffsetFetchResponse(Response):
    """The committed offsets of one group (v0-v7) or of each requested group (v8+)."""

    API = OFFSET_FETCH

    throttle_time_ms: int = field(INT32, "3+", ignorable=True)
    topics: list[OffsetFetchResponseTopic] = field(array(OffsetFetchResponseTopic), "0-7")
    error_code: int = field(INT16, "2-7", default=0, ignorable=True)
    groups: list[OffsetFetchResponseGroup] = field(array(OffsetFetchResponseGroup), "8+")


# -- OffsetDelete --------------------------------------------------------------------------------


@attrs.frozen(kw_only=True)
class OffsetDeleteRequestPartition:
    """A partition whose committed offset to delete."""

    partition_index: int = field(INT32, "0+")


@attrs.frozen(kw_only=True)
class OffsetDeleteRequestTopic:
    """The partitions of one topic whose committed offsets to delete."""

    name: str = field(STRING, "0+")
    partitions: list[OffsetDeleteRequestPartition] = field(
        array(OffsetDeleteRequestPartition), "0+"
    )


@attrs.frozen(kw_only=True)
class OffsetDeleteRequest(Request):
    """Delete committed offsets of a group (refused for topics the group consumes)."""

    API = OFFSET_DELETE

    group_id: str = field(STRING, "0+")
    topics: list[OffsetDeleteRequestTopic] = field(array(OffsetDeleteRequestTopic), "0+")


@attrs.frozen(kw_only=True)
class OffsetDeleteResponsePartition:
    """The outcome for one partition."""

    partition_index: int = field(INT32, "0+")
    error_code: int = field(INT16, "0+")


@attrs.frozen(kw_only=True)
class OffsetDeleteResponseTopic:
    """The outcomes for one topic."""

    name: str = field(STRING, "0+")
    partitions: list[OffsetDeleteResponsePartition] = field(
        array(OffsetDeleteResponsePartition), "0+"
    )


@attrs.frozen(kw_only=True)
class OffsetDeleteResponse(Response):
    """The group-level error and, without one, per-partition results."""

    API = OFFSET_DELETE

    error_code: int = field(INT16, "0+")
    throttle_time_ms: int = field(INT32, "0+", ignorable=True)
    topics: list[OffsetDeleteResponseTopic] = field(array(OffsetDeleteResponseTopic), "0+")
