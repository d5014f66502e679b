"""JoinGroup, SyncGroup, Heartbeat and LeaveGroup for classic groups (Kafka's rules).

JoinGroup, by who asks:

- no member id, dynamic: from v4 the member gets MEMBER_ID_REQUIRED and a new id to join with
  (it is *pending* until it does, for one session timeout); before v4 it is added at once.
- no member id, static (``group_instance_id``): a new instance is added; a known instance
  replaces its old member id (the old id's waiting requests get FENCED_INSTANCE_ID). In a Stable
  group whose selected protocol would not change, no rebalance happens: the group is written
  with the new id and the member gets the current generation (from v9 a static leader gets
  ``skip_assignment``; before v9 the old leader id is returned so it does not reassign).
- a known member: joins the rebalance in PreparingRebalance; in CompletingRebalance and Stable
  it gets the current generation back unless its protocols changed (then it rebalances); a
  leader rejoining a Stable group always triggers a rebalance.
- errors: INVALID_GROUP_ID (empty id), INVALID_SESSION_TIMEOUT, UNKNOWN_MEMBER_ID,
  FENCED_INSTANCE_ID, INCONSISTENT_GROUP_PROTOCOL (no common protocol / other protocol type),
  GROUP_MAX_SIZE_REACHED, COORDINATOR_NOT_AVAILABLE (group being deleted).

SyncGroup answers at once with REBALANCE_IN_PROGRESS while preparing and with the member's
assignment when Stable; in CompletingRebalance it waits for the leader's assignment to be
written. Heartbeat answers REBALANCE_IN_PROGRESS while preparing. LeaveGroup removes members
by id or (member id "") by instance id and answers per member.

replog additions (Kafka leaves these requests unanswered): a JoinGroup or SyncGroup replaced
by a newer one from the same member is answered REBALANCE_IN_PROGRESS, and a member removed
while waiting gets UNKNOWN_MEMBER_ID, so every request gets exactly one reply.
"""

from __future__ import annotations

import attrs

from replog.errors import ErrorCode
from replog.groups.core import ShardCore
from replog.groups.effects import RequestId
from replog.groups.group import ClassicGroup, GroupState, Member, Protocol
from replog.groups.rebalance import Rebalance, append_error_to_group_error, join_error, sync_error
from replog.protocol.messages import (
    HeartbeatRequest,
    HeartbeatResponse,
    JoinGroupRequest,
    JoinGroupResponse,
    LeaveGroupResponse,
    MemberIdentity,
    MemberResponse,
    SyncGroupRequest,
    SyncGroupResponse,
)

__all__ = ["Membership", "validate_member"]

_EMPTY = GroupState.EMPTY
_PREPARING = GroupState.PREPARING_REBALANCE
_COMPLETING = GroupState.COMPLETING_REBALANCE
_STABLE = GroupState.STABLE
_DEAD = GroupState.DEAD

_JOIN_REQUIRES_MEMBER_ID_FROM = 4
_JOIN_SKIP_ASSIGNMENT_FROM = 9
_SYNC_PROTOCOL_MANDATORY_FROM = 5


def validate_member(group: ClassicGroup, member_id: str, instance_id: str | None) -> ErrorCode:
    """NONE if ``member_id`` is a member and, for a static member, the current holder of
    ``instance_id``; else UNKNOWN_MEMBER_ID or FENCED_INSTANCE_ID."""
    if instance_id is not None:
        current = group.static_members.get(instance_id)
        if current is None:
            return ErrorCode.UNKNOWN_MEMBER_ID
        if current != member_id:
            return ErrorCode.FENCED_INSTANCE_ID
    if member_id not in group.members:
        return ErrorCode.UNKNOWN_MEMBER_ID
    return ErrorCode.NONE


