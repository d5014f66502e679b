"""Offset and time index semantics (Kafka's .index and .timeindex), including the worked
example of base 100 with entries 105->0, 120->4200, 130->8400, and a model-based lookup test."""

from __future__ import annotations

import bisect
import os
import random
import struct
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from replog.errors import CorruptIndexError, InvalidOffsetError, InvariantError
from replog.log import NO_TIMESTAMP, REAL_FS, OffsetIndex, TimeIndex
from replog.log.fault_fs import FaultInjectingFileSystem
from replog.log.index_base import IndexFullError
from replog.log.offset_index import OffsetPosition
from replog.log.time_index import TimestampOffset

DEFAULT_INDEX_BYTES = 10_485_760


def open_offset_index(path: Path, base_offset: int = 0, size: int = 4096) -> OffsetIndex:
    return OffsetIndex.open(REAL_FS, str(path), base_offset, size)


def open_time_index(path: Path, base_offset: int = 0, size: int = 4096) -> TimeIndex:
    return TimeIndex.open(REAL_FS, str(path), base_offset, size)


@pytest.fixture
def scenario_26(tmp_path: Path) -> Iterator[OffsetIndex]:
    """Base 100 with entries (105 -> 0), (120 -> 4200), (130 -> 8400)."""
    index = open_offset_index(tmp_path / "00000000000000000100.index", base_offset=100)
    for offset, position in [(105, 0), (120, 4200), (130, 8400)]:
        index.append(offset, position)
    yield index
    index.close()


# -- base 100, entries 105->0, 120->4200, 130->8400 -------------------------------------------


def test_lookup_below_first_entry_returns_base_offset_and_position_zero(
    scenario_26: OffsetIndex,
) -> None:
    assert scenario_26.lookup(99) == (100, 0)
    assert scenario_26.lookup(104) == (100, 0)


def test_lookup_returns_largest_entry_at_or_below_target(scenario_26: OffsetIndex) -> None:
    assert scenario_26.lookup(125) == OffsetPosition(120, 4200)
    assert scenario_26.lookup(120) == (120, 4200)
    assert scenario_26.lookup(10_000) == (130, 8400)


def test_truncate_to_an_indexed_offset_keeps_only_entries_before_it(
    scenario_26: OffsetIndex,
) -> None:
    scenario_26.truncate_to(120)
    assert scenario_26.entries == 1
    assert scenario_26.last_offset == 105


def test_truncate_between_entries_keeps_entries_up_to_the_largest_below(
    scenario_26: OffsetIndex,
) -> None:
    scenario_26.truncate_to(125)
    assert scenario_26.entries == 2
    assert scenario_26.last_entry == (120, 4200)


def test_truncate_below_every_entry_removes_all(scenario_26: OffsetIndex) -> None:
    scenario_26.truncate_to(101)
    assert scenario_26.entries == 0
    assert scenario_26.last_offset == 100
    assert scenario_26.lookup(200) == (100, 0)


def test_appending_an_offset_that_is_not_above_the_last_raises(scenario_26: OffsetIndex) -> None:
    with pytest.raises(InvalidOffsetError):
        scenario_26.append(130, 9000)
    with pytest.raises(InvalidOffsetError):
        scenario_26.append(129, 9000)
    assert scenario_26.entries == 3


def test_offset_beyond_int32_relative_cannot_be_appended(scenario_26: OffsetIndex) -> None:
    assert scenario_26.can_append_offset(100 + 2**31 - 1)
    assert not scenario_26.can_append_offset(100 + 2**31)
    assert not scenario_26.can_append_offset(99)
    with pytest.raises(InvalidOffsetError):
        scenario_26.append(100 + 2**31, 9000)
    assert scenario_26.entries == 3


def test_close_trims_preallocated_file_to_the_entries_in_use(scenario_26: OffsetIndex) -> None:
    assert os.path.getsize(scenario_26.path) == 4096
    scenario_26.close()
    assert os.path.getsize(scenario_26.path) == 24


