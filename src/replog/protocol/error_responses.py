"""The error response of a request: what a broker answers when handling the request failed.

Kafka never leaves a client waiting for an answer that will not come: when a handler throws, the
broker answers with the API's error response (``AbstractRequest.getErrorResponse``) -- the error
code on every topic, partition or resource the request named -- or, when the API has no answer
to give (a Produce with acks=0), closes the connection. ``error_response`` builds that answer for
each API replog serves, with Kafka's contents:

- the code is the exception's ``ReplogError.code`` (Kafka's ``Errors.forException``), else
  UNKNOWN_SERVER_ERROR; the message, where the API has one, is the exception's text except for
  UNKNOWN_SERVER_ERROR, whose text is withheld (it may describe internals) as in
  ``ApiError.fromThrowable``;
- offsets, timestamps, epochs and watermarks are -1 ("unknown"), records empty.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import attrs

from replog.errors import ErrorCode, ReplogError
from replog.protocol import messages as m
from replog.protocol.schema import Request, Response

__all__ = ["error_code_for", "error_response"]

_R = TypeVar("_R", bound=Request)


def error_code_for(error: BaseException) -> tuple[ErrorCode, str | None]:
    """The Kafka error code and message that report ``error`` to a client."""
    code = error.code if isinstance(error, ReplogError) else ErrorCode.UNKNOWN_SERVER_ERROR
    if code is ErrorCode.UNKNOWN_SERVER_ERROR:
        return code, None
    return code, str(error) or None


# -- the consumer-group APIs -----------------------------------------------------------------------


def _offset_commit(request: m.OffsetCommitRequest, code: int, message: str | None) -> Response:
    return m.OffsetCommitResponse(
        topics=[
            m.OffsetCommitResponseTopic(
                name=topic.name,
                partitions=[
                    m.OffsetCommitResponsePartition(
                        partition_index=p.partition_index, error_code=code
                    )
                    for p in topic.partitions
                ],
            )
            for topic in request.topics
        ]
    )


def _offset_fetch(request: m.OffsetFetchRequest, code: int, message: str | None) -> Response:
    # v0-v1 carry the code on each partition, v2-v7 at the top level, v8 on each group; the
    # fields are version-gated, so one message holds all three.
    return m.OffsetFetchResponse(
        topics=[
            m.OffsetFetchResponseTopic(
                name=topic.name,
                partitions=[
                    m.OffsetFetchResponsePartition(
                        partition_index=p, committed_offset=-1, metadata="", error_code=code
                    )
                    for p in topic.partition_indexes
                ],
            )
            for topic in request.topics or ()
        ],
        error_code=code,
        groups=[
            m.OffsetFetchResponseGroup(group_id=group.group_id, topics=[], error_code=code)
            for group in request.groups
        ],
    )


def _find_coordinator(
    request: m.FindCoordinatorRequest, code: int, message: str | None, *, batched: bool
) -> Response:
    if not batched:
        return m.FindCoordinatorResponse(
            error_code=code, error_message=message, node_id=-1, host="", port=-1
        )
    return m.FindCoordinatorResponse(
        coordinators=[
            m.FindCoordinatorResponseCoordinator(
                key=key, node_id=-1, host="", port=-1, error_code=code, error_message=message
            )
            for key in request.coordinator_keys
        ],
    )


def _join_group(request: m.JoinGroupRequest, code: int, message: str | None) -> Response:
    return m.JoinGroupResponse(
        error_code=code, generation_id=-1, protocol_name="", leader="", member_id=""
    )


def _heartbeat(request: m.HeartbeatRequest, code: int, message: str | None) -> Response:
    return m.HeartbeatResponse(error_code=code)


def _leave_group(request: m.LeaveGroupRequest, code: int, message: str | None) -> Response:
    return m.LeaveGroupResponse(error_code=code)


def _sync_group(request: m.SyncGroupRequest, code: int, message: str | None) -> Response:
    return m.SyncGroupResponse(error_code=code, assignment=b"")


def _describe_groups(request: m.DescribeGroupsRequest, code: int, message: str | None) -> Response:
    return m.DescribeGroupsResponse(
        groups=[m.DescribedGroup(error_code=code, group_id=group) for group in request.groups]
    )


def _list_groups(request: m.ListGroupsRequest, code: int, message: str | None) -> Response:
    return m.ListGroupsResponse(error_code=code)


def _delete_groups(request: m.DeleteGroupsRequest, code: int, message: str | None) -> Response:
    return m.DeleteGroupsResponse(
        results=[
            m.DeletableGroupResult(group_id=group, error_code=code)
            for group in request.groups_names
        ]
    )


def _offset_delete(request: m.OffsetDeleteRequest, code: int, message: str | None) -> Response:
    return m.OffsetDeleteResponse(error_code=code)


def error_response(
    request: Request, error: BaseException, *, version: int | None = None
) -> Response | None:
    """The answer to ``request`` when handling it raised ``error``; None when Kafka sends no
    answer and closes the connection instead (Produce with acks=0). ``version`` is the
    request's: FindCoordinator needs it (v4 answers per key, earlier versions once), and
    ElectLeaders' top-level error code (not ignorable) exists from v1 only; every other API's
    answer is the same at every version."""
    code, message = error_code_for(error)
    if isinstance(request, m.FindCoordinatorRequest):
        batched = bool(request.coordinator_keys) if version is None else version >= 4
        return _find_coordinator(request, int(code), message, batched=batched)
    build = _BUILDERS.get(type(request))
    if build is None:
        raise TypeError(f"no error response for {type(request).__name__}")
    response = build(request, int(code), message)
    if isinstance(response, m.ElectLeadersResponse) and version == 0:
        response = attrs.evolve(response, error_code=0)
    return response


def _produce(request: m.ProduceRequest, code: int, message: str | None) -> Response | None:
    if request.acks == 0:
        return None
    return m.ProduceResponse(
        responses=[
            m.TopicProduceResponse(
                name=topic.name,
                partition_responses=[
                    m.PartitionProduceResponse(
                        index=p.index,
                        error_code=code,
                        base_offset=-1,
                        log_start_offset=-1,
                        error_message=message,
                    )
                    for p in topic.partition_data
                ],
            )
            for topic in request.topic_data
        ]
    )


def _fetch(request: m.FetchRequest, code: int, message: str | None) -> Response:
    # Below v13 the code goes on every partition and at the top level (v7+) alike.
    return m.FetchResponse(
        error_code=code,
        session_id=request.session_id,
        responses=[
            m.FetchResponseTopic(
                topic=topic.topic,
                partitions=[
                    m.FetchResponsePartition(
                        partition_index=p.partition,
                        error_code=code,
                        high_watermark=-1,
                        records=b"",
                    )
                    for p in topic.partitions
                ],
            )
            for topic in request.topics
        ],
    )


def _list_offsets(request: m.ListOffsetsRequest, code: int, message: str | None) -> Response:
    return m.ListOffsetsResponse(
        topics=[
            m.ListOffsetsTopicResponse(
                name=topic.name,
                partitions=[
                    m.ListOffsetsPartitionResponse(
                        partition_index=p.partition_index, error_code=code
                    )
                    for p in topic.partitions
                ],
            )
            for topic in request.topics
        ]
    )


def _metadata(request: m.MetadataRequest, code: int, message: str | None) -> Response:
    # "All topics" (null) names no topic to put the code on: the answer lists none.
    return m.MetadataResponse(
        topics=[
            m.MetadataResponseTopic(
                error_code=code, name=topic.name or "", topic_id=topic.topic_id, partitions=[]
            )
            for topic in request.topics or ()
        ]
    )


def _api_versions(request: m.ApiVersionsRequest, code: int, message: str | None) -> Response:
    return m.ApiVersionsResponse(error_code=code, api_keys=[])


def _create_topics(request: m.CreateTopicsRequest, code: int, message: str | None) -> Response:
    return m.CreateTopicsResponse(
        topics=[
            m.CreatableTopicResult(name=topic.name, error_code=code, error_message=message)
            for topic in request.topics
        ]
    )


def _delete_topics(request: m.DeleteTopicsRequest, code: int, message: str | None) -> Response:
    named = [m.DeleteTopicState(name=name) for name in request.topic_names]
    return m.DeleteTopicsResponse(
        responses=[
            m.DeletableTopicResult(name=topic.name, topic_id=topic.topic_id, error_code=code)
            for topic in named + list(request.topics)
        ]
    )


def _offset_for_leader_epoch(
    request: m.OffsetForLeaderEpochRequest, code: int, message: str | None
) -> Response:
    return m.OffsetForLeaderEpochResponse(
        topics=[
            m.OffsetForLeaderTopicResult(
                topic=topic.topic,
                partitions=[
                    m.EpochEndOffsetResult(error_code=code, partition=p.partition)
                    for p in topic.partitions
                ],
            )
            for topic in request.topics
        ]
    )


def _create_partitions(
    request: m.CreatePartitionsRequest, code: int, message: str | None
) -> Response:
    return m.CreatePartitionsResponse(
        results=[
            m.CreatePartitionsTopicResult(name=topic.name, error_code=code, error_message=message)
            for topic in request.topics
        ]
    )


def _describe_configs(
    request: m.DescribeConfigsRequest, code: int, message: str | None
) -> Response:
    return m.DescribeConfigsResponse(
        results=[
            m.DescribeConfigsResult(
                error_code=code,
                error_message=message,
                resource_type=resource.resource_type,
                resource_name=resource.resource_name,
            )
            for resource in request.resources
        ]
    )


def _init_producer_id(request: m.InitProducerIdRequest, code: int, message: str | None) -> Response:
    return m.InitProducerIdResponse(error_code=code, producer_id=-1, producer_epoch=-1)


def _alter_configs(
    request: m.AlterConfigsRequest | m.IncrementalAlterConfigsRequest,
    code: int,
    message: str | None,
) -> Response:
    results = [
        m.AlterConfigsResourceResponse(
            error_code=code,
            error_message=message,
            resource_type=resource.resource_type,
            resource_name=resource.resource_name,
        )
        for resource in request.resources
    ]
    if isinstance(request, m.IncrementalAlterConfigsRequest):
        return m.IncrementalAlterConfigsResponse(responses=results)
    return m.AlterConfigsResponse(responses=results)


def _delete_records(request: m.DeleteRecordsRequest, code: int, message: str | None) -> Response:
    return m.DeleteRecordsResponse(
        topics=[
            m.DeleteRecordsTopicResult(
                name=topic.name,
                partitions=[
                    m.DeleteRecordsPartitionResult(
                        partition_index=p.partition_index, low_watermark=-1, error_code=code
                    )
                    for p in topic.partitions
                ],
            )
            for topic in request.topics
        ]
    )


def _describe_log_dirs(
    request: m.DescribeLogDirsRequest, code: int, message: str | None
) -> Response:
    # Only v3+ carries a top-level code; below it the answer is an empty list, as in Kafka.
    return m.DescribeLogDirsResponse(error_code=code, results=[])


def _elect_leaders(request: m.ElectLeadersRequest, code: int, message: str | None) -> Response:
    return m.ElectLeadersResponse(
        error_code=code,
        replica_election_results=[
            m.ReplicaElectionResult(
                topic=topic.topic,
                partition_result=[
                    m.ElectionPartitionResult(
                        partition_id=p, error_code=code, error_message=message
                    )
                    for p in topic.partitions
                ],
            )
            for topic in request.topic_partitions or ()
        ],
    )


def _alter_partition_reassignments(
    request: m.AlterPartitionReassignmentsRequest, code: int, message: str | None
) -> Response:
    return m.AlterPartitionReassignmentsResponse(
        error_code=code,
        error_message=message,
        responses=[
            m.ReassignableTopicResponse(
                name=topic.name,
                partitions=[
                    m.ReassignablePartitionResponse(
                        partition_index=p.partition_index, error_code=code, error_message=message
                    )
                    for p in topic.partitions
                ],
            )
            for topic in request.topics
        ],
    )


def _list_partition_reassignments(
    request: m.ListPartitionReassignmentsRequest, code: int, message: str | None
) -> Response:
    return m.ListPartitionReassignmentsResponse(
        error_code=code,
        error_message=message,
        topics=[
            m.OngoingTopicReassignment(
                name=topic.name,
                partitions=[
                    m.OngoingPartitionReassignment(partition_index=p)
                    for p in topic.partition_indexes
                ],
            )
            for topic in request.topics or ()
        ],
    )


def _describe_cluster(
    request: m.DescribeClusterRequest, code: int, message: str | None
) -> Response:
    return m.DescribeClusterResponse(
        error_code=code, error_message=message, endpoint_type=request.endpoint_type
    )


def _entry(
    request_type: type[_R], build: Callable[[_R, int, str | None], Response | None]
) -> tuple[type[Request], Callable[[Any, int, str | None], Response | None]]:
    return request_type, build


_BUILDERS: dict[type[Request], Callable[[Any, int, str | None], Response | None]] = dict(
    (
        _entry(m.ProduceRequest, _produce),
        _entry(m.FetchRequest, _fetch),
        _entry(m.ListOffsetsRequest, _list_offsets),
        _entry(m.MetadataRequest, _metadata),
        _entry(m.ApiVersionsRequest, _api_versions),
        _entry(m.CreateTopicsRequest, _create_topics),
        _entry(m.DeleteTopicsRequest, _delete_topics),
        _entry(m.OffsetForLeaderEpochRequest, _offset_for_leader_epoch),
        _entry(m.CreatePartitionsRequest, _create_partitions),
        _entry(m.DescribeConfigsRequest, _describe_configs),
        _entry(m.OffsetCommitRequest, _offset_commit),
        _entry(m.OffsetFetchRequest, _offset_fetch),
        _entry(m.JoinGroupRequest, _join_group),
        _entry(m.HeartbeatRequest, _heartbeat),
        _entry(m.LeaveGroupRequest, _leave_group),
        _entry(m.SyncGroupRequest, _sync_group),
        _entry(m.DescribeGroupsRequest, _describe_groups),
        _entry(m.ListGroupsRequest, _list_groups),
        _entry(m.DeleteGroupsRequest, _delete_groups),
        _entry(m.OffsetDeleteRequest, _offset_delete),
        _entry(m.InitProducerIdRequest, _init_producer_id),
        _entry(m.AlterConfigsRequest, _alter_configs),
        _entry(m.IncrementalAlterConfigsRequest, _alter_configs),
        _entry(m.DeleteRecordsRequest, _delete_records),
        _entry(m.DescribeLogDirsRequest, _describe_log_dirs),
        _entry(m.ElectLeadersRequest, _elect_leaders),
        _entry(m.AlterPartitionReassignmentsRequest, _alter_partition_reassignments),
        _entry(m.ListPartitionReassignmentsRequest, _list_partition_reassignments),
        _entry(m.DescribeClusterRequest, _describe_cluster),
    )
)
