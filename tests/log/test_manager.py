"""`LogManager`: lazily opened logs, placement across log dirs, checkpoints, the clean-shutdown
marker, atomic checkpoints and topic name validation."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from replog.clock import ManualClock
from replog.errors import InvalidConfigError, InvalidTopicError, StorageError
from replog.log import (
    FaultInjectingFileSystem,
    Log,
    LogConfig,
    LogManager,
    OffsetCheckpointFile,
    encode_batch,
)
from replog.log.checkpoints import CLEAN_SHUTDOWN_FILE
from replog.log.manager import (
    HW_CHECKPOINT,
    LOG_START_CHECKPOINT,
    RECOVERY_POINT_CHECKPOINT,
    TopicPartition,
)

CONFIG = LogConfig(segment_bytes=400, segment_index_bytes=4096, retention_ms=-1)
TP = TopicPartition("orders", 0)


@pytest.fixture
def fs(tmp_path: Path) -> FaultInjectingFileSystem:
    return FaultInjectingFileSystem(str(tmp_path), seed=5)


def _dir(fs: FaultInjectingFileSystem, name: str = "d1") -> str:
    return f"{fs.root}/{name}"


def _manager(fs: FaultInjectingFileSystem, *names: str) -> LogManager:
    return LogManager.open(
        [_dir(fs, name) for name in names or ("d1",)], CONFIG, fs=fs, clock=ManualClock()
    )


def _append(log: Log, count: int) -> None:
    for _ in range(count):
        value = b"value-%d" % log.log_end_offset
        log.append_as_leader(encode_batch([value], base_timestamp=1000), 0)


def _marker(fs: FaultInjectingFileSystem, name: str = "d1") -> str:
    return f"{_dir(fs, name)}/{CLEAN_SHUTDOWN_FILE}"


# -- lookup, creation, deletion ----------------------------------------------------------------


def test_logs_are_listed_at_start_but_opened_on_first_use(fs: FaultInjectingFileSystem) -> None:
    manager = _manager(fs)
    _append(manager.get_or_create_log(TP), 3)
    manager.get_or_create_log(TopicPartition("orders", 1))
    manager.shutdown()

    reopened = _manager(fs)

    assert reopened.logs == {}
    assert reopened.partitions() == [TP, TopicPartition("orders", 1)]
    log = reopened.get_log(TP)
    assert log is not None and log.log_end_offset == 3
    assert reopened.get_log(TP) is log
    assert list(reopened.logs) == [TP]
    assert reopened.get_log(TopicPartition("unknown", 0)) is None


def test_a_new_log_goes_to_the_dir_with_fewest_partitions(fs: FaultInjectingFileSystem) -> None:
    for name, count in (("d1", 2), ("d2", 1), ("d3", 0)):
        os.makedirs(_dir(fs, name))
        for partition in range(count):
            os.makedirs(f"{_dir(fs, name)}/existing-{name}-{partition}")
    manager = _manager(fs, "d1", "d2", "d3")

    log = manager.get_or_create_log(TP)

    assert log.dir_path == f"{_dir(fs, 'd3')}/orders-0"
    assert os.path.isdir(log.dir_path)
    second = manager.get_or_create_log(TopicPartition("orders", 1))
    assert os.path.dirname(second.dir_path) in (_dir(fs, "d2"), _dir(fs, "d3"))


def test_get_or_create_log_uses_a_topic_config(fs: FaultInjectingFileSystem) -> None:
    manager = _manager(fs)
    custom = LogConfig(segment_bytes=1000, segment_index_bytes=4096)
    log = manager.get_or_create_log(TP, custom)
    assert log.config == custom
    assert manager.get_or_create_log(TopicPartition("other", 0)).config == CONFIG


def test_delete_log_removes_the_directory_and_its_checkpoint_entries(
    fs: FaultInjectingFileSystem,
) -> None:
    manager = _manager(fs)
    _append(manager.get_or_create_log(TP), 3)
    keep = TopicPartition("keep", 0)
    _append(manager.get_or_create_log(keep), 1)
    manager.checkpoint_high_watermarks()
    manager.checkpoint_recovery_points()

    assert manager.delete_log(TP) is True

    assert not os.path.exists(f"{_dir(fs)}/orders-0")
    assert manager.get_log(TP) is None
    assert manager.partitions() == [keep]
    assert manager.delete_log(TP) is False
    manager.checkpoint_high_watermarks()
    manager.checkpoint_recovery_points()
    for name in (HW_CHECKPOINT, RECOVERY_POINT_CHECKPOINT):
        assert set(OffsetCheckpointFile(fs, f"{_dir(fs)}/{name}").read()) == {("keep", 0)}


def test_checkpoints_are_written_and_read_back(fs: FaultInjectingFileSystem) -> None:
    manager = _manager(fs)
    log = manager.get_or_create_log(TP)
    _append(log, 20)
    log.update_high_watermark(17)
    log.flush()
    log.maybe_increment_log_start_offset(12)  # inside a segment: the start checkpoint keeps it
    manager.checkpoint_high_watermarks()
    manager.checkpoint_recovery_points()
    manager.checkpoint_log_start_offsets()

    def read(name: str) -> dict[tuple[str, int], int]:
        return OffsetCheckpointFile(fs, f"{_dir(fs)}/{name}").read()

    assert read(HW_CHECKPOINT) == {("orders", 0): 17}
    assert read(RECOVERY_POINT_CHECKPOINT) == {("orders", 0): 20}
    assert read(LOG_START_CHECKPOINT) == {("orders", 0): 12}

    manager.shutdown()
    reopened = _manager(fs).get_log(TP)
    assert reopened is not None
    assert (reopened.high_watermark, reopened.recovery_point) == (17, 20)
    assert reopened.log_start_offset == 12


def test_the_log_start_checkpoint_skips_logs_starting_at_their_first_segment(
    fs: FaultInjectingFileSystem,
) -> None:
    manager = _manager(fs)
    _append(manager.get_or_create_log(TP), 3)
    manager.checkpoint_log_start_offsets()
    assert OffsetCheckpointFile(fs, f"{_dir(fs)}/{LOG_START_CHECKPOINT}").read() == {}


def test_retention_runs_on_every_open_log(fs: FaultInjectingFileSystem) -> None:
    manager = LogManager.open(
        [_dir(fs)],
        LogConfig(segment_bytes=400, segment_index_bytes=4096, retention_ms=1000),
        fs=fs,
        clock=ManualClock(10**6, wall_offset_ms=0),
    )
    log = manager.get_or_create_log(TP)
    _append(log, 20)
    log.update_high_watermark(20)
    segment_count = len(log.segments)
    assert manager.delete_old_segments() == segment_count
    assert list(log.segments) == [20]
    assert log.log_start_offset == 20


def test_retention_goes_on_past_a_log_that_cannot_be_read(fs: FaultInjectingFileSystem) -> None:
    """A read error in one log's retention is a StorageError (that log goes offline) raised
    after every other log had its retention applied."""
    clock = ManualClock(10**6, wall_offset_ms=0)
    config = LogConfig(segment_bytes=400, segment_index_bytes=4096, retention_ms=1000)
    manager = LogManager.open([_dir(fs)], config, fs=fs, clock=clock)
    logs = [manager.get_or_create_log(TopicPartition("orders", n)) for n in (0, 1)]
    for log in logs:
        _append(log, 20)
        log.update_high_watermark(20)
        log.flush()
    manager.shutdown()
    reopened = LogManager.open([_dir(fs)], config, fs=fs, clock=clock)
    broken, healthy = (reopened.get_log(TopicPartition("orders", n)) for n in (0, 1))
    assert broken is not None and healthy is not None
    fs.fail_read(f"{broken.dir_path}/", count=1000)

    with pytest.raises(StorageError):
        reopened.delete_old_segments()

    assert broken.is_offline
    assert list(healthy.segments) == [20]


# -- the clean-shutdown marker -----------------------------------------------------------------


def test_scenario_24_a_clean_marker_skips_recovery_and_sets_the_recovery_point_to_the_log_end(
    fs: FaultInjectingFileSystem,
) -> None:
    manager = _manager(fs)
    _append(manager.get_or_create_log(TP), 20)
    manager.shutdown(broker_epoch=7)
    assert os.path.exists(_marker(fs))

    reopened = _manager(fs)

    assert not os.path.exists(_marker(fs))  # deleted at startup, before any log opens
    log = reopened.get_log(TP)
    assert log is not None
    assert log.recovery_report.had_clean_shutdown
    assert log.recovery_report.recovered_segments == ()
    assert log.recovery_point == log.log_end_offset == 20


def test_scenario_24_a_crash_while_loading_recovers_from_the_checkpointed_recovery_point(
    fs: FaultInjectingFileSystem,
) -> None:
    manager = _manager(fs)
    _append(manager.get_or_create_log(TP), 25)
    manager.shutdown()  # flushes, checkpoints recovery point 25, writes the marker
    assert os.path.exists(_marker(fs))

    loading = _manager(fs)  # reads and deletes the marker ...
    loading.get_log(TP)
    fs.crash()  # ... and dies before shutting down cleanly

    after_crash = _manager(fs)
    recovered = after_crash.get_log(TP)
    assert recovered is not None
    report = recovered.recovery_report
    assert not report.had_clean_shutdown
    # Shutdown checkpointed recovery point 25: only the segment holding it is scanned.
    assert recovered.recovery_point == 25
    assert report.recovered_segments == (max(b for b in recovered.segments if b <= 25),)
    assert len(recovered.segments) > 1
    assert recovered.log_end_offset == 25


def test_scenario_24_a_malformed_recovery_point_checkpoint_means_recovery_from_zero(
    fs: FaultInjectingFileSystem,
) -> None:
    manager = _manager(fs)
    _append(manager.get_or_create_log(TP), 20)
    manager.shutdown()
    with open(f"{_dir(fs)}/{RECOVERY_POINT_CHECKPOINT}", "wb") as f:
        f.write(b"0\n1\norders 0 not-a-number\n")

    log = _manager(fs).get_log(TP)

    assert log is not None
    assert not log.recovery_report.had_clean_shutdown
    assert log.recovery_report.recovered_segments == tuple(log.segments)
    assert log.recovery_report.recovered_segments[0] == 0
    assert log.log_end_offset == 20


def test_shutdown_marks_a_dir_clean_only_when_every_log_there_was_recovered(
    fs: FaultInjectingFileSystem,
) -> None:
    first = _manager(fs, "d1", "d2")
    _append(first.get_or_create_log(TP), 2)
    _append(first.get_or_create_log(TopicPartition("orders", 1)), 2)
    assert {os.path.dirname(log.dir_path) for log in first.logs.values()} == {
        _dir(fs, "d1"),
        _dir(fs, "d2"),
    }
    d1_tp = next(tp for tp, log in first.logs.items() if _dir(fs, "d1") in log.dir_path)
    for log in first.logs.values():
        log.flush()
    first.checkpoint_recovery_points()
    # A crash: no marker anywhere.
    fs.crash()

    second = _manager(fs, "d1", "d2")
    second.get_log(d1_tp)  # only d1's log is opened (and so recovered)
    second.shutdown()

    assert os.path.exists(_marker(fs, "d1"))
    assert not os.path.exists(_marker(fs, "d2"))  # its log was never recovered

    third = _manager(fs, "d1", "d2")
    third.shutdown()  # d1 was clean at start: it stays clean without opening anything
    assert os.path.exists(_marker(fs, "d1"))
    assert not os.path.exists(_marker(fs, "d2"))


def test_shutdown_writes_no_marker_for_a_dir_whose_log_failed(
    fs: FaultInjectingFileSystem,
) -> None:
    manager = _manager(fs)
    _append(manager.get_or_create_log(TP), 2)
    fs.fail_fsync("orders-0")
    with pytest.raises(StorageError):
        manager.shutdown()
    assert not os.path.exists(_marker(fs))
    assert _dir(fs) in manager.offline_dirs


def test_shutdown_after_a_time_index_lost_entries_closes_and_marks_the_dir_clean(
    fs: FaultInjectingFileSystem,
) -> None:
    """Regression: a sealed segment whose ``.timeindex`` lost whole entries gets its max
    timestamp by scanning the log (here for time retention); closing it tried to append that
    timestamp to an index with no free slot, raised IndexFullError, and the dir lost its
    clean-shutdown marker."""
    clock = ManualClock()
    config = LogConfig(segment_bytes=400, segment_index_bytes=4096, index_interval_bytes=50)
    manager = LogManager.open([_dir(fs)], config, fs=fs, clock=clock)
    log = manager.get_or_create_log(TP)
    t0 = clock.wall_ms()
    for n in range(12):  # record n has offset n and timestamp t0 + n
        log.append_as_leader(encode_batch([b"v%d" % n], base_timestamp=t0 + n), 0)
    log.update_high_watermark(log.log_end_offset)
    second_base = list(log.segments)[1]
    manager.shutdown()
    time_index = f"{log.dir_path}/{0:020d}.timeindex"
    entries = os.path.getsize(time_index) // 12
    assert entries >= 2
    with open(time_index, "r+b") as f:
        f.truncate((entries - 1) * 12)  # the last whole entry is lost

    reopened = LogManager.open([_dir(fs)], config, fs=fs, clock=clock)
    segment = reopened.get_or_create_log(TP).segments[0]
    assert reopened.delete_old_segments() == 0  # reads the segment's max timestamp
    assert segment.max_timestamp == t0 + second_base - 1
    reopened.shutdown()

    assert os.path.exists(_marker(fs))
    assert os.path.getsize(time_index) == entries * 12  # the final entry is back


def test_an_io_error_while_closing_is_a_storage_error_and_other_dirs_still_close_cleanly(
    fs: FaultInjectingFileSystem,
) -> None:
    """A real IO error in close (writing the clean-shutdown producer snapshot) costs that dir
    its clean-shutdown marker, as a typed StorageError raised after every log was closed. (Trimming
    an index synced by the flush before it does no IO.)"""
    config = LogConfig(segment_bytes=400, segment_index_bytes=4096, index_interval_bytes=50)
    manager = LogManager.open([_dir(fs, "d1"), _dir(fs, "d2")], config, fs=fs, clock=ManualClock())
    logs = [manager.get_or_create_log(TopicPartition("orders", n)) for n in (0, 1)]
    for log in logs:
        _append(log, 12)
        log.flush()
    failing = logs[0]
    fs.fail_fsync(f"{failing.dir_path}/{failing.log_end_offset:020d}.snapshot")

    with pytest.raises(StorageError):
        manager.shutdown()

    failing_dir = os.path.dirname(failing.dir_path)
    other_dir = os.path.dirname(logs[1].dir_path)
    assert failing_dir != other_dir
    assert not os.path.exists(f"{failing_dir}/{CLEAN_SHUTDOWN_FILE}")
    assert os.path.exists(f"{other_dir}/{CLEAN_SHUTDOWN_FILE}")
    assert failing.is_offline


# -- atomic checkpoints ------------------------------------------------------------------------


def test_scenario_25_a_missing_tp_entry_means_hw_0_clamped_to_the_log_start(
    fs: FaultInjectingFileSystem,
) -> None:
    manager = _manager(fs)
    log = manager.get_or_create_log(TP)
    _append(log, 30)
    log.update_high_watermark(30)
    second_base = list(log.segments)[1]
    log.maybe_increment_log_start_offset(second_base)
    log.delete_old_segments()
    assert log.log_start_offset == second_base > 0
    manager.shutdown()
    OffsetCheckpointFile(fs, f"{_dir(fs)}/{HW_CHECKPOINT}").write({("other", 0): 5})

    reopened = _manager(fs).get_log(TP)

    assert reopened is not None
    assert reopened.log_start_offset == second_base
    assert reopened.high_watermark == second_base


def test_scenario_25_a_count_mismatch_in_the_hw_checkpoint_takes_the_log_dir_offline(
    fs: FaultInjectingFileSystem,
) -> None:
    manager = _manager(fs, "d1", "d2")
    log = manager.get_or_create_log(TP)
    _append(log, 2)
    manager.shutdown()
    bad_dir = os.path.dirname(log.dir_path)
    with open(f"{bad_dir}/{HW_CHECKPOINT}", "wb") as f:
        f.write(b"0\n3\norders 0 1\norders 1 1\n")

    reopened = LogManager.open([_dir(fs, "d1"), _dir(fs, "d2")], CONFIG, fs=fs, clock=ManualClock())

    reason = reopened.offline_dirs[bad_dir]
    assert HW_CHECKPOINT in reason and "expected 3 entries, found 2" in reason
    assert TP not in reopened.partitions()
    with pytest.raises(StorageError, match="offline"):
        reopened.get_log(TP)
    other = reopened.get_or_create_log(TopicPartition("fresh", 0))
    assert os.path.dirname(other.dir_path) != bad_dir
    reopened.shutdown()
    assert not os.path.exists(f"{bad_dir}/{CLEAN_SHUTDOWN_FILE}")


def test_scenario_25_a_crash_between_tmp_write_and_rename_leaves_the_old_checkpoint(
    fs: FaultInjectingFileSystem,
) -> None:
    manager = _manager(fs)
    log = manager.get_or_create_log(TP)
    _append(log, 10)
    log.flush()
    log.update_high_watermark(4)
    manager.checkpoint_high_watermarks()
    log.update_high_watermark(9)
    fs.fail_rename(HW_CHECKPOINT)

    manager.checkpoint_high_watermarks()  # the tmp file is written, the rename fails

    assert _dir(fs) in manager.offline_dirs
    assert os.path.exists(f"{_dir(fs)}/{HW_CHECKPOINT}.tmp")
    fs.crash()

    reopened = _manager(fs)
    assert reopened.offline_dirs == {}
    restarted = reopened.get_log(TP)
    assert restarted is not None and restarted.high_watermark == 4
    restarted.update_high_watermark(6)
    reopened.checkpoint_high_watermarks()  # overwrites the stale tmp
    assert not os.path.exists(f"{_dir(fs)}/{HW_CHECKPOINT}.tmp")
    assert OffsetCheckpointFile(fs, f"{_dir(fs)}/{HW_CHECKPOINT}").read() == {("orders", 0): 6}


# -- topic names -------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["../x", "a/b", "", "x" * 300, ".", "..", "a b", "t\x00", "é"])
def test_hostile_topic_names_are_rejected(name: str, fs: FaultInjectingFileSystem) -> None:
    manager = _manager(fs)
    with pytest.raises(InvalidTopicError):
        manager.get_or_create_log(TopicPartition(name, 0))
    with pytest.raises(InvalidTopicError):
        manager.get_log(TopicPartition(name, 0))
    assert manager.partitions() == []  # no directory was made


def test_a_negative_partition_is_rejected(fs: FaultInjectingFileSystem) -> None:
    manager = _manager(fs)
    with pytest.raises(InvalidConfigError):
        manager.get_or_create_log(TopicPartition("orders", -1))
    assert manager.partitions() == []


def test_directories_that_are_not_partitions_are_ignored(fs: FaultInjectingFileSystem) -> None:
    root = _dir(fs)
    for name in ("..-0", "no_partition", "orders-x", "orders-0-delete", "bad name-0", "ok-3"):
        os.makedirs(f"{root}/{name}")
    manager = _manager(fs)
    assert manager.partitions() == [TopicPartition("ok", 3)]


def test_open_needs_a_log_dir(fs: FaultInjectingFileSystem) -> None:
    with pytest.raises(InvalidConfigError):
        LogManager.open([], fs=fs)
