"""The log cleaner (Kafka's LogCleaner rules): what a cleaning keeps, where it stops, how batches
are rewritten, the clean offset and offset gaps in reads, recovery and follower appends, and how
a cleaning is aborted."""

from __future__ import annotations

import os
import tracemalloc
from pathlib import Path

import pytest

from replog.clock import ManualClock
from replog.errors import CorruptRecordError, InvalidOffsetError, InvalidRecordError
from replog.log import (
    decode_records,
    encode_batch,
    iter_batches,
    read_header,
    validate_batch,
)
from replog.log.batch_rewrite import delete_horizon_ms
from replog.log.checkpoints import CLEANER_OFFSET_CHECKPOINT_FILE
from replog.log.cleaner import PRODUCER_ID_EXPIRATION_MS, SourceSegment, group_segments_by_size
from replog.log.config import LogConfig
from replog.log.fault_fs import FaultInjectingFileSystem
from replog.log.log import Log
from replog.log.log_cleaner import CleaningResult, LogCleanerManager, complete_cleaning, measure
from replog.log.offset_map import ENTRY_BYTES, OffsetMap, key_digest
from replog.topics import TopicPartition
from tests.log.compaction_support import (
    COMPACT,
    append,
    clean,
    commit,
    latest_by_key,
    open_log,
    plan,
    served,
)


@pytest.fixture
def fs(tmp_path: Path) -> FaultInjectingFileSystem:
    return FaultInjectingFileSystem(str(tmp_path), seed=5)


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(1_000)


def _keyed_log(
    fs: FaultInjectingFileSystem, clock: ManualClock, count: int = 60, keys: int = 7
) -> tuple[Log, list[tuple[int, bytes, bytes]]]:
    """A compacted log of ``count`` one-record batches over ``keys`` keys, committed."""
    log = open_log(fs, fs.root, clock=clock)
    written = []
    for i in range(count):
        key, value = b"k%d" % (i % keys), b"v%d" % i
        written.append((append(log, [(key, value)], clock=clock), key, value))
    commit(log)
    return log, written


def _batch_headers(log: Log) -> list[tuple[int, int, int]]:
    """(base offset, last offset, record count) of every batch served."""
    out = []
    for data in log.batches():
        for _, header in iter_batches(data):
            out.append((header.base_offset, header.last_offset, header.records_count))
    return out


# -- what a cleaning keeps ----------------------------------------------------------------------


def test_cleaning_keeps_the_latest_record_of_each_key_at_its_offset(
    fs: FaultInjectingFileSystem, clock: ManualClock
) -> None:
    log, _ = _keyed_log(fs, clock)
    active_base = log.active_segment.base_offset
    before = served(log)

    assert clean(log, clock) is CleaningResult.SWAPPED

    after = served(log)
    below = latest_by_key([r for r in before if r[0] < active_base])
    # Below the active segment: exactly the last record of each key there, at its offset. The
    # active segment is never cleaned.
    assert [r for r in after if r[0] < active_base] == sorted(below.values())
    assert [r for r in after if r[0] >= active_base] == [r for r in before if r[0] >= active_base]
    assert latest_by_key(after) == latest_by_key(before)
    assert log.clean_offset == active_base
    checkpoint = (Path(fs.root) / CLEANER_OFFSET_CHECKPOINT_FILE).read_text()
    assert checkpoint == f"0\n1\ntopic 0 {active_base}\n"  # Kafka's offset checkpoint format
    assert not [n for n in os.listdir(log.dir_path) if ".cleaned" in n or ".swap" in n]


