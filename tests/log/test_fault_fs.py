"""FaultInjectingFileSystem: what survives a simulated power cut, and injected IO failures."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest

from replog.log import FaultInjectingFileSystem


@pytest.fixture
def fs(tmp_path: Path) -> FaultInjectingFileSystem:
    return FaultInjectingFileSystem(str(tmp_path), seed=7)


def _path(fs: FaultInjectingFileSystem, name: str) -> str:
    return os.path.join(fs.root, name)


def test_unsynced_appends_are_lost_on_crash(fs: FaultInjectingFileSystem) -> None:
    path = _path(fs, "a.log")
    handle = fs.open(path, create=True)
    handle.append(b"durable")
    handle.fsync()
    handle.append(b"volatile")
    assert fs.unsynced_bytes(path) == len(b"volatile")

    fs.crash(tear=False)

    assert fs.read_bytes(path) == b"durable"
    assert fs.unsynced_bytes(path) == 0


def test_fsynced_appends_survive_crash(fs: FaultInjectingFileSystem) -> None:
    path = _path(fs, "a.log")
    handle = fs.open(path, create=True)
    handle.append(b"one")
    handle.append(b"two")
    handle.fsync()
    fs.crash()
    assert fs.read_bytes(path) == b"onetwo"


def test_file_never_fsynced_comes_back_empty(fs: FaultInjectingFileSystem) -> None:
    path = _path(fs, "new.log")
    fs.open(path, create=True).append(b"data")
    fs.write_bytes(_path(fs, "other"), b"xyz")
    fs.crash(tear=False)
    assert fs.exists(path)
    assert fs.read_bytes(path) == b""
    assert fs.read_bytes(_path(fs, "other")) == b""


def test_fsync_file_by_path_makes_content_durable(fs: FaultInjectingFileSystem) -> None:
    path = _path(fs, "ckpt")
    fs.write_bytes(path, b"0\n0\n")
    fs.fsync_file(path)
    fs.crash()
    assert fs.read_bytes(path) == b"0\n0\n"


def _torn_length(seed: int, tmp_path: Path) -> int:
    fs = FaultInjectingFileSystem(str(tmp_path), seed=seed)
    path = _path(fs, f"seed-{seed}.log")
    handle = fs.open(path, create=True)
    handle.append(b"S" * 10)
    handle.fsync()
    handle.append(bytes(range(100)))
    handle.append(b"second append never survives a tear")
    fs.crash(tear=True)
    content = fs.read_bytes(path)
    assert content[:10] == b"S" * 10
    assert content[10:] == bytes(range(100))[: len(content) - 10], "torn write must be a prefix"
    return len(content) - 10


def test_torn_write_is_a_prefix_of_the_first_unsynced_append(tmp_path: Path) -> None:
    lengths = {_torn_length(seed, tmp_path) for seed in range(20)}
    assert all(0 <= n <= 100 for n in lengths)
    assert len(lengths) > 1, "different seeds should tear at different lengths"


def test_torn_length_is_deterministic_per_seed(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    first = [_torn_length(seed, tmp_path / "a") for seed in range(5)]
    second = [_torn_length(seed, tmp_path / "b") for seed in range(5)]
    assert first == second


def test_failed_fsync_raises_eio_and_does_not_make_data_durable(
    fs: FaultInjectingFileSystem,
) -> None:
    path = _path(fs, "a.log")
    handle = fs.open(path, create=True)
    handle.append(b"data")
    fs.fail_fsync("a.log")
    with pytest.raises(OSError) as info:
        handle.fsync()
    assert info.value.errno == errno.EIO
    assert fs.unsynced_bytes(path) == 4
    fs.crash(tear=False)
    assert fs.read_bytes(path) == b""


def test_fail_fsync_matches_path_substring_and_count(fs: FaultInjectingFileSystem) -> None:
    a = fs.open(_path(fs, "a.log"), create=True)
    b = fs.open(_path(fs, "b.index"), create=True)
    fs.fail_fsync(".index", count=2)
    a.fsync()  # does not match
    for _ in range(2):
        with pytest.raises(OSError):
            b.fsync()
    b.fsync()  # the rule is used up


def test_fail_fsync_also_fails_fsync_file_and_fsync_dir(fs: FaultInjectingFileSystem) -> None:
    path = _path(fs, "ckpt")
    fs.write_bytes(path, b"x")
    fs.fail_fsync(count=2)
    with pytest.raises(OSError):
        fs.fsync_file(path)
    with pytest.raises(OSError):
        fs.fsync_dir(fs.root)
    fs.fsync_dir(fs.root)


def test_failed_write_raises_eio_and_writes_nothing(fs: FaultInjectingFileSystem) -> None:
    path = _path(fs, "a.log")
    handle = fs.open(path, create=True)
    fs.fail_write("a.log")
    with pytest.raises(OSError) as info:
        handle.append(b"data")
    assert info.value.errno == errno.EIO
    assert handle.size() == 0
    handle.append(b"data")
    assert handle.size() == 4
    fs.fail_write()
    with pytest.raises(OSError):
        fs.write_bytes(_path(fs, "other"), b"x")
    assert not fs.exists(_path(fs, "other"))


def test_failed_rename_changes_nothing(fs: FaultInjectingFileSystem) -> None:
    src, dst = _path(fs, "x.tmp"), _path(fs, "x")
    fs.write_bytes(src, b"new")
    fs.fail_rename("x.tmp")
    with pytest.raises(OSError):
        fs.rename(src, dst)
    assert fs.exists(src)
    assert not fs.exists(dst)


def test_handles_opened_before_crash_are_dead(fs: FaultInjectingFileSystem) -> None:
    path = _path(fs, "a.log")
    handle = fs.open(path, create=True)
    handle.append(b"x")
    handle.fsync()
    fs.crash()
    for call in (
        lambda: handle.append(b"y"),
        lambda: handle.pread(0, 1),
        handle.size,
        handle.fsync,
        handle.fileno,
        lambda: handle.truncate(0),
    ):
        with pytest.raises(OSError):
            call()
    handle.close()  # closing a dead handle is allowed
    fresh = fs.open(path, create=False)
    assert fresh.pread(0, 10) == b"x"


def test_memmap_content_is_durable_only_after_sync_mapped(fs: FaultInjectingFileSystem) -> None:
    path = _path(fs, "0.index")
    mapped = fs.map_file(path, 16)
    mapped[:4] = [1, 2, 3, 4]
    fs.sync_mapped(path, mapped)
    mapped[4:8] = [5, 6, 7, 8]
    assert fs.read_bytes(path)[:8] == bytes([1, 2, 3, 4, 5, 6, 7, 8])

    fs.crash()

    assert fs.read_bytes(path) == bytes([1, 2, 3, 4]) + bytes(12)
    mapped[8:12] = [9, 9, 9, 9]  # a stale mapping cannot touch the recovered file
    assert fs.read_bytes(path) == bytes([1, 2, 3, 4]) + bytes(12)


def test_growing_a_mapped_file_is_not_durable_until_synced(fs: FaultInjectingFileSystem) -> None:
    path = _path(fs, "0.timeindex")
    mapped = fs.map_file(path, 8)
    fs.crash()
    del mapped
    assert fs.file_size(path) == 0


def test_truncate_shrinks_durable_content_immediately(fs: FaultInjectingFileSystem) -> None:
    path = _path(fs, "a.log")
    handle = fs.open(path, create=True)
    handle.append(b"0123456789")
    handle.fsync()
    handle.truncate(4)
    handle.append(b"ab")
    fs.crash(tear=False)
    assert fs.read_bytes(path) == b"0123", "a crash never resurrects truncated bytes"


def test_truncate_cuts_the_pending_torn_write(fs: FaultInjectingFileSystem) -> None:
    path = _path(fs, "a.log")
    handle = fs.open(path, create=True)
    handle.append(b"0123")
    handle.fsync()
    handle.append(b"456789")
    handle.truncate(6)
    fs.crash(tear=True)
    content = fs.read_bytes(path)
    assert b"0123456"[: len(content)] == content
    assert 4 <= len(content) <= 6


def test_rename_carries_durable_content_and_is_itself_durable(
    fs: FaultInjectingFileSystem,
) -> None:
    src, dst = _path(fs, "c.tmp"), _path(fs, "c")
    fs.write_bytes(dst, b"old")
    fs.fsync_file(dst)
    fs.write_bytes(src, b"new")
    fs.fsync_file(src)
    fs.rename(src, dst)
    fs.crash()
    assert not fs.exists(src)
    assert fs.read_bytes(dst) == b"new"


def test_rename_of_unsynced_file_loses_its_content(fs: FaultInjectingFileSystem) -> None:
    src, dst = _path(fs, "c.tmp"), _path(fs, "c")
    fs.write_bytes(dst, b"old")
    fs.fsync_file(dst)
    fs.write_bytes(src, b"new")
    fs.rename(src, dst)
    fs.crash(tear=False)
    assert fs.read_bytes(dst) == b""


def test_handle_survives_rename_and_fsyncs_the_renamed_file(fs: FaultInjectingFileSystem) -> None:
    src, dst = _path(fs, "00.log"), _path(fs, "00.log.deleted")
    handle = fs.open(src, create=True)
    handle.append(b"abc")
    fs.rename(src, dst)
    handle.fsync()
    fs.crash()
    assert fs.read_bytes(dst) == b"abc"


def test_removed_files_stay_removed(fs: FaultInjectingFileSystem) -> None:
    path = _path(fs, "a.log")
    handle = fs.open(path, create=True)
    handle.append(b"x")
    handle.fsync()
    fs.remove(path)
    fs.crash()
    assert not fs.exists(path)


def test_files_present_before_the_fs_are_durable_as_they_stand(tmp_path: Path) -> None:
    (tmp_path / "old.log").write_bytes(b"from a previous life")
    fs = FaultInjectingFileSystem(str(tmp_path))
    handle = fs.open(str(tmp_path / "old.log"), create=False)
    handle.append(b" plus more")
    fs.crash(tear=False)
    assert fs.read_bytes(str(tmp_path / "old.log")) == b"from a previous life"


def test_relative_paths_resolve_under_root(fs: FaultInjectingFileSystem) -> None:
    fs.makedirs("topic-0")
    fs.write_bytes("topic-0/x", b"1")
    assert fs.listdir("topic-0") == ["x"]
    assert fs.read_bytes(_path(fs, "topic-0/x")) == b"1"


def test_crash_leaves_no_stray_files(fs: FaultInjectingFileSystem) -> None:
    for name in ("a", "b", "c"):
        fs.open(_path(fs, name), create=True).append(b"x")
    fs.crash()
    assert fs.listdir(fs.root) == ["a", "b", "c"]


def test_fail_count_must_be_positive(fs: FaultInjectingFileSystem) -> None:
    with pytest.raises(ValueError):
        fs.fail_write(count=0)
