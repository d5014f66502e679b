"""Damage in the batches a log's producer state is rebuilt from, at open.

Below the recovery point (and everywhere after a clean shutdown) the loader trusts the files, so
the producer-state rebuild is the first to read some batches' headers. A damaged header (a
flipped base offset: outside the CRC) once reached `ProducerState.apply` and failed the open
with ``InvariantError: producer state at X given a batch at Y``. It is damage: the open fails
with `CorruptRecordError` naming where, and nothing is cut."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from replog.clock import ManualClock
from replog.errors import CorruptRecordError, StorageError
from replog.log import FaultInjectingFileSystem, Log, LogConfig, encode_batch, iter_batches
from replog.log.producer_snapshot import snapshot_file_name

WALL_MS = 1_700_000_000_000
CONFIG = LogConfig(segment_bytes=600, segment_index_bytes=4096, index_interval_bytes=50)
BATCHES = 8
PID = 7


def _idem(seq: int) -> bytes:
    return encode_batch(
        [b"a%d" % seq, b"b%d" % seq],
        base_timestamp=WALL_MS,
        producer_id=PID,
        producer_epoch=0,
        base_sequence=seq,
        partition_leader_epoch=0,
    )


def _open(fs: FaultInjectingFileSystem, config: LogConfig = CONFIG, **kwargs: int) -> Log:
    clock = ManualClock(0, wall_offset_ms=WALL_MS)
    return Log.open(f"{fs.root}/t-0", config, fs=fs, clock=clock, **kwargs)


@pytest.fixture
def fs(tmp_path: Path) -> FaultInjectingFileSystem:
    return FaultInjectingFileSystem(str(tmp_path), seed=3)


def _written_log(
    fs: FaultInjectingFileSystem, batches: int = BATCHES, config: LogConfig = CONFIG
) -> Log:
    """A cleanly closed log of ``batches`` two-record batches of one idempotent producer
    (offsets 0..15 by default, two segments of 7 and 1 batches), all fsynced."""
    log = _open(fs, config)
    for seq in range(0, 2 * batches, 2):
        log.append_as_leader(_idem(seq), 0)
    log.flush()
    log.close()
    assert len(log.segments) >= 2
    return log


def _batches(log: Log) -> list[tuple[str, int]]:
    """(segment file, position) of every batch of the log, in offset order."""
    found = []
    for base in log.segments:
        path = f"{log.dir_path}/{base:020d}.log"
        with open(path, "rb") as f:
            found += [(path, position) for position, _ in iter_batches(f.read())]
    return found


def _flip_base_offset(path: str, position: int, mask: int) -> None:
    """XOR the low byte of the batch's base offset (outside the CRC) with ``mask``."""
    with open(path, "r+b") as f:
        f.seek(position + 7)
        byte = f.read(1)[0]
        f.seek(position + 7)
        f.write(bytes([byte ^ mask]))


def _remove_snapshots(log: Log) -> None:
    for name in os.listdir(log.dir_path):
        if name.endswith(".snapshot"):
            os.remove(f"{log.dir_path}/{name}")


@pytest.mark.parametrize("mask", [0x01, 0x02, 0x04])
@pytest.mark.parametrize("clean", [True, False], ids=["clean", "below_recovery_point"])
def test_a_flipped_base_offset_the_producer_rebuild_reads_is_corrupt_not_an_invariant(
    fs: FaultInjectingFileSystem, clean: bool, mask: int
) -> None:
    """Regression: with no producer snapshot the rebuild scans every segment; a batch whose
    base offset was flipped (offsets 2-3 read as 3-4, 0-1 or 6-7) overlapped the state and
    raised InvariantError. Now it is a CorruptRecordError naming the damaged batch, and the
    files are not touched."""
    log = _written_log(fs)
    path, victim = _batches(log)[1]  # offsets 2-3, in the first segment
    _remove_snapshots(log)
    _flip_base_offset(path, victim, mask)
    size = os.path.getsize(path)

    kwargs = {"had_clean_shutdown": True} if clean else {"recovery_point": log.recovery_point}
    with pytest.raises(CorruptRecordError) as raised:
        _open(fs, **kwargs)

    error = raised.value
    assert (error.path, error.position, error.first_offset) == (path, victim, 2)
    assert os.path.getsize(path) == size
    assert not [n for n in os.listdir(log.dir_path) if n.endswith(".snapshot")]


def test_damage_in_a_segment_the_rebuild_replays_from_its_snapshot_is_corrupt(
    fs: FaultInjectingFileSystem,
) -> None:
    """The snapshot of the segment roll is there but not the clean-shutdown one: the rebuild
    replays the active segment, whose first batch's base offset was flipped (14-15 read as
    15-16, so the next batch, at 16, overlapped it: InvariantError). The batch is followed by
    others, so the log end (read from the last index entry on) is right."""
    log = _written_log(fs, batches=12)
    bases = list(log.segments)
    os.remove(f"{log.dir_path}/{snapshot_file_name(log.log_end_offset)}")
    batches = _batches(log)
    path, victim = next((p, pos) for p, pos in batches if p.endswith(f"{bases[-1]:020d}.log"))
    assert victim == 0
    _flip_base_offset(path, victim, 0x01)

    with pytest.raises(CorruptRecordError) as raised:
        _open(fs, had_clean_shutdown=True)

    assert (raised.value.path, raised.value.first_offset) == (path, bases[-1])


