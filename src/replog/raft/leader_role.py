"""`LeaderRole`: what a leader does besides changing state, rules F2, F3 (leader side), F6 and
the announcement of E6 in ``core.py`` -- answering fetches from its log, counting what a
majority holds, watching that a majority keeps fetching, and repeating BeginQuorumEpoch to the
voters that have not acknowledged it.

The core makes one when it becomes leader and throws it away on the next change of state. Its
bookkeeping is a `LeaderProgress`; it reads records and snapshot chunks through the core's
`LogReader` and commits through the core's `ReplicatedLog`. `answer_fetch` and
`answer_fetch_snapshot` answer for any state (a node that does not lead answers with R2's
epoch errors) and hand a valid request of the leader's epoch to its role.
"""

from __future__ import annotations

import attrs

from replog.errors import ErrorCode
from replog.raft.config import RaftConfig
from replog.raft.messages import (
    BeginQuorumEpochRequest,
    FetchSnapshotRequest,
    FetchSnapshotResponse,
    RaftFetchRequest,
    RaftFetchResponse,
)
from replog.raft.pending_ready import PendingReady
from replog.raft.progress import LeaderProgress
from replog.raft.ready import LogReader
from replog.raft.replicated_log import ReplicatedLog
from replog.raft.states import EpochState, Leader

__all__ = ["LeaderRole", "answer_fetch", "answer_fetch_snapshot"]

_NEVER = 1 << 62


def _fetch_epoch_error(state: EpochState, epoch: int) -> ErrorCode | None:
    """R2 for Fetch and FetchSnapshot, which never move the epoch: a lower one is fenced, a
    higher one unknown; in this epoch only the leader answers."""
    if epoch < state.epoch:
        return ErrorCode.FENCED_LEADER_EPOCH
    if epoch > state.epoch:
        return ErrorCode.UNKNOWN_LEADER_EPOCH
    if not isinstance(state, Leader):
        return ErrorCode.NOT_LEADER_OR_FOLLOWER
    return None


