"""`Log`: appends as leader and follower, reads, truncation, flush, offline on IO errors, roll
triggers and retention (which never deletes a segment reaching past the HW)."""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from pathlib import Path

import pytest

from replog.clock import ManualClock
from replog.errors import (
    CorruptRecordError,
    FencedLeaderEpochError,
    InvalidOffsetError,
    OffsetOutOfRangeError,
    RecordBatchTooLargeError,
    StorageError,
)
from replog.log import (
    NO_TIMESTAMP,
    EpochEntry,
    FaultInjectingFileSystem,
    Log,
    LogConfig,
    decode_records,
    encode_batch,
    iter_batches,
    offset_for_timestamp,
    offset_of_max_timestamp,
    validate_batch,
)

DAY_MS = 24 * 3600 * 1000


@pytest.fixture
def fs(tmp_path: Path) -> FaultInjectingFileSystem:
    return FaultInjectingFileSystem(str(tmp_path), seed=3)


def _open(
    fs: FaultInjectingFileSystem,
    config: LogConfig | None = None,
    *,
    clock: ManualClock | None = None,
    **kwargs: int,
) -> Log:
    """The log under test; its clock's wall time starts at 0 unless ``clock`` is given."""
    clock = clock or ManualClock(wall_offset_ms=0)
    return Log.open(f"{fs.root}/topic-0", config or LogConfig(), fs=fs, clock=clock, **kwargs)


def _batch(
    values: Sequence[bytes], *, timestamp: int = 1000, base_offset: int = 0, epoch: int = -1
) -> bytes:
    return encode_batch(
        list(values),
        base_timestamp=timestamp,
        base_offset=base_offset,
        partition_leader_epoch=epoch,
    )


def _batch_of_size(size_bytes: int, *, timestamp: int = 1000) -> bytes:
    """One single-record batch of exactly ``size_bytes`` bytes."""
    for value_bytes in range(size_bytes):
        data = _batch([b"v" * value_bytes], timestamp=timestamp)
        if len(data) == size_bytes:
            return data
    raise AssertionError(f"no batch of exactly {size_bytes} bytes")


def _big_follower_batch(size_bytes: int, base_offset: int) -> bytes:
    data = bytearray(_batch_of_size(size_bytes))
    data[0:8] = base_offset.to_bytes(8, "big")  # outside the CRC
    return bytes(data)


def _values(data: bytes) -> list[tuple[int, bytes | None]]:
    """(offset, value) of every record in the whole batches of ``data``."""
    found = []
    for position, _ in iter_batches(data):
        found += [(r.offset, r.value) for r in decode_records(data, position)]
    return found


def _all_values(log: Log) -> list[tuple[int, bytes | None]]:
    return [pair for batch in log.batches() for pair in _values(batch)]


