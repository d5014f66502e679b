"""The filesystem seam: every byte the storage engine reads or writes goes through here.

`RealFileSystem` is a thin layer over ``os``. `replog.log.fault_fs.FaultInjectingFileSystem`
implements the same protocol on real files but can lose unsynced writes, tear the last write and
fail fsync, which is how tests and the simulator crash a broker without a real power cut.

Handles are opened for read and append. Writes always go to the end of the file (segments are
append-only); reads use ``pread`` so one handle serves readers and the writer. Errors surface as
``OSError``; the ``Log`` turns them into ``StorageError`` and takes the log dir offline.
"""

from __future__ import annotations

import os
from typing import Protocol

import attrs
import numpy as np

from replog.errors import StorageError, invariant

__all__ = [
    "REAL_FS",
    "FileHandle",
    "FileSlice",
    "FileSystem",
    "ForwardingHandle",
    "RealFileHandle",
    "RealFileSystem",
]

#: A handle's ``fsync``: fdatasync where the OS has it. It writes the data and what is needed to
#: read it back (the file's length), not the modification time, so an append costs one journal
#: commit less than fsync on ext4 and xfs. macOS has no fdatasync.
_sync_data = getattr(os, "fdatasync", os.fsync)


class FileHandle(Protocol):
    """An open file: append at the end, read anywhere, truncate, fsync."""

    path: str

    def append(self, data: bytes | bytearray | memoryview) -> None:
        """Write all of ``data`` at the end of the file."""

    def pread(self, position: int, size_bytes: int) -> bytes:
        """Read up to ``size_bytes`` from ``position`` (short at end of file)."""

    def size(self) -> int:
        """The file's length in bytes, including unsynced writes."""

    def truncate(self, size_bytes: int) -> None:
        """Cut the file to ``size_bytes``."""

    def fsync(self) -> None:
        """Make every write so far durable."""

    def fileno(self) -> int:
        """The OS descriptor, for ``os.sendfile``."""

    def close(self) -> None:
        """Release the descriptor; idempotent."""


@attrs.frozen
class FileSlice:
    """``size_bytes`` of ``handle`` from ``position``: a zero-copy piece of a fetch response
    (the broker hands ``handle.fileno()``, ``position`` and ``size_bytes`` to ``os.sendfile``)."""

    handle: FileHandle
    position: int
    size_bytes: int

    def read(self) -> bytes:
        """Materialise the bytes (tests, in-process consumers); the broker uses sendfile.
        `StorageError` if the file cannot be read."""
        try:
            data = self.handle.pread(self.position, self.size_bytes)
        except OSError as exc:
            path = self.handle.path
            raise StorageError(
                f"cannot read {self.size_bytes} bytes at {self.position} of {path}: {exc}",
                os.path.dirname(path),
            ) from exc
        invariant(len(data) == self.size_bytes, "file slice shorter than the segment said")
        return data


class FileSystem(Protocol):
    """Directory and file operations the storage engine needs."""

    def open(self, path: str, *, create: bool) -> FileHandle:
        """Open for read and append; ``create=False`` requires the file to exist."""

    def read_bytes(self, path: str) -> bytes:
        """The whole content of a small file (checkpoints)."""

    def write_bytes(self, path: str, data: bytes) -> None:
        """Create or overwrite ``path`` with ``data``; not durable until fsynced."""

    def fsync_file(self, path: str) -> None:
        """fsync an existing file by path."""

    def exists(self, path: str) -> bool:
        """Whether ``path`` exists."""

    def listdir(self, path: str) -> list[str]:
        """Names in a directory, sorted."""

    def makedirs(self, path: str) -> None:
        """Create a directory and its parents; no error if it exists."""

    def rename(self, src: str, dst: str) -> None:
        """Atomically replace ``dst`` with ``src``."""

    def remove(self, path: str) -> None:
        """Delete a file; no error if it is already gone."""

    def rmdir(self, path: str) -> None:
        """Delete an empty directory."""

    def fsync_dir(self, path: str) -> None:
        """Make directory entries (creates, renames, removes) durable."""

    def file_size(self, path: str) -> int:
        """Length of a file in bytes."""

    def map_file(self, path: str, size_bytes: int) -> np.memmap:
        """Set the file's length to ``size_bytes`` (creating it) and map it read-write as uint8."""

    def sync_mapped(self, path: str, mapped: np.memmap) -> None:
        """Flush a mapping made by ``map_file`` to disk (msync)."""


