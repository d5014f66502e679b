"""CreateTopics (key 19), DeleteTopics (key 20) and CreatePartitions (key 37): topic admin.

Fields follow Kafka's CreateTopicsRequest/Response.json, DeleteTopicsRequest/Response.json and
CreatePartitionsRequest/Response.json.

- CreateTopics v2-v7: v5 is flexible and returns the topic's configs and sizes; v7 the topic id.
- DeleteTopics v1-v6: v4 is flexible, v5 adds per-topic error messages, v6 names topics by
  ``topics`` (name or id) instead of ``topic_names``.
- CreatePartitions v0-v3: v2 is flexible. ``assignments=None`` lets the broker place the new
  partitions (replog's default is None, not Kafka's empty list, because an empty list is an
  error: it assigns zero of the new partitions).
"""

# `field(...)` is an attrs field specifier (schema.field wraps attrs.field); ruff cannot tell.
# ruff: noqa: RUF009

from __future__ import annotations

import uuid

import attrs

from replog.protocol.schema import (
    BOOL,
    INT8,
    INT16,
    INT32,
    STRING,
    UUID,
    ApiInfo,
    Request,
    Response,
    array,
    field,
)

__all__ = [
    "CREATE_PARTITIONS",
    "CREATE_TOPICS",
    "DELETE_TOPICS",
    "CreatableReplicaAssignment",
    "CreatableTopic",
    "CreatableTopicConfig",
    "CreatableTopicConfigs",
    "CreatableTopicResult",
    "CreatePartitionsAssignment",
    "CreatePartitionsRequest",
    "CreatePartitionsResponse",
    "CreatePartitionsTopic",
    "CreatePartitionsTopicResult",
    "CreateTopicsRequest",
    "CreateTopicsResponse",
    "DeletableTopicResult",
    "DeleteTopicState",
    "DeleteTopicsRequest",
    "DeleteTopicsResponse",
]

CREATE_TOPICS = ApiInfo(19, "CreateTopics", min_version=2, max_version=7, flexible_from=5)
DELETE_TOPICS = ApiInfo(20, "DeleteTopics", min_version=1, max_version=6, flexible_from=4)
CREATE_PARTITIONS = ApiInfo(37, "CreatePartitions", min_version=0, max_version=3, flexible_from=2)


@attrs.frozen(kw_only=True)
class CreatableReplicaAssignment:
    """The replicas of one new partition (when the caller places them)."""

    partition_index: int = field(INT32, "0+")
    broker_ids: list[int] = field(array(INT32), "0+")


@attrs.frozen(kw_only=True)
class CreatableTopicConfig:
    """One topic config override."""

    name: str = field(STRING, "0+")
    value: str | None = field(STRING, "0+", nullable="0+")


@attrs.frozen(kw_only=True)
class CreatableTopic:
    """A topic to create: either counts (-1 for broker defaults) or explicit assignments."""

    name: str = field(STRING, "0+")
    num_partitions: int = field(INT32, "0+")
    replication_factor: int = field(INT16, "0+")
    assignments: list[CreatableReplicaAssignment] = field(array(CreatableReplicaAssignment), "0+")
    configs: list[CreatableTopicConfig] = field(array(CreatableTopicConfig), "0+")


@attrs.frozen(kw_only=True)
class CreateTopicsRequest(Request):
    """Create topics; ``validate_only`` checks without creating."""

    API = CREATE_TOPICS

    topics: list[CreatableTopic] = field(array(CreatableTopic), "0+")
    timeout_ms: int = field(INT32, "0+", default=60000)
    validate_only: bool = field(BOOL, "1+")


@attrs.frozen(kw_only=True)
class CreatableTopicConfigs:
    """A config of the created topic as the broker resolved it (v5+)."""

    name: str = field(STRING, "5+")
    value: str | None = field(STRING, "5+", nullable="5+")
    read_only: bool = field(BOOL, "5+")
    config_source: int = field(INT8, "5+", default=-1, ignorable=True)
    is_sensitive: bool = field(BOOL, "5+")