@attrs.define(eq=False)
class LeaderRole:
    """One leader's term in its epoch (see the module docstring)."""

    state: Leader
    config: RaftConfig
    progress: LeaderProgress
    _log: ReplicatedLog
    _reader: LogReader
    _ready: PendingReady

    @classmethod
    def start(
        cls,
        state: Leader,
        config: RaftConfig,
        log: ReplicatedLog,
        reader: LogReader,
        ready: PendingReady,
        now_ms: int,
    ) -> LeaderRole:
        """The role of a leader elected at ``now_ms``: nobody has fetched yet."""
        progress = LeaderProgress.start(
            state.local_id, config.voters, config.check_quorum_timeout_ms, now_ms
        )
        return cls(state, config, progress, log, reader, ready)

    def next_deadline_ms(self) -> int:
        """When `check_quorum_expired` or `maybe_announce` next has something to do."""
        progress = self.progress
        deadlines = [_NEVER]
        if progress.majority > 1:
            deadlines.append(progress.check_quorum_deadline_ms)
        if progress.unacknowledged():
            deadlines.append(progress.next_begin_quorum_ms)
        return min(deadlines)

    def check_quorum_expired(self, now_ms: int) -> bool:
        """F6: a majority of voters (itself included) has not fetched within the check-quorum
        timeout (the core resigns)."""
        return self.progress.check_quorum_expired(now_ms)

    def maybe_announce(self, now_ms: int) -> None:
        """E6: BeginQuorumEpoch to the voters that have not acknowledged, every half fetch
        timeout."""
        progress = self.progress
        if now_ms >= progress.next_begin_quorum_ms and progress.unacknowledged():
            for voter in progress.unacknowledged():
                self._ready.send(
                    voter, BeginQuorumEpochRequest(self.state.epoch, self.state.local_id)
                )
            progress.next_begin_quorum_ms = now_ms + max(1, self.config.fetch_timeout_ms // 2)

    def maybe_advance_high_watermark(self) -> None:
        """F3, leader side: the offset a majority holds (itself at its flushed offset), once
        it is past the epoch start offset."""
        majority_offset = self.progress.majority_end_offset(self._log.flushed_offset)
        if majority_offset > self.state.epoch_start_offset:
            self._log.raise_high_watermark(majority_offset)

    def answer_fetch(
        self, src: int, request: RaftFetchRequest, response: RaftFetchResponse, now_ms: int
    ) -> RaftFetchResponse:
        """F2 for a valid fetch of this epoch from ``src``: where it diverges, the snapshot it
        needs, or records from its offset (then its offset counts toward the HW); ``response``
        is the answer so far (epoch, leader, the request's offsets)."""
        self.progress.on_contact(src, now_ms)
        validity = self._log.model.validate_fetch(request.fetch_offset, request.last_fetched_epoch)
        if validity.diverging is not None:
            response = attrs.evolve(response, diverging=validity.diverging)
        elif validity.snapshot_id is not None:
            response = attrs.evolve(response, snapshot_id=validity.snapshot_id)
        else:
            self.progress.on_valid_fetch(
                src,
                request.fetch_offset,
                leader_end_offset=self._log.model.end_offset,
                now_ms=now_ms,
            )
            self.maybe_advance_high_watermark()
            records = b""
            if request.fetch_offset < self._log.model.end_offset:
                max_bytes = min(request.max_bytes, self.config.fetch_max_bytes)
                records = self._reader.read_records(request.fetch_offset, max_bytes)
            response = attrs.evolve(response, records=records)
        return attrs.evolve(response, high_watermark=self._log.high_watermark)

    def read_snapshot_chunk(
        self, src: int, request: FetchSnapshotRequest, now_ms: int
    ) -> tuple[bytes, int] | None:
        """F5, leader side: one chunk of the requested snapshot file and its size (None if the
        snapshot is gone or the position is past its end)."""
        self.progress.on_contact(src, now_ms)
        max_bytes = min(request.max_bytes, self.config.snapshot_chunk_bytes)
        return self._reader.read_snapshot_chunk(request.snapshot_id, request.position, max_bytes)


def answer_fetch(
    state: EpochState, leader: LeaderRole | None, src: int, request: RaftFetchRequest, now_ms: int
) -> RaftFetchResponse:
    """F2: the answer of a node in ``state`` (its ``leader`` role if it leads) to a Fetch
    from ``src``: an epoch error (R2), INVALID_REQUEST, or the leader's answer."""
    error = _fetch_epoch_error(state, request.epoch)
    if error is None and (request.replica_id != src or request.fetch_offset < 0):
        error = ErrorCode.INVALID_REQUEST
    response = RaftFetchResponse(
        state.epoch,
        state.leader_id,
        error or ErrorCode.NONE,
        request.fetch_offset,
        request.last_fetched_epoch,
    )
    if error is not None or leader is None:
        return response
    return leader.answer_fetch(src, request, response, now_ms)


def answer_fetch_snapshot(
    state: EpochState,
    leader: LeaderRole | None,
    src: int,
    request: FetchSnapshotRequest,
    now_ms: int,
) -> FetchSnapshotResponse:
    """F5, leader side: the answer of a node in ``state`` to a FetchSnapshot from ``src``: an
    epoch error (R2), INVALID_REQUEST, OFFSET_OUT_OF_RANGE, or one chunk of the file."""
    error = _fetch_epoch_error(state, request.epoch)
    if error is None and (request.replica_id != src or request.position < 0):
        error = ErrorCode.INVALID_REQUEST
    chunk = None
    if error is None and leader is not None:
        chunk = leader.read_snapshot_chunk(src, request, now_ms)
        if chunk is None:
            error = ErrorCode.OFFSET_OUT_OF_RANGE
    data, size_bytes = chunk if chunk is not None else (b"", 0)
    return FetchSnapshotResponse(
        state.epoch,
        state.leader_id,
        error or ErrorCode.NONE,
        request.snapshot_id,
        request.position,
        size_bytes,
        data,
    )
