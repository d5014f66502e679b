"""LeaderEpochCache (Kafka's LeaderEpochFileCache rules): assign rules, end_offset_for answers,
truncations, persistence."""

from __future__ import annotations

import itertools
import os
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from replog.errors import StorageError
from replog.log import (
    EpochEntry,
    FaultInjectingFileSystem,
    LeaderEpochCache,
    LeaderEpochCheckpointFile,
)


def _cache(*pairs: tuple[int, int]) -> LeaderEpochCache:
    return LeaderEpochCache(None, [EpochEntry(e, o) for e, o in pairs])


def _pairs(cache: LeaderEpochCache) -> list[tuple[int, int]]:
    return [(entry.epoch, entry.start_offset) for entry in cache.entries]


@pytest.fixture
def fs(tmp_path: Path) -> FaultInjectingFileSystem:
    return FaultInjectingFileSystem(str(tmp_path), seed=1)


@pytest.fixture
def checkpoint(fs: FaultInjectingFileSystem) -> LeaderEpochCheckpointFile:
    fs.makedirs("foo-0")
    return LeaderEpochCheckpointFile(fs, os.path.join(fs.root, "foo-0", "leader-epoch-checkpoint"))


# ------------------------------------------------------------------------ end_offset_for


@pytest.mark.parametrize(
    ("epoch", "expected"),
    [(3, (3, 11)), (4, (3, 11)), (5, (5, 15)), (0, (0, 0)), (6, (-1, -1)), (-1, (-1, -1))],
)
def test_end_offset_for_worked_example(epoch: int, expected: tuple[int, int]) -> None:
    cache = _cache((1, 0), (3, 8), (5, 11))
    assert cache.end_offset_for(epoch, log_end_offset=15) == expected


def test_end_offset_for_below_all_epochs_answers_first_start_offset() -> None:
    assert _cache((2, 5), (4, 9)).end_offset_for(1, 20) == (1, 5)


def test_end_offset_for_on_empty_cache_is_undefined() -> None:
    assert _cache().end_offset_for(0, 10) == (-1, -1)
    assert _cache().end_offset_for(-1, 10) == (-1, -1)


def test_end_offset_for_any_negative_epoch_is_undefined() -> None:
    assert _cache((0, 0)).end_offset_for(-7, 10) == (-1, -1)


def test_kip_279_multi_round_truncation_answers() -> None:
    """KIP-279: leader {0:0, 1:3, 3:6} LEO 9, follower {0:0, 2:4} LEO 8; the follower
    truncates to 4 after the first answer, to 3 after the second."""
    leader = _cache((0, 0), (1, 3), (3, 6))
    follower = _cache((0, 0), (2, 4))
    assert leader.end_offset_for(2, log_end_offset=9) == (1, 6)
    assert follower.end_offset_for(1, log_end_offset=8) == (0, 4)
    follower.truncate_from_end(4)
    assert _pairs(follower) == [(0, 0)]
    assert leader.end_offset_for(0, log_end_offset=9) == (0, 3)
    assert follower.end_offset_for(0, log_end_offset=4) == (0, 4)


def test_new_leader_epoch_without_writes_answers_for_the_old_epoch() -> None:
    """KAFKA-7415: B becomes leader at epoch 4 with LEO 10 and writes nothing."""
    b = _cache((1, 0))
    assert b.assign(4, 10)
    assert _pairs(b) == [(1, 0), (4, 10)]
    assert b.end_offset_for(3, log_end_offset=10) == (1, 10)
    a = _cache((1, 0), (3, 10))
    assert a.end_offset_for(1, log_end_offset=13) == (1, 10)


# ------------------------------------------------------------------------ assign


def test_assign_to_empty_cache_adds_entry() -> None:
    cache = _cache()
    assert cache.assign(0, 0)
    assert cache.latest_entry == EpochEntry(0, 0)
    assert cache.latest_epoch == 0


def test_assign_same_epoch_at_later_offset_changes_nothing() -> None:
    cache = _cache((2, 5))
    assert not cache.assign(2, 5)
    assert not cache.assign(2, 9)
    assert _pairs(cache) == [(2, 5)]


def test_assign_same_epoch_at_earlier_offset_moves_its_start() -> None:
    cache = _cache((1, 0), (2, 5))
    assert cache.assign(2, 3)
    assert _pairs(cache) == [(1, 0), (2, 3)]


def test_assign_higher_epoch_appends() -> None:
    cache = _cache((1, 0))
    assert cache.assign(3, 8)
    assert _pairs(cache) == [(1, 0), (3, 8)]