# -- sizes and the full rules -----------------------------------------------------------------


def test_default_size_gives_kafka_slot_counts(tmp_path: Path) -> None:
    offsets = open_offset_index(tmp_path / "0.index", size=DEFAULT_INDEX_BYTES)
    times = open_time_index(tmp_path / "0.timeindex", size=DEFAULT_INDEX_BYTES)
    assert offsets.max_entries == 1_310_720
    assert os.path.getsize(offsets.path) == DEFAULT_INDEX_BYTES
    assert times.max_entries == 873_813
    assert os.path.getsize(times.path) == 10_485_756
    assert (offsets.entries, times.entries) == (0, 0)
    assert not offsets.is_full and not times.is_full
    assert (OffsetIndex.WARM_ENTRIES, TimeIndex.WARM_ENTRIES) == (1024, 682)
    offsets.close()
    times.close()
    assert os.path.getsize(offsets.path) == os.path.getsize(times.path) == 0


def test_flush_syncs_only_an_index_written_since_its_last_sync(tmp_path: Path) -> None:
    """A flush of a clean index is skipped (on Linux an msync is an fsync of the file); a failed
    sync leaves the index dirty, so the next flush tries again and a close still trims."""
    fs = FaultInjectingFileSystem(str(tmp_path))
    index = OffsetIndex.open(fs, "0.index", 0, 4096)
    index.flush()  # a new index: its length is synced
    fs.fail_fsync("0.index")
    index.flush()  # clean: no sync, so the injected failure is still armed
    index.append(1, 0)
    with pytest.raises(OSError):
        index.flush()
    index.flush()  # still dirty after the failure: synced now
    assert fs.durable_content("0.index")[:8] == struct.pack(">ii", 1, 0)
    index.close()
    assert os.path.getsize(tmp_path / "0.index") == 8


def test_offset_index_append_to_full_index_raises(tmp_path: Path) -> None:
    index = open_offset_index(tmp_path / "0.index", size=20)  # rounds down to 2 slots
    index.append(1, 0)
    index.append(2, 10)
    assert index.is_full
    with pytest.raises(IndexFullError):
        index.append(3, 20)


def test_time_index_keeps_one_slot_for_the_final_entry(tmp_path: Path) -> None:
    index = open_time_index(tmp_path / "0.timeindex", size=36)  # 3 slots
    assert index.maybe_append(1000, 1)
    assert index.maybe_append(2000, 2)
    assert index.is_full and index.entries == index.max_entries - 1
    with pytest.raises(IndexFullError):
        index.maybe_append(3000, 3)
    assert index.maybe_append(3000, 3, skip_full_check=True)
    with pytest.raises(IndexFullError):
        index.maybe_append(4000, 4, skip_full_check=True)
    assert index.last_entry == (3000, 3)


# -- time index append rules ------------------------------------------------------------------


def test_time_index_appends_only_when_timestamp_increases(tmp_path: Path) -> None:
    index = open_time_index(tmp_path / "0.timeindex", base_offset=50)
    assert index.last_entry == (NO_TIMESTAMP, 50)
    assert not index.maybe_append(NO_TIMESTAMP, 50)  # v0-style records: nothing indexed
    assert index.maybe_append(1000, 55)
    assert not index.maybe_append(1000, 55)  # the exact last entry again (roll, close)
    assert not index.maybe_append(1000, 60)  # same timestamp, later offset: nothing new
    assert index.maybe_append(1001, 60)
    assert index.entries == 2
    assert index.last_entry == TimestampOffset(1001, 60)


def test_time_index_rejects_offset_below_last_and_timestamp_going_back(tmp_path: Path) -> None:
    index = open_time_index(tmp_path / "0.timeindex", base_offset=50)
    index.maybe_append(1000, 55)
    with pytest.raises(InvalidOffsetError):
        index.maybe_append(2000, 54)
    with pytest.raises(InvariantError):
        index.maybe_append(999, 56)
    with pytest.raises(InvalidOffsetError):
        index.maybe_append(2000, 50 + 2**31)
    assert index.entries == 1


