"""Partition administration: DeleteRecords (key 21), DescribeLogDirs (key 35), ElectLeaders
(key 43), AlterPartitionReassignments (key 45) and ListPartitionReassignments (key 46).

Fields follow Kafka's JSON schemas of the same names.

- DeleteRecords v0-2 (v2 is flexible): move each partition's log start offset up to ``offset``
  (-1: the high watermark); answered by the partitions' leaders.
- DescribeLogDirs v1-5 (v2 is flexible; v3 adds the top-level error code, v4 the volume's total
  and usable bytes, v5 ``is_cordoned``); ``topics`` null asks for every partition.
- ElectLeaders v0-2 (v1 adds ``election_type`` and the top-level error code, v2 is flexible);
  ``topic_partitions`` null asks for every partition.
- AlterPartitionReassignments v0-1 and ListPartitionReassignments v0: flexible from v0.
"""

# `field(...)` is an attrs field specifier (schema.field wraps attrs.field); ruff cannot tell.
# ruff: noqa: RUF009

from __future__ import annotations

import attrs

from replog.protocol.schema import (
    BOOL,
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
    "ALTER_PARTITION_REASSIGNMENTS",
    "DELETE_RECORDS",
    "DESCRIBE_LOG_DIRS",
    "ELECTION_PREFERRED",
    "ELECTION_UNCLEAN",
    "ELECT_LEADERS",
    "LIST_PARTITION_REASSIGNMENTS",
    "AlterPartitionReassignmentsRequest",
    "AlterPartitionReassignmentsResponse",
    "DeleteRecordsPartition",
    "DeleteRecordsPartitionResult",
    "DeleteRecordsRequest",
    "DeleteRecordsResponse",
    "DeleteRecordsTopic",
    "DeleteRecordsTopicResult",
    "DescribableLogDirTopic",
    "DescribeLogDirsPartition",
    "DescribeLogDirsRequest",
    "DescribeLogDirsResponse",
    "DescribeLogDirsResult",
    "DescribeLogDirsTopic",
    "ElectLeadersRequest",
    "ElectLeadersResponse",
    "ElectLeadersTopicPartitions",
    "ElectionPartitionResult",
    "ListPartitionReassignmentsRequest",
    "ListPartitionReassignmentsResponse",
    "ListPartitionReassignmentsTopics",
    "OngoingPartitionReassignment",
    "OngoingTopicReassignment",
    "ReassignablePartition",
    "ReassignablePartitionResponse",
    "ReassignableTopic",
    "ReassignableTopicResponse",
    "ReplicaElectionResult",
]

DELETE_RECORDS = ApiInfo(21, "DeleteRecords", min_version=0, max_version=2, flexible_from=2)
DESCRIBE_LOG_DIRS = ApiInfo(35, "DescribeLogDirs", min_version=1, max_version=5, flexible_from=2)
ELECT_LEADERS = ApiInfo(43, "ElectLeaders", min_version=0, max_version=2, flexible_from=2)
ALTER_PARTITION_REASSIGNMENTS = ApiInfo(
    45, "AlterPartitionReassignments", min_version=0, max_version=1, flexible_from=0
)
LIST_PARTITION_REASSIGNMENTS = ApiInfo(
    46, "ListPartitionReassignments", min_version=0, max_version=0, flexible_from=0
)

#: ElectLeaders ``election_type`` values (Kafka's ElectionType)
ELECTION_PREFERRED = 0
ELECTION_UNCLEAN = 1


# ---- DeleteRecords ----


@attrs.frozen(kw_only=True)
class DeleteRecordsPartition:
    """Delete the records of one partition below ``offset`` (-1: below the high watermark)."""

    partition_index: int = field(INT32, "0+")
    offset: int = field(INT64, "0+")


@attrs.frozen(kw_only=True)
class DeleteRecordsTopic:
    """The partitions of one topic to delete records from."""

    name: str = field(STRING, "0+")
    partitions: list[DeleteRecordsPartition] = field(array(DeleteRecordsPartition), "0+")


@attrs.frozen(kw_only=True)
class DeleteRecordsRequest(Request):
    """Delete records; wait up to ``timeout_ms`` for every replica to follow."""

    API = DELETE_RECORDS

    topics: list[DeleteRecordsTopic] = field(array(DeleteRecordsTopic), "0+")
    timeout_ms: int = field(INT32, "0+")


