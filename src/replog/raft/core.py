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

The rules, in the order the code follows them. Every change of state is made here; what a
state does while it lasts is its role, made on entering it: a Leader's `LeaderRole` (F2, F3's
count, F6's watch, E6's announcements), a Follower's or observer's `FetchLoop` (F1, F4, F5's
download, E9's mark), any other voter's `Canvass` (the election timer and the requests of E3,
E5, E8). The log and its high watermark are a `ReplicatedLog`, E2-E5's voting rules pure
functions (``votes.py``), and the `Ready` being built a `PendingReady`:

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

from replog.errors import (
    ErrorCode,
    InvalidConfigError,
    RecordBatchTooLargeError,
    invariant,
    unreachable,
)
from replog.raft.canvass import Canvass
from replog.raft.config import RaftConfig
from replog.raft.entries import encode_data_batch, encode_leader_change
from replog.raft.fetch_loop import FetchLoop
from replog.raft.leader_role import LeaderRole, answer_fetch, answer_fetch_snapshot
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
    RaftFetchRequest,
    RaftFetchResponse,
    RaftSnapshotId,
    VoteRequest,
    VoteResponse,
)
from replog.raft.pending_ready import PendingReady
from replog.raft.progress import ReplicaProgress
from replog.raft.ready import LeaderAndEpoch, LogReader, ProposeResult, Ready
from replog.raft.replicated_log import ReplicatedLog
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
from replog.raft.votes import grants_pre_vote, grants_vote, is_well_formed, record_vote

__all__ = ["RaftCore", "Rng"]

#: ``rng(n)`` returns a uniformly drawn int in [0, n).
Rng = Callable[[int], int]
_INVALID = ErrorCode.INVALID_REQUEST
_FENCED = ErrorCode.FENCED_LEADER_EPOCH