def test_an_untouched_batch_is_copied_byte_for_byte_and_a_cut_one_keeps_its_offsets(
    fs: FaultInjectingFileSystem, clock: ManualClock
) -> None:
    log = open_log(fs, fs.root, clock=clock)
    append(log, [(b"a", b"1"), (b"b", b"2"), (b"c", b"3")], clock=clock)  # offsets 0-2
    append(log, [(b"x", b"kept whole")], clock=clock)  # 3
    append(log, [(b"b", b"4")], clock=clock)  # 4: b's latest
    whole = len(encode_batch([b"kept whole"], keys=[b"x"], base_timestamp=0))
    original = log.read(3, 1 << 20).to_bytes()[:whole]
    log.roll()
    append(log, [(b"z", b"active")], clock=clock)
    commit(log)

    assert clean(log, clock) is CleaningResult.SWAPPED

    assert _batch_headers(log)[:3] == [(0, 2, 2), (3, 3, 1), (4, 4, 1)]
    assert [r[:2] for r in served(log)] == [(0, b"a"), (2, b"c"), (3, b"x"), (4, b"b"), (5, b"z")]
    assert log.read(3, 1 << 20).to_bytes().startswith(original)


def test_a_batch_emptied_by_cleaning_goes_unless_it_ends_the_cleaned_offsets(
    fs: FaultInjectingFileSystem, clock: ManualClock
) -> None:
    """An emptied batch goes, except the one whose next offset is the first uncleanable offset:
    Kafka keeps it as an empty header so the end of the cleaned offsets stays visible."""
    log = open_log(fs, fs.root, clock=clock)
    for value in (b"1", b"2", None):
        append(log, [(b"k", value)], clock=clock)  # 0, 1, 2: a tombstone last
    log.roll()
    append(log, [(b"z", b"active")], clock=clock)  # 3
    commit(log)

    clean(log, clock)
    assert _batch_headers(log) == [(2, 2, 1), (3, 3, 1)]  # 0 and 1 emptied: gone

    clock.advance(COMPACT.delete_retention_ms)  # the tombstone may go now
    clean(log, clock)  # the first uncleanable offset is still 3
    assert _batch_headers(log) == [(2, 2, 0), (3, 3, 1)]  # empty, but offset 2 stays
    assert served(log) == [(3, b"z", b"active")]
    assert log.read(0, 1 << 20).start_offset == 0  # a read below skips to the empty batch

    log.roll()
    append(log, [(b"y", b"active 2")], clock=clock)
    commit(log)
    clean(log, clock)
    assert _batch_headers(log) == [(3, 3, 1), (4, 4, 1)]  # no longer at the end: gone


def test_tombstones_stay_for_delete_retention_ms_after_their_first_cleaning(
    fs: FaultInjectingFileSystem, clock: ManualClock
) -> None:
    log = open_log(fs, fs.root, clock=clock)
    append(log, [(b"gone", b"value"), (b"kept", b"value")], clock=clock)
    append(log, [(b"gone", None)], clock=clock)  # offset 2: a tombstone
    log.roll()
    append(log, [(b"a", b"1")], clock=clock)
    commit(log)

    clean(log, clock)
    horizon = clock.wall_ms() + COMPACT.delete_retention_ms
    assert [r[:3] for r in served(log)] == [
        (1, b"kept", b"value"),
        (2, b"gone", None),
        (3, b"a", b"1"),
    ]
    tombstone = read_header(log.read(2, 1 << 20).to_bytes())
    assert delete_horizon_ms(tombstone) == horizon  # set by the first cleaning

    clock.advance(COMPACT.delete_retention_ms - 1)  # still inside the horizon
    log.roll()
    append(log, [(b"b", b"2")], clock=clock)
    commit(log)
    clean(log, clock)
    assert (2, b"gone", None) in served(log)
    assert delete_horizon_ms(read_header(log.read(2, 1 << 20).to_bytes())) == horizon

    clock.advance(1)  # the horizon is reached: the next cleaning drops the tombstone
    log.roll()
    append(log, [(b"c", b"3")], clock=clock)
    commit(log)
    clean(log, clock)
    assert [r[1] for r in served(log)] == [b"kept", b"a", b"b", b"c"]


