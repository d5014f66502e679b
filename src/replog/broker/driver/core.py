"""``BrokerDriver``: one broker without asyncio, sockets or clock reads.

Theory of operation. The driver holds every decision the broker makes; its shells (the asyncio
``replog.Broker``, the simulator's broker) own sockets, threads and time. Inputs are method calls
carrying ``now_ms`` (monotonic): ``start``, ``on_request`` / ``on_connection_closed`` from client
connections, ``on_coord_done``, ``on_broker_response``, ``on_flushes_done``,
``on_checkpoints_done``, ``on_cleaning_done`` for effects it asked for, ``on_feed_notified`` /
``on_session_event`` from the coordinator's listeners, and ``on_tick``, which the shell calls
every ``tick_interval_ms`` and which runs every periodic duty that is due (heartbeat, metadata
poll, ISR expiry and checkpoints, retention, log cleaning, controller polls, follower fetches,
long-poll deadlines, the group coordinator's timers). Outputs are ``effects``
(``take_effects``): responses, coordinator calls, requests to other brokers, fsyncs, checkpoint
writes, log cleanings. Storage calls (``replog.log``) are short, synchronous, in the inputs.

Life cycle: ``start`` registers a new incarnation (FENCED), loads the metadata image (a
snapshot, or on ``raft://`` the cached image brought up to date from the feed:
``MetadataChannel.load_image``) deleting stray logs, drains this broker's admin queue and serves
(ONLINE); ``begin_stop(controlled=True)`` asks the controller to move leadership away and
reports ``stop_ready`` once this broker leads nothing that could move, or after
``controlled_shutdown_timeout_ms``; ``halt`` ends every activity (answers after it are dropped);
``close_logs`` flushes, checkpoints and writes the clean-shutdown marker (OFFLINE). ``abandon``
is a crash: nothing flushed, the session left to expire.

Consumer groups. ``groups`` (``GroupHost``) hosts the group coordinator of every led
``__consumer_offsets`` partition (following metadata and ticks), writing acks=all through the
replica manager; its produce completions come from ``after_input``.

Exclusion. A group commit runs its fsyncs off the loop (``RunFlushes``); until it reports, no
log may be truncated or deleted under it: inputs that may (metadata, truncating fetch answers,
retention, the admin queue) go through ``exclusive``, run at once or right after the fsync.

Log cleaning runs on ticks (``cleaning``: ``replog.broker.driver.log_cleaning``), its heavy pass off
the loop (``RunCleaning``, ``on_cleaning_done``), its result swapped in under ``exclusive``.
Stopping is ``stop_sequence`` (``replog.broker.driver.stop_sequence``), which both shells run.
"""

from __future__ import annotations

import enum
import logging
from collections.abc import Callable
from typing import Any

import attrs

from replog.broker.config import BrokerConfig
from replog.broker.driver.client_requests import ClientRequests
from replog.broker.driver.controller_role import CONTROLLER_POLL_MS, ControllerRole
from replog.broker.driver.effects import Effect, FsyncFailures, Subscribe
from replog.broker.driver.fetch_session_cache import FetchSessionCache
from replog.broker.driver.fetch_sessions import FetchSessions
from replog.broker.driver.group_host import GroupHost
from replog.broker.driver.log_cleaning import LogCleaning
from replog.broker.driver.metadata_channel import MetadataChannel
from replog.broker.driver.outbox import Outbox
from replog.broker.driver.producer_ids import ProducerIdManager
from replog.broker.driver.replica_manager import ReplicaManager
from replog.broker.driver.replication_throttle import ReplicationThrottle
from replog.broker.driver.requests import AdminResult
from replog.broker.driver.services import DriverServices
from replog.broker.driver.stop_sequence import StopSequence
from replog.controller import alter_partition_result
from replog.errors import ErrorCode, StorageError
from replog.isr.config import DurabilityMode
from replog.log.log import PendingFlush
from replog.log.manager import LogManager
from replog.metadata.types import (
    AdminPayload,
    AdminRequestChanged,
    AllocateProducerIds,
    AlterPartition,
    AlterPartitionResult,
    BrokerInfo,
    CreateTopic,
    DamagedReplica,
    PartitionState,
    ProducerIdBlock,
    SessionEvent,
    SessionState,
)
from replog.protocol import RequestHeader
from replog.protocol.schema import Message
from replog.state_change import StateChangeSink, discard_state_change
from replog.topics import TopicPartition

