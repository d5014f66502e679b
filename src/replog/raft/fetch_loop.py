"""`FetchLoop`: a follower's (or an observer's) side of replication, rules F1, F4 and F5 of
``core.py`` -- the one fetch in flight, the snapshot download, and what it knows of its
leader's liveness (when it last answered, whether the transport reported it gone, and the fetch
timeout after which the core starts an election).

The core makes one on entering a Follower state, or any state of an observer (which asks a
random voter until one names the leader), and throws it away on the next change of state; so
nothing here outlives the epoch and leader it was made for. The core checks each answer's epoch
and sender first (R2) and hands over only the answers of its leader in its epoch; the loop
checks that an answer is the one to the request in flight and still describes the log.
"""

from __future__ import annotations

from collections.abc import Callable

import attrs

from replog.errors import CorruptRecordError, ErrorCode
from replog.raft.config import RaftConfig
from replog.raft.entries import whole_batches
from replog.raft.messages import (
    FetchSnapshotRequest,
    FetchSnapshotResponse,
    RaftFetchRequest,
    RaftFetchResponse,
)
from replog.raft.pending_ready import PendingReady
from replog.raft.progress import SnapshotDownload
from replog.raft.ready import AbortSnapshotDownload, WriteSnapshotChunk
from replog.raft.replicated_log import ReplicatedLog
from replog.raft.states import Follower

__all__ = ["FetchLoop"]

_NEVER = 1 << 62


