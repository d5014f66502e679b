"""A `FileSystem` that can lose power: unsynced writes vanish, the first one may tear, fsync fails.

Theory of operation. Every byte really goes to a file under ``root`` through `RealFileSystem`
(so numpy memmaps, ``pread`` and ``os.sendfile`` behave as in production); the operating system's
page cache plays the role of the volatile cache. Beside it, this class keeps, per file, a
snapshot of the *durable* content: what the disk would hold after a power cut. The snapshot is
taken on every successful ``fsync`` of a handle, ``fsync_file`` and ``sync_mapped`` (tests use
small files, so whole-file ``bytes`` snapshots are fine).

`FaultInjectingFileSystem.crash` simulates the power cut: each tracked file is replaced by a fresh
file holding its durable content. With ``tear=True`` a seeded random prefix (possibly empty,
possibly whole) of the file's *first* unsynced append survives as well, a torn write. The same
seed and the same operations give the same torn lengths. Handles opened before the crash raise
``OSError`` afterwards; replacing the files (rather than rewriting them in place) also cuts old
memmaps loose, so a stale index mapping can neither see nor corrupt the recovered file.

Rules chosen where real filesystems differ:

- Directory operations (create, rename, remove, makedirs, rmdir) are durable immediately. This
  is a simplification: on a real disk they need ``fsync_dir``. A file that is created but never
  fsynced therefore comes back *empty* after a crash, not missing.
- A file's durable content follows the file through ``rename`` (the inode moves, not the data).
- ``truncate`` (and ``write_bytes``, which truncates to 0 first, and a shrinking ``map_file``) is
  applied to the cached and the durable content at once: the durable content shrinks to
  ``min(len, size)``. A crash can never resurrect bytes that were cut. Growing a file (extending
  ``truncate`` or ``map_file``) is not durable until the next fsync; after a crash the file comes
  back at its durable length.
- Writes through a memmap are lost on a crash unless ``sync_mapped`` ran; they are never torn.
- A file that already exists when this class first touches it (written before the simulated
  reboot, or by another ``FaultInjectingFileSystem``) is taken as durable as it stands.
- A failed fsync raises ``OSError(EIO)`` and marks nothing durable; a later successful fsync
  makes the data durable. (Linux may drop the dirty pages on a failed fsync; replog treats any
  failed fsync as fatal for the log dir, so the difference is never observed.)
- ``fail_fsync`` also matches ``fsync_dir``; ``fail_write`` matches ``append`` and
  ``write_bytes`` (nothing is written); ``fail_rename`` matches the source or the destination;
  ``fail_read`` matches a handle's ``pread`` (not ``read_bytes`` or memmaps).
"""

from __future__ import annotations

import errno
import os
import random
import tempfile
import threading
import weakref
from typing import Literal

import attrs
import numpy as np

from replog.errors import invariant
from replog.log.fs import REAL_FS, FileHandle, RealFileSystem

__all__ = ["FaultInjectingFileSystem", "FaultInjectingFileHandle"]

_FaultKind = Literal["fsync", "write", "rename", "read"]


@attrs.define
class _PendingAppend:
    """The first append since the last fsync: where it started and what it wrote."""

    position: int
    data: bytes


@attrs.define
class _FileState:
    """What a power cut would leave of one file."""

    path: str
    durable: bytes
    first_unsynced: _PendingAppend | None = None

    def on_append(self, position: int, data: bytes) -> None:
        if self.first_unsynced is None:
            self.first_unsynced = _PendingAppend(position, bytes(data))

    def on_truncate(self, size_bytes: int) -> None:
        """Shrink durable content and the pending append to ``size_bytes``; growth is volatile."""
        self.durable = self.durable[:size_bytes]
        pending = self.first_unsynced
        if pending is not None:
            keep = size_bytes - pending.position
            if keep <= 0:
                self.first_unsynced = None
            elif keep < len(pending.data):
                pending.data = pending.data[:keep]

    def on_sync(self, content: bytes) -> None:
        self.durable = content
        self.first_unsynced = None


@attrs.define
class _FaultRule:
    kind: _FaultKind
    path_substring: str
    remaining: int