def test_time_index_lookup_and_truncate_by_offset(tmp_path: Path) -> None:
    index = open_time_index(tmp_path / "0.timeindex", base_offset=100)
    for timestamp, offset in [(1000, 105), (2000, 120), (3000, 130)]:
        index.maybe_append(timestamp, offset)
    assert index.lookup(999) == (NO_TIMESTAMP, 100)
    assert index.lookup(2500) == (2000, 120)
    assert index.lookup(9999) == (3000, 130)
    index.truncate_to(125)
    assert index.entries == 2
    index.truncate_to(120)
    assert index.entries == 1
    assert index.last_entry == (1000, 105)


# -- files: reopen, resize, corruption --------------------------------------------------------


def test_reopen_after_close_sees_the_same_entries(tmp_path: Path) -> None:
    offsets = open_offset_index(tmp_path / "7.index", base_offset=7, size=DEFAULT_INDEX_BYTES)
    times = open_time_index(tmp_path / "7.timeindex", base_offset=7, size=DEFAULT_INDEX_BYTES)
    for i in range(1, 2000):
        offsets.append(7 + 3 * i, 100 * i)
        times.maybe_append(10 * i, 7 + 3 * i)
    before = ([offsets.entry(n) for n in range(1999)], [times.entry(n) for n in range(1999)])
    offsets.trim_to_valid_size()  # as on roll; then the active segment grows back after load
    times.trim_to_valid_size()
    assert offsets.resize(DEFAULT_INDEX_BYTES) and times.resize(DEFAULT_INDEX_BYTES)
    offsets.close()
    times.close()
    offsets = open_offset_index(tmp_path / "7.index", base_offset=7)
    times = open_time_index(tmp_path / "7.timeindex", base_offset=7)
    assert (offsets.entries, times.entries) == (1999, 1999)
    assert offsets.max_entries == offsets.entries  # trimmed, so already full
    after = ([offsets.entry(n) for n in range(1999)], [times.entry(n) for n in range(1999)])
    assert after == before
    assert offsets.lookup(7 + 3 * 500 + 1) == (7 + 3 * 500, 100 * 500)
    assert times.lookup(10 * 500 + 5) == (10 * 500, 7 + 3 * 500)
    offsets.close()
    times.close()


def test_existing_untrimmed_file_counts_every_slot_as_an_entry(tmp_path: Path) -> None:
    index = open_offset_index(tmp_path / "0.index", size=80)
    index.append(5, 0)
    index.flush()
    reopened = open_offset_index(tmp_path / "0.index", size=80)  # as after a crash
    assert reopened.entries == 10
    assert reopened.entry(0) == (5, 0)
    assert reopened.entry(9) == (0, 0)  # a zero slot reads as the base offset


def test_resize_grows_the_file_back_and_appends_continue(tmp_path: Path) -> None:
    index = open_offset_index(tmp_path / "0.index", size=80)
    index.append(1, 0)
    index.trim_to_valid_size()
    assert index.is_full and os.path.getsize(index.path) == 8
    assert index.resize(80)
    assert not index.resize(83)  # rounds down to the same length
    index.append(2, 10)
    assert [index.entry(n) for n in range(2)] == [(1, 0), (2, 10)]
    with pytest.raises(InvariantError):
        index.resize(8)  # would cut an entry


def test_reset_removes_entries_and_restores_max_size(tmp_path: Path) -> None:
    index = open_offset_index(tmp_path / "0.index", size=80)
    index.append(1, 0)
    index.trim_to_valid_size()
    index.reset()
    assert index.entries == 0 and index.max_entries == 10
    assert index.lookup(5) == (0, 0)


