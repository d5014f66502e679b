"""The storage shell: quorum-state and snapshot files under crashes, and `RaftStorage`."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from replog.errors import CorruptRecordError, MalformedCheckpointError, StorageError
from replog.log.fault_fs import FaultInjectingFileSystem
from replog.raft.entries import encode_data_batch, encode_leader_change, encode_snapshot
from replog.raft.messages import RaftSnapshotId
from replog.raft.quorum_state import QuorumStateFile
from replog.raft.ready import (
    AdvanceLogStart,
    AppendBatches,
    InstallSnapshot,
    Ready,
    WriteSnapshotChunk,
)
from replog.raft.snapshots import SnapshotStore
from replog.raft.states import ElectionState
from replog.raft.storage import METADATA_LOG_DIR, RaftStorage, metadata_log_config

VOTERS = frozenset({1, 2, 3})


def fault_fs(tmp_path: Path) -> FaultInjectingFileSystem:
    return FaultInjectingFileSystem(str(tmp_path), seed=7)


# ------------------------------------------------------------------------------ quorum-state


def test_quorum_state_round_trips_in_kafkas_layout(tmp_path: Path) -> None:
    fs = fault_fs(tmp_path)
    store = QuorumStateFile(fs, str(tmp_path))
    assert store.read() is None
    store.write(ElectionState(7, 2, 3, VOTERS))
    assert store.read() == ElectionState(7, 2, 3, VOTERS)
    doc = json.loads((tmp_path / "quorum-state").read_text())
    assert doc == {
        "leaderId": 2,
        "leaderEpoch": 7,
        "votedId": 3,
        "appliedOffset": 0,
        "currentVoters": [{"voterId": 1}, {"voterId": 2}, {"voterId": 3}],
        "data_version": 0,
    }


def test_quorum_state_write_survives_a_power_loss(tmp_path: Path) -> None:
    fs = fault_fs(tmp_path)
    store = QuorumStateFile(fs, str(tmp_path))
    store.write(ElectionState(3, -1, 1, VOTERS))
    fs.crash()
    assert QuorumStateFile(fs, str(tmp_path)).read() == ElectionState(3, -1, 1, VOTERS)


@pytest.mark.parametrize("fail", ["fsync", "rename"])
def test_a_failed_quorum_state_write_leaves_the_old_state(tmp_path: Path, fail: str) -> None:
    fs = fault_fs(tmp_path)
    store = QuorumStateFile(fs, str(tmp_path))
    store.write(ElectionState(3, -1, 1, VOTERS))
    getattr(fs, f"fail_{fail}")("quorum-state")
    with pytest.raises(StorageError):
        store.write(ElectionState(4, -1, 2, VOTERS))
    fs.crash()
    assert store.read() == ElectionState(3, -1, 1, VOTERS)


@pytest.mark.parametrize(
    "content",
    [
        b"",
        b"{",
        b'{"leaderEpoch": 1}',
        b'{"leaderId":"x","leaderEpoch":1,"votedId":-1,"currentVoters":[],"data_version":0}',
        b'{"data_version": 9}',
    ],
)
def test_a_malformed_quorum_state_is_an_error_not_a_fresh_start(
    tmp_path: Path, content: bytes
) -> None:
    (tmp_path / "quorum-state").write_bytes(content)
    with pytest.raises(MalformedCheckpointError):
        QuorumStateFile(fault_fs(tmp_path), str(tmp_path)).read()


# ------------------------------------------------------------------------------ snapshots


def test_snapshot_files_are_named_by_offset_and_epoch(tmp_path: Path) -> None:
    store = SnapshotStore(fault_fs(tmp_path), str(tmp_path))
    store.write(RaftSnapshotId(12, 3), [b"a", b"b"], 0)
    assert os.listdir(tmp_path) == ["00000000000000000012-0000000003.checkpoint"]
    assert store.read(RaftSnapshotId(12, 3)) == [b"a", b"b"]
    assert store.latest() == RaftSnapshotId(12, 3)


def test_a_snapshot_write_cut_by_a_crash_leaves_no_snapshot(tmp_path: Path) -> None:
    fs = fault_fs(tmp_path)
    store = SnapshotStore(fs, str(tmp_path))
    fs.fail_fsync(".checkpoint.part")
    with pytest.raises(StorageError):
        store.write(RaftSnapshotId(12, 3), [b"a"], 0)
    fs.crash()
    assert store.latest() is None
    assert store.delete_partials() == ["00000000000000000012-0000000003.checkpoint.part"]


def test_a_downloaded_snapshot_is_checked_before_it_counts(tmp_path: Path) -> None:
    store = SnapshotStore(fault_fs(tmp_path), str(tmp_path))
    snapshot_id = RaftSnapshotId(40, 2)
    data = encode_snapshot(snapshot_id, [b"x" * 50 for _ in range(5)], 0)
    for position in range(0, len(data), 64):
        store.write_chunk(snapshot_id, position, data[position : position + 64])
    assert store.complete_download(snapshot_id) == [b"x" * 50] * 5
    assert store.latest() == snapshot_id
    with pytest.raises(CorruptRecordError):
        store.write_chunk(RaftSnapshotId(50, 2), 64, b"late chunk")  # no chunk at 0 first
    other = RaftSnapshotId(60, 2)
    store.write_chunk(other, 0, data)  # the bytes of another snapshot
    with pytest.raises(CorruptRecordError):
        store.complete_download(other)
    assert store.latest() == snapshot_id


def test_older_snapshots_go_once_a_newer_one_moves_the_log_start(tmp_path: Path) -> None:
    store = SnapshotStore(fault_fs(tmp_path), str(tmp_path))
    for end in (5, 9, 14):
        store.write(RaftSnapshotId(end, 1), [], 0)
    store.delete_before(RaftSnapshotId(14, 1))
    assert store.ids() == [RaftSnapshotId(14, 1)]


# ------------------------------------------------------------------------------ RaftStorage


def open_storage(tmp_path: Path, fs: FaultInjectingFileSystem) -> RaftStorage:
    return RaftStorage.open(str(tmp_path), fs, metadata_log_config(256, 128))


def append(storage: RaftStorage, base: int, epoch: int, *values: bytes) -> None:
    data = encode_data_batch(list(values), base_offset=base, epoch=epoch, timestamp_ms=0)
    storage.apply(Ready(log_ops=(AppendBatches(data),)))


def test_unflushed_appends_are_lost_by_a_power_loss_and_the_model_follows(
    tmp_path: Path,
) -> None:
    fs = fault_fs(tmp_path)
    storage = open_storage(tmp_path, fs)
    leader_change = encode_leader_change(
        base_offset=0, epoch=1, leader_id=1, voters=VOTERS, timestamp_ms=0
    )
    storage.apply(Ready(log_ops=(AppendBatches(leader_change),)))
    append(storage, 1, 1, b"a")
    assert storage.flush() == 2
    append(storage, 2, 2, b"b", b"c")
    assert storage.has_unflushed
    storage.abandon()
    fs.crash(tear=False)
    reopened = open_storage(tmp_path, fs)
    model = reopened.model()
    assert (model.start_offset, model.end_offset, model.last_epoch) == (0, 2, 1)
    reopened.check_model(model)
    assert not reopened.has_unflushed  # everything recovered is fsynced at open


def test_a_local_snapshot_moves_the_log_start_and_survives_a_restart(tmp_path: Path) -> None:
    fs = fault_fs(tmp_path)
    storage = open_storage(tmp_path, fs)
    for base in range(0, 40, 2):
        append(storage, base, 1, b"v%d" % base, b"w%d" % base)
    storage.flush()
    snapshot_id = RaftSnapshotId(30, 1)
    storage.write_snapshot(snapshot_id, [b"state"], 0)
    storage.apply(Ready(log_ops=(AdvanceLogStart(snapshot_id),), high_watermark=30))
    assert storage.log.log_start_offset == 30
    assert len(storage.log.segments) < 8  # whole segments below the start are gone
    storage.close()
    reopened = open_storage(tmp_path, fs)
    assert reopened.model().snapshot == snapshot_id
    assert reopened.model().start_offset == 30
    assert reopened.snapshots.read(snapshot_id) == [b"state"]


def test_an_installed_snapshot_replaces_the_log(tmp_path: Path) -> None:
    fs = fault_fs(tmp_path)
    storage = open_storage(tmp_path, fs)
    append(storage, 0, 1, b"old", b"divergent")
    snapshot_id = RaftSnapshotId(100, 4)
    data = encode_snapshot(snapshot_id, [b"s1", b"s2"], 0)
    installed = storage.apply(
        Ready(
            log_ops=(
                WriteSnapshotChunk(snapshot_id, 0, data[:70]),
                WriteSnapshotChunk(snapshot_id, 70, data[70:]),
                InstallSnapshot(snapshot_id),
            )
        )
    )
    assert installed == [(snapshot_id, [b"s1", b"s2"])]
    assert (storage.log.log_start_offset, storage.log.log_end_offset) == (100, 100)
    fs.crash()
    reopened = open_storage(tmp_path, fs)
    assert reopened.model().end == reopened.model().end  # opens cleanly
    assert (reopened.model().start_offset, reopened.model().last_epoch) == (100, 4)


def test_metadata_log_lives_in_its_kafka_directory(tmp_path: Path) -> None:
    storage = open_storage(tmp_path, fault_fs(tmp_path))
    storage.quorum_state.write(ElectionState(1, -1, -1, VOTERS))
    names = set(os.listdir(tmp_path / METADATA_LOG_DIR))
    assert {"quorum-state", "00000000000000000000.log"} <= names