class FaultInjectingFileHandle:
    """A `FileHandle` that records appends for its filesystem and dies at a crash."""

    __slots__ = ("__weakref__", "_dead", "_fs", "_inner", "_state", "path")

    def __init__(self, fs: FaultInjectingFileSystem, inner: FileHandle, state: _FileState) -> None:
        self.path = inner.path
        self._fs = fs
        self._inner = inner
        self._state = state
        self._dead = False

    def _check_alive(self) -> None:
        if self._dead:
            raise OSError(errno.EIO, "handle opened before a simulated crash", self.path)

    def append(self, data: bytes | bytearray | memoryview) -> None:
        with self._fs._lock:
            self._check_alive()
            self._fs._maybe_fail("write", self._state.path)
            position = self._inner.size()
            payload = bytes(data)
            self._inner.append(payload)
            self._state.on_append(position, payload)

    def pread(self, position: int, size_bytes: int) -> bytes:
        self._check_alive()
        if self._fs._rules:
            with self._fs._lock:
                self._fs._maybe_fail("read", self._state.path)
        return self._inner.pread(position, size_bytes)

    def size(self) -> int:
        self._check_alive()
        return self._inner.size()

    def truncate(self, size_bytes: int) -> None:
        with self._fs._lock:
            self._check_alive()
            self._inner.truncate(size_bytes)
            self._state.on_truncate(size_bytes)

    def fsync(self) -> None:
        with self._fs._lock:
            self._check_alive()
            self._fs._maybe_fail("fsync", self._state.path)
            self._inner.fsync()
            self._state.on_sync(self._inner.pread(0, self._inner.size()))

    def fileno(self) -> int:
        self._check_alive()
        return self._inner.fileno()

    def close(self) -> None:
        # Never raises, so cleanup code still runs on handles a crash killed.
        self._inner.close()

    def _kill(self) -> None:
        self._dead = True
        self._inner.close()


