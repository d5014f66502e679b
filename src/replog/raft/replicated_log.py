"""`ReplicatedLog`: the core's log as the core changes it -- its `LogModel`, its high
watermark and how far the driver has flushed it -- with every change handed to the driver as
a log operation of the `PendingReady`.

Each change is made to the model first and then emitted, so the core's answers never wait for
the driver. Two quantities only move one way here, and are checked on both sides of the move:
the high watermark never goes down and never passes the log end (rule F3 of ``core.py``), and
no truncation reaches below it (F4). The flushed offset follows the driver's reports, never
past the log end, and comes down with a truncation (what was cut is no longer durable).
"""

from __future__ import annotations

import attrs

from replog.errors import invariant
from replog.raft.entries import whole_batches
from replog.raft.log_model import LogModel
from replog.raft.messages import RaftSnapshotId
from replog.raft.pending_ready import PendingReady
from replog.raft.ready import AdvanceLogStart, AppendBatches, InstallSnapshot, TruncateTo

__all__ = ["ReplicatedLog"]


@attrs.define(eq=False)
class ReplicatedLog:
    """The core's log, high watermark and flushed offset (see the module docstring)."""

    model: LogModel
    _ready: PendingReady
    high_watermark: int
    #: offsets below this are durable (as the driver last reported)
    flushed_offset: int

    def append(self, data: bytes) -> None:
        """Append whole, valid batches at the log end (model first, then the op)."""
        headers = whole_batches(data)
        invariant(sum(h.size_bytes for h in headers) == len(data), "append of a partial batch")
        self.model.append(headers)
        self._ready.log_op(AppendBatches(data))

    def truncate(self, offset: int) -> None:
        """F4: cut the log at ``offset``; never below the high watermark."""
        invariant(
            offset >= self.high_watermark,
            f"truncation to {offset} below the high watermark {self.high_watermark}",
        )
        if offset >= self.model.end_offset:
            return
        self.model.truncate_to(offset)
        self.flushed_offset = min(self.flushed_offset, offset)
        self._ready.log_op(TruncateTo(offset))

    def raise_high_watermark(self, offset: int) -> None:
        """F3: raise the HW to ``offset`` (never lower it)."""
        if offset <= self.high_watermark:
            return
        invariant(
            offset <= self.model.end_offset,
            f"HW {offset} past the log end {self.model.end_offset}",
        )
        self.high_watermark = offset
        self._ready.report_high_watermark(offset)

    def on_flushed(self, offset: int) -> None:
        """The driver made the log durable below ``offset``."""
        self.flushed_offset = max(self.flushed_offset, min(offset, self.model.end_offset))

    def advance_start(self, snapshot_id: RaftSnapshotId) -> bool:
        """F5: the owner made a durable local snapshot of the committed state at
        ``snapshot_id``: move the log start up to it. False if it is not past the log start."""
        if snapshot_id.end_offset <= self.model.start_offset:
            return False
        invariant(
            snapshot_id.end_offset <= self.high_watermark,
            f"snapshot {snapshot_id} past the high watermark {self.high_watermark}",
        )
        actual = self.model.epoch_for_offset(snapshot_id.end_offset - 1)
        invariant(actual == snapshot_id.epoch, f"snapshot {snapshot_id}, record epoch {actual}")
        self.model.advance_start(snapshot_id)
        self._ready.log_op(AdvanceLogStart(snapshot_id))
        return True

    def install_snapshot(self, snapshot_id: RaftSnapshotId) -> None:
        """F5: a downloaded snapshot replaces the whole log, which restarts empty at its end
        offset (durable, and committed)."""
        invariant(
            self.high_watermark <= snapshot_id.end_offset,
            f"snapshot {snapshot_id} below the high watermark {self.high_watermark}",
        )
        self._ready.log_op(InstallSnapshot(snapshot_id))
        self.model.reset_to_snapshot(snapshot_id)
        self.flushed_offset = snapshot_id.end_offset
        self.raise_high_watermark(snapshot_id.end_offset)
