"""JoinGroup: member ids, protocol and leader choice, join phases and their timers, limits."""

from __future__ import annotations

from replog.errors import ErrorCode
from replog.groups.config import GroupConfig
from replog.groups.group import GroupState

from .harness import REBALANCE_MS, SESSION_MS, Harness, subscription

DELAY_MS = 3_000


def test_first_join_from_v4_gets_member_id_required_and_a_member_id() -> None:
    h = Harness()
    response = h.reply(h.join(version=4, client_id="app"))
    assert response.error_code == ErrorCode.MEMBER_ID_REQUIRED
    assert response.member_id == "app-1"
    group = h.shard.group("g")
    assert group is not None and not group.members
    assert group.pending_members == {"app-1": h.now_ms + SESSION_MS}


def test_first_join_before_v4_adds_the_member_at_once() -> None:
    h = Harness()
    request_id = h.join(version=3)
    assert h.reply(request_id) is None
    assert list(h.shard.group("g").members) == ["client-1"]
    h.advance(DELAY_MS)
    response = h.reply(request_id)
    assert response.error_code == ErrorCode.NONE
    assert (response.member_id, response.leader, response.generation_id) == (
        "client-1",
        "client-1",
        1,
    )


def test_join_rejects_an_empty_group_id() -> None:
    h = Harness()
    assert h.reply(h.join(group_id="")).error_code == ErrorCode.INVALID_GROUP_ID
    assert h.shard.group_ids() == []


def test_join_rejects_session_timeouts_outside_the_configured_range() -> None:
    h = Harness(GroupConfig(session_timeout_ms_min=6_000, session_timeout_ms_max=60_000))
    assert h.reply(h.join(session_ms=5_999)).error_code == ErrorCode.INVALID_SESSION_TIMEOUT
    assert h.reply(h.join(session_ms=60_001)).error_code == ErrorCode.INVALID_SESSION_TIMEOUT
    assert h.reply(h.join(session_ms=60_000)).error_code == ErrorCode.MEMBER_ID_REQUIRED


def test_join_with_a_member_id_the_group_does_not_know_is_unknown_member() -> None:
    h = Harness()
    assert h.reply(h.join(member_id="ghost")).error_code == ErrorCode.UNKNOWN_MEMBER_ID
    assert h.shard.group_ids() == []
    h.stable_group(1)
    assert h.reply(h.join(member_id="ghost")).error_code == ErrorCode.UNKNOWN_MEMBER_ID


def test_join_with_another_protocol_type_or_no_common_protocol_is_inconsistent() -> None:
    h = Harness()
    h.stable_group(1)
    other_type = h.join(protocol_type="connect")
    assert h.reply(other_type).error_code == ErrorCode.INCONSISTENT_GROUP_PROTOCOL
    other_protocol = h.join(protocols=[("roundrobin", b"")])
    assert h.reply(other_protocol).error_code == ErrorCode.INCONSISTENT_GROUP_PROTOCOL
    no_protocols = h.join(group_id="fresh", protocols=[])
    assert h.reply(no_protocols).error_code == ErrorCode.INCONSISTENT_GROUP_PROTOCOL
    assert "fresh" not in h.shard.group_ids()  # nothing was created for it


def test_the_protocol_every_member_supports_and_most_prefer_is_selected() -> None:
    h = Harness()
    a, b, c = subscription("a"), subscription("b"), subscription("c")
    joins = [
        h.join_with_id(protocols=[("range", a), ("roundrobin", a), ("sticky", a)]),
        h.join_with_id(protocols=[("roundrobin", b), ("range", b)]),
        h.join_with_id(protocols=[("sticky", c), ("roundrobin", c), ("range", c)]),
    ]
    h.advance(REBALANCE_MS)
    responses = [h.reply(request_id) for _, request_id in joins]
    # "sticky" is not supported by the second member; roundrobin gets two votes of three.
    assert {r.protocol_name for r in responses} == {"roundrobin"}
    leader = responses[0]
    assert leader.leader == leader.member_id == joins[0][0]
    assert [(m.member_id, m.metadata) for m in leader.members] == [
        (joins[0][0], a),
        (joins[1][0], b),
        (joins[2][0], c),
    ]
    assert responses[1].members == [] and responses[1].leader == joins[0][0]


