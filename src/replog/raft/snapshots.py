"""Snapshot files of the metadata log (KIP-630), in the metadata log's directory.

Layout: ``<20-digit end offset>-<10-digit epoch>.checkpoint`` holds one snapshot as record
batches (``entries.encode_snapshot``: a header record, then the state machine's records). A
snapshot is written whole to ``<name>.checkpoint.part``, fsynced, renamed to its final name and
the directory fsynced, so a ``.checkpoint`` file is always complete; a ``.part`` file left by a
crash is deleted at open. A snapshot fetched from the leader arrives in chunks into the same
``.part`` file and is checked (every batch whole and valid, the header naming the same id)
before the rename. Only the latest snapshot is kept once the log start has moved past the
older ones.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from typing import TypeVar

from replog.errors import CorruptRecordError, StorageError
from replog.log.fs import FileSystem
from replog.raft.entries import decode_snapshot, encode_snapshot
from replog.raft.messages import RaftSnapshotId

__all__ = ["PARTIAL_SUFFIX", "SNAPSHOT_SUFFIX", "SnapshotStore"]

SNAPSHOT_SUFFIX = ".checkpoint"
PARTIAL_SUFFIX = ".checkpoint.part"
_T = TypeVar("_T")
_NAME = re.compile(r"([0-9]{20})-([0-9]{10})\.checkpoint")


class SnapshotStore:
    """The snapshot files of one metadata log directory."""

    def __init__(self, fs: FileSystem, dir_path: str) -> None:
        self.fs = fs
        self.dir_path = dir_path

    def path(self, snapshot_id: RaftSnapshotId, *, partial: bool = False) -> str:
        """Where ``snapshot_id`` lives (or is being written)."""
        suffix = PARTIAL_SUFFIX if partial else SNAPSHOT_SUFFIX
        return os.path.join(self.dir_path, snapshot_id.file_stem + suffix)

    # ------------------------------------------------------------------ listing

    def ids(self) -> list[RaftSnapshotId]:
        """Every complete snapshot, oldest first."""
        found = []
        for name in self._listdir():
            match = _NAME.fullmatch(name)
            if match:
                found.append(RaftSnapshotId(int(match.group(1)), int(match.group(2))))
        return sorted(found)

    def latest(self) -> RaftSnapshotId | None:
        """The newest complete snapshot."""
        snapshots = self.ids()
        return snapshots[-1] if snapshots else None

    def delete_partials(self) -> list[str]:
        """Remove ``.part`` files (an interrupted write or download); returns their names."""
        names = [n for n in self._listdir() if n.endswith(PARTIAL_SUFFIX)]
        for name in names:
            self._remove(self._join(name))
        return names

    def delete_before(self, snapshot_id: RaftSnapshotId) -> None:
        """Remove every snapshot older than ``snapshot_id``."""
        for older in self.ids():
            if older < snapshot_id:
                self._remove(self.path(older))

    # ------------------------------------------------------------------ whole files

    def write(self, snapshot_id: RaftSnapshotId, records: list[bytes], timestamp_ms: int) -> int:
        """Write a local snapshot atomically; returns its size in bytes."""
        data = encode_snapshot(snapshot_id, records, timestamp_ms)
        partial = self.path(snapshot_id, partial=True)

        def write() -> None:
            self.fs.write_bytes(partial, data)
            self.fs.fsync_file(partial)
            self.fs.rename(partial, self.path(snapshot_id))
            self.fs.fsync_dir(self.dir_path)

        self._io("write", write)
        return len(data)

    def read(self, snapshot_id: RaftSnapshotId) -> list[bytes]:
        """The state machine's records of ``snapshot_id`` (`CorruptRecordError` if the file
        does not parse or names another id)."""
        data = self._io("read", lambda: self.fs.read_bytes(self.path(snapshot_id)))
        return self._decode(snapshot_id, data)

    def read_chunk(
        self, snapshot_id: RaftSnapshotId, position: int, max_bytes: int
    ) -> tuple[bytes, int] | None:
        """Up to ``max_bytes`` from ``position`` and the file size; None if the snapshot is
        gone or ``position`` is past its end."""
        path = self.path(snapshot_id)
        if not self.fs.exists(path):
            return None

        def read() -> tuple[bytes, int]:
            handle = self.fs.open(path, create=False)
            try:
                return handle.pread(position, max_bytes), handle.size()
            finally:
                handle.close()

        try:
            data, size = read()
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise StorageError(f"cannot read {path}: {exc}", self.dir_path) from exc
        return None if position > size else (data, size)

    # ------------------------------------------------------------------ downloads

    def write_chunk(self, snapshot_id: RaftSnapshotId, position: int, data: bytes) -> None:
        """Write a downloaded chunk at ``position`` (0 starts the ``.part`` file afresh)."""
        path = self.path(snapshot_id, partial=True)

        def write() -> None:
            if position == 0:
                self.fs.remove(path)
            handle = self.fs.open(path, create=True)
            try:
                if handle.size() != position:
                    raise CorruptRecordError(
                        f"snapshot chunk at {position}, but {path} has {handle.size()} bytes"
                    )
                handle.append(data)
            finally:
                handle.close()

        self._io("write", write)

    def complete_download(self, snapshot_id: RaftSnapshotId) -> list[bytes]:
        """Check the downloaded file, make it durable under its final name; returns the state
        machine's records."""
        partial = self.path(snapshot_id, partial=True)
        data = self._io("read", lambda: self.fs.read_bytes(partial))
        records = self._decode(snapshot_id, data)

        def finish() -> None:
            self.fs.fsync_file(partial)
            self.fs.rename(partial, self.path(snapshot_id))
            self.fs.fsync_dir(self.dir_path)

        self._io("install", finish)
        return records

    def abort_download(self, snapshot_id: RaftSnapshotId) -> None:
        """Drop a partial download."""
        self._remove(self.path(snapshot_id, partial=True))

    # ------------------------------------------------------------------ helpers

    def _decode(self, snapshot_id: RaftSnapshotId, data: bytes) -> list[bytes]:
        found, records = decode_snapshot(data)
        if found != snapshot_id:
            raise CorruptRecordError(f"snapshot file for {snapshot_id} holds {found}")
        return records

    def _remove(self, path: str) -> None:
        try:
            self.fs.remove(path)
        except OSError as exc:
            raise StorageError(f"cannot delete {path}: {exc}", self.dir_path) from exc

    def _listdir(self) -> list[str]:
        return self._io("list", lambda: self.fs.listdir(self.dir_path))

    def _join(self, name: str) -> str:
        return os.path.join(self.dir_path, name)

    def _io(self, action: str, fn: Callable[[], _T]) -> _T:
        try:
            return fn()
        except OSError as exc:
            raise StorageError(
                f"snapshot {action} in {self.dir_path} failed: {exc}", self.dir_path
            ) from exc
