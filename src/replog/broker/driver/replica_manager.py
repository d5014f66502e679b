"""``ReplicaManager``: the partitions one broker hosts, as a sans-IO-style core.

Theory of operation. The broker runtime owns sockets, the event loop, threads and the clock;
this class owns the replication decisions around them. Every input carries ``now_ms``; nothing
here reads a clock, opens a socket or starts a thread (it does call ``Log``/``LogManager``,
which do file IO: appends, reads and truncations are short and synchronous on the loop; only
fsyncs and cleanings' heavy passes run off it, as effects). A deterministic simulator drives it
the same way the asyncio runtime does:

- metadata in: ``apply_image`` (a snapshot's image, loaded whole) and ``apply_delta`` (what one
  feed batch changed) read the metadata channel's ``MetadataImage`` and turn it into
  ``become_leader`` / ``become_follower`` (creating logs on first use) or replica removal. Logs
  are tied to a topic incarnation (KIP-516): a new log gets the topic's ID in
  ``partition.metadata``; a log whose ID is not the current topic's, or whose partition is no
  longer assigned here or whose topic is gone (seen in a snapshot: deleted while this broker was
  down), is a stray and is deleted before anything serves it (Kafka's stray-log handling);
- admin requests the controller queued for this broker (``on_admin_request``): a CloseReplica
  deletes the replica unless the current metadata assigns it here again, never the log of a
  later topic of the same name;
- client requests in: ``produce`` (acks 0/1/all; acks=all may wait in the partition's
  purgatory), ``fetch`` (consumers up to the HW, followers up to the LEO);
- follower side: ``fetch_requests_for(leader)`` builds one request per source broker covering
  all partitions it leads for us; ``on_fetch_response`` applies the answer per partition;
- time: ``tick`` expires delayed operations and shrinks ISRs, ``checkpoint_due`` hands out the
  HW / recovery-point / log-start checkpoints to write;
- outputs: ``take_ready`` drains AlterPartition requests for the controller channel, produce
  completions and damaged replicas to report.

While the coordinator session is not CONNECTED (``set_metadata_current(False)``) this broker is
fenced by its own hand (the broker lifecycle's Fenced state: it cannot reach the active
controller, which may already be moving its leaderships away): it appends no produce as leader,
whatever its acks -- acks=0 and acks=1 included, so an acks=1 producer cannot go on writing to a
leader the controller replaced -- and completes no parked acks=all produce (they end
``REQUEST_TIMED_OUT``). New ones are refused with ``NOT_LEADER_OR_FOLLOWER``; the client retries
against fresh metadata.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Iterable

import attrs

from replog.broker.driver.change_feed import ChangeFeed
from replog.broker.driver.replica_admin import ReplicaAdmin
from replog.broker.driver.replica_cleanup import ReplicaCleanup, other_incarnation
from replog.errors import (
    CorruptRecordError,
    ErrorCode,
    InvalidOffsetError,
    InvalidRecordError,
    ProducerStateError,
    RecordBatchTooLargeError,
    StorageError,
)
from replog.isr import (
    FollowerAction,
    FollowerOutcome,
    Partition,
    PartitionConfig,
    PartitionFetchRequest,
    PartitionFetchResponse,
    ProduceResult,
    ReplicaRole,
    StateChangeSink,
    discard_state_change,
)
from replog.log.checkpoint_round import CheckpointRound
from replog.log.log import Log, PendingFlush
from replog.log.manager import LogManager
from replog.metadata.delta import MetadataDelta
from replog.metadata.image import MetadataImage
from replog.metadata.types import (
    ALL_BROKERS,
    AlterPartition,
    AlterPartitionResult,
    PartitionState,
)
from replog.topics import ZERO_TOPIC_ID, TopicPartition, topic_uuid

__all__ = ["ManagerReady", "ReplicaManager"]

_log = logging.getLogger(__name__)


@attrs.frozen
class ManagerReady:
    """What the driver must do after an input: AlterPartition writes to hand to the controller
    and produce completions (each tagged with its partition)."""

    alter_partition: tuple[AlterPartition, ...] = ()
    produce_results: tuple[tuple[TopicPartition, ProduceResult], ...] = ()
    #: replicas found damaged (partition, first damaged offset): report to the controller
    damaged: tuple[tuple[TopicPartition, int], ...] = ()


_NOTHING_READY = ManagerReady()


@attrs.define
class ReplicaManager:
    """The replicas hosted by ``broker_id``; see the module docstring."""

    broker_id: int
    log_manager: LogManager
    partition_config: PartitionConfig = attrs.field(factory=PartitionConfig)
    broker_epoch: int = -1
    checkpoint_interval_ms: int = 5_000
    state_change_sink: StateChangeSink = discard_state_change
    #: told of every partition state applied (tests and the simulator observe metadata here)
    state_listener: Callable[[TopicPartition, PartitionState], None] | None = None

    partitions: dict[TopicPartition, Partition] = attrs.field(init=False, factory=dict)
    #: its parts: settings and DeleteRecords; removing replicas and logs
    admin: ReplicaAdmin = attrs.field(init=False)
    cleanup: ReplicaCleanup = attrs.field(init=False)
    #: the metadata channel's image, read only (``apply_image``, ``apply_delta``)
    image: MetadataImage = attrs.field(init=False, factory=MetadataImage.empty)
    metadata_current: bool = attrs.field(init=False, default=True)
    #: grows on every append, HW move or role change (long-polling drivers wait on it)
    data_version: int = attrs.field(init=False, default=0)
    #: partitions whose data or role changed since ``take_changed`` (long polls wake on it)
    _changed: set[TopicPartition] = attrs.field(init=False, factory=set)
    _changed_all: bool = attrs.field(init=False, default=False)
    #: partitions whose HW (alone) moved since ``take_changed``: consumers' long polls wake on
    #: it, followers' do not (a follower reads up to the LEO)
    _hw_changed: set[TopicPartition] = attrs.field(init=False, factory=set)
    #: every such change in order, for readers that look less often (fetch sessions)
    changes: ChangeFeed = attrs.field(init=False, factory=ChangeFeed)
    #: partitions ``tick`` visits between ISR shrink passes (see ``tick``)
    _timed: set[TopicPartition] = attrs.field(init=False, factory=set)
    _acks_all: set[tuple[TopicPartition, int]] = attrs.field(init=False, factory=set)
    #: partitions followed here: the leader's HW minus this replica's LEO after the last fetch
    follower_lag: dict[TopicPartition, int] = attrs.field(init=False, factory=dict)
    _next_request_id: int = attrs.field(init=False, default=1)
    _last_shrink_ms: int = attrs.field(init=False, default=0)
    _last_checkpoint_ms: int | None = attrs.field(init=False, default=None)
    _out_alter: list[AlterPartition] = attrs.field(init=False, factory=list)
    #: partitions whose state names this broker leader while its registration is fenced
    _deferred_leads: set[TopicPartition] = attrs.field(init=False, factory=set)
    #: partition -> first damaged offset of a replica a read found damaged (not yet repaired)
    damaged: dict[TopicPartition, int] = attrs.field(init=False, factory=dict)
    #: the image has shown this incarnation's registration (its absence since means expired)
    _registration_seen: bool = attrs.field(init=False, default=False)
    _out_damaged: list[tuple[TopicPartition, int]] = attrs.field(init=False, factory=list)
    _held_produce: list[tuple[TopicPartition, ProduceResult]] = attrs.field(
        init=False, factory=list
    )

    def __attrs_post_init__(self) -> None:
        self.admin = ReplicaAdmin(self)
        self.cleanup = ReplicaCleanup(self)

    # ------------------------------------------------------------------ metadata

    def apply_image(self, image: MetadataImage, now_ms: int) -> None:
        """Act on ``image`` loaded whole (a snapshot's): delete stray logs, and bring every
        hosted replica in line. The image is the metadata channel's: this manager reads it and
        never changes it."""
        old, self.image = self.image, image
        self.is_fenced_here()  # notes whether this incarnation's registration is in the image
        for topic in set(old.topics) - set(image.topics):
            self.cleanup.drop_topic(topic, delete=True)
        self.admin.refresh_settings(None, now_ms)
        for tp in set(self.partitions) - set(image.partitions):
            self._remove_replica(tp, delete=True)
        self.cleanup.delete_stray_logs(image.partitions)
        self._push_eligibility()
        for tp, state in sorted(image.partitions.items()):
            self._apply_partition(tp, state, now_ms)

    def apply_delta(self, image: MetadataImage, delta: MetadataDelta, now_ms: int) -> None:
        """Act on what one feed batch changed (``image`` already holds it): deleted topics'
        replicas and logs go first, then settings, eligibility and each changed partition."""
        self.image = image
        for deleted in delta.topics_deleted:
            self.cleanup.drop_topic(deleted.topic, delete=True, topic_id=deleted.topic_id)
        if delta.topics_reconfigured:
            self.admin.refresh_settings(set(delta.topics_reconfigured), now_ms)
        if delta.brokers_changed:
            self.is_fenced_here()  # notes this incarnation's registration
            self._push_eligibility()
        for tp in delta.partitions_changed:
            self._apply_partition(tp, image.partitions[tp], now_ms)
        if self.broker_id in delta.brokers_changed:
            self._resume_deferred_leads(now_ms)
        if delta.broker_configs_changed & {ALL_BROKERS, self.broker_id}:
            self.admin.refresh_settings(None, now_ms)

    def _apply_partition(self, tp: TopicPartition, state: PartitionState, now_ms: int) -> None:
        """Lead, follow or drop this broker's replica of the partition as ``state`` says."""
        if self.state_listener is not None:
            self.state_listener(tp, state)
        if self.broker_id not in state.replicas:
            self._remove_replica(tp, delete=True)
            return
        replica = self._get_or_create(tp)
        if replica is None:
            return
        try:
            self._apply_role(replica, state, now_ms)
        except StorageError:
            # The log went offline (a failed write or fsync): this replica is no longer served
            # here; the rest of the metadata still applies. It comes back after a restart.
            self._remove_replica(tp, delete=False)
            return
        self._touch(tp)

    def note_damage(self, tp: TopicPartition, first_offset: int) -> None:
        """A read found this replica damaged from ``first_offset``: the controller is told
        (``take_ready().damaged``) so leadership moves to a healthy replica; once this broker
        follows, it truncates to before the damage and fetches the rest again."""
        known = self.damaged.get(tp)
        if known is not None and known <= first_offset:
            return
        self.damaged[tp] = first_offset
        self._out_damaged.append((tp, first_offset))

    def _repair_if_damaged(self, replica: Partition, tp: TopicPartition) -> None:
        """A damaged replica that now follows: truncate below the damage (the leader has it)."""
        first_offset = self.damaged.pop(tp, None)
        if first_offset is None:
            return
        log = _as_log(replica)
        if log is not None:
            log.truncate_to(min(first_offset, log.log_end_offset))

    def is_fenced_here(self) -> bool:
        """This incarnation's registration is fenced (the controller has not admitted it yet),
        the image names another incarnation of this broker, or none (its session expired and
        the registration went with it): it leads nothing. A broker that re-registered unclean
        and then lost its session would otherwise lead on from a log that lost its tail."""
        info = self.image.brokers.get(self.broker_id)
        if info is None:
            return self._registration_seen  # gone since (no image at all: tests without one)
        if info.incarnation_epoch == self.broker_epoch:
            self._registration_seen = True
        return info.fenced or info.incarnation_epoch != self.broker_epoch

    def _resume_deferred_leads(self, now_ms: int) -> None:
        if self.is_fenced_here() or not self._deferred_leads:
            return
        deferred, self._deferred_leads = self._deferred_leads, set()
        for tp in sorted(deferred):
            state = self.image.partitions.get(tp)
            replica = self.partitions.get(tp)
            if state is not None and replica is not None:
                try:
                    self._apply_role(replica, state, now_ms)
                except StorageError:
                    self._remove_replica(tp, delete=False)
                    continue
                self._touch(tp)

    def _apply_role(self, replica: Partition, state: PartitionState, now_ms: int) -> None:
        tp = TopicPartition(replica.topic, replica.partition)
        self._deferred_leads.discard(tp)
        if state.leader == self.broker_id and self.is_fenced_here():
            # Leadership this broker's registration cannot hold yet: the controller moves or
            # renews it while processing the registration (a previous incarnation's, KIP-903).
            self._deferred_leads.add(tp)
            replica.become_follower(
                -1,
                state.leader_epoch,
                now_ms,
                isr=frozenset(state.isr),
                assigned=state.replicas,
                partition_epoch=state.partition_epoch,
            )
            return
        if state.leader != self.broker_id:
            self._repair_if_damaged(replica, tp)
        if state.leader == self.broker_id:
            replica.become_leader(
                state.leader_epoch,
                frozenset(state.isr),
                state.replicas,
                now_ms,
                partition_epoch=state.partition_epoch,
                adding=frozenset(state.adding_replicas),
                removing=frozenset(state.removing_replicas),
                broker_epochs=self._broker_epochs(),
            )
            replica.update_replica_eligibility(self._ineligible(state.replicas))
        else:
            replica.become_follower(
                state.leader,
                state.leader_epoch,
                now_ms,
                isr=frozenset(state.isr),
                assigned=state.replicas,
                partition_epoch=state.partition_epoch,
            )

    def set_metadata_current(self, current: bool) -> None:
        """The coordinator session is CONNECTED (True) or SUSPENDED/LOST (False)."""
        self.metadata_current = current

    def _get_or_create(self, tp: TopicPartition) -> Partition | None:
        replica = self.partitions.get(tp)
        if replica is not None:
            return replica
        settings = self.admin.topic_settings(tp[0])
        assignment = self.image.topics.get(tp[0])
        topic_id = "" if assignment is None else assignment.topic_id
        key = TopicPartition(*tp)
        try:
            stored_id = self.log_manager.topic_id(key)
            if other_incarnation(stored_id, topic_id):
                _log.warning(
                    "broker %s: deleting stray log %s of topic ID %s (the topic is now %s)",
                    self.broker_id, key, stored_id, topic_id,
                )  # fmt: skip
                self.log_manager.delete_log(key)
                stored_id = None
            log = self.log_manager.get_or_create_log(
                key, settings.log_config(self.log_manager.default_config)
            )
            if stored_id is None and topic_uuid(topic_id) != ZERO_TOPIC_ID:
                self.log_manager.set_topic_id(key, topic_id)
        except StorageError:
            return None  # the dir is offline: this replica is not served
        except CorruptRecordError as exc:  # a batch its producer state is rebuilt from is bad:
            # only this replica is out of service (not its dir); the controller is told
            _log.error("broker %s: cannot open the log of %s: %s", self.broker_id, key, exc)
            self.note_damage(tp, exc.first_offset or 0)
            return None
        if log.is_offline:
            return None  # a write or fsync failed on it: not served until a restart
        config = self.admin.partition_config(settings)
        replica = Partition(
            topic=tp[0],
            partition=tp[1],
            broker_id=self.broker_id,
            log=log,
            config=config,
            broker_epoch=self.broker_epoch,
            state_change_sink=self.state_change_sink,
        )
        self.partitions[tp] = replica
        return replica

    def _remove_replica(self, tp: TopicPartition, *, delete: bool) -> None:
        replica = self.partitions.pop(tp, None)
        self.follower_lag.pop(tp, None)
        if delete:
            self.damaged.pop(tp, None)
        if replica is not None and replica.is_leader:
            with contextlib.suppress(StorageError):  # an offline log still fails its waiters
                replica.become_follower(-1, replica.leader_epoch + 1)
            self._collect(tp, replica)
        if delete:
            try:
                self.log_manager.delete_log(TopicPartition(*tp))
            except StorageError:
                pass
        self._touch(tp)

    def _broker_epochs(self) -> dict[int, int]:
        return {b: info.incarnation_epoch for b, info in self.image.brokers.items()}

    def _ineligible(self, replicas: Iterable[int]) -> frozenset[int]:
        """Replicas that may neither join the ISR nor hold the HW back (KIP-841): fenced or
        shutting-down brokers, and brokers not registered at all (a crashed broker whose
        session expired is removed from the image, not fenced -- without this its recent
        catch-up time would hold an acks=all produce until ``replica_lag_ms_max`` passed)."""
        fenced = {
            b
            for b, info in self.image.brokers.items()
            if info.fenced or info.in_controlled_shutdown
        }
        return frozenset(fenced | {b for b in replicas if b not in self.image.brokers})

    def _push_eligibility(self) -> None:
        epochs = self._broker_epochs()
        for replica in self.partitions.values():
            replica.update_replica_eligibility(self._ineligible(replica.assigned), epochs)

    # ------------------------------------------------------------------ queries

    def partition(self, topic: str, partition: int) -> Partition | None:
        """The hosted replica, or None."""
        return self.partitions.get(TopicPartition(topic, partition))

    def log(self, topic: str, partition: int) -> Log | None:
        """The hosted replica's log, or None."""
        replica = self.partitions.get(TopicPartition(topic, partition))
        return None if replica is None else _as_log(replica)

    def leader_partitions(self) -> list[TopicPartition]:
        """Partitions this broker currently leads."""
        return sorted(tp for tp, p in self.partitions.items() if p.is_leader)

    def follower_leaders(self) -> set[int]:
        """Brokers this broker fetches from."""
        return {
            p.leader_id
            for p in self.partitions.values()
            if not p.is_leader and p.leader_id >= 0 and p.role is ReplicaRole.FOLLOWER
        }

    def next_request_id(self) -> int:
        """A fresh id to tag a produce or fetch with (unique within this manager)."""
        request_id = self._next_request_id
        self._next_request_id += 1
        return request_id

    # ------------------------------------------------------------------ produce

    def produce(
        self,
        topic: str,
        partition: int,
        batch: bytes,
        acks: int,
        now_ms: int,
        *,
        timeout_ms: int | None = None,
    ) -> tuple[int, ProduceResult | None]:
        """Append a producer's batch as leader. Returns ``(request_id, result)``; a None result
        (acks=all) completes later through ``take_ready``."""
        tp = TopicPartition(topic, partition)
        request_id = self.next_request_id()
        replica = self.partitions.get(tp)
        if replica is None:
            return request_id, ProduceResult(request_id, -1, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
        if not self.metadata_current:  # fenced: cut off from the controller (module doc)
            return request_id, ProduceResult(request_id, -1, ErrorCode.NOT_LEADER_OR_FOLLOWER)
        try:
            result = replica.append_as_leader(
                batch, acks, now_ms, request_id=request_id, timeout_ms=timeout_ms
            )
        except RecordBatchTooLargeError:
            result = ProduceResult(request_id, -1, ErrorCode.MESSAGE_TOO_LARGE)
        except InvalidRecordError:  # a record without a key on a compacted topic
            result = ProduceResult(request_id, -1, ErrorCode.INVALID_RECORD)
        except (CorruptRecordError, InvalidOffsetError):
            result = ProduceResult(request_id, -1, ErrorCode.CORRUPT_MESSAGE)
        except ProducerStateError as exc:  # an idempotent producer's gap, old epoch, ...
            result = ProduceResult(request_id, -1, exc.code)
        except StorageError as exc:
            self.log_manager.log_failed(tp, str(exc))
            result = ProduceResult(request_id, -1, ErrorCode.KAFKA_STORAGE_ERROR)
        self._touch(tp)
        if result is None:
            self._acks_all.add((tp, request_id))
        self._collect(tp, replica)
        return request_id, result

    # ------------------------------------------------------------------ fetch (leader side)

    def fetch(
        self, topic: str, partition: int, request: PartitionFetchRequest, now_ms: int
    ) -> PartitionFetchResponse:
        """Serve one partition of a consumer's or follower's fetch at once (the driver does the
        multi-partition long poll by waiting on ``data_version``)."""
        tp = TopicPartition(topic, partition)
        replica = self.partitions.get(tp)
        if replica is None:
            return PartitionFetchResponse(
                request.request_id,
                ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                request.fetch_offset,
                replica_id=request.replica_id,
            )
        hw_before = replica.high_watermark
        try:
            response = replica.on_fetch(request, now_ms)
        except StorageError:
            response = PartitionFetchResponse(
                request.request_id, ErrorCode.KAFKA_STORAGE_ERROR, request.fetch_offset
            )
        except CorruptRecordError as exc:
            first = exc.first_offset
            self.note_damage(tp, request.fetch_offset if first is None else first)
            response = PartitionFetchResponse(
                request.request_id, ErrorCode.KAFKA_STORAGE_ERROR, request.fetch_offset
            )
        if replica.high_watermark != hw_before:
            self._touch_hw(tp)
        self._collect(tp, replica)
        return response

    # ------------------------------------------------------------------ fetch (follower side)

    def fetch_requests_for(
        self, leader_id: int
    ) -> list[tuple[TopicPartition, PartitionFetchRequest]]:
        """One fetch per partition this broker follows on ``leader_id`` (one wire request).
        A replica whose log is offline (a failed write or fsync) fetches nothing: its fetch
        offset would report a log end the failed fsync never made durable (FSYNC mode), and
        the leader would count it toward the HW."""
        requests: list[tuple[TopicPartition, PartitionFetchRequest]] = []
        for tp in sorted(self.partitions):
            request = self.fetch_request_for(tp, leader_id)
            if request is not None:
                requests.append((tp, request))
        return requests

    def fetch_request_for(self, tp: TopicPartition, leader_id: int) -> PartitionFetchRequest | None:
        """``tp``'s next fetch from ``leader_id`` (None: not followed on it here, or offline);
        it supersedes the partition's outstanding one."""
        replica = self.partitions.get(tp)
        if replica is None or replica.is_leader or replica.leader_id != leader_id:
            return None
        log = _as_log(replica)
        if log is not None and log.is_offline:
            return None
        return replica.fetch_request()

    def on_fetch_response(
        self, tp: TopicPartition, response: PartitionFetchResponse, now_ms: int
    ) -> FollowerOutcome:
        """Apply the leader's answer for one partition (truncation by epoch, append, HW)."""
        replica = self.partitions.get(tp)
        if replica is None:
            return FollowerOutcome(FollowerAction.IGNORED)
        try:
            outcome = replica.on_fetch_response(response, now_ms)
        except (StorageError, CorruptRecordError, InvalidOffsetError) as exc:
            if isinstance(exc, StorageError):
                self.log_manager.log_failed(tp, str(exc))
            return FollowerOutcome(FollowerAction.FAILED, error_code=ErrorCode.KAFKA_STORAGE_ERROR)
        if outcome.action is not FollowerAction.IGNORED:
            self._touch(tp)
        if response.error_code is ErrorCode.NONE and response.high_watermark >= 0:
            lag = response.high_watermark - replica.log.log_end_offset
            self.follower_lag[tp] = max(lag, 0)
        return outcome

    @property
    def delayed_produces(self) -> int:
        """acks=all produces waiting for the ISR to catch up (Kafka's produce purgatory)."""
        return len(self._acks_all)

    # ------------------------------------------------------------------ ISR changes

    def on_alter_partition_response(
        self, request: AlterPartition, result: AlterPartitionResult, now_ms: int
    ) -> bool:
        """The controller's answer to an AlterPartition request this manager emitted."""
        tp = TopicPartition(request.topic, request.partition)
        replica = self.partitions.get(tp)
        if replica is None:
            return False
        committed = replica.on_alter_partition_response(request, result, now_ms)
        self._touch(tp)
        self._collect(tp, replica)
        return committed

    # ------------------------------------------------------------------ durability

    def begin_flushes(self) -> list[tuple[TopicPartition, PendingFlush]]:
        """Capture a group-commit flush per log with unflushed data (the driver runs each
        ``PendingFlush.run`` on a worker thread, then calls ``complete_flushes``)."""
        pending: list[tuple[TopicPartition, PendingFlush]] = []
        for tp, replica in self.partitions.items():
            log = _as_log(replica)
            if log is None or log.is_offline:
                continue
            flush = log.begin_flush()
            if flush is not None:
                pending.append((tp, flush))
        return pending

    def complete_flushes(
        self, done: Iterable[tuple[TopicPartition, PendingFlush]], now_ms: int
    ) -> None:
        """Advance recovery points after the fsyncs; leaders may advance their HW (FSYNC)."""
        for tp, flush in done:
            replica = self.partitions.get(tp)
            log = None if replica is None else _as_log(replica)
            if replica is None or log is None:
                continue
            log.complete_flush(flush)
            if replica.is_leader and replica.on_log_flushed(now_ms):
                self._touch_hw(tp)
            self._collect(tp, replica)

    def fail_flush(self, tp: TopicPartition, reason: str) -> None:
        """A worker-thread fsync failed: the log goes offline (never silently continues)."""
        replica = self.partitions.get(tp)
        log = None if replica is None else _as_log(replica)
        if log is not None:
            log.mark_offline(reason)
            self.log_manager.log_failed(tp, reason)
            self._touch(tp)  # its fetches now answer KAFKA_STORAGE_ERROR

    # ------------------------------------------------------------------ time

    def tick(self, now_ms: int) -> None:
        """Expire delayed operations; every half ``replica_lag_ms_max`` try to shrink ISRs.
        Between shrink passes only the partitions that changed since they were last found
        idle are visited: one with no delayed produce and its HW at its LEO has nothing to
        do as time passes."""
        shrink = now_ms - self._last_shrink_ms >= self.partition_config.isr_expiration_interval_ms
        if shrink:
            self._last_shrink_ms = now_ms
        timed, self._timed = self._timed, set()
        for tp, replica in list(self.partitions.items()) if shrink else self._visits(timed):
            replica.on_tick(now_ms)
            if shrink and self.metadata_current:
                replica.maybe_shrink_isr(now_ms)
            # A catching-up replica holds the HW only for replica_lag_ms_max after it was last
            # caught up; nothing but time ends that, so re-check the HW as time passes.
            if replica.is_leader and replica.maybe_increment_leader_hw(now_ms):
                self._touch_hw(tp)
            self._collect(tp, replica)
            if replica.next_deadline_ms() is not None or (
                replica.is_leader and replica.high_watermark < replica.log.log_end_offset
            ):
                self._timed.add(tp)

    def _visits(self, tps: set[TopicPartition]) -> list[tuple[TopicPartition, Partition]]:
        return [(tp, r) for tp in sorted(tps) if (r := self.partitions.get(tp)) is not None]

    def delete_old_segments(self) -> int:
        """Apply retention to every online log (never past a HW); returns the segments deleted.
        Log start offsets may move, so waiting fetches are woken."""
        deleted = self.log_manager.delete_old_segments()
        if deleted:
            self._touch_all()
        return deleted

    def checkpoint_due(self, now_ms: int) -> CheckpointRound | None:
        """The HW, recovery-point and log-start checkpoints as of now, once every
        ``checkpoint_interval_ms`` (else None), for the caller to write off the event loop
        (``CheckpointRound.write``, then ``log_manager.checkpoint_failed``)."""
        if (
            self._last_checkpoint_ms is not None
            and now_ms - self._last_checkpoint_ms < self.checkpoint_interval_ms
        ):
            return None
        self._last_checkpoint_ms = now_ms
        return self.log_manager.checkpoint_round()

    # ------------------------------------------------------------------ outputs

    def _touch(self, tp: TopicPartition) -> None:
        self.data_version += 1
        self._changed.add(tp)
        self.changes.note(tp)
        self._timed.add(tp)

    def _touch_hw(self, tp: TopicPartition) -> None:
        self.data_version += 1
        self._hw_changed.add(tp)
        self.changes.note(tp)
        self._timed.add(tp)

    def _touch_all(self) -> None:
        self.data_version += 1
        self._changed_all = True
        self.changes.note_all()

    def take_changed(self) -> tuple[set[TopicPartition] | None, set[TopicPartition]]:
        """Since the last call: the partitions whose data or role changed (None: possibly
        every partition, e.g. after retention), and those whose HW alone moved."""
        changed: set[TopicPartition] | None = None if self._changed_all else set(self._changed)
        hw_only = self._hw_changed - self._changed if changed is not None else set()
        self._changed.clear()
        self._hw_changed = set()
        self._changed_all = False
        return changed, hw_only

    def _collect(self, tp: TopicPartition, replica: Partition) -> None:
        if not replica.has_ready:
            return
        ready = replica.take_ready()
        self._out_alter.extend(ready.alter_partition)
        for result in ready.produce_results:
            key = (tp, result.request_id)
            if key in self._acks_all:
                self._acks_all.discard(key)
                if result.error_code is ErrorCode.NONE and not self.metadata_current:
                    result = attrs.evolve(result, error_code=ErrorCode.REQUEST_TIMED_OUT)
            self._held_produce.append((tp, result))
        if ready.produce_results:
            self._touch_hw(tp)

    def take_ready(self) -> ManagerReady:
        """Drain AlterPartition requests and produce completions."""
        if not (self._out_alter or self._held_produce or self._out_damaged):
            return _NOTHING_READY  # after most inputs (every acks=1 produce, twice)
        ready = ManagerReady(
            tuple(self._out_alter), tuple(self._held_produce), tuple(self._out_damaged)
        )
        self._out_alter.clear()
        self._held_produce.clear()
        self._out_damaged.clear()
        return ready


def _as_log(replica: Partition) -> Log | None:
    log = replica.log
    return log if isinstance(log, Log) else None
