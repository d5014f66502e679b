"""The simulated disk: a ``FaultInjectingFileSystem`` whose real fsyncs are skipped.

The fault filesystem already models durability itself (a snapshot per file at each fsync); the
operating system's fsync underneath only costs time in a simulation whose files are thrown away.
So the inner filesystem here keeps every read and write real (memmaps and ``pread`` work) and
turns ``fsync``, ``fsync_file``, ``fsync_dir`` and ``msync`` into no-ops.
"""

from __future__ import annotations

import numpy as np

from replog.log.fault_fs import FaultInjectingFileSystem
from replog.log.fs import FileHandle, ForwardingHandle, RealFileSystem

__all__ = ["sim_filesystem"]


class _NoSyncHandle(ForwardingHandle):
    """A real handle whose ``fsync`` does nothing (the fault FS records durability)."""

    __slots__ = ()

    def fsync(self) -> None:
        return None


class _NoSyncFileSystem(RealFileSystem):
    """``RealFileSystem`` without the syscalls that only matter on real power loss."""

    def open(self, path: str, *, create: bool) -> FileHandle:
        return _NoSyncHandle(super().open(path, create=create))

    def fsync_file(self, path: str) -> None:
        return None

    def fsync_dir(self, path: str) -> None:
        return None

    def sync_mapped(self, path: str, mapped: np.memmap) -> None:
        return None


def sim_filesystem(root: str, seed: int) -> FaultInjectingFileSystem:
    """A fault-injecting filesystem under ``root`` with simulated (free) fsyncs."""
    fs = FaultInjectingFileSystem(root, seed=seed)
    fs._real = _NoSyncFileSystem()
    return fs
