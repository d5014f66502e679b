"""DeleteGroups, ListGroups, DescribeGroups; loading from the log, unloading."""

from __future__ import annotations

import struct

import pytest

from replog.errors import ErrorCode, InvariantError
from replog.groups.config import GroupConfig
from replog.groups.group import GroupState
from replog.groups.shard import GroupCoordinatorShard
from replog.protocol.messages import MemberIdentity

from .harness import Harness, counter_suffixes


def _delete_groups(h: Harness, *group_ids: str) -> int:
    request_id = h.new_id()
    h.absorb(h.shard.on_delete_groups(request_id, list(group_ids), now_ms=h.now_ms))
    return request_id


def _results(h: Harness, request_id: int) -> list[tuple[str, int]]:
    return [(r.group_id, r.error_code) for r in h.reply(request_id).results]


def test_delete_groups_removes_empty_groups_and_their_offsets() -> None:
    h = Harness()
    h.commit({("t", 0): 1, ("u", 3): 2}, group_id="empty")
    h.stable_group(1, group_id="busy")
    request_id = _delete_groups(h, "empty", "busy", "unknown")
    assert _results(h, request_id) == [
        ("empty", ErrorCode.NONE),
        ("busy", ErrorCode.NON_EMPTY_GROUP),
        ("unknown", ErrorCode.GROUP_ID_NOT_FOUND),
    ]
    assert h.shard.group("empty") is None and h.fetch("empty") == {}
    reloaded = h.reload()
    assert reloaded.group("empty") is None and reloaded.committed_offsets("empty") == {}


def test_a_group_being_deleted_is_dead_until_the_tombstones_are_written() -> None:
    h = Harness(auto_write=False)
    h.commit({("t", 0): 1})
    h.complete_writes()
    request_id = _delete_groups(h, "g")
    assert h.reply(request_id) is None
    assert h.shard.group("g").state is GroupState.DEAD
    assert h.reply(h.join()).error_code == ErrorCode.COORDINATOR_NOT_AVAILABLE
    assert h.shard.describe_groups(["g"])[0].group_state == "Dead"
    h.complete_writes()
    assert _results(h, request_id) == [("g", ErrorCode.NONE)]
    assert h.shard.group("g") is None


def test_a_failed_deletion_leaves_the_group_as_it_was() -> None:
    h = Harness(auto_write=False)
    h.commit({("t", 0): 1})
    h.complete_writes()
    became_empty = h.shard.group("g").state_timestamp_ms
    request_id = _delete_groups(h, "g")
    h.advance(1_000)
    h.complete_writes(ErrorCode.REQUEST_TIMED_OUT)
    assert _results(h, request_id) == [("g", ErrorCode.COORDINATOR_NOT_AVAILABLE)]
    group = h.shard.group("g")
    assert group.state is GroupState.EMPTY and group.state_timestamp_ms == became_empty
    assert h.fetch() == {("t", 0): (1, 0)}


def test_list_groups_filters_by_state_case_insensitively() -> None:
    h = Harness()
    h.stable_group(1, group_id="stable")
    h.commit({("t", 0): 1}, group_id="simple")
    listed = {(g.group_id, g.protocol_type, g.group_state) for g in h.shard.list_groups([])}
    assert listed == {("stable", "consumer", "Stable"), ("simple", "", "Empty")}
    only_empty = h.shard.list_groups([" EMPTY"])
    assert [g.group_id for g in only_empty] == ["simple"]


def test_describe_groups_shows_metadata_only_for_stable_groups() -> None:
    h = Harness()
    members, _ = h.stable_group(2)
    stable = h.shard.describe_groups(["g", "missing"])
    assert (stable[0].group_state, stable[0].protocol_type, stable[0].protocol_data) == (
        "Stable",
        "consumer",
        "range",
    )
    assert [m.member_id for m in stable[0].members] == members
    assert all(m.member_metadata and m.member_assignment for m in stable[0].members)
    assert (stable[1].group_id, stable[1].group_state, stable[1].error_code) == (
        "missing",
        "Dead",
        0,
    )
    h.join(member_id=members[0])
    preparing = h.shard.describe_groups(["g"])[0]
    assert (preparing.group_state, preparing.protocol_data) == ("PreparingRebalance", "")
    assert all(m.member_metadata == b"" for m in preparing.members)


