"""Recovery at open (Kafka's rules after an unclean shutdown): a torn tail and a corrupt CRC
mid-log, the clean and unclean paths through `Log.open`, and crashes on the fault-injecting
filesystem."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

import pytest

from replog.clock import ManualClock
from replog.log import (
    EpochEntry,
    FaultInjectingFileSystem,
    Log,
    LogConfig,
    OffsetIndex,
    decode_records,
    encode_batch,
    iter_batches,
)
from replog.log.log import LEADER_EPOCH_CHECKPOINT

# Small indexes keep the tests fast; a small interval gives several entries per segment.
CONFIG = LogConfig(segment_index_bytes=4096, index_interval_bytes=100)


@pytest.fixture
def fs(tmp_path: Path) -> FaultInjectingFileSystem:
    return FaultInjectingFileSystem(str(tmp_path), seed=11)


def _open(fs: FaultInjectingFileSystem, config: LogConfig = CONFIG, **kwargs: int) -> Log:
    return Log.open(f"{fs.root}/topic-0", config, fs=fs, clock=ManualClock(), **kwargs)


def _batch(values: Sequence[bytes], timestamp: int = 1000) -> bytes:
    return encode_batch(list(values), base_timestamp=timestamp)


def _append(log: Log, count: int, *, epoch: int = 0, per_batch: int = 2) -> list[int]:
    """Append ``count`` batches of ``per_batch`` records; returns their base offsets."""
    bases = []
    for _ in range(count):
        first = log.log_end_offset
        values = [b"value-%d" % (first + i) for i in range(per_batch)]
        bases.append(log.append_as_leader(_batch(values), epoch).first_offset)
    return bases


def _offsets(log: Log) -> list[int]:
    found = []
    for data in log.batches():
        for position, _ in iter_batches(data):
            found += [record.offset for record in decode_records(data, position)]
    return found


def _segment_file(log: Log, base: int, suffix: str = ".log") -> str:
    return f"{log.dir_path}/{base:020d}{suffix}"


def _batch_positions(path: str) -> list[tuple[int, int, int]]:
    """(position, base offset, size) of every whole batch in a ``.log`` file."""
    with open(path, "rb") as f:
        data = f.read()
    return [(pos, h.base_offset, h.size_bytes) for pos, h in iter_batches(data)]


def _flip_byte(path: str, position: int) -> None:
    with open(path, "r+b") as f:
        f.seek(position)
        byte = f.read(1)[0]
        f.seek(position)
        f.write(bytes([byte ^ 0x40]))


def _index_entries(path: str, base: int) -> list[tuple[int, int]]:
    with open(path, "rb") as f:
        data = f.read()
    return [
        (base + int.from_bytes(data[i : i + 4], "big"), int.from_bytes(data[i + 4 : i + 8], "big"))
        for i in range(0, len(data), 8)
    ]


# -- a torn tail -------------------------------------------------------------------------------


@pytest.mark.parametrize("tail", ["half_a_batch", "zero_filled"])
def test_scenario_22_torn_tail_is_cut_at_the_last_whole_batch(
    fs: FaultInjectingFileSystem, tail: str
) -> None:
    log = _open(fs)
    bases = _append(log, 3, epoch=1, per_batch=5)
    third_end = log.log_end_offset  # batch3.lastOffset + 1
    whole_size = log.active_segment.size_bytes
    _append(log, 1, epoch=2, per_batch=5)  # batch 4, a new epoch starting at third_end
    assert log.epoch_cache.entries == [EpochEntry(1, 0), EpochEntry(2, third_end)]
    log.flush()
    log.close()
    path = _segment_file(log, 0)
    with open(path, "r+b") as f:
        if tail == "half_a_batch":
            fourth_size = f.seek(0, os.SEEK_END) - whole_size
            f.truncate(whole_size + fourth_size // 2)
        else:  # a preallocated tail: the 4th batch never made it, zeros did
            f.truncate(whole_size)
            f.seek(whole_size)
            f.write(b"\x00" * 4096)
    torn_bytes = os.path.getsize(path) - whole_size
    os.remove(_segment_file(log, 0, ".index"))  # and the indexes must come back

    recovered = _open(fs, high_watermark=10_000)  # no clean marker; checkpointed HW past LEO

    assert os.path.getsize(path) == whole_size
    assert recovered.log_end_offset == third_end == bases[2] + 5
    assert recovered.recovery_report.bytes_truncated == torn_bytes
    assert recovered.recovery_report.truncated_segment == 0
    assert recovered.high_watermark == third_end  # min(max(ckptHW, logStart), LEO)
    assert recovered.epoch_cache.entries == [EpochEntry(1, 0)]  # entries >= LEO dropped
    assert _offsets(recovered) == list(range(third_end))
    index = recovered.active_segment.offset_index
    positions = [position for position, _, _ in _batch_positions(path)]
    # An entry whenever more than 100 bytes (index_interval_bytes) came since the last one.
    expected = [(bases[1] + 4, positions[1]), (bases[2] + 4, positions[2])]
    assert [tuple(index.entry(i)) for i in range(index.entries)] == expected
    assert recovered.append_as_leader(_batch([b"next"]), 3).first_offset == third_end


def test_scenario_22_hw_is_clamped_up_to_the_log_start(fs: FaultInjectingFileSystem) -> None:
    log = _open(fs)
    _append(log, 3)
    log.flush()
    log.close()
    recovered = _open(fs, high_watermark=0, log_start_offset=2)
    assert recovered.log_start_offset == 2
    assert recovered.high_watermark == 2


# -- a corrupt CRC mid-log ---------------------------------------------------------------------


def test_scenario_23_corrupt_crc_mid_log_cuts_there_and_deletes_later_segments(
    fs: FaultInjectingFileSystem,
) -> None:
    """Segments S0 (below the recovery point), S1 (holding it), S2, S3. S1's 2nd batch has a
    bad CRC: S1 is cut before it and S2, S3 are deleted. S0 also has a corrupt batch, and it is
    not cut: segments wholly below the recovery point are not scanned."""
    log = _open(fs)
    s0 = _append(log, 3)
    s1 = [log.roll().base_offset, *_append(log, 3)[1:]]
    s2 = log.roll().base_offset
    _append(log, 3)
    s3 = log.roll().base_offset
    _append(log, 3)
    assert list(log.segments) == [s0[0], s1[0], s2, s3]
    log.flush()
    log.close()
    s0_path, s1_path = _segment_file(log, s0[0]), _segment_file(log, s1[0])
    s0_size, s1_size = os.path.getsize(s0_path), os.path.getsize(s1_path)
    second_in_s0 = _batch_positions(s0_path)[1]
    second_in_s1 = _batch_positions(s1_path)[1]
    _flip_byte(s0_path, second_in_s0[0] + second_in_s0[2] - 2)  # inside the records
    _flip_byte(s1_path, second_in_s1[0] + second_in_s1[2] - 2)
    recovery_point = s1[0] + 1  # inside S1

    recovered = _open(fs, recovery_point=recovery_point)

    report = recovered.recovery_report
    assert report.recovered_segments == (s1[0],)
    assert report.truncated_segment == s1[0]
    assert os.path.getsize(s1_path) == second_in_s1[0]
    assert report.bytes_truncated == s1_size - second_in_s1[0]
    assert report.deleted_segments == (s2, s3)
    assert list(recovered.segments) == [s0[0], s1[0]]
    for base in (s2, s3):
        for suffix in (".log", ".index", ".timeindex"):
            assert not os.path.exists(_segment_file(log, base, suffix))
    assert recovered.log_end_offset == second_in_s1[1] == s1[0] + 2
    assert os.path.getsize(s0_path) == s0_size  # S0's corrupt batch was not even read
    assert recovered.recovery_point == recovery_point
    assert "cut" in report.describe()


def test_scenario_23_bytes_truncated_counts_the_cut_tail(fs: FaultInjectingFileSystem) -> None:
    log = _open(fs)
    _append(log, 4)
    log.flush()
    log.close()
    path = _segment_file(log, 0)
    size = os.path.getsize(path)
    second = _batch_positions(path)[1]
    _flip_byte(path, second[0] + 30)  # inside the CRC-covered header fields

    recovered = _open(fs, recovery_point=0)

    assert recovered.recovery_report.bytes_truncated == size - second[0]
    assert recovered.log_end_offset == 2


def _set_epoch(path: str, position: int, epoch: int) -> None:
    """Overwrite the partition leader epoch of the batch at ``position`` (outside the CRC)."""
    with open(path, "r+b") as f:
        f.seek(position + 12)
        f.write(epoch.to_bytes(4, "big", signed=True))


@pytest.mark.parametrize("fallen_epoch", [2, 0, -1], ids=["bit_flip_3_to_2", "to_0", "to_-1"])
def test_a_falling_leader_epoch_ends_the_recovered_log(
    fs: FaultInjectingFileSystem, fallen_epoch: int
) -> None:
    """Regression: recovery accepted a batch whose partition leader epoch is below the
    previous batch's (a flipped bit in a field the CRC does not cover). Epochs never fall along
    a log, so the log ends there, as at a bad CRC, and the report says so. -1 ("no epoch")
    after an epoch >= 0 is a fall too."""
    log = _open(fs)
    _append(log, 2, epoch=1)
    _append(log, 3, epoch=3)
    log.flush()
    log.close()
    path = _segment_file(log, 0)
    size = os.path.getsize(path)
    victim, victim_offset, _ = _batch_positions(path)[3]
    _set_epoch(path, victim, fallen_epoch)

    recovered = _open(fs, recovery_point=0)

    report = recovered.recovery_report
    assert (report.truncated_segment, report.bytes_truncated) == (0, size - victim)
    assert "epoch" in (report.truncation_reason or "")
    assert recovered.log_end_offset == victim_offset
    assert recovered.epoch_cache.entries == [EpochEntry(1, 0), EpochEntry(3, 4)]


def test_a_falling_leader_epoch_at_the_start_of_a_recovered_segment_ends_the_log(
    fs: FaultInjectingFileSystem,
) -> None:
    """The epoch before the first recovered segment comes from the epoch cache, so a fall at a
    segment boundary is caught too."""
    log = _open(fs)
    _append(log, 2, epoch=2)
    second = log.roll().base_offset
    _append(log, 2, epoch=2)
    log.flush()
    log.close()
    _set_epoch(_segment_file(log, second), 0, 1)

    recovered = _open(fs, recovery_point=second)

    assert recovered.recovery_report.truncated_segment == second
    assert recovered.log_end_offset == second


def test_batches_without_a_leader_epoch_recover_when_nothing_before_has_one(
    fs: FaultInjectingFileSystem,
) -> None:
    """-1 ("no epoch", old writers) followed by -1 or a real epoch is not a fall."""
    log = _open(fs)
    data = b"".join(
        encode_batch([b"v%d" % n], base_offset=n, base_timestamp=1000, partition_leader_epoch=e)
        for n, e in enumerate([-1, -1, 0, 0])
    )
    log.append_as_follower(data)
    log.flush()
    log.close()

    recovered = _open(fs, recovery_point=0)

    assert not recovered.recovery_report.cut_anything
    assert recovered.log_end_offset == 4


# -- clean and unclean opens -------------------------------------------------------------------


def test_clean_open_trusts_the_files_and_sets_the_recovery_point_to_the_log_end(
    fs: FaultInjectingFileSystem,
) -> None:
    log = _open(fs, LogConfig(segment_bytes=300, segment_index_bytes=4096))
    _append(log, 10)
    log.flush()
    log.close()

    reopened = _open(fs, recovery_point=3, had_clean_shutdown=True)

    assert reopened.recovery_report.recovered_segments == ()
    assert reopened.recovery_point == reopened.log_end_offset == 20
    assert "clean shutdown" in reopened.recovery_report.describe()


def test_unclean_open_recovers_from_the_segment_holding_the_recovery_point(
    fs: FaultInjectingFileSystem,
) -> None:
    log = _open(fs, LogConfig(segment_bytes=300, segment_index_bytes=4096))
    _append(log, 10)
    bases = list(log.segments)
    log.flush()
    log.close()
    holder = max(b for b in bases if b <= 9)

    reopened = _open(fs, recovery_point=9)

    assert reopened.recovery_report.recovered_segments == tuple(b for b in bases if b >= holder)
    assert reopened.recovery_point == 9  # min(checkpoint, LEO): only a flush advances it
    assert not reopened.recovery_report.cut_anything


def test_a_missing_index_is_rebuilt_even_after_a_clean_shutdown(
    fs: FaultInjectingFileSystem,
) -> None:
    config = LogConfig(segment_bytes=600, segment_index_bytes=4096, index_interval_bytes=50)
    log = _open(fs, config)
    _append(log, 12)
    first_index = _segment_file(log, 0, ".index")
    log.flush()
    log.close()
    entries = _index_entries(first_index, 0)
    assert entries
    os.remove(first_index)

    reopened = _open(fs, config, had_clean_shutdown=True)

    assert reopened.recovery_report.rebuilt_indexes == (0,)
    assert _index_entries(first_index, 0) == entries
    assert _offsets(reopened) == list(range(24))


def test_leader_epoch_cache_is_rebuilt_from_the_batches_when_its_checkpoint_is_lost(
    fs: FaultInjectingFileSystem,
) -> None:
    log = _open(fs)
    _append(log, 2, epoch=1)
    _append(log, 2, epoch=4)
    log.flush()
    log.close()
    os.remove(f"{log.dir_path}/{LEADER_EPOCH_CHECKPOINT}")

    recovered = _open(fs, recovery_point=0)

    assert recovered.epoch_cache.entries == [EpochEntry(1, 0), EpochEntry(4, 4)]


def test_a_log_end_below_the_checkpointed_log_start_restarts_empty_there(
    fs: FaultInjectingFileSystem,
) -> None:
    log = _open(fs)
    _append(log, 3)
    log.flush()
    log.close()

    recovered = _open(fs, log_start_offset=50)

    assert recovered.recovery_report.restarted_at_log_start
    assert list(recovered.segments) == [50]
    assert recovered.log_start_offset == recovered.log_end_offset == 50
    assert recovered.epoch_cache.entries == []


def test_stray_files_and_orphan_indexes_are_removed_at_open(fs: FaultInjectingFileSystem) -> None:
    log = _open(fs)
    _append(log, 2)
    log.flush()
    log.close()
    strays = [
        f"{100:020d}.log.deleted",
        f"{100:020d}.log.swap",
        f"{100:020d}.log.cleaned",
        f"{LEADER_EPOCH_CHECKPOINT}.tmp",
    ]
    for name in [*strays, f"{200:020d}.index"]:
        with open(f"{log.dir_path}/{name}", "wb") as f:
            f.write(b"junk")

    reopened = _open(fs, had_clean_shutdown=True)

    assert sorted(reopened.recovery_report.deleted_stray_files) == sorted(
        [*strays, f"{200:020d}.index"]
    )
    assert sorted(os.listdir(log.dir_path)) == sorted(
        [
            f"{0:020d}.log",
            f"{0:020d}.index",
            f"{0:020d}.timeindex",
            f"{4:020d}.snapshot",  # the producer-state snapshot a clean close writes
            LEADER_EPOCH_CHECKPOINT,
        ]
    )
    assert _offsets(reopened) == [0, 1, 2, 3]


# -- crashes on the fault-injecting filesystem -------------------------------------------------


def test_crash_loses_only_what_was_not_flushed(fs: FaultInjectingFileSystem) -> None:
    config = LogConfig(segment_bytes=300, segment_index_bytes=4096, index_interval_bytes=50)
    log = _open(fs, config)
    _append(log, 5)
    log.flush()
    flushed = log.recovery_point
    _append(log, 10)  # several rolls past the recovery point, none flushed

    fs.crash(tear=False)
    log.abandon()
    recovered = _open(fs, config, recovery_point=flushed)

    assert recovered.log_end_offset == flushed
    assert _offsets(recovered) == list(range(flushed))


def test_crash_never_leaves_a_hole_when_rolled_segments_lose_their_tails(
    fs: FaultInjectingFileSystem,
) -> None:
    """Regression: every rolled segment after the recovery point comes back empty, but the
    active one's base is higher; the log must end at the last surviving offset, not at that
    base (which would leave offsets missing in the middle of the log)."""
    config = LogConfig(segment_bytes=300, segment_index_bytes=4096)
    log = _open(fs, config)
    _append(log, 3)
    log.flush()
    _append(log, 6)
    assert len(log.segments) > 2

    fs.crash(tear=False)
    log.abandon()
    recovered = _open(fs, config, recovery_point=6)

    assert recovered.log_end_offset == 6
    assert _offsets(recovered) == list(range(6))
    assert recovered.recovery_report.deleted_segments
    info = recovered.append_as_leader(_batch([b"next"]), 0)
    assert info.first_offset == 6


@pytest.mark.parametrize("seed", range(8))
def test_crash_with_a_torn_write_keeps_a_dense_prefix(tmp_path: Path, seed: int) -> None:
    fs = FaultInjectingFileSystem(str(tmp_path), seed=seed)
    config = LogConfig(segment_bytes=500, segment_index_bytes=4096, index_interval_bytes=80)
    log = _open(fs, config)
    _append(log, 4, per_batch=3)
    log.flush()
    flushed = log.recovery_point
    _append(log, 1 + seed, per_batch=3)
    written = log.log_end_offset

    fs.crash(tear=True)
    log.abandon()
    recovered = _open(fs, config, recovery_point=flushed)

    assert flushed <= recovered.log_end_offset <= written
    assert _offsets(recovered) == list(range(recovered.log_end_offset))
    index: OffsetIndex = recovered.active_segment.offset_index
    assert index.entries == 0 or index.last_offset < recovered.log_end_offset


def test_a_rising_leader_epoch_the_epoch_cache_does_not_know_ends_the_recovered_log(
    fs: FaultInjectingFileSystem,
) -> None:
    """Regression (found by crash fuzzing): recovery took a batch whose epoch a flipped bit
    raised (1 -> 5) as a new epoch and wrote it into the leader-epoch cache. The cache is
    fsynced before the data, so an epoch it does not give for the offset ends the log there."""
    log = _open(fs)
    _append(log, 2, epoch=1)
    _append(log, 3, epoch=3)
    log.flush()
    log.close()
    path = _segment_file(log, 0)
    size = os.path.getsize(path)
    victim, victim_offset, _ = _batch_positions(path)[1]
    _set_epoch(path, victim, 5)

    recovered = _open(fs, recovery_point=0)

    report = recovered.recovery_report
    assert (report.truncated_segment, report.bytes_truncated) == (0, size - victim)
    assert "epoch" in (report.truncation_reason or "")
    assert recovered.log_end_offset == victim_offset
    assert recovered.epoch_cache.entries == [EpochEntry(1, 0)]


def test_a_lost_epoch_checkpoint_is_rebuilt_from_the_batches(
    fs: FaultInjectingFileSystem,
) -> None:
    """Without a leader-epoch checkpoint there is nothing to check epochs against: recovery
    rebuilds the cache from the batches, rising epochs included."""
    log = _open(fs)
    _append(log, 2, epoch=1)
    _append(log, 3, epoch=3)
    log.flush()
    log.close()
    os.remove(f"{log.dir_path}/leader-epoch-checkpoint")

    recovered = _open(fs, recovery_point=0)

    assert recovered.log_end_offset == 10
    assert recovered.epoch_cache.entries == [EpochEntry(1, 0), EpochEntry(3, 4)]