@attrs.frozen(kw_only=True)
class DeleteRecordsPartitionResult:
    """One partition's outcome: its low watermark (the lowest log start of its replicas)."""

    partition_index: int = field(INT32, "0+")
    low_watermark: int = field(INT64, "0+")
    error_code: int = field(INT16, "0+")


@attrs.frozen(kw_only=True)
class DeleteRecordsTopicResult:
    """The outcomes of one topic's partitions."""

    name: str = field(STRING, "0+")
    partitions: list[DeleteRecordsPartitionResult] = field(
        array(DeleteRecordsPartitionResult), "0+"
    )


@attrs.frozen(kw_only=True)
class DeleteRecordsResponse(Response):
    """Per-partition outcomes."""

    API = DELETE_RECORDS

    throttle_time_ms: int = field(INT32, "0+")
    topics: list[DeleteRecordsTopicResult] = field(array(DeleteRecordsTopicResult), "0+")


# ---- DescribeLogDirs ----


@attrs.frozen(kw_only=True)
class DescribableLogDirTopic:
    """The partitions of one topic to describe."""

    topic: str = field(STRING, "0+")
    partitions: list[int] = field(array(INT32), "0+")


@attrs.frozen(kw_only=True)
class DescribeLogDirsRequest(Request):
    """Describe this broker's log dirs (``topics`` None: every partition)."""

    API = DESCRIBE_LOG_DIRS

    topics: list[DescribableLogDirTopic] | None = field(
        array(DescribableLogDirTopic), "0+", nullable="0+"
    )


@attrs.frozen(kw_only=True)
class DescribeLogDirsPartition:
    """One partition's log in a dir: its size and how far its end is behind the HW."""

    partition_index: int = field(INT32, "0+")
    partition_size: int = field(INT64, "0+")
    offset_lag: int = field(INT64, "0+")
    is_future_key: bool = field(BOOL, "0+")


@attrs.frozen(kw_only=True)
class DescribeLogDirsTopic:
    """The partitions of one topic in a dir."""

    name: str = field(STRING, "0+")
    partitions: list[DescribeLogDirsPartition] = field(array(DescribeLogDirsPartition), "0+")


@attrs.frozen(kw_only=True)
class DescribeLogDirsResult:
    """One log dir: its error (KAFKA_STORAGE_ERROR when offline), path, partitions, space."""

    error_code: int = field(INT16, "0+")
    log_dir: str = field(STRING, "0+")
    topics: list[DescribeLogDirsTopic] = field(array(DescribeLogDirsTopic), "0+")
    total_bytes: int = field(INT64, "4+", default=-1, ignorable=True)
    usable_bytes: int = field(INT64, "4+", default=-1, ignorable=True)
    is_cordoned: bool = field(BOOL, "5+", ignorable=True)


@attrs.frozen(kw_only=True)
class DescribeLogDirsResponse(Response):
    """Every log dir of the answering broker."""

    API = DESCRIBE_LOG_DIRS

    throttle_time_ms: int = field(INT32, "0+")
    error_code: int = field(INT16, "3+", ignorable=True)
    results: list[DescribeLogDirsResult] = field(array(DescribeLogDirsResult), "0+")


# ---- ElectLeaders ----


@attrs.frozen(kw_only=True)
class ElectLeadersTopicPartitions:
    """The partitions of one topic to elect leaders for."""

    topic: str = field(STRING, "0+")
    partitions: list[int] = field(array(INT32), "0+")


@attrs.frozen(kw_only=True)
class ElectLeadersRequest(Request):
    """Elect leaders (``ELECTION_PREFERRED`` or ``ELECTION_UNCLEAN``; v0 is preferred only);
    ``topic_partitions`` None: every partition."""

    API = ELECT_LEADERS

    election_type: int = field(INT8, "1+")
    topic_partitions: list[ElectLeadersTopicPartitions] | None = field(
        array(ElectLeadersTopicPartitions), "0+", nullable="0+"
    )
    timeout_ms: int = field(INT32, "0+", default=60000)


@attrs.frozen(kw_only=True)
class ElectionPartitionResult:
    """One partition's election outcome."""

    partition_id: int = field(INT32, "0+")
    error_code: int = field(INT16, "0+")
    error_message: str | None = field(STRING, "0+", nullable="0+")


@attrs.frozen(kw_only=True)
class ReplicaElectionResult:
    """The outcomes of one topic's partitions."""

    topic: str = field(STRING, "0+")
    partition_result: list[ElectionPartitionResult] = field(array(ElectionPartitionResult), "0+")


