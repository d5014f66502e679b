"""`RaftStorage`: the metadata log's directory, and how a `Ready`'s log operations land in it.

Layout, under the node's data directory::

    __cluster_metadata-0/
        00000000000000000000.log / .index / .timeindex   segments (a replog `Log`)
        leader-epoch-checkpoint                          the log's epoch cache
        quorum-state                                     `QuorumStateFile`
        <20-digit offset>-<10-digit epoch>.checkpoint    snapshots (`SnapshotStore`)

Every byte goes through a `FileSystem`, so `FaultInjectingFileSystem` works underneath. At open
the log is recovered with its start at the latest snapshot's end offset and then fsynced whole:
whatever survived a process crash in the page cache is durable before the core counts it.
After applying each `Ready` the driver calls `check_model`: the real log must agree with the
core's `LogModel` (start, end, epoch entries), or the core and the disk have drifted apart.
"""

from __future__ import annotations

import os

import attrs

from replog.clock import SYSTEM_CLOCK, Clock
from replog.errors import StorageError, invariant
from replog.log.config import LogConfig
from replog.log.fs import FileSystem
from replog.log.log import Log
from replog.raft.log_model import LogModel
from replog.raft.messages import RaftSnapshotId
from replog.raft.quorum_state import QuorumStateFile
from replog.raft.ready import (
    AbortSnapshotDownload,
    AdvanceLogStart,
    AppendBatches,
    InstallSnapshot,
    LogOp,
    Ready,
    TruncateTo,
    WriteSnapshotChunk,
)
from replog.raft.snapshots import SnapshotStore
from replog.raft.states import ElectionState

__all__ = ["METADATA_LOG_DIR", "RaftStorage", "metadata_log_config"]

METADATA_LOG_DIR = "__cluster_metadata-0"


def metadata_log_config(
    segment_bytes: int = 8 * 1024 * 1024, index_bytes: int = 1024 * 1024
) -> LogConfig:
    """Segments without time or size retention: only snapshots move the log start."""
    return LogConfig(
        segment_bytes=segment_bytes,
        segment_index_bytes=index_bytes,
        index_interval_bytes=min(4096, max(64, segment_bytes // 8)),
        retention_ms=-1,
        retention_bytes=-1,
    )


@attrs.define(eq=False)
class RaftStorage:
    """The log, the quorum-state file and the snapshots of one node. Open with `open`."""

    dir_path: str
    log: Log
    quorum_state: QuorumStateFile
    snapshots: SnapshotStore

    @classmethod
    def open(
        cls,
        data_dir: str,
        fs: FileSystem,
        config: LogConfig | None = None,
        *,
        clock: Clock = SYSTEM_CLOCK,
    ) -> RaftStorage:
        """Open (creating if needed) and recover the metadata log under ``data_dir``
        (``clock``: the log's time, for segment ages)."""
        dir_path = os.path.join(data_dir, METADATA_LOG_DIR)
        fs.makedirs(dir_path)
        snapshots = SnapshotStore(fs, dir_path)
        snapshots.delete_partials()
        latest = snapshots.latest()
        if latest is not None:
            snapshots.delete_before(latest)
        log = Log.open(
            dir_path,
            config or metadata_log_config(),
            fs=fs,
            clock=clock,
            log_start_offset=0 if latest is None else latest.end_offset,
        )
        try:
            log.flush()
        except StorageError:
            log.abandon()
            raise
        return cls(dir_path, log, QuorumStateFile(fs, dir_path), snapshots)

    def model(self) -> LogModel:
        """The core's `LogModel` of this log as it stands."""
        log = self.log
        return LogModel.of(
            log.log_start_offset,
            log.log_end_offset,
            log.epoch_cache.entries,
            self.snapshots.latest(),
        )

    def read_election(self) -> ElectionState | None:
        """The quorum-state file's content (None if never written)."""
        return self.quorum_state.read()

    # ------------------------------------------------------------------ LogReader

    def read_records(self, start_offset: int, max_bytes: int) -> bytes:
        """Whole batches from ``start_offset`` (the first one even if larger)."""
        return self.log.read(start_offset, max_bytes).to_bytes()

    def read_snapshot_chunk(
        self, snapshot_id: RaftSnapshotId, position: int, max_bytes: int
    ) -> tuple[bytes, int] | None:
        """A chunk of a local snapshot file (see `SnapshotStore.read_chunk`)."""
        return self.snapshots.read_chunk(snapshot_id, position, max_bytes)

    # ------------------------------------------------------------------ applying a Ready

    def apply(self, ready: Ready) -> list[tuple[RaftSnapshotId, list[bytes]]]:
        """Steps 1-2 of ``ready.py``: the log operations in order, then the quorum-state.
        Returns the snapshots installed (id and records) for the state machine to load."""
        installed = [self._apply_op(op) for op in ready.log_ops]
        if ready.election is not None:
            self.quorum_state.write(ready.election)
        if ready.high_watermark is not None:
            self.log.update_high_watermark(ready.high_watermark)
        return [item for item in installed if item is not None]

    def _apply_op(self, op: LogOp) -> tuple[RaftSnapshotId, list[bytes]] | None:
        log = self.log
        if isinstance(op, AppendBatches):
            log.append_as_follower(op.data)
        elif isinstance(op, TruncateTo):
            log.truncate_to(op.offset)
        elif isinstance(op, AdvanceLogStart):
            end_offset = op.snapshot_id.end_offset
            log.update_high_watermark(max(log.high_watermark, end_offset))
            log.maybe_increment_log_start_offset(end_offset)
            log.delete_old_segments()
            self.snapshots.delete_before(op.snapshot_id)
        elif isinstance(op, WriteSnapshotChunk):
            self.snapshots.write_chunk(op.snapshot_id, op.position, op.data)
        elif isinstance(op, InstallSnapshot):
            records = self.snapshots.complete_download(op.snapshot_id)
            log.truncate_fully_and_start_at(op.snapshot_id.end_offset)
            self.snapshots.delete_before(op.snapshot_id)
            return op.snapshot_id, records
        elif isinstance(op, AbortSnapshotDownload):
            self.snapshots.abort_download(op.snapshot_id)
        return None

    def flush(self) -> int:
        """Step 3: fsync the log; returns the offset below which it is durable."""
        self.log.flush()
        return self.log.recovery_point

    @property
    def has_unflushed(self) -> bool:
        """Whether records were appended since the last fsync."""
        return self.log.recovery_point < self.log.log_end_offset

    def write_snapshot(
        self, snapshot_id: RaftSnapshotId, records: list[bytes], now_ms: int
    ) -> None:
        """Write a local snapshot of the state machine (atomically)."""
        self.snapshots.write(snapshot_id, records, now_ms)

    def check_model(self, model: LogModel) -> None:
        """The log must agree with the core's model (a bug otherwise)."""
        log = self.log
        agree = (log.log_start_offset, log.log_end_offset) == (
            model.start_offset,
            model.end_offset,
        ) and log.epoch_cache.entries == model.epochs.entries
        if not agree:
            invariant(
                False,
                f"log [{log.log_start_offset}, {log.log_end_offset}) epochs "
                f"{log.epoch_cache.entries} but the core has [{model.start_offset}, "
                f"{model.end_offset}) epochs {model.epochs.entries}",
            )

    def close(self) -> None:
        """Flush and close the log."""
        self.log.flush()
        self.log.close()

    def abandon(self) -> None:
        """Drop file descriptors without writing (after a simulated crash)."""
        self.log.abandon()