@attrs.define(eq=False)
class FetchLoop:
    """One follower's or observer's fetching (see the module docstring)."""

    config: RaftConfig
    _log: ReplicatedLog
    _ready: PendingReady
    _rng: Callable[[int], int]
    #: E1: when the follower stops waiting for its leader (never for an observer without one)
    fetch_deadline_ms: int
    #: when the next request may leave (a backoff after an empty or failed answer)
    next_send_ms: int
    #: (fetch offset, last fetched epoch) of the Fetch awaiting its answer
    in_flight: tuple[int, int] | None = None
    sent_ms: int = 0
    download: SnapshotDownload | None = None
    #: when the leader last answered (E2)
    leader_contact_ms: int | None = None
    #: the transport reported the leader gone and it has not answered since (E9)
    leader_lost: bool = False

    @classmethod
    def start(
        cls,
        config: RaftConfig,
        log: ReplicatedLog,
        ready: PendingReady,
        rng: Callable[[int], int],
        *,
        following: bool,
        now_ms: int,
    ) -> FetchLoop:
        """The loop of a node that became a Follower (``following``: its fetch timeout runs
        from now) or an observer without a leader, at ``now_ms``."""
        deadline_ms = now_ms + config.fetch_timeout_ms if following else _NEVER
        return cls(config, log, ready, rng, fetch_deadline_ms=deadline_ms, next_send_ms=now_ms)

    # ------------------------------------------------------------------ the leader's liveness

    def timed_out(self, now_ms: int) -> bool:
        """E1: the leader has not answered within the fetch timeout."""
        return now_ms >= self.fetch_deadline_ms

    def leader_is_live(self, now_ms: int) -> bool:
        """E2: the leader answered within ``fetch_timeout_ms`` and was not reported gone
        since."""
        contact = self.leader_contact_ms
        return (
            not self.leader_lost
            and contact is not None
            and now_ms - contact < self.config.fetch_timeout_ms
        )

    def mark_leader_lost(self, now_ms: int) -> None:
        """E9: the transport reported the leader gone: time out within a random part of the
        election timeout (once; an answer from the leader clears the mark)."""
        if self.leader_lost:
            return
        self.leader_lost = True
        soon_ms = now_ms + self._rng(self.config.election_timeout_ms)
        self.fetch_deadline_ms = min(self.fetch_deadline_ms, soon_ms)

    def on_leader_resigned(self, preferred_successors: tuple[int, ...], now_ms: int) -> None:
        """E8: the leader resigned: time out after a backoff given by this node's place among
        its preferred successors -- 0 for the first, then doubling up to the backoff max."""
        backoff_max = self.config.election_backoff_max_ms
        me = self.config.node_id
        if me not in preferred_successors:
            backoff_ms = backoff_max
        elif (position := preferred_successors.index(me)) == 0:
            backoff_ms = 0
        else:
            base = backoff_max >> (len(preferred_successors) - 1)
            backoff_ms = min(backoff_max, base << (position - 1))
        self.fetch_deadline_ms = now_ms + backoff_ms

    def _on_leader_contact(self, state: Follower, now_ms: int) -> None:
        self.leader_contact_ms = now_ms
        self.leader_lost = False  # it answered: a report that it was gone was wrong (E9)
        if not state.leader_resigned:
            self.fetch_deadline_ms = now_ms + self.config.fetch_timeout_ms

    # ------------------------------------------------------------------ F1: the requests

    def next_deadline_ms(self) -> int:
        """When the loop next has something to do: its fetch timeout, or re-sending (or
        sending) its request."""
        timeout_ms = self.config.request_timeout_ms
        if self.download is not None:
            sent_ms = self.download.sent_ms
            send_ms = 0 if sent_ms is None else sent_ms + timeout_ms
        elif self.in_flight is not None:
            send_ms = self.sent_ms + timeout_ms
        else:
            send_ms = self.next_send_ms
        return min(self.fetch_deadline_ms, send_ms)

    def maybe_send_fetch(self, state: Follower, now_ms: int) -> None:
        """F1: one request in flight; re-sent after the request timeout."""
        timeout_ms = self.config.request_timeout_ms
        download = self.download
        if download is not None:
            if download.sent_ms is None or now_ms - download.sent_ms >= timeout_ms:
                self._send_fetch_snapshot(state, download, now_ms)
            return
        if self.in_flight is not None and now_ms - self.sent_ms < timeout_ms:
            return
        if now_ms >= self.next_send_ms:
            self._send_fetch(state.epoch, state.leader_id, now_ms)

    def discover_leader(self, epoch: int, now_ms: int) -> None:
        """F1 for an observer without a leader: ask a random voter (its answer names the
        leader, R2)."""
        if now_ms < self.next_send_ms:
            return
        voters = sorted(self.config.voters)
        self._send_fetch(epoch, voters[self._rng(len(voters))], now_ms)
        self.next_send_ms = now_ms + self.config.request_timeout_ms

    def _send_fetch(self, epoch: int, dst: int, now_ms: int) -> None:
        end = self._log.model.end
        self.in_flight = (end.offset, end.epoch)
        self.sent_ms = now_ms
        me, max_bytes = self.config.node_id, self.config.fetch_max_bytes
        self._ready.send(dst, RaftFetchRequest(epoch, me, end.offset, end.epoch, max_bytes))

    def _send_fetch_snapshot(
        self, state: Follower, download: SnapshotDownload, now_ms: int
    ) -> None:
        download.sent_ms = now_ms
        self.sent_ms = now_ms
        request = FetchSnapshotRequest(
            state.epoch,
            self.config.node_id,
            download.snapshot_id,
            download.position,
            self.config.snapshot_chunk_bytes,
        )
        self._ready.send(state.leader_id, request)

    # ------------------------------------------------------------------ F4: the answers

    def on_fetch_response(self, state: Follower, response: RaftFetchResponse, now_ms: int) -> None:
        """F4: apply the leader's answer to the request in flight, if it still describes the
        log: truncate where it diverges, start a snapshot download, or append the records."""
        model = self._log.model
        asked = (response.fetch_offset, response.last_fetched_epoch)
        if self.in_flight != asked or asked != (model.end_offset, model.last_epoch):
            return
        self.in_flight = None
        if response.error is not ErrorCode.NONE:
            self.next_send_ms = now_ms + self.config.fetch_backoff_ms
            return
        self._on_leader_contact(state, now_ms)
        if response.diverging is not None:
            self._log.truncate(model.truncation_offset(response.diverging))
            self.next_send_ms = now_ms
        elif response.snapshot_id is not None:
            self.download = SnapshotDownload(response.snapshot_id)
        else:
            self._append_fetched(state, response, now_ms)
        self.maybe_send_fetch(state, now_ms)

    def _append_fetched(self, state: Follower, response: RaftFetchResponse, now_ms: int) -> None:
        """Append the whole batches of ``response`` (a cut-off last one is dropped), then
        take the HW (F3, follower side)."""
        log = self._log
        try:
            headers = whole_batches(response.records)
        except CorruptRecordError:
            headers = None
        if headers is None or (
            headers
            and (
                headers[0].base_offset != log.model.end_offset
                or headers[-1].partition_leader_epoch > state.epoch
            )
        ):
            self.next_send_ms = now_ms + self.config.fetch_backoff_ms  # a bad answer
            return
        if headers:
            log.append(response.records[: sum(h.size_bytes for h in headers)])
            self.next_send_ms = now_ms
        else:
            self.next_send_ms = now_ms + self.config.fetch_backoff_ms
        if response.high_watermark >= 0:
            log.raise_high_watermark(min(response.high_watermark, log.model.end_offset))

    # ------------------------------------------------------------------ F5: snapshots

    def on_fetch_snapshot_response(
        self, state: Follower, response: FetchSnapshotResponse, now_ms: int
    ) -> None:
        """F5, follower side: write the chunk at its position; install when complete."""
        download = self.download
        if download is None or (response.snapshot_id, response.position) != (
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
            self._ready.log_op(AbortSnapshotDownload(download.snapshot_id))
            self.download = None
            self.next_send_ms = now_ms + self.config.fetch_backoff_ms
            return
        self._on_leader_contact(state, now_ms)
        self._ready.log_op(
            WriteSnapshotChunk(download.snapshot_id, response.position, response.data)
        )
        download.position, download.sent_ms = end, None
        if end == response.size_bytes:
            self._log.install_snapshot(download.snapshot_id)
            self.download = None
            self.next_send_ms = now_ms
        self.maybe_send_fetch(state, now_ms)