class Membership:
    """The member-facing requests of classic groups."""

    def __init__(self, core: ShardCore, rebalance: Rebalance) -> None:
        self.core = core
        self.rebalance = rebalance

    # -- JoinGroup ------------------------------------------------------------------------------

    def join_group(
        self,
        request_id: RequestId,
        request: JoinGroupRequest,
        *,
        api_version: int,
        client_id: str,
        client_host: str,
        now_ms: int,
    ) -> None:
        """Handle a JoinGroup (see the module docstring)."""
        config = self.core.config
        member_id = request.member_id
        if not request.group_id:
            return self.core.reply(request_id, join_error(member_id, ErrorCode.INVALID_GROUP_ID))
        timeout_ms = request.session_timeout_ms
        if not config.session_timeout_ms_min <= timeout_ms <= config.session_timeout_ms_max:
            error = ErrorCode.INVALID_SESSION_TIMEOUT
            return self.core.reply(request_id, join_error(member_id, error))
        if api_version == 0:  # v0 has no rebalance timeout: the session timeout stands in
            request = _with_rebalance_timeout(request, timeout_ms)
        group = self.core.groups.get(request.group_id)
        if group is None:
            if member_id != "":
                error = ErrorCode.UNKNOWN_MEMBER_ID
                return self.core.reply(request_id, join_error(member_id, error))
            group = ClassicGroup(request.group_id, _EMPTY, now_ms)
            self.core.groups[group.group_id] = group
        join = _Join(request_id, request, api_version, client_id, client_host, now_ms)
        if not self._accepts_joining_member(group, member_id):
            removed = group.members.get(member_id)
            if removed is not None:
                self.rebalance.remove_member_and_update_group(group, removed, now_ms)
            error = ErrorCode.GROUP_MAX_SIZE_REACHED
            self.core.reply(request_id, join_error("", error))
        elif member_id == "":
            self._join_new_member(group, join)
        else:
            self._join_existing_member(group, join)
        self.core.discard_group_if_unused(group.group_id)
        return None

    def _accepts_joining_member(self, group: ClassicGroup, member_id: str) -> bool:
        size_max = self.core.config.group_size_max
        if group.is_in(_EMPTY, _DEAD):
            return True
        member = group.members.get(member_id)
        if group.is_in(_PREPARING):
            # Counting the members that rejoined lets the last rejoiners be turned away when
            # the group is over a (lowered) maximum.
            awaiting = member is not None and member.awaiting_join is not None
            return awaiting or group.awaiting_join_count() < size_max
        return member is not None or len(group.members) < size_max

    def _join_new_member(self, group: ClassicGroup, join: _Join) -> None:
        request = join.request
        names = [p.name for p in request.protocols]
        if group.is_in(_DEAD):
            error = ErrorCode.COORDINATOR_NOT_AVAILABLE
            return self.core.reply(join.request_id, join_error("", error))
        if not group.supports_protocols(request.protocol_type, names):
            error = ErrorCode.INCONSISTENT_GROUP_PROTOCOL
            return self.core.reply(join.request_id, join_error("", error))
        instance_id = request.group_instance_id
        prefix = _member_id_prefix(instance_id or join.client_id)
        new_member_id = f"{prefix}-{self.core.member_id_suffix()}"
        if instance_id is not None:
            old_member_id = group.static_members.get(instance_id)
            if old_member_id is not None:
                return self._replace_static_member(group, join, old_member_id, new_member_id)
            return self._add_member(group, join, new_member_id)
        if join.api_version >= _JOIN_REQUIRES_MEMBER_ID_FROM:
            group.pending_members[new_member_id] = join.now_ms + request.session_timeout_ms
            error = ErrorCode.MEMBER_ID_REQUIRED
            return self.core.reply(join.request_id, join_error(new_member_id, error))
        return self._add_member(group, join, new_member_id)

    def _join_existing_member(self, group: ClassicGroup, join: _Join) -> None:
        request, request_id = join.request, join.request_id
        member_id = request.member_id
        if group.is_in(_DEAD):
            error = ErrorCode.COORDINATOR_NOT_AVAILABLE
            return self.core.reply(request_id, join_error(member_id, error))
        if not group.supports_protocols(request.protocol_type, [p.name for p in request.protocols]):
            error = ErrorCode.INCONSISTENT_GROUP_PROTOCOL
            return self.core.reply(request_id, join_error(member_id, error))
        if member_id in group.pending_members:
            if request.group_instance_id is not None:  # Kafka raises IllegalStateException
                error = ErrorCode.UNKNOWN_SERVER_ERROR
                return self.core.reply(request_id, join_error(member_id, error))
            return self._add_member(group, join, member_id)
        error = validate_member(group, member_id, request.group_instance_id)
        if error is not ErrorCode.NONE:
            return self.core.reply(request_id, join_error(member_id, error))
        member = group.member(member_id)
        protocols = _protocols(request)
        if group.is_in(_PREPARING):
            return self._update_member_and_rebalance(group, member, join)
        if group.is_in(_COMPLETING, _STABLE):
            leader_in_stable = group.is_in(_STABLE) and group.is_leader(member_id)
            if leader_in_stable or not member.matches(protocols):
                return self._update_member_and_rebalance(group, member, join)
            return self.core.reply(request_id, self.rebalance.join_response(group, member_id))
        # Empty: the group lost its members meanwhile; the member resets and rejoins.
        error = ErrorCode.UNKNOWN_MEMBER_ID
        return self.core.reply(request_id, join_error(member_id, error))

    def _add_member(self, group: ClassicGroup, join: _Join, member_id: str) -> None:
        request = join.request
        member = Member(
            member_id=member_id,
            group_instance_id=request.group_instance_id,
            client_id=join.client_id,
            client_host=join.client_host,
            rebalance_timeout_ms=request.rebalance_timeout_ms,
            session_timeout_ms=request.session_timeout_ms,
            protocol_type=request.protocol_type,
            protocols=_protocols(request),
            is_new=True,
        )
        if group.is_in(_PREPARING) and group.previous_state is _EMPTY:
            group.new_member_added = True
        group.add(member)
        self._await_join(member, join)
        # New members cannot heartbeat yet; their JoinGroup times out instead.
        timeout_ms = self.core.config.new_member_join_timeout_ms
        self.rebalance.reschedule_heartbeat(member, join.now_ms, timeout_ms)
        self.rebalance.maybe_prepare_rebalance_or_complete_join(group, join.now_ms)

    def _update_member_and_rebalance(
        self, group: ClassicGroup, member: Member, join: _Join
    ) -> None:
        self._update_member(member, join)
        self.rebalance.maybe_prepare_rebalance_or_complete_join(group, join.now_ms)

    def _update_member(self, member: Member, join: _Join) -> None:
        request = join.request
        member.protocols = _protocols(request)
        member.rebalance_timeout_ms = request.rebalance_timeout_ms
        member.session_timeout_ms = request.session_timeout_ms
        self._await_join(member, join)

    def _await_join(self, member: Member, join: _Join) -> None:
        if member.awaiting_join is not None:  # a newer JoinGroup replaces this one
            old, member.awaiting_join = member.awaiting_join, None
            self.core.reply(old, join_error(member.member_id, ErrorCode.REBALANCE_IN_PROGRESS))
        member.awaiting_join = join.request_id
        self.core.park(join.request_id, lambda error: join_error(member.member_id, error))

    def _replace_static_member(
        self, group: ClassicGroup, join: _Join, old_member_id: str, new_member_id: str
    ) -> None:
        old = group.member(old_member_id)
        fenced = ErrorCode.FENCED_INSTANCE_ID
        self.rebalance.complete_join_request(old, join_error(old_member_id, fenced))
        self.rebalance.complete_sync_request(old, sync_error(fenced))
        replacement = _Replacement(
            old_member_id,
            new_member_id,
            (old.protocols, old.rebalance_timeout_ms, old.session_timeout_ms),
            group.leader_id,
        )
        member = group.replace_static_member(
            join.request.group_instance_id or "", old_member_id, new_member_id
        )
        self.rebalance.reschedule_heartbeat(member, join.now_ms)
        self._update_member(member, join)
        if group.is_in(_STABLE):
            if group.protocol_name == group.select_protocol():
                return self._persist_replaced_static_member(group, join, replacement)
            return self.rebalance.maybe_prepare_rebalance_or_complete_join(group, join.now_ms)
        if group.is_in(_COMPLETING):
            # The leader may already be assigning to the old id: rebalance.
            return self.rebalance.prepare_rebalance(group, join.now_ms)
        return self.rebalance.maybe_complete_join_phase(group, join.now_ms)

    def _persist_replaced_static_member(
        self, group: ClassicGroup, join: _Join, replacement: _Replacement
    ) -> None:
        """Write the Stable group with the static member's new id, then answer it; undo the
        replacement if the write fails."""
        generation = group.generation_id
        assignment = {m.member_id: m.assignment for m in group.members.values()}
        record = self.rebalance.group_record(group, assignment)

        def done(error: ErrorCode, now_ms: int) -> None:
            member = group.members.get(replacement.new_member_id)
            unchanged = group.is_in(_STABLE) and group.generation_id == generation
            if member is None or member.awaiting_join != join.request_id or not unchanged:
                return  # a rebalance took over and will answer the member
            if error is ErrorCode.NONE:
                self.rebalance.complete_join_request(
                    member, self._replaced_static_member_response(group, join, replacement)
                )
                return
            member.awaiting_join = None
            member.protocols, member.rebalance_timeout_ms, member.session_timeout_ms = (
                replacement.previous
            )
            restored = group.replace_static_member(
                member.group_instance_id or "", replacement.new_member_id, replacement.old_member_id
            )
            self.rebalance.reschedule_heartbeat(restored, now_ms)
            response = JoinGroupResponse(
                error_code=append_error_to_group_error(error),
                generation_id=group.generation_id,
                protocol_type=group.protocol_type,
                protocol_name=group.protocol_name,
                leader=replacement.leader_id or "",
                member_id="",
            )
            self.core.reply(join.request_id, response)

        self.core.write([record], done)

    def _replaced_static_member_response(
        self, group: ClassicGroup, join: _Join, replacement: _Replacement
    ) -> JoinGroupResponse:
        response = self.rebalance.join_response(group, replacement.new_member_id)
        if join.api_version >= _JOIN_SKIP_ASSIGNMENT_FROM:
            # KIP-814: a static leader learns it leads but keeps the current assignment.
            is_leader = group.is_leader(replacement.new_member_id)
            return attrs.evolve(response, skip_assignment=is_leader)
        # Before v9 the old leader id is returned, so a replaced leader does not reassign
        # (a Stable group would not hand its new assignment out).
        return attrs.evolve(response, leader=replacement.leader_id or "", members=[])

    # -- SyncGroup ------------------------------------------------------------------------------

    def sync_group(
        self, request_id: RequestId, request: SyncGroupRequest, *, api_version: int, now_ms: int
    ) -> None:
        """Handle a SyncGroup (see the module docstring)."""
        if not request.group_id:
            return self.core.reply(request_id, sync_error(ErrorCode.INVALID_GROUP_ID))
        if api_version >= _SYNC_PROTOCOL_MANDATORY_FROM and (
            request.protocol_type is None or request.protocol_name is None
        ):
            return self.core.reply(request_id, sync_error(ErrorCode.INCONSISTENT_GROUP_PROTOCOL))
        group = self.core.groups.get(request.group_id)
        if group is None or group.is_in(_EMPTY):
            return self.core.reply(request_id, sync_error(ErrorCode.UNKNOWN_MEMBER_ID))
        error = self._validate_sync(group, request)
        if error is not ErrorCode.NONE:
            return self.core.reply(request_id, sync_error(error))
        if group.is_in(_PREPARING):
            return self.core.reply(request_id, sync_error(ErrorCode.REBALANCE_IN_PROGRESS))
        member = group.member(request.member_id)
        if group.is_in(_STABLE):
            group.pending_sync_members.discard(member.member_id)
            response = SyncGroupResponse(
                protocol_type=group.protocol_type,
                protocol_name=group.protocol_name,
                assignment=member.assignment,
            )
            self.core.reply(request_id, response)
            return self.rebalance.reschedule_heartbeat(member, now_ms)
        # CompletingRebalance: wait for the leader's assignment to be written.
        if member.awaiting_sync is not None:  # a newer SyncGroup replaces this one
            old, member.awaiting_sync = member.awaiting_sync, None
            self.core.reply(old, sync_error(ErrorCode.REBALANCE_IN_PROGRESS))
        member.awaiting_sync = request_id
        self.core.park(request_id, sync_error)
        group.pending_sync_members.discard(member.member_id)
        if not group.pending_sync_members:
            group.sync_timer = None
        if group.is_leader(member.member_id):
            self._store_leader_assignment(group, request)
        return None

    def _validate_sync(self, group: ClassicGroup, request: SyncGroupRequest) -> ErrorCode:
        if group.is_in(_DEAD):
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        error = validate_member(group, request.member_id, request.group_instance_id)
        if error is not ErrorCode.NONE:
            return error
        if request.generation_id != group.generation_id:
            return ErrorCode.ILLEGAL_GENERATION
        if _inconsistent(request.protocol_type, group.protocol_type) or _inconsistent(
            request.protocol_name, group.protocol_name
        ):
            return ErrorCode.INCONSISTENT_GROUP_PROTOCOL
        return ErrorCode.NONE

    def _store_leader_assignment(self, group: ClassicGroup, request: SyncGroupRequest) -> None:
        """Write the generation with the leader's assignment (members it left out get an empty
        one); once written, hand the assignment out and become Stable."""
        given = {a.member_id: bytes(a.assignment) for a in request.assignments}
        assignment = {m: given.get(m, b"") for m in group.members}
        generation = request.generation_id

        def done(error: ErrorCode, now_ms: int) -> None:
            if not (group.is_in(_COMPLETING) and group.generation_id == generation):
                return  # the group moved on while the write was in flight
            if error is ErrorCode.NONE:
                self.rebalance.set_and_propagate_assignment(group, assignment, now_ms)
                group.transition_to(_STABLE, now_ms)
                return
            mapped = append_error_to_group_error(error)
            self.rebalance.reset_and_propagate_assignment_error(group, mapped, now_ms)
            self.rebalance.maybe_prepare_rebalance_or_complete_join(group, now_ms)

        self.core.write([self.rebalance.group_record(group, assignment)], done)

    # -- Heartbeat ------------------------------------------------------------------------------

    def heartbeat(self, request_id: RequestId, request: HeartbeatRequest, *, now_ms: int) -> None:
        """Handle a Heartbeat: extend the member's session, say if a rebalance is under way."""
        self.core.reply(request_id, HeartbeatResponse(error_code=self._heartbeat(request, now_ms)))

    def _heartbeat(self, request: HeartbeatRequest, now_ms: int) -> ErrorCode:
        if not request.group_id:
            return ErrorCode.INVALID_GROUP_ID
        group = self.core.groups.get(request.group_id)
        if group is None:
            return ErrorCode.UNKNOWN_MEMBER_ID
        if group.is_in(_DEAD):
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        error = validate_member(group, request.member_id, request.group_instance_id)
        if error is not ErrorCode.NONE:
            return error
        if request.generation_id != group.generation_id:
            return ErrorCode.ILLEGAL_GENERATION
        if group.is_in(_EMPTY):
            return ErrorCode.UNKNOWN_MEMBER_ID
        self.rebalance.reschedule_heartbeat(group.member(request.member_id), now_ms)
        if group.is_in(_PREPARING):
            return ErrorCode.REBALANCE_IN_PROGRESS
        return ErrorCode.NONE

    # -- LeaveGroup -----------------------------------------------------------------------------

    def leave_group(
        self, request_id: RequestId, group_id: str, members: list[MemberIdentity], *, now_ms: int
    ) -> None:
        """Handle a LeaveGroup of ``members`` (one member for v0-v2 requests)."""
        if not group_id:
            response = LeaveGroupResponse(error_code=ErrorCode.INVALID_GROUP_ID)
            return self.core.reply(request_id, response)
        group = self.core.groups.get(group_id)
        if group is None:
            unknown = [_left(m, ErrorCode.UNKNOWN_MEMBER_ID) for m in members]
            return self.core.reply(request_id, LeaveGroupResponse(members=unknown))
        if group.is_in(_DEAD):
            response = LeaveGroupResponse(error_code=ErrorCode.COORDINATOR_NOT_AVAILABLE)
            return self.core.reply(request_id, response)
        results = [_left(m, self._leave_one(group, m)) for m in members]
        if any(r.error_code == ErrorCode.NONE for r in results):
            if group.is_in(_STABLE, _COMPLETING):
                self.rebalance.maybe_prepare_rebalance_or_complete_join(group, now_ms)
            elif group.is_in(_PREPARING):
                self.rebalance.maybe_complete_join_phase(group, now_ms)
        self.core.reply(request_id, LeaveGroupResponse(members=results))
        self.core.discard_group_if_unused(group_id)
        return None

    def _leave_one(self, group: ClassicGroup, identity: MemberIdentity) -> ErrorCode:
        if identity.member_id == "":  # an administrator removing a static member
            current = group.static_members.get(identity.group_instance_id or "")
            if identity.group_instance_id is None or current is None:
                return ErrorCode.UNKNOWN_MEMBER_ID
            self.rebalance.drop(group, group.member(current))
            return ErrorCode.NONE
        if identity.member_id in group.pending_members:
            group.remove(identity.member_id)
            return ErrorCode.NONE
        error = validate_member(group, identity.member_id, identity.group_instance_id)
        if error is ErrorCode.NONE:
            self.rebalance.drop(group, group.member(identity.member_id))
        return error


