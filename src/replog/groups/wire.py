"""Conversions between the group APIs' versions and the version-free shapes the coordinator
works with (Kafka's KafkaApis and *Response classes do the same).

Requests in: an OffsetFetch v0-v7 is one ``OffsetFetchRequestGroup``; a LeaveGroup v0-v2 is one
``MemberIdentity``. Responses out:

- JoinGroup: before v7 the protocol name is never null (""), from v7 "" is sent as null;
- LeaveGroup v0-v2: no member list; the error is the group's, else the first member's;
- OffsetFetch v0-v7: one group's topics at the top level, its error in ``error_code`` (v2+) or,
  before v2, in every partition (with offset -1);
- FindCoordinator: one coordinator (v0-v3) or one per key (v4+). Only group keys have a
  coordinator in replog; a transaction key is INVALID_REQUEST.
"""

from __future__ import annotations

from collections.abc import Callable

import attrs

from replog.errors import ErrorCode, invariant
from replog.groups.partitioning import partition_for
from replog.protocol.messages import (
    COORDINATOR_KEY_GROUP,
    FindCoordinatorRequest,
    FindCoordinatorResponse,
    FindCoordinatorResponseCoordinator,
    JoinGroupResponse,
    LeaveGroupRequest,
    LeaveGroupResponse,
    MemberIdentity,
    OffsetFetchRequest,
    OffsetFetchRequestGroup,
    OffsetFetchRequestTopics,
    OffsetFetchResponse,
    OffsetFetchResponseGroup,
    OffsetFetchResponsePartition,
    OffsetFetchResponseTopic,
)

__all__ = [
    "Endpoint",
    "find_coordinator",
    "leave_members",
    "offset_fetch_groups",
    "shape_join_group",
    "shape_leave_group",
    "shape_offset_fetch",
]

_LEAVE_BATCH_FROM = 3
_FETCH_GROUPS_FROM = 8
_FETCH_GROUP_ERROR_FROM = 2
_JOIN_NULLABLE_PROTOCOL_FROM = 7
_JOIN_SKIP_ASSIGNMENT_FROM = 9
_FIND_BATCH_FROM = 4


@attrs.frozen
class Endpoint:
    """Where a coordinator listens."""

    node_id: int
    host: str
    port: int


def leave_members(request: LeaveGroupRequest, version: int) -> list[MemberIdentity]:
    """The members a LeaveGroup removes."""
    if version >= _LEAVE_BATCH_FROM:
        return list(request.members)
    return [MemberIdentity(member_id=request.member_id)]


def offset_fetch_groups(request: OffsetFetchRequest, version: int) -> list[OffsetFetchRequestGroup]:
    """The groups an OffsetFetch asks about (``topics`` None: every partition)."""
    if version >= _FETCH_GROUPS_FROM:
        return list(request.groups)
    topics = None
    if request.topics is not None:
        topics = [
            OffsetFetchRequestTopics(name=t.name, partition_indexes=list(t.partition_indexes))
            for t in request.topics
        ]
    return [OffsetFetchRequestGroup(group_id=request.group_id, topics=topics)]


def shape_join_group(response: JoinGroupResponse, version: int) -> JoinGroupResponse:
    """``response`` as ``version`` can carry it."""
    invariant(
        version >= _JOIN_SKIP_ASSIGNMENT_FROM or not response.skip_assignment,
        "skip_assignment before JoinGroup v9",
    )
    if version < _JOIN_NULLABLE_PROTOCOL_FROM and response.protocol_name is None:
        return attrs.evolve(response, protocol_name="")
    if version >= _JOIN_NULLABLE_PROTOCOL_FROM and response.protocol_name == "":
        return attrs.evolve(response, protocol_name=None)
    return response


def shape_leave_group(response: LeaveGroupResponse, version: int) -> LeaveGroupResponse:
    """``response`` as ``version`` can carry it."""
    if version >= _LEAVE_BATCH_FROM:
        return response
    error = response.error_code
    if error == ErrorCode.NONE:
        error = next((m.error_code for m in response.members if m.error_code), ErrorCode.NONE)
    return LeaveGroupResponse(error_code=error)


def shape_offset_fetch(groups: list[OffsetFetchResponseGroup], version: int) -> OffsetFetchResponse:
    """The OffsetFetch response for ``groups`` (exactly one before v8)."""
    if version >= _FETCH_GROUPS_FROM:
        return OffsetFetchResponse(groups=groups)
    invariant(len(groups) == 1, f"OffsetFetch v{version} answers one group")
    group = groups[0]
    failed = group.error_code != ErrorCode.NONE
    per_partition = failed and version < _FETCH_GROUP_ERROR_FROM
    topics = [
        OffsetFetchResponseTopic(
            name=topic.name,
            partitions=[
                OffsetFetchResponsePartition(
                    partition_index=p.partition_index,
                    committed_offset=-1 if per_partition else p.committed_offset,
                    committed_leader_epoch=-1 if per_partition else p.committed_leader_epoch,
                    metadata="" if per_partition else p.metadata,
                    error_code=group.error_code if per_partition else p.error_code,
                )
                for p in topic.partitions
            ],
        )
        for topic in group.topics
    ]
    error = ErrorCode.NONE if version < _FETCH_GROUP_ERROR_FROM else group.error_code
    return OffsetFetchResponse(topics=topics, error_code=error)


def find_coordinator(
    request: FindCoordinatorRequest,
    version: int,
    *,
    partition_count: int,
    coordinator_of: Callable[[int], Endpoint | None],
) -> FindCoordinatorResponse:
    """Answer a FindCoordinator: the coordinator of a group is the leader of its
    ``__consumer_offsets`` partition (``coordinator_of`` returns None while it has none)."""
    keys = request.coordinator_keys if version >= _FIND_BATCH_FROM else [request.key]
    found = [_find_one(key, request.key_type, partition_count, coordinator_of) for key in keys]
    if version >= _FIND_BATCH_FROM:
        return FindCoordinatorResponse(coordinators=found)
    one = found[0]
    return FindCoordinatorResponse(
        error_code=one.error_code,
        error_message=one.error_message,
        node_id=one.node_id,
        host=one.host,
        port=one.port,
    )


def _find_one(
    key: str,
    key_type: int,
    partition_count: int,
    coordinator_of: Callable[[int], Endpoint | None],
) -> FindCoordinatorResponseCoordinator:
    if key_type != COORDINATOR_KEY_GROUP:
        return FindCoordinatorResponseCoordinator(
            key=key,
            node_id=-1,
            port=-1,
            error_code=ErrorCode.INVALID_REQUEST,
            error_message=f"replog coordinates groups only, not key type {key_type}",
        )
    endpoint = coordinator_of(partition_for(key, partition_count))
    if endpoint is None:
        error = ErrorCode.COORDINATOR_NOT_AVAILABLE
        return FindCoordinatorResponseCoordinator(key=key, node_id=-1, port=-1, error_code=error)
    return FindCoordinatorResponseCoordinator(
        key=key, node_id=endpoint.node_id, host=endpoint.host, port=endpoint.port
    )
