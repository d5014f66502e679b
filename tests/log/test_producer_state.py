"""Idempotent producers' state in the log: the rules a leader applies, the snapshot file format,
and the state surviving roll, retention, truncation, close, crash and corrupt snapshots."""

from __future__ import annotations

import os
import struct
from pathlib import Path

import crc32c
import pytest

from replog.clock import ManualClock
from replog.errors import (
    CorruptProducerSnapshotError,
    CorruptRecordError,
    InvalidProducerEpochError,
    OutOfOrderSequenceError,
)
from replog.log import decode_records, encode_batch, iter_batches
from replog.log.config import LogConfig
from replog.log.fault_fs import FaultInjectingFileSystem
from replog.log.log import Log
from replog.log.producer_snapshot import decode_snapshot, encode_snapshot, snapshot_file_name
from replog.log.producer_state import (
    BatchMetadata,
    ProducerAppend,
    ProducerEntry,
    ProducerState,
    sequence_add,
)

INT32_MAX = 2**31 - 1
WALL_MS = 1_700_000_000_000


def batch(pid: int, epoch: int, seq: int, base: int, count: int = 1, ts: int = 5) -> ProducerAppend:
    return ProducerAppend(pid, epoch, seq, base, base + count - 1, ts)


def idem(values: list[bytes], pid: int, epoch: int, seq: int, ts: int = WALL_MS) -> bytes:
    return encode_batch(
        values, base_timestamp=ts, producer_id=pid, producer_epoch=epoch, base_sequence=seq
    )


def values_of(log: Log) -> list[bytes | None]:
    found = []
    for data in log.batches():
        for position, _ in iter_batches(data):
            found += [r.value for r in decode_records(data, position)]
    return found


# -- the rules (pure state) ---------------------------------------------------------------------


def test_a_retry_of_any_of_the_last_five_batches_is_a_duplicate() -> None:
    state = ProducerState()
    for i in range(6):
        assert state.check_append([batch(7, 0, i * 2, 10 + i * 2, count=2)]) is None
        state.apply(batch(7, 0, i * 2, 10 + i * 2, count=2, ts=100 + i))
    for i in range(1, 6):
        found = state.check_append([batch(7, 0, i * 2, 999, count=2)])
        assert found == BatchMetadata(i * 2 + 1, 10 + i * 2 + 1, 1, 100 + i)
        assert (found.first_offset, found.first_sequence) == (10 + i * 2, i * 2)
    with pytest.raises(OutOfOrderSequenceError):  # the sixth-last is forgotten
        state.check_append([batch(7, 0, 0, 999, count=2)])


def test_a_gap_in_the_sequence_is_out_of_order_and_changes_nothing() -> None:
    state = ProducerState()
    state.apply(batch(1, 0, 0, 0, count=3))
    with pytest.raises(OutOfOrderSequenceError) as raised:
        state.check_append([batch(1, 0, 4, 3)])
    assert raised.value.producer_id == 1
    assert state.check_append([batch(1, 0, 3, 3)]) is None
    assert state.last_entry(1) == ProducerEntry(1, 0, (BatchMetadata(2, 2, 2, 5),), 5)


def test_an_older_epoch_is_fenced_and_a_newer_one_must_start_at_zero() -> None:
    state = ProducerState()
    state.apply(batch(1, 3, 0, 0))
    with pytest.raises(InvalidProducerEpochError):
        state.check_append([batch(1, 2, 1, 1)])
    with pytest.raises(OutOfOrderSequenceError):
        state.check_append([batch(1, 4, 5, 1)])
    assert state.check_append([batch(1, 4, 0, 1)]) is None
    state.apply(batch(1, 4, 0, 1))
    entry = state.last_entry(1)
    assert entry is not None and entry.producer_epoch == 4 and len(entry.batches) == 1


def test_an_unknown_producer_may_start_at_any_sequence() -> None:
    """Kafka since KIP-360: no state (never written, expired, cleaned away) is no error."""
    state = ProducerState()
    assert state.check_append([batch(9, 0, 17, 0)]) is None
    state.apply(batch(9, 0, 17, 0))
    with pytest.raises(OutOfOrderSequenceError):  # from then on the sequence must follow
        state.check_append([batch(9, 0, 19, 1)])
    assert state.check_append([batch(9, 0, 18, 1)]) is None


