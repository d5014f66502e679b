"""Static membership (KIP-345): a group instance id keeps its place across restarts."""

from __future__ import annotations

from replog.errors import ErrorCode
from replog.groups.group import GroupState
from replog.protocol.messages import MemberIdentity

from .harness import REBALANCE_MS, SESSION_MS, Harness, subscription

DELAY_MS = 3_000


def _stable_static_group(h: Harness, *instances: str) -> tuple[dict[str, str], int]:
    """Members for ``instances``, Stable. Returns ({instance: member id}, generation)."""
    joins = {i: h.join(instance_id=i, client_id=f"c-{i}") for i in instances}
    while any(h.reply(r) is None for r in joins.values()):
        h.advance(DELAY_MS)
    ids = {i: h.reply(r).member_id for i, r in joins.items()}
    generation = h.reply(joins[instances[0]]).generation_id
    leader = h.reply(joins[instances[0]]).leader
    leader_instance = next(i for i, m in ids.items() if m == leader)
    h.sync(
        leader,
        generation,
        assignments={m: f"a-{i}".encode() for i, m in ids.items()},
        instance_id=leader_instance,
    )
    for instance, member_id in ids.items():
        if instance != leader_instance:
            h.sync(member_id, generation, instance_id=instance)
    assert h.shard.group("g").state is GroupState.STABLE
    return ids, generation


def test_a_static_member_joins_without_member_id_required() -> None:
    h = Harness()
    request_id = h.join(instance_id="i-1", version=5)
    assert h.reply(request_id) is None  # waiting in the join phase, not MEMBER_ID_REQUIRED
    h.advance(DELAY_MS)
    response = h.reply(request_id)
    assert response.member_id == "i-1-1"
    assert h.shard.group("g").static_members == {"i-1": "i-1-1"}


def test_a_restarted_static_member_replaces_its_old_id_without_a_rebalance() -> None:
    h = Harness()
    ids, generation = _stable_static_group(h, "i-1", "i-2")
    records_before = len(h.log)
    response = h.reply(h.join(instance_id="i-2"))
    assert response.error_code == ErrorCode.NONE
    assert response.generation_id == generation
    new_id = response.member_id
    assert new_id != ids["i-2"]
    group = h.shard.group("g")
    assert group.state is GroupState.STABLE
    assert group.static_members["i-2"] == new_id
    assert group.member(new_id).assignment == b"a-i-2"
    assert len(h.log) == records_before + 1  # the new id was written
    assert h.heartbeat(ids["i-2"], generation, instance_id="i-2") == ErrorCode.FENCED_INSTANCE_ID
    assert h.heartbeat(new_id, generation, instance_id="i-2") == ErrorCode.NONE


def test_before_join_v9_a_replaced_static_leader_is_told_the_old_leader_id() -> None:
    h = Harness()
    ids, _ = _stable_static_group(h, "i-1", "i-2")
    response = h.reply(h.join(instance_id="i-1", version=8))
    assert response.leader == ids["i-1"] != response.member_id
    assert response.members == [] and not response.skip_assignment
    assert h.shard.group("g").leader_id == response.member_id


def test_from_join_v9_a_replaced_static_leader_skips_the_assignment() -> None:
    h = Harness()
    _stable_static_group(h, "i-1", "i-2")
    response = h.reply(h.join(instance_id="i-1", version=9))
    assert response.skip_assignment
    assert response.leader == response.member_id
    assert len(response.members) == 2


def test_a_static_member_changing_the_selected_protocol_triggers_a_rebalance() -> None:
    h = Harness()
    _, generation = _stable_static_group(h, "i-1")
    t = subscription("t")
    response = h.reply(h.join(instance_id="i-1", protocols=[("roundrobin", t), ("range", t)]))
    # The only member rejoined at once, so the rebalance completed straight away.
    assert (response.generation_id, response.protocol_name) == (generation + 1, "roundrobin")
    assert h.shard.group("g").state is GroupState.COMPLETING_REBALANCE


def test_a_static_member_rejoining_while_completing_triggers_a_rebalance() -> None:
    h = Harness()
    ids, _ = _stable_static_group(h, "i-1", "i-2")
    h.join(member_id=ids["i-1"], instance_id="i-1")  # leader rejoins: rebalance
    h.join(member_id=ids["i-2"], instance_id="i-2")
    assert h.shard.group("g").state is GroupState.COMPLETING_REBALANCE
    replaced = h.join(instance_id="i-2")
    assert h.shard.group("g").state is GroupState.PREPARING_REBALANCE
    assert h.reply(replaced) is None


def test_a_failed_write_undoes_the_static_replacement() -> None:
    h = Harness()
    ids, generation = _stable_static_group(h, "i-1", "i-2")
    h.auto_write = False
    request_id = h.join(instance_id="i-2")
    h.complete_writes(ErrorCode.NOT_ENOUGH_REPLICAS)
    response = h.reply(request_id)
    assert response.error_code == ErrorCode.COORDINATOR_NOT_AVAILABLE
    assert response.member_id == ""
    group = h.shard.group("g")
    assert group.static_members["i-2"] == ids["i-2"]
    assert h.heartbeat(ids["i-2"], generation, instance_id="i-2") == ErrorCode.NONE


def test_the_old_ids_waiting_join_is_fenced() -> None:
    h = Harness()
    first = h.join(instance_id="i-1")
    h.join(instance_id="i-1")  # a duplicate instance starts while the first waits
    assert h.reply(first).error_code == ErrorCode.FENCED_INSTANCE_ID


def test_static_members_that_miss_a_join_phase_stay_in_the_group() -> None:
    h = Harness()
    ids, generation = _stable_static_group(h, "i-1", "i-2")
    rejoin = h.join(member_id=ids["i-1"], instance_id="i-1")
    for _ in range(6):
        h.heartbeat(ids["i-2"], generation, instance_id="i-2")
        h.advance(REBALANCE_MS // 6)
    response = h.reply(rejoin)
    assert response.generation_id == generation + 1
    assert set(h.shard.group("g").members) == set(ids.values())


def test_a_static_member_with_a_wrong_member_id_is_fenced_or_unknown() -> None:
    h = Harness()
    ids, generation = _stable_static_group(h, "i-1")
    assert h.heartbeat("other", generation, instance_id="i-1") == ErrorCode.FENCED_INSTANCE_ID
    assert h.heartbeat(ids["i-1"], generation, instance_id="i-9") == ErrorCode.UNKNOWN_MEMBER_ID
    fenced = h.reply(h.join(member_id="other", instance_id="i-1"))
    assert fenced.error_code == ErrorCode.FENCED_INSTANCE_ID


def test_an_administrator_removes_a_static_member_by_instance_id() -> None:
    h = Harness()
    ids, _ = _stable_static_group(h, "i-1", "i-2")
    response = h.leave(MemberIdentity(member_id="", group_instance_id="i-2"))
    assert [m.error_code for m in response.members] == [ErrorCode.NONE]
    assert ids["i-2"] not in h.shard.group("g").members
    assert h.shard.group("g").state is GroupState.PREPARING_REBALANCE
    unknown = h.leave(MemberIdentity(member_id="", group_instance_id="i-9"))
    assert [m.error_code for m in unknown.members] == [ErrorCode.UNKNOWN_MEMBER_ID]


def test_static_member_sessions_still_expire() -> None:
    h = Harness()
    _stable_static_group(h, "i-1")
    h.advance(SESSION_MS)
    assert h.shard.group("g").state is GroupState.EMPTY