@attrs.frozen
class _Join:
    request_id: RequestId
    request: JoinGroupRequest
    api_version: int
    client_id: str
    client_host: str
    now_ms: int


@attrs.frozen
class _Replacement:
    old_member_id: str
    new_member_id: str
    previous: tuple[tuple[Protocol, ...], int, int]  # protocols, rebalance and session timeouts
    leader_id: str | None


def _protocols(request: JoinGroupRequest) -> tuple[Protocol, ...]:
    return tuple(Protocol(p.name, bytes(p.metadata)) for p in request.protocols)


def _with_rebalance_timeout(request: JoinGroupRequest, timeout_ms: int) -> JoinGroupRequest:
    return attrs.evolve(request, rebalance_timeout_ms=timeout_ms)


def _inconsistent(asked: str | None, current: str | None) -> bool:
    return asked is not None and current is not None and asked != current


def _left(identity: MemberIdentity, error: ErrorCode) -> MemberResponse:
    return MemberResponse(
        member_id=identity.member_id,
        group_instance_id=identity.group_instance_id,
        error_code=error,
    )


MEMBER_ID_PREFIX_BYTES_MAX = 255
"""How much of the client id (or group instance id) starts a new member id: a wire string may be
32,767 bytes long, and the member id made from it must still encode as one."""


def _member_id_prefix(name: str) -> str:
    """``name`` cut to ``MEMBER_ID_PREFIX_BYTES_MAX`` UTF-8 bytes, never inside a character."""
    encoded = name.encode("utf-8")
    if len(encoded) <= MEMBER_ID_PREFIX_BYTES_MAX:
        return name
    return encoded[:MEMBER_ID_PREFIX_BYTES_MAX].decode("utf-8", errors="ignore")