def test_sequences_wrap_from_int32_max_to_zero() -> None:
    assert sequence_add(INT32_MAX, 1) == 0
    assert sequence_add(INT32_MAX - 1, 3) == 1
    state = ProducerState()
    state.apply(ProducerAppend(1, 0, 0, 0, 0, 5))
    state.producers[1] = ProducerEntry(1, 0, (BatchMetadata(INT32_MAX - 2, 0, 0, 5),), 5)
    wrapping = ProducerAppend(1, 0, INT32_MAX - 1, 1, 3, 5)  # sequences MAX-1, MAX, 0
    assert wrapping.last_sequence == 0
    assert state.check_append([wrapping]) is None
    state.apply(wrapping)
    assert state.check_append([ProducerAppend(1, 0, INT32_MAX - 1, 9, 11, 5)]) is not None
    assert state.check_append([batch(1, 0, 1, 4)]) is None


def test_batches_of_one_request_are_checked_in_order() -> None:
    state = ProducerState()
    assert state.check_append([batch(1, 0, 0, 0, 2), batch(1, 0, 2, 2, 2)]) is None
    with pytest.raises(OutOfOrderSequenceError):
        state.check_append([batch(1, 0, 0, 0, 2), batch(1, 0, 3, 2, 2)])
    assert state.producers == {}


def test_expired_producers_are_dropped_by_their_last_timestamp() -> None:
    state = ProducerState()
    state.apply(batch(1, 0, 0, 0, ts=1_000))
    state.apply(batch(2, 0, 0, 1, ts=5_000))
    assert state.remove_expired(now_ms=6_000, expiration_ms=5_000) == [1]
    assert list(state.producers) == [2]


# -- the snapshot format ------------------------------------------------------------------------


def test_snapshot_bytes_follow_kafkas_layout() -> None:
    entry = ProducerEntry(42, 3, (BatchMetadata(9, 107, 4, 1234),), 1234)
    data = encode_snapshot([entry])
    body = struct.pack(">i", 1) + struct.pack(">qhiqiqiq", 42, 3, 9, 107, 4, 1234, -1, -1)
    assert data == struct.pack(">hI", 1, crc32c.crc32c(body)) + body
    assert len(data) == 10 + 46
    assert decode_snapshot(data) == [entry]


def test_an_entry_without_a_batch_round_trips() -> None:
    entry = ProducerEntry(5, 1, (), 77)
    assert decode_snapshot(encode_snapshot([entry])) == [entry]
    assert decode_snapshot(encode_snapshot([])) == []


@pytest.mark.parametrize(
    "damage",
    [
        lambda d: d[:5],  # shorter than the header
        lambda d: d[:-3],  # short entries (the CRC catches it)
        lambda d: d + b"\0" * 46,  # trailing bytes
        lambda d: b"\0\2" + d[2:],  # another version
        lambda d: d[:20] + bytes([d[20] ^ 1]) + d[21:],  # a flipped bit
        lambda d: b"",
    ],
)
def test_a_damaged_snapshot_is_a_typed_error(damage: object) -> None:
    data = encode_snapshot([ProducerEntry(1, 0, (BatchMetadata(0, 0, 0, 1),), 1)])
    with pytest.raises(CorruptProducerSnapshotError):
        decode_snapshot(damage(data))  # type: ignore[operator]


# -- the state in a log -------------------------------------------------------------------------


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(0, wall_offset_ms=WALL_MS)


def open_log(
    path: Path,
    clock: ManualClock,
    *,
    fs: FaultInjectingFileSystem | None = None,
    config: LogConfig | None = None,
    clean: bool = False,
    recovery_point: int = 0,
) -> Log:
    return Log.open(
        str(path / "t-0"),
        config or LogConfig(segment_bytes=400, index_interval_bytes=50),
        fs=fs or FaultInjectingFileSystem(str(path)),
        clock=clock,
        had_clean_shutdown=clean,
        recovery_point=recovery_point,
    )


def test_a_retried_batch_gets_its_first_offsets_and_is_not_written_again(
    tmp_path: Path, clock: ManualClock
) -> None:
    log = open_log(tmp_path, clock)
    log.append_as_leader(encode_batch([b"plain"], base_timestamp=WALL_MS), 0)
    first = log.append_as_leader(idem([b"a", b"b"], 5, 0, 0, ts=WALL_MS + 7), 0)
    log.append_as_leader(idem([b"c"], 5, 0, 2), 0)
    retry = log.append_as_leader(idem([b"a", b"b"], 5, 0, 0, ts=WALL_MS + 7), 0)
    assert (first.first_offset, first.last_offset, first.duplicate) == (1, 2, False)
    assert (retry.first_offset, retry.last_offset, retry.duplicate) == (1, 2, True)
    assert retry.max_timestamp == WALL_MS + 7
    assert values_of(log) == [b"plain", b"a", b"b", b"c"]
    assert log.log_end_offset == 4