@attrs.define(eq=False)
class RaftCore:
    """One node of the quorum (see the module docstring). Build with `RaftCore.start`."""

    config: RaftConfig
    reader: LogReader
    rng: Rng
    state: EpochState
    _ready: PendingReady
    _log: ReplicatedLog
    #: what the current state does, made on entering it: a Leader's `LeaderRole`, a Follower's
    #: or an observer's `FetchLoop`, any other voter's `Canvass` (None only inside `start`)
    _role: LeaderRole | FetchLoop | Canvass | None = None

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
        ready = PendingReady(stored, LeaderAndEpoch(stored.epoch, NO_LEADER))
        core = cls(
            config=config,
            reader=reader,
            rng=rng,
            state=state,
            ready=ready,
            log=ReplicatedLog(log, ready, log.start_offset, log.end_offset),
        )
        core._enter(state, now_ms)
        if config.voters == {me} and not isinstance(state, Leader | Resigned):
            core._canvass().deadline_ms = now_ms  # a single voter elects itself at once
        return core

    # ------------------------------------------------------------------ outputs

    def take_ready(self) -> Ready:
        """Everything produced since the last call (see ``ready.py`` for the order)."""
        return self._ready.take()

    @property
    def has_ready(self) -> bool:
        """Whether `take_ready` has anything."""
        return not self._ready.is_empty

    @property
    def log(self) -> LogModel:
        """The core's model of its log (offsets, epochs, snapshot)."""
        return self._log.model

    @property
    def high_watermark(self) -> int:
        """Offsets below this are committed (F3)."""
        return self._log.high_watermark

    @property
    def flushed_offset(self) -> int:
        """Offsets below this are durable (as the driver last reported)."""
        return self._log.flushed_offset

    def voter_progress(self) -> dict[int, ReplicaProgress] | None:
        """A leader's view of the other voters (their log ends and last fetch / caught-up
        times, ``now_ms`` of this core), for DescribeQuorum; None on a node that does not lead."""
        if not isinstance(self._role, LeaderRole):
            return None
        return dict(self._role.progress.replicas)

    # ------------------------------------------------------------------ transitions

    def _enter(self, state: EpochState, now_ms: int) -> None:
        """Make ``state`` current: persist its election state if that changed (R1), report a
        new leader, start the state's role and arm its timers."""
        invariant(state.epoch >= self.state.epoch, f"epoch back from {self.state} to {state}")
        me, config = self.config.node_id, self.config
        self.state = state
        self._ready.persist(state.election(me, config.voters))
        self._ready.report_leader(LeaderAndEpoch(state.epoch, state.leader_id))
        if isinstance(state, Leader):
            self._role = LeaderRole.start(
                state, config, self._log, self.reader, self._ready, now_ms
            )
        elif isinstance(state, Follower) or not config.is_voter:
            following = isinstance(state, Follower)
            self._role = FetchLoop.start(
                config, self._log, self._ready, self.rng, following=following, now_ms=now_ms
            )
        else:
            asking = isinstance(state, Prospective | Candidate | Resigned)  # they ask the others
            self._role = Canvass.start(config, self._ready, self.rng, asking=asking, now_ms=now_ms)

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
            if self._canvass().timed_out(now_ms):
                self._enter(Unattached(state.epoch + 1), now_ms)
            else:
                self._canvass().resend(now_ms, lambda: self._end_quorum_request(state))
        elif not self.config.is_voter:
            self._fetch_loop().discover_leader(state.epoch, now_ms)  # F1
        elif self._canvass().timed_out(now_ms):
            self._on_election_timeout(state, now_ms)
        elif isinstance(state, Prospective | Candidate):
            self._canvass().resend(now_ms, lambda: self._vote_request(state))

    def next_deadline_ms(self) -> int:
        """When `tick` next has something to do (a driver may tick more often)."""
        if self._role is None:
            unreachable("a core without a role")
        return self._role.next_deadline_ms()

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
        self._log.append(data)
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
        if isinstance(state, Follower) and state.leader_id == node_id:
            self._fetch_loop().mark_leader_lost(now_ms)

    def on_flushed(self, offset: int, now_ms: int) -> None:
        """The log is durable below ``offset``; a leader may now count it (F3)."""
        self._log.on_flushed(offset)
        if isinstance(self._role, LeaderRole):
            self._role.maybe_advance_high_watermark()

    def on_snapshot(self, snapshot_id: RaftSnapshotId) -> bool:
        """The owner made a durable local snapshot of the committed state at ``snapshot_id``:
        move the log start up to it (F5). False if it is not newer than the log start."""
        return self._log.advance_start(snapshot_id)

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
        self._canvass().retries = retries
        self._maybe_finish_pre_vote(now)
        state = self.state
        if isinstance(state, Prospective):
            self._canvass().resend(now, lambda: self._vote_request(state))

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
        if not is_well_formed(request, src, self.config.voters):
            self._answer_vote(src, request, False, ErrorCode.INVALID_REQUEST)
            return
        if request.epoch < self.state.epoch:
            self._answer_vote(src, request, False, ErrorCode.FENCED_LEADER_EPOCH)
            return
        if request.epoch > self.state.epoch:
            self._observe_epoch(request.epoch, NO_LEADER, now_ms)
        state = self.state
        up_to_date = OffsetAndEpoch(request.last_epoch, request.end_offset) >= self.log.end
        if not self.config.is_voter:
            granted = False
        elif request.pre_vote:
            live = isinstance(state, Follower) and self._fetch_loop().leader_is_live(now_ms)
            granted = grants_pre_vote(state, up_to_date, leader_is_live=live)
        else:
            granted = grants_vote(state, src, up_to_date)
            if granted and not isinstance(state, Voted):
                self._enter(Voted(state.epoch, src), now_ms)
        self._answer_vote(src, request, granted, ErrorCode.NONE)

    def _answer_vote(self, src: int, request: VoteRequest, granted: bool, err: ErrorCode) -> None:
        state = self.state
        self._ready.send(
            src, VoteResponse(state.epoch, state.leader_id, granted, request.pre_vote, err)
        )

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
            self._canvass().answered(src)
            self.state = record_vote(state, src, response.vote_granted)
            self._maybe_finish_pre_vote(now_ms)
        elif isinstance(state, Candidate) and not response.pre_vote:
            self._canvass().answered(src)
            self.state = record_vote(state, src, response.vote_granted)
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
        retries = self._canvass().retries
        self._enter(Candidate(self.state.epoch + 1, frozenset({me}), retries=retries), now_ms)
        self._maybe_finish_election(now_ms)
        state = self.state
        if isinstance(state, Candidate):
            self._canvass().resend(now_ms, lambda: self._vote_request(state))

    def _maybe_finish_election(self, now_ms: int) -> None:
        state = self.state
        if not isinstance(state, Candidate):
            return
        if len(state.granted) >= self.config.majority:
            self._become_leader(state, now_ms)
        elif len(state.rejected) > len(self.config.voters) - self.config.majority:
            self._canvass().back_off(state.retries, now_ms)

    # ------------------------------------------------------------------ E6-E8: leadership

    def _become_leader(self, state: Candidate, now_ms: int) -> None:
        """E6: record the epoch start, persist, announce."""
        me = self.config.node_id
        start = self.log.end_offset
        self._enter(Leader(state.epoch, start, me), now_ms)
        self._log.append(
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
            self._leader_role().maybe_advance_high_watermark()
            self._tick_leader(leader, now_ms)

    def _tick_leader(self, state: Leader, now_ms: int) -> None:
        """F6, then BeginQuorumEpoch to voters that have not acknowledged (E6)."""
        leader = self._leader_role()
        if leader.check_quorum_expired(now_ms):
            self._become_resigned(state, now_ms)
        else:
            leader.maybe_announce(now_ms)

    def _become_resigned(self, state: Leader, now_ms: int) -> None:
        """E8: step down and ask the voters to elect, the most caught up first."""
        successors = self._leader_role().progress.successors()
        resigned = Resigned(state.epoch, state.local_id, successors)
        self._enter(resigned, now_ms)
        self._canvass().resend(now_ms, lambda: self._end_quorum_request(resigned))

    def _end_quorum_request(self, state: Resigned) -> EndQuorumEpochRequest:
        return EndQuorumEpochRequest(state.epoch, state.local_id, state.successors)

    def _on_begin_quorum_request(
        self, src: int, request: BeginQuorumEpochRequest, now_ms: int
    ) -> None:
        """E7 (via R2)."""
        if src not in self.config.voters or request.leader_id != src:
            error = _INVALID
        elif not self._observe_epoch(request.epoch, request.leader_id, now_ms):
            error = _FENCED
        else:
            error = ErrorCode.NONE
        self._ready.send(src, BeginQuorumEpochResponse(*self._epoch_and_leader(), error))

    def _on_begin_quorum_response(
        self, src: int, response: BeginQuorumEpochResponse, now_ms: int
    ) -> None:
        if not self._observe_epoch(response.epoch, response.leader_id, now_ms):
            return
        state = self.state
        if (
            isinstance(state, Leader)
            and response.epoch == state.epoch
            and response.error is ErrorCode.NONE
        ):
            self._leader_role().progress.on_acknowledged(src)

    def _on_end_quorum_request(self, src: int, request: EndQuorumEpochRequest, now: int) -> None:
        """E8, receiving side: only a higher epoch moves it (R2); a same-epoch leader hint
        would make it follow the leader that is leaving."""
        if src not in self.config.voters or request.leader_id != src:
            self._ready.send(src, EndQuorumEpochResponse(*self._epoch_and_leader(), _INVALID))
            return
        if request.epoch < self.state.epoch:
            self._ready.send(src, EndQuorumEpochResponse(*self._epoch_and_leader(), _FENCED))
            return
        if request.epoch > self.state.epoch:
            self._observe_epoch(request.epoch, request.leader_id, now)
        state = self.state
        if isinstance(state, Follower) and state.leader_id == src and not state.leader_resigned:
            self._enter(Follower(state.epoch, state.leader_id, leader_resigned=True), now)
            self._fetch_loop().on_leader_resigned(request.preferred_successors, now)
        self._ready.send(src, EndQuorumEpochResponse(*self._epoch_and_leader()))

    def _on_end_quorum_response(
        self, src: int, response: EndQuorumEpochResponse, now_ms: int
    ) -> None:
        if response.epoch >= self.state.epoch and isinstance(self.state, Resigned):
            self._canvass().answered(src)
        self._observe_epoch(response.epoch, response.leader_id, now_ms)

    def _epoch_and_leader(self) -> tuple[int, int]:
        return self.state.epoch, self.state.leader_id

    # ------------------------------------------------------------------ F1-F6: replication

    def _tick_follower(self, state: Follower, now_ms: int) -> None:
        """E1 on a fetch timeout (an observer forgets the leader instead), else F1."""
        fetcher = self._fetch_loop()
        if not fetcher.timed_out(now_ms):
            fetcher.maybe_send_fetch(state, now_ms)
        elif self.config.is_voter:
            self._become_prospective(state.leader_id, -1, 1, now_ms)
        else:
            self._enter(Unattached(state.epoch), now_ms)

    def _on_fetch_request(self, src: int, request: RaftFetchRequest, now_ms: int) -> None:
        """F2: the leader's answer (`answer_fetch`)."""
        leader = self._role if isinstance(self._role, LeaderRole) else None
        self._ready.send(src, answer_fetch(self.state, leader, src, request, now_ms))

    def _on_fetch_snapshot_request(
        self, src: int, request: FetchSnapshotRequest, now_ms: int
    ) -> None:
        """F5, leader side: one chunk of the snapshot (`answer_fetch_snapshot`)."""
        leader = self._role if isinstance(self._role, LeaderRole) else None
        answer = answer_fetch_snapshot(self.state, leader, src, request, now_ms)
        self._ready.send(src, answer)

    def _on_fetch_response(self, src: int, response: RaftFetchResponse, now_ms: int) -> None:
        """F4 (after R2): only an answer from the current leader in its epoch is applied."""
        state = self._follower_of(src, response.epoch, response.leader_id, now_ms)
        if state is not None:
            self._fetch_loop().on_fetch_response(state, response, now_ms)

    def _on_fetch_snapshot_response(
        self, src: int, response: FetchSnapshotResponse, now_ms: int
    ) -> None:
        """F5, follower side (after R2), from the current leader in its epoch."""
        state = self._follower_of(src, response.epoch, response.leader_id, now_ms)
        if state is not None:
            self._fetch_loop().on_fetch_snapshot_response(state, response, now_ms)

    def _follower_of(self, src: int, epoch: int, leader_id: int, now_ms: int) -> Follower | None:
        """R2 for an answer to a fetch, then the Follower state if ``src`` is its leader and
        the answer is of its epoch (None: the answer is not applied)."""
        if not self._observe_epoch(epoch, leader_id, now_ms):
            return None
        state = self.state
        if not isinstance(state, Follower) or state.leader_id != src or epoch != state.epoch:
            return None
        return state

    def _leader_role(self) -> LeaderRole:
        if not isinstance(self._role, LeaderRole):
            unreachable(f"no leader role in {self.state}")
        return self._role

    def _fetch_loop(self) -> FetchLoop:
        if not isinstance(self._role, FetchLoop):
            unreachable(f"no fetch loop in {self.state}")
        return self._role

    def _canvass(self) -> Canvass:
        if not isinstance(self._role, Canvass):
            unreachable(f"no canvass in {self.state}")
        return self._role


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
