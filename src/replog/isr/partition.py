"""``Partition``: one replica of one partition, as a sans-IO state machine.

Theory of operation. A broker holds one ``Partition`` per replica it hosts. The driver feeds it
inputs (``become_leader``, ``append_as_leader``, ``on_fetch``, ``on_alter_partition_response``,
``on_tick``, ...) with the current time as ``now_ms``, and acts on what comes back: a value
returned directly, or queued for ``take_ready()`` (AlterPartition writes, produce completions).
Fetches are answered at once; long polls wait in the broker's request layer. It never reads a
clock, opens a socket or starts a thread.

As **leader** it keeps the sets of Kafka's original replication design: AR (``assigned``), ISR
(``isr``, the committed one, and ``maximal_isr`` while a change is pending), CUR (``catching_up`` =
AR - ISR) and RAR (``reassigning``). The high watermark is the minimum LEO over the maximal ISR and
the caught-up eligible replicas, never advancing while the ISR is below min ISR (KAFKA-15583). In
``FSYNC`` mode the leader's own contribution is its flushed offset. ISR changes are conditional
writes on the partition epoch; one at a time.

As **follower** it delegates to ``FollowerFetcher``: fetch from the LEO with the last fetched
epoch, truncate on ``diverging_epoch``, never to the local HW. Every role change, ISR change
and truncation is reported to the state-change sink.
"""

from __future__ import annotations

import attrs

from replog.errors import ErrorCode, invariant, unreachable
from replog.isr.config import Acks, DurabilityMode, PartitionConfig
from replog.isr.follower import FollowerAction, FollowerFetcher, FollowerOutcome
from replog.isr.isr_state import (
    ALTER_REJECTED,
    ALTER_STALE,
    Assignment,
    CommittedIsr,
    IsrState,
    PendingExpandIsr,
    PendingShrinkIsr,
    keeps_leader,
)
from replog.isr.leader_fetch import check_fetch_epoch, check_follower_fetch, read_for_fetch
from replog.isr.messages import (
    PartitionFetchRequest,
    PartitionFetchResponse,
    PartitionReady,
    ProduceResult,
)
from replog.isr.purgatory import DelayedProduce, Purgatory
from replog.isr.replica import ReplicaRole, ReplicaState
from replog.isr.replica_log import ReplicaLog
from replog.isr.state_changes import PartitionAt, acted_on, proposed
from replog.metadata.types import AlterPartition, AlterPartitionResult, IsrMember
from replog.state_change import StateChangeKind as Kind
from replog.state_change import StateChangeSink, discard_state_change
from replog.topics import TopicPartition

__all__ = ["Partition", "ReplicaRole"]


