"""Corrupt inputs: each gives a typed error or a documented repair (an index rebuilt, a cut tail
reported in `Log.recovery_report`), never a silent loss of fsynced data."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

import pytest

from replog.clock import ManualClock
from replog.errors import (
    CorruptRecordError,
    MalformedCheckpointError,
    RecordBatchTooLargeError,
    StorageError,
)
from replog.log import (
    FaultInjectingFileSystem,
    Log,
    LogConfig,
    LogManager,
    decode_records,
    encode_batch,
    iter_batches,
    offset_for_timestamp,
    offset_of_max_timestamp,
)
from replog.log.checkpoints import CLEAN_SHUTDOWN_FILE
from replog.log.log import LEADER_EPOCH_CHECKPOINT
from replog.log.manager import HW_CHECKPOINT, LOG_START_CHECKPOINT, TopicPartition

CONFIG = LogConfig(segment_bytes=600, segment_index_bytes=4096, index_interval_bytes=50)
BATCHES = 8


@pytest.fixture
def fs(tmp_path: Path) -> FaultInjectingFileSystem:
    return FaultInjectingFileSystem(str(tmp_path), seed=2)


def _open(fs: FaultInjectingFileSystem, **kwargs: int) -> Log:
    return Log.open(f"{fs.root}/topic-0", CONFIG, fs=fs, clock=ManualClock(), **kwargs)


def _batch(values: Sequence[bytes], *, base_offset: int = 0, epoch: int = -1) -> bytes:
    return encode_batch(
        list(values), base_timestamp=1000, base_offset=base_offset, partition_leader_epoch=epoch
    )


def _written_log(fs: FaultInjectingFileSystem) -> Log:
    """A closed log of BATCHES two-record batches (offsets 0..15), all fsynced."""
    log = _open(fs)
    for _ in range(BATCHES):
        first = log.log_end_offset
        log.append_as_leader(_batch([b"v%d" % first, b"v%d" % (first + 1)]), 0)
    log.flush()
    log.close()
    return log


def _offsets(log: Log) -> list[int]:
    found = []
    for data in log.batches():
        for position, _ in iter_batches(data):
            found += [record.offset for record in decode_records(data, position)]
    return found


def _path(log: Log, base: int, suffix: str) -> str:
    return f"{log.dir_path}/{base:020d}{suffix}"


def _positions(path: str) -> list[int]:
    with open(path, "rb") as f:
        return [position for position, _ in iter_batches(f.read())]


def _index_entries(path: str, base: int) -> list[tuple[int, int]]:
    with open(path, "rb") as f:
        data = f.read()
    return [
        (base + int.from_bytes(data[i : i + 4], "big"), int.from_bytes(data[i + 4 : i + 8], "big"))
        for i in range(0, len(data) - len(data) % 8, 8)
    ]


def _patch(path: str, position: int, data: bytes) -> None:
    with open(path, "r+b") as f:
        f.seek(position)
        f.write(data)


def _xor(path: str, position: int, mask: int) -> None:
    with open(path, "rb") as f:
        f.seek(position)
        byte = f.read(1)[0]
    _patch(path, position, bytes([byte ^ mask]))


# -- corrupt batches in the .log ---------------------------------------------------------------

# Byte positions inside a batch (records.py's layout): base offset 0..7, length 8..11, epoch 12..15,
# magic 16, CRC 17..20, attributes 21..22, then CRC-covered fields and records.
FLIPS = {
    "base_offset": (7, 0x01),
    "length_grows": (9, 0x10),
    "length_shrinks_below_header": (11, 0x40),  # 0x4_ -> 0x0_: under the 61-byte header
    "magic": (16, 0x01),
    "crc": (18, 0x01),
    "attributes": (22, 0x02),
    "last_offset_delta": (26, 0x01),
    "max_timestamp": (42, 0x01),
    "record_count": (60, 0x01),
    "record_value": (-2, 0x20),
}


@pytest.mark.parametrize("field", sorted(FLIPS))
def test_a_flipped_bit_in_a_batch_cuts_the_log_there_and_reports_it(
    fs: FaultInjectingFileSystem, field: str
) -> None:
    log = _written_log(fs)
    later = list(log.segments)[1:]
    assert later
    path = _path(log, 0, ".log")
    positions = _positions(path)
    victim = positions[1]
    size = os.path.getsize(path)
    at, mask = FLIPS[field]
    _xor(path, victim + at if at >= 0 else positions[2] + at, mask)

    recovered = _open(fs, recovery_point=0)

    report = recovered.recovery_report
    assert (report.truncated_segment, report.bytes_truncated) == (0, size - victim)
    assert report.deleted_segments == tuple(later)
    assert os.path.getsize(path) == victim
    assert recovered.log_end_offset == 2  # only the first batch is left
    assert _offsets(recovered) == [0, 1]


def test_a_zeroed_block_in_the_middle_cuts_the_log_there(fs: FaultInjectingFileSystem) -> None:
    log = _written_log(fs)
    path = _path(log, 0, ".log")
    positions = _positions(path)
    size = os.path.getsize(path)
    _patch(path, positions[2], b"\x00" * 70)  # a block the disk never wrote

    recovered = _open(fs, recovery_point=0)

    assert recovered.log_end_offset == 4
    assert recovered.recovery_report.bytes_truncated == size - positions[2]
    assert os.path.getsize(path) == positions[2]


def test_a_corrupt_batch_below_the_recovery_point_is_not_cut(
    fs: FaultInjectingFileSystem,
) -> None:
    """Fsynced data is never thrown away by recovery: a bad batch there is not cut with what
    follows it. (Nor is it served: reads check it, see the tests below.)"""
    log = _written_log(fs)
    path = _path(log, 0, ".log")
    size = os.path.getsize(path)
    _xor(path, _positions(path)[1] + 70, 0x04)

    recovered = _open(fs, recovery_point=log.recovery_point)

    assert not recovered.recovery_report.cut_anything
    assert os.path.getsize(path) == size
    assert recovered.log_end_offset == 2 * BATCHES
    with pytest.raises(CorruptRecordError):
        recovered.read(2, 1)


# -- damaged batches below the recovery point: never served ------------------------------------


def _damaged_log(
    fs: FaultInjectingFileSystem, field: str, *, clean: bool
) -> tuple[Log, list[int], int]:
    """`_written_log` reopened (cleanly, or uncleanly with the recovery point at its end) after
    one bit of its second batch (offsets 2-3, in segment 0) flipped. Returns the log, the
    segment bases and the damaged batch's position."""
    log = _written_log(fs)
    bases = list(log.segments)
    path = _path(log, 0, ".log")
    positions = _positions(path)
    at, mask = FLIPS[field]
    _xor(path, positions[1] + at if at >= 0 else positions[2] + at, mask)
    if clean:
        reopened = _open(fs, had_clean_shutdown=True)
    else:
        reopened = _open(fs, recovery_point=log.recovery_point)
    assert not reopened.recovery_report.cut_anything
    return reopened, bases, positions[1]