def test_zero_size_index_is_full_and_answers_lookups(tmp_path: Path) -> None:
    offsets = open_offset_index(tmp_path / "0.index", base_offset=3, size=0)
    times = open_time_index(tmp_path / "0.timeindex", base_offset=3, size=0)
    assert offsets.max_entries == times.max_entries == 0
    assert offsets.is_full and times.is_full
    assert offsets.lookup(10) == (3, 0)
    assert times.lookup(10) == (NO_TIMESTAMP, 3)
    offsets.truncate_to(5)
    offsets.flush()
    offsets.close()
    times.close()
    reopened = open_offset_index(tmp_path / "0.index", base_offset=3)
    assert reopened.entries == 0 and reopened.max_entries == 0
    assert reopened.resize(800) and reopened.max_entries == 100


def test_file_length_not_a_multiple_of_entry_size_is_corrupt(tmp_path: Path) -> None:
    (tmp_path / "0.index").write_bytes(bytes(10))
    (tmp_path / "0.timeindex").write_bytes(bytes(13))
    with pytest.raises(CorruptIndexError):
        open_offset_index(tmp_path / "0.index")
    with pytest.raises(CorruptIndexError):
        open_time_index(tmp_path / "0.timeindex")


def test_last_offset_below_base_offset_is_corrupt(tmp_path: Path) -> None:
    (tmp_path / "0.index").write_bytes(struct.pack(">ii", 0, 0) + struct.pack(">ii", -1, 8))
    (tmp_path / "0.timeindex").write_bytes(struct.pack(">qi", 5, -1))
    with pytest.raises(CorruptIndexError):
        open_offset_index(tmp_path / "0.index")
    with pytest.raises(CorruptIndexError):
        open_time_index(tmp_path / "0.timeindex")


def test_time_index_with_last_timestamp_below_first_is_corrupt(tmp_path: Path) -> None:
    (tmp_path / "0.timeindex").write_bytes(struct.pack(">qi", 5, 0) + struct.pack(">qi", 4, 1))
    with pytest.raises(CorruptIndexError):
        open_time_index(tmp_path / "0.timeindex")


def test_delete_closes_and_removes_the_file(tmp_path: Path) -> None:
    index = open_offset_index(tmp_path / "0.index")
    index.append(1, 0)
    index.delete()
    assert not (tmp_path / "0.index").exists()


