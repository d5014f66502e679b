"""Producer-state snapshot files (``<offset, 20 digits>.snapshot``): Kafka's byte format.

A snapshot named ``N`` holds the producer state of every batch below offset ``N`` (the state as
the log's first ``N`` offsets leave it). Layout, big-endian::

     0  version                   int16   = 1
     2  crc                       uint32  CRC-32C of bytes [6, end of file)
     6  entry_count               int32   Kafka's array length (-1 would be null: refused)
    10  entries, 46 bytes each:
         0  producer_id               int64
         8  producer_epoch            int16
        10  last_sequence             int32
        14  last_offset               int64   -1: no batch retained
        22  offset_delta              int32   last_offset - first offset of the last batch
        26  timestamp                 int64   max timestamp of the last batch
        34  coordinator_epoch         int32   -1 (no transactions in replog)
        38  current_txn_first_offset  int64   -1 (no transactions in replog)

Only each producer's last batch is in a snapshot (Kafka's format): after a log opens from a
snapshot, a retry of an older batch of the five an idempotent producer may have in flight is
no longer recognised as a duplicate until the producer writes again (Kafka behaves the same).

Writes are atomic (``.tmp``, fsync, rename, fsync the directory). Reading is strict: a file that
is short, long, of another version or whose CRC does not match raises
`CorruptProducerSnapshotError`; the caller drops it and rebuilds from the log.
"""

from __future__ import annotations

import logging
import os
import struct
from collections.abc import Iterable

import attrs
import crc32c

from replog.errors import CorruptProducerSnapshotError, StorageError, invariant
from replog.log.fs import FileSystem
from replog.log.producer_state import BatchMetadata, ProducerEntry

__all__ = [
    "SNAPSHOT_SUFFIX",
    "SNAPSHOT_VERSION",
    "ProducerSnapshots",
    "decode_snapshot",
    "encode_snapshot",
    "snapshot_file_name",
]

_log = logging.getLogger(__name__)

SNAPSHOT_SUFFIX = ".snapshot"
SNAPSHOT_VERSION = 1
_HEAD = struct.Struct(">hIi")  # version, crc, entry count
_ENTRY = struct.Struct(">qhiqiqiq")
_CRC_START = 6
invariant(_HEAD.size == 10, "snapshot head is 10 bytes")
invariant(_ENTRY.size == 46, "snapshot entries are 46 bytes")


def snapshot_file_name(offset: int) -> str:
    """``00000000000000000042.snapshot`` for offset 42."""
    return f"{offset:020d}{SNAPSHOT_SUFFIX}"


def encode_snapshot(entries: Iterable[ProducerEntry]) -> bytes:
    """The file bytes for ``entries`` (each producer's last batch; see the module docstring)."""
    body = bytearray()
    count = 0
    for entry in entries:
        last = entry.batches[-1] if entry.batches else BatchMetadata(-1, -1, 0, -1)
        body += _ENTRY.pack(
            entry.producer_id,
            entry.producer_epoch,
            last.last_sequence,
            last.last_offset,
            last.offset_delta,
            entry.last_timestamp,
            entry.coordinator_epoch,
            -1,
        )
        count += 1
    counted = struct.pack(">i", count) + bytes(body)
    return struct.pack(">hI", SNAPSHOT_VERSION, crc32c.crc32c(counted)) + counted


def decode_snapshot(data: bytes, path: str = "<snapshot>") -> list[ProducerEntry]:
    """The entries of a snapshot file; `CorruptProducerSnapshotError` if it is not one."""
    if len(data) < _HEAD.size:
        raise CorruptProducerSnapshotError(f"{len(data)} bytes is shorter than the header", path)
    version, crc, count = _HEAD.unpack_from(data, 0)
    if version != SNAPSHOT_VERSION:
        raise CorruptProducerSnapshotError(f"unknown snapshot version {version}", path)
    computed = crc32c.crc32c(data[_CRC_START:])
    if computed != crc:
        raise CorruptProducerSnapshotError(f"CRC {computed:#x} does not match {crc:#x}", path)
    if count < 0 or len(data) != _HEAD.size + count * _ENTRY.size:
        raise CorruptProducerSnapshotError(f"{count} entries do not fill {len(data)} bytes", path)
    entries = []
    for index in range(count):
        pid, epoch, seq, offset, delta, timestamp, coordinator_epoch, _ = _ENTRY.unpack_from(
            data, _HEAD.size + index * _ENTRY.size
        )
        if offset >= 0 and not 0 <= delta <= offset:
            raise CorruptProducerSnapshotError(f"entry {index}: offset delta {delta}", path)
        batches = (BatchMetadata(seq, offset, delta, timestamp),) if offset >= 0 else ()
        entries.append(ProducerEntry(pid, epoch, batches, timestamp, coordinator_epoch))
    return entries