@attrs.frozen(kw_only=True)
class CreatableTopicResult:
    """The outcome for one topic."""

    name: str = field(STRING, "0+")
    topic_id: uuid.UUID = field(UUID, "7+", ignorable=True)
    error_code: int = field(INT16, "0+")
    error_message: str | None = field(STRING, "1+", nullable="0+", ignorable=True)
    topic_config_error_code: int = field(INT16, "5+", tag=0, ignorable=True)
    num_partitions: int = field(INT32, "5+", default=-1, ignorable=True)
    replication_factor: int = field(INT16, "5+", default=-1, ignorable=True)
    configs: list[CreatableTopicConfigs] | None = field(
        array(CreatableTopicConfigs), "5+", nullable="5+", ignorable=True
    )


@attrs.frozen(kw_only=True)
class CreateTopicsResponse(Response):
    """Per-topic results."""

    API = CREATE_TOPICS

    throttle_time_ms: int = field(INT32, "2+", ignorable=True)
    topics: list[CreatableTopicResult] = field(array(CreatableTopicResult), "0+")


@attrs.frozen(kw_only=True)
class DeleteTopicState:
    """A topic to delete by name or id (v6+)."""

    name: str | None = field(STRING, "6+", nullable="6+", default=None)
    topic_id: uuid.UUID = field(UUID, "6+")


@attrs.frozen(kw_only=True)
class DeleteTopicsRequest(Request):
    """Delete topics: by ``topic_names`` before v6, by ``topics`` from v6."""

    API = DELETE_TOPICS

    topics: list[DeleteTopicState] = field(array(DeleteTopicState), "6+")
    topic_names: list[str] = field(array(STRING), "0-5", ignorable=True)
    timeout_ms: int = field(INT32, "0+")


@attrs.frozen(kw_only=True)
class DeletableTopicResult:
    """The outcome for one topic."""

    name: str | None = field(STRING, "0+", nullable="6+")
    topic_id: uuid.UUID = field(UUID, "6+", ignorable=True)
    error_code: int = field(INT16, "0+")
    error_message: str | None = field(STRING, "5+", nullable="5+", default=None, ignorable=True)


@attrs.frozen(kw_only=True)
class DeleteTopicsResponse(Response):
    """Per-topic results."""

    API = DELETE_TOPICS

    throttle_time_ms: int = field(INT32, "1+", ignorable=True)
    responses: list[DeletableTopicResult] = field(array(DeletableTopicResult), "0+")


@attrs.frozen(kw_only=True)
class CreatePartitionsAssignment:
    """The replicas of one new partition."""

    broker_ids: list[int] = field(array(INT32), "0+")


@attrs.frozen(kw_only=True)
class CreatePartitionsTopic:
    """Grow one topic to ``count`` partitions."""

    name: str = field(STRING, "0+")
    count: int = field(INT32, "0+")
    assignments: list[CreatePartitionsAssignment] | None = field(
        array(CreatePartitionsAssignment), "0+", nullable="0+", default=None
    )


@attrs.frozen(kw_only=True)
class CreatePartitionsRequest(Request):
    """Add partitions to existing topics."""

    API = CREATE_PARTITIONS

    topics: list[CreatePartitionsTopic] = field(array(CreatePartitionsTopic), "0+")
    timeout_ms: int = field(INT32, "0+")
    validate_only: bool = field(BOOL, "0+")


@attrs.frozen(kw_only=True)
class CreatePartitionsTopicResult:
    """The outcome for one topic."""

    name: str = field(STRING, "0+")
    error_code: int = field(INT16, "0+")
    error_message: str | None = field(STRING, "0+", nullable="0+", default=None)


@attrs.frozen(kw_only=True)
class CreatePartitionsResponse(Response):
    """Per-topic results."""

    API = CREATE_PARTITIONS

    throttle_time_ms: int = field(INT32, "0+")
    results: list[CreatePartitionsTopicResult] = field(array(CreatePartitionsTopicResult), "0+")
