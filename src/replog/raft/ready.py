"""What the Raft core hands its driver (etcd's ``Ready``), and what it reads back.

The core never touches storage or the network. After every input the driver takes a `Ready`
and carries it out in this order:

1. apply ``log_ops`` to the metadata log, in order;
2. write ``election`` to the ``quorum-state`` file durably (tmp, fsync, rename, fsync dir);
3. fsync the log, then tell the core ``on_flushed(log end offset)``;
4. only then send ``messages`` (a vote, a fetch offset or an acknowledgement may only leave
   once what it depends on is durable);
5. apply the committed records below ``high_watermark`` to the state machine.

A driver may batch step 3 over several Readies (group commit) as long as no message leaves
before the fsync that covers every log op taken before it.

The core reads records and snapshot chunks through a `LogReader` (etcd's ``Storage``): it sees
the log as the driver has applied it so far, which is never more than the core's own model.
"""

from __future__ import annotations

from typing import Protocol

import attrs

from replog.errors import ErrorCode
from replog.raft.messages import NO_LEADER, Outbound, RaftSnapshotId
from replog.raft.states import ElectionState

__all__ = [
    "AbortSnapshotDownload",
    "AdvanceLogStart",
    "AppendBatches",
    "InstallSnapshot",
    "LeaderAndEpoch",
    "LogOp",
    "LogReader",
    "ProposeResult",
    "Ready",
    "TruncateTo",
    "WriteSnapshotChunk",
]


@attrs.frozen
class AppendBatches:
    """Append ``data`` (whole batches, offsets and epochs already set) at the log end."""

    data: bytes


@attrs.frozen
class TruncateTo:
    """Remove every record at or after ``offset`` (never below the high watermark)."""

    offset: int


@attrs.frozen
class AdvanceLogStart:
    """A local snapshot ``snapshot_id`` is durable: move the log start to its end offset and
    delete what is below (segments, older snapshots)."""

    snapshot_id: RaftSnapshotId


@attrs.frozen
class WriteSnapshotChunk:
    """Write ``data`` at ``position`` of the partial download of ``snapshot_id`` (position 0
    starts a fresh file)."""

    snapshot_id: RaftSnapshotId
    position: int
    data: bytes


@attrs.frozen
class InstallSnapshot:
    """The download of ``snapshot_id`` is complete: make it durable, restart the log empty at
    its end offset and load the state machine from it (in that order)."""

    snapshot_id: RaftSnapshotId


@attrs.frozen
class AbortSnapshotDownload:
    """Discard the partial download of ``snapshot_id``."""

    snapshot_id: RaftSnapshotId


LogOp = (
    AppendBatches
    | TruncateTo
    | AdvanceLogStart
    | WriteSnapshotChunk
    | InstallSnapshot
    | AbortSnapshotDownload
)


@attrs.frozen
class LeaderAndEpoch:
    """The leader this node knows for ``epoch`` (``NO_LEADER``: none)."""

    epoch: int
    leader_id: int = NO_LEADER


@attrs.frozen
class Ready:
    """Everything one or more inputs produced (see the module docstring for the order)."""

    election: ElectionState | None = None
    log_ops: tuple[LogOp, ...] = ()
    messages: tuple[Outbound, ...] = ()
    high_watermark: int | None = None
    leader: LeaderAndEpoch | None = None

    @property
    def is_empty(self) -> bool:
        """Nothing to do."""
        return (
            self.election is None
            and not self.log_ops
            and not self.messages
            and self.high_watermark is None
            and self.leader is None
        )


@attrs.frozen
class ProposeResult:
    """The outcome of ``RaftCore.propose``: on success the records got offsets
    [base_offset, last_offset] in ``epoch``; they are committed once the high watermark passes
    ``last_offset`` *and* the record there still has ``epoch``."""

    error: ErrorCode
    epoch: int
    leader_id: int
    base_offset: int = -1
    last_offset: int = -1


class LogReader(Protocol):
    """Reads the core needs from storage."""

    def read_records(self, start_offset: int, max_bytes: int) -> bytes:
        """Whole batches from ``start_offset`` (at least one if any, at most ``max_bytes``
        otherwise); empty at the log end."""
        ...

    def read_snapshot_chunk(
        self, snapshot_id: RaftSnapshotId, position: int, max_bytes: int
    ) -> tuple[bytes, int] | None:
        """Up to ``max_bytes`` of the snapshot file from ``position`` and the file's size;
        None if the snapshot is gone or ``position`` is past its end."""
        ...