def test_read_only_index_does_not_trim_or_accept_appends(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        OffsetIndex.open(REAL_FS, str(tmp_path / "missing.index"), 0, 80, writable=False)
    open_offset_index(tmp_path / "0.index", size=80).flush()
    index = OffsetIndex.open(REAL_FS, str(tmp_path / "0.index"), 0, 80, writable=False)
    with pytest.raises(InvariantError):
        index.append(1, 0)
    index.close()
    assert os.path.getsize(tmp_path / "0.index") == 80


# -- the warm-section search against a brute-force model --------------------------------------


def model_lower(keys: list[int], target: int) -> int:
    """Slot of the largest key <= target, -1 if none."""
    return bisect.bisect_right(keys, target) - 1


def model_upper(keys: list[int], target: int) -> int:
    """Slot of the smallest key >= target, -1 if none."""
    slot = bisect.bisect_left(keys, target)
    return -1 if slot == len(keys) else slot


def increasing(rng: random.Random, n: int, start: int, gap_max: int) -> list[int]:
    values, value = [], start
    for _ in range(n):
        value += rng.randint(1, gap_max)
        values.append(value)
    return values


def probe_targets(rng: random.Random, keys: list[int], extra: list[int]) -> list[int]:
    picked = rng.sample(keys, min(len(keys), 60)) + keys[:2] + keys[-2:]
    near = [k + d for k in picked for d in (-1, 0, 1)]
    low, high = (keys[0], keys[-1]) if keys else (0, 0)
    return [*near, low - 5, high + 5, *extra]


entry_counts = st.one_of(st.integers(0, 12), st.integers(600, 3000))


@settings(max_examples=60, deadline=None)
@given(
    n=entry_counts,
    seed=st.integers(0, 2**32 - 1),
    gap_max=st.integers(1, 1000),
    extra=st.lists(st.integers(-10, 3_000_000), max_size=20),
)
def test_offset_index_search_matches_brute_force_model(
    n: int, seed: int, gap_max: int, extra: list[int]
) -> None:
    rng = random.Random(seed)
    base_offset = rng.randint(0, 10**12)
    relative_offsets = [r - 1 for r in increasing(rng, n, 0, gap_max)]
    positions = increasing(rng, n, -1, 5000)
    offsets = [base_offset + r for r in relative_offsets]
    with tempfile.TemporaryDirectory() as tmp:
        index = OffsetIndex.open(REAL_FS, os.path.join(tmp, "i"), base_offset, 8 * (n + 1))
        for offset, position in zip(offsets, positions, strict=True):
            index.append(offset, position)
        for target in probe_targets(rng, relative_offsets, extra):
            slot = model_lower(relative_offsets, target)
            expected = (offsets[slot], positions[slot]) if slot >= 0 else (base_offset, 0)
            assert index.lookup(base_offset + target) == expected
            assert index._slot_for(target, index.KEY, smallest_upper_bound=False) == slot
            upper = model_upper(relative_offsets, target)
            assert index._slot_for(target, index.KEY, smallest_upper_bound=True) == upper
        for target in probe_targets(rng, positions, extra):
            upper = model_upper(positions, target)
            bound = index.fetch_upper_bound_offset(target, 0)
            assert bound == (None if upper < 0 else (offsets[upper], positions[upper]))
        index.close()


@settings(max_examples=60, deadline=None)
@given(
    n=entry_counts,
    seed=st.integers(0, 2**32 - 1),
    gap_max=st.integers(1, 10**9),
    extra=st.lists(st.integers(-(2**40), 2**40), max_size=20),
)
def test_time_index_search_matches_brute_force_model(
    n: int, seed: int, gap_max: int, extra: list[int]
) -> None:
    rng = random.Random(seed)
    base_offset = rng.randint(0, 10**6)
    timestamps = increasing(rng, n, rng.randint(-1, 2**40), gap_max)
    relative_offsets = [r - 1 for r in increasing(rng, n, 0, 50)]
    with tempfile.TemporaryDirectory() as tmp:
        index = TimeIndex.open(REAL_FS, os.path.join(tmp, "t"), base_offset, 12 * (n + 1))
        for timestamp, relative in zip(timestamps, relative_offsets, strict=True):
            assert index.maybe_append(timestamp, base_offset + relative)
        for target in probe_targets(rng, timestamps, extra):
            slot = model_lower(timestamps, target)
            expected = (
                (timestamps[slot], base_offset + relative_offsets[slot])
                if slot >= 0
                else (NO_TIMESTAMP, base_offset)
            )
            assert index.lookup(target) == expected
            assert index._slot_for(target, index.KEY, smallest_upper_bound=False) == slot
            upper = model_upper(timestamps, target)
            assert index._slot_for(target, index.KEY, smallest_upper_bound=True) == upper
        for target in probe_targets(rng, relative_offsets, []):
            assert index._slot_for(target, index.VALUE, smallest_upper_bound=False) == (
                model_lower(relative_offsets, target)
            )
        index.close()


@settings(max_examples=40, deadline=None)
@given(n=entry_counts, seed=st.integers(0, 2**32 - 1), cut=st.integers(-5, 200_000))
def test_truncate_to_keeps_exactly_the_entries_below_the_cut(n: int, seed: int, cut: int) -> None:
    rng = random.Random(seed)
    offsets = [o - 1 for o in increasing(rng, n, 0, 60)]
    with tempfile.TemporaryDirectory() as tmp:
        index = OffsetIndex.open(REAL_FS, os.path.join(tmp, "i"), 0, 8 * (n + 1))
        for position, offset in enumerate(offsets):
            index.append(offset, position)
        index.truncate_to(cut)
        assert index.entries == bisect.bisect_left(offsets, cut)
        assert index.last_offset == (offsets[index.entries - 1] if index.entries else 0)
        index.close()