def test_a_tombstone_kept_in_a_rewritten_batch_keeps_record_timestamps(
    fs: FaultInjectingFileSystem, clock: ManualClock
) -> None:
    log = open_log(fs, fs.root, clock=clock)
    batch = encode_batch(
        [b"old", None, b"v"],
        keys=[b"a", b"b", b"c"],
        base_timestamp=500,
        timestamps=[500, 700, 900],
    )
    log.append_as_leader(batch, 0)
    append(log, [(b"a", b"new")], clock=clock)
    log.roll()
    append(log, [(b"z", b"active")], clock=clock)
    commit(log)
    clean(log, clock)
    data = log.read(0, 1 << 20).to_bytes()
    header = validate_batch(data)
    assert (header.base_offset, header.last_offset, header.records_count) == (0, 2, 2)
    assert header.max_timestamp == 900 and delete_horizon_ms(header) is not None
    assert [(r.offset, r.timestamp, r.value) for r in decode_records(data)] == [
        (1, 700, None),
        (2, 900, b"v"),
    ]


# -- keys ----------------------------------------------------------------------------------------


def test_a_compacted_log_refuses_records_without_a_key(
    fs: FaultInjectingFileSystem, clock: ManualClock
) -> None:
    log = open_log(fs, fs.root, clock=clock)
    append(log, [(b"k", b"v")], clock=clock)
    for items in ([(None, b"v")], [(b"k", b"v"), (None, b"v")]):
        with pytest.raises(InvalidRecordError, match="without a key"):
            append(log, items, clock=clock)
    assert log.log_end_offset == 1
    plain = open_log(fs, fs.root, LogConfig(), clock=clock, name="plain-0")
    append(plain, [(None, b"v")], clock=clock)  # a delete-policy log takes them


def test_records_without_a_key_from_before_the_policy_changed_are_cleaned_away(
    fs: FaultInjectingFileSystem, clock: ManualClock
) -> None:
    log = open_log(fs, fs.root, LogConfig(segment_bytes=600, segment_index_bytes=4096), clock=clock)
    append(log, [(None, b"keyless"), (b"k", b"v")], clock=clock)
    log.close()
    log = open_log(fs, fs.root, clock=clock, had_clean_shutdown=True)
    log.roll()
    append(log, [(b"z", b"active")], clock=clock)
    commit(log)
    clean(log, clock)
    assert served(log) == [(1, b"k", b"v"), (2, b"z", b"active")]


# -- what is cleanable ---------------------------------------------------------------------------


def test_the_active_segment_the_high_watermark_and_the_recovery_point_bound_a_cleaning(
    fs: FaultInjectingFileSystem, clock: ManualClock
) -> None:
    log, _ = _keyed_log(fs, clock)
    bases = list(log.segments)
    log.update_high_watermark(bases[3] + 1)  # inside the 4th segment: it is not cleaned
    measured = measure(log, clock.wall_ms())
    assert measured.first_uncleanable_offset == bases[3]
    log.update_high_watermark(log.log_end_offset)
    log.recovery_point = bases[2]
    assert measure(log, clock.wall_ms()).first_uncleanable_offset == bases[2]
    log.flush()
    assert measure(log, clock.wall_ms()).first_uncleanable_offset == bases[-1]  # active


def test_min_compaction_lag_keeps_young_segments_dirty(
    fs: FaultInjectingFileSystem, clock: ManualClock
) -> None:
    config = LogConfig(
        segment_bytes=600, segment_index_bytes=4096, cleanup_policy="compact",
        min_compaction_lag_ms=10_000,
    )  # fmt: skip
    log = open_log(fs, fs.root, config, clock=clock)
    for i in range(20):
        append(log, [(b"k", b"old %d" % i)], clock=clock)
    clock.advance(10_000)
    young = log.roll().base_offset
    for i in range(20):
        append(log, [(b"k", b"young %d" % i)], clock=clock)
    log.roll()
    append(log, [(b"z", b"active")], clock=clock)
    commit(log)
    measured = measure(log, clock.wall_ms())
    assert measured.first_uncleanable_offset == young