def test_initial_rebalance_waits_the_delay_and_extends_while_members_arrive() -> None:
    h = Harness()
    _, first = h.join_with_id()
    h.advance(DELAY_MS - 1)
    assert h.reply(first) is None
    _, second = h.join_with_id()  # arrives during the delay: one more delay
    h.advance(1)
    assert h.reply(first) is None
    h.advance(DELAY_MS - 1)
    assert h.reply(first) is None
    h.advance(1)
    assert h.reply(first).generation_id == h.reply(second).generation_id == 1


def test_initial_rebalance_extensions_stop_at_the_rebalance_timeout() -> None:
    h = Harness()
    _, first = h.join_with_id(rebalance_ms=7_000)
    start = h.now_ms
    while h.reply(first) is None:
        h.join_with_id(rebalance_ms=7_000)
        h.advance(1_000)
    # delay 3000, then 3000 more, then the last 1000 of the rebalance timeout
    assert h.now_ms - start == 7_000


def test_a_later_rebalance_ends_as_soon_as_every_member_rejoined() -> None:
    h = Harness()
    members, generation = h.stable_group(2)
    first = h.join(member_id=members[0])  # the leader rejoins: rebalance
    assert h.shard.group("g").state is GroupState.PREPARING_REBALANCE
    assert h.heartbeat(members[1], generation) == ErrorCode.REBALANCE_IN_PROGRESS
    second = h.join(member_id=members[1])
    assert h.reply(first).generation_id == h.reply(second).generation_id == generation + 1


