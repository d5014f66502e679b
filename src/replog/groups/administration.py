"""ListGroups, DescribeGroups and DeleteGroups: groups as administrators see them.

- ListGroups lists every group this shard hosts (not those being deleted), optionally only
  those whose state is in the filter (compared case-insensitively).
- DescribeGroups answers each group id in order; an unknown group is described as Dead with no
  error. Members carry their assignment, and (Stable groups only) their metadata for the
  selected protocol, which is also the group's ``protocol_data``.
- DeleteGroups deletes Empty groups with all their offsets: GROUP_ID_NOT_FOUND for unknown
  groups, NON_EMPTY_GROUP for groups with members. The group turns Dead while its tombstones
  are written, and the reply waits for them; if the write fails the group is Empty again and
  the reply carries the error.
"""

from __future__ import annotations

from replog.errors import ErrorCode
from replog.groups.core import ShardCore
from replog.groups.effects import RequestId
from replog.groups.group import ClassicGroup, GroupState
from replog.groups.offsets import Offsets, append_error_to_commit_error
from replog.groups.records import CoordinatorRecord, GroupRecord, OffsetRecord
from replog.protocol.messages import (
    DeletableGroupResult,
    DeleteGroupsResponse,
    DescribedGroup,
    DescribedGroupMember,
    ListedGroup,
)

__all__ = ["Administration"]


class Administration:
    """The administrative group requests of one shard."""

    def __init__(self, core: ShardCore, offsets: Offsets) -> None:
        self.core = core
        self.offsets = offsets

    def list_groups(self, states_filter: list[str]) -> list[ListedGroup]:
        """The hosted groups, filtered by state name when ``states_filter`` is not empty."""
        wanted = {state.strip().lower() for state in states_filter}
        return [
            ListedGroup(
                group_id=group.group_id,
                protocol_type=group.protocol_type or "",
                group_state=group.state.value,
            )
            for group in self.core.groups.values()
            if not group.is_in(GroupState.DEAD)
            and (not wanted or group.state.value.lower() in wanted)
        ]

    def describe_groups(self, group_ids: list[str]) -> list[DescribedGroup]:
        """One description per id, in order."""
        return [self._describe(group_id) for group_id in group_ids]

    def _describe(self, group_id: str) -> DescribedGroup:
        group = self.core.groups.get(group_id)
        if group is None or group.is_in(GroupState.DEAD):
            return DescribedGroup(group_id=group_id, group_state=GroupState.DEAD.value)
        stable = group.is_in(GroupState.STABLE)
        protocol = group.protocol_name or ""
        members = [
            DescribedGroupMember(
                member_id=m.member_id,
                group_instance_id=m.group_instance_id,
                client_id=m.client_id,
                client_host=m.client_host,
                member_metadata=m.metadata(protocol) if stable else b"",
                member_assignment=m.assignment,
            )
            for m in group.members.values()
        ]
        return DescribedGroup(
            group_id=group_id,
            group_state=group.state.value,
            protocol_type=group.protocol_type or "",
            protocol_data=protocol if stable else "",
            members=members,
        )

    def delete_groups(self, request_id: RequestId, group_ids: list[str], now_ms: int) -> None:
        """Handle a DeleteGroups (see the module docstring)."""
        errors: dict[str, ErrorCode] = {}
        deleting: list[tuple[ClassicGroup, int | None]] = []
        records: list[CoordinatorRecord] = []
        for group_id in group_ids:
            group = self.core.groups.get(group_id)
            if group is None or group.is_in(GroupState.DEAD):
                errors.setdefault(group_id, ErrorCode.GROUP_ID_NOT_FOUND)
            elif not group.is_in(GroupState.EMPTY):
                errors.setdefault(group_id, ErrorCode.NON_EMPTY_GROUP)
            else:
                deleting.append((group, group.state_timestamp_ms))
                errors[group_id] = ErrorCode.NONE
                records.extend(self._tombstones(group))
                group.transition_to(GroupState.DEAD, now_ms)

        def response(failed: ErrorCode) -> DeleteGroupsResponse:
            deleted = {group.group_id for group, _ in deleting}
            results = [
                DeletableGroupResult(
                    group_id=group_id,
                    error_code=failed if group_id in deleted else errors[group_id],
                )
                for group_id in group_ids
            ]
            return DeleteGroupsResponse(results=results)

        if not records:
            return self.core.reply(request_id, response(ErrorCode.NONE))
        self.core.park(request_id, response)

        def done(error: ErrorCode, now_ms: int) -> None:
            for group, became_empty_ms in deleting:
                self.offsets.finish_group_deletion(group, error, became_empty_ms)
            self.core.reply(request_id, response(append_error_to_commit_error(error)))

        self.core.write(records, done)
        return None

    def _tombstones(self, group: ClassicGroup) -> list[CoordinatorRecord]:
        group_id = group.group_id
        partitions = set(self.core.offsets.committed(group_id))
        partitions |= set(self.core.offsets.in_flight_partitions(group_id))
        records: list[CoordinatorRecord] = [
            OffsetRecord(group_id, topic, partition, None)
            for topic, partition in sorted(partitions)
        ]
        records.append(GroupRecord(group_id, None))
        return records