class FaultInjectingFileSystem:
    """`FileSystem` on real files under ``root`` that models a volatile page cache.

    Relative paths are taken relative to ``root``; absolute paths are used as given (callers
    normally build them from ``root``). ``seed`` drives the torn-write lengths.
    """

    def __init__(self, root: str, *, seed: int = 0) -> None:
        self.root = os.path.abspath(root)
        self._real: RealFileSystem = REAL_FS
        self._rng = random.Random(seed)
        self._files: dict[str, _FileState] = {}
        self._handles: weakref.WeakSet[FaultInjectingFileHandle] = weakref.WeakSet()
        self._rules: list[_FaultRule] = []
        self._lock = threading.RLock()
        self.crash_count = 0

    # ----------------------------------------------------------------- fault injection

    def fail_fsync(self, path_substring: str = "", count: int = 1) -> None:
        """Make the next ``count`` fsyncs (handle, file, mapped or dir) whose path contains
        ``path_substring`` raise ``OSError(EIO)``."""
        self._add_rule("fsync", path_substring, count)

    def fail_write(self, path_substring: str = "", count: int = 1) -> None:
        """Make the next ``count`` appends / ``write_bytes`` on matching paths raise
        ``OSError(EIO)`` without writing anything."""
        self._add_rule("write", path_substring, count)

    def fail_read(self, path_substring: str = "", count: int = 1) -> None:
        """Make the next ``count`` ``pread`` calls on matching handles raise ``OSError(EIO)``
        (a disk that cannot read a sector back)."""
        self._add_rule("read", path_substring, count)

    def fail_rename(self, path_substring: str = "", count: int = 1) -> None:
        """Make the next ``count`` renames whose source or destination matches raise
        ``OSError(EIO)``; nothing is renamed."""
        self._add_rule("rename", path_substring, count)

    def _add_rule(self, kind: _FaultKind, path_substring: str, count: int) -> None:
        if count < 1:
            raise ValueError(f"count must be >= 1, got {count}")
        with self._lock:
            self._rules.append(_FaultRule(kind, path_substring, count))

    def _maybe_fail(self, kind: _FaultKind, *paths: str) -> None:
        for rule in self._rules:
            if rule.kind == kind and any(rule.path_substring in p for p in paths):
                rule.remaining -= 1
                if rule.remaining == 0:
                    self._rules.remove(rule)
                raise OSError(errno.EIO, f"injected {kind} failure", paths[0])

    # ----------------------------------------------------------------- crash

    def crash(self, *, tear: bool = True) -> None:
        """Simulate a power cut: every tracked file falls back to its durable content (plus,
        with ``tear``, a seeded random prefix of its first unsynced append); every open handle
        dies."""
        with self._lock:
            for handle in list(self._handles):
                handle._kill()
            self._handles = weakref.WeakSet()
            for path in sorted(self._files):
                state = self._files[path]
                if not os.path.isfile(path):
                    del self._files[path]
                    continue
                content = state.durable
                pending = state.first_unsynced
                if tear and pending is not None and pending.position == len(content):
                    content += pending.data[: self._rng.randint(0, len(pending.data))]
                _replace_file(path, content)
                state.on_sync(content)
            self.crash_count += 1

    def unsynced_bytes(self, path: str) -> int:
        """How many bytes of ``path``'s current content a crash (without tearing) would lose or
        change: its length minus the common prefix with the durable content."""
        path = self._abs(path)
        with self._lock:
            state = self._files.get(path)
            if state is None or not os.path.isfile(path):
                return 0
            current = self._real.read_bytes(path)
            durable = state.durable
            common = 0
            limit = min(len(current), len(durable))
            while common < limit and current[common] == durable[common]:
                common += 1
            return len(current) - common

    def durable_content(self, path: str) -> bytes:
        """What ``path`` would hold after a crash without tearing (for tests)."""
        path = self._abs(path)
        with self._lock:
            state = self._files.get(path)
            return state.durable if state is not None else self._real.read_bytes(path)

    # ----------------------------------------------------------------- FileSystem protocol

    def open(self, path: str, *, create: bool) -> FileHandle:
        path = self._abs(path)
        with self._lock:
            self._adopt(path)
            inner = self._real.open(path, create=create)
            state = self._track(path)
            handle = FaultInjectingFileHandle(self, inner, state)
            self._handles.add(handle)
            return handle

    def read_bytes(self, path: str) -> bytes:
        return self._real.read_bytes(self._abs(path))

    def write_bytes(self, path: str, data: bytes) -> None:
        path = self._abs(path)
        with self._lock:
            self._maybe_fail("write", path)
            self._adopt(path)
            self._real.write_bytes(path, data)
            state = self._track(path)
            state.on_truncate(0)
            state.on_append(0, data)

    def fsync_file(self, path: str) -> None:
        path = self._abs(path)
        with self._lock:
            self._maybe_fail("fsync", path)
            self._real.fsync_file(path)
            self._track(path).on_sync(self._real.read_bytes(path))

    def exists(self, path: str) -> bool:
        return self._real.exists(self._abs(path))

    def listdir(self, path: str) -> list[str]:
        return self._real.listdir(self._abs(path))

    def makedirs(self, path: str) -> None:
        self._real.makedirs(self._abs(path))

    def rename(self, src: str, dst: str) -> None:
        src, dst = self._abs(src), self._abs(dst)
        with self._lock:
            self._maybe_fail("rename", src, dst)
            self._adopt(src)
            self._real.rename(src, dst)
            self._files.pop(dst, None)
            state = self._files.pop(src, None)
            if state is not None:
                state.path = dst
                self._files[dst] = state

    def remove(self, path: str) -> None:
        path = self._abs(path)
        with self._lock:
            self._real.remove(path)
            self._files.pop(path, None)

    def rmdir(self, path: str) -> None:
        path = self._abs(path)
        with self._lock:
            self._real.rmdir(path)
            prefix = path + os.sep
            for tracked in [p for p in self._files if p.startswith(prefix)]:
                del self._files[tracked]

    def fsync_dir(self, path: str) -> None:
        path = self._abs(path)
        with self._lock:
            self._maybe_fail("fsync", path)
            self._real.fsync_dir(path)

    def file_size(self, path: str) -> int:
        return self._real.file_size(self._abs(path))

    def map_file(self, path: str, size_bytes: int) -> np.memmap:
        path = self._abs(path)
        with self._lock:
            self._adopt(path)
            mapped = self._real.map_file(path, size_bytes)
            self._track(path).on_truncate(size_bytes)
            return mapped

    def sync_mapped(self, path: str, mapped: np.memmap) -> None:
        path = self._abs(path)
        with self._lock:
            self._maybe_fail("fsync", path)
            self._real.sync_mapped(path, mapped)
            # MAP_SHARED: reading the file sees the mapping's writes.
            self._track(path).on_sync(self._real.read_bytes(path))

    # ----------------------------------------------------------------- helpers

    def _abs(self, path: str) -> str:
        return os.path.normpath(os.path.join(self.root, path))

    def _adopt(self, path: str) -> None:
        """Start tracking a file that exists but was never touched: durable as it stands.
        Called before an operation changes the file."""
        if path not in self._files and os.path.isfile(path):
            self._files[path] = _FileState(path, self._real.read_bytes(path))

    def _track(self, path: str) -> _FileState:
        """The state of ``path`` after an operation; a file not adopted before it is new and
        has no durable bytes yet."""
        state = self._files.get(path)
        if state is None:
            state = _FileState(path, b"")
            self._files[path] = state
        invariant(state.path == path, f"tracked state for {path} names {state.path}")
        return state


def _replace_file(path: str, content: bytes) -> None:
    """Put ``content`` at ``path`` in a new inode, so old descriptors and maps point elsewhere."""
    directory = os.path.dirname(path)
    fd, tmp_path = tempfile.mkstemp(dir=directory, prefix=".crash-")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(content)
        os.chmod(tmp_path, 0o644)
        os.replace(tmp_path, path)
    except BaseException:
        if os.path.exists(tmp_path):
            os.remove(tmp_path)
        raise