@pytest.mark.parametrize("clean", [True, False], ids=["clean", "below_recovery_point"])
@pytest.mark.parametrize("field", sorted(FLIPS))
def test_a_damaged_batch_below_the_recovery_point_is_never_served(
    fs: FaultInjectingFileSystem, caplog: pytest.LogCaptureFixture, field: str, clean: bool
) -> None:
    """Regression: Kafka trusts the log below the recovery point, and replog served a batch
    damaged there (a flipped bit in its body or header) as if it were good. Reads now check
    such batches once: the slice ends before the damage, a read that reaches it raises
    CorruptRecordError with the segment, the position and the offsets that cannot be served,
    and the damage is logged once."""
    log, bases, victim = _damaged_log(fs, field, clean=clean)
    path = _path(log, 0, ".log")

    assert [r.offset for r in decode_records(log.read(0, 1 << 20).to_bytes(), 0)] == [0, 1]
    for offset in (2, 3, bases[1] - 1):
        with pytest.raises(CorruptRecordError) as excinfo:
            log.read(offset, 1)
        error = excinfo.value
        assert (error.path, error.position) == (path, victim)
        assert (error.first_offset, error.last_offset) == (2, bases[1] - 1)
    with pytest.raises(CorruptRecordError):
        list(log.batches())
    with pytest.raises(CorruptRecordError):
        offset_of_max_timestamp(log, 2 * BATCHES)  # looks at every batch
    assert _offsets_from(log, bases[1]) == list(range(bases[1], 2 * BATCHES))
    assert caplog.text.count("damaged record batch") == 1
    assert path in caplog.text and f"position {victim}" in caplog.text
    assert not log.is_offline


