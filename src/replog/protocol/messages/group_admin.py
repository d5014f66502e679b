"""ListGroups (key 16), DescribeGroups (15) and DeleteGroups (42): groups as administrators see
them.

Fields follow Kafka's ListGroupsRequest/Response.json, DescribeGroupsRequest/Response.json and
DeleteGroupsRequest/Response.json.

- ListGroups v0-v4: v3 is flexible, v4 (KIP-518) filters by state and returns each state.
- DescribeGroups v0-v5: v3 adds authorized operations (KIP-430), v4 the members' group instance
  ids, v5 is flexible.
- DeleteGroups v0-v2: v2 is flexible. Only empty groups can be deleted (NON_EMPTY_GROUP).

The broker's group coordinator serves these APIs (``messages.GROUP_APIS``).
"""

# `field(...)` is an attrs field specifier (schema.field wraps attrs.field); ruff cannot tell.
# ruff: noqa: RUF009

from __future__ import annotations

import attrs

from replog.protocol.schema import (
    BOOL,
    BYTES,
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
    "AUTHORIZED_OPERATIONS_OMITTED",
    "DELETE_GROUPS",
    "DESCRIBE_GROUPS",
    "LIST_GROUPS",
    "DeletableGroupResult",
    "DeleteGroupsRequest",
    "DeleteGroupsResponse",
    "DescribeGroupsRequest",
    "DescribeGroupsResponse",
    "DescribedGroup",
    "DescribedGroupMember",
    "ListGroupsRequest",
    "ListGroupsResponse",
    "ListedGroup",
]

DESCRIBE_GROUPS = ApiInfo(15, "DescribeGroups", min_version=0, max_version=5, flexible_from=5)
LIST_GROUPS = ApiInfo(16, "ListGroups", min_version=0, max_version=4, flexible_from=3)
DELETE_GROUPS = ApiInfo(42, "DeleteGroups", min_version=0, max_version=2, flexible_from=2)

#: ``authorized_operations`` when the client did not ask for them (Kafka's INT32 min).
AUTHORIZED_OPERATIONS_OMITTED = -(2**31)


# -- ListGroups ----------------------------------------------------------------------------------


@attrs.frozen(kw_only=True)
class ListGroupsRequest(Request):
    """List the groups this coordinator hosts, optionally only those in ``states_filter``."""

    API = LIST_GROUPS

    states_filter: list[str] = field(array(STRING), "4+")


@attrs.frozen(kw_only=True)
class ListedGroup:
    """One hosted group."""

    group_id: str = field(STRING, "0+")
    protocol_type: str = field(STRING, "0+")
    group_state: str = field(STRING, "4+", ignorable=True)


@attrs.frozen(kw_only=True)
class ListGroupsResponse(Response):
    """The hosted groups (COORDINATOR_LOAD_IN_PROGRESS while some are still loading)."""

    API = LIST_GROUPS

    throttle_time_ms: int = field(INT32, "1+", ignorable=True)
    error_code: int = field(INT16, "0+")
    groups: list[ListedGroup] = field(array(ListedGroup), "0+")


# -- DescribeGroups ------------------------------------------------------------------------------


@attrs.frozen(kw_only=True)
class DescribeGroupsRequest(Request):
    """Describe ``groups`` (their state, protocol and members)."""

    API = DESCRIBE_GROUPS

    groups: list[str] = field(array(STRING), "0+")
    include_authorized_operations: bool = field(BOOL, "3+")


@attrs.frozen(kw_only=True)
class DescribedGroupMember:
    """One member: metadata and assignment are those of the selected protocol."""

    member_id: str = field(STRING, "0+")
    group_instance_id: str | None = field(STRING, "4+", nullable="4+", default=None, ignorable=True)
    client_id: str = field(STRING, "0+")
    client_host: str = field(STRING, "0+")
    member_metadata: bytes = field(BYTES, "0+")
    member_assignment: bytes = field(BYTES, "0+")


@attrs.frozen(kw_only=True)
class DescribedGroup:
    """One group, or the error that kept it from being described."""

    error_code: int = field(INT16, "0+")
    group_id: str = field(STRING, "0+")
    group_state: str = field(STRING, "0+")
    protocol_type: str = field(STRING, "0+")
    protocol_data: str = field(STRING, "0+")
    members: list[DescribedGroupMember] = field(array(DescribedGroupMember), "0+")
    authorized_operations: int = field(INT32, "3+", default=AUTHORIZED_OPERATIONS_OMITTED)


@attrs.frozen(kw_only=True)
class DescribeGroupsResponse(Response):
    """One description per requested group, in request order."""

    API = DESCRIBE_GROUPS

    throttle_time_ms: int = field(INT32, "1+", ignorable=True)
    groups: list[DescribedGroup] = field(array(DescribedGroup), "0+")


# -- DeleteGroups --------------------------------------------------------------------------------


@attrs.frozen(kw_only=True)
class DeleteGroupsRequest(Request):
    """Delete empty groups and all their committed offsets."""

    API = DELETE_GROUPS

    groups_names: list[str] = field(array(STRING), "0+")


@attrs.frozen(kw_only=True)
class DeletableGroupResult:
    """The outcome for one group."""

    group_id: str = field(STRING, "0+")
    error_code: int = field(INT16, "0+")


@attrs.frozen(kw_only=True)
class DeleteGroupsResponse(Response):
    """Per-group results."""

    API = DELETE_GROUPS

    throttle_time_ms: int = field(INT32, "0+")
    results: list[DeletableGroupResult] = field(array(DeletableGroupResult), "0+")
