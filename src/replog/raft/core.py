"""`RaftCore`: the KRaft quorum protocol (KIP-595, KIP-996 pre-vote, KIP-630 snapshots) as a
pure state machine in the etcd-io/raft style.

Theory of operation. Inputs are method calls carrying ``now_ms``: ``on_message`` (a request or
response from node ``src``), ``tick``, ``propose``, ``resign``, ``on_flushed`` (the driver's
fsync covered the log up to an offset), ``on_snapshot`` (the owner wrote a local snapshot) and
``leader_unreachable`` (the transport's sign that a node is gone, E9).
Outputs accumulate in a `Ready` (``take_ready``): the ``quorum-state`` to persist, log
operations, messages, the new high watermark; ``ready.py`` says in which order the driver
carries them out (persist before sending). Randomness (election timeouts, backoffs, an
observer's choice of voter) comes from the injected ``rng(n) -> [0, n)``; time only from
``now_ms``. The core keeps a `LogModel` of its log (offsets, epochs, snapshot), so it decides
every log change itself and reads record bytes only to answer fetches (through `LogReader`).

The rules, in the order the code follows them (E6-E8 and F6 live in ``leadership.py``, F1-F5
in ``replication.py``):

R1 **Persistence and restart.** The election state (epoch, leader, vote) is persisted before any
   message that depends on it leaves. On start: an epoch below the log's last epoch becomes
   Unattached in the log's epoch; a node that led its epoch comes back Resigned (it must not
   lead or vote again in it, and unflushed records of that epoch may be gone) -- a single voter,
   with nobody to hand over to, straight to Unattached in the next epoch; one that voted
   for itself comes back Candidate; one that knew a leader, Follower; one that voted, Voted.
R2 **Epochs.** Every Vote, BeginQuorumEpoch and EndQuorumEpoch request and every response
   carries the sender's epoch and the leader it knows. A higher epoch is adopted at once: as
   Follower of the named leader if there is one, else Unattached. A same-epoch message naming a
   leader makes a node that has none (Unattached, Voted, Prospective, Candidate) its Follower.
   Two leaders in one epoch are a bug (`InvariantError`). Requests with a lower epoch are
   answered FENCED_LEADER_EPOCH; stale responses are ignored. Fetch and FetchSnapshot requests
   never move the epoch: a lower one is fenced, a higher one is UNKNOWN_LEADER_EPOCH.

E1 **Timeouts.** A voter in Unattached, Voted or Follower (fetch timeout: no answer from the
   leader for ``fetch_timeout_ms``) becomes Prospective in the *same* epoch and asks the other
   voters for pre-votes. A Candidate whose election times out does too. Timeouts are
   ``election_timeout_ms + rng(election_timeout_ms)``. Observers never elect.
E2 **Pre-vote.** A voter grants a pre-vote iff the asker's log is at least as up to date as its
   own ((last epoch, end offset) compared in that order), it is not the Leader, and it is not a
   Follower that heard from a live leader within ``fetch_timeout_ms`` (KIP-996: a partitioned
   node cannot disrupt a healthy quorum) -- unless the transport has since reported that
   leader unreachable (E9). Granting changes nothing.
E3 **Prospective.** With a majority of pre-votes (itself included) it becomes Candidate. If a
   majority refuses or its election times out, it returns to what it was: Follower of the
   leader it knew, else Voted (keeping its vote), else Unattached. A pre-vote answer that
   names the very leader it lost contact with is counted, not taken as news of a leader (R2):
   the voter may simply not have noticed yet that the leader is gone, and following it again
   would let the survivors of a crashed leader hand each other back to it for ever (Kafka's
   Prospective state keeps its leader id for the same reason).
E4 **Vote.** A voter grants a real vote in epoch ``e`` iff it knows no leader in ``e``, has not
   voted for anyone else in ``e``, and the candidate's log is at least as up to date. The vote
   is persisted (Voted) before the answer leaves.
E5 **Candidate.** Epoch + 1, a vote for itself (persisted), Vote requests to the other voters.
   A majority makes it Leader. A majority of refusals starts a random binary-exponential
   backoff (at most ``election_backoff_max_ms``) before the next Prospective round.
E6 **Leader.** Appends a leader-change control record at its log end (the epoch start offset)
   so the high watermark can move in its epoch, persists itself as leader and sends
   BeginQuorumEpoch to every voter until each acknowledges (answers or fetches).
E7 **BeginQuorumEpoch** makes the receiver a Follower of the sender in that epoch (R2).
E8 **Resignation.** ``resign()`` or a failed check quorum (F6) makes the leader Resigned: it
   sends EndQuorumEpoch (its successors, most caught up first) until acknowledged, answers
   fetches NOT_LEADER and, after an election timeout, moves to Unattached in epoch + 1. A
   Follower of that leader receiving it grants pre-votes from then on and starts its own
   election after a backoff given by its place among the successors (0 for the first).

F1 **Fetch loop.** A Follower (or observer) sends one Fetch at a time to its leader: fetch
   offset = its log end, last fetched epoch = epoch of its last record. It fetches again at
   once after records, after ``fetch_backoff_ms`` after an empty answer, and re-sends after
   ``request_timeout_ms`` without one. An observer without a leader asks a random voter.
F2 **Leader answers a fetch** (epoch checks as R2): if the fetch diverges from the leader's log
   (`LogModel.validate_fetch`), it answers the diverging epoch and its end offset; if the
   fetch offset is below the log start, the snapshot id; otherwise records from the fetch
   offset, and the voter's fetch offset counts toward the high watermark.
F3 **High watermark.** The leader's HW is the largest offset a majority of voters hold (itself
   counted at its *flushed* offset), and it moves only when that offset is past its epoch
   start offset: only records of the current epoch are committed by counting, earlier ones
   with them. A follower takes ``min(leader HW, its log end)``. A node's HW never goes down;
   after a restart it starts again at the log start (the snapshot), and a truncation below it
   is a bug.
F4 **Follower answer.** Applied only if it answers the current leader in the current epoch and
   still describes the log (echoed fetch offset and last epoch). Diverging: truncate by the
   KIP-101/279 rule (`LogModel.truncation_offset`) and fetch again, the HW untouched. Snapshot
   id: download it (F5). Records: append the whole batches, then take the HW.
F5 **Snapshots.** A follower fetches the snapshot chunk by chunk (FetchSnapshot), writes it to a
   partial file and, when complete, installs it: the log restarts empty at its end offset. The
   owner makes local snapshots of committed state; ``on_snapshot`` then moves the log start up
   to it (the log below is deleted).
F6 **Check quorum.** A leader that has not had a Fetch or FetchSnapshot from a majority of
   voters (itself included) within 1.5 x ``fetch_timeout_ms`` resigns (E8).

E9 **Unreachable leader.** ``leader_unreachable(node_id)`` is the transport's report that
   ``node_id`` is gone -- in the TCP shell, its connection was closed and a reconnect was
   refused: the process died and its port is closed. A Follower of that node marks the leader
   lost (it grants pre-votes from then on, E2) and moves its fetch timeout up to
   ``rng(election_timeout_ms)`` from now, random so the survivors do not all stand at once.
   It is only a hint: the election still starts with a pre-vote round (E1-E3), which succeeds
   only if a majority also lost the leader, so a spurious report cannot disrupt a healthy
   quorum -- the round is refused, and the node follows the leader again. Any answer from the
   leader clears the mark; reports for another node, or while the mark is set, change nothing.
   A leader that is paused or cut off keeps its connections open (or they time out): that is
   still the fetch timeout's case.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import attrs

from replog.errors import ErrorCode, InvalidConfigError, RecordBatchTooLargeError, invariant
from replog.raft.config import RaftConfig
from replog.raft.entries import encode_data_batch
from replog.raft.leadership import LeadershipMixin
from replog.raft.log_model import LogModel
from replog.raft.messages import (
    NO_LEADER,
    BeginQuorumEpochRequest,
    BeginQuorumEpochResponse,
    EndQuorumEpochRequest,
    EndQuorumEpochResponse,
    FetchSnapshotRequest,
    FetchSnapshotResponse,
    Message,
    OffsetAndEpoch,
    Outbound,
    RaftFetchRequest,
    RaftFetchResponse,
    RaftSnapshotId,
    VoteRequest,
    VoteResponse,
)
from replog.raft.progress import LeaderProgress, SnapshotDownload
from replog.raft.ready import (
    AdvanceLogStart,
    LeaderAndEpoch,
    LogOp,
    LogReader,
    ProposeResult,
    Ready,
)
from replog.raft.replication import ReplicationMixin
from replog.raft.states import (
    Candidate,
    ElectionState,
    EpochState,
    Follower,
    Leader,
    Prospective,
    Resigned,
    Unattached,
    Voted,
)

__all__ = ["RaftCore", "Rng"]

#: ``rng(n)`` returns a uniformly drawn int in [0, n).
Rng = Callable[[int], int]
_NEVER = 1 << 62


@attrs.define(eq=False)
class RaftCore(LeadershipMixin, ReplicationMixin):
    """One node of the quorum (see the module docstring). Build with `RaftCore.start`."""

    config: RaftConfig
    log: LogModel
    reader: LogReader
    rng: Rng
    state: EpochState
    high_watermark: int
    _persisted: ElectionState
    _flushed_offset: int
    _known_leader: LeaderAndEpoch
    _election_deadline_ms: int = _NEVER
    _fetch_deadline_ms: int = _NEVER
    _leader_contact_ms: int | None = None
    _leader_lost: bool = False
    _next_send_ms: int = 0
    _fetch_in_flight: tuple[int, int] | None = None
    _fetch_sent_ms: int = 0
    _progress: LeaderProgress | None = None
    _download: SnapshotDownload | None = None
    _awaiting: set[int] = attrs.field(factory=set)
    _retries: int = 1
    _ready_election: ElectionState | None = None
    _ready_ops: list[LogOp] = attrs.field(factory=list)
    _ready_messages: list[Outbound] = attrs.field(factory=list)
    _ready_hw: int | None = None
    _ready_leader: LeaderAndEpoch | None = None

    # ------------------------------------------------------------------ R1: start

    @classmethod
    def start(
        cls,
        config: RaftConfig,
        election: ElectionState | None,
        log: LogModel,
        reader: LogReader,
        rng: Rng,
        now_ms: int,
    ) -> RaftCore:
        """The node as it comes up: ``election`` from the quorum-state file (None if there is
        none yet) and ``log`` describing the recovered, fully flushed log (R1)."""
        me, voters = config.node_id, config.voters
        stored = election or ElectionState(0, NO_LEADER, -1, voters)
        if stored.voters != voters:
            raise InvalidConfigError(
                f"voters {sorted(voters)} differ from the quorum-state's {sorted(stored.voters)}"
            )
        state: EpochState
        if stored.epoch < log.last_epoch:
            state = Unattached(log.last_epoch)
        elif stored.leader_id == me:
            state = Resigned(stored.epoch, me)
        elif stored.voted_id == me:
            state = Candidate(stored.epoch, frozenset({me}))
        elif stored.leader_id != NO_LEADER and stored.leader_id in voters:
            state = Follower(stored.epoch, stored.leader_id)
        elif stored.voted_id >= 0:
            state = Voted(stored.epoch, stored.voted_id)
        else:
            state = Unattached(stored.epoch)
        if voters == {me} and isinstance(state, Resigned):
            state = Unattached(stored.epoch + 1)  # waiting out the resignation helps nobody
        core = cls(
            config=config,
            log=log,
            reader=reader,
            rng=rng,
            state=state,
            high_watermark=log.start_offset,
            persisted=stored,
            flushed_offset=log.end_offset,
            known_leader=LeaderAndEpoch(stored.epoch, NO_LEADER),
        )
        core._enter(state, now_ms)
        if config.voters == {me} and not isinstance(state, Leader | Resigned):
            core._election_deadline_ms = now_ms  # a single voter elects itself at once
        return core

    # ------------------------------------------------------------------ outputs

    def take_ready(self) -> Ready:
        """Everything produced since the last call (see ``ready.py`` for the order)."""
        ready = Ready(
            election=self._ready_election,
            log_ops=tuple(self._ready_ops),
            messages=tuple(self._ready_messages),
            high_watermark=self._ready_hw,
            leader=self._ready_leader,
        )
        self._ready_election, self._ready_hw, self._ready_leader = None, None, None
        self._ready_ops, self._ready_messages = [], []
        return ready

    @property
    def has_ready(self) -> bool:
        """Whether `take_ready` has anything."""
        return bool(
            self._ready_election is not None
            or self._ready_ops
            or self._ready_messages
            or self._ready_hw is not None
            or self._ready_leader is not None
        )

    @property
    def flushed_offset(self) -> int:
        """Offsets below this are durable (as the driver last reported)."""
        return self._flushed_offset

    def _send(self, dst: int, message: Message) -> None:
        self._ready_messages.append(Outbound(dst, message))

    def _log_op(self, op: LogOp) -> None:
        self._ready_ops.append(op)

    # ------------------------------------------------------------------ transitions

    def _enter(self, state: EpochState, now_ms: int) -> None:
        """Make ``state`` current: persist its election state if that changed (R1), report a
        new leader, and arm the state's timers."""
        invariant(state.epoch >= self.state.epoch, f"epoch back from {self.state} to {state}")
        me = self.config.node_id
        self.state = state
        election = state.election(me, self.config.voters)
        if election != self._persisted:
            self._persisted = election
            self._ready_election = election
        known = LeaderAndEpoch(state.epoch, state.leader_id)
        if known != self._known_leader:
            self._known_leader = known
            self._ready_leader = known
        self._progress, self._download, self._fetch_in_flight = None, None, None
        self._leader_contact_ms = None
        self._leader_lost = False
        self._awaiting = set()
        self._election_deadline_ms = self._fetch_deadline_ms = _NEVER
        self._next_send_ms = now_ms
        if isinstance(state, Leader):
            self._progress = LeaderProgress.start(
                me, self.config.voters, self.config.check_quorum_timeout_ms, now_ms
            )
        elif isinstance(state, Follower):
            self._fetch_deadline_ms = now_ms + self.config.fetch_timeout_ms
        elif self.config.is_voter:
            self._election_deadline_ms = now_ms + self._random_election_timeout_ms()
            if isinstance(state, Prospective | Candidate | Resigned):  # they ask the others
                self._awaiting = set(self.config.voters) - {me}

    def _random_election_timeout_ms(self) -> int:
        base = self.config.election_timeout_ms
        return base + self.rng(base)

    def _observe_epoch(self, epoch: int, leader_id: int, now_ms: int) -> bool:
        """R2 for a message from the current or a newer epoch; False if it is stale."""
        state = self.state
        known = leader_id if leader_id in self.config.voters else NO_LEADER
        me = self.config.node_id
        if epoch < state.epoch:
            return False
        if epoch > state.epoch:
            if known not in (NO_LEADER, me):
                self._enter(Follower(epoch, known), now_ms)
            else:
                self._enter(Unattached(epoch), now_ms)
            return True
        if known == NO_LEADER:
            return True
        if isinstance(state, Leader | Resigned):
            invariant(known == me, f"node {known} claims epoch {epoch}, led by {me}")
        elif isinstance(state, Follower):
            invariant(known == state.leader_id, f"two leaders in epoch {epoch}: {state}, {known}")
        else:
            invariant(known != me, f"told it leads epoch {epoch} while {state}")
            self._enter(Follower(epoch, known), now_ms)
        return True

    # ------------------------------------------------------------------ inputs

    def on_message(self, src: int, message: Message, now_ms: int) -> None:
        """Handle one request or response from node ``src``."""
        handler = _HANDLERS[type(message)]
        handler(self, src, message, now_ms)

    def tick(self, now_ms: int) -> None:
        """Fire whatever timer is due (E1, E3, E5, E8, F1, F6)."""
        state = self.state
        if isinstance(state, Leader):
            self._tick_leader(state, now_ms)
        elif isinstance(state, Follower):
            self._tick_follower(state, now_ms)
        elif isinstance(state, Resigned):
            if now_ms >= self._election_deadline_ms:
                self._enter(Unattached(state.epoch + 1), now_ms)
            else:
                self._resend(now_ms, lambda: self._end_quorum_request(state))
        elif not self.config.is_voter:
            self._maybe_discover_leader(now_ms)
        elif now_ms >= self._election_deadline_ms:
            self._on_election_timeout(state, now_ms)
        elif isinstance(state, Prospective | Candidate):
            self._resend(now_ms, lambda: self._vote_request(state))

    def next_deadline_ms(self) -> int:
        """When `tick` next has something to do (a driver may tick more often)."""
        state = self.state
        deadlines = [self._election_deadline_ms, self._fetch_deadline_ms]
        if isinstance(state, Leader) and self._progress is not None:
            if self._progress.majority > 1:
                deadlines.append(self._progress.check_quorum_deadline_ms)
            if self._progress.unacknowledged():
                deadlines.append(self._progress.next_begin_quorum_ms)
        elif isinstance(state, Follower) or not self.config.is_voter:
            timeout_ms = self.config.request_timeout_ms
            if self._download is not None:
                sent_ms = self._download.sent_ms
                deadlines.append(0 if sent_ms is None else sent_ms + timeout_ms)
            elif self._fetch_in_flight is not None:
                deadlines.append(self._fetch_sent_ms + timeout_ms)
            else:
                deadlines.append(self._next_send_ms)
        elif self._awaiting:
            deadlines.append(self._next_send_ms)
        return min(deadlines)

    def propose(self, values: Sequence[bytes], now_ms: int) -> ProposeResult:
        """Append ``values`` as one batch if this node leads; NOT_LEADER_OR_FOLLOWER otherwise
        (with the leader it knows). `RecordBatchTooLargeError` over ``batch_bytes_max``."""
        state = self.state
        if not isinstance(state, Leader):
            return ProposeResult(ErrorCode.NOT_LEADER_OR_FOLLOWER, state.epoch, state.leader_id)
        if not values:
            raise ValueError("propose needs at least one value")
        base = self.log.end_offset
        data = encode_data_batch(values, base_offset=base, epoch=state.epoch, timestamp_ms=now_ms)
        if len(data) > self.config.batch_bytes_max:
            raise RecordBatchTooLargeError(len(data), self.config.batch_bytes_max)
        self._append(data)
        return ProposeResult(
            ErrorCode.NONE, state.epoch, state.local_id, base, self.log.end_offset - 1
        )

    def resign(self, now_ms: int) -> bool:
        """Step down gracefully (E8); False if this node does not lead."""
        state = self.state
        if not isinstance(state, Leader):
            return False
        self._become_resigned(state, now_ms)
        return True

    def leader_unreachable(self, node_id: int, now_ms: int) -> None:
        """E9: the transport found ``node_id`` gone; a follower of it elects soon (after a
        pre-vote round, so a wrong report disrupts nothing)."""
        state = self.state
        if not isinstance(state, Follower) or state.leader_id != node_id or self._leader_lost:
            return
        self._leader_lost = True
        soon_ms = now_ms + self.rng(self.config.election_timeout_ms)
        self._fetch_deadline_ms = min(self._fetch_deadline_ms, soon_ms)

    def on_flushed(self, offset: int, now_ms: int) -> None:
        """The log is durable below ``offset``; a leader may now count it (F3)."""
        self._flushed_offset = max(self._flushed_offset, min(offset, self.log.end_offset))
        if isinstance(self.state, Leader):
            self._maybe_advance_leader_hw(self.state)

    def on_snapshot(self, snapshot_id: RaftSnapshotId) -> bool:
        """The owner made a durable local snapshot of the committed state at ``snapshot_id``:
        move the log start up to it (F5). False if it is not newer than the log start."""
        if snapshot_id.end_offset <= self.log.start_offset:
            return False
        invariant(
            snapshot_id.end_offset <= self.high_watermark,
            f"snapshot {snapshot_id} past the high watermark {self.high_watermark}",
        )
        actual = self.log.epoch_for_offset(snapshot_id.end_offset - 1)
        invariant(actual == snapshot_id.epoch, f"snapshot {snapshot_id}, record epoch {actual}")
        self.log.advance_start(snapshot_id)
        self._log_op(AdvanceLogStart(snapshot_id))
        return True

    # ------------------------------------------------------------------ E1-E5: elections

    def _on_election_timeout(self, state: EpochState, now_ms: int) -> None:
        if isinstance(state, Prospective):
            self._lose_pre_vote(state, now_ms)
        elif isinstance(state, Candidate):
            self._become_prospective(NO_LEADER, self.config.node_id, state.retries + 1, now_ms)
        elif isinstance(state, Unattached):
            self._become_prospective(NO_LEADER, -1, 1, now_ms)
        elif isinstance(state, Voted):
            self._become_prospective(NO_LEADER, state.voted_id, 1, now_ms)

    def _become_prospective(self, leader_id: int, voted_id: int, retries: int, now: int) -> None:
        """E1: a pre-vote round in the current epoch."""
        me = self.config.node_id
        self._enter(Prospective(self.state.epoch, leader_id, voted_id, frozenset({me})), now)
        self._retries = retries
        self._maybe_finish_pre_vote(now)
        state = self.state
        if isinstance(state, Prospective):
            self._resend(now, lambda: self._vote_request(state))

    def _vote_request(self, state: Prospective | Candidate) -> VoteRequest:
        end = self.log.end
        return VoteRequest(
            epoch=state.epoch,
            candidate_id=self.config.node_id,
            last_epoch=end.epoch,
            end_offset=end.offset,
            pre_vote=isinstance(state, Prospective),
        )

    def _on_vote_request(self, src: int, request: VoteRequest, now_ms: int) -> None:
        """E2 / E4 (after R2)."""
        valid_epochs = (
            request.last_epoch <= request.epoch
            if request.pre_vote
            else request.last_epoch < request.epoch
        )
        if (
            src not in self.config.voters
            or request.candidate_id != src
            or not valid_epochs
            or request.end_offset < 0
            or request.last_epoch < 0
        ):
            self._answer_vote(src, request, False, ErrorCode.INVALID_REQUEST)
            return
        if request.epoch < self.state.epoch:
            self._answer_vote(src, request, False, ErrorCode.FENCED_LEADER_EPOCH)
            return
        if request.epoch > self.state.epoch:
            self._observe_epoch(request.epoch, NO_LEADER, now_ms)
        up_to_date = OffsetAndEpoch(request.last_epoch, request.end_offset) >= self.log.end
        if not self.config.is_voter:
            granted = False
        elif request.pre_vote:
            granted = self._can_grant_pre_vote(up_to_date, now_ms)
        else:
            granted = self._can_grant_vote(src, up_to_date)
            if granted and not isinstance(self.state, Voted):
                self._enter(Voted(self.state.epoch, src), now_ms)
        self._answer_vote(src, request, granted, ErrorCode.NONE)

    def _answer_vote(self, src: int, request: VoteRequest, granted: bool, err: ErrorCode) -> None:
        state = self.state
        self._send(src, VoteResponse(state.epoch, state.leader_id, granted, request.pre_vote, err))

    def _can_grant_pre_vote(self, up_to_date: bool, now_ms: int) -> bool:
        """E2."""
        state = self.state
        if not up_to_date or isinstance(state, Leader):
            return False
        if isinstance(state, Follower) and not state.leader_resigned and not self._leader_lost:
            contact = self._leader_contact_ms
            return contact is None or now_ms - contact >= self.config.fetch_timeout_ms
        return True

    def _can_grant_vote(self, candidate_id: int, up_to_date: bool) -> bool:
        """E4: no leader known in this epoch, no vote for another, an up-to-date log."""
        state = self.state
        if isinstance(state, Unattached):
            return up_to_date
        if isinstance(state, Voted):
            return state.voted_id == candidate_id
        if isinstance(state, Prospective):
            if state.voted_id >= 0:
                return state.voted_id == candidate_id
            return state.last_leader_id == NO_LEADER and up_to_date
        return False

    def _on_vote_response(self, src: int, response: VoteResponse, now_ms: int) -> None:
        """E3 / E5 (after R2, except for a pre-vote answer naming the leader this Prospective
        lost contact with: no news, see E3)."""
        if src not in self.config.voters:
            return
        state = self.state
        lost_leader = (
            isinstance(state, Prospective)
            and response.pre_vote
            and response.epoch == state.epoch
            and response.leader_id == state.last_leader_id != NO_LEADER
        )
        if not lost_leader and not self._observe_epoch(response.epoch, response.leader_id, now_ms):
            return
        state = self.state
        if response.error is not ErrorCode.NONE or response.epoch != state.epoch:
            return
        if isinstance(state, Prospective) and response.pre_vote:
            self._awaiting.discard(src)
            self.state = _record_vote(state, src, response.vote_granted)
            self._maybe_finish_pre_vote(now_ms)
        elif isinstance(state, Candidate) and not response.pre_vote:
            self._awaiting.discard(src)
            self.state = _record_vote(state, src, response.vote_granted)
            self._maybe_finish_election(now_ms)

    def _maybe_finish_pre_vote(self, now_ms: int) -> None:
        """E3: a majority of pre-votes makes a Candidate; a lost round returns."""
        state = self.state
        if not isinstance(state, Prospective):
            return
        if len(state.granted) >= self.config.majority:
            self._become_candidate(now_ms)
        elif len(state.rejected) > len(self.config.voters) - self.config.majority:
            self._lose_pre_vote(state, now_ms)

    def _lose_pre_vote(self, state: Prospective, now_ms: int) -> None:
        if state.last_leader_id != NO_LEADER:
            self._enter(Follower(state.epoch, state.last_leader_id), now_ms)
        elif state.voted_id >= 0:
            self._enter(Voted(state.epoch, state.voted_id), now_ms)
        else:
            self._enter(Unattached(state.epoch), now_ms)

    def _become_candidate(self, now_ms: int) -> None:
        """E5: a new epoch, a vote for itself, Vote requests."""
        me = self.config.node_id
        self._enter(Candidate(self.state.epoch + 1, frozenset({me}), retries=self._retries), now_ms)
        self._maybe_finish_election(now_ms)
        state = self.state
        if isinstance(state, Candidate):
            self._resend(now_ms, lambda: self._vote_request(state))

    def _maybe_finish_election(self, now_ms: int) -> None:
        state = self.state
        if not isinstance(state, Candidate):
            return
        if len(state.granted) >= self.config.majority:
            self._become_leader(state, now_ms)
        elif len(state.rejected) > len(self.config.voters) - self.config.majority:
            backoff_ms = self._election_backoff_ms(state.retries)
            self._election_deadline_ms = min(self._election_deadline_ms, now_ms + backoff_ms)
            self._awaiting = set()

    def _election_backoff_ms(self, retries: int) -> int:
        """Binary exponential backoff after a lost election (Kafka's formula)."""
        spread = 2 << min(20, max(retries, 1) - 1)
        base = self.config.retry_backoff_ms
        return min(base * self.rng(spread), self.config.election_backoff_max_ms)

    def _resend(self, now_ms: int, build: Callable[[], Message]) -> None:
        """Send ``build()`` to every voter still awaited, once per request timeout."""
        if not self._awaiting or now_ms < self._next_send_ms:
            return
        message = build()
        for voter in sorted(self._awaiting):
            self._send(voter, message)
        self._next_send_ms = now_ms + self.config.request_timeout_ms


def _record_vote(state: Prospective | Candidate, voter: int, granted: bool) -> EpochState:
    if granted:
        return attrs.evolve(state, granted=state.granted | {voter})
    return attrs.evolve(state, rejected=state.rejected | {voter})


_HANDLERS: dict[type, Callable[[RaftCore, int, Any, int], None]] = {
    VoteRequest: RaftCore._on_vote_request,
    VoteResponse: RaftCore._on_vote_response,
    BeginQuorumEpochRequest: RaftCore._on_begin_quorum_request,
    BeginQuorumEpochResponse: RaftCore._on_begin_quorum_response,
    EndQuorumEpochRequest: RaftCore._on_end_quorum_request,
    EndQuorumEpochResponse: RaftCore._on_end_quorum_response,
    RaftFetchRequest: RaftCore._on_fetch_request,
    RaftFetchResponse: RaftCore._on_fetch_response,
    FetchSnapshotRequest: RaftCore._on_fetch_snapshot_request,
    FetchSnapshotResponse: RaftCore._on_fetch_snapshot_response,
}
