"""Replica placement: the AdminUtils table exactly, the RF > brokers error, rack awareness,
properties."""

from __future__ import annotations

from collections import Counter

import pytest
from hypothesis import given
from hypothesis import strategies as st

from replog.election import (
    BrokerRegistration,
    InconsistentRackError,
    InvalidReplicationFactorError,
    assign_replicas,
    assign_replicas_rack_aware,
    assign_replicas_rack_unaware,
    rack_alternated_brokers,
)
from replog.errors import ErrorCode


def test_deterministic_assignment_matches_adminutils_table() -> None:
    # 5 brokers, fixed start index 0 (and shift 0), 10 partitions, RF 3.
    placed = assign_replicas_rack_unaware(range(5), 10, 3, start_index=0, replica_shift=0)
    assert placed[0] == (0, 1, 2)
    assert placed[4] == (4, 0, 1)
    assert placed[5] == (0, 2, 3)  # the shift increments at p5
    assert placed[9] == (4, 1, 2)
    assert sorted(placed) == list(range(10))


def test_brokers_are_sorted_by_id_before_placing() -> None:
    assert assign_replicas_rack_unaware([4, 2, 0, 3, 1], 1, 3, start_index=0, replica_shift=0) == {
        0: (0, 1, 2)
    }


def test_start_index_and_shift_move_the_walk() -> None:
    placed = assign_replicas_rack_unaware(range(5), 2, 3, start_index=2, replica_shift=1)
    assert placed == {0: (2, 4, 0), 1: (3, 0, 1)}


def test_first_partition_continues_an_existing_topic() -> None:
    # The shift only grows at the partitions being placed (as in AdminUtils), so continuing at
    # p6 with the shift the full run had reached there (1, bumped at p5) gives the same replicas.
    full = assign_replicas_rack_unaware(range(5), 10, 3, start_index=0, replica_shift=0)
    more = assign_replicas_rack_unaware(
        range(5), 4, 3, start_index=0, replica_shift=1, first_partition=6
    )
    assert more == {p: full[p] for p in range(6, 10)}


def test_replication_factor_larger_than_brokers_is_an_error() -> None:
    with pytest.raises(InvalidReplicationFactorError) as raised:
        assign_replicas_rack_unaware(range(3), 1, 4, start_index=0, replica_shift=0)
    assert raised.value.code is ErrorCode.INVALID_REPLICATION_FACTOR
    assert str(raised.value) == "replication factor 4 is larger than the 3 available brokers"
    assert (raised.value.replication_factor, raised.value.broker_count) == (4, 3)
    with pytest.raises(InvalidReplicationFactorError, match="must be larger than 0"):
        assign_replicas_rack_unaware(range(3), 1, 0, start_index=0, replica_shift=0)
    with pytest.raises(InvalidReplicationFactorError):
        assign_replicas_rack_aware({1: "a", 2: "b"}, 1, 3, start_index=0, replica_shift=0)


def test_rack_alternated_list_takes_one_broker_per_rack_in_turn() -> None:
    racks = {0: "a", 1: "a", 2: "b", 3: "c", 4: "c", 5: "a"}
    assert rack_alternated_brokers(racks) == [0, 2, 3, 1, 4, 5]


def test_rack_aware_placement_spreads_each_partition_across_racks() -> None:
    racks = {0: "a", 1: "a", 2: "b", 3: "b", 4: "c", 5: "c"}
    placed = assign_replicas_rack_aware(racks, 12, 3, start_index=0, replica_shift=0)
    for replicas in placed.values():
        assert len(set(replicas)) == 3
        assert {racks[b] for b in replicas} == {"a", "b", "c"}
    leaders = Counter(replicas[0] for replicas in placed.values())
    assert set(leaders.values()) == {2}


def test_rack_aware_with_more_replicas_than_racks_uses_every_rack() -> None:
    racks = {0: "a", 1: "a", 2: "a", 3: "b", 4: "b", 5: "b"}
    placed = assign_replicas_rack_aware(racks, 6, 4, start_index=1, replica_shift=2)
    for replicas in placed.values():
        assert len(set(replicas)) == 4
        assert Counter(racks[b] for b in replicas) == Counter({"a": 2, "b": 2})


def test_assign_replicas_picks_rack_awareness_from_registrations() -> None:
    with_racks = [BrokerRegistration(broker_id=b, rack="ab"[b % 2]) for b in range(4)]
    placed = assign_replicas(with_racks, 4, 2, start_index=0, replica_shift=0)
    assert all(len({b % 2 for b in replicas}) == 2 for replicas in placed.values())
    mixed = [*with_racks[:3], BrokerRegistration(broker_id=3)]
    with pytest.raises(InconsistentRackError, match=r"brokers \[3\] have no rack"):
        assign_replicas(mixed, 4, 2, start_index=0, replica_shift=0)
    placed_plain = assign_replicas(mixed, 4, 2, start_index=0, replica_shift=0, rack_aware=False)
    assert placed_plain == assign_replicas_rack_unaware(
        range(4), 4, 2, start_index=0, replica_shift=0
    )


@st.composite
def placements(draw: st.DrawFn) -> tuple[list[int], int, int, int, int]:
    brokers = draw(st.lists(st.integers(0, 50), min_size=1, max_size=12, unique=True))
    n = len(brokers)
    rf = draw(st.integers(1, n))
    partitions = draw(st.integers(1, 60))
    return brokers, partitions, rf, draw(st.integers(0, n - 1)), draw(st.integers(0, n - 1))


@given(placements())
def test_every_partition_gets_rf_distinct_brokers_and_leaders_spread_evenly(
    case: tuple[list[int], int, int, int, int],
) -> None:
    brokers, partitions, rf, start_index, shift = case
    placed = assign_replicas_rack_unaware(
        brokers, partitions, rf, start_index=start_index, replica_shift=shift
    )
    assert sorted(placed) == list(range(partitions))
    for replicas in placed.values():
        assert len(replicas) == rf and len(set(replicas)) == rf
        assert set(replicas) <= set(brokers)
    leaders = Counter(replicas[0] for replicas in placed.values())
    counts = [leaders.get(b, 0) for b in brokers]
    assert max(counts) - min(counts) <= 1


@given(
    st.dictionaries(st.integers(0, 40), st.sampled_from("abcd"), min_size=1, max_size=12),
    st.integers(1, 40),
    st.data(),
)
def test_rack_aware_uses_as_many_racks_as_possible(
    racks: dict[int, str], partitions: int, data: st.DataObject
) -> None:
    n = len(racks)
    rf = data.draw(st.integers(1, n))
    start_index = data.draw(st.integers(0, n - 1))
    shift = data.draw(st.integers(0, n - 1))
    placed = assign_replicas_rack_aware(
        racks, partitions, rf, start_index=start_index, replica_shift=shift
    )
    rack_count = len(set(racks.values()))
    for replicas in placed.values():
        assert len(replicas) == rf and len(set(replicas)) == rf
        assert len({racks[b] for b in replicas}) == min(rf, rack_count)
    leaders = Counter(replicas[0] for replicas in placed.values())
    counts = [leaders.get(b, 0) for b in racks]
    assert max(counts) - min(counts) <= 1
