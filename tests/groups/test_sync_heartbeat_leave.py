"""SyncGroup, Heartbeat and LeaveGroup."""

from __future__ import annotations

from replog.errors import ErrorCode
from replog.groups.group import GroupState
from replog.groups.records import GroupRecord, decode_record
from replog.protocol.messages import (
    JoinGroupRequest,
    JoinGroupRequestProtocol,
    MemberIdentity,
    SyncGroupRequest,
)

from .harness import REBALANCE_MS, SESSION_MS, Harness

DELAY_MS = 3_000


def _join_request() -> JoinGroupRequest:
    return JoinGroupRequest(
        group_id="g",
        session_timeout_ms=SESSION_MS,
        rebalance_timeout_ms=REBALANCE_MS,
        protocol_type="consumer",
        protocols=[JoinGroupRequestProtocol(name="range", metadata=b"")],
    )


def _completing(h: Harness, size: int) -> tuple[list[str], int]:
    """``size`` members through the join phase (CompletingRebalance). Leader first."""
    joins = [h.join_with_id() for _ in range(size)]
    while any(h.reply(r) is None for _, r in joins):
        h.advance(DELAY_MS)
    first = h.reply(joins[0][1])
    members = [first.leader] + [m for m, _ in joins if m != first.leader]
    return members, first.generation_id


def test_followers_wait_for_the_leaders_assignment_which_is_written_first() -> None:
    h = Harness(auto_write=False)
    members, generation = _completing(h, 3)
    follower = h.sync(members[1], generation)
    assert h.reply(follower) is None
    leader = h.sync(members[0], generation, assignments={m: m.encode() for m in members})
    assert h.reply(leader) is None and len(h.pending) == 1  # nothing before the write
    h.complete_writes()
    assert h.reply(follower).assignment == members[1].encode()
    assert h.reply(leader).assignment == members[0].encode()
    assert h.reply(leader).protocol_name == "range"
    assert h.shard.group("g").state is GroupState.STABLE
    record = decode_record(*h.log[-1])
    assert isinstance(record, GroupRecord) and record.value is not None
    assert record.value.generation == generation
    assert [m.assignment for m in record.value.members] == [m.encode() for m in members]
    late = h.sync(members[2], generation)  # a Stable group answers at once
    assert h.reply(late).assignment == members[2].encode()


def test_members_the_leader_left_out_get_an_empty_assignment() -> None:
    h = Harness()
    members, generation = _completing(h, 2)
    h.sync(members[0], generation, assignments={members[0]: b"all", "stranger": b"x"})
    assert h.reply(h.sync(members[1], generation)).assignment == b""


def test_sync_errors() -> None:
    h = Harness()
    members, generation = _completing(h, 1)
    assert h.reply(h.sync(members[0], generation + 1)).error_code == ErrorCode.ILLEGAL_GENERATION
    assert h.reply(h.sync("ghost", generation)).error_code == ErrorCode.UNKNOWN_MEMBER_ID
    unknown_group = h.sync(members[0], generation, group_id="other")
    assert h.reply(unknown_group).error_code == ErrorCode.UNKNOWN_MEMBER_ID
    empty_id = h.sync(members[0], generation, group_id="")
    assert h.reply(empty_id).error_code == ErrorCode.INVALID_GROUP_ID
    for protocol_type, protocol_name in [("consumer", "roundrobin"), ("connect", "range")]:
        request = SyncGroupRequest(
            group_id="g",
            generation_id=generation,
            member_id=members[0],
            protocol_type=protocol_type,
            protocol_name=protocol_name,
        )
        request_id = h.new_id()
        h.absorb(h.shard.on_sync_group(request_id, request, api_version=5, now_ms=h.now_ms))
        assert h.reply(request_id).error_code == ErrorCode.INCONSISTENT_GROUP_PROTOCOL
    missing = SyncGroupRequest(group_id="g", generation_id=generation, member_id=members[0])
    request_id = h.new_id()
    h.absorb(h.shard.on_sync_group(request_id, missing, api_version=5, now_ms=h.now_ms))
    assert h.reply(request_id).error_code == ErrorCode.INCONSISTENT_GROUP_PROTOCOL


def test_sync_while_preparing_is_rebalance_in_progress() -> None:
    h = Harness()
    members, generation = h.stable_group(2)
    h.join(member_id=members[0])
    assert h.reply(h.sync(members[1], generation)).error_code == ErrorCode.REBALANCE_IN_PROGRESS


def test_a_failed_assignment_write_answers_the_error_and_rebalances() -> None:
    h = Harness(auto_write=False)
    members, generation = _completing(h, 2)
    follower = h.sync(members[1], generation)
    leader = h.sync(members[0], generation, assignments={m: b"x" for m in members})
    h.complete_writes(ErrorCode.NOT_LEADER_OR_FOLLOWER)
    assert h.reply(follower).error_code == ErrorCode.NOT_COORDINATOR
    assert h.reply(leader).error_code == ErrorCode.NOT_COORDINATOR
    assert h.shard.group("g").state is GroupState.PREPARING_REBALANCE
    assert h.log == []


