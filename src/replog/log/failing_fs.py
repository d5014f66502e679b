"""A `FileSystem` on real files that fails on request: fsyncs that raise EIO, a disk that is full.

`FailingFileSystem` is what a test cluster (``Cluster.local(..., test_mode=True)``) gives each
broker, so a test can break one broker's disk while its clients run: ``fail_fsync(count)`` makes
the next ``count`` fsyncs raise ``OSError(EIO)`` (every fsync when ``count`` is None), ``fill()``
makes every write raise ``OSError(ENOSPC)`` as a full disk does, and ``clear()`` undoes both.
Unlike `replog.log.fault_fs.FaultInjectingFileSystem` it keeps no copy of what is durable (it
cannot simulate a power cut), so it costs one check per write and per fsync.

Thread-safe: fsyncs run on worker threads while the loop appends.
"""

from __future__ import annotations

import errno
import threading

import numpy as np

from replog.log.fs import FileHandle, ForwardingHandle, RealFileSystem

__all__ = ["FailingFileSystem"]


class _FailingHandle(ForwardingHandle):
    """A real handle whose appends and fsyncs ask the filesystem first."""

    __slots__ = ("_fs",)

    def __init__(self, fs: FailingFileSystem, inner: FileHandle) -> None:
        super().__init__(inner)
        self._fs = fs

    def append(self, data: bytes | bytearray | memoryview) -> None:
        self._fs.check_write(self.path)
        self._inner.append(data)

    def fsync(self) -> None:
        self._fs.check_fsync(self.path)
        self._inner.fsync()


class FailingFileSystem(RealFileSystem):
    """The operating system's filesystem, with fsync failures and a full disk on request."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        #: fsyncs still to fail (None: none; -1: every one until ``clear``)
        self._fsync_failures: int | None = None
        self._full = False

    # ----------------------------------------------------------------- faults

    def fail_fsync(self, count: int | None = None) -> None:
        """The next ``count`` fsyncs (of a file, a directory or a mapping) raise EIO; every
        fsync does when ``count`` is None."""
        if count is not None and count < 1:
            raise ValueError(f"count must be at least 1, got {count}")
        with self._lock:
            self._fsync_failures = -1 if count is None else count

    def fill(self) -> None:
        """Every write from now on raises ENOSPC (nothing is written) until ``clear``."""
        with self._lock:
            self._full = True

    def clear(self) -> None:
        """Writes and fsyncs work again."""
        with self._lock:
            self._fsync_failures = None
            self._full = False

    @property
    def failing(self) -> bool:
        """Whether a fault is set."""
        return self._full or self._fsync_failures is not None

    def check_write(self, path: str) -> None:
        """Raise ENOSPC if the disk is full."""
        if self._full:
            raise OSError(errno.ENOSPC, "injected: no space left on device", path)

    def check_fsync(self, path: str) -> None:
        """Raise EIO if an fsync failure is due."""
        if self._fsync_failures is None:
            return
        with self._lock:
            remaining = self._fsync_failures
            if remaining is None:
                return
            if remaining > 0:
                self._fsync_failures = None if remaining == 1 else remaining - 1
        raise OSError(errno.EIO, "injected fsync failure", path)

    # ----------------------------------------------------------------- FileSystem

    def open(self, path: str, *, create: bool) -> FileHandle:
        return _FailingHandle(self, super().open(path, create=create))

    def write_bytes(self, path: str, data: bytes) -> None:
        self.check_write(path)
        super().write_bytes(path, data)

    def fsync_file(self, path: str) -> None:
        self.check_fsync(path)
        super().fsync_file(path)

    def fsync_dir(self, path: str) -> None:
        self.check_fsync(path)
        super().fsync_dir(path)

    def map_file(self, path: str, size_bytes: int) -> np.memmap:
        self.check_write(path)
        return super().map_file(path, size_bytes)

    def sync_mapped(self, path: str, mapped: np.memmap) -> None:
        self.check_fsync(path)
        super().sync_mapped(path, mapped)