def _offsets_from(log: Log, start: int) -> list[int]:
    found = []
    for data in log.batches(start):
        for position, _ in iter_batches(data):
            found += [record.offset for record in decode_records(data, position)]
    return found


def test_a_falling_leader_epoch_below_the_recovery_point_is_never_served(
    fs: FaultInjectingFileSystem,
) -> None:
    log = Log.open(f"{fs.root}/topic-0", CONFIG, fs=fs, clock=ManualClock())
    for epoch in (3, 3, 3):
        log.append_as_leader(_batch([b"a", b"b"]), epoch)
    log.flush()
    log.close()
    path = _path(log, 0, ".log")
    _patch(path, _positions(path)[1] + 12, (1).to_bytes(4, "big"))  # epoch 3 -> 1

    reopened = _open(fs, had_clean_shutdown=True)

    with pytest.raises(CorruptRecordError, match="epoch") as excinfo:
        reopened.read(2, 1)
    assert excinfo.value.first_offset == 2


def test_a_follower_truncates_to_the_first_damaged_offset_and_refetches(
    fs: FaultInjectingFileSystem,
) -> None:
    """The reaction the replication layer wires for a follower: truncate_to(first damaged
    offset), below the HW and the recovery point, leaves a consistent log that takes the
    leader's batches from there and reopens (clean or not) the same."""
    log, _, victim = _damaged_log(fs, "record_value", clean=True)
    log.update_high_watermark(2 * BATCHES)
    with pytest.raises(CorruptRecordError) as excinfo:
        log.read(2, 1 << 20)
    first_damaged = excinfo.value.first_offset
    assert first_damaged == 2

    assert log.truncate_to(first_damaged) is True

    assert log.log_end_offset == 2
    assert (log.high_watermark, log.recovery_point) == (2, 2)
    assert list(log.segments) == [0]
    assert os.path.getsize(_path(log, 0, ".log")) == victim
    refetched = b"".join(_batch([b"new%d" % n], base_offset=n, epoch=0) for n in range(2, 6))
    log.append_as_follower(refetched)
    assert _offsets(log) == list(range(6))
    log.flush()
    log.close()
    for kwargs in ({"had_clean_shutdown": True}, {"recovery_point": 0}):
        reopened = _open(fs, **kwargs)
        assert not reopened.recovery_report.cut_anything
        assert _offsets(reopened) == list(range(6))
        reopened.close()


def test_truncating_past_undetected_damage_cuts_at_the_damage(
    fs: FaultInjectingFileSystem,
) -> None:
    """A truncation point after a damaged batch nobody has read yet: the cut lands before the
    damage (on a checked batch boundary), never inside junk."""
    log, bases, victim = _damaged_log(fs, "length_grows", clean=True)

    log.truncate_to(bases[1] - 1)

    assert log.log_end_offset == 2
    assert os.path.getsize(_path(log, 0, ".log")) == victim
    assert _offsets(log) == [0, 1]


def test_a_hole_in_a_sealed_segment_is_an_error_not_a_skip(
    fs: FaultInjectingFileSystem,
) -> None:
    """A sealed segment that ends before the next one begins (its tail lost behind our back):
    reading a missing offset raised nothing and served the next segment's offsets instead."""
    log = _written_log(fs)
    bases = list(log.segments)
    path = _path(log, 0, ".log")
    positions = _positions(path)
    with open(path, "r+b") as f:
        f.truncate(positions[-1])  # the last batch of segment 0 is gone

    reopened = _open(fs, had_clean_shutdown=True)

    with pytest.raises(CorruptRecordError) as excinfo:
        reopened.read(bases[1] - 1, 1 << 20)
    assert excinfo.value.first_offset == bases[1] - 2
    assert excinfo.value.last_offset == bases[1] - 1