def test_a_refused_batch_writes_nothing(tmp_path: Path, clock: ManualClock) -> None:
    log = open_log(tmp_path, clock)
    log.append_as_leader(idem([b"a"], 5, 1, 0), 0)
    for data, error in [
        (idem([b"x"], 5, 1, 3), OutOfOrderSequenceError),
        (idem([b"x"], 5, 0, 1), InvalidProducerEpochError),
    ]:
        with pytest.raises(error):
            log.append_as_leader(data, 0)
    with pytest.raises(CorruptRecordError):  # a producer id without a sequence
        log.append_as_leader(idem([b"x"], 5, 1, -1), 0)
    assert log.log_end_offset == 1 and values_of(log) == [b"a"]


def test_a_follower_builds_the_same_state_from_what_it_copies(
    tmp_path: Path, clock: ManualClock
) -> None:
    leader = open_log(tmp_path / "leader", clock)
    follower = open_log(tmp_path / "follower", clock)
    for seq in range(0, 12, 2):
        leader.append_as_leader(idem([b"x", b"y"], 3, 0, seq), 0)
        leader.append_as_leader(idem([b"z"], 4, 2, seq // 2), 0)
    for data in leader.batches():
        follower.append_as_follower(data)
    assert follower.producer_state.producers == leader.producer_state.producers
    assert follower.producer_state.map_end_offset == leader.log_end_offset


def test_snapshots_are_written_at_roll_and_deleted_with_their_segments(
    tmp_path: Path, clock: ManualClock
) -> None:
    config = LogConfig(segment_bytes=200, retention_bytes=250)
    log = open_log(tmp_path, clock, config=config)
    for seq in range(8):
        log.append_as_leader(idem([b"v" * 40], 1, 0, seq), 0)
    bases = list(log.segments)
    assert len(bases) > 2
    names = set(os.listdir(log.dir_path))
    assert {snapshot_file_name(b) for b in bases[1:]} <= names
    log.update_high_watermark(log.log_end_offset)
    deleted = log.delete_old_segments()
    assert deleted > 0
    names = set(os.listdir(log.dir_path))
    for base in bases[:deleted]:
        assert snapshot_file_name(base) not in names
    assert snapshot_file_name(bases[deleted]) in names


def test_a_clean_close_snapshots_the_end_and_reopening_replays_nothing(
    tmp_path: Path, clock: ManualClock
) -> None:
    fs = FaultInjectingFileSystem(str(tmp_path))
    log = open_log(tmp_path, clock, fs=fs)
    for seq in range(5):
        log.append_as_leader(idem([b"a"], 8, 0, seq), 0)
    log.flush()
    log.close()
    reopened = open_log(tmp_path, clock, fs=fs, clean=True, recovery_point=5)
    assert reopened.producers.loaded_from == 5
    assert reopened.producers.replayed_batches == 0
    entry = reopened.producer_state.last_entry(8)
    assert entry is not None and entry.last_sequence == 4 and entry.last_offset == 4
    assert reopened.append_as_leader(idem([b"a"], 8, 0, 4), 0).duplicate
    assert reopened.append_as_leader(idem([b"b"], 8, 0, 5), 0).first_offset == 5


def test_after_a_crash_the_state_is_rebuilt_from_a_snapshot_below_the_recovery_point(
    tmp_path: Path, clock: ManualClock
) -> None:
    fs = FaultInjectingFileSystem(str(tmp_path))
    log = open_log(tmp_path, clock, fs=fs, config=LogConfig(segment_bytes=300))
    for seq in range(10):
        log.append_as_leader(idem([b"v" * 30], 2, 0, seq), 0)
    log.flush()
    flushed = log.recovery_point
    snapshots_at_crash = list(log.producers.snapshots.offsets)
    assert snapshots_at_crash and max(snapshots_at_crash) <= flushed
    for seq in range(10, 13):  # not flushed: lost in the crash
        log.append_as_leader(idem([b"v" * 30], 2, 0, seq), 0)
    fs.crash(tear=False)
    log.abandon()
    recovered = open_log(tmp_path, clock, fs=fs, recovery_point=flushed)
    assert recovered.log_end_offset == 10
    assert recovered.producers.loaded_from == max(snapshots_at_crash)
    assert recovered.producers.replayed_batches == 10 - max(snapshots_at_crash)
    entry = recovered.producer_state.last_entry(2)
    assert entry is not None and entry.last_sequence == 9
    assert recovered.append_as_leader(idem([b"v" * 30], 2, 0, 10), 0).first_offset == 10


def test_snapshots_above_the_recovery_point_are_not_trusted_after_a_crash(
    tmp_path: Path, clock: ManualClock
) -> None:
    fs = FaultInjectingFileSystem(str(tmp_path))
    log = open_log(tmp_path, clock, fs=fs, config=LogConfig(segment_bytes=300))
    for seq in range(10):
        log.append_as_leader(idem([b"v" * 30], 2, 0, seq), 0)
    log.flush()
    log.abandon()
    recovered = open_log(tmp_path, clock, fs=fs, recovery_point=3)
    assert recovered.producers.loaded_from is None or recovered.producers.loaded_from <= 3
    entry = recovered.producer_state.last_entry(2)
    assert entry is not None and entry.last_sequence == 9


@pytest.mark.parametrize("damage", [b"", b"\0\1\2", b"junk" * 20])
def test_a_corrupt_snapshot_is_dropped_and_the_state_rebuilt_from_the_log(
    tmp_path: Path, clock: ManualClock, damage: bytes
) -> None:
    fs = FaultInjectingFileSystem(str(tmp_path))
    log = open_log(tmp_path, clock, fs=fs)
    for seq in range(4):
        log.append_as_leader(idem([b"a"], 8, 0, seq), 0)
    log.flush()
    log.close()
    path = os.path.join(log.dir_path, snapshot_file_name(4))
    with open(path, "wb") as f:
        f.write(damage)
    reopened = open_log(tmp_path, clock, fs=fs, clean=True, recovery_point=4)
    assert reopened.producers.dropped_snapshots == [path]
    assert reopened.producers.replayed_batches == 4
    entry = reopened.producer_state.last_entry(8)
    assert entry is not None and len(entry.batches) == 4
    with open(path, "rb") as f:  # a good snapshot replaces it (each producer's last batch)
        assert decode_snapshot(f.read()) == [ProducerEntry(8, 0, entry.batches[-1:], WALL_MS)]


def test_truncation_drops_the_state_above_the_truncation_point(
    tmp_path: Path, clock: ManualClock
) -> None:
    log = open_log(tmp_path, clock, config=LogConfig(segment_bytes=300))
    for seq in range(10):
        log.append_as_leader(idem([b"v" * 30], 2, 0, seq), 0)
        log.append_as_leader(idem([b"w" * 30], 3, 0, seq), 0)
    log.truncate_to(7)  # keeps 2's batches 0-3 and 3's batches 0-2
    two, three = log.producer_state.last_entry(2), log.producer_state.last_entry(3)
    assert two is not None and two.last_sequence == 3 and two.last_offset == 6
    assert three is not None and three.last_sequence == 2
    assert all(o <= 7 for o in log.producers.snapshots.offsets)
    with pytest.raises(OutOfOrderSequenceError):
        log.append_as_leader(idem([b"v"], 2, 0, 9), 0)
    assert log.append_as_leader(idem([b"v"], 2, 0, 4), 0).first_offset == 7
    log.truncate_fully_and_start_at(50)
    assert log.producer_state.producers == {}
    assert log.producers.snapshots.offsets == []


def test_expiration_uses_the_wall_clock_and_the_configured_age(
    tmp_path: Path, clock: ManualClock
) -> None:
    log = open_log(tmp_path, clock, config=LogConfig(producer_id_expiration_ms=60_000))
    log.append_as_leader(idem([b"a"], 1, 0, 0, ts=WALL_MS), 0)
    clock.advance(59_999)
    assert log.remove_expired_producers() == 0
    clock.advance(1)
    assert log.remove_expired_producers() == 1
    assert log.producer_state.last_entry(1) is None
    # Forgotten: a retry of its first batch is no longer recognised (as in Kafka).
    retry = log.append_as_leader(idem([b"a"], 1, 0, 0, ts=WALL_MS), 0)
    assert (retry.first_offset, retry.duplicate) == (1, False)