def test_max_compaction_lag_makes_a_barely_dirty_log_due(
    fs: FaultInjectingFileSystem, clock: ManualClock
) -> None:
    config = LogConfig(
        segment_bytes=600, segment_index_bytes=4096, cleanup_policy="compact",
        min_cleanable_dirty_ratio=0.99, max_compaction_lag_ms=60_000,
    )  # fmt: skip
    log = open_log(fs, fs.root, config, clock=clock)
    for i in range(30):
        append(log, [(b"k%d" % i, b"v")], clock=clock)
    log.roll()
    append(log, [(b"k0", b"dirty")], clock=clock)  # a little dirty data after a cleaning
    commit(log)
    clean(log, clock)
    log.roll()
    append(log, [(b"z", b"active")], clock=clock)
    commit(log)
    manager = LogCleanerManager()
    tp = TopicPartition("topic", 0)
    assert manager.maybe_begin({tp: log}, clock.wall_ms(), 1 << 20) is None  # ratio too low
    clock.advance(60_001)
    task = manager.maybe_begin({tp: log}, clock.wall_ms(), 1 << 20)
    assert task is not None and measure(log, clock.wall_ms()).needs_compaction_now
    task.run()
    assert manager.complete({tp: log}, task) is CleaningResult.SWAPPED