def test_reload_rebuilds_stable_groups_and_offsets() -> None:
    h = Harness()
    members, generation = h.stable_group(3)
    h.commit({("t", 0): 7, ("t", 1): 9}, member_id=members[1], generation=generation)
    h.commit({("x", 0): 1}, group_id="simple")
    live = h.shard.group("g")
    live_members = {
        m.member_id: (m.assignment, m.metadata("range"), m.session_timeout_ms)
        for m in live.members.values()
    }
    reloaded = h.reload()
    group = reloaded.group("g")
    assert group.state is GroupState.STABLE
    assert (group.generation_id, group.leader_id, group.protocol_name, group.protocol_type) == (
        live.generation_id,
        live.leader_id,
        "range",
        "consumer",
    )
    assert {
        m.member_id: (m.assignment, m.metadata("range"), m.session_timeout_ms)
        for m in group.members.values()
    } == live_members
    assert h.fetch() == {("t", 0): (7, 0), ("t", 1): (9, 0)}
    assert h.fetch("simple") == {("x", 0): (1, 0)}
    simple = reloaded.group("simple")
    assert simple.state is GroupState.EMPTY and simple.generation_id == 0
    # The loaded members' sessions start now; they sync and heartbeat as before.
    assert h.heartbeat(members[0], generation) == ErrorCode.NONE
    assert h.reply(h.sync(members[1], generation)).assignment == live_members[members[1]][0]


def test_reload_keeps_when_an_empty_group_became_empty() -> None:
    h = Harness()
    members, _ = h.stable_group(1)
    h.leave(MemberIdentity(member_id=members[0]))
    became_empty = h.shard.group("g").state_timestamp_ms
    h.advance(5_000)
    assert h.reload().group("g").state_timestamp_ms == became_empty


def test_unload_answers_every_waiting_request_not_coordinator() -> None:
    h = Harness(auto_write=False)
    _, waiting_join = h.join_with_id()
    commit = h.commit({("t", 0): 1}, group_id="other")
    effects = h.shard.unload()
    assert {r.request_id for r in effects.replies} == {waiting_join, commit}
    assert effects.reply_to(waiting_join).error_code == ErrorCode.NOT_COORDINATOR
    commit_reply = effects.reply_to(commit)
    assert commit_reply.topics[0].partitions[0].error_code == ErrorCode.NOT_COORDINATOR
    with pytest.raises(InvariantError, match="unloaded"):
        h.shard.on_tick(h.now_ms)


def test_a_loaded_group_over_the_size_limit_rebalances() -> None:
    h = Harness()
    h.stable_group(3)
    shard, _ = GroupCoordinatorShard.load(
        0,
        h.log,
        config=GroupConfig(group_size_max=2),
        member_id_suffix=lambda: next(counter_suffixes()),
        now_ms=h.now_ms,
    )
    assert shard.group("g").state is GroupState.PREPARING_REBALANCE


def test_unknown_records_are_counted_and_skipped() -> None:
    h = Harness()
    h.commit({("t", 0): 1})
    future_key = struct.pack(">h", 5) + b"\x00\x01g"
    _, summary = GroupCoordinatorShard.load(
        0,
        [*h.log, (future_key, b"whatever")],
        config=h.config,
        member_id_suffix=lambda: "x",
        now_ms=h.now_ms,
    )
    assert (summary.records_read, summary.offsets_loaded, summary.unknown_records_skipped) == (
        2,
        1,
        1,
    )


def test_successes_must_be_reported_in_write_order() -> None:
    h = Harness(auto_write=False)
    h.commit({("t", 0): 1})
    h.commit({("t", 0): 2})
    second = h.pending[1]
    with pytest.raises(InvariantError, match="before an earlier write"):
        h.shard.on_write_complete(second.write_id, ErrorCode.NONE, now_ms=h.now_ms)


def test_failures_may_be_reported_out_of_order() -> None:
    h = Harness(auto_write=False)
    first = h.commit({("t", 0): 1})
    second = h.commit({("t", 0): 2})
    write = h.pending.pop(1)
    h.absorb(h.shard.on_write_complete(write.write_id, ErrorCode.NOT_ENOUGH_REPLICAS, now_ms=0))
    assert h.reply(second) is not None and h.reply(first) is None
    h.complete_writes()
    assert h.fetch() == {("t", 0): (1, 0)}
