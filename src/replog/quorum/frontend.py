"""`QuorumFrontend`: how one quorum node serves coordinator requests (sans-IO; the asyncio
server and the simulator both drive it).

Theory of operation. A request is a command (a write) or a query (a read), tagged by the shell
with a token it routes the reply by. Only the leader serves: any other node answers
`NotLeader` with the leader it knows, and the client goes there (the request was not executed,
so any request may be retried).

- **Writes are committed before they are acknowledged.** A command is proposed (commands that
  arrive together share a batch, so one fsync covers them) and answered when the node applies
  the record at the proposed offset: if that record has the proposing epoch it is the command,
  and the answer is the apply's outcome; if it has another epoch the proposal was lost in a
  leader change and the answer is `NotLeader` (definitely not executed). A proposal the node
  never applies times out as `Unknown` (it may still commit).
- **Reads are linearizable through a read barrier.** A read arriving at the leader of epoch
  ``E`` waits until a record of epoch ``E`` appended *after* it arrived has committed and been
  applied, then is answered from the applied image. The commit proves that a majority still
  followed this leader after the read arrived, so no other leader can have committed anything
  the image lacks (a majority that elected a newer leader would have refused the record). A
  write proposed meanwhile serves as the barrier; otherwise the leader proposes an empty
  `Barrier` record (one for every read waiting). A leader change fails waiting reads with
  `NotLeader`. This costs a log append per batch of reads, not a lease on synchronized
  clocks: KIP-595 has no leader lease, and a pull-based quorum cannot echo a heartbeat round.
- **Watches** (the feed's long poll) need no barrier: they only return committed records.
- **Sessions** (KIP-631 style): heartbeats are not logged. The leader keeps a deadline per live
  registration (last heartbeat + its session timeout) from its own clock and, when one passes,
  proposes `ExpireSession`; every voter then applies the expiry at the same offset. A node
  that becomes leader starts no deadline before it has applied its own epoch's first record,
  and then gives every live registration a fresh one.

- **The cluster id** (Kafka's ``cluster.id``, the store's identity): a leader whose image has
  none puts an `InitCluster` with a fresh id (from the shell's ``new_cluster_id``, the only
  randomness, injected) at the head of its queue when its leadership starts, so every write of
  its epoch follows it in the log and every read a client makes after a write sees it. The
  first one applied decides; one proposed by a leader that had not applied it yet changes
  nothing. Without ``new_cluster_id`` the frontend proposes none.

Replies are values (`ReplyOk`, `ReplyError`, `ReplyNotLeader`, `ReplyUnknown`); the shell
encodes them. Every queue is bounded (``pending_max``): past it a request is refused with
`CoordinatorUnavailableError`.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from typing import Protocol, cast

import attrs

from replog.coord.errors import CoordinatorUnavailableError
from replog.errors import ErrorCode, RecordBatchTooLargeError, invariant
from replog.metadata.types import ChangeBatch, SessionState
from replog.quorum import codec as raft_codec
from replog.quorum.commands import (
    COMMANDS,
    QUERIES,
    Barrier,
    Command,
    ExpireSession,
    Heartbeat,
    InitCluster,
    Query,
    Watch,
)
from replog.quorum.machine import MetadataMachine
from replog.raft.core import RaftCore
from replog.raft.entries import Entry
from replog.raft.messages import NO_LEADER
from replog.raft.ready import LeaderAndEpoch, ProposeResult
from replog.raft.states import Leader

__all__ = [
    "PENDING_MAX",
    "QuorumFrontend",
    "QuorumNode",
    "Reply",
    "ReplyError",
    "ReplyNotLeader",
    "ReplyOk",
    "ReplyUnknown",
    "Request",
]

PENDING_MAX = 10_000
"""Default bound on the requests one node holds (proposals, reads and watches each)."""
_RECORD_OVERHEAD_BYTES = 32  # a record's own framing in a batch, generously
_BATCH_OVERHEAD_BYTES = 128
_NEVER = 1 << 62

Request = Command | Query
Token = Hashable


@attrs.frozen
class ReplyOk:
    """The operation returned ``value``."""

    value: object


@attrs.frozen
class ReplyError:
    """The operation raised ``error`` (an outcome decided by the rules, e.g. a fenced
    controller); for a write, the record was applied and changed nothing."""

    error: BaseException


@attrs.frozen
class ReplyNotLeader:
    """Not executed: this node does not lead (``leader_id``: the leader it knows, or -1)."""

    leader_id: int


@attrs.frozen
class ReplyUnknown:
    """A write whose outcome this node cannot tell (it may still commit), or a read that
    timed out."""

    reason: str


Reply = ReplyOk | ReplyError | ReplyNotLeader | ReplyUnknown


class QuorumNode(Protocol):
    """What the frontend needs of its ``RaftNode``."""

    core: RaftCore
    applied_offset: int

    def propose(self, values: Sequence[bytes], now_ms: int) -> ProposeResult: ...


@attrs.define
class _Proposal:
    token: Token | None  # None: the frontend's own (a session expiry)
    epoch: int
    deadline_ms: int


@attrs.define
class _Read:
    token: Token
    query: Query
    epoch: int
    needed_offset: int
    deadline_ms: int


@attrs.define
class _Watch:
    token: Token
    watch: Watch
    epoch: int
    deadline_ms: int


@attrs.define
class _BrokerSession:
    incarnation_epoch: int
    deadline_ms: int


class QuorumFrontend:
    """Serves coordinator requests on one node (see the module docstring). Attach the node
    with `attach`, route its ``on_apply`` / ``on_leader`` here, feed requests with
    `on_request`, and after every input call `pump` and send `take_replies`."""

    def __init__(
        self,
        machine: MetadataMachine,
        *,
        pending_max: int = PENDING_MAX,
        new_cluster_id: Callable[[], str] | None = None,
    ) -> None:
        self.machine = machine
        self._new_cluster_id = new_cluster_id
        self._cluster_epoch = -1  # the epoch whose leadership last checked for a cluster id
        self._node: QuorumNode | None = None
        self._pending_max = pending_max
        self._queued: list[tuple[Token | None, bytes, int]] = []
        self._proposals: dict[int, _Proposal] = {}
        self._reads: list[_Read] = []
        self._watches: list[_Watch] = []
        self._replies: list[tuple[Token, Reply]] = []
        self._sessions: dict[int, _BrokerSession] = {}
        self._expiring: set[tuple[int, int]] = set()  # (broker, incarnation) proposed
        self._ready_epoch = -1
        self.counters: dict[str, int] = {}

    def attach(self, node: QuorumNode) -> None:
        """The node this frontend serves (once, before any request)."""
        self._node = node

    @property
    def node(self) -> QuorumNode:
        """The attached node."""
        node = self._node
        if node is None:
            raise RuntimeError("QuorumFrontend.attach was not called")
        return node

    def _count(self, name: str, n: int = 1) -> None:
        self.counters[name] = self.counters.get(name, 0) + n

    # ------------------------------------------------------------------ inputs

    def leader_epoch(self) -> int | None:
        """The epoch this node leads, or None."""
        state = self.node.core.state
        return state.epoch if isinstance(state, Leader) else None

    def on_request(self, token: Token, request: Request, deadline_ms: int, now_ms: int) -> None:
        """A client request; its reply comes out of `take_replies` (maybe at once)."""
        del now_ms
        epoch = self.leader_epoch()
        if epoch is None:
            self._reply(token, ReplyNotLeader(self.node.core.state.leader_id))
            return
        if isinstance(request, Barrier | InitCluster) or not isinstance(
            request, COMMANDS + QUERIES
        ):
            error = ValueError(f"not a request: {type(request).__name__}")
            self._reply(token, ReplyError(error))
            return
        if isinstance(request, COMMANDS):
            if len(self._queued) + len(self._proposals) >= self._pending_max:
                self._reply(token, ReplyError(_busy("proposals")))
                return
            self._queued.append((token, raft_codec.dumps(request), deadline_ms))
            return
        if len(self._reads) + len(self._watches) >= self._pending_max:
            self._reply(token, ReplyError(_busy("reads")))
            return
        if isinstance(request, Watch):
            self._watches.append(_Watch(token, request, epoch, deadline_ms))
        else:
            needed = self.node.core.log.end_offset
            query = cast(Query, request)  # not a command: one of QUERIES
            self._reads.append(_Read(token, query, epoch, needed, deadline_ms))

    def on_apply(self, entry: Entry, result: object) -> None:
        """``RaftNode.on_apply``: answer the proposal that sat at this offset, if any, and fail
        every proposal of an older epoch: the committed log holds epoch ``entry.epoch`` here,
        and a log's epochs never decrease, so none of them can ever commit."""
        proposal = self._proposals.pop(entry.offset, None)
        oldest = next(iter(self._proposals.values()), None)  # proposals come in epoch order
        stale = []
        if oldest is not None and oldest.epoch < entry.epoch:
            stale = [o for o, p in self._proposals.items() if p.epoch < entry.epoch]
        for offset in stale:
            lost = self._proposals.pop(offset)
            if lost.token is not None:
                self._reply(lost.token, ReplyNotLeader(NO_LEADER))
        if proposal is None or proposal.token is None:
            return
        if entry.epoch != proposal.epoch:
            self._reply(proposal.token, ReplyNotLeader(NO_LEADER))
        elif isinstance(result, BaseException):
            self._reply(proposal.token, ReplyError(result))
        else:
            self._reply(proposal.token, ReplyOk(result))

    def on_leader(self, known: LeaderAndEpoch) -> None:
        """``RaftNode.on_leader``: reads, watches and not yet proposed writes of an epoch this
        node no longer leads fail with NotLeader (proposals wait for their offset). Called
        before `attach` too: ``RaftNode.open`` reports the leader a restarted node knows (a
        follower's, say) while it starts, when no request can be waiting yet."""
        if self._node is None:
            invariant(not (self._reads or self._watches or self._queued), "requests before attach")
            return
        epoch = self.leader_epoch()
        hint = known.leader_id
        for read in self._reads:
            if read.epoch != epoch:
                self._reply(read.token, ReplyNotLeader(hint))
        for watch in self._watches:
            if watch.epoch != epoch:
                self._reply(watch.token, ReplyNotLeader(hint))
        self._reads = [r for r in self._reads if r.epoch == epoch]
        self._watches = [w for w in self._watches if w.epoch == epoch]
        if epoch is None:
            for token, _, _ in self._queued:
                if token is not None:
                    self._reply(token, ReplyNotLeader(hint))
            self._queued = []
            self._sessions.clear()
            self._expiring.clear()
            self._ready_epoch = -1

    # ------------------------------------------------------------------ the work

    def pump(self, now_ms: int) -> None:
        """Serve what is ready, decide session expiries, time out what waited too long, and
        propose the queued writes (plus a barrier if a read needs one)."""
        self._time_out(now_ms)
        epoch = self.leader_epoch()
        if epoch is not None and self._leader_ready():
            self._track_sessions(epoch, now_ms)
            self._serve_reads(now_ms)
        if epoch is not None:
            self._maybe_name_cluster(epoch)
            self._serve_watches()
            self._propose(now_ms)

    def _maybe_name_cluster(self, epoch: int) -> None:
        """Once per epoch led: an `InitCluster` ahead of every queued write if the image has
        no cluster id (the module docstring)."""
        if self._cluster_epoch == epoch or self._new_cluster_id is None:
            return
        self._cluster_epoch = epoch
        if self.machine.cluster_id is None:
            command = InitCluster(cluster_id=self._new_cluster_id())
            self._queued.insert(0, (None, raft_codec.dumps(command), _NEVER))
            self._count("cluster_ids_proposed")

    def _leader_ready(self) -> bool:
        """This leader committed its epoch's first record and applied everything below its HW:
        its image holds every committed write."""
        node = self.node
        state = node.core.state
        if not isinstance(state, Leader):
            return False
        hw = node.core.high_watermark
        return hw > state.epoch_start_offset and node.applied_offset >= hw

    def _serve_reads(self, now_ms: int) -> None:
        applied = self.node.applied_offset
        waiting = []
        for read in self._reads:
            if read.needed_offset >= applied:
                waiting.append(read)
                continue
            outcome = self.machine.query(read.query)
            if isinstance(read.query, Heartbeat) and outcome is SessionState.CONNECTED:
                self._heartbeat(read.query, now_ms)
            self._reply(read.token, _reply_of(outcome))
        self._reads = waiting

    def _serve_watches(self) -> None:
        waiting = []
        for watch in self._watches:
            if self.machine.has_changes_from(watch.watch.seq):
                self._reply(watch.token, _reply_of(self.machine.query(watch.watch)))
            else:
                waiting.append(watch)
        self._watches = waiting

    def _time_out(self, now_ms: int) -> None:
        for offset, proposal in list(self._proposals.items()):
            if proposal.deadline_ms <= now_ms:
                del self._proposals[offset]
                if proposal.token is not None:
                    self._reply(proposal.token, ReplyUnknown("not committed in time"))
        keep = []
        for read in self._reads:
            if read.deadline_ms <= now_ms:
                self._reply(read.token, ReplyUnknown("read barrier not committed in time"))
            else:
                keep.append(read)
        self._reads = keep
        waiting = []
        for watch in self._watches:
            if watch.deadline_ms <= now_ms:
                self._reply(watch.token, ReplyOk(ChangeBatch((), watch.watch.seq)))
            else:
                waiting.append(watch)
        self._watches = waiting

    def _propose(self, now_ms: int) -> None:
        node = self.node
        end_after = node.core.log.end_offset + len(self._queued)
        if any(read.needed_offset >= end_after for read in self._reads):
            self._queued.append((None, raft_codec.dumps(Barrier()), _NEVER))
            self._count("barriers")
        limit = node.core.config.batch_bytes_max - _BATCH_OVERHEAD_BYTES
        while self._queued:
            batch: list[tuple[Token | None, bytes, int]] = []
            size = 0
            for item in self._queued:
                item_bytes = len(item[1]) + _RECORD_OVERHEAD_BYTES
                if batch and size + item_bytes > limit:
                    break
                batch.append(item)
                size += item_bytes
            del self._queued[: len(batch)]
            if size > limit:  # one command alone is too large
                token = batch[0][0]
                if token is not None:
                    self._reply(token, ReplyError(RecordBatchTooLargeError(size, limit)))
                continue
            result = node.propose([value for _, value, _ in batch], now_ms)
            if result.error is not ErrorCode.NONE:
                for token, _, _ in batch:
                    if token is not None:
                        self._reply(token, ReplyNotLeader(result.leader_id))
                continue
            self._count("proposed_records", len(batch))
            for i, (token, _, deadline_ms) in enumerate(batch):
                proposal = _Proposal(token, result.epoch, deadline_ms)
                self._proposals[result.base_offset + i] = proposal

    # ------------------------------------------------------------------ sessions

    def _track_sessions(self, epoch: int, now_ms: int) -> None:
        """Deadlines for the live registrations (fresh ones for what this leader has not seen
        yet, all of them when it has just become ready), and expiries for passed ones."""
        if self._ready_epoch != epoch:
            self._ready_epoch = epoch
            self._sessions.clear()
            self._expiring.clear()
        live = self.machine.registrations()
        for broker_id in [b for b in self._sessions if b not in live]:
            del self._sessions[broker_id]
        current = {(b, r.broker.incarnation_epoch) for b, r in live.items()}
        self._expiring &= current
        for broker_id, registration in live.items():
            incarnation = registration.broker.incarnation_epoch
            session = self._sessions.get(broker_id)
            if session is None or session.incarnation_epoch != incarnation:
                deadline_ms = now_ms + registration.session_timeout_ms
                self._sessions[broker_id] = session = _BrokerSession(incarnation, deadline_ms)
            key = (broker_id, incarnation)
            if session.deadline_ms <= now_ms and key not in self._expiring:
                command = ExpireSession(broker_id=broker_id, incarnation_epoch=incarnation)
                self._queued.append((None, raft_codec.dumps(command), _NEVER))
                self._expiring.add(key)
                self._count("expiries_proposed")

    def _heartbeat(self, heartbeat: Heartbeat, now_ms: int) -> None:
        registration = self.machine.registrations().get(heartbeat.broker_id)
        if registration is None:
            return
        self._sessions[heartbeat.broker_id] = _BrokerSession(
            heartbeat.incarnation_epoch, now_ms + registration.session_timeout_ms
        )

    # ------------------------------------------------------------------ outputs

    def _reply(self, token: Token, reply: Reply) -> None:
        self._replies.append((token, reply))

    def take_replies(self) -> list[tuple[Token, Reply]]:
        """Replies produced since the last call, in order."""
        replies, self._replies = self._replies, []
        return replies

    @property
    def has_queued(self) -> bool:
        """Writes wait to be proposed (the shell calls `pump` again)."""
        return bool(self._queued)

    def next_deadline_ms(self) -> int:
        """When `pump` next has something to do by time alone."""
        deadlines = [_NEVER]
        deadlines += [s.deadline_ms for s in self._sessions.values()]
        deadlines += [p.deadline_ms for p in self._proposals.values()]
        deadlines += [r.deadline_ms for r in self._reads]
        deadlines += [w.deadline_ms for w in self._watches]
        return min(deadlines)


def _reply_of(outcome: object) -> Reply:
    return ReplyError(outcome) if isinstance(outcome, BaseException) else ReplyOk(outcome)


def _busy(what: str) -> CoordinatorUnavailableError:
    return CoordinatorUnavailableError(f"the quorum node holds too many pending {what}")