@attrs.define
class ProducerSnapshots:
    """The snapshot files of one partition directory, by offset. Open with `scan`.

    Every ``OSError`` surfaces as `StorageError` (the caller takes the log offline)."""

    fs: FileSystem
    dir_path: str
    offsets: list[int]

    @classmethod
    def scan(cls, fs: FileSystem, dir_path: str) -> ProducerSnapshots:
        """The snapshot files ``dir_path`` holds."""
        offsets = []
        for name in fs.listdir(dir_path):
            stem = name[: -len(SNAPSHOT_SUFFIX)]
            if name.endswith(SNAPSHOT_SUFFIX) and stem.isdigit():
                offsets.append(int(stem))
        return cls(fs, dir_path, sorted(offsets))

    def path(self, offset: int) -> str:
        """The file of the snapshot at ``offset``."""
        return os.path.join(self.dir_path, snapshot_file_name(offset))

    @property
    def latest(self) -> int | None:
        """The offset of the newest snapshot, or None."""
        return self.offsets[-1] if self.offsets else None

    def latest_at_or_below(self, offset: int) -> int | None:
        """The newest snapshot at or below ``offset``, or None."""
        below = [o for o in self.offsets if o <= offset]
        return below[-1] if below else None

    def read(self, offset: int) -> list[ProducerEntry]:
        """The entries of the snapshot at ``offset`` (`CorruptProducerSnapshotError`)."""
        path = self.path(offset)
        try:
            data = self.fs.read_bytes(path)
        except FileNotFoundError as exc:
            raise CorruptProducerSnapshotError("the file is gone", path) from exc
        except OSError as exc:
            raise StorageError(f"cannot read {path}: {exc}", self.dir_path) from exc
        return decode_snapshot(data, path)

    def write(self, offset: int, entries: Iterable[ProducerEntry]) -> None:
        """Write the snapshot at ``offset`` atomically, replacing one that is there."""
        path = self.path(offset)
        tmp_path = path + ".tmp"
        try:
            self.fs.write_bytes(tmp_path, encode_snapshot(entries))
            self.fs.fsync_file(tmp_path)
            self.fs.rename(tmp_path, path)
            self.fs.fsync_dir(self.dir_path)
        except OSError as exc:
            raise StorageError(f"cannot write {path}: {exc}", self.dir_path) from exc
        if offset not in self.offsets:
            self.offsets.append(offset)
            self.offsets.sort()

    def delete(self, offset: int) -> None:
        """Remove the snapshot at ``offset`` (nothing if there is none)."""
        if offset not in self.offsets:
            return
        self.offsets.remove(offset)
        try:
            self.fs.remove(self.path(offset))
        except OSError as exc:
            raise StorageError(f"cannot delete {self.path(offset)}: {exc}", self.dir_path) from exc

    def delete_where(self, doomed: Iterable[int]) -> None:
        """Remove the snapshots at each of ``doomed``."""
        for offset in list(doomed):
            self.delete(offset)

    def delete_above(self, offset: int) -> None:
        """Remove every snapshot above ``offset``."""
        self.delete_where(o for o in self.offsets if o > offset)

    def delete_all(self) -> None:
        """Remove every snapshot."""
        self.delete_where(list(self.offsets))

    def drop_corrupt(self, offset: int, error: CorruptProducerSnapshotError) -> None:
        """A snapshot that did not read: log why and delete it."""
        _log.warning("dropping producer snapshot (rebuilding from the log): %s", error)
        self.delete(offset)
