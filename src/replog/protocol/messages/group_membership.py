"""FindCoordinator (key 10), JoinGroup (11), Heartbeat (12), LeaveGroup (13) and SyncGroup (14):
how a classic-protocol member finds its group coordinator, joins a generation, receives its
assignment and keeps its session alive.

Fields follow Kafka's FindCoordinatorRequest/Response.json, JoinGroupRequest/Response.json,
HeartbeatRequest/Response.json, LeaveGroupRequest/Response.json and SyncGroupRequest/Response.json.

- FindCoordinator v0-v4: v1 adds the key type (0 group, 1 transaction) and an error message,
  v3 is flexible, v4 (KIP-699) looks up several keys at once and answers per key.
- JoinGroup v0-v9: v1 adds the rebalance timeout, v4 requires a known member id (KIP-394: the
  first join gets MEMBER_ID_REQUIRED), v5 the group instance id (KIP-345), v6 is flexible,
  v7 returns the protocol type, v8 adds a reason, v9 ``skip_assignment`` (KIP-814).
- Heartbeat v0-v4: v3 adds the group instance id, v4 is flexible.
- LeaveGroup v0-v5: v3 leaves several members at once (KIP-345) and answers per member,
  v4 is flexible, v5 adds a reason.
- SyncGroup v0-v5: v3 adds the group instance id, v4 is flexible, v5 the protocol type and name.

The broker's group coordinator serves these APIs (``messages.GROUP_APIS``).
"""

# `field(...)` is an attrs field specifier (schema.field wraps attrs.field); ruff cannot tell.
# ruff: noqa: RUF009

from __future__ import annotations

import attrs

from replog.protocol.schema import (
    BOOL,
    BYTES,
    INT8,
    INT16,
    INT32,
    STRING,
    ApiInfo,
    Request,
    Response,
    array,
    field,
)

__all__ = [
    "COORDINATOR_KEY_GROUP",
    "COORDINATOR_KEY_TRANSACTION",
    "FIND_COORDINATOR",
    "HEARTBEAT",
    "JOIN_GROUP",
    "LEAVE_GROUP",
    "SYNC_GROUP",
    "FindCoordinatorResponseCoordinator",
    "FindCoordinatorRequest",
    "FindCoordinatorResponse",
    "HeartbeatRequest",
    "HeartbeatResponse",
    "JoinGroupRequest",
    "JoinGroupRequestProtocol",
    "JoinGroupResponse",
    "JoinGroupResponseMember",
    "LeaveGroupRequest",
    "LeaveGroupResponse",
    "MemberIdentity",
    "MemberResponse",
    "SyncGroupRequest",
    "SyncGroupRequestAssignment",
    "SyncGroupResponse",
]

FIND_COORDINATOR = ApiInfo(10, "FindCoordinator", min_version=0, max_version=4, flexible_from=3)
JOIN_GROUP = ApiInfo(11, "JoinGroup", min_version=0, max_version=9, flexible_from=6)
HEARTBEAT = ApiInfo(12, "Heartbeat", min_version=0, max_version=4, flexible_from=4)
LEAVE_GROUP = ApiInfo(13, "LeaveGroup", min_version=0, max_version=5, flexible_from=4)
SYNC_GROUP = ApiInfo(14, "SyncGroup", min_version=0, max_version=5, flexible_from=4)

#: FindCoordinator ``key_type`` values
COORDINATOR_KEY_GROUP = 0
COORDINATOR_KEY_TRANSACTION = 1


# -- FindCoordinator ------------------------------------------------------------------------------


@attrs.frozen(kw_only=True)
class FindCoordinatorRequest(Request):
    """Which broker coordinates ``key`` (v0-v3) or each of ``coordinator_keys`` (v4+)."""

    API = FIND_COORDINATOR

    key: str = field(STRING, "0-3")
    key_type: int = field(INT8, "1+")
    coordinator_keys: list[str] = field(array(STRING), "4+")


@attrs.frozen(kw_only=True)
class FindCoordinatorResponseCoordinator:
    """The coordinator of one key (v4+), or why there is none."""

    key: str = field(STRING, "4+")
    node_id: int = field(INT32, "4+")
    host: str = field(STRING, "4+")
    port: int = field(INT32, "4+")
    error_code: int = field(INT16, "4+")
    error_message: str | None = field(STRING, "4+", nullable="4+", default=None, ignorable=True)


@attrs.frozen(kw_only=True)
class FindCoordinatorResponse(Response):
    """One coordinator (v0-v3) or one per requested key (v4+)."""

    API = FIND_COORDINATOR

    throttle_time_ms: int = field(INT32, "1+", ignorable=True)
    error_code: int = field(INT16, "0-3")
    error_message: str | None = field(STRING, "1-3", nullable="1-3", default=None, ignorable=True)
    node_id: int = field(INT32, "0-3")
    host: str = field(STRING, "0-3")
    port: int = field(INT32, "0-3")
    coordinators: list[FindCoordinatorResponseCoordinator] = field(
        array(FindCoordinatorResponseCoordinator), "4+"
    )


# -- JoinGroup -----------------------------------------------------------------------------------


@attrs.frozen(kw_only=True)
class JoinGroupRequestProtocol:
    """One protocol the member supports, with its (opaque) metadata, in preference order."""

    name: str = field(STRING, "0+")
    metadata: bytes = field(BYTES, "0+")


