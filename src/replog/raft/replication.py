"""Rules F1-F5 of ``core.py``: the fetch loop, the leader's answers, the high watermark and
snapshot transfer, as the `ReplicationMixin` half of `RaftCore`.

The split is by responsibility: ``core.py`` holds the epoch rules and elections (R1-R2,
E1-E8, F6), this module what moves records between logs. Both halves share one object; the
attributes and methods this half uses from the other are declared below for the type checker.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import attrs

from replog.errors import CorruptRecordError, ErrorCode, invariant
from replog.raft.entries import whole_batches
from replog.raft.messages import (
    FetchSnapshotRequest,
    FetchSnapshotResponse,
    RaftFetchRequest,
    RaftFetchResponse,
    RaftSnapshotId,
)
from replog.raft.progress import SnapshotDownload
from replog.raft.ready import (
    AbortSnapshotDownload,
    AppendBatches,
    InstallSnapshot,
    TruncateTo,
    WriteSnapshotChunk,
)
from replog.raft.states import Follower, Leader, Unattached

if TYPE_CHECKING:
    from collections.abc import Callable

    from replog.raft.config import RaftConfig
    from replog.raft.log_model import LogModel
    from replog.raft.messages import Message
    from replog.raft.progress import LeaderProgress
    from replog.raft.ready import LogOp, LogReader
    from replog.raft.states import EpochState

__all__ = ["ReplicationMixin"]


class ReplicationMixin:
    """F1-F5 (see ``core.py``); mixed into `RaftCore`."""

    if TYPE_CHECKING:
        config: RaftConfig
        log: LogModel
        reader: LogReader
        rng: Callable[[int], int]
        state: EpochState
        high_watermark: int
        _flushed_offset: int
        _fetch_deadline_ms: int
        _leader_contact_ms: int | None
        _leader_lost: bool
        _next_send_ms: int
        _fetch_in_flight: tuple[int, int] | None
        _fetch_sent_ms: int
        _progress: LeaderProgress | None
        _download: SnapshotDownload | None
        _ready_hw: int | None

        def _send(self, dst: int, message: Message) -> None: ...
        def _log_op(self, op: LogOp) -> None: ...
        def _observe_epoch(self, epoch: int, leader_id: int, now_ms: int) -> bool: ...
        def _enter(self, state: EpochState, now_ms: int) -> None: ...
        def _become_prospective(
            self, leader_id: int, voted_id: int, retries: int, now_ms: int
        ) -> None: ...

    # ------------------------------------------------------------------ log changes

    def _append(self, data: bytes) -> None:
        """Append whole, valid batches at the log end (model first, then the op)."""
        headers = whole_batches(data)
        invariant(sum(h.size_bytes for h in headers) == len(data), "append of a partial batch")
        self.log.append(headers)
        self._log_op(AppendBatches(data))

    def _truncate(self, offset: int) -> None:
        """F4: cut the log at ``offset``; never below the high watermark."""
        invariant(
            offset >= self.high_watermark,
            f"truncation to {offset} below the high watermark {self.high_watermark}",
        )
        if offset >= self.log.end_offset:
            return
        self.log.truncate_to(offset)
        self._flushed_offset = min(self._flushed_offset, offset)
        self._log_op(TruncateTo(offset))

    def _set_high_watermark(self, offset: int) -> None:
        """F3: raise the HW to ``offset`` (never lower it)."""
        if offset <= self.high_watermark:
            return
        invariant(
            offset <= self.log.end_offset, f"HW {offset} past the log end {self.log.end_offset}"
        )
        self.high_watermark = offset
        self._ready_hw = offset

    def _maybe_advance_leader_hw(self, state: Leader) -> None:
        """F3, leader side: a majority's offset, once it is past the epoch start."""
        progress = self._progress
        invariant(progress is not None, "leader without progress")
        if progress is None:
            return
        majority_offset = progress.majority_end_offset(self._flushed_offset)
        if majority_offset > state.epoch_start_offset:
            self._set_high_watermark(majority_offset)

    # ------------------------------------------------------------------ F2: leader side

    def _leader_only_error(self, epoch: int) -> ErrorCode | None:
        """The epoch checks for Fetch and FetchSnapshot (R2's last sentence)."""
        if epoch < self.state.epoch:
            return ErrorCode.FENCED_LEADER_EPOCH
        if epoch > self.state.epoch:
            return ErrorCode.UNKNOWN_LEADER_EPOCH
        if not isinstance(self.state, Leader):
            return ErrorCode.NOT_LEADER_OR_FOLLOWER
        return None

    def _on_fetch_request(self, src: int, request: RaftFetchRequest, now_ms: int) -> None:
        """F2: diverging, snapshot or records; a valid voter fetch counts toward the HW."""
        state = self.state
        error = self._leader_only_error(request.epoch)
        if error is None and (request.replica_id != src or request.fetch_offset < 0):
            error = ErrorCode.INVALID_REQUEST
        response = RaftFetchResponse(
            state.epoch,
            state.leader_id,
            error or ErrorCode.NONE,
            request.fetch_offset,
            request.last_fetched_epoch,
        )
        if error is not None or not isinstance(state, Leader) or self._progress is None:
            self._send(src, response)
            return
        self._progress.on_contact(src, now_ms)
        validity = self.log.validate_fetch(request.fetch_offset, request.last_fetched_epoch)
        if validity.diverging is not None:
            response = attrs.evolve(response, diverging=validity.diverging)
        elif validity.snapshot_id is not None:
            response = attrs.evolve(response, snapshot_id=validity.snapshot_id)
        else:
            self._progress.on_valid_fetch(src, request.fetch_offset)
            self._maybe_advance_leader_hw(state)
            records = b""
            if request.fetch_offset < self.log.end_offset:
                max_bytes = min(request.max_bytes, self.config.fetch_max_bytes)
                records = self.reader.read_records(request.fetch_offset, max_bytes)
            response = attrs.evolve(response, records=records)
        self._send(src, attrs.evolve(response, high_watermark=self.high_watermark))

    def _on_fetch_snapshot_request(
        self, src: int, request: FetchSnapshotRequest, now_ms: int
    ) -> None:
        """F5, leader side: one chunk of the requested snapshot file."""
        state = self.state
        error = self._leader_only_error(request.epoch)
        if error is None and (request.replica_id != src or request.position < 0):
            error = ErrorCode.INVALID_REQUEST
        chunk = None
        if error is None and self._progress is not None:
            self._progress.on_contact(src, now_ms)
            max_bytes = min(request.max_bytes, self.config.snapshot_chunk_bytes)
            chunk = self.reader.read_snapshot_chunk(
                request.snapshot_id, request.position, max_bytes
            )
            if chunk is None:
                error = ErrorCode.OFFSET_OUT_OF_RANGE
        data, size_bytes = chunk if chunk is not None else (b"", 0)
        self._send(
            src,
            FetchSnapshotResponse(
                state.epoch,
                state.leader_id,
                error or ErrorCode.NONE,
                request.snapshot_id,
                request.position,
                size_bytes,
                data,
            ),
        )

    # ------------------------------------------------------------------ F1: fetch loop

    def _tick_follower(self, state: Follower, now_ms: int) -> None:
        """E1 on a fetch timeout (an observer forgets the leader instead), else F1."""
        if now_ms >= self._fetch_deadline_ms:
            if self.config.is_voter:
                self._become_prospective(state.leader_id, -1, 1, now_ms)
            else:
                self._enter(Unattached(state.epoch), now_ms)
            return
        self._maybe_send_fetch(state, now_ms)

    def _maybe_send_fetch(self, state: Follower, now_ms: int) -> None:
        """F1: one request in flight; re-sent after the request timeout."""
        timeout_ms = self.config.request_timeout_ms
        download = self._download
        if download is not None:
            if download.sent_ms is None or now_ms - download.sent_ms >= timeout_ms:
                self._send_fetch_snapshot(state, download, now_ms)
            return
        if self._fetch_in_flight is not None and now_ms - self._fetch_sent_ms < timeout_ms:
            return
        if now_ms >= self._next_send_ms:
            self._send_fetch(state.leader_id, now_ms)

    def _send_fetch(self, dst: int, now_ms: int) -> None:
        end = self.log.end
        self._fetch_in_flight = (end.offset, end.epoch)
        self._fetch_sent_ms = now_ms
        me, max_bytes = self.config.node_id, self.config.fetch_max_bytes
        request = RaftFetchRequest(self.state.epoch, me, end.offset, end.epoch, max_bytes)
        self._send(dst, request)

    def _maybe_discover_leader(self, now_ms: int) -> None:
        """F1 for an observer without a leader: ask a random voter (its answer names the
        leader, R2)."""
        if now_ms < self._next_send_ms:
            return
        voters = sorted(self.config.voters)
        self._send_fetch(voters[self.rng(len(voters))], now_ms)
        self._next_send_ms = now_ms + self.config.request_timeout_ms

    # ------------------------------------------------------------------ F4: follower side

    def _on_fetch_response(self, src: int, response: RaftFetchResponse, now_ms: int) -> None:
        """F4: only the answer to the request in flight, from the current leader, is applied."""
        if not self._observe_epoch(response.epoch, response.leader_id, now_ms):
            return
        state = self.state
        if not isinstance(state, Follower) or state.leader_id != src:
            return
        if response.epoch != state.epoch:
            return
        asked = (response.fetch_offset, response.last_fetched_epoch)
        if self._fetch_in_flight != asked or asked != (self.log.end_offset, self.log.last_epoch):
            return
        self._fetch_in_flight = None
        if response.error is not ErrorCode.NONE:
            self._next_send_ms = now_ms + self.config.fetch_backoff_ms
            return
        self._on_leader_contact(state, now_ms)
        if response.diverging is not None:
            self._truncate(self.log.truncation_offset(response.diverging))
            self._next_send_ms = now_ms
        elif response.snapshot_id is not None:
            self._download = SnapshotDownload(response.snapshot_id)
        else:
            self._append_fetched(state, response, now_ms)
        self._maybe_send_fetch(state, now_ms)

    def _on_leader_contact(self, state: Follower, now_ms: int) -> None:
        self._leader_contact_ms = now_ms
        self._leader_lost = False  # it answered: a report that it was gone was wrong (E9)
        if not state.leader_resigned:
            self._fetch_deadline_ms = now_ms + self.config.fetch_timeout_ms

    def _append_fetched(self, state: Follower, response: RaftFetchResponse, now_ms: int) -> None:
        """Append the whole batches of ``response`` (a cut-off last one is dropped), then
        take the HW (F3, follower side)."""
        try:
            headers = whole_batches(response.records)
        except CorruptRecordError:
            headers = None
        if headers is None or (
            headers
            and (
                headers[0].base_offset != self.log.end_offset
                or headers[-1].partition_leader_epoch > state.epoch
            )
        ):
            self._next_send_ms = now_ms + self.config.fetch_backoff_ms  # a bad answer
            return
        if headers:
            self._append(response.records[: sum(h.size_bytes for h in headers)])
            self._next_send_ms = now_ms
        else:
            self._next_send_ms = now_ms + self.config.fetch_backoff_ms
        if response.high_watermark >= 0:
            self._set_high_watermark(min(response.high_watermark, self.log.end_offset))

    # ------------------------------------------------------------------ F5: snapshots

    def _send_fetch_snapshot(
        self, state: Follower, download: SnapshotDownload, now_ms: int
    ) -> None:
        download.sent_ms = now_ms
        self._fetch_sent_ms = now_ms
        request = FetchSnapshotRequest(
            state.epoch,
            self.config.node_id,
            download.snapshot_id,
            download.position,
            self.config.snapshot_chunk_bytes,
        )
        self._send(state.leader_id, request)

    def _on_fetch_snapshot_response(
        self, src: int, response: FetchSnapshotResponse, now_ms: int
    ) -> None:
        """F5, follower side: write the chunk at its position; install when complete."""
        if not self._observe_epoch(response.epoch, response.leader_id, now_ms):
            return
        state, download = self.state, self._download
        if not isinstance(state, Follower) or state.leader_id != src or download is None:
            return
        if response.epoch != state.epoch or (response.snapshot_id, response.position) != (
            download.snapshot_id,
            download.position,
        ):
            return
        end = response.position + len(response.data)
        if (
            response.error is not ErrorCode.NONE
            or end > response.size_bytes
            or (not response.data and end < response.size_bytes)
        ):
            self._log_op(AbortSnapshotDownload(download.snapshot_id))
            self._download = None
            self._next_send_ms = now_ms + self.config.fetch_backoff_ms
            return
        self._on_leader_contact(state, now_ms)
        self._log_op(WriteSnapshotChunk(download.snapshot_id, response.position, response.data))
        download.position, download.sent_ms = end, None
        if end == response.size_bytes:
            self._install_snapshot(download.snapshot_id, now_ms)
        self._maybe_send_fetch(state, now_ms)

    def _install_snapshot(self, snapshot_id: RaftSnapshotId, now_ms: int) -> None:
        """The whole log is replaced: it restarts empty at the snapshot's end offset."""
        invariant(
            self.high_watermark <= snapshot_id.end_offset,
            f"snapshot {snapshot_id} below the high watermark {self.high_watermark}",
        )
        self._log_op(InstallSnapshot(snapshot_id))
        self.log.reset_to_snapshot(snapshot_id)
        self._flushed_offset = snapshot_id.end_offset
        self._set_high_watermark(snapshot_id.end_offset)
        self._download = None
        self._next_send_ms = now_ms
