"""The rebalance machinery of classic groups: starting and ending the join phase, handing out
the leader's assignment, removing members, and the timers that drive all of it.

Rules (Kafka's GroupMetadataManager for classic groups):

- A rebalance starts from Empty, Stable or CompletingRebalance (members waiting for SyncGroup
  get REBALANCE_IN_PROGRESS and must rejoin). From Empty it is the *initial* rebalance: it waits
  ``initial_rebalance_delay_ms`` and extends by up to that much again, within the rebalance
  timeout, while new members keep joining; it never ends early. Otherwise the join phase ends
  when every member has rejoined, or at the group's rebalance timeout.
- Ending the join phase drops dynamic members that did not rejoin (static ones stay), keeps the
  leader if it rejoined or elects one that did, and starts the next generation: every waiting
  member gets its JoinGroup answer (the leader with all members' metadata), a session deadline,
  and must send SyncGroup within the rebalance timeout or be removed. With no member left the
  group becomes Empty and that is written to the log. If members remain but none rejoined, the
  phase waits another rebalance timeout.
- The leader's SyncGroup writes the generation's metadata and assignments; once written, every
  member waiting in SyncGroup gets its assignment and the group is Stable. A failed write
  answers them with the error and starts over.
- A member whose session deadline passes is removed, unless it is waiting for a join or sync
  answer (and is not new: new members time out after ``new_member_join_timeout_ms``).
"""

from __future__ import annotations

from replog.errors import ErrorCode, invariant, unreachable
from replog.groups.core import ShardCore
from replog.groups.group import ClassicGroup, GroupState, JoinTimer, Member, SyncTimer
from replog.groups.records import GroupMetadataValue, GroupRecord, MemberMetadata
from replog.protocol.messages import JoinGroupResponse, JoinGroupResponseMember, SyncGroupResponse

__all__ = ["Rebalance", "append_error_to_group_error", "join_error", "sync_error"]

_EMPTY = GroupState.EMPTY
_PREPARING = GroupState.PREPARING_REBALANCE
_COMPLETING = GroupState.COMPLETING_REBALANCE
_STABLE = GroupState.STABLE
_DEAD = GroupState.DEAD


def join_error(member_id: str, error: ErrorCode) -> JoinGroupResponse:
    """A JoinGroup answer carrying only an error (no generation, protocol or leader)."""
    return JoinGroupResponse(error_code=error, member_id=member_id, protocol_name=None)


def sync_error(error: ErrorCode) -> SyncGroupResponse:
    """A SyncGroup answer carrying only an error."""
    return SyncGroupResponse(error_code=error)


def append_error_to_group_error(error: ErrorCode) -> ErrorCode:
    """What a failed group-metadata write tells the client (Kafka's mapping)."""
    if error in (
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        ErrorCode.NOT_ENOUGH_REPLICAS,
        ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND,
        ErrorCode.REQUEST_TIMED_OUT,
    ):
        return ErrorCode.COORDINATOR_NOT_AVAILABLE
    if error in (ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.KAFKA_STORAGE_ERROR):
        return ErrorCode.NOT_COORDINATOR
    if error in (
        ErrorCode.MESSAGE_TOO_LARGE,
        ErrorCode.RECORD_LIST_TOO_LARGE,
        ErrorCode.INVALID_FETCH_SIZE,
    ):
        return ErrorCode.UNKNOWN_SERVER_ERROR
    return error