def test_an_assignment_written_after_the_group_moved_on_changes_nothing() -> None:
    h = Harness(auto_write=False)
    members, generation = _completing(h, 2)
    follower = h.sync(members[1], generation)
    h.sync(members[0], generation, assignments={m: b"x" for m in members})
    # A new member while the write is in flight: a new rebalance.
    h.absorb(
        h.shard.on_join_group(
            h.new_id(),
            _join_request(),
            api_version=3,
            client_id="c",
            client_host="h",
            now_ms=h.now_ms,
        )
    )
    assert h.reply(follower).error_code == ErrorCode.REBALANCE_IN_PROGRESS
    h.complete_writes()
    group = h.shard.group("g")
    assert group.state is GroupState.PREPARING_REBALANCE
    assert all(m.assignment == b"" for m in group.members.values())


def test_members_that_never_sync_are_removed_after_the_rebalance_timeout() -> None:
    h = Harness()
    members, generation = _completing(h, 2)
    h.sync(members[0], generation, assignments={m: b"x" for m in members})
    for _ in range(6):  # both stay alive; members[1] never sends SyncGroup
        assert h.heartbeat(members[0], generation) == ErrorCode.NONE
        assert h.heartbeat(members[1], generation) == ErrorCode.NONE
        h.advance(REBALANCE_MS // 6)
    group = h.shard.group("g")
    assert list(group.members) == [members[0]]
    assert group.state is GroupState.PREPARING_REBALANCE
    assert h.heartbeat(members[0], generation) == ErrorCode.REBALANCE_IN_PROGRESS


def test_heartbeat_answers() -> None:
    h = Harness()
    members, generation = _completing(h, 2)
    assert h.heartbeat(members[0], generation) == ErrorCode.NONE  # CompletingRebalance
    assert h.heartbeat(members[0], generation + 1) == ErrorCode.ILLEGAL_GENERATION
    assert h.heartbeat("ghost", generation) == ErrorCode.UNKNOWN_MEMBER_ID
    assert h.heartbeat(members[0], generation, group_id="none") == ErrorCode.UNKNOWN_MEMBER_ID
    assert h.heartbeat(members[0], generation, group_id="") == ErrorCode.INVALID_GROUP_ID
    h.sync(members[0], generation, assignments={})
    assert h.heartbeat(members[0], generation) == ErrorCode.NONE  # Stable
    h.join(member_id=members[0])
    assert h.heartbeat(members[1], generation) == ErrorCode.REBALANCE_IN_PROGRESS


def test_heartbeats_keep_a_member_and_silence_removes_it() -> None:
    h = Harness()
    members, generation = h.stable_group(2)
    for _ in range(5):
        h.advance(SESSION_MS - 1)
        assert h.heartbeat(members[0], generation) == ErrorCode.NONE
        assert h.heartbeat(members[1], generation) == ErrorCode.NONE
    h.advance(SESSION_MS - 1)
    assert h.heartbeat(members[0], generation) == ErrorCode.NONE
    h.advance(1)  # members[1] is silent for a whole session
    group = h.shard.group("g")
    assert list(group.members) == [members[0]]
    assert group.state is GroupState.PREPARING_REBALANCE


def test_members_waiting_for_a_join_answer_do_not_time_out() -> None:
    h = Harness()
    members, generation = h.stable_group(2)
    rejoin = h.join(member_id=members[0])
    for _ in range(6):
        h.heartbeat(members[1], generation)
        h.advance(REBALANCE_MS // 6 - 1)
    assert members[0] in h.shard.group("g").members and h.reply(rejoin) is None


def test_leave_group_removes_members_and_rebalances_the_rest() -> None:
    h = Harness()
    members, generation = h.stable_group(3)
    response = h.leave(MemberIdentity(member_id=members[2]), MemberIdentity(member_id="ghost"))
    assert response.error_code == ErrorCode.NONE
    assert [(m.member_id, m.error_code) for m in response.members] == [
        (members[2], ErrorCode.NONE),
        ("ghost", ErrorCode.UNKNOWN_MEMBER_ID),
    ]
    assert h.shard.group("g").state is GroupState.PREPARING_REBALANCE
    first, second = h.join(member_id=members[0]), h.join(member_id=members[1])
    assert h.reply(first).generation_id == h.reply(second).generation_id == generation + 1


def test_the_last_member_leaving_empties_the_group_and_writes_it() -> None:
    h = Harness()
    members, generation = h.stable_group(1)
    h.leave(MemberIdentity(member_id=members[0]))
    group = h.shard.group("g")
    assert group.state is GroupState.EMPTY and group.generation_id == generation + 1
    record = decode_record(*h.log[-1])
    assert isinstance(record, GroupRecord) and record.value is not None
    assert (record.value.generation, record.value.members) == (generation + 1, [])
    assert record.value.current_state_timestamp == h.now_ms


def test_leave_group_of_an_unknown_group_or_a_pending_member() -> None:
    h = Harness()
    response = h.leave(MemberIdentity(member_id="m"), group_id="nope")
    assert [m.error_code for m in response.members] == [ErrorCode.UNKNOWN_MEMBER_ID]
    assert h.leave(group_id="").error_code == ErrorCode.INVALID_GROUP_ID
    pending = h.reply(h.join()).member_id
    assert h.leave(MemberIdentity(member_id=pending)).members[0].error_code == ErrorCode.NONE
    assert h.shard.group("g") is None  # nothing left: the never-used group is forgotten


def test_a_member_leaving_while_waiting_for_its_sync_is_answered() -> None:
    h = Harness(auto_write=False)
    members, generation = _completing(h, 2)
    waiting = h.sync(members[1], generation)
    h.leave(MemberIdentity(member_id=members[1]))
    assert h.reply(waiting).error_code == ErrorCode.UNKNOWN_MEMBER_ID