@attrs.frozen(kw_only=True)
class ElectLeadersResponse(Response):
    """Per-partition outcomes and a top-level error (v1+)."""

    API = ELECT_LEADERS

    throttle_time_ms: int = field(INT32, "0+")
    error_code: int = field(INT16, "1+")
    replica_election_results: list[ReplicaElectionResult] = field(
        array(ReplicaElectionResult), "0+"
    )


# ---- AlterPartitionReassignments ----


@attrs.frozen(kw_only=True)
class ReassignablePartition:
    """Move one partition to ``replicas`` (None: cancel its running reassignment)."""

    partition_index: int = field(INT32, "0+")
    replicas: list[int] | None = field(array(INT32), "0+", nullable="0+", default=None)


@attrs.frozen(kw_only=True)
class ReassignableTopic:
    """The partitions of one topic to reassign."""

    name: str = field(STRING, "0+")
    partitions: list[ReassignablePartition] = field(array(ReassignablePartition), "0+")


@attrs.frozen(kw_only=True)
class AlterPartitionReassignmentsRequest(Request):
    """Start or cancel reassignments."""

    API = ALTER_PARTITION_REASSIGNMENTS

    timeout_ms: int = field(INT32, "0+", default=60000)
    allow_replication_factor_change: bool = field(BOOL, "1+", default=True)
    topics: list[ReassignableTopic] = field(array(ReassignableTopic), "0+")


@attrs.frozen(kw_only=True)
class ReassignablePartitionResponse:
    """One partition's outcome."""

    partition_index: int = field(INT32, "0+")
    error_code: int = field(INT16, "0+")
    error_message: str | None = field(STRING, "0+", nullable="0+")


@attrs.frozen(kw_only=True)
class ReassignableTopicResponse:
    """The outcomes of one topic's partitions."""

    name: str = field(STRING, "0+")
    partitions: list[ReassignablePartitionResponse] = field(
        array(ReassignablePartitionResponse), "0+"
    )


@attrs.frozen(kw_only=True)
class AlterPartitionReassignmentsResponse(Response):
    """Per-partition outcomes and a top-level error."""

    API = ALTER_PARTITION_REASSIGNMENTS

    throttle_time_ms: int = field(INT32, "0+")
    allow_replication_factor_change: bool = field(BOOL, "1+", default=True, ignorable=True)
    error_code: int = field(INT16, "0+")
    error_message: str | None = field(STRING, "0+", nullable="0+")
    responses: list[ReassignableTopicResponse] = field(array(ReassignableTopicResponse), "0+")


# ---- ListPartitionReassignments ----


@attrs.frozen(kw_only=True)
class ListPartitionReassignmentsTopics:
    """The partitions of one topic to list."""

    name: str = field(STRING, "0+")
    partition_indexes: list[int] = field(array(INT32), "0+")


@attrs.frozen(kw_only=True)
class ListPartitionReassignmentsRequest(Request):
    """List running reassignments (``topics`` None: all of them)."""

    API = LIST_PARTITION_REASSIGNMENTS

    timeout_ms: int = field(INT32, "0+", default=60000)
    topics: list[ListPartitionReassignmentsTopics] | None = field(
        array(ListPartitionReassignmentsTopics), "0+", nullable="0+", default=None
    )


@attrs.frozen(kw_only=True)
class OngoingPartitionReassignment:
    """A running reassignment: the current replicas, those being added and removed."""

    partition_index: int = field(INT32, "0+")
    replicas: list[int] = field(array(INT32), "0+")
    adding_replicas: list[int] = field(array(INT32), "0+")
    removing_replicas: list[int] = field(array(INT32), "0+")


@attrs.frozen(kw_only=True)
class OngoingTopicReassignment:
    """The running reassignments of one topic."""

    name: str = field(STRING, "0+")
    partitions: list[OngoingPartitionReassignment] = field(
        array(OngoingPartitionReassignment), "0+"
    )


@attrs.frozen(kw_only=True)
class ListPartitionReassignmentsResponse(Response):
    """Running reassignments, by topic."""

    API = LIST_PARTITION_REASSIGNMENTS

    throttle_time_ms: int = field(INT32, "0+")
    error_code: int = field(INT16, "0+")
    error_message: str | None = field(STRING, "0+", nullable="0+")
    topics: list[OngoingTopicReassignment] = field(array(OngoingTopicReassignment), "0+")