def test_assign_higher_epoch_at_same_offset_replaces_empty_epoch() -> None:
    cache = _cache((1, 0), (3, 8))
    assert cache.assign(4, 8)
    assert _pairs(cache) == [(1, 0), (4, 8)]


def test_assign_lower_epoch_drops_every_higher_epoch() -> None:
    cache = _cache((1, 0), (3, 8), (5, 11))
    assert cache.assign(2, 20)
    assert _pairs(cache) == [(1, 0), (2, 20)]


def test_assign_earlier_offset_drops_every_entry_starting_at_or_after_it() -> None:
    cache = _cache((1, 0), (3, 8), (5, 11))
    assert cache.assign(6, 8)
    assert _pairs(cache) == [(1, 0), (6, 8)]


@pytest.mark.parametrize(("epoch", "offset"), [(-1, 0), (0, -1), (2**31, 0)])
def test_assign_rejects_out_of_range_arguments(epoch: int, offset: int) -> None:
    cache = _cache((1, 0))
    with pytest.raises(ValueError):
        cache.assign(epoch, offset)
    assert _pairs(cache) == [(1, 0)]


def test_seed_entries_that_contradict_are_resolved_like_assign() -> None:
    cache = _cache((1, 0), (3, 8), (2, 9))
    assert _pairs(cache) == [(1, 0), (2, 9)]


# ------------------------------------------------------------------------ other reads


def test_epoch_for_offset_is_the_epoch_that_started_at_or_before_it() -> None:
    cache = _cache((1, 0), (3, 8), (5, 11))
    assert cache.epoch_for_offset(0) == 1
    assert cache.epoch_for_offset(7) == 1
    assert cache.epoch_for_offset(8) == 3
    assert cache.epoch_for_offset(100) == 5
    assert _cache((2, 5)).epoch_for_offset(4) is None
    assert _cache().epoch_for_offset(0) is None


def test_latest_and_earliest_entries() -> None:
    cache = _cache((1, 0), (3, 8))
    assert cache.earliest_entry == EpochEntry(1, 0)
    assert cache.latest_entry == EpochEntry(3, 8)
    assert _cache().latest_entry is None
    assert _cache().earliest_entry is None
    assert _cache().latest_epoch is None


def test_entries_is_a_copy() -> None:
    cache = _cache((1, 0))
    cache.entries.append(EpochEntry(9, 9))
    assert _pairs(cache) == [(1, 0)]


# ------------------------------------------------------------------------ truncation


def test_truncate_from_end_drops_entries_starting_at_or_after_end() -> None:
    cache = _cache((1, 0), (3, 8), (5, 11))
    cache.truncate_from_end(11)
    assert _pairs(cache) == [(1, 0), (3, 8)]
    cache.truncate_from_end(9)
    assert _pairs(cache) == [(1, 0), (3, 8)]
    cache.truncate_from_end(0)
    assert _pairs(cache) == []


def test_truncate_from_start_reinserts_last_dropped_epoch_at_new_start() -> None:
    cache = _cache((1, 0), (3, 8), (5, 11))
    cache.truncate_from_start(9)
    assert _pairs(cache) == [(3, 9), (5, 11)]
    cache.truncate_from_start(11)
    assert _pairs(cache) == [(5, 11)]
    cache.truncate_from_start(20)
    assert _pairs(cache) == [(5, 20)]


def test_truncate_from_start_at_or_before_first_entry_changes_nothing() -> None:
    cache = _cache((1, 4), (3, 8))
    cache.truncate_from_start(4)
    cache.truncate_from_start(2)
    assert _pairs(cache) == [(1, 4), (3, 8)]


def test_truncations_reject_negative_offsets() -> None:
    cache = _cache((1, 0))
    with pytest.raises(ValueError):
        cache.truncate_from_end(-1)
    with pytest.raises(ValueError):
        cache.truncate_from_start(-1)


# ------------------------------------------------------------------------ persistence


def test_every_change_is_written_to_the_checkpoint_and_reloads(
    fs: FaultInjectingFileSystem, checkpoint: LeaderEpochCheckpointFile
) -> None:
    cache = LeaderEpochCache.load(checkpoint)
    assert _pairs(cache) == []
    cache.assign(1, 0)
    cache.assign(3, 8)
    cache.assign(5, 11)
    fs.crash()
    assert _pairs(LeaderEpochCache.load(checkpoint)) == [(1, 0), (3, 8), (5, 11)]

    cache.truncate_from_end(11)
    assert checkpoint.read() == [EpochEntry(1, 0), EpochEntry(3, 8)]
    cache.truncate_from_start(9)
    fs.crash()
    assert _pairs(LeaderEpochCache.load(checkpoint)) == [(3, 9)]

    cache.clear_and_flush()
    fs.crash()
    assert checkpoint.read() == []