__all__ = ["BrokerDriver", "BrokerState"]

_log = logging.getLogger(__name__)

AFTER_INPUT_ROUNDS_MAX = 16
"""Bound on the rounds of one ``after_input`` (each round may complete more waits)."""


class BrokerState(enum.Enum):
    """A broker's lifecycle: registered FENCED, unfenced ONLINE, STOPPING when shut down."""

    OFFLINE = "offline"
    FENCED = "fenced"
    ONLINE = "online"
    STOPPING = "stopping"


class BrokerDriver:
    """One broker's decisions; see the module docstring."""

    def __init__(
        self,
        config: BrokerConfig,
        log_manager: LogManager,
        *,
        placement_start: Callable[[int], tuple[int, int]] | None = None,
        state_listener: Callable[[TopicPartition, PartitionState], None] | None = None,
        state_change_sink: StateChangeSink = discard_state_change,
        member_id_suffix: Callable[[], str] | None = None,
    ) -> None:
        self.config = config
        #: where the replicas and the controller role hand their state-change records
        self.state_change_sink = state_change_sink
        self._state_listener = state_listener
        self.broker_id = config.broker_id
        self.log_manager = log_manager
        self.state = BrokerState.OFFLINE
        self.incarnation_epoch = -1
        self.now_ms = 0
        self.advertised_address = (config.advertised_host or config.host, config.port)
        self.start_error: BaseException | None = None
        self.outbox = Outbox()
        self.stop_sequence = StopSequence(self)
        self.metadata = MetadataChannel(self)
        #: the replication quotas (KIP-73), as leader and as follower
        self.replication_throttle = ReplicationThrottle.for_config(config)
        self.fetches = FetchSessions(self)
        #: the incremental fetch sessions (KIP-227) this broker keeps as a leader
        self.fetch_session_cache = FetchSessionCache(config.fetch_session_cache_slots)
        self.controller = ControllerRole(self, placement_start)
        #: group member ids end in ``member_id_suffix()`` (default: a random UUID)
        self.groups = GroupHost(self, member_id_suffix)
        self.requests = ClientRequests(self.outbox, DriverServices(self), self._submit_for_client)
        self.producer_ids = ProducerIdManager(config.broker_id)
        self._rm: ReplicaManager | None = None
        #: this process registered unclean (KIP-966) and the controller has not admitted it yet
        self._unclean_unadmitted = False
        self._flush_token: int | None = None
        self._checkpoint_token: int | None = None  # the checkpoints being written (one round)
        self._pending_flush: list[tuple[TopicPartition, PendingFlush]] = []
        self._after_flush: list[Callable[[], None]] = []
        self._flush_waiters: list[Callable[[int], None]] = []
        self._alter_inflight = 0
        self._reported_damage: set[TopicPartition] = set()
        self._next_heartbeat_ms = 0
        self._next_feed_ms = 0
        self._next_retention_ms = 0
        self._next_producer_expiration_ms = 0
        self._next_replicated_flush_ms = 0
        self.cleaning = LogCleaning(self)
        self._halted = False  # after ``halt``: coordinator and broker answers are dropped
        self._stop_deadline_ms: int | None = None
        self._metadata_loaded = False
        self._auto_creating: set[str] = set()

    @property
    def rm(self) -> ReplicaManager:
        """The replica manager (exists once registered)."""
        if self._rm is None:
            raise RuntimeError(f"broker {self.broker_id} is not registered")
        return self._rm

    @property
    def rm_or_none(self) -> ReplicaManager | None:
        """The replica manager, or None before registration."""
        return self._rm

    @property
    def serving(self) -> bool:
        """ONLINE: admitted by the controller, serving clients."""
        return self.state is BrokerState.ONLINE

    @property
    def running(self) -> bool:
        """Registering, registered or stopping: not OFFLINE (never started, crashed, closed)."""
        return self.state is not BrokerState.OFFLINE

    @property
    def active(self) -> bool:
        """Registered with its metadata loaded and not stopping: it replicates, and takes part
        in the controller election (a fenced broker too, or nobody could admit the first)."""
        return self._metadata_loaded and self.state in (BrokerState.FENCED, BrokerState.ONLINE)

    @property
    def flush_in_flight(self) -> bool:
        """A group commit is running off the loop."""
        return self._flush_token is not None

    @property
    def cleaning_in_flight(self) -> bool:
        """A log cleaning's heavy pass is running off the loop."""
        return self.cleaning.in_flight

    def take_effects(self) -> list[Effect]:
        """What the shell must do now, in order."""
        return self.outbox.take()

    # ------------------------------------------------------------------ life cycle

    def start(self, now_ms: int, port: int) -> None:
        """OFFLINE -> FENCED -> ONLINE (see the module docstring); ``port`` is the bound one."""
        self.now_ms = now_ms
        if self.state is not BrokerState.OFFLINE:
            raise RuntimeError(f"broker {self.broker_id} is {self.state.value}")
        config = self.config
        self.advertised_address = (
            config.advertised_host or config.host,
            config.advertised_port or port,
        )
        self.start_error = None
        self._metadata_loaded = False
        # FSYNC never counts an unflushed offset (toward the HW or ISR membership), so a crash
        # cannot lose what this broker vouched for: only REPLICATED needs the marker (KIP-966).
        clean = self.log_manager.had_clean_shutdown or config.durability is DurabilityMode.FSYNC
        self._unclean_unadmitted = not clean
        self.metadata.register(now_ms, clean_shutdown=clean, then=self._registered)

    def _registered(self, info: BrokerInfo) -> None:
        self.incarnation_epoch = info.incarnation_epoch
        self.state = BrokerState.FENCED
        config = self.config
        self._rm = ReplicaManager(
            self.broker_id,
            self.log_manager,
            config.partition_config(),
            broker_epoch=self.incarnation_epoch,
            checkpoint_interval_ms=config.checkpoint_interval_ms,
            state_change_sink=self.state_change_sink,
            state_listener=self._state_listener,
        )
        self.outbox.emit(Subscribe(self.broker_id, self.incarnation_epoch))
        self.metadata.load_image(self._snapshot_loaded)

    def _snapshot_loaded(self) -> None:
        if self.state is not BrokerState.FENCED:
            return
        self._metadata_loaded = True
        self.metadata.drain()
        now_ms = self.now_ms
        self._next_retention_ms = now_ms + self.config.retention_check_interval_ms
        self._next_producer_expiration_ms = (
            now_ms + self.config.producer_id_expiration_check_interval_ms
        )
        self._next_replicated_flush_ms = now_ms + self.config.checkpoint_interval_ms
        self.fetches.reconcile(now_ms)
        self.fetches.on_tick(now_ms)
        self._maybe_online()

    def _maybe_online(self) -> None:
        """FENCED -> ONLINE once the controller has admitted this incarnation (KRaft: a broker
        is unfenced by the controller; until then it leads nothing and serves no client)."""
        loaded = self.state is BrokerState.FENCED and self._metadata_loaded
        if loaded and not self.rm.is_fenced_here():
            self.state = BrokerState.ONLINE
            self._unclean_unadmitted = False  # the controller has handled the unclean start
            _log.info("broker %s online, incarnation %s", self.broker_id, self.incarnation_epoch)

    def registration_failed(self, error: BaseException) -> None:
        """Registration gave up (the old session never ended, or the store refused)."""
        _log.error("broker %s: registration failed: %s", self.broker_id, error)
        self.start_error = error
        self.state = BrokerState.OFFLINE

    def begin_stop(self, now_ms: int, *, controlled: bool) -> None:
        """ONLINE -> STOPPING: with ``controlled``, ask the controller to move leadership away;
        the shell then runs ``stop_sequence``."""
        self.now_ms = now_ms
        if self.state is BrokerState.OFFLINE:
            return
        registered = self._rm is not None and self.state is not BrokerState.FENCED
        self.state = BrokerState.STOPPING
        self.stop_sequence.begin()
        if not controlled or not registered:
            self._stop_deadline_ms = now_ms
            return
        self._stop_deadline_ms = now_ms + self.config.controlled_shutdown_timeout_ms
        broker_id, incarnation = self.broker_id, self.incarnation_epoch
        self.outbox.call(
            "controlled shutdown",
            lambda c: c.update_broker(broker_id, incarnation, in_controlled_shutdown=True),
            lambda result, error: None,
        )

    @property
    def stop_ready(self) -> bool:
        """STOPPING and nothing left to move (or the deadline passed)."""
        if self.state is not BrokerState.STOPPING or self._stop_deadline_ms is None:
            return False
        if self.now_ms >= self._stop_deadline_ms or self._rm is None:
            return True
        states = self.rm.image.partitions
        return not any(
            len(states[tp].replicas) > 1 for tp in self.rm.leader_partitions() if tp in states
        )

    def halt(self) -> None:
        """Stop every activity (the shell has stopped serving): parked requests dropped,
        group shards unloaded for good (a load would read closing logs), fetch sessions
        ended, the controller role resigned. Effects still in flight report to nobody."""
        self._halted = True
        self.requests.fail_all("broker stopping")
        self.groups.stop(self.now_ms)
        self.fetches.stop()
        self.controller.resign()
        self.metadata.abandon()
        self.cleaning.abort()  # it reports soon; the shell waits for it before closing

    def close_logs(self) -> None:
        """Flush, checkpoint, close every log and write the clean-shutdown markers; then the
        shell unregisters (``unregister``). Call once no fsync is in flight."""
        self.metadata.keeper.save_at_shutdown()
        try:
            self.log_manager.shutdown(self.incarnation_epoch)
        except StorageError as exc:
            _log.error("broker %s: unclean log shutdown: %s", self.broker_id, exc)
        self.state = BrokerState.OFFLINE

    def unregister(self) -> None:
        """End this incarnation's session cleanly."""
        broker_id, incarnation = self.broker_id, self.incarnation_epoch
        if incarnation >= 0:
            self.outbox.call(
                "unregister",
                lambda c: c.unregister_broker(broker_id, incarnation),
                lambda result, error: None,
            )

    def abandon(self) -> None:
        """A crash: logs dropped unflushed, every effect forgotten, the session left to expire."""
        self.controller.drop()
        self.requests.fail_all("broker crashed")
        self.outbox.abandon()
        self.cleaning.abort(forget=True)
        for log in list(self.log_manager.logs.values()):
            log.abandon()
        self.log_manager.logs.clear()
        self.state = BrokerState.OFFLINE

    # ------------------------------------------------------------------ inputs

    def on_tick(self, now_ms: int) -> None:
        """Run every periodic duty that is due."""
        self.now_ms = now_ms
        self.metadata.on_tick(now_ms)
        if self._rm is None or self.state is BrokerState.OFFLINE:
            return
        config = self.config
        if now_ms >= self._next_heartbeat_ms:
            self._next_heartbeat_ms = now_ms + config.heartbeat_interval_ms
            self.metadata.heartbeat()
        if now_ms >= self._next_feed_ms:
            # the controller decides from this image: it is read as often as the role polls
            fast = self.controller.is_controller
            self._next_feed_ms = now_ms + (
                CONTROLLER_POLL_MS if fast else config.metadata_poll_interval_ms
            )
            self.metadata.poll_feed()
        self.metadata.maybe_save_image()
        if not self.active and self.state is not BrokerState.STOPPING:
            return
        rm = self.rm
        rm.tick(now_ms)
        if self._checkpoint_token is None:
            due = rm.checkpoint_due(now_ms)
            if due is not None:  # written off the loop: two fsyncs a file
                self._checkpoint_token = self.outbox.checkpoint(due, self._checkpointed)
        if now_ms >= self._next_retention_ms:
            self._next_retention_ms = now_ms + config.retention_check_interval_ms
            self.exclusive(self._apply_retention)
        if now_ms >= self._next_producer_expiration_ms:
            self._next_producer_expiration_ms = (
                now_ms + config.producer_id_expiration_check_interval_ms
            )
            self.log_manager.remove_expired_producers()
        self.cleaning.maybe_start(now_ms, stopping=self.state is BrokerState.STOPPING)
        self.controller.on_tick(now_ms)
        self.fetches.on_tick(now_ms)
        self.requests.on_tick(now_ms)
        self.groups.on_tick(now_ms)
        if (
            config.durability is DurabilityMode.REPLICATED
            and now_ms >= self._next_replicated_flush_ms
        ):
            self._next_replicated_flush_ms = now_ms + config.checkpoint_interval_ms
            self._start_flush()
        self.after_input()

    def on_request(
        self,
        conn_id: int,
        header: RequestHeader,
        body: Message,
        now_ms: int,
        *,
        client_host: str = "",
    ) -> None:
        """A client connection's request (its only one in the driver); ``client_host`` is the
        client's address (``/127.0.0.1``), which group members are described with."""
        self.now_ms = now_ms
        self.requests.on_request(conn_id, header, body, now_ms, client_host=client_host)
        self.after_input()

    def on_connection_closed(self, conn_id: int, now_ms: int) -> None:
        """A client connection went away."""
        self.now_ms = now_ms
        self.requests.on_connection_closed(conn_id)

    def on_coord_done(
        self, token: int, result: Any, error: BaseException | None, now_ms: int
    ) -> None:
        """The shell ran a ``CoordCall``."""
        self.now_ms = now_ms
        if not self._halted:
            self.outbox.done(token, result, error)
        if self._rm is not None and not self._halted:
            self.after_input()

    def on_broker_response(
        self, token: int, response: Message | None, error: BaseException | None, now_ms: int
    ) -> None:
        """Another broker answered a ``SendToBroker`` (or could not be reached: ``error``): the
        answer goes to the fetch session of the broker the request went to."""
        self.now_ms = now_ms
        broker_id = self.outbox.answered_by(token)
        if broker_id is not None and not self._halted:
            self.fetches.on_answer(broker_id, token, response, error)

    def on_flushes_done(self, token: int, failures: FsyncFailures, now_ms: int) -> None:
        """The shell ran a ``RunFlushes``; ``failures`` the logs whose fsync failed."""
        self.now_ms = now_ms
        self.outbox.done(token, failures, None)

    def on_checkpoints_done(self, token: int, failures: list[tuple[str, str]], now_ms: int) -> None:
        """The shell ran a ``RunCheckpoints``; ``failures`` the log dirs whose write failed."""
        self.now_ms = now_ms
        self.outbox.done(token, failures, None)

    def _checkpointed(self, failures: Any, error: BaseException | None) -> None:
        self._checkpoint_token = None
        for log_dir, reason in failures or ():
            _log.error("broker %s: checkpoint failed in %s: %s", self.broker_id, log_dir, reason)
            self.log_manager.checkpoint_failed([(log_dir, reason)])

    def on_cleaning_done(self, token: int, now_ms: int) -> None:
        """The shell ran a ``RunCleaning``."""
        self.now_ms = now_ms
        self.outbox.done(token, None, None)

    def on_feed_notified(self, now_ms: int) -> None:
        """The coordinator says the feed has new records."""
        self.now_ms = now_ms
        self.metadata.poll_feed()

    def on_session_event(self, event: SessionEvent, now_ms: int) -> None:
        """A session listener's event for this broker."""
        self.now_ms = now_ms
        self.metadata.on_session_event(event)

    # ------------------------------------------------------------------ session and metadata

    def set_session(self, state: SessionState) -> None:
        """The coordinator session's state: metadata is current only while CONNECTED; a
        LOST session comes back as a new incarnation (KIP-903)."""
        rm = self._rm
        if rm is None:
            return
        rm.set_metadata_current(state is SessionState.CONNECTED)
        if state is SessionState.LOST and self.active:
            self._reregister()

    def _reregister(self) -> None:
        self.controller.drop()
        self.incarnation_epoch = -1

        def registered(info: BrokerInfo) -> None:
            self.incarnation_epoch = info.incarnation_epoch
            rm = self.rm
            rm.broker_epoch = info.incarnation_epoch
            for replica in rm.partitions.values():
                replica.broker_epoch = info.incarnation_epoch
            rm.set_metadata_current(True)

        # This process keeps its whole log: the new incarnation is clean -- unless this process
        # started unclean and lost its session before the controller admitted it: then the
        # unclean start is still to be handled (KIP-966), or a replica that lost its unflushed
        # tail would lead on as if it had not.
        self.metadata.register(
            self.now_ms,
            clean_shutdown=not self._unclean_unadmitted,
            then=registered,
            give_up=False,
        )

    def coordinator_unavailable(self, what: str, error: BaseException | None) -> None:
        """A coordinator read failed; the next tick tries again."""
        _log.debug("broker %s: %s unavailable: %s", self.broker_id, what, error)

    def after_metadata(self) -> None:
        """Metadata was applied: fetch sessions follow it, the controller looks at it."""
        if self._metadata_loaded:
            self._maybe_online()
        self.fetches.reconcile(self.now_ms)
        self.groups.reconcile(self.now_ms)
        self.after_input()
        self.controller.on_tick(self.now_ms, soon=True)

    # ------------------------------------------------------------------ outputs of the manager

    def after_input(self) -> None:
        """Drain the manager's outputs after any input: produce completions to their requests,
        ISR proposals and damage reports to the controller, woken long polls, group commits."""
        rm = self._rm
        if rm is None:
            return
        for _ in range(AFTER_INPUT_ROUNDS_MAX):
            ready = rm.take_ready()
            changed, hw_only = rm.take_changed()
            if ready.produce_results:
                self.groups.on_produce_results(ready.produce_results, self.now_ms)
                self.requests.on_produce_results(ready.produce_results, self.now_ms)
            for request in ready.alter_partition:
                self._send_alter_partition(request)
            for tp, first_offset in ready.damaged:
                self._report_damage(tp, first_offset)
            if changed is None or changed or hw_only:
                self.requests.on_data_changed(changed, self.now_ms, hw_only=hw_only)
            if not (ready.produce_results or changed is None or changed or hw_only):
                break
        if self.groups.loading:
            self.groups.advance_loading(self.now_ms)
        if self.config.durability is DurabilityMode.FSYNC:
            self._start_flush()

    def _send_alter_partition(self, request: AlterPartition) -> None:
        if self._alter_inflight >= self.config.alter_partition_queue_max:
            return  # the partition retries: its proposal stays pending
        self._alter_inflight += 1
        payload = attrs.evolve(request, leader_broker_epoch=self.incarnation_epoch)

        def completed(change: AdminRequestChanged | None, why: str) -> None:
            self._alter_inflight -= 1
            if change is None:
                result = AlterPartitionResult(ErrorCode.REQUEST_TIMED_OUT)
            else:
                result = alter_partition_result(change)
            if self._rm is not None:
                self.rm.on_alter_partition_response(request, result, self.now_ms)
                self.after_input()

        deadline_ms = self.now_ms + self.config.request_timeout_ms
        self.metadata.submit(payload, deadline_ms, completed)

    def _report_damage(self, tp: TopicPartition, first_offset: int) -> None:
        _log.error(
            "broker %s: replica %s-%s is damaged from offset %s; asking the controller to take "
            "it out of the ISR", self.broker_id, tp[0], tp[1], first_offset,
        )  # fmt: skip
        payload = DamagedReplica(
            topic=tp[0],
            partition=tp[1],
            broker_id=self.broker_id,
            broker_epoch=self.incarnation_epoch,
            first_offset=first_offset,
        )

        def completed(change: AdminRequestChanged | None, why: str) -> None:
            if change is None or change.outcome is not ErrorCode.NONE:
                _log.warning("broker %s: damage report for %s: %s", self.broker_id, tp, why)

        self.metadata.submit(payload, self.now_ms + self.config.request_timeout_ms, completed)

    def _submit_for_client(
        self, payload: AdminPayload, deadline_ms: int, then: Callable[[AdminResult], None]
    ) -> None:
        def completed(change: AdminRequestChanged | None, why: str) -> None:
            if change is None:
                then(AdminResult(ErrorCode.REQUEST_TIMED_OUT, why))
                return
            result = AdminResult(change.outcome, change.message)
            if isinstance(payload, AllocateProducerIds) and change.outcome is ErrorCode.NONE:
                self._read_producer_id_block(lambda: then(result))
            else:
                then(result)

        self.metadata.submit(payload, deadline_ms, completed)

    def _read_producer_id_block(self, then: Callable[[], None]) -> None:
        """The controller allocated this broker a block of producer ids: read it from the
        store and offer it to the manager, then ``then()`` (whatever the read gave)."""
        broker_id, incarnation = self.broker_id, self.incarnation_epoch

        def done(block: Any, error: BaseException | None) -> None:
            if isinstance(block, ProducerIdBlock):
                self.producer_ids.offer(block, incarnation)
            elif error is not None:
                _log.warning("broker %s: reading its producer ids failed: %s", broker_id, error)
            then()

        self.outbox.call("producer id block", lambda c: c.producer_id_block(broker_id), done)

    def create_topic_in_background(self, payload: CreateTopic) -> bool:
        """Queue an automatic topic creation without waiting for it; False while this broker
        has one for that topic in flight (clients retrying their metadata queue one only)."""
        topic = payload.topic
        if topic in self._auto_creating:
            return False
        self._auto_creating.add(topic)

        def completed(change: AdminRequestChanged | None, why: str) -> None:
            self._auto_creating.discard(topic)
            if change is not None and change.outcome not in (
                ErrorCode.NONE,
                ErrorCode.TOPIC_ALREADY_EXISTS,
            ):
                _log.warning("broker %s: creating topic %r: %s", self.broker_id, topic, why)

        self.metadata.submit(payload, self.now_ms + self.config.request_timeout_ms, completed)
        return True

    # ------------------------------------------------------------------ storage

    def exclusive(self, action: Callable[[], None]) -> None:
        """Run ``action`` (it may truncate or delete logs) now, or once the running fsync ends."""
        if self._flush_token is None:
            action()
        else:
            self._after_flush.append(action)

    def flush_then(self, then: Callable[[int], None]) -> None:
        """Run a group commit (if one is not running already), then ``then(now_ms)``."""
        self._flush_waiters.append(then)
        if self._flush_token is None:
            self._start_flush(force=True)

    def _start_flush(self, *, force: bool = False) -> None:
        if self._flush_token is not None or self._rm is None:
            return
        pending = self.rm.begin_flushes()
        if not pending:
            if force:
                self._flushed([])
            return
        self._flush_token = self.outbox.flush(pending, lambda failures, _: self._flushed(failures))
        self._pending_flush = pending

    def _flushed(self, failures: FsyncFailures) -> None:
        pending, self._pending_flush = self._pending_flush, []
        self._flush_token = None
        rm = self._rm
        if rm is not None:
            failed = {tp for tp, _ in failures}
            for tp, reason in failures:
                rm.fail_flush(tp, reason)
            rm.complete_flushes([p for p in pending if p[0] not in failed], self.now_ms)
        actions, self._after_flush = self._after_flush, []
        for action in actions:
            action()
        waiters, self._flush_waiters = self._flush_waiters, []
        for waiter in waiters:
            waiter(self.now_ms)
        self.after_input()

    def _apply_retention(self) -> None:
        try:
            self.rm.delete_old_segments()
        except StorageError as exc:
            _log.error("broker %s: retention failed: %s", self.broker_id, exc)