def test_members_that_do_not_rejoin_in_time_are_removed_and_the_rest_go_on() -> None:
    h = Harness()
    members, generation = h.stable_group(3)
    rejoin = h.join(member_id=members[1], protocols=[("range", subscription("t", "u"))])
    for _ in range(6):  # the leader stays alive but never rejoins; the third member dies
        h.heartbeat(members[0], generation)
        h.advance(REBALANCE_MS // 6)
    response = h.reply(rejoin)
    assert response.generation_id == generation + 1
    assert response.leader == members[1]  # the old leader did not rejoin
    assert list(h.shard.group("g").members) == [members[1]]


def test_group_max_size_turns_away_new_members() -> None:
    h = Harness(GroupConfig(group_size_max=2))
    h.stable_group(2)
    third = h.reply(h.join())
    assert (third.error_code, third.member_id) == (ErrorCode.GROUP_MAX_SIZE_REACHED, "")
    assert len(h.shard.group("g").members) == 2
    assert not h.shard.group("g").pending_members


def test_group_max_size_counts_rejoined_members_while_preparing() -> None:
    h = Harness(GroupConfig(group_size_max=2))
    members, _ = h.stable_group(2)
    h.join(member_id=members[0])  # a rebalance: one member has rejoined so far
    newcomer = h.join(version=3)  # takes the last seat among the rejoined
    assert h.reply(newcomer) is None and h.shard.group("g").awaiting_join_count() == 2
    late = h.reply(h.join(member_id=members[1]))
    assert late.error_code == ErrorCode.GROUP_MAX_SIZE_REACHED
    assert members[1] not in h.shard.group("g").members


def test_a_member_id_handed_out_but_never_used_expires_after_the_session_timeout() -> None:
    h = Harness()
    members, generation = h.stable_group(1)
    pending = h.reply(h.join()).member_id
    rejoin = h.join(member_id=members[0])
    h.advance(SESSION_MS - 1)
    assert h.reply(rejoin) is None  # the rebalance waits for the pending member
    h.advance(1)
    assert h.reply(rejoin).generation_id == generation + 1
    assert pending not in h.shard.group("g").pending_members


def test_rejoining_while_completing_with_the_same_metadata_returns_the_generation() -> None:
    h = Harness()
    members, generation = h.stable_group(2)
    h.auto_write = False
    first, second = h.join(member_id=members[0]), h.join(member_id=members[1])
    generation = h.reply(first).generation_id
    assert h.shard.group("g").state is GroupState.COMPLETING_REBALANCE
    again = h.reply(h.join(member_id=members[0]))
    assert (again.generation_id, len(again.members)) == (generation, 2)
    follower = h.reply(h.join(member_id=members[1]))
    assert (follower.generation_id, follower.members) == (generation, [])
    assert h.reply(second) is not None


def test_rejoining_with_other_metadata_starts_a_rebalance() -> None:
    h = Harness()
    members, generation = h.stable_group(2)
    changed = h.join(member_id=members[1], protocols=[("range", subscription("t", "u"))])
    assert h.shard.group("g").state is GroupState.PREPARING_REBALANCE
    other = h.join(member_id=members[0])
    assert h.reply(changed).generation_id == h.reply(other).generation_id == generation + 1


def test_a_follower_rejoining_a_stable_group_unchanged_gets_the_generation_back() -> None:
    h = Harness()
    members, generation = h.stable_group(2)
    response = h.reply(h.join(member_id=members[1]))
    assert (response.generation_id, response.leader, response.members) == (
        generation,
        members[0],
        [],
    )
    assert h.shard.group("g").state is GroupState.STABLE


def test_a_stale_member_of_an_emptied_group_must_reset_its_id() -> None:
    h = Harness()
    members, _ = h.stable_group(1)
    h.advance(SESSION_MS)  # no heartbeats: the member is gone, the group Empty
    assert h.shard.group("g").state is GroupState.EMPTY
    assert h.reply(h.join(member_id=members[0])).error_code == ErrorCode.UNKNOWN_MEMBER_ID


def test_join_v0_uses_the_session_timeout_as_rebalance_timeout() -> None:
    h = Harness()
    h.join(version=0, session_ms=12_000, rebalance_ms=99_000)
    assert h.shard.group("g").member("client-1").rebalance_timeout_ms == 12_000


def test_a_newer_join_from_the_same_member_answers_the_older_one() -> None:
    h = Harness()
    member, first = h.join_with_id()
    second = h.join(member_id=member)
    assert h.reply(first).error_code == ErrorCode.REBALANCE_IN_PROGRESS
    h.advance(DELAY_MS)
    assert h.reply(second).error_code == ErrorCode.NONE


def test_a_new_member_waiting_too_long_in_a_join_phase_times_out() -> None:
    h = Harness(GroupConfig(new_member_join_timeout_ms=20_000))
    members, generation = h.stable_group(1)
    newcomer, waiting = h.join_with_id(rebalance_ms=60_000)
    for _ in range(4):  # the old member stays alive but never rejoins
        h.advance(5_000)
        assert h.heartbeat(members[0], generation) in (ErrorCode.REBALANCE_IN_PROGRESS, 0)
    assert h.reply(waiting).error_code == ErrorCode.UNKNOWN_MEMBER_ID
    assert newcomer not in h.shard.group("g").members


def test_a_client_id_of_32767_bytes_makes_a_member_id_that_still_encodes() -> None:
    """Only the first bytes of the client id start the member id; before, the whole 32,767-byte
    client id plus the suffix made a member id too long for a wire string."""
    h = Harness()
    response = h.reply(h.join(version=4, client_id="é" + "c" * 32_765))
    assert response.error_code == ErrorCode.MEMBER_ID_REQUIRED
    assert len(response.member_id.encode("utf-8")) <= 256 + len("-1")
    assert response.member_id.startswith("é") and response.member_id.endswith("-1")
