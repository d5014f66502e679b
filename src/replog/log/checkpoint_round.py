"""`CheckpointRound`: a broker's periodic offset checkpoints (HW, recovery points, log start
offsets of every online log dir) as of one moment, to be written later on any thread.

Why: each checkpoint file costs a write, two fsyncs and a rename, and on a busy disk an fsync
can take a second. Written on the broker's event loop, one round of three files per log dir
stalled every request and timer of the broker -- its heartbeats included, long enough for its
session to expire (seen in CI: three in-process brokers lost their sessions while their loop
sat in checkpoint fsyncs). So the owner computes a round on its own thread (a walk of its open
logs, no IO) and hands ``write`` to a worker thread.

Order: rounds are numbered as they are computed (``CheckpointWriter.round``), and a file is
never replaced by an older round than the one that last wrote it, so a synchronous write (at
shutdown, after DeleteRecords) that overtakes a round still in flight is not undone by it; one
lock per writer keeps two writers of a file from interleaving their tmp-fsync-rename steps.
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Iterator, Mapping

import attrs

from replog.errors import StorageError
from replog.log.checkpoints import OffsetCheckpointFile
from replog.log.fs import FileSystem

__all__ = ["CheckpointRound", "CheckpointWriter", "PendingCheckpoint"]


@attrs.frozen
class PendingCheckpoint:
    """One offset checkpoint of a round, not yet written: the log dir it belongs to, the path
    of its file and the table the file is to hold (`OffsetCheckpointFile` writes it)."""

    log_dir: str
    path: str
    offsets: Mapping[tuple[str, int], int]


@attrs.define(eq=False)
class CheckpointWriter:
    """Numbers rounds and writes their files, one writer at a time (see the module doc)."""

    fs: FileSystem
    _lock: threading.Lock = attrs.field(factory=threading.Lock, init=False)
    _numbers: Iterator[int] = attrs.field(factory=lambda: itertools.count(1), init=False)
    _written: dict[str, int] = attrs.field(factory=dict, init=False)

    def round(self, files: list[PendingCheckpoint]) -> CheckpointRound:
        """A round of ``files``, numbered after every earlier one (call on the owner's
        thread, where the tables were read)."""
        return CheckpointRound(self, next(self._numbers), tuple(files))

    def write_file(self, file: PendingCheckpoint, number: int) -> None:
        """Write ``file`` unless a later round already wrote its path (``StorageError``)."""
        with self._lock:
            if self._written.get(file.path, 0) > number:
                return
            OffsetCheckpointFile(self.fs, file.path).write(file.offsets)
            self._written[file.path] = number


@attrs.frozen
class CheckpointRound:
    """Checkpoint files as of one moment (see the module doc)."""

    writer: CheckpointWriter
    number: int
    files: tuple[PendingCheckpoint, ...]

    def write(self) -> list[tuple[str, str]]:
        """Write every file (on any thread); ``(log dir, reason)`` for each dir whose write
        failed -- its later files are skipped. Never raises."""
        failed: dict[str, str] = {}
        for file in self.files:
            if file.log_dir in failed:
                continue
            try:
                self.writer.write_file(file, self.number)
            except StorageError as exc:
                failed[file.log_dir] = str(exc)
        return list(failed.items())