@attrs.define
class Partition:
    """One replica of ``topic``-``partition`` on broker ``broker_id``, driving ``log``."""

    topic: str
    partition: int
    broker_id: int
    log: ReplicaLog
    config: PartitionConfig = attrs.field(factory=PartitionConfig)
    #: this broker's incarnation (KIP-903), sent with fetches and in AlterPartition
    broker_epoch: int = -1
    state_change_sink: StateChangeSink = discard_state_change

    role: ReplicaRole = attrs.field(init=False, default=ReplicaRole.OFFLINE)
    leader_id: int = attrs.field(init=False, default=-1)
    leader_epoch: int = attrs.field(init=False, default=-1)
    partition_epoch: int = attrs.field(init=False, default=-1)
    assignment: Assignment = attrs.field(init=False, factory=lambda: Assignment(()))
    isr_state: IsrState = attrs.field(init=False, factory=lambda: CommittedIsr(frozenset()))
    #: the leader's LEO when the current leader epoch began (None unless leader)
    leader_epoch_start_offset: int | None = attrs.field(init=False, default=None)
    #: the latest ``now_ms`` any input carried
    clock_ms: int = attrs.field(init=False, default=0)
    _replicas: dict[int, ReplicaState] = attrs.field(init=False, factory=dict)
    _broker_epochs: dict[int, int] = attrs.field(init=False, factory=dict)
    _ineligible: frozenset[int] = attrs.field(init=False, default=frozenset())
    _fetcher: FollowerFetcher | None = attrs.field(init=False, default=None)
    _produces: Purgatory[DelayedProduce] = attrs.field(init=False)
    _out_alter: list[AlterPartition] = attrs.field(init=False, factory=list)
    _out_produce: list[ProduceResult] = attrs.field(init=False, factory=list)

    def __attrs_post_init__(self) -> None:
        capacity = self.config.delayed_operations_max
        self._produces = Purgatory(capacity, watch_key=lambda op: op.required_offset)

    # ------------------------------------------------------------------ AR, ISR, CUR, RAR

    @property
    def assigned(self) -> tuple[int, ...]:
        """AR: the assigned replicas, in preference order."""
        return self.assignment.replicas

    @property
    def isr(self) -> frozenset[int]:
        """ISR: the committed in-sync replicas (what the coordinator stored)."""
        return self.isr_state.isr

    @property
    def maximal_isr(self) -> frozenset[int]:
        """The ISR used for the HW and acks=all while a change is pending (KIP-497)."""
        return self.isr_state.maximal_isr

    @property
    def catching_up(self) -> frozenset[int]:
        """CUR = AR - ISR."""
        return frozenset(self.assignment.replicas) - self.isr

    @property
    def reassigning(self) -> frozenset[int]:
        """RAR: the replicas being reassigned to (empty when no reassignment runs)."""
        return self.assignment.target_replicas

    @property
    def pending_isr_change(self) -> AlterPartition | None:
        """The AlterPartition request in flight, if any."""
        state = self.isr_state
        return None if isinstance(state, CommittedIsr) else state.request

    @property
    def is_leader(self) -> bool:
        """True while this replica leads the partition."""
        return self.role is ReplicaRole.LEADER

    @property
    def high_watermark(self) -> int:
        """The local HW."""
        return self.log.high_watermark

    @property
    def effective_min_isr(self) -> int:
        """min(min.insync.replicas, number of assigned replicas)."""
        return max(1, min(self.config.min_insync_replicas, len(self.assignment.replicas)))

    @property
    def is_under_min_isr(self) -> bool:
        """The committed ISR is smaller than the effective min ISR (acks=all refused, HW frozen)."""
        return len(self.isr) < self.effective_min_isr

    def replica_state(self, broker_id: int) -> ReplicaState | None:
        """The leader's view of a remote replica (None if unknown or not leader)."""
        return self._replicas.get(broker_id)

    # ------------------------------------------------------------------ role changes

    def become_leader(
        self,
        leader_epoch: int,
        isr: frozenset[int] | set[int] | tuple[int, ...],
        assigned: tuple[int, ...] | list[int],
        now_ms: int,
        *,
        partition_epoch: int | None = None,
        adding: frozenset[int] = frozenset(),
        removing: frozenset[int] = frozenset(),
        broker_epochs: dict[int, int] | None = None,
    ) -> bool:
        """Lead at ``leader_epoch`` (or apply new metadata at the current one).

        A new epoch is recorded in the epoch cache at the current LEO even if nothing is ever
        appended in it (KAFKA-7415), and remote replica state is reset: a broker that was not
        leader forgets every follower LEO. A pending ISR change gives way to the given committed
        ISR only when the metadata is newer than the partition epoch it was proposed against.
        Returns False (and changes nothing) for stale metadata.
        """
        now_ms = self._observe(now_ms)
        isr_set, replicas = frozenset(isr), tuple(assigned)
        invariant(self.broker_id in replicas, f"leader {self.broker_id} not in AR {replicas}")
        invariant(self.broker_id in isr_set, f"leader {self.broker_id} not in ISR {set(isr_set)}")
        invariant(isr_set <= set(replicas), f"ISR {set(isr_set)} not within AR {replicas}")
        if self._is_stale(leader_epoch, partition_epoch):
            self._record(
                Kind.BECOME_LEADER,
                f"stale epoch {leader_epoch}",
                error=ErrorCode.FENCED_LEADER_EPOCH,
                epoch=leader_epoch,
            )
            return False
        is_new_leader = self.role is not ReplicaRole.LEADER
        is_new_epoch = is_new_leader or leader_epoch > self.leader_epoch
        self.assignment = Assignment(replicas, frozenset(adding), frozenset(removing))
        self._sync_replica_states()
        if is_new_epoch or not self._keeps_pending_change(partition_epoch):
            self.isr_state = CommittedIsr(isr_set)
        if partition_epoch is not None:
            self.partition_epoch = partition_epoch
        if broker_epochs is not None:
            self._broker_epochs.update(broker_epochs)
        self._fetcher = None
        self.role, self.leader_id = ReplicaRole.LEADER, self.broker_id
        if is_new_epoch:
            start_offset = self.log.log_end_offset
            self.log.assign_epoch_start_offset(leader_epoch, start_offset)
            for replica in self._replicas.values():
                replica.reset(
                    now_ms=now_ms,
                    leader_log_end_offset=start_offset,
                    is_new_leader=is_new_leader,
                    in_sync=replica.broker_id in isr_set,
                )
            self.leader_epoch, self.leader_epoch_start_offset = leader_epoch, start_offset
        self._record(
            Kind.BECOME_LEADER if is_new_epoch else Kind.UPDATE_PARTITION,
            f"isr={sorted(isr_set)} ar={list(replicas)} leo={self.log.log_end_offset} "
            f"hw={self.log.high_watermark}",
        )
        # The ISR may be down to min ISR: move the HW.
        self.maybe_increment_leader_hw(now_ms)
        return True

    def become_follower(
        self,
        leader: int,
        leader_epoch: int,
        now_ms: int | None = None,
        *,
        isr: frozenset[int] | None = None,
        assigned: tuple[int, ...] | None = None,
        partition_epoch: int | None = None,
    ) -> bool:
        """Follow ``leader`` (-1: none known) at ``leader_epoch``.

        Does **not** truncate to the local HW (the KIP-101 loss): the next fetch goes out from
        the LEO with the last fetched epoch and the leader says where the logs diverge. Pending
        produces and fetches end with ``NOT_LEADER_OR_FOLLOWER``. Returns False for stale
        metadata or when nothing changed.
        """
        now_ms = self._observe(now_ms)
        invariant(leader != self.broker_id, f"broker {leader} cannot follow itself")
        if self._is_stale(leader_epoch, partition_epoch):
            self._record(
                Kind.BECOME_FOLLOWER,
                f"stale epoch {leader_epoch}",
                error=ErrorCode.FENCED_LEADER_EPOCH,
                epoch=leader_epoch,
            )
            return False
        if assigned is not None:
            self.assignment = Assignment(tuple(assigned))
        if isr is not None:
            self.isr_state = CommittedIsr(frozenset(isr))
        if partition_epoch is not None:
            self.partition_epoch = partition_epoch
        if (
            self.role is ReplicaRole.FOLLOWER
            and self.leader_id == leader
            and self.leader_epoch == leader_epoch
        ):
            return False
        self.role, self.leader_id, self.leader_epoch = ReplicaRole.FOLLOWER, leader, leader_epoch
        self.leader_epoch_start_offset = None
        self.isr_state = CommittedIsr(self.isr_state.isr)
        self._replicas.clear()
        self._fetcher = FollowerFetcher(leader, leader_epoch) if leader >= 0 else None
        for produce in self._produces.drain():
            self._out_produce.append(
                ProduceResult(
                    produce.request_id, produce.base_offset, ErrorCode.NOT_LEADER_OR_FOLLOWER
                )
            )
        self._record(
            Kind.BECOME_FOLLOWER,
            f"leader={leader} leo={self.log.log_end_offset} hw={self.log.high_watermark}",
        )
        return True

    def update_replica_eligibility(
        self, ineligible: frozenset[int], broker_epochs: dict[int, int] | None = None
    ) -> None:
        """New broker metadata: fenced or shutting-down brokers (``ineligible``) may neither
        join the ISR nor hold the HW back as catching-up replicas (KIP-841); ``broker_epochs``
        are the registered incarnations, used to reject stale fetches (KIP-903)."""
        self._ineligible = frozenset(ineligible)
        if broker_epochs is not None:
            self._broker_epochs.update(broker_epochs)

    # ------------------------------------------------------------------ produce

    def append_as_leader(
        self,
        batch: bytes,
        acks: int,
        now_ms: int,
        *,
        request_id: int = 0,
        timeout_ms: int | None = None,
    ) -> ProduceResult | None:
        """Append a producer's batch; the result now, or None if it waits in purgatory.

        acks=all is refused before anything is written when the committed ISR is below min ISR
        (``NOT_ENOUGH_REPLICAS``); otherwise it waits until the HW passes the batch (result via
        ``take_ready()``) or ``timeout_ms`` passes (``REQUEST_TIMED_OUT``).
        """
        now_ms = self._observe(now_ms)
        if not self.is_leader:
            return ProduceResult(request_id, -1, ErrorCode.NOT_LEADER_OR_FOLLOWER)
        if acks not in (Acks.ALL, Acks.NONE, Acks.LEADER):
            return ProduceResult(request_id, -1, ErrorCode.INVALID_REQUIRED_ACKS)
        if acks == Acks.ALL and self.is_under_min_isr:
            return ProduceResult(request_id, -1, ErrorCode.NOT_ENOUGH_REPLICAS)
        if acks == Acks.ALL and self._produces.is_full:
            # Bounded purgatory: refuse before writing rather than queue without limit.
            return ProduceResult(request_id, -1, ErrorCode.REQUEST_TIMED_OUT)
        leo_before = self.log.log_end_offset
        appended = self.log.append_as_leader(batch, self.leader_epoch)
        base_offset, end_offset = appended.first_offset, appended.last_offset + 1
        append_time_ms = -1
        if appended.duplicate:
            # A retry of a batch already in the log: answer with where it was written, once
            # the HW passes it (for acks=all), as for the original.
            invariant(self.log.log_end_offset == leo_before, "a duplicate was appended")
            append_time_ms = appended.max_timestamp
        else:
            if base_offset != leo_before or end_offset != self.log.log_end_offset:
                unreachable(f"append at {base_offset}..{end_offset} from LEO {leo_before}")
            self.maybe_increment_leader_hw(now_ms)
        if acks != Acks.ALL:
            return ProduceResult(request_id, base_offset, ErrorCode.NONE, append_time_ms)
        timeout_ms = self.config.request_timeout_ms if timeout_ms is None else timeout_ms
        pending = DelayedProduce(
            request_id, base_offset, end_offset, now_ms + timeout_ms, append_time_ms
        )
        result = self._check_produce(pending)
        if result is not None:
            return result
        self._produces.add(pending, pending.deadline_ms)
        return None

    def _check_produce(self, produce: DelayedProduce) -> ProduceResult | None:
        """Kafka's checkEnoughReplicasReachOffset: None while the HW is below the batch."""
        if not self.is_leader:
            code = ErrorCode.NOT_LEADER_OR_FOLLOWER
        elif self.log.high_watermark < produce.required_offset:
            return None
        elif len(self.maximal_isr) >= self.effective_min_isr:
            code = ErrorCode.NONE
        else:
            code = ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND
        return ProduceResult(
            produce.request_id, produce.base_offset, code, produce.log_append_time_ms
        )

    # ------------------------------------------------------------------ high watermark

    def maybe_increment_leader_hw(self, now_ms: int | None = None) -> bool:
        """Advance the HW to the minimum LEO over the maximal ISR and the caught-up eligible
        replicas; never under min ISR, never past the leader's (durable) LEO. Returns whether
        it moved; a move completes delayed produces and consumer fetches."""
        now_ms = self._observe(now_ms)
        if not self.is_leader or self.is_under_min_isr:
            return False
        leader_end_offset = self.log.log_end_offset
        new_hw = self._leader_durable_end_offset()
        maximal = self.maximal_isr
        for broker_id in maximal - {self.broker_id}:
            if broker_id not in self._replicas:
                return False  # an ISR member we know nothing of holds the HW
        lag_ms_max = self.config.replica_lag_ms_max
        for replica in self._replicas.values():
            if replica.log_end_offset >= new_hw:
                continue
            if replica.broker_id in maximal or (
                replica.is_caught_up(leader_end_offset, now_ms, lag_ms_max)
                and self._is_isr_eligible(replica)
            ):
                new_hw = replica.log_end_offset
        old_hw = self.log.high_watermark
        if new_hw <= old_hw:
            return False
        invariant(new_hw <= leader_end_offset, f"HW {new_hw} past LEO {leader_end_offset}")
        moved = self.log.maybe_increment_high_watermark(new_hw)
        invariant(self.log.high_watermark >= old_hw, "leader HW went backwards")
        if moved:
            self._on_high_watermark_moved()
        return moved

    def on_log_flushed(self, now_ms: int) -> bool:
        """The driver flushed the leader's log (FSYNC mode: more of it counts toward the HW)."""
        return self.maybe_increment_leader_hw(now_ms)

    def _leader_durable_end_offset(self) -> int:
        end_offset = self.log.log_end_offset
        if self.config.durability is DurabilityMode.FSYNC:
            return min(self.log.recovery_point, end_offset)
        return end_offset

    def _on_high_watermark_moved(self) -> None:
        for produce in self._produces.pop_watched_through(self.log.high_watermark):
            result = self._check_produce(produce)
            invariant(result is not None, "a produce at or below the HW must complete")
            if result is not None:
                self._out_produce.append(result)

    # ------------------------------------------------------------------ ISR changes

    def maybe_shrink_isr(self, now_ms: int) -> bool:
        """Drop ISR members not caught up within ``replica_lag_ms_max``. Returns True if an ISR
        change was proposed (it commits only when the coordinator accepts the partition
        epoch). A follower whose LEO equals the leader's is never dropped (idle partition)."""
        now_ms = self._observe(now_ms)
        if not self.is_leader or self.isr_state.is_inflight:
            return False
        leader_end_offset = self.log.log_end_offset
        lag_ms_max = self.config.replica_lag_ms_max
        leaving = frozenset(
            broker_id
            for broker_id in self.isr - {self.broker_id}
            if (replica := self._replicas.get(broker_id)) is None
            or not replica.is_caught_up(leader_end_offset, now_ms, lag_ms_max)
        )
        if not leaving:
            return False
        committed = CommittedIsr(self.isr)
        request = self._alter_partition_request(self.isr - leaving)
        self.isr_state = PendingShrinkIsr(self.isr, leaving, request, committed)
        self._out_alter.append(request)
        self._proposed(f"shrink: leaving={sorted(leaving)} isr={sorted(self.isr)}")
        return True

    def maybe_expand_isr(self, broker_id: int, now_ms: int) -> bool:
        """Propose adding ``broker_id`` when its LEO >= HW and >= the start of the current
        leader epoch (KAFKA-7128). It joins the maximal ISR at once."""
        now_ms = self._observe(now_ms)
        replica = self._replicas.get(broker_id)
        if (
            not self.is_leader
            or self.isr_state.is_inflight
            or replica is None
            or broker_id in self.isr
            or not self._is_isr_eligible(replica)
            or self.leader_epoch_start_offset is None
        ):
            return False
        end_offset = replica.log_end_offset
        if end_offset < self.log.high_watermark or end_offset < self.leader_epoch_start_offset:
            return False
        committed = CommittedIsr(self.isr)
        request = self._alter_partition_request(self.isr | {broker_id})
        self.isr_state = PendingExpandIsr(self.isr, broker_id, request, committed)
        self._out_alter.append(request)
        self._proposed(f"expand: joining={broker_id} isr={sorted(self.isr)}")
        return True

    def on_alter_partition_response(
        self, request: AlterPartition, result: AlterPartitionResult, now_ms: int
    ) -> bool:
        """Apply the controller's answer to ``request``. Returns True if an ISR committed.

        Accepted: commit the returned ISR and partition epoch, then maybe advance the HW.
        Rejected (``OPERATION_NOT_ATTEMPTED``, ``INELIGIBLE_REPLICA``): revert to the last
        committed ISR. ``INVALID_UPDATE_VERSION`` with a newer state that keeps this leader (an
        ELR change moved the partition epoch): commit that state and propose again at once.
        Otherwise fenced or stale: stay pending until new metadata (``become_leader``). Other
        errors: the request is queued again. Answers to anything but the change in flight are
        ignored (late or duplicated responses)."""
        now_ms = self._observe(now_ms)
        state = self.isr_state
        if not self.is_leader or isinstance(state, CommittedIsr) or state.request != request:
            return False
        code = result.error
        if code is ErrorCode.NONE:
            if result.leader_epoch != self.leader_epoch or self._is_stale(
                result.leader_epoch, result.partition_epoch
            ):
                return False
            committed_isr = frozenset(result.isr)
            invariant(
                committed_isr <= set(self.assignment.replicas),
                f"committed ISR {set(committed_isr)} not within AR {self.assigned}",
            )
            self._commit(committed_isr, result.partition_epoch, "", now_ms)
            return True
        if code in ALTER_REJECTED:
            self.isr_state = state.last_committed
            self._record(
                Kind.ALTER_PARTITION, f"reverted: isr={sorted(self.isr)}", error=code, leader=True
            )
            self.maybe_increment_leader_hw(now_ms)
        elif code is ErrorCode.INVALID_UPDATE_VERSION and keeps_leader(
            result, self.broker_id, self.leader_epoch, self.partition_epoch, self.assigned
        ):
            # another change (ELR) moved the partition epoch: take that state, propose again
            self._commit(frozenset(result.isr), result.partition_epoch, "newer epoch: ", now_ms)
            if isinstance(state, PendingExpandIsr):
                self.maybe_expand_isr(state.joining, now_ms)
            else:
                self.maybe_shrink_isr(now_ms)
            return True
        elif code in ALTER_STALE:
            self._record(Kind.ALTER_PARTITION, "waiting for metadata", error=code, leader=True)
        else:
            self._out_alter.append(request)
        return False

    def _commit(self, isr: frozenset[int], partition_epoch: int, note: str, now_ms: int) -> None:
        self.isr_state, self.partition_epoch = CommittedIsr(isr), partition_epoch
        self._record(Kind.ALTER_PARTITION, f"{note}isr={sorted(isr)}", leader=True)
        self.maybe_increment_leader_hw(now_ms)

    def _alter_partition_request(self, new_isr: frozenset[int]) -> AlterPartition:
        members = [b for b in self.assignment.replicas if b in new_isr]
        return AlterPartition(
            topic=self.topic,
            partition=self.partition,
            leader_id=self.broker_id,
            leader_epoch=self.leader_epoch,
            partition_epoch=self.partition_epoch,
            new_isr=tuple(IsrMember(b, self._member_broker_epoch(b)) for b in members),
        )

    def _member_broker_epoch(self, broker_id: int) -> int:
        replica = self._replicas.get(broker_id)
        own = broker_id == self.broker_id
        return self.broker_epoch if own else -1 if replica is None else replica.broker_epoch

    def _is_isr_eligible(self, replica: ReplicaState) -> bool:
        """Not fenced or shutting down, and fetching with the registered broker epoch."""
        if replica.broker_id in self._ineligible:
            return False
        registered = self._broker_epochs.get(replica.broker_id)
        return (
            replica.broker_epoch == -1 or registered is None or registered == replica.broker_epoch
        )

    # ------------------------------------------------------------------ leader: fetches

    def on_fetch(self, request: PartitionFetchRequest, now_ms: int) -> PartitionFetchResponse:
        """Serve a follower's or consumer's fetch now, with whatever there is (``max_wait_ms``
        is the caller's: the broker's request layer keeps long polls and reads again).

        Fenced by leader epoch (KIP-320). A follower whose last fetched epoch does not match
        gets ``diverging_epoch`` and nothing else. Otherwise the follower's LEO and caught-up
        time are updated, the ISR may expand and the HW may advance; the response carries the
        HW, log start and LEO sampled before the read, and a slice to send.
        """
        now_ms = self._observe(now_ms)
        error = check_fetch_epoch(self.role, self.leader_epoch, request)
        replica: ReplicaState | None = None
        if error is ErrorCode.NONE and request.is_from_follower:
            replica = self._replicas.get(request.replica_id)
            registered = self._broker_epochs.get(request.replica_id)
            error = check_follower_fetch(request, replica, registered)
        if error is ErrorCode.NONE and not request.is_from_follower and not self.hw_is_current:
            error = ErrorCode.OFFSET_NOT_AVAILABLE
        if error is not ErrorCode.NONE:
            return PartitionFetchResponse(
                request.request_id, error, request.fetch_offset, replica_id=request.replica_id
            )
        leader_end_offset = self.log.log_end_offset
        response = read_for_fetch(self.log, request)
        if response.error_code is not ErrorCode.NONE or response.diverging_epoch is not None:
            return response
        if replica is not None:
            self._update_follower_fetch_state(replica, request, leader_end_offset, now_ms)
        return response

    @property
    def hw_is_current(self) -> bool:
        """Whether this leader's HW may be shown to consumers. A new leader starts from its own
        HW, which can lag the one its predecessor already showed; until the HW reaches the
        start offset of the new epoch it is not authoritative, and consumers get the retriable
        OFFSET_NOT_AVAILABLE instead of a HW that would move backwards. (A cleanly elected
        leader held every committed record, so its epoch start is at or past the old HW.)"""
        start = self.leader_epoch_start_offset
        return not self.is_leader or start is None or self.log.high_watermark >= start

    def _update_follower_fetch_state(
        self,
        replica: ReplicaState,
        request: PartitionFetchRequest,
        leader_end_offset: int,
        now_ms: int,
    ) -> None:
        moved = replica.update_fetch_state(
            fetch_offset=request.fetch_offset,
            leader_log_end_offset=leader_end_offset,
            fetch_ms=now_ms,
            log_start_offset=request.log_start_offset,
            broker_epoch=request.broker_epoch,
        )
        self.maybe_expand_isr(replica.broker_id, now_ms)
        if moved:
            self.maybe_increment_leader_hw(now_ms)

    # ------------------------------------------------------------------ time

    def on_tick(self, now_ms: int) -> None:
        """Expire delayed produces (they end ``REQUEST_TIMED_OUT``). Call it by
        ``next_deadline_ms()``."""
        now_ms = self._observe(now_ms)
        for produce in self._produces.pop_expired(now_ms):
            result = self._check_produce(produce)
            if result is None:
                result = ProduceResult(
                    produce.request_id, produce.base_offset, ErrorCode.REQUEST_TIMED_OUT
                )
            self._out_produce.append(result)

    def next_deadline_ms(self) -> int | None:
        """When ``on_tick`` next has something to expire (None: nothing pending)."""
        return self._produces.next_deadline_ms()

    @property
    def has_ready(self) -> bool:
        """Whether ``take_ready`` has anything to give (checked after every produce)."""
        return bool(self._out_alter or self._out_produce)

    def take_ready(self) -> PartitionReady:
        """Drain what the driver must do: AlterPartition writes and produce results."""
        ready = PartitionReady(tuple(self._out_alter), tuple(self._out_produce))
        self._out_alter.clear()
        self._out_produce.clear()
        return ready

    # ------------------------------------------------------------------ follower side

    def fetch_request(self) -> PartitionFetchRequest | None:
        """The next fetch to send to the leader (None unless following a known leader).
        In FSYNC mode, ``requires_flush`` tells the driver to flush the log before sending."""
        if self.role is not ReplicaRole.FOLLOWER or self._fetcher is None:
            return None
        return self._fetcher.fetch_request(self.log, self.broker_id, self.broker_epoch, self.config)

    def on_fetch_response(self, response: PartitionFetchResponse, now_ms: int) -> FollowerOutcome:
        """Apply the leader's answer to the outstanding fetch (see ``FollowerFetcher``)."""
        now_ms = self._observe(now_ms)
        if self.role is not ReplicaRole.FOLLOWER or self._fetcher is None:
            return FollowerOutcome(FollowerAction.IGNORED)
        outcome = self._fetcher.on_fetch_response(self.log, response, now_ms)
        if outcome.action in (FollowerAction.TRUNCATED, FollowerAction.RESTARTED):
            self._record(
                Kind.TRUNCATE_LOG,
                f"to={outcome.truncated_to} complete={outcome.truncation_complete} "
                f"leo={self.log.log_end_offset} hw={self.log.high_watermark}",
            )
        return outcome

    # ------------------------------------------------------------------ helpers

    def _observe(self, now_ms: int | None) -> int:
        if now_ms is not None and now_ms > self.clock_ms:
            self.clock_ms = now_ms
        return self.clock_ms

    def _is_stale(self, leader_epoch: int, partition_epoch: int | None) -> bool:
        if partition_epoch is None:
            return leader_epoch < self.leader_epoch
        return (leader_epoch, partition_epoch) < (self.leader_epoch, self.partition_epoch)

    def _keeps_pending_change(self, partition_epoch: int | None) -> bool:
        """Metadata at the partition epoch a pending change was proposed against says nothing
        new; keeping the maximal ISR is what stops the HW from skipping a replica the
        coordinator may be committing right now."""
        return self.isr_state.is_inflight and (
            partition_epoch is None or partition_epoch == self.partition_epoch
        )

    def _sync_replica_states(self) -> None:
        remote = set(self.assignment.replicas) - {self.broker_id}
        for broker_id in set(self._replicas) - remote:
            del self._replicas[broker_id]
        for broker_id in remote - set(self._replicas):
            self._replicas[broker_id] = ReplicaState(broker_id)

    def _record(
        self,
        kind: Kind,
        detail: str,
        *,
        error: ErrorCode = ErrorCode.NONE,
        epoch: int | None = None,
        leader: bool = False,
    ) -> None:
        """A state change this replica completed (or refused: ``error``) -- as the partition's
        ``leader`` answering its own proposal, else as the broker acting on metadata."""
        self.state_change_sink(
            acted_on(self._at(epoch), kind, detail, error=error, as_leader=leader)
        )

    def _proposed(self, detail: str) -> None:
        """An ISR change this leader proposed to the controller (REQUESTED)."""
        self.state_change_sink(proposed(self._at(None), detail))

    def _at(self, epoch: int | None) -> PartitionAt:
        tp = TopicPartition(self.topic, self.partition)
        epoch = self.leader_epoch if epoch is None else epoch
        return PartitionAt(tp, self.broker_id, epoch, self.partition_epoch, self.clock_ms)
