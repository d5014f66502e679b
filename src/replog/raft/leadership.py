"""Rules E6-E8 and F6 of ``core.py``: becoming leader, announcing it, stepping down (gracefully
or by check quorum) and how the voters react, as the `LeadershipMixin` part of `RaftCore`.

Split out of ``core.py`` by responsibility (the epoch rules and elections stay there); the
attributes and methods used from the other parts are declared below for the type checker.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from replog.errors import ErrorCode, invariant
from replog.raft.entries import encode_leader_change
from replog.raft.messages import (
    BeginQuorumEpochRequest,
    BeginQuorumEpochResponse,
    EndQuorumEpochRequest,
    EndQuorumEpochResponse,
)
from replog.raft.states import Candidate, Follower, Leader, Resigned

if TYPE_CHECKING:
    from collections.abc import Callable

    from replog.raft.config import RaftConfig
    from replog.raft.log_model import LogModel
    from replog.raft.messages import Message
    from replog.raft.progress import LeaderProgress
    from replog.raft.states import EpochState

__all__ = ["LeadershipMixin"]

_INVALID = ErrorCode.INVALID_REQUEST
_FENCED = ErrorCode.FENCED_LEADER_EPOCH


class LeadershipMixin:
    """E6-E8 and F6 (see ``core.py``); mixed into `RaftCore`."""

    if TYPE_CHECKING:
        config: RaftConfig
        log: LogModel
        state: EpochState
        _progress: LeaderProgress | None
        _fetch_deadline_ms: int
        _awaiting: set[int]

        def _send(self, dst: int, message: Message) -> None: ...
        def _enter(self, state: EpochState, now_ms: int) -> None: ...
        def _observe_epoch(self, epoch: int, leader_id: int, now_ms: int) -> bool: ...
        def _resend(self, now_ms: int, build: Callable[[], Message]) -> None: ...
        def _append(self, data: bytes) -> None: ...
        def _maybe_advance_leader_hw(self, state: Leader) -> None: ...

    def _become_leader(self, state: Candidate, now_ms: int) -> None:
        """E6: record the epoch start, persist, announce."""
        me = self.config.node_id
        start = self.log.end_offset
        self._enter(Leader(state.epoch, start, me), now_ms)
        self._append(
            encode_leader_change(
                base_offset=start,
                epoch=state.epoch,
                leader_id=me,
                voters=self.config.voters,
                timestamp_ms=now_ms,
            )
        )
        leader = self.state
        invariant(isinstance(leader, Leader), f"not leader after election: {leader}")
        if isinstance(leader, Leader):
            self._maybe_advance_leader_hw(leader)
            self._tick_leader(leader, now_ms)

    def _tick_leader(self, state: Leader, now_ms: int) -> None:
        """F6, then BeginQuorumEpoch to voters that have not acknowledged (E6)."""
        progress = self._progress
        invariant(progress is not None, "leader without progress")
        if progress is None:
            return
        if progress.check_quorum_expired(now_ms):
            self._become_resigned(state, now_ms)
            return
        if now_ms >= progress.next_begin_quorum_ms and progress.unacknowledged():
            for voter in progress.unacknowledged():
                self._send(voter, BeginQuorumEpochRequest(state.epoch, state.local_id))
            progress.next_begin_quorum_ms = now_ms + max(1, self.config.fetch_timeout_ms // 2)

    def _become_resigned(self, state: Leader, now_ms: int) -> None:
        """E8: step down and ask the voters to elect, the most caught up first."""
        progress = self._progress
        successors = progress.successors() if progress is not None else ()
        resigned = Resigned(state.epoch, state.local_id, successors)
        self._enter(resigned, now_ms)
        self._resend(now_ms, lambda: self._end_quorum_request(resigned))

    def _end_quorum_request(self, state: Resigned) -> EndQuorumEpochRequest:
        return EndQuorumEpochRequest(state.epoch, state.local_id, state.successors)

    def _on_begin_quorum_request(
        self, src: int, request: BeginQuorumEpochRequest, now_ms: int
    ) -> None:
        """E7 (via R2)."""
        if src not in self.config.voters or request.leader_id != src:
            self._send(src, BeginQuorumEpochResponse(*self._epoch_and_leader(), _INVALID))
        elif not self._observe_epoch(request.epoch, request.leader_id, now_ms):
            self._send(src, BeginQuorumEpochResponse(*self._epoch_and_leader(), _FENCED))
        else:
            self._send(src, BeginQuorumEpochResponse(*self._epoch_and_leader()))

    def _on_begin_quorum_response(
        self, src: int, response: BeginQuorumEpochResponse, now_ms: int
    ) -> None:
        if not self._observe_epoch(response.epoch, response.leader_id, now_ms):
            return
        state = self.state
        if (
            isinstance(state, Leader)
            and response.epoch == state.epoch
            and self._progress is not None
            and response.error is ErrorCode.NONE
        ):
            self._progress.on_acknowledged(src)

    def _on_end_quorum_request(self, src: int, request: EndQuorumEpochRequest, now: int) -> None:
        """E8, receiving side: only a higher epoch moves it (R2); a same-epoch leader hint
        would make it follow the leader that is leaving."""
        if src not in self.config.voters or request.leader_id != src:
            self._send(src, EndQuorumEpochResponse(*self._epoch_and_leader(), _INVALID))
            return
        if request.epoch < self.state.epoch:
            self._send(src, EndQuorumEpochResponse(*self._epoch_and_leader(), _FENCED))
            return
        if request.epoch > self.state.epoch:
            self._observe_epoch(request.epoch, request.leader_id, now)
        state = self.state
        if isinstance(state, Follower) and state.leader_id == src and not state.leader_resigned:
            self._enter(Follower(state.epoch, state.leader_id, leader_resigned=True), now)
            self._fetch_deadline_ms = now + self._successor_backoff_ms(request)
        self._send(src, EndQuorumEpochResponse(*self._epoch_and_leader()))

    def _successor_backoff_ms(self, request: EndQuorumEpochRequest) -> int:
        """0 for the first preferred successor, then doubling up to the backoff max."""
        successors = request.preferred_successors
        backoff_max = self.config.election_backoff_max_ms
        if self.config.node_id not in successors:
            return backoff_max
        position = successors.index(self.config.node_id)
        if position == 0:
            return 0
        base = backoff_max >> (len(successors) - 1)
        return min(backoff_max, base << (position - 1))

    def _on_end_quorum_response(
        self, src: int, response: EndQuorumEpochResponse, now_ms: int
    ) -> None:
        if response.epoch >= self.state.epoch and isinstance(self.state, Resigned):
            self._awaiting.discard(src)
        self._observe_epoch(response.epoch, response.leader_id, now_ms)

    def _epoch_and_leader(self) -> tuple[int, int]:
        return self.state.epoch, self.state.leader_id
