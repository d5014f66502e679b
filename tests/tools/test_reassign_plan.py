"""The pure reassignment planner (``replog.tools.reassign_plan``): minimal movement, balanced
replica and leader counts, rack awareness, adding and removing brokers."""

from __future__ import annotations

from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from replog.tools.reassign_plan import (
    PlanError,
    moved_replicas,
    plan_add_brokers,
    plan_onto_brokers,
)

NO_RACKS = {1: None, 2: None, 3: None}


def replica_counts(plan: dict[tuple[str, int], tuple[int, ...]]) -> Counter[int]:
    return Counter(b for replicas in plan.values() for b in replicas)


def leader_counts(plan: dict[tuple[str, int], tuple[int, ...]]) -> Counter[int]:
    return Counter(replicas[0] for replicas in plan.values())


def spread(counts: Counter[int], brokers: list[int]) -> int:
    values = [counts.get(b, 0) for b in brokers]
    return max(values) - min(values)


def test_a_balanced_assignment_on_the_allowed_brokers_does_not_move() -> None:
    current = {("t", 0): [1, 2], ("t", 1): [2, 3], ("t", 2): [3, 1]}
    plan = plan_onto_brokers(current, NO_RACKS)
    assert plan == {tp: tuple(r) for tp, r in current.items()}
    assert moved_replicas(current, plan) == 0


def test_moving_off_one_broker_moves_only_its_replicas() -> None:
    current = {("t", p): [1 + p % 3, 1 + (p + 1) % 3] for p in range(6)}
    plan = plan_onto_brokers(current, {1: None, 2: None, 4: None})
    on_3 = sum(3 in r for r in current.values())
    assert moved_replicas(current, plan) == on_3
    assert all(3 not in r for r in plan.values())
    for tp, replicas in plan.items():  # the replicas not on 3 stayed
        assert set(current[tp]) - {3} <= set(replicas)
    assert spread(replica_counts(plan), [1, 2, 4]) <= 1
    assert spread(leader_counts(plan), [1, 2, 4]) <= 1


def test_generate_onto_new_brokers_balances_replicas_and_leaders() -> None:
    current = {("a", p): [1, 2, 3] for p in range(8)}
    brokers = {4: None, 5: None, 6: None, 7: None}
    plan = plan_onto_brokers(current, brokers)
    assert all(set(r) <= set(brokers) and len(set(r)) == 3 for r in plan.values())
    assert spread(replica_counts(plan), list(brokers)) <= 1
    assert spread(leader_counts(plan), list(brokers)) <= 1


def test_an_unbalanced_assignment_is_evened_out_with_few_moves() -> None:
    current = {("t", p): [1, 2] for p in range(4)}  # broker 3 holds nothing
    plan = plan_onto_brokers(current, NO_RACKS)
    assert spread(replica_counts(plan), [1, 2, 3]) <= 1
    # 8 replicas over 3 brokers: 3,3,2 -> broker 3 gets 2 or 3; no more copies than that
    assert moved_replicas(current, plan) == replica_counts(plan)[3]
    assert spread(leader_counts(plan), [1, 2, 3]) <= 1


def test_rack_awareness_spreads_each_partition_over_racks() -> None:
    racks = {1: "a", 2: "a", 3: "b", 4: "b", 5: "c", 6: "c"}
    current = {("t", p): [1, 2, 3] for p in range(6)}  # two replicas in rack a
    plan = plan_onto_brokers(current, racks)
    for replicas in plan.values():
        assert len({racks[b] for b in replicas}) == 3
    assert spread(replica_counts(plan), list(racks)) <= 1
    without = plan_onto_brokers(current, racks, rack_aware=False)
    assert any(len({racks[b] for b in r}) < 3 for r in without.values())


def test_mixed_racks_are_an_error_unless_rack_awareness_is_off() -> None:
    current = {("t", 0): [1, 2]}
    with pytest.raises(PlanError, match=r"brokers \[2\] have no rack"):
        plan_onto_brokers(current, {1: "a", 2: None})
    assert plan_onto_brokers(current, {1: "a", 2: None}, rack_aware=False) == {("t", 0): (1, 2)}


def test_too_few_brokers_for_the_replication_factor_is_an_error() -> None:
    with pytest.raises(PlanError, match="3 replicas but only 2 brokers"):
        plan_onto_brokers({("t", 0): [1, 2, 3]}, {1: None, 2: None})


def test_add_brokers_moves_a_fair_share_onto_them_and_nothing_else() -> None:
    current = {("t", p): [1 + p % 3, 1 + (p + 1) % 3] for p in range(9)}  # 6 each on 1,2,3
    brokers = {1: None, 2: None, 3: None, 4: None, 5: None}
    plan = plan_add_brokers(current, brokers, {4, 5})
    counts = replica_counts(plan)
    # 18 replicas over 5 brokers: a fair share is 3 or 4 each
    assert counts[4] >= 3 and counts[5] >= 3
    assert spread(counts, [1, 2, 3, 4, 5]) <= 1
    # every copy lands on a new broker, and each moved replica replaced one in place
    assert moved_replicas(current, plan) == counts[4] + counts[5]
    for tp, replicas in plan.items():
        assert all(b in current[tp] or b in (4, 5) for b in replicas)
        assert len(replicas) == 2


def test_add_brokers_keeps_racks_spread() -> None:
    racks = {1: "a", 2: "b", 3: "a", 4: "b"}
    current = {("t", p): [1, 2] for p in range(4)}
    plan = plan_add_brokers(current, racks, {3, 4})
    for replicas in plan.values():
        assert {racks[b] for b in replicas} == {"a", "b"}
    assert replica_counts(plan) == Counter({1: 2, 2: 2, 3: 2, 4: 2})


def test_add_brokers_must_be_in_the_cluster() -> None:
    with pytest.raises(PlanError, match=r"brokers \[9\] are not in the cluster"):
        plan_add_brokers({("t", 0): [1]}, {1: None}, {9})


@settings(max_examples=60, deadline=None)
@given(
    partitions=st.lists(
        st.lists(st.integers(1, 6), min_size=1, max_size=3, unique=True), min_size=1, max_size=12
    ),
    brokers=st.sets(st.integers(1, 6), min_size=3, max_size=6),
)
def test_plans_are_valid_and_balanced(partitions: list[list[int]], brokers: set[int]) -> None:
    current = {("t", p): replicas for p, replicas in enumerate(partitions)}
    plan = plan_onto_brokers(current, dict.fromkeys(brokers))
    for tp, replicas in plan.items():
        assert len(replicas) == len(current[tp]) and len(set(replicas)) == len(replicas)
        assert set(replicas) <= brokers
        # a replica already on an allowed broker only moves to balance the counts
    assert spread(replica_counts(plan), sorted(brokers)) <= 1
    leaders = leader_counts(plan)  # no partition can even the leader counts by a reorder
    assert all(leaders[r[0]] <= leaders[f] + 1 for r in plan.values() for f in r[1:])
    assert plan_onto_brokers(plan, dict.fromkeys(brokers)) == plan  # a fixed point