def test_a_clean_open_recovers_an_active_segment_whose_end_does_not_frame(
    fs: FaultInjectingFileSystem,
) -> None:
    """After a clean shutdown the log end offset is read from the active segment's last
    index entry on; a damaged length there would give a wrong log end offset, so that segment
    is recovered (and the cut reported)."""
    log = _written_log(fs)
    active = list(log.segments)[-1]
    path = _path(log, active, ".log")
    positions = _positions(path)
    _xor(path, positions[-1] + 9, 0x10)  # the last batch's length grows past the file end

    reopened = _open(fs, had_clean_shutdown=True)

    report = reopened.recovery_report
    assert report.truncated_segment == active
    assert report.bytes_truncated == os.path.getsize(path) + report.bytes_truncated - positions[-1]
    assert os.path.getsize(path) == positions[-1]
    assert reopened.log_end_offset == 2 * BATCHES - 2
    assert _offsets(reopened) == list(range(2 * BATCHES - 2))


# -- corrupt appends ---------------------------------------------------------------------------


@pytest.mark.parametrize("field", ["crc", "magic", "record_value", "length_shrinks_below_header"])
def test_a_corrupt_batch_is_rejected_by_both_appends(
    fs: FaultInjectingFileSystem, field: str
) -> None:
    log = _open(fs)
    log.append_as_leader(_batch([b"ok"]), 0)
    data = bytearray(_batch([b"payload-123"], base_offset=1, epoch=0))
    at, mask = FLIPS[field]
    data[at] ^= mask
    with pytest.raises(CorruptRecordError):
        log.append_as_leader(bytes(data), 0)
    with pytest.raises(CorruptRecordError):
        log.append_as_follower(bytes(data))
    assert log.log_end_offset == 1
    assert _offsets(log) == [0]


def test_an_oversized_batch_is_rejected(fs: FaultInjectingFileSystem) -> None:
    config = LogConfig(max_message_bytes=200, segment_index_bytes=4096)
    log = Log.open(f"{fs.root}/topic-0", config, fs=fs, clock=ManualClock())
    big = _batch([b"x" * 300])
    with pytest.raises(RecordBatchTooLargeError) as excinfo:
        log.append_as_leader(big, 0)
    assert excinfo.value.limit_bytes == 200
    with pytest.raises(RecordBatchTooLargeError):
        log.append_as_follower(big)
    assert log.log_end_offset == 0
    assert log.active_segment.size_bytes == 0


# -- corrupt indexes ---------------------------------------------------------------------------


@pytest.mark.parametrize("suffix", [".index", ".timeindex"])
@pytest.mark.parametrize("segment", ["inactive", "active"])
def test_an_index_of_the_wrong_size_is_rebuilt(
    fs: FaultInjectingFileSystem, suffix: str, segment: str
) -> None:
    log = _written_log(fs)
    bases = list(log.segments)
    assert len(bases) >= 2
    base = bases[0] if segment == "inactive" else bases[-1]
    offset_index_path = _path(log, base, ".index")
    # The active segment's indexes open lazily: one that never got an entry may not exist yet.
    original_entries = (
        _index_entries(offset_index_path, base) if os.path.exists(offset_index_path) else []
    )
    index_path = _path(log, base, suffix)
    with open(index_path, "ab") as f:
        f.write(b"\x01\x02\x03")  # not a whole number of entries
    entry_size = 8 if suffix == ".index" else 12
    assert os.path.getsize(index_path) % entry_size != 0

    reopened = _open(fs, had_clean_shutdown=True)

    assert _offsets(reopened) == list(range(2 * BATCHES))
    rebuilt = reopened.segments[base]
    assert rebuilt.indexes_rebuilt
    index = rebuilt.offset_index
    assert [tuple(index.entry(i)) for i in range(index.entries)] == original_entries
    reopened.close()
    assert os.path.getsize(index_path) % entry_size == 0