def _fill(log: Log, records: int, *, per_batch: int = 1, timestamp: int = 1000) -> None:
    """Append ``records`` records as leader at epoch 0, ``per_batch`` per batch."""
    for _ in range(records // per_batch):
        first = log.log_end_offset
        values = [b"r%d" % (first + i) for i in range(per_batch)]
        log.append_as_leader(_batch(values, timestamp=timestamp), leader_epoch=0)


# -- append as leader --------------------------------------------------------------------------


def test_append_as_leader_assigns_dense_offsets_and_stamps_the_epoch(
    fs: FaultInjectingFileSystem,
) -> None:
    log = _open(fs)
    first = log.append_as_leader(_batch([b"a", b"b"], base_offset=999), 5)
    second = log.append_as_leader(_batch([b"c"], base_offset=7, epoch=1), 5)

    assert (first.first_offset, first.last_offset) == (0, 1)
    assert (second.first_offset, second.last_offset) == (2, 2)
    assert log.log_end_offset == 3
    data = log.read(0, 1 << 20).to_bytes()
    headers = [validate_batch(data, position) for position, _ in iter_batches(data)]  # CRC ok
    assert [h.base_offset for h in headers] == [0, 2]
    assert [h.partition_leader_epoch for h in headers] == [5, 5]
    assert _values(data) == [(0, b"a"), (1, b"b"), (2, b"c")]
    assert log.epoch_cache.entries == [EpochEntry(5, 0)]


def test_append_as_leader_takes_several_batches_in_one_call(fs: FaultInjectingFileSystem) -> None:
    log = _open(fs)
    info = log.append_as_leader(_batch([b"a"]) + _batch([b"b", b"c"]), 0)
    assert (info.first_offset, info.last_offset, info.batch_count) == (0, 2, 2)
    assert _all_values(log) == [(0, b"a"), (1, b"b"), (2, b"c")]


def test_append_as_leader_with_a_new_epoch_starts_an_epoch_cache_entry(
    fs: FaultInjectingFileSystem,
) -> None:
    log = _open(fs)
    log.append_as_leader(_batch([b"a", b"b"]), 1)
    log.append_as_leader(_batch([b"c"]), 1)
    log.append_as_leader(_batch([b"d"]), 3)
    assert log.epoch_cache.entries == [EpochEntry(1, 0), EpochEntry(3, 3)]
    assert log.latest_epoch() == 3
    assert log.end_offset_for_epoch(1) == (1, 3)
    assert log.end_offset_for_epoch(3) == (3, 4)


def test_append_as_leader_rejects_corrupt_or_trailing_bytes_and_changes_nothing(
    fs: FaultInjectingFileSystem,
) -> None:
    log = _open(fs)
    log.append_as_leader(_batch([b"a"]), 0)
    corrupt = bytearray(_batch([b"payload"]))
    corrupt[-3] ^= 0x01
    with pytest.raises(CorruptRecordError):
        log.append_as_leader(corrupt, 0)
    with pytest.raises(CorruptRecordError):
        log.append_as_leader(_batch([b"b"]) + b"\x00\x01", 0)
    with pytest.raises(CorruptRecordError):
        log.append_as_leader(b"", 0)
    assert log.log_end_offset == 1
    assert _all_values(log) == [(0, b"a")]


@pytest.mark.parametrize("value_bytes", [10, 5000], ids=["small", "over-4KiB"])
def test_a_flipped_bit_anywhere_under_the_crc_is_refused_at_both_sizes(
    fs: FaultInjectingFileSystem, value_bytes: int
) -> None:
    """The producer-batch check reads the CRC'd bytes from a copy for small batches and from a
    view for large ones: both must see every byte from the attributes to the end."""
    log = _open(fs)
    good = _batch([b"v" * value_bytes])
    for at in (21, len(good) // 2, len(good) - 1):
        corrupt = bytearray(good)
        corrupt[at] ^= 0x01
        with pytest.raises(CorruptRecordError):
            log.append_as_leader(corrupt, 0)
    assert log.log_end_offset == 0
    log.append_as_leader(good, 0)
    assert _all_values(log) == [(0, b"v" * value_bytes)]


# -- append as follower ------------------------------------------------------------------------


def test_append_as_follower_keeps_offsets_and_updates_the_epoch_cache(
    fs: FaultInjectingFileSystem,
) -> None:
    log = _open(fs)
    fetched = (
        _batch([b"a", b"b"], base_offset=0, epoch=1)
        + _batch([b"c"], base_offset=2, epoch=1)
        + _batch([b"d", b"e"], base_offset=3, epoch=4)
    )
    info = log.append_as_follower(fetched)

    assert info is not None
    assert (info.first_offset, info.last_offset, info.batch_count) == (0, 4, 3)
    assert log.log_end_offset == 5
    assert log.read(0, 1 << 20).to_bytes() == fetched  # byte for byte, epochs kept
    assert log.epoch_cache.entries == [EpochEntry(1, 0), EpochEntry(4, 3)]


def test_append_as_follower_rejects_offsets_below_the_log_end(
    fs: FaultInjectingFileSystem,
) -> None:
    log = _open(fs)
    log.append_as_follower(_batch([b"a", b"b"], base_offset=0, epoch=0))
    with pytest.raises(InvalidOffsetError):
        log.append_as_follower(_batch([b"x"], base_offset=1, epoch=0))
    with pytest.raises(InvalidOffsetError):  # the second batch overlaps the first
        log.append_as_follower(
            _batch([b"c", b"d"], base_offset=2, epoch=0) + _batch([b"y"], base_offset=3)
        )
    assert log.log_end_offset == 2
    assert _all_values(log) == [(0, b"a"), (1, b"b")]


def test_append_as_follower_drops_a_trailing_partial_batch(fs: FaultInjectingFileSystem) -> None:
    log = _open(fs)
    whole = _batch([b"a"], base_offset=0, epoch=0)
    partial = _batch([b"b" * 100], base_offset=1, epoch=2)[:70]
    info = log.append_as_follower(whole + partial)
    assert info is not None and info.last_offset == 0
    assert log.log_end_offset == 1
    assert log.read(0, 1 << 20).to_bytes() == whole
    assert log.epoch_cache.entries == [EpochEntry(0, 0)]  # nothing from the partial batch
    assert log.append_as_follower(partial) is None


def test_append_as_follower_refuses_what_recovery_would_cut(fs: FaultInjectingFileSystem) -> None:
    """Offsets going back, or a falling leader epoch (-1 after an epoch counts), would end the
    log at the next recovery, so neither is appended; the log is unchanged. (A gap forward is
    a compacted leader's: see test_cleaner.py.)"""
    log = _open(fs)
    log.append_as_follower(_batch([b"a", b"b"], base_offset=0, epoch=3))
    with pytest.raises(InvalidOffsetError):
        log.append_as_follower(_batch([b"back"], base_offset=1, epoch=3))
    for epoch in (2, -1):
        with pytest.raises(CorruptRecordError, match="epoch"):
            log.append_as_follower(_batch([b"c"], base_offset=2, epoch=epoch))
    with pytest.raises(CorruptRecordError, match="epoch"):  # a fall inside one fetch
        log.append_as_follower(
            _batch([b"c"], base_offset=2, epoch=4) + _batch([b"d"], base_offset=3, epoch=3)
        )
    assert log.log_end_offset == 2
    assert log.epoch_cache.entries == [EpochEntry(3, 0)]


def test_append_as_follower_follows_an_epoch_assigned_without_writes(
    fs: FaultInjectingFileSystem,
) -> None:
    """A leader that wrote nothing in its epoch leaves an epoch-cache entry at the LEO; the
    next leader's batches may carry a lower epoch than that entry (not a fall: no batch of the
    higher epoch was written)."""
    log = _open(fs)
    log.append_as_follower(_batch([b"a"], base_offset=0, epoch=3))
    log.assign_epoch_start_offset(5, 1)

    log.append_as_follower(_batch([b"b"], base_offset=1, epoch=4))

    assert log.log_end_offset == 2
    assert log.epoch_cache.entries == [EpochEntry(3, 0), EpochEntry(4, 1)]


def test_append_as_leader_refuses_an_epoch_below_the_last_batch(
    fs: FaultInjectingFileSystem,
) -> None:
    log = _open(fs)
    log.append_as_leader(_batch([b"a"]), 3)
    with pytest.raises(FencedLeaderEpochError):
        log.append_as_leader(_batch([b"b"]), 2)
    assert log.log_end_offset == 1
    assert log.append_as_leader(_batch([b"b"]), 4).first_offset == 1


# -- read --------------------------------------------------------------------------------------


def test_read_returns_at_most_max_bytes(fs: FaultInjectingFileSystem) -> None:
    log = _open(fs)
    batches = [_batch([b"x" * 40], timestamp=i) for i in range(5)]
    for data in batches:
        log.append_as_leader(data, 0)
    size = len(batches[0])

    two_and_a_half = log.read(0, 2 * size + size // 2, min_one_batch=False)
    assert two_and_a_half.size_bytes == 2 * size + size // 2
    assert [o for o, _ in _values(two_and_a_half.to_bytes())] == [0, 1]  # partial 3rd ignored
    # Without min_one_batch a first batch over max_bytes comes back partial (as in Kafka): the
    # reader gets no whole batch and must ask again with more room.
    too_small = log.read(0, size - 1, min_one_batch=False)
    assert too_small.size_bytes == size - 1
    assert _values(too_small.to_bytes()) == []


def test_read_with_min_one_batch_returns_a_whole_first_batch_larger_than_max_bytes(
    fs: FaultInjectingFileSystem,
) -> None:
    log = _open(fs)
    big = _batch([b"x" * 500])
    log.append_as_leader(big, 0)
    log.append_as_leader(_batch([b"y"]), 0)
    fetched = log.read(0, 10, min_one_batch=True)
    assert fetched.size_bytes == len(big)
    assert _values(fetched.to_bytes()) == [(0, b"x" * 500)]


def test_read_never_reaches_max_offset(fs: FaultInjectingFileSystem) -> None:
    """HW isolation: a consumer read bounded by the HW sees only committed batches."""
    log = _open(fs)
    _fill(log, 6, per_batch=2)  # batches [0,1] [2,3] [4,5]
    log.maybe_increment_high_watermark(4)

    committed = log.read(0, 1 << 20, max_offset=log.high_watermark)
    assert [o for o, _ in _values(committed.to_bytes())] == [0, 1, 2, 3]
    assert log.read(4, 1 << 20, max_offset=4).size_bytes == 0
    assert log.read(2, 1 << 20, max_offset=2).size_bytes == 0


def test_read_outside_log_start_and_log_end_raises_offset_out_of_range(
    fs: FaultInjectingFileSystem,
) -> None:
    log = _open(fs)
    _fill(log, 3)
    assert log.read(3, 1 << 20).size_bytes == 0  # at the LEO: nothing yet, not an error
    with pytest.raises(OffsetOutOfRangeError) as excinfo:
        log.read(4, 1 << 20)
    assert (excinfo.value.offset, excinfo.value.log_end_offset) == (4, 3)
    with pytest.raises(OffsetOutOfRangeError):
        log.read(-1, 1 << 20)


def test_read_below_the_log_start_raises_after_retention(fs: FaultInjectingFileSystem) -> None:
    log = _open(fs, LogConfig(segment_bytes=300, retention_ms=-1))
    _fill(log, 20)
    log.update_high_watermark(20)
    second_base = list(log.segments)[1]
    log.maybe_increment_log_start_offset(second_base)
    log.delete_old_segments()
    assert log.log_start_offset == second_base
    with pytest.raises(OffsetOutOfRangeError):
        log.read(second_base - 1, 1 << 20)
    assert _values(log.read(second_base, 1 << 20).to_bytes())[0] == (
        second_base,
        b"r%d" % second_base,
    )


def test_read_finds_an_offset_in_any_segment(fs: FaultInjectingFileSystem) -> None:
    log = _open(fs, LogConfig(segment_bytes=400, index_interval_bytes=100))
    _fill(log, 60)
    assert len(log.segments) > 5
    for offset in range(60):
        assert _values(log.read(offset, 1).to_bytes()) == [(offset, b"r%d" % offset)]


# -- truncation --------------------------------------------------------------------------------


def test_truncate_to_mid_segment_keeps_the_batches_before_the_offset(
    fs: FaultInjectingFileSystem,
) -> None:
    log = _open(fs, LogConfig(index_interval_bytes=50))
    _fill(log, 10, per_batch=2)
    log.append_as_leader(_batch([b"e1"]), 1)  # epoch 1 starts at offset 10
    assert log.epoch_cache.entries == [EpochEntry(0, 0), EpochEntry(1, 10)]
    log.update_high_watermark(11)
    log.flush()

    assert log.truncate_to(4) is True

    assert log.log_end_offset == 4
    assert [o for o, _ in _all_values(log)] == [0, 1, 2, 3]
    assert log.epoch_cache.entries == [EpochEntry(0, 0)]
    assert (log.high_watermark, log.recovery_point) == (4, 4)
    info = log.append_as_leader(_batch([b"again"]), 2)
    assert info.first_offset == 4
    assert _all_values(log)[-1] == (4, b"again")


def test_truncate_to_inside_a_batch_removes_the_whole_batch(fs: FaultInjectingFileSystem) -> None:
    log = _open(fs)
    _fill(log, 6, per_batch=3)
    log.truncate_to(4)
    assert log.log_end_offset == 3


def test_truncate_to_a_segment_boundary_deletes_later_segments(
    fs: FaultInjectingFileSystem,
) -> None:
    log = _open(fs, LogConfig(segment_bytes=300))
    _fill(log, 20)
    bases = list(log.segments)
    assert len(bases) >= 3
    cut = bases[1]

    log.truncate_to(cut)

    assert list(log.segments) == [bases[0], cut]
    assert log.active_segment.size_bytes == 0
    assert log.log_end_offset == cut
    names = os.listdir(log.dir_path)
    for base in bases[2:]:
        assert f"{base:020d}.log" not in names
    assert [o for o, _ in _all_values(log)] == list(range(cut))


def test_truncate_below_the_first_segment_restarts_the_log_at_the_offset(
    fs: FaultInjectingFileSystem,
) -> None:
    log = _open(fs, LogConfig(segment_bytes=300, retention_ms=-1))
    _fill(log, 20)
    log.update_high_watermark(20)
    first_kept = list(log.segments)[2]
    log.maybe_increment_log_start_offset(first_kept)
    log.delete_old_segments()
    assert log.segments.first_base == first_kept

    assert log.truncate_to(first_kept - 1) is True

    assert list(log.segments) == [first_kept - 1]
    assert log.log_end_offset == log.log_start_offset == first_kept - 1
    assert log.high_watermark == log.recovery_point == first_kept - 1
    assert log.epoch_cache.entries == []
    assert log.append_as_leader(_batch([b"x"]), 4).first_offset == first_kept - 1


def test_truncate_fully_and_start_at_empties_the_log(fs: FaultInjectingFileSystem) -> None:
    log = _open(fs, LogConfig(segment_bytes=300))
    _fill(log, 20)
    log.truncate_fully_and_start_at(100)
    assert list(log.segments) == [100]
    assert (log.log_start_offset, log.log_end_offset) == (100, 100)
    assert [name for name in os.listdir(log.dir_path) if name.endswith(".log")] == [
        f"{100:020d}.log"
    ]


def test_truncate_at_or_after_the_log_end_changes_no_data_but_drops_epoch_entries_from_the_end(
    fs: FaultInjectingFileSystem,
) -> None:
    log = _open(fs)
    _fill(log, 5)
    log.assign_epoch_start_offset(3, 5)  # a leader that never appended
    before = log.read(0, 1 << 20).to_bytes()

    assert log.truncate_to(5) is False
    assert log.epoch_cache.entries == [EpochEntry(0, 0)]
    log.assign_epoch_start_offset(4, 5)
    assert log.truncate_to(9) is False
    assert log.epoch_cache.entries == [EpochEntry(0, 0)]
    assert log.read(0, 1 << 20).to_bytes() == before
    assert log.log_end_offset == 5


def test_truncate_to_a_negative_offset_is_rejected(fs: FaultInjectingFileSystem) -> None:
    log = _open(fs)
    with pytest.raises(InvalidOffsetError):
        log.truncate_to(-1)


# -- high watermark ----------------------------------------------------------------------------


def test_update_high_watermark_clamps_to_log_start_and_log_end(
    fs: FaultInjectingFileSystem,
) -> None:
    log = _open(fs)
    _fill(log, 5)
    assert log.update_high_watermark(50) == 5
    assert log.update_high_watermark(2) == 2  # a follower's HW may go back
    assert log.maybe_increment_high_watermark(1) is False
    assert log.maybe_increment_high_watermark(4) is True
    assert log.high_watermark == 4


# -- flush and storage errors ------------------------------------------------------------------


def test_flush_advances_the_recovery_point_and_makes_the_data_durable(
    fs: FaultInjectingFileSystem,
) -> None:
    log = _open(fs, LogConfig(segment_bytes=300))
    _fill(log, 10)
    assert log.recovery_point == 0
    log.flush()
    assert log.recovery_point == 10
    _fill(log, 5)
    assert log.recovery_point == 10

    fs.crash(tear=False)
    log.abandon()
    reopened = _open(fs, LogConfig(segment_bytes=300), recovery_point=log.recovery_point)

    assert reopened.log_end_offset == 10
    assert _all_values(reopened) == [(o, b"r%d" % o) for o in range(10)]


def test_a_failing_fsync_takes_the_log_offline_for_good(fs: FaultInjectingFileSystem) -> None:
    log = _open(fs)
    _fill(log, 3)
    fs.fail_fsync(".log")

    with pytest.raises(StorageError, match="fsync"):
        log.flush()

    assert log.is_offline
    assert log.recovery_point == 0
    calls = [
        lambda: log.append_as_leader(_batch([b"x"]), 0),
        lambda: log.append_as_follower(_batch([b"x"], base_offset=3)),
        lambda: log.read(0, 100),
        log.flush,
        lambda: log.truncate_to(1),
        lambda: log.roll(),
        lambda: log.delete_old_segments(),
    ]
    for call in calls:
        with pytest.raises(StorageError, match="offline"):
            call()
    assert log.log_end_offset == 3


def _read_after_failing(fs: FaultInjectingFileSystem, log: Log) -> bytes:
    fetched = log.read(3, 100)
    fs.fail_read(".log", count=1000)
    return fetched.to_bytes()


READ_CALLS: dict[str, Callable[[FaultInjectingFileSystem, Log], object]] = {
    "read": lambda fs, log: log.read(3, 100),
    "fetch_slice_to_bytes": _read_after_failing,
    "batches": lambda fs, log: list(log.batches()),
    "append_as_leader": lambda fs, log: log.append_as_leader(_batch([b"x"]), 0),
    "roll": lambda fs, log: log.roll(),
    "truncate_to": lambda fs, log: log.truncate_to(3),
    "delete_old_segments": lambda fs, log: log.delete_old_segments(),
    "offset_for_timestamp": lambda fs, log: offset_for_timestamp(log, 1000, 20),
    "offset_of_max_timestamp": lambda fs, log: offset_of_max_timestamp(log, 20),
}


@pytest.mark.parametrize("call", sorted(READ_CALLS))
def test_a_failing_read_is_a_storage_error_from_every_method(
    fs: FaultInjectingFileSystem, call: str
) -> None:
    """Every OS error out of replog.log is a StorageError (the broker's loops catch only
    that); a method of the log also takes it offline."""
    config = LogConfig(segment_bytes=300, index_interval_bytes=60)
    log = _open(fs, config)
    _fill(log, 20, timestamp=1000)
    log.update_high_watermark(20)
    log.flush()
    log.close()
    reopened = _open(fs, config, had_clean_shutdown=True, high_watermark=20)
    if call != "fetch_slice_to_bytes":
        fs.fail_read(".log", count=1000)

    with pytest.raises(StorageError):
        READ_CALLS[call](fs, reopened)

    assert reopened.is_offline or call == "fetch_slice_to_bytes"


def test_a_failing_fsync_on_a_worker_thread_is_a_storage_error(
    fs: FaultInjectingFileSystem,
) -> None:
    """`PendingFlush.run` (the group-commit fsync the broker runs on a worker thread) raised a
    raw OSError."""
    log = _open(fs)
    _fill(log, 3)
    pending = log.begin_flush()
    assert pending is not None
    fs.fail_fsync(".log")
    with pytest.raises(StorageError, match="fsync"):
        pending.run()
    assert log.recovery_point == 0


def test_a_failing_write_takes_the_log_offline(fs: FaultInjectingFileSystem) -> None:
    log = _open(fs)
    _fill(log, 2)
    fs.fail_write(".log")
    with pytest.raises(StorageError):
        log.append_as_leader(_batch([b"x"]), 0)
    assert log.log_end_offset == 2
    with pytest.raises(StorageError):
        log.append_as_leader(_batch([b"y"]), 0)


def test_a_failing_epoch_checkpoint_write_takes_the_log_offline(
    fs: FaultInjectingFileSystem,
) -> None:
    log = _open(fs)
    _fill(log, 2)
    fs.fail_fsync("leader-epoch-checkpoint")
    with pytest.raises(StorageError):
        log.append_as_leader(_batch([b"x"]), 7)
    assert log.is_offline
    assert log.log_end_offset == 2


# -- lifecycle ---------------------------------------------------------------------------------


def test_reopen_after_a_clean_close_keeps_everything(fs: FaultInjectingFileSystem) -> None:
    config = LogConfig(segment_bytes=400, index_interval_bytes=60)
    log = _open(fs, config)
    _fill(log, 30, per_batch=2)
    log.append_as_leader(_batch([b"late"]), 3)
    before = _all_values(log)
    bases = list(log.segments)
    log.flush()
    log.close()

    reopened = _open(fs, config, recovery_point=31, had_clean_shutdown=True)

    assert reopened.recovery_report.had_clean_shutdown
    assert not reopened.recovery_report.cut_anything
    assert reopened.recovery_report.recovered_segments == ()
    assert list(reopened.segments) == bases
    assert reopened.log_end_offset == reopened.recovery_point == 31
    assert reopened.epoch_cache.entries == [EpochEntry(0, 0), EpochEntry(3, 30)]
    assert _all_values(reopened) == before
    for offset in range(31):
        assert _values(reopened.read(offset, 1).to_bytes())[0][0] <= offset
    info = reopened.append_as_leader(_batch([b"after"]), 3)
    assert info.first_offset == 31


def test_closed_segments_have_trimmed_indexes(fs: FaultInjectingFileSystem) -> None:
    log = _open(fs, LogConfig(segment_bytes=400, index_interval_bytes=60))
    _fill(log, 30, per_batch=2)
    inactive = list(log.segments.values())[:-1]
    log.close()
    for segment in inactive:
        assert os.path.getsize(segment.path(".index")) % 8 == 0
        assert os.path.getsize(segment.path(".index")) < LogConfig().segment_index_bytes
    for segment in log.segments.values():
        assert os.path.getsize(segment.path(".timeindex")) % 12 == 0


# -- roll triggers -----------------------------------------------------------------------------


def test_scenario_27_size_roll_starts_the_new_segment_at_the_batch_first_offset(
    fs: FaultInjectingFileSystem,
) -> None:
    log = _open(fs, LogConfig(segment_bytes=1000))
    for _ in range(3):
        log.append_as_leader(_batch_of_size(300), 0)
    assert log.active_segment.size_bytes == 900
    log.append_as_leader(_batch_of_size(100), 0)  # 900 > 1000 - 100 is false
    assert list(log.segments) == [0]
    assert log.active_segment.size_bytes == 1000

    info = log.append_as_leader(_batch_of_size(200), 0)

    assert list(log.segments) == [0, info.first_offset]
    assert info.first_offset == 4
    assert log.active_segment.size_bytes == 200


def test_scenario_27_size_roll_with_200_bytes_onto_900(fs: FaultInjectingFileSystem) -> None:
    log = _open(fs, LogConfig(segment_bytes=1000))
    for _ in range(3):
        log.append_as_leader(_batch_of_size(300), 0)
    info = log.append_as_leader(_batch_of_size(200), 0)
    assert list(log.segments) == [0, 3]
    assert info.first_offset == 3
    assert [o for o, _ in _all_values(log)] == [0, 1, 2, 3]


def test_scenario_27_time_roll_goes_by_record_timestamps(fs: FaultInjectingFileSystem) -> None:
    t = 1_700_000_000_000
    clock = ManualClock(wall_offset_ms=0)
    log = _open(fs, LogConfig(segment_ms=1000), clock=clock)
    log.append_as_leader(_batch([b"first"], timestamp=t), 0)
    clock.advance(10**9)
    log.append_as_leader(_batch([b"at 1000"], timestamp=t + 1000), 0)
    assert list(log.segments) == [0]  # wall clock is not used when batches carry timestamps

    log.append_as_leader(_batch([b"at 1001"], timestamp=t + 1001), 0)

    assert list(log.segments) == [0, 2]


def test_scenario_27_time_roll_uses_the_clock_when_batches_have_no_timestamp(
    fs: FaultInjectingFileSystem,
) -> None:
    clock = ManualClock(wall_offset_ms=0)
    log = _open(fs, LogConfig(segment_ms=1000), clock=clock)
    log.append_as_leader(_batch([b"a"], timestamp=NO_TIMESTAMP), 0)
    clock.set(1000)
    log.append_as_leader(_batch([b"b"], timestamp=NO_TIMESTAMP), 0)
    assert list(log.segments) == [0]
    clock.set(1001)
    log.append_as_leader(_batch([b"c"], timestamp=NO_TIMESTAMP), 0)
    assert list(log.segments) == [0, 2]


def test_scenario_27_time_roll_after_a_restart_counts_from_the_first_batch_timestamp(
    fs: FaultInjectingFileSystem,
) -> None:
    """Regression: a reopened segment measured its age from the reopen (and from a clock of
    another kind than the append's), so after a restart the active segment never rolled."""
    segment_ms = 10_000
    clock = ManualClock()
    config = LogConfig(segment_ms=segment_ms)
    log = _open(fs, config, clock=clock)
    log.append_as_leader(_batch([b"before restart"], timestamp=clock.wall_ms()), 0)
    log.flush()
    log.close()
    clock.advance(segment_ms // 2)

    restarted = _open(fs, config, clock=clock, had_clean_shutdown=True)
    clock.advance(segment_ms // 2)
    restarted.append_as_leader(_batch([b"not yet"], timestamp=clock.wall_ms()), 0)
    assert list(restarted.segments) == [0]
    clock.advance(1)
    restarted.append_as_leader(_batch([b"too old"], timestamp=clock.wall_ms()), 0)

    assert list(restarted.segments) == [0, 2]


def test_scenario_27_time_roll_without_timestamps_goes_by_the_clock_after_a_restart(
    fs: FaultInjectingFileSystem,
) -> None:
    clock = ManualClock()
    config = LogConfig(segment_ms=1000)
    log = _open(fs, config, clock=clock)
    log.append_as_leader(_batch([b"a"], timestamp=NO_TIMESTAMP), 0)
    log.flush()
    log.close()

    restarted = _open(fs, config, clock=clock, had_clean_shutdown=True)
    clock.advance(1000)
    restarted.append_as_leader(_batch([b"b"], timestamp=NO_TIMESTAMP), 0)
    assert list(restarted.segments) == [0]
    clock.advance(1)
    restarted.append_as_leader(_batch([b"c"], timestamp=NO_TIMESTAMP), 0)

    assert list(restarted.segments) == [0, 2]


def test_scenario_27_an_empty_segment_is_never_time_rolled(fs: FaultInjectingFileSystem) -> None:
    clock = ManualClock(wall_offset_ms=0)
    log = _open(fs, LogConfig(segment_ms=1000), clock=clock)
    _fill(log, 2)
    empty = log.roll()
    assert empty.size_bytes == 0
    clock.set(10**12)
    assert not empty.should_roll(100, max_timestamp=10**12, last_offset=2)

    log.append_as_leader(_batch([b"late"], timestamp=10**12), 0)

    assert list(log.segments) == [0, 2]
    assert log.active_segment is empty


def test_scenario_27_a_batch_larger_than_the_segment_is_rejected(
    fs: FaultInjectingFileSystem,
) -> None:
    log = _open(fs, LogConfig(segment_bytes=1000))
    _fill(log, 1)
    with pytest.raises(RecordBatchTooLargeError) as excinfo:
        log.append_as_leader(_batch_of_size(1200), 0)
    assert (excinfo.value.size_bytes, excinfo.value.limit_bytes) == (1200, 1000)
    with pytest.raises(RecordBatchTooLargeError):
        log.append_as_follower(_big_follower_batch(1200, 1))
    assert log.log_end_offset == 1
    assert list(log.segments) == [0]


def test_roll_is_a_no_op_on_an_empty_active_segment(fs: FaultInjectingFileSystem) -> None:
    log = _open(fs)
    _fill(log, 2)
    first = log.roll()
    assert log.roll() is first
    assert list(log.segments) == [0, 2]


def test_a_full_offset_index_rolls_the_segment(fs: FaultInjectingFileSystem) -> None:
    # Two 8-byte slots; a batch every append is over the 0-byte interval after the first.
    log = _open(fs, LogConfig(segment_index_bytes=16, index_interval_bytes=0))
    _fill(log, 8)
    assert len(log.segments) > 1
    assert [o for o, _ in _all_values(log)] == list(range(8))


def _index_entries(log: Log) -> list[list[object]]:
    segment = log.active_segment
    offsets, times = segment.offset_index, segment.time_index
    return [
        [offsets.entry(n) for n in range(offsets.entries)],
        [times.entry(n) for n in range(times.entries)],
    ]


def test_single_batch_appends_index_as_recovery_rebuilds(fs: FaultInjectingFileSystem) -> None:
    """Produce-sized appends take the log's fast path, which makes the index entries itself
    when one is due: the same entries recovery builds from the ``.log`` (an entry each time
    more than ``index_interval_bytes`` passed, with the running max timestamp)."""
    config = LogConfig(index_interval_bytes=150)
    log = _open(fs, config)
    for n in range(120):
        timestamp = 1000 + (n * 7) % 50  # timestamps that go back and forth
        log.append_as_leader(_batch([b"r%d" % n], timestamp=timestamp), leader_epoch=0)
    appended = _index_entries(log)
    assert len(appended[0]) > 20 and len(appended[1]) > 1
    log.close()
    recovered = _open(fs, config, recovery_point=0)
    assert recovered.log_end_offset == 120
    assert _index_entries(recovered) == appended


# -- retention, never past the HW --------------------------------------------------------------


def _three_segments(
    fs: FaultInjectingFileSystem, config: LogConfig, clock: ManualClock | None = None
) -> Log:
    """Segments [0,100), [100,200) and active [200,250), every record at timestamp 0."""
    log = _open(fs, config, clock=clock)
    for count in (100, 100, 50):
        _fill(log, count, per_batch=10, timestamp=0)
        if count == 100:
            log.roll()
    assert list(log.segments) == [0, 100, 200]
    assert log.log_end_offset == 250
    return log


def test_scenario_28_retention_never_passes_the_high_watermark(
    fs: FaultInjectingFileSystem,
) -> None:
    clock = ManualClock(wall_offset_ms=0)
    log = _three_segments(fs, LogConfig(retention_ms=DAY_MS), clock)
    log.update_high_watermark(150)
    clock.set(10 * DAY_MS)

    assert log.delete_old_segments() == 1

    assert list(log.segments) == [100, 200]
    assert log.log_start_offset == 100
    assert not os.path.exists(f"{log.dir_path}/{0:020d}.log")

    log.update_high_watermark(250)
    assert log.delete_old_segments() == 2

    assert list(log.segments) == [250]
    assert log.active_segment.size_bytes == 0
    assert log.log_start_offset == log.log_end_offset == 250
    assert log.read(250, 100).size_bytes == 0
    assert log.delete_old_segments() == 0  # never the final empty segment


def test_retention_by_time_keeps_segments_younger_than_retention(
    fs: FaultInjectingFileSystem,
) -> None:
    clock = ManualClock(wall_offset_ms=0)
    log = _three_segments(fs, LogConfig(retention_ms=DAY_MS), clock)
    log.update_high_watermark(250)
    clock.set(DAY_MS)
    assert log.delete_old_segments() == 0
    clock.set(DAY_MS + 1)
    assert log.delete_old_segments() == 3


def test_retention_by_size_deletes_oldest_segments_down_to_the_limit(
    fs: FaultInjectingFileSystem,
) -> None:
    probe = _three_segments(fs, LogConfig(retention_ms=-1))
    sizes = [s.size_bytes for s in probe.segments.values()]
    probe.close()
    fs_dir = probe.dir_path
    for name in os.listdir(fs_dir):
        os.remove(f"{fs_dir}/{name}")

    # Just enough room for the last two segments: only the first goes.
    log = _three_segments(fs, LogConfig(retention_ms=-1, retention_bytes=sizes[1] + sizes[2]))
    log.update_high_watermark(250)
    assert log.delete_old_segments() == 1
    assert list(log.segments) == [100, 200]
    assert log.log_start_offset == 100
    assert log.delete_old_segments() == 0
    assert [o for o, _ in _all_values(log)] == list(range(100, 250))


def test_retention_by_size_is_bounded_by_the_high_watermark(
    fs: FaultInjectingFileSystem,
) -> None:
    log = _three_segments(fs, LogConfig(retention_ms=-1, retention_bytes=0))
    log.update_high_watermark(120)
    assert log.delete_old_segments() == 1
    assert list(log.segments) == [100, 200]


def test_retention_deletes_segments_below_a_raised_log_start(
    fs: FaultInjectingFileSystem,
) -> None:
    log = _three_segments(fs, LogConfig(retention_ms=-1))
    log.update_high_watermark(250)
    assert log.maybe_increment_log_start_offset(150) is True
    assert log.delete_old_segments() == 1
    assert list(log.segments) == [100, 200]
    assert log.log_start_offset == 150  # the segment holding the log start stays
    with pytest.raises(OffsetOutOfRangeError):
        log.read(149, 100)