class RealFileHandle:
    """A `FileHandle` over an OS descriptor opened O_RDWR | O_APPEND."""

    __slots__ = ("_fd", "path")

    def __init__(self, path: str, fd: int) -> None:
        self.path = path
        self._fd = fd

    def append(self, data: bytes | bytearray | memoryview) -> None:
        written = os.write(self._fd, data)
        if written == len(data):
            return
        view = memoryview(data)[written:]
        while view:  # a short write (rare on regular files): finish it
            written = os.write(self._fd, view)
            view = view[written:]

    def pread(self, position: int, size_bytes: int) -> bytes:
        return os.pread(self._fd, size_bytes, position)

    def size(self) -> int:
        return os.fstat(self._fd).st_size

    def truncate(self, size_bytes: int) -> None:
        os.ftruncate(self._fd, size_bytes)

    def fsync(self) -> None:
        _sync_data(self._fd)

    def fileno(self) -> int:
        return self._fd

    def close(self) -> None:
        if self._fd >= 0:
            fd, self._fd = self._fd, -1
            os.close(fd)


class ForwardingHandle:
    """A `FileHandle` that hands every call to ``inner``: the base of handles that change one
    or two calls (a fault to inject, an fsync to skip) and keep the rest."""

    __slots__ = ("_inner", "path")

    def __init__(self, inner: FileHandle) -> None:
        self._inner = inner
        self.path = inner.path

    def append(self, data: bytes | bytearray | memoryview) -> None:
        self._inner.append(data)

    def pread(self, position: int, size_bytes: int) -> bytes:
        return self._inner.pread(position, size_bytes)

    def size(self) -> int:
        return self._inner.size()

    def truncate(self, size_bytes: int) -> None:
        self._inner.truncate(size_bytes)

    def fsync(self) -> None:
        self._inner.fsync()

    def fileno(self) -> int:
        return self._inner.fileno()

    def close(self) -> None:
        self._inner.close()


class RealFileSystem:
    """The operating system's filesystem."""

    def open(self, path: str, *, create: bool) -> FileHandle:
        flags = os.O_RDWR | os.O_APPEND | getattr(os, "O_CLOEXEC", 0)
        if create:
            flags |= os.O_CREAT
        return RealFileHandle(path, os.open(path, flags, 0o644))

    def read_bytes(self, path: str) -> bytes:
        with open(path, "rb") as f:
            return f.read()

    def write_bytes(self, path: str, data: bytes) -> None:
        with open(path, "wb") as f:
            f.write(data)

    def fsync_file(self, path: str) -> None:
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)

    def exists(self, path: str) -> bool:
        return os.path.exists(path)

    def listdir(self, path: str) -> list[str]:
        return sorted(os.listdir(path))

    def makedirs(self, path: str) -> None:
        os.makedirs(path, exist_ok=True)

    def rename(self, src: str, dst: str) -> None:
        os.replace(src, dst)

    def remove(self, path: str) -> None:
        try:
            os.remove(path)
        except FileNotFoundError:
            pass

    def rmdir(self, path: str) -> None:
        os.rmdir(path)

    def fsync_dir(self, path: str) -> None:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
        try:
            os.fsync(fd)
        finally:
            os.close(fd)

    def file_size(self, path: str) -> int:
        return os.path.getsize(path)

    def map_file(self, path: str, size_bytes: int) -> np.memmap:
        with open(path, "ab") as f:
            f.truncate(size_bytes)
        if size_bytes == 0:
            # numpy cannot map an empty file; callers treat a 0-length array as "no entries".
            return np.zeros(0, dtype=np.uint8).view(np.memmap)
        return np.memmap(path, dtype=np.uint8, mode="r+", shape=(size_bytes,))

    def sync_mapped(self, path: str, mapped: np.memmap) -> None:
        if mapped.size and isinstance(mapped, np.memmap) and mapped.filename is not None:
            mapped.flush()


REAL_FS = RealFileSystem()