def test_a_truncated_offset_index_still_finds_every_offset(fs: FaultInjectingFileSystem) -> None:
    log = _written_log(fs)
    index_path = _path(log, 0, ".index")
    with open(index_path, "r+b") as f:
        f.truncate(8)  # keep one entry out of several: still a valid (sparser) index

    reopened = _open(fs, had_clean_shutdown=True)

    for offset in range(2 * BATCHES):
        data = reopened.read(offset, 1).to_bytes()
        records = decode_records(data, 0)
        assert records[0].offset <= offset <= records[-1].offset


def test_a_truncated_offset_index_cut_mid_entry_is_rebuilt(fs: FaultInjectingFileSystem) -> None:
    log = _written_log(fs)
    index_path = _path(log, 0, ".index")
    size = os.path.getsize(index_path)
    with open(index_path, "r+b") as f:
        f.truncate(size - 3)

    reopened = _open(fs, had_clean_shutdown=True)

    assert _offsets(reopened) == list(range(2 * BATCHES))
    assert reopened.segments[0].indexes_rebuilt


def _timed_log(fs: FaultInjectingFileSystem, clock: ManualClock) -> Log:
    """Like `_written_log`, but record n has timestamp 1000 + n, so the time index of every
    segment ends at its last batch."""
    log = Log.open(f"{fs.root}/topic-0", CONFIG, fs=fs, clock=clock)
    for _ in range(BATCHES):
        first = log.log_end_offset
        values = [b"v%d" % first, b"v%d" % (first + 1)]
        log.append_as_leader(encode_batch(values, base_timestamp=1000 + first), 0)
    log.flush()
    log.close()
    return log


def _junk_entry(entries: list[tuple[int, int]], kind: str, log_size: int, end: int) -> bytes:
    """The offset index of a sealed segment [0, end) with one kind of junk written into it."""
    entries = list(entries)
    (o0, p0), (o_last, p_last) = entries[0], entries[-1]
    if kind == "negative_position":
        entries[-1] = (o_last, -256)
    elif kind == "position_past_the_log":
        entries[-1] = (o_last, log_size + 100)
    elif kind == "offsets_out_of_order":
        entries[0], entries[-1] = (o_last, p0), (o0, p_last)
    elif kind == "offset_past_the_segment":
        entries[-1] = (end + 5, p_last)
    elif kind == "position_inside_a_batch":
        entries[-1] = (o_last, p_last + 7)
    return b"".join(o.to_bytes(4, "big") + p.to_bytes(4, "big", signed=True) for o, p in entries)


@pytest.mark.parametrize(
    "kind",
    [
        "negative_position",
        "position_past_the_log",
        "offsets_out_of_order",
        "offset_past_the_segment",
        "position_inside_a_batch",
    ],
)
def test_junk_in_a_sealed_offset_index_is_rebuilt_not_read_from(
    fs: FaultInjectingFileSystem, caplog: pytest.LogCaptureFixture, kind: str
) -> None:
    """Regression: junk entries below the recovery point reached pread as a negative position
    (a raw OSError(EINVAL) out of retention, which the broker's retention loop does not catch)
    or made reads skip offsets. Entries are checked when the index is first used (and when a
    lookup lands on one) and a bad index is rebuilt from the log, with a log line."""
    clock = ManualClock(wall_offset_ms=0)
    log = _timed_log(fs, clock)
    bases = list(log.segments)
    index_path = _path(log, 0, ".index")
    entries = _index_entries(index_path, 0)
    assert len(entries) >= 2
    junk = _junk_entry(entries, kind, os.path.getsize(_path(log, 0, ".log")), bases[1])
    with open(index_path, "wb") as f:
        f.write(junk)

    reopened = Log.open(
        log.dir_path, CONFIG, fs=fs, clock=clock, had_clean_shutdown=True, high_watermark=16
    )

    assert reopened.delete_old_segments() == 0  # time retention reads each max timestamp
    assert offset_for_timestamp(reopened, 1001, 16) == (1002, 2)  # batches are 2 records
    for offset in range(2 * BATCHES):
        records = decode_records(reopened.read(offset, 1).to_bytes(), 0)
        assert records[0].offset <= offset <= records[-1].offset
    assert reopened.segments[0].indexes_rebuilt
    assert "rebuilding its indexes" in caplog.text
    assert [tuple(e) for e in reopened.segments[0].offset_index.to_array()] == [
        (o, p) for o, p in entries
    ]


