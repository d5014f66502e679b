"""Offsets by timestamp (ListOffsets): the earliest record at or after a time, the record with
the largest timestamp, across segments, inside CreateTime batches whose timestamps go back
and forth, bounded by the HW and the log start."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from replog.clock import ManualClock
from replog.log import (
    Compression,
    FaultInjectingFileSystem,
    Log,
    LogConfig,
    TimestampAndOffset,
    encode_batch,
    offset_for_timestamp,
    offset_of_max_timestamp,
)


@pytest.fixture(params=[1, 150], ids=["dense-index", "sparse-index"])
def log(tmp_path: Path, request: pytest.FixtureRequest) -> Log:
    fs = FaultInjectingFileSystem(str(tmp_path), seed=5)
    # Small segments so the lookup crosses segments; a time-index entry per batch or sparser.
    config = LogConfig(segment_bytes=600, index_interval_bytes=request.param)
    return Log.open(f"{fs.root}/t-0", config, fs=fs, clock=ManualClock())


def _append(log: Log, timestamps: list[int], compression: Compression = Compression.NONE) -> None:
    batch = encode_batch(
        [b"v%d" % t for t in timestamps],
        timestamps=timestamps,
        base_timestamp=min(timestamps),
        compression=compression,
    )
    log.append_as_leader(batch, leader_epoch=0)


def _model(stamps: list[int], target: int, start: int, end: int) -> TimestampAndOffset | None:
    for offset in range(start, len(stamps)):
        if stamps[offset] >= target:
            return TimestampAndOffset(stamps[offset], offset) if offset < end else None
    return None


def test_lookup_matches_a_linear_scan_across_segments(log: Log) -> None:
    rng = random.Random(7)
    stamps: list[int] = []
    clock = 1_000
    for batch_number in range(40):
        # Mostly increasing, with CreateTime stragglers inside batches.
        size = rng.randint(1, 4)
        batch = [clock + rng.randint(-30, 30) for _ in range(size)]
        clock += 20
        _append(log, batch, Compression.ZSTD if batch_number % 3 == 0 else Compression.NONE)
        stamps += batch
    assert len(log.segments) > 3, "the test needs several segments"
    log.update_high_watermark(log.log_end_offset)
    for target in range(min(stamps) - 5, max(stamps) + 5, 3):
        expected = _model(stamps, target, 0, len(stamps))
        assert offset_for_timestamp(log, target, len(stamps)) == expected, target
    # Bounded: nothing at or past max_offset (a consumer's HW).
    bound = len(stamps) // 2
    for target in range(min(stamps), max(stamps), 7):
        assert offset_for_timestamp(log, target, bound) == _model(stamps, target, 0, bound)


def test_first_record_reaching_the_target_inside_a_batch(log: Log) -> None:
    _append(log, [100, 300, 200, 400])
    assert offset_for_timestamp(log, 150, 4) == (300, 1)
    assert offset_for_timestamp(log, 250, 4) == (300, 1)  # offset order, not timestamp order
    assert offset_for_timestamp(log, 350, 4) == (400, 3)
    assert offset_for_timestamp(log, 401, 4) is None
    assert offset_for_timestamp(log, 0, 4) == (100, 0)


def test_max_timestamp_is_the_first_record_holding_it(log: Log) -> None:
    _append(log, [100, 500, 200])
    _append(log, [300, 500])
    _append(log, [250])
    assert offset_of_max_timestamp(log, log.log_end_offset) == (500, 1)
    assert offset_of_max_timestamp(log, 1) == (100, 0)  # bounded by the HW
    assert offset_of_max_timestamp(log, 0) is None


def test_records_below_the_log_start_are_never_answers(log: Log) -> None:
    for n in range(30):
        _append(log, [1_000 + n])
    log.update_high_watermark(log.log_end_offset)
    log.maybe_increment_log_start_offset(12)
    assert offset_for_timestamp(log, 0, 30) == (1_012, 12)
    assert offset_for_timestamp(log, 1_005, 30) == (1_012, 12)
    assert offset_for_timestamp(log, 1_020, 30) == (1_020, 20)
    assert offset_of_max_timestamp(log, 30) == (1_029, 29)
    with pytest.raises(ValueError):
        offset_for_timestamp(log, -1, 30)