def test_the_dirtiest_log_is_cleaned_first(
    fs: FaultInjectingFileSystem, clock: ManualClock
) -> None:
    logs = {}
    for partition, repeats in ((0, 2), (1, 8), (2, 4)):
        log = open_log(fs, fs.root, clock=clock, name=f"topic-{partition}")
        for i in range(40):
            append(log, [(b"k%d" % (i // repeats), b"v%d" % i)], clock=clock)
        log.roll()
        append(log, [(b"z", b"active")], clock=clock)
        commit(log)
        logs[TopicPartition("topic", partition)] = log
    clean(logs[TopicPartition("topic", 0)], clock)  # partition 0 is now mostly clean
    manager = LogCleanerManager()
    order = []
    while (task := manager.maybe_begin(logs, clock.wall_ms(), 1 << 20)) is not None:
        order.append(next(tp for tp, log in logs.items() if log.cleaning is task).partition)
        task.run()
        manager.complete(logs, task)
    assert order[:2] == [1, 2]
    plain = open_log(fs, fs.root, LogConfig(), clock=clock, name="plain-0")
    assert (
        manager.maybe_begin({TopicPartition("plain", 0): plain}, clock.wall_ms(), 1 << 20) is None
    )


# -- bounded memory ------------------------------------------------------------------------------


def test_a_full_offset_map_cleans_what_it_mapped_and_the_next_round_goes_on(
    fs: FaultInjectingFileSystem, clock: ManualClock
) -> None:
    log = open_log(fs, fs.root, clock=clock)
    for i in range(120):
        append(log, [(b"k%03d" % i, b"first")], clock=clock)  # 120 distinct keys
    for i in range(120):
        append(log, [(b"k%03d" % i, b"second")], clock=clock)
    log.roll()
    append(log, [(b"z", b"active")], clock=clock)
    commit(log)
    small = 112 * ENTRY_BYTES  # room for 100 keys at the 0.9 load factor
    assert OffsetMap.for_memory(small).capacity == 100

    task = plan(log, clock, small)
    task.run()
    assert task.outcome is not None
    first_end = task.outcome.end_offset
    assert first_end == 100  # the map filled after 100 keys: the cleaning ends there
    assert complete_cleaning(log, task) is CleaningResult.SWAPPED
    assert log.clean_offset == 100
    rounds = 1
    while measure(log, clock.wall_ms()).cleanable_bytes and rounds < 10:
        clean(log, clock, small)
        rounds += 1
    assert [r[2] for r in served(log)] == [b"second"] * 120 + [b"active"]
    assert rounds > 2


def test_the_offset_map_stays_within_its_memory() -> None:
    memory = 1 << 20
    offset_map = OffsetMap.for_memory(memory)
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        batch_size = 1000
        for start in range(0, offset_map.capacity, batch_size):
            count = min(batch_size, offset_map.capacity - start)
            offsets = list(range(start + 10**9, start + 10**9 + count))
            offset_map.put_digests([key_digest(b"key-%d" % o) for o in offsets], offsets)
        used = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert offset_map.is_full and offset_map.size == offset_map.capacity
    assert used <= memory, f"{offset_map.capacity} keys took {used} bytes"
    assert offset_map.get(b"key-%d" % (10**9 + 5)) == 10**9 + 5
    assert offset_map.get(b"absent") == -1


# -- producers -----------------------------------------------------------------------------------


def test_the_last_batch_of_an_active_producer_stays_as_an_empty_header(
    fs: FaultInjectingFileSystem, clock: ManualClock
) -> None:
    """Kafka keeps the last batch of each active producer (its sequence numbers) even when the
    cleaner removed all its records; a producer expires after producer.id.expiration.ms."""
    log = open_log(fs, fs.root, clock=clock)
    append(log, [(b"k", b"1")], clock=clock, producer_id=7, producer_epoch=0, base_sequence=0)
    append(log, [(b"j", b"1")], clock=clock, producer_id=8, producer_epoch=2, base_sequence=5)
    clock.advance(1)
    append(log, [(b"k", b"2"), (b"j", b"2")], clock=clock)  # no producer id
    log.roll()
    append(log, [(b"z", b"active")], clock=clock)
    commit(log)
    clock.advance(PRODUCER_ID_EXPIRATION_MS - 1)  # the producers wrote a day ago: still active

    clean(log, clock)

    headers = [h for _, h in iter_batches(log.read(0, 1 << 20).to_bytes())]
    assert [
        (h.base_offset, h.last_offset, h.records_count, h.producer_id, h.producer_epoch,
         h.base_sequence)
        for h in headers
    ] == [(0, 0, 0, 7, 0, 0), (1, 1, 0, 8, 2, 5), (2, 3, 2, -1, -1, -1)]  # fmt: skip
    clock.advance(1)  # now both expired: their empty batches go at the next cleaning
    log.roll()
    append(log, [(b"y", b"x")], clock=clock)
    commit(log)
    clean(log, clock)
    assert _batch_headers(log)[0] == (2, 3, 2)


# -- grouping ------------------------------------------------------------------------------------


def _source(base: int, size: int, index_bytes: int = 0) -> SourceSegment:
    return SourceSegment(base, base + 10, size, index_bytes, index_bytes, 0)


def test_segments_are_grouped_within_segment_and_index_sizes() -> None:
    sources = [_source(0, 300), _source(10, 200), _source(20, 200), _source(30, 500)]
    groups = group_segments_by_size(sources, 700, 4096, 40)
    assert [[s.base_offset for s in group] for group in groups] == [[0, 10, 20], [30]]
    by_index = group_segments_by_size(
        [_source(0, 10, 40), _source(10, 10, 40), _source(20, 10, 40)], 10**6, 100, 30
    )
    assert [[s.base_offset for s in group] for group in by_index] == [[0], [10], [20]]
    wide = [_source(0, 10), SourceSegment(2**31 + 5, 2**31 + 10, 10, 0, 0, 0)]
    assert len(group_segments_by_size(wide, 10**6, 4096, 2**31 + 10)) == 2


def test_repeated_cleanings_merge_small_segments(
    fs: FaultInjectingFileSystem, clock: ManualClock
) -> None:
    log, _ = _keyed_log(fs, clock, count=120, keys=5)
    before = len(log.segments)
    clean(log, clock)
    clean(log, clock)
    assert len(log.segments) < before / 3
    for segment in log.segments.values():
        assert segment.size_bytes <= COMPACT.segment_bytes


# -- the clean offset and offset gaps ------------------------------------------------------------


def test_reads_step_over_offsets_the_cleaner_removed(
    fs: FaultInjectingFileSystem, clock: ManualClock
) -> None:
    """A read at any offset returns the first record at or after it: inside a segment, and
    from the next segment when the cleaner emptied the end of one (no live record skipped)."""
    log, _ = _keyed_log(fs, clock)
    clean(log, clock)
    records = served(log)
    for start in range(log.log_start_offset, log.log_end_offset):
        got = _decode(log.read(start, 1 << 20).to_bytes())
        assert got, start
        assert next(r for r in got if r[0] >= start) == next(r for r in records if r[0] >= start)
    # A consumer bounded by a high watermark inside a gap gets nothing, not an error.
    present = {r[0] for r in records}
    gap = next(o for o in range(log.log_end_offset) if o not in present)
    assert log.read(gap, 1 << 20, max_offset=gap + 1).size_bytes == 0


def _decode(data: bytes) -> list[tuple[int, bytes | None, bytes | None]]:
    return [
        (r.offset, r.key, r.value)
        for position, _ in iter_batches(data)
        for r in decode_records(data, position)
    ]


def test_a_cleaned_log_recovers_with_its_gaps_after_a_crash(
    fs: FaultInjectingFileSystem, clock: ManualClock
) -> None:
    log, _ = _keyed_log(fs, clock)
    clean(log, clock)
    expected = served(log)
    fs.crash(tear=True)
    log.abandon()
    reopened = open_log(fs, fs.root, clock=clock, recovery_point=0)
    assert not reopened.recovery_report.cut_anything, reopened.recovery_report.describe()
    assert served(reopened) == expected
    assert reopened.clean_offset == log.clean_offset


def test_a_gap_above_the_clean_offset_is_still_damage(
    fs: FaultInjectingFileSystem, clock: ManualClock
) -> None:
    """Offsets missing where nothing was cleaned are what a crash or a bad disk left: recovery
    cuts there (the dense check holds above the clean offset)."""
    log, _ = _keyed_log(fs, clock)
    clean(log, clock)
    for i in range(40):
        append(log, [(b"k", b"more %d" % i)], clock=clock)
    log.flush()
    bases = list(log.segments)
    later = [b for b in bases if b > log.clean_offset][1]
    path = f"{log.dir_path}/{later:020d}.log"
    with open(path, "r+b") as f:  # the segment's first batch claims a later base offset
        f.write((later + 1).to_bytes(8, "big"))
    log.close()
    reopened = open_log(fs, fs.root, clock=clock, recovery_point=0)
    assert reopened.recovery_report.truncated_segment == later
    assert reopened.log_end_offset == later


def test_a_follower_takes_a_compacted_leaders_gaps_and_keeps_them_through_a_crash(
    fs: FaultInjectingFileSystem, clock: ManualClock
) -> None:
    leader, _ = _keyed_log(fs, clock)
    clean(leader, clock)
    follower = open_log(fs, fs.root, clock=clock, name="topic-1")
    while follower.log_end_offset < leader.log_end_offset:
        follower.append_as_follower(leader.read(follower.log_end_offset, 300).to_bytes())
    assert served(follower) == served(leader)
    assert _batch_headers(follower) == _batch_headers(leader)
    assert follower.clean_offset > 0  # made durable before the gapped batches were appended
    checkpoint = (Path(fs.root) / CLEANER_OFFSET_CHECKPOINT_FILE).read_text()
    assert f"topic 1 {follower.clean_offset}\n" in checkpoint
    expected = served(leader)
    fs.crash(tear=True)
    follower.abandon()
    leader.abandon()
    reopened = open_log(fs, fs.root, clock=clock, name="topic-1", recovery_point=0)
    records = served(reopened)
    assert records == expected[: len(records)]
    assert len(records) >= len([r for r in expected if r[0] < reopened.clean_offset])
    assert reopened.log_end_offset >= reopened.clean_offset


def test_a_follower_gap_needs_a_log_that_can_record_its_clean_offset(
    fs: FaultInjectingFileSystem, clock: ManualClock
) -> None:
    log = Log.open(f"{fs.root}/unnamed", COMPACT, fs=fs, clock=clock)
    log.append_as_follower(encode_batch([b"a"], keys=[b"k"], base_timestamp=1))
    with pytest.raises(InvalidOffsetError, match="clean offset"):
        log.append_as_follower(encode_batch([b"b"], keys=[b"k"], base_timestamp=1, base_offset=5))
    assert log.log_end_offset == 1


def test_truncating_below_the_clean_offset_lowers_it_durably(
    fs: FaultInjectingFileSystem, clock: ManualClock
) -> None:
    log, _ = _keyed_log(fs, clock)
    clean(log, clock)
    target = log.clean_offset - 5
    log.truncate_to(target)
    assert log.clean_offset == log.log_end_offset <= target
    assert (
        (Path(fs.root) / CLEANER_OFFSET_CHECKPOINT_FILE)
        .read_text()
        .endswith(f"topic 0 {log.log_end_offset}\n")
    )


def test_a_clean_offset_past_the_log_end_is_lowered_at_open(
    fs: FaultInjectingFileSystem, clock: ManualClock
) -> None:
    (Path(fs.root) / CLEANER_OFFSET_CHECKPOINT_FILE).write_text("0\n1\ntopic 0 500\n")
    log = open_log(fs, fs.root, clock=clock)
    assert log.clean_offset == 0 and log.clean_from_log_start
    assert (Path(fs.root) / CLEANER_OFFSET_CHECKPOINT_FILE).read_text() == "0\n1\ntopic 0 0\n"


# -- aborts and failures -------------------------------------------------------------------------


@pytest.mark.parametrize("change", ["truncate", "retention", "close"])
def test_a_log_changed_under_a_cleaning_discards_it(
    fs: FaultInjectingFileSystem, clock: ManualClock, change: str
) -> None:
    config = LogConfig(
        segment_bytes=600, segment_index_bytes=4096, cleanup_policy="compact,delete",
        retention_bytes=1500,
    )  # fmt: skip
    log = open_log(fs, fs.root, config, clock=clock)
    for i in range(60):
        append(log, [(b"k%d" % (i % 7), b"v%d" % i)], clock=clock)
    commit(log)
    before = served(log)
    task = plan(log, clock)
    task.run()  # the pass ran (or was running) when the log changed
    if change == "truncate":
        log.truncate_to(30)
    elif change == "retention":
        assert log.delete_old_segments() > 0
    else:
        log.close()
        log = open_log(fs, fs.root, config, clock=clock, had_clean_shutdown=True)
    assert task.aborted
    assert complete_cleaning(log, task) is CleaningResult.DISCARDED
    assert not [n for n in os.listdir(log.dir_path) if n.endswith(".cleaned")]
    assert log.clean_offset == 0
    assert served(log) == [r for r in before if log.log_start_offset <= r[0] < log.log_end_offset]


def test_a_pass_aborted_midway_creates_no_more_files(
    fs: FaultInjectingFileSystem, clock: ManualClock
) -> None:
    log, _ = _keyed_log(fs, clock)
    task = plan(log, clock)
    log.truncate_to(40)  # aborts before the pass even starts
    task.run()
    assert task.error is not None and task.outcome is None
    assert not [n for n in os.listdir(log.dir_path) if ".cleaned" in n]
    assert complete_cleaning(log, task) is CleaningResult.DISCARDED


def test_a_damaged_batch_fails_the_cleaning_and_the_log_becomes_uncleanable(
    fs: FaultInjectingFileSystem, clock: ManualClock
) -> None:
    log, _ = _keyed_log(fs, clock)
    path = f"{log.dir_path}/{0:020d}.log"
    with open(path, "r+b") as f:
        f.seek(70)
        byte = f.read(1)
        f.seek(70)
        f.write(bytes([byte[0] ^ 0x10]))  # inside the first batch's records: its CRC fails
    manager = LogCleanerManager()
    tp = TopicPartition("topic", 0)
    task = manager.maybe_begin({tp: log}, clock.wall_ms(), 1 << 20)
    assert task is not None
    task.run()
    assert isinstance(task.error, CorruptRecordError)
    assert manager.complete({tp: log}, task) is CleaningResult.FAILED
    assert tp in manager.uncleanable
    assert manager.maybe_begin({tp: log}, clock.wall_ms(), 1 << 20) is None
    assert not [n for n in os.listdir(log.dir_path) if ".cleaned" in n]