def _time_entries(path: str, base: int) -> list[tuple[int, int]]:
    with open(path, "rb") as f:
        data = f.read()
    return [
        (int.from_bytes(data[i : i + 8], "big"), base + int.from_bytes(data[i + 8 : i + 12], "big"))
        for i in range(0, len(data) - len(data) % 12, 12)
    ]


@pytest.mark.parametrize("kind", ["offset_past_the_segment", "offsets_decrease"])
def test_junk_in_a_sealed_time_index_is_rebuilt(
    fs: FaultInjectingFileSystem, caplog: pytest.LogCaptureFixture, kind: str
) -> None:
    """A time index entry pointing past its segment (or back) sent time lookups past the
    records they were looking for."""
    clock = ManualClock(wall_offset_ms=0)
    log = _timed_log(fs, clock)
    bases = list(log.segments)
    index_path = _path(log, 0, ".timeindex")
    entries = _time_entries(index_path, 0)
    assert len(entries) >= 3
    junk = list(entries)
    if kind == "offset_past_the_segment":
        junk[-1] = (junk[-1][0], bases[1] + 5)
    else:
        junk[1] = (junk[1][0], junk[2][1] + 1)
    with open(index_path, "wb") as f:
        f.write(b"".join(t.to_bytes(8, "big") + o.to_bytes(4, "big") for t, o in junk))

    reopened = Log.open(
        log.dir_path, CONFIG, fs=fs, clock=clock, had_clean_shutdown=True, high_watermark=16
    )

    for target in range(1000, 1000 + bases[1] + 1):  # every timestamp of the first segment
        found = offset_for_timestamp(reopened, target, 16)  # records n, n + 1 at 1000 + n
        assert found is not None and found.timestamp >= target
        assert found.offset <= target - 1000 + 1
    assert "rebuilding its indexes" in caplog.text
    reopened.close()
    assert _time_entries(index_path, 0) == entries


# -- malformed checkpoints ---------------------------------------------------------------------


@pytest.mark.parametrize(
    "content",
    [b"1\n0\n", b"0\n2\n0 0\n", b"0\n1\nzero 0\n", b"0\n1\n0 0 0\n", b"\xff\xfe", b"0\n1\n-1 0\n"],
)
def test_a_malformed_leader_epoch_checkpoint_is_a_typed_error(
    fs: FaultInjectingFileSystem, content: bytes
) -> None:
    log = _written_log(fs)
    with open(f"{log.dir_path}/{LEADER_EPOCH_CHECKPOINT}", "wb") as f:
        f.write(content)
    with pytest.raises(MalformedCheckpointError) as excinfo:
        _open(fs, had_clean_shutdown=True)
    assert LEADER_EPOCH_CHECKPOINT in str(excinfo.value)


def test_a_malformed_leader_epoch_checkpoint_takes_the_log_dir_offline(
    fs: FaultInjectingFileSystem,
) -> None:
    log_dir = f"{fs.root}/d1"
    manager = LogManager.open([log_dir], CONFIG, fs=fs, clock=ManualClock())
    tp = TopicPartition("orders", 0)
    manager.get_or_create_log(tp).append_as_leader(_batch([b"a"]), 0)
    manager.shutdown()
    with open(f"{log_dir}/orders-0/{LEADER_EPOCH_CHECKPOINT}", "wb") as f:
        f.write(b"0\nlots\n")

    reopened = LogManager.open([log_dir], CONFIG, fs=fs, clock=ManualClock())
    with pytest.raises(MalformedCheckpointError):
        reopened.get_log(tp)

    assert log_dir in reopened.offline_dirs
    with pytest.raises(StorageError):
        reopened.get_log(tp)