@pytest.mark.parametrize("clean", [True, False], ids=["clean", "below_recovery_point"])
def test_an_undamaged_log_without_snapshots_rebuilds_its_producer_state(
    fs: FaultInjectingFileSystem, clean: bool
) -> None:
    """The check costs nothing in outcome when nothing is damaged: the state is the log's."""
    log = _written_log(fs)
    _remove_snapshots(log)
    kwargs = {"had_clean_shutdown": True} if clean else {"recovery_point": log.recovery_point}

    reopened = _open(fs, **kwargs)

    assert reopened.producers.replayed_batches == BATCHES
    entry = reopened.producer_state.last_entry(PID)
    assert entry is not None and entry.last_sequence == 2 * BATCHES - 1
    assert reopened.append_as_leader(_idem(2 * BATCHES - 2), 0).duplicate


@pytest.mark.parametrize("mask", [0x01, 0x02, 0x04])
def test_a_clean_open_recovers_an_active_segment_whose_last_base_offset_flipped(
    fs: FaultInjectingFileSystem, mask: int
) -> None:
    """Regression: after a clean shutdown the log end is read from the active segment's last
    index entry on, by the headers alone, so a flipped base offset there (18 read as 19, 16 or
    22) gave a wrong log end offset: the clean-shutdown snapshot went (above it), the state was
    replayed from the roll snapshot, and the batches overlapped (InvariantError), or the log
    ended past what it holds. The last batch's base offset is now checked against the offset
    deltas counted from the last index entry: a wrong one gets the active segment recovered
    (the log ends before it), as a damaged length there already did."""
    log = _written_log(fs, batches=10)
    bases = list(log.segments)
    assert bases == [0, 14]
    path, victim = _batches(log)[-1]  # offsets 18-19, the active segment's last batch
    size = os.path.getsize(path)
    _flip_base_offset(path, victim, mask)

    reopened = _open(fs, had_clean_shutdown=True)

    report = reopened.recovery_report
    assert (report.truncated_segment, report.bytes_truncated) == (14, size - victim)
    assert report.truncation_reason is not None and "base offset" in report.truncation_reason
    assert reopened.log_end_offset == 18 and os.path.getsize(path) == victim
    entry = reopened.producer_state.last_entry(PID)
    assert entry is not None and entry.last_sequence == 17
    assert reopened.append_as_leader(_idem(16), 0).duplicate
    assert reopened.append_as_leader(_idem(18), 0).first_offset == 18


def test_a_clean_open_keeps_a_flipped_base_offset_the_log_end_does_not_depend_on(
    fs: FaultInjectingFileSystem,
) -> None:
    """Only the last batch's base offset gives the log end: one flipped further back in the
    batches after the last index entry is not cut at open (fsynced data is not thrown away);
    reads find it (as anywhere below the recovery point) and the cluster repairs it."""
    config = LogConfig(segment_bytes=600, segment_index_bytes=4096, index_interval_bytes=4096)
    log = _written_log(fs, batches=10, config=config)
    path, victim = _batches(log)[-2]  # offsets 16-17; no index entry in the segment
    size = os.path.getsize(path)
    _flip_base_offset(path, victim, 0x01)

    reopened = _open(fs, config, had_clean_shutdown=True)

    assert not reopened.recovery_report.cut_anything and os.path.getsize(path) == size
    assert reopened.log_end_offset == 20
    with pytest.raises(CorruptRecordError) as raised:
        reopened.read(16, 1 << 20)
    assert (raised.value.position, raised.value.first_offset) == (victim, 16)


def test_a_truncation_whose_producer_replay_meets_damage_takes_the_log_offline(
    fs: FaultInjectingFileSystem,
) -> None:
    """A truncation reloads the producer state from the newest snapshot at or below its
    offset; with the roll snapshot gone it replays from the first segment, and a damaged batch
    there (which the open, loading the clean-shutdown snapshot, never read) raised
    InvariantError out of `Log.truncate_to`, the log half truncated. Now the log goes offline
    (StorageError, as for a failed write): its state no longer matches its files."""
    log = _written_log(fs, batches=10)
    bases = list(log.segments)
    os.remove(f"{log.dir_path}/{snapshot_file_name(bases[-1])}")
    path, victim = _batches(log)[1]  # offsets 2-3, in the first segment
    _flip_base_offset(path, victim, 0x01)
    reopened = _open(fs, had_clean_shutdown=True)
    assert reopened.producers.replayed_batches == 0

    with pytest.raises(StorageError) as raised:
        reopened.truncate_to(16)

    assert isinstance(raised.value.__cause__, CorruptRecordError)
    assert reopened.is_offline