class Rebalance:
    """Join phases, assignment propagation, member removal and the group timers."""

    def __init__(self, core: ShardCore) -> None:
        self.core = core

    # -- responses ------------------------------------------------------------------------------

    def join_response(self, group: ClassicGroup, member_id: str) -> JoinGroupResponse:
        """The current generation as ``member_id`` sees it (the leader also gets members)."""
        members = self.member_list(group) if group.is_leader(member_id) else []
        return JoinGroupResponse(
            generation_id=group.generation_id,
            protocol_type=group.protocol_type,
            protocol_name=group.protocol_name,
            leader=group.leader_id or "",
            member_id=member_id,
            members=members,
        )

    def member_list(self, group: ClassicGroup) -> list[JoinGroupResponseMember]:
        """Every member with its metadata for the selected protocol (for the leader)."""
        invariant(group.protocol_name is not None, f"{group.group_id}: no protocol selected")
        name = group.protocol_name or ""
        return [
            JoinGroupResponseMember(
                member_id=m.member_id,
                group_instance_id=m.group_instance_id,
                metadata=m.metadata(name),
            )
            for m in group.members.values()
        ]

    def complete_join_request(self, member: Member, response: JoinGroupResponse) -> bool:
        """Answer the member's parked JoinGroup, if it has one."""
        if member.awaiting_join is None:
            return False
        request_id, member.awaiting_join = member.awaiting_join, None
        self.core.reply(request_id, response)
        return True

    def complete_sync_request(self, member: Member, response: SyncGroupResponse) -> bool:
        """Answer the member's parked SyncGroup, if it has one."""
        if member.awaiting_sync is None:
            return False
        request_id, member.awaiting_sync = member.awaiting_sync, None
        self.core.reply(request_id, response)
        return True

    # -- the join phase -------------------------------------------------------------------------

    def maybe_prepare_rebalance_or_complete_join(self, group: ClassicGroup, now_ms: int) -> None:
        """Start a rebalance if the state allows one, else try to end the join phase."""
        if group.can_rebalance():
            self.prepare_rebalance(group, now_ms)
        else:
            self.maybe_complete_join_phase(group, now_ms)

    def prepare_rebalance(self, group: ClassicGroup, now_ms: int) -> None:
        """Enter PreparingRebalance (see the module rules)."""
        if group.is_in(_COMPLETING):
            rebalancing = ErrorCode.REBALANCE_IN_PROGRESS
            self.reset_and_propagate_assignment_error(group, rebalancing, now_ms)
        group.pending_sync_members.clear()
        group.sync_timer = None
        initial = group.is_in(_EMPTY)
        if initial:
            delay_ms = self.core.config.initial_rebalance_delay_ms
            remaining_ms = max(group.rebalance_timeout_ms() - delay_ms, 0)
            group.join_timer = JoinTimer(now_ms + delay_ms, True, delay_ms, remaining_ms)
        group.transition_to(_PREPARING, now_ms)
        if not initial:
            if group.has_all_members_joined():
                self.complete_join(group, now_ms)
            else:
                group.join_timer = JoinTimer(now_ms + group.rebalance_timeout_ms(), False)

    def maybe_complete_join_phase(self, group: ClassicGroup, now_ms: int) -> None:
        """End the join phase if everyone rejoined (never during the initial rebalance)."""
        if (
            group.is_in(_PREPARING)
            and group.previous_state is not _EMPTY
            and group.has_all_members_joined()
        ):
            self.complete_join(group, now_ms)

    def on_join_timer(self, group: ClassicGroup, now_ms: int) -> None:
        """The join timer fired: extend the initial rebalance if members keep arriving, else
        end the join phase."""
        timer = group.join_timer
        if timer is None:
            unreachable(f"{group.group_id}: no join timer")
        group.join_timer = None
        if timer.initial and group.new_member_added and timer.remaining_ms != 0:
            group.new_member_added = False
            delay_ms = min(self.core.config.initial_rebalance_delay_ms, timer.remaining_ms)
            remaining_ms = max(timer.remaining_ms - timer.delay_ms, 0)
            group.join_timer = JoinTimer(now_ms + delay_ms, True, delay_ms, remaining_ms)
            return
        self.complete_join(group, now_ms)

    def complete_join(self, group: ClassicGroup, now_ms: int) -> None:
        """End the join phase (see the module rules)."""
        group.join_timer = None
        for member in [m for m in group.members.values() if m.awaiting_join is None]:
            if not member.is_static:
                self.drop(group, member)
        if group.is_in(_DEAD):
            return
        if not group.maybe_elect_new_joined_leader() and group.members:
            group.join_timer = JoinTimer(now_ms + group.rebalance_timeout_ms(), False)
            return
        group.init_next_generation(now_ms, self.core.subscription_reader)
        if group.is_in(_EMPTY):
            self.core.write([self.group_record(group, {})], _ignore_failure)
            return
        for member in group.members.values():
            self.complete_join_request(member, self.join_response(group, member.member_id))
            self.reschedule_heartbeat(member, now_ms)
            member.is_new = False
            group.pending_sync_members.add(member.member_id)
        group.sync_timer = SyncTimer(now_ms + group.rebalance_timeout_ms(), group.generation_id)

    def on_sync_timer(self, group: ClassicGroup, now_ms: int) -> None:
        """Members of the generation that never sent SyncGroup are removed; rebalance."""
        timer = group.sync_timer
        group.sync_timer = None
        if timer is None or timer.generation_id != group.generation_id:
            return
        if group.is_in(_COMPLETING, _STABLE) and group.pending_sync_members:
            for member_id in sorted(group.pending_sync_members):
                self.drop(group, group.member(member_id))
            self.prepare_rebalance(group, now_ms)

    # -- assignments ----------------------------------------------------------------------------

    def set_and_propagate_assignment(
        self, group: ClassicGroup, assignment: dict[str, bytes], now_ms: int
    ) -> None:
        """Give every member its assignment and answer the SyncGroups waiting for it."""
        invariant(group.is_in(_COMPLETING), f"{group.group_id}: not CompletingRebalance")
        for member in group.members.values():
            member.assignment = assignment.get(member.member_id, b"")
        self._propagate(group, ErrorCode.NONE, now_ms)

    def reset_and_propagate_assignment_error(
        self, group: ClassicGroup, error: ErrorCode, now_ms: int
    ) -> None:
        """Clear every assignment and answer the waiting SyncGroups with ``error``."""
        invariant(group.is_in(_COMPLETING), f"{group.group_id}: not CompletingRebalance")
        for member in group.members.values():
            member.assignment = b""
        self._propagate(group, error, now_ms)

    def _propagate(self, group: ClassicGroup, error: ErrorCode, now_ms: int) -> None:
        ok = error is ErrorCode.NONE
        for member in group.members.values():
            response = SyncGroupResponse(
                error_code=error,
                protocol_type=group.protocol_type if ok else None,
                protocol_name=group.protocol_name if ok else None,
                assignment=member.assignment,
            )
            if self.complete_sync_request(member, response):
                self.reschedule_heartbeat(member, now_ms)

    def group_record(self, group: ClassicGroup, assignment: dict[str, bytes]) -> GroupRecord:
        """The group's metadata record with ``assignment`` for its members."""
        members = []
        for member in group.members.values():
            invariant(member.member_id in assignment, f"no assignment for {member.member_id}")
            members.append(
                MemberMetadata(
                    member_id=member.member_id,
                    group_instance_id=member.group_instance_id,
                    client_id=member.client_id,
                    client_host=member.client_host,
                    rebalance_timeout=member.rebalance_timeout_ms,
                    session_timeout=member.session_timeout_ms,
                    subscription=member.metadata(group.protocol_name or ""),
                    assignment=assignment[member.member_id],
                )
            )
        value = GroupMetadataValue(
            protocol_type=group.protocol_type or "",
            generation=group.generation_id,
            protocol=group.protocol_name,
            leader=group.leader_id,
            current_state_timestamp=(
                -1 if group.state_timestamp_ms is None else group.state_timestamp_ms
            ),
            members=members,
        )
        return GroupRecord(group.group_id, value)

    # -- members --------------------------------------------------------------------------------

    def reschedule_heartbeat(
        self, member: Member, now_ms: int, timeout_ms: int | None = None
    ) -> None:
        """The member's session now ends ``timeout_ms`` (default: its session timeout) away."""
        timeout = member.session_timeout_ms if timeout_ms is None else timeout_ms
        member.heartbeat_deadline_ms = now_ms + timeout

    def remove_member_and_update_group(
        self, group: ClassicGroup, member: Member, now_ms: int
    ) -> None:
        """Remove ``member`` (its waiting JoinGroup gets UNKNOWN_MEMBER_ID) and rebalance or
        finish the join phase as the state requires."""
        self.drop(group, member)
        if group.is_in(_STABLE, _COMPLETING):
            self.maybe_prepare_rebalance_or_complete_join(group, now_ms)
        elif group.is_in(_PREPARING) and group.has_all_members_joined():
            self.complete_join(group, now_ms)

    def drop(self, group: ClassicGroup, member: Member) -> None:
        """Take ``member`` out, answering whatever it was waiting for."""
        self.complete_join_request(member, join_error("", ErrorCode.UNKNOWN_MEMBER_ID))
        self.complete_sync_request(member, sync_error(ErrorCode.UNKNOWN_MEMBER_ID))
        member.heartbeat_deadline_ms = None
        group.remove(member.member_id)

    def on_heartbeat_deadline(self, group: ClassicGroup, member: Member, now_ms: int) -> None:
        """The member's session deadline passed."""
        member.heartbeat_deadline_ms = None
        if not member.has_satisfied_heartbeat():
            self.remove_member_and_update_group(group, member, now_ms)

    def on_pending_member_deadline(self, group: ClassicGroup, member_id: str, now_ms: int) -> None:
        """A member id handed out with MEMBER_ID_REQUIRED was never used to join."""
        group.remove(member_id)
        if group.is_in(_PREPARING) and group.has_all_members_joined():
            self.complete_join(group, now_ms)


def _ignore_failure(error: ErrorCode, now_ms: int) -> None:
    """An Empty group's metadata failed to be written. Nothing to undo: the previous generation
    in the log has no live members and will time out if this broker fails (Kafka's reasoning)."""