@attrs.frozen(kw_only=True)
class JoinGroupRequest(Request):
    """Join (or rejoin) a group; ``member_id`` is "" on the first join."""

    API = JOIN_GROUP

    group_id: str = field(STRING, "0+")
    session_timeout_ms: int = field(INT32, "0+")
    rebalance_timeout_ms: int = field(INT32, "1+", default=-1, ignorable=True)
    member_id: str = field(STRING, "0+")
    group_instance_id: str | None = field(STRING, "5+", nullable="5+", default=None)
    protocol_type: str = field(STRING, "0+")
    protocols: list[JoinGroupRequestProtocol] = field(array(JoinGroupRequestProtocol), "0+")
    reason: str | None = field(STRING, "8+", nullable="8+", default=None, ignorable=True)


@attrs.frozen(kw_only=True)
class JoinGroupResponseMember:
    """A member of the new generation, as the leader sees it."""

    member_id: str = field(STRING, "0+")
    group_instance_id: str | None = field(STRING, "5+", nullable="5+", default=None, ignorable=True)
    metadata: bytes = field(BYTES, "0+")


@attrs.frozen(kw_only=True)
class JoinGroupResponse(Response):
    """The generation the member joined; only the leader gets ``members``."""

    API = JOIN_GROUP

    throttle_time_ms: int = field(INT32, "2+", ignorable=True)
    error_code: int = field(INT16, "0+")
    generation_id: int = field(INT32, "0+", default=-1)
    protocol_type: str | None = field(STRING, "7+", nullable="7+", default=None, ignorable=True)
    protocol_name: str | None = field(STRING, "0+", nullable="7+")
    leader: str = field(STRING, "0+")
    skip_assignment: bool = field(BOOL, "9+")
    member_id: str = field(STRING, "0+")
    members: list[JoinGroupResponseMember] = field(array(JoinGroupResponseMember), "0+")


# -- Heartbeat -----------------------------------------------------------------------------------


@attrs.frozen(kw_only=True)
class HeartbeatRequest(Request):
    """Keep the member's session alive; the answer says whether a rebalance is under way."""

    API = HEARTBEAT

    group_id: str = field(STRING, "0+")
    generation_id: int = field(INT32, "0+")
    member_id: str = field(STRING, "0+")
    group_instance_id: str | None = field(STRING, "3+", nullable="3+", default=None)


@attrs.frozen(kw_only=True)
class HeartbeatResponse(Response):
    """NONE, REBALANCE_IN_PROGRESS or why the member is no longer in the generation."""

    API = HEARTBEAT

    throttle_time_ms: int = field(INT32, "1+", ignorable=True)
    error_code: int = field(INT16, "0+")


# -- LeaveGroup ----------------------------------------------------------------------------------


@attrs.frozen(kw_only=True)
class MemberIdentity:
    """A member to remove (v3+): by member id, or by group instance id with member id ""."""

    member_id: str = field(STRING, "3+")
    group_instance_id: str | None = field(STRING, "3+", nullable="3+", default=None)
    reason: str | None = field(STRING, "5+", nullable="5+", default=None, ignorable=True)


@attrs.frozen(kw_only=True)
class LeaveGroupRequest(Request):
    """Leave a group: one ``member_id`` (v0-v2) or a batch of ``members`` (v3+)."""

    API = LEAVE_GROUP

    group_id: str = field(STRING, "0+")
    member_id: str = field(STRING, "0-2")
    members: list[MemberIdentity] = field(array(MemberIdentity), "3+")


@attrs.frozen(kw_only=True)
class MemberResponse:
    """The outcome for one leaving member (v3+)."""

    member_id: str = field(STRING, "3+")
    group_instance_id: str | None = field(STRING, "3+", nullable="3+")
    error_code: int = field(INT16, "3+")


@attrs.frozen(kw_only=True)
class LeaveGroupResponse(Response):
    """The group-level error and (v3+) one result per member."""

    API = LEAVE_GROUP

    throttle_time_ms: int = field(INT32, "1+", ignorable=True)
    error_code: int = field(INT16, "0+")
    members: list[MemberResponse] = field(array(MemberResponse), "3+")


# -- SyncGroup -----------------------------------------------------------------------------------


@attrs.frozen(kw_only=True)
class SyncGroupRequestAssignment:
    """The leader's (opaque) assignment for one member."""

    member_id: str = field(STRING, "0+")
    assignment: bytes = field(BYTES, "0+")


@attrs.frozen(kw_only=True)
class SyncGroupRequest(Request):
    """Ask for this generation's assignment; the leader sends everyone's ``assignments``."""

    API = SYNC_GROUP

    group_id: str = field(STRING, "0+")
    generation_id: int = field(INT32, "0+")
    member_id: str = field(STRING, "0+")
    group_instance_id: str | None = field(STRING, "3+", nullable="3+", default=None)
    protocol_type: str | None = field(STRING, "5+", nullable="5+", default=None, ignorable=True)
    protocol_name: str | None = field(STRING, "5+", nullable="5+", default=None, ignorable=True)
    assignments: list[SyncGroupRequestAssignment] = field(array(SyncGroupRequestAssignment), "0+")


@attrs.frozen(kw_only=True)
class SyncGroupResponse(Response):
    """This member's assignment for the generation, or why there is none."""

    API = SYNC_GROUP

    throttle_time_ms: int = field(INT32, "1+", ignorable=True)
    error_code: int = field(INT16, "0+")
    protocol_type: str | None = field(STRING, "5+", nullable="5+", default=None, ignorable=True)
    protocol_name: str | None = field(STRING, "5+", nullable="5+", default=None, ignorable=True)
    assignment: bytes = field(BYTES, "0+")
