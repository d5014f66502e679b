"""A power cut at every step of a cleaning, on the fault-injecting filesystem: the pass writing
its ``.cleaned`` segments, the clean offset's checkpoint, the ``.cleaned`` -> ``.swap`` renames,
the old segments' deletion, the ``.swap`` -> live renames. After each, the log reopens with no
leftover files, no duplicate offsets, no record that was never written, the latest record of
every key, the same log end; and a cleaning then leaves exactly what an uninterrupted one does.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from replog.clock import ManualClock
from replog.log.fault_fs import FaultInjectingFileSystem
from replog.log.fs import FileHandle
from replog.log.log import Log
from replog.log.log_cleaner import CleaningResult, complete_cleaning
from tests.log.compaction_support import (
    append,
    clean,
    commit,
    latest_by_key,
    open_log,
    plan,
    served,
)


class PowerCut(BaseException):
    """The power goes (a BaseException: nothing in replog may catch it and carry on)."""


class CountingFileSystem(FaultInjectingFileSystem):
    """A fault-injecting filesystem whose power goes at the ``cut_at``-th step that changes
    what a power cut leaves: a write, an fsync, a create, a rename, a removal, a mapping."""

    def __init__(self, root: str, *, seed: int) -> None:
        super().__init__(root, seed=seed)
        self.cut_at: int | None = None
        self.steps: list[str] = []

    def _step(self, what: str) -> None:
        if self.cut_at is None:
            return
        if len(self.steps) == self.cut_at:
            self.cut_at = None
            raise PowerCut(what)
        self.steps.append(what)

    def _maybe_fail(self, kind: str, *paths: str) -> None:  # type: ignore[override]
        if kind != "read":
            self._step(f"{kind} {Path(paths[0]).name}")
        super()._maybe_fail(kind, *paths)  # type: ignore[arg-type]

    def open(self, path: str, *, create: bool) -> FileHandle:
        if create:
            self._step(f"create {Path(path).name}")
        return super().open(path, create=create)

    def remove(self, path: str) -> None:
        self._step(f"remove {Path(path).name}")
        super().remove(path)

    def map_file(self, path: str, size_bytes: int) -> np.memmap:
        self._step(f"map {Path(path).name}")
        return super().map_file(path, size_bytes)


def _written(fs: CountingFileSystem, clock: ManualClock) -> Log:
    """A compacted log with a clean section (one cleaning done) and a dirty one, tombstones
    included, over several segments; everything flushed."""
    log = open_log(fs, fs.root, clock=clock)
    for i in range(30):
        key = b"k%d" % (i % 6)
        append(log, [(key, None if i % 10 == 9 else b"v%d" % i)], clock=clock)
    commit(log)
    clean(log, clock)
    for i in range(30, 60):
        append(log, [(b"k%d" % (i % 9), b"v%d" % i)], clock=clock)
    log.roll()
    append(log, [(b"active", b"x")], clock=clock)
    commit(log)
    return log


# fsync is real under the fault-injecting filesystem; on tmpfs it costs nothing.
_TMP_ROOT = "/dev/shm" if os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK) else None


@pytest.fixture
def tmp_root() -> Iterator[Path]:
    root = tempfile.mkdtemp(prefix="replog-cleaner-crash-", dir=_TMP_ROOT)
    try:
        yield Path(root)
    finally:
        shutil.rmtree(root, ignore_errors=True)


@pytest.mark.parametrize("tear", [False, True], ids=["clean-cut", "torn"])
def test_a_power_cut_at_any_step_of_a_cleaning_loses_nothing(tmp_root: Path, tear: bool) -> None:
    tmp_path = tmp_root
    clock = ManualClock(1_000)
    reference_fs = CountingFileSystem(str(tmp_path / "reference"), seed=0)
    reference = _written(reference_fs, clock)
    before = served(reference)
    reference_fs.cut_at = 10**9  # count the steps of an uninterrupted cleaning
    assert clean(reference, clock) is CleaningResult.SWAPPED
    steps, reference_fs.cut_at = reference_fs.steps, None
    expected = served(reference)
    assert len(expected) < len(before)
    assert any(s.startswith("rename") and ".swap" in s for s in steps), steps

    for cut_at in range(len(steps)):
        root = tmp_path / f"cut-{cut_at}"
        fs = CountingFileSystem(str(root), seed=cut_at)
        log = _written(fs, clock)
        assert served(log) == before
        task = plan(log, clock)
        fs.cut_at = cut_at
        with pytest.raises(PowerCut):
            task.run()
            complete_cleaning(log, task)
        fs.crash(tear=tear)
        log.abandon()

        recovered = open_log(fs, fs.root, clock=clock, recovery_point=0)
        where = f"power cut at step {cut_at} ({steps[cut_at]})"
        leftovers = [p.name for p in root.rglob("*") if p.suffix in (".cleaned", ".swap")]
        assert not leftovers, where
        records = served(recovered)
        offsets = [r[0] for r in records]
        assert offsets == sorted(set(offsets)), where  # no duplicate, in order
        assert set(records) <= set(before), where  # nothing that was never written
        assert latest_by_key(records) == latest_by_key(before), where
        assert recovered.log_end_offset == reference.log_end_offset, where

        commit(recovered)  # the reopened log's HW and recovery point start at 0
        assert clean(recovered, clock) is CleaningResult.SWAPPED, where
        assert served(recovered) == expected, where
        recovered.close()
        shutil.rmtree(root)