def test_no_op_assign_does_not_write(
    fs: FaultInjectingFileSystem, checkpoint: LeaderEpochCheckpointFile
) -> None:
    cache = LeaderEpochCache(checkpoint)
    cache.assign(1, 0)
    fs.fail_write("leader-epoch")
    assert not cache.assign(1, 5)
    cache.truncate_from_end(3)  # nothing to drop
    cache.truncate_from_start(0)  # nothing to drop


def test_failed_checkpoint_write_leaves_cache_unchanged(
    fs: FaultInjectingFileSystem, checkpoint: LeaderEpochCheckpointFile
) -> None:
    cache = LeaderEpochCache(checkpoint)
    cache.assign(1, 0)
    fs.fail_fsync("leader-epoch")
    with pytest.raises(StorageError):
        cache.assign(2, 5)
    assert _pairs(cache) == [(1, 0)]
    fs.fail_write("leader-epoch")
    with pytest.raises(StorageError):
        cache.clear_and_flush()
    assert _pairs(cache) == [(1, 0)]


def test_seeding_entries_does_not_write(
    fs: FaultInjectingFileSystem, checkpoint: LeaderEpochCheckpointFile
) -> None:
    LeaderEpochCache(checkpoint, [EpochEntry(0, 0)])
    assert not fs.exists(checkpoint.path)


# ------------------------------------------------------------------------ model test


def _ref_assign(entries: list[tuple[int, int]], epoch: int, offset: int) -> list[tuple[int, int]]:
    if entries and entries[-1][0] == epoch and offset >= entries[-1][1]:
        return entries
    return [(e, o) for e, o in entries if e < epoch and o < offset] + [(epoch, offset)]


def _ref_truncate_from_start(entries: list[tuple[int, int]], start: int) -> list[tuple[int, int]]:
    if not entries or entries[0][1] >= start:
        return entries
    dropped = [e for e, o in entries if o <= start]
    return [(dropped[-1], start)] + [(e, o) for e, o in entries if o > start]


def _ref_end_offset_for(entries: list[tuple[int, int]], epoch: int, leo: int) -> tuple[int, int]:
    if epoch < 0:
        return (-1, -1)
    if entries and entries[-1][0] == epoch:
        return (epoch, leo)
    higher = [(e, o) for e, o in entries if e > epoch]
    if not higher:
        return (-1, -1)
    floor = [e for e, _ in entries if e <= epoch]
    return (max(floor) if floor else epoch, min(higher)[1])


_ops = st.lists(
    st.one_of(
        st.tuples(st.just("assign"), st.integers(0, 12), st.integers(0, 40)),
        st.tuples(st.just("truncate_from_end"), st.integers(0, 45), st.just(0)),
        st.tuples(st.just("truncate_from_start"), st.integers(0, 45), st.just(0)),
        st.tuples(st.just("clear"), st.just(0), st.just(0)),
    ),
    max_size=40,
)


@settings(max_examples=300, deadline=None)
@given(ops=_ops, queries=st.lists(st.integers(-2, 14), min_size=1, max_size=5))
def test_cache_agrees_with_brute_force_model(
    ops: list[tuple[str, int, int]], queries: list[int]
) -> None:
    cache = _cache()
    model: list[tuple[int, int]] = []
    for op, a, b in ops:
        if op == "assign":
            changed = cache.assign(a, b)
            new_model = _ref_assign(model, a, b)
            assert changed == (new_model != model)
            model = new_model
        elif op == "truncate_from_end":
            cache.truncate_from_end(a)
            model = [(e, o) for e, o in model if o < a]
        elif op == "truncate_from_start":
            cache.truncate_from_start(a)
            model = _ref_truncate_from_start(model, a)
        else:
            cache.clear_and_flush()
            model = []
        assert _pairs(cache) == model
        assert all(x[0] < y[0] and x[1] < y[1] for x, y in itertools.pairwise(model))
        leo = max([o for _, o in model], default=0) + 3
        for epoch in queries:
            assert cache.end_offset_for(epoch, leo) == _ref_end_offset_for(model, epoch, leo)
            assert cache.epoch_for_offset(epoch * 3) == max(
                [e for e, o in model if o <= epoch * 3], default=None
            )
