"""Kafka's text checkpoint files: format, atomic write under crashes, strict reading, the clean
marker."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from replog.errors import InvalidTopicError, MalformedCheckpointError, StorageError
from replog.log import (
    REAL_FS,
    EpochEntry,
    FaultInjectingFileSystem,
    LeaderEpochCheckpointFile,
    OffsetCheckpointFile,
)
from replog.log.checkpoints import (
    CLEAN_SHUTDOWN_FILE,
    REPLICATION_OFFSET_CHECKPOINT_FILE,
    read_and_delete_clean_shutdown_marker,
    write_clean_shutdown_marker,
)


@pytest.fixture
def fs(tmp_path: Path) -> FaultInjectingFileSystem:
    return FaultInjectingFileSystem(str(tmp_path), seed=3)


def _offsets(fs: FaultInjectingFileSystem) -> OffsetCheckpointFile:
    return OffsetCheckpointFile(fs, os.path.join(fs.root, REPLICATION_OFFSET_CHECKPOINT_FILE))


# ------------------------------------------------------------------------ format


def test_offset_checkpoint_writes_kafka_text_format(fs: FaultInjectingFileSystem) -> None:
    ckpt = _offsets(fs)
    ckpt.write({("foo", 1): 17, ("foo", 0): 42})
    assert fs.read_bytes(ckpt.path) == b"0\n2\nfoo 0 42\nfoo 1 17\n"
    assert ckpt.read() == {("foo", 0): 42, ("foo", 1): 17}


def test_leader_epoch_checkpoint_writes_kafka_text_format(fs: FaultInjectingFileSystem) -> None:
    ckpt = LeaderEpochCheckpointFile(fs, os.path.join(fs.root, "leader-epoch-checkpoint"))
    ckpt.write([EpochEntry(0, 0), EpochEntry(1, 2)])
    assert fs.read_bytes(ckpt.path) == b"0\n2\n0 0\n1 2\n"
    assert ckpt.read() == [EpochEntry(0, 0), EpochEntry(1, 2)]


def test_empty_write_round_trips(fs: FaultInjectingFileSystem) -> None:
    ckpt = _offsets(fs)
    ckpt.write({})
    assert fs.read_bytes(ckpt.path) == b"0\n0\n"
    assert ckpt.read() == {}


@pytest.mark.parametrize("content", [b"", b"0", b"0\n", b"0\r\n", b"0\n0\n"])
def test_empty_file_or_version_line_alone_reads_as_empty(
    fs: FaultInjectingFileSystem, content: bytes
) -> None:
    ckpt = _offsets(fs)
    fs.write_bytes(ckpt.path, content)
    assert ckpt.read() == {}


def test_missing_file_reads_as_empty(fs: FaultInjectingFileSystem) -> None:
    assert _offsets(fs).read() == {}
    assert not fs.exists(_offsets(fs).path), "reading does not create the file"


def test_crlf_line_ends_are_accepted(fs: FaultInjectingFileSystem) -> None:
    ckpt = _offsets(fs)
    fs.write_bytes(ckpt.path, b"0\r\n1\r\nfoo 0 5\r\n")
    assert ckpt.read() == {("foo", 0): 5}


def test_read_of_a_file_lacking_the_partition_has_no_entry_for_it(
    fs: FaultInjectingFileSystem,
) -> None:
    # A partition the file lacks has no entry: the caller defaults it to HW 0 (then clamps to
    # the log start).
    ckpt = _offsets(fs)
    ckpt.write({("foo", 0): 42})
    assert ("foo", 1) not in ckpt.read()


_topics = st.from_regex(r"[a-zA-Z0-9._-]{1,40}", fullmatch=True)
_offset_maps = st.dictionaries(
    st.tuples(_topics, st.integers(0, 2**31 - 1)), st.integers(0, 2**63 - 1), max_size=20
)


@settings(max_examples=100, deadline=None)
@given(offsets=_offset_maps)
def test_offset_checkpoint_round_trips(
    tmp_path_factory: pytest.TempPathFactory, offsets: dict[tuple[str, int], int]
) -> None:
    path = str(tmp_path_factory.mktemp("ckpt") / "recovery-point-offset-checkpoint")
    ckpt = OffsetCheckpointFile(REAL_FS, path)
    ckpt.write(offsets)
    assert ckpt.read() == offsets


@settings(max_examples=100, deadline=None)
@given(pairs=st.dictionaries(st.integers(0, 2**31 - 1), st.integers(0, 2**63 - 1), max_size=20))
def test_leader_epoch_checkpoint_round_trips(
    tmp_path_factory: pytest.TempPathFactory, pairs: dict[int, int]
) -> None:
    entries = [EpochEntry(e, o) for e, o in sorted(pairs.items())]
    path = str(tmp_path_factory.mktemp("ckpt") / "leader-epoch-checkpoint")
    ckpt = LeaderEpochCheckpointFile(REAL_FS, path)
    ckpt.write(entries)
    assert ckpt.read() == entries


def test_topic_names_with_dots_dashes_and_underscores_round_trip(
    fs: FaultInjectingFileSystem,
) -> None:
    offsets = {("a.b", 0): 1, ("a-b", 0): 2, ("a_b", 3): 4, ("__consumer_offsets", 49): 5}
    ckpt = _offsets(fs)
    ckpt.write(offsets)
    assert ckpt.read() == offsets


@pytest.mark.parametrize(
    ("offsets", "error"),
    [
        ({("has space", 0): 1}, InvalidTopicError),
        ({("", 0): 1}, InvalidTopicError),
        ({("foo", -1): 1}, ValueError),
        ({("foo", 0): -1}, ValueError),
    ],
)
def test_write_rejects_entries_that_could_not_be_read_back(
    fs: FaultInjectingFileSystem, offsets: dict[tuple[str, int], int], error: type[Exception]
) -> None:
    ckpt = _offsets(fs)
    ckpt.write({("foo", 0): 1})
    with pytest.raises(error):
        ckpt.write(offsets)
    assert ckpt.read() == {("foo", 0): 1}, "a rejected write leaves the file untouched"


# ------------------------------------------------------------------------ malformed files


@pytest.mark.parametrize(
    ("content", "line"),
    [
        (b"1\n0\n", "line 1"),  # version mismatch
        (b"x\n0\n", "line 1"),  # version not an integer
        (b"\n0\n", "line 1"),  # blank version line
        (b"0\nthree\n", "line 2"),  # count not an integer
        (b"0\n-1\n", "line 2"),  # negative count
        (b"0\n3\nfoo 0 1\nfoo 1 2\n", "line 2"),  # count 3, two entries: malformed
        (b"0\n1\nfoo 0 1\nfoo 1 2\n", "line 2"),  # more entries than the count
        (b"0\n1\nfoo 0\n", "line 3"),  # too few fields
        (b"0\n1\nfoo 0 1 2\n", "line 3"),  # too many fields
        (b"0\n1\nfoo x 1\n", "line 3"),  # partition not an integer
        (b"0\n1\nfoo 0 1.5\n", "line 3"),  # offset not an integer
        (b"0\n1\nfoo 0 +1\n", "line 3"),  # sign is not part of the format
        (b"0\n1\nfoo -1 1\n", "line 3"),  # negative partition
        (b"0\n1\nfoo 0 -5\n", "line 3"),  # negative offset
        (b"0\n1\nfoo 0 99999999999999999999\n", "line 3"),  # offset beyond int64
        (b"0\n1\nfoo 2147483648 1\n", "line 3"),  # partition beyond int32
        (b"0\n1\nfo/o 0 1\n", "line 3"),  # illegal topic character
        (b"0\n2\nfoo 0 1\n\n", "line 4"),  # blank entry line
        (b"0\n2\nfoo 0 1\nfoo 0 2\n", "line 4"),  # duplicate partition
        (b"0\n1\n\xff 0 1\n", "UTF-8"),  # not UTF-8
    ],
)
def test_malformed_offset_checkpoint_raises_naming_file_and_line(
    fs: FaultInjectingFileSystem, content: bytes, line: str
) -> None:
    ckpt = _offsets(fs)
    fs.write_bytes(ckpt.path, content)
    with pytest.raises(MalformedCheckpointError) as info:
        ckpt.read()
    assert info.value.path == ckpt.path
    assert ckpt.path in str(info.value)
    assert line in str(info.value)


@pytest.mark.parametrize(
    ("content", "line"),
    [
        (b"0\n1\n1\n", "line 3"),  # one field
        (b"0\n1\n1 2 3\n", "line 3"),  # three fields
        (b"0\n1\n-1 0\n", "line 3"),  # negative epoch
        (b"0\n1\n1 -4\n", "line 3"),  # negative start offset
        (b"0\n1\n2147483648 0\n", "line 3"),  # epoch beyond int32
        (b"0\n2\n1 0\n1 5\n", "line 4"),  # duplicate epoch
        (b"0\n3\n1 0\n2 5\n", "line 2"),  # count mismatch
    ],
)
def test_malformed_leader_epoch_checkpoint_raises_naming_file_and_line(
    fs: FaultInjectingFileSystem, content: bytes, line: str
) -> None:
    ckpt = LeaderEpochCheckpointFile(fs, os.path.join(fs.root, "leader-epoch-checkpoint"))
    fs.write_bytes(ckpt.path, content)
    with pytest.raises(MalformedCheckpointError) as info:
        ckpt.read()
    assert ckpt.path in str(info.value)
    assert line in str(info.value)


# ------------------------------------------------------------------------ atomic write


def test_crash_after_tmp_written_before_rename_leaves_old_file_valid(
    fs: FaultInjectingFileSystem,
) -> None:
    """The tmp file written (and even fsynced) but not renamed, then power loss: the old file
    is still whole, and the next write overwrites the tmp."""
    ckpt = _offsets(fs)
    ckpt.write({("foo", 0): 10})
    fs.fail_rename(REPLICATION_OFFSET_CHECKPOINT_FILE)
    with pytest.raises(StorageError):
        ckpt.write({("foo", 0): 20})
    assert fs.exists(ckpt.path + ".tmp")

    fs.crash()

    assert ckpt.read() == {("foo", 0): 10}
    ckpt.write({("foo", 0): 30})  # the stale .tmp is overwritten
    assert ckpt.read() == {("foo", 0): 30}
    assert not fs.exists(ckpt.path + ".tmp")
    fs.crash()
    assert ckpt.read() == {("foo", 0): 30}


@pytest.mark.parametrize("seed", range(10))
def test_crash_before_tmp_fsync_leaves_old_file_valid(tmp_path: Path, seed: int) -> None:
    fs = FaultInjectingFileSystem(str(tmp_path), seed=seed)
    ckpt = _offsets(fs)
    ckpt.write({("foo", 0): 10, ("bar", 1): 11})
    fs.fail_fsync(".tmp")
    with pytest.raises(StorageError):
        ckpt.write({("foo", 0): 20})
    fs.crash(tear=True)  # the .tmp may be torn anywhere
    assert ckpt.read() == {("foo", 0): 10, ("bar", 1): 11}


def test_written_checkpoint_survives_crash(fs: FaultInjectingFileSystem) -> None:
    ckpt = _offsets(fs)
    ckpt.write({("foo", 0): 10})
    fs.crash()
    assert ckpt.read() == {("foo", 0): 10}


def test_write_failure_is_a_storage_error_naming_the_log_dir(
    fs: FaultInjectingFileSystem,
) -> None:
    ckpt = _offsets(fs)
    fs.fail_write(REPLICATION_OFFSET_CHECKPOINT_FILE)
    with pytest.raises(StorageError) as info:
        ckpt.write({("foo", 0): 1})
    assert info.value.log_dir == fs.root


def test_directory_fsync_failure_is_a_storage_error(fs: FaultInjectingFileSystem) -> None:
    ckpt = _offsets(fs)
    fs.fail_fsync(fs.root, count=2)  # the tmp file, then the directory
    with pytest.raises(StorageError):
        ckpt.write({("foo", 0): 1})


def test_read_error_is_a_storage_error(tmp_path: Path) -> None:
    path = tmp_path / "replication-offset-checkpoint"
    path.mkdir()  # reading a directory fails with an OSError other than "missing"
    with pytest.raises(StorageError):
        OffsetCheckpointFile(REAL_FS, str(path)).read()


def test_leader_epoch_checkpoint_reports_the_log_dir_above_the_partition_dir(
    fs: FaultInjectingFileSystem,
) -> None:
    fs.makedirs("foo-0")
    ckpt = LeaderEpochCheckpointFile(fs, os.path.join(fs.root, "foo-0", "leader-epoch-checkpoint"))
    fs.fail_write("leader-epoch")
    with pytest.raises(StorageError) as info:
        ckpt.write([EpochEntry(0, 0)])
    assert info.value.log_dir == fs.root


# ------------------------------------------------------------------------ clean-shutdown marker


def test_clean_shutdown_marker_is_kafka_json(fs: FaultInjectingFileSystem) -> None:
    write_clean_shutdown_marker(fs, fs.root, 42)
    path = os.path.join(fs.root, CLEAN_SHUTDOWN_FILE)
    assert fs.read_bytes(path) == b'{"version":0,"brokerEpoch":42}'


def test_clean_shutdown_marker_lifecycle(fs: FaultInjectingFileSystem) -> None:
    """The clean-shutdown marker at the file level: present -> clean, deleted at startup, so a
    crash while loading makes the next boot unclean."""
    assert read_and_delete_clean_shutdown_marker(fs, fs.root) is None  # first boot: unclean

    write_clean_shutdown_marker(fs, fs.root, 7)
    fs.crash()  # the marker is durable once written
    assert read_and_delete_clean_shutdown_marker(fs, fs.root) == 7
    assert not fs.exists(os.path.join(fs.root, CLEAN_SHUTDOWN_FILE))

    fs.crash()  # crash while loading the logs
    assert read_and_delete_clean_shutdown_marker(fs, fs.root) is None


def test_unknown_broker_epoch_is_minus_one(fs: FaultInjectingFileSystem) -> None:
    write_clean_shutdown_marker(fs, fs.root, -1)
    assert read_and_delete_clean_shutdown_marker(fs, fs.root) == -1


@pytest.mark.parametrize(
    "content",
    [
        b"",
        b'{"version":0,"brokerEpo',  # torn
        b"not json",
        b'{"version":1,"brokerEpoch":3}',
        b'{"version":0}',
        b'{"version":0,"brokerEpoch":"3"}',
        b'{"version":0,"brokerEpoch":true}',
        b'{"version":false,"brokerEpoch":3}',
        b"[0, 3]",
        b"\xff\xfe",
    ],
)
def test_malformed_clean_shutdown_marker_counts_as_unclean_and_is_deleted(
    fs: FaultInjectingFileSystem, content: bytes
) -> None:
    path = os.path.join(fs.root, CLEAN_SHUTDOWN_FILE)
    fs.write_bytes(path, content)
    assert read_and_delete_clean_shutdown_marker(fs, fs.root) is None
    assert not fs.exists(path)


def test_clean_shutdown_marker_write_failure_is_a_storage_error(
    fs: FaultInjectingFileSystem,
) -> None:
    fs.fail_fsync(CLEAN_SHUTDOWN_FILE)
    with pytest.raises(StorageError):
        write_clean_shutdown_marker(fs, fs.root, 1)


def test_clean_shutdown_marker_rejects_bad_broker_epoch(fs: FaultInjectingFileSystem) -> None:
    with pytest.raises(ValueError):
        write_clean_shutdown_marker(fs, fs.root, -2)