@pytest.mark.parametrize(
    "content", [b"7\n0\n", b"0\n1\norders 0\n", b"0\n1\norders 0 x\n", b"0\n2\norders 0 1\n"]
)
def test_a_malformed_hw_checkpoint_takes_the_log_dir_offline(
    fs: FaultInjectingFileSystem, content: bytes
) -> None:
    log_dir = f"{fs.root}/d1"
    os.makedirs(log_dir)
    with open(f"{log_dir}/{HW_CHECKPOINT}", "wb") as f:
        f.write(content)
    manager = LogManager.open([log_dir], CONFIG, fs=fs, clock=ManualClock())
    assert HW_CHECKPOINT in manager.offline_dirs[log_dir]
    with pytest.raises(StorageError):
        manager.get_or_create_log(TopicPartition("orders", 0))


def test_a_malformed_log_start_checkpoint_falls_back_to_the_first_segment(
    fs: FaultInjectingFileSystem,
) -> None:
    log_dir = f"{fs.root}/d1"
    manager = LogManager.open([log_dir], CONFIG, fs=fs, clock=ManualClock())
    tp = TopicPartition("orders", 0)
    log = manager.get_or_create_log(tp)
    for _ in range(4):
        log.append_as_leader(_batch([b"a", b"b"]), 0)
    log.update_high_watermark(8)
    log.maybe_increment_log_start_offset(3)
    manager.shutdown()
    with open(f"{log_dir}/{LOG_START_CHECKPOINT}", "wb") as f:
        f.write(b"0\n1\norders 0 three\n")

    reopened = LogManager.open([log_dir], CONFIG, fs=fs, clock=ManualClock())
    log = reopened.get_log(tp)

    assert reopened.offline_dirs == {}
    assert log is not None
    assert log.log_start_offset == 0  # nothing is lost: the log just starts earlier
    assert log.log_end_offset == 8


@pytest.mark.parametrize("content", [b"", b"{", b'{"version":1,"brokerEpoch":3}', b"\xff"])
def test_a_malformed_clean_shutdown_marker_counts_as_unclean(
    fs: FaultInjectingFileSystem, content: bytes
) -> None:
    log_dir = f"{fs.root}/d1"
    manager = LogManager.open([log_dir], CONFIG, fs=fs, clock=ManualClock())
    tp = TopicPartition("orders", 0)
    manager.get_or_create_log(tp).append_as_leader(_batch([b"a"]), 0)
    manager.shutdown()
    with open(f"{log_dir}/{CLEAN_SHUTDOWN_FILE}", "wb") as f:
        f.write(content)

    reopened = LogManager.open([log_dir], CONFIG, fs=fs, clock=ManualClock())
    log = reopened.get_log(tp)

    assert not os.path.exists(f"{log_dir}/{CLEAN_SHUTDOWN_FILE}")
    assert log is not None and not log.recovery_report.had_clean_shutdown
    assert log.log_end_offset == 1


@pytest.mark.parametrize("risen_epoch", [4, 7, 2**20], ids=["3_to_4", "3_to_7", "high_bit"])
def test_a_rising_leader_epoch_the_epoch_cache_does_not_know_is_never_served(
    fs: FaultInjectingFileSystem, risen_epoch: int
) -> None:
    """Regression (found by crash fuzzing): a flipped bit that raises a batch's partition
    leader epoch (outside the CRC) was served as good data below the recovery point. The
    leader-epoch cache is fsynced before the data it describes, so an epoch it does not give
    for that offset is damage."""
    log = Log.open(f"{fs.root}/topic-0", CONFIG, fs=fs, clock=ManualClock())
    for epoch in (3, 3, 3):
        log.append_as_leader(_batch([b"a", b"b"]), epoch)
    log.flush()
    log.close()
    path = _path(log, 0, ".log")
    _patch(path, _positions(path)[1] + 12, risen_epoch.to_bytes(4, "big"))

    reopened = _open(fs, had_clean_shutdown=True)

    assert reopened.read(0, 1 << 20)  # the batch before it is served
    with pytest.raises(CorruptRecordError, match="epoch") as excinfo:
        reopened.read(2, 1)
    assert excinfo.value.first_offset == 2
