"""The in-memory coordinator: the embedded default and the reference semantics of the contract.

Everything lives in one process under one lock, so every write is trivially atomic and every
read consistent. Time comes from an injected clock (a ``ManualClock`` by default): a session
expires when the clock passes its deadline (last heartbeat + its session timeout), checked at
the start of every call and by ``check_sessions()`` / ``advance()``, in deadline order (ties by
broker id). So a test decides exactly when a broker dies, and the same calls give the same run.

Feed seqs are 1, 2, 3, ... per atomic write (records of one write share it); a broker's
incarnation epoch is the seq of its registration write, like KRaft's broker epoch. The feed keeps
the newest ``feed_retention_max`` records (whole seq groups) and older ones are trimmed.

``SUSPENDED`` is simulated on the broker side: a suspended broker's calls (heartbeat, flag
updates, election, and the writes of the controller it is) raise
``CoordinatorUnavailableError`` while the store keeps its registration and its deadline running.
"""

from __future__ import annotations

import contextlib
import functools
import itertools
from collections.abc import Callable, Iterator, Mapping, Sequence

import attrs

from replog.coord import rules
from replog.coord.contract import (
    ADMIN_QUEUE_LIMIT,
    DEFAULT_TIMEOUT_MS,
    MAX_CHANGES_PER_BATCH,
    Coordinator,
    validate_partition_state,
)
from replog.coord.dispatch import Dispatcher
from replog.coord.errors import (
    BrokerIdInUseError,
    CoordinatorClosedError,
    CoordinatorUnavailableError,
    FencedControllerError,
    SessionExpiredError,
    UnknownTopicError,
)
from replog.coord.feed import FeedLog, ManualClock
from replog.coord.memory.admin_queues import AdminQueues
from replog.coord.memory.timed_lock import TimedLock
from replog.coord.sessions import SessionListeners, session_event
from replog.errors import ErrorCode
from replog.metadata import records
from replog.metadata.types import (
    PRODUCER_ID_BLOCK_SIZE,
    AdminPayload,
    AdminRequest,
    AlterPartitionResult,
    BrokerChangeReason,
    BrokerInfo,
    CasResult,
    ChangeBatch,
    ControllerInfo,
    MetadataChange,
    MetadataSnapshot,
    PartitionState,
    ProducerIdBlock,
    SessionEvent,
    SessionState,
    Subscription,
    TopicAssignment,
    TopicConfigs,
    topic_configs,
)
from replog.topics import new_topic_id

__all__ = ["FEED_RETENTION_MAX", "MemoryCoordinator"]

FEED_RETENTION_MAX = 100_000
"""Default number of feed records the memory store keeps."""


@attrs.define
class _Session:
    broker: BrokerInfo
    session_timeout_ms: int
    deadline_ms: int
    state: SessionState = SessionState.CONNECTED


@attrs.define
class _FeedSubscriber:
    callback: Callable[[ChangeBatch], None]


@attrs.define
class _Topic:
    topic_id: str
    partition_count: int
    configs: TopicConfigs = ()


class MemoryCoordinator(Coordinator):
    """In-process coordinator; see the module docstring. ``clock`` returns ms (default: a new
    ``ManualClock`` at 0, reachable as ``.clock``); ``topic_ids`` makes a new topic's ID (a
    random UUID; the simulator passes a seeded source)."""

    def __init__(
        self,
        *,
        clock: Callable[[], int] | None = None,
        default_timeout_ms: int = DEFAULT_TIMEOUT_MS,
        feed_retention_max: int = FEED_RETENTION_MAX,
        admin_queue_limit: int = ADMIN_QUEUE_LIMIT,
        topic_ids: Callable[[], str] = new_topic_id,
    ) -> None:
        if feed_retention_max < 1 or admin_queue_limit < 1 or default_timeout_ms < 0:
            raise ValueError("feed_retention_max, admin_queue_limit must be >= 1, timeout >= 0")
        self.clock: Callable[[], int] = clock if clock is not None else ManualClock()
        self._default_timeout_ms = default_timeout_ms
        self._topic_ids = topic_ids
        self._lock = TimedLock()
        self._dispatcher = Dispatcher()
        self._closed = False
        self._sessions: dict[int, _Session] = {}
        self._topics: dict[str, _Topic] = {}
        self._partitions: dict[tuple[str, int], PartitionState] = {}
        self._controller: ControllerInfo | None = None
        self._controller_epoch = 0
        self._broker_configs: dict[int, TopicConfigs] = {}
        self._log = FeedLog(feed_retention_max)
        self._admin = AdminQueues(admin_queue_limit)
        self._producer_id_blocks: tuple[ProducerIdBlock, ...] = ()
        self._tokens = itertools.count(1)
        self._feed_subs: dict[int, _FeedSubscriber] = {}
        self._session_listeners = SessionListeners()

    # ---- plumbing ----

    @contextlib.contextmanager
    def _op(self, timeout_ms: int | None, *, expire: bool = True) -> Iterator[None]:
        """Hold the store lock for one call: check closed, expire due sessions, then deliver
        whatever the call queued once the lock is released."""
        self._lock.acquire(self._default_timeout_ms if timeout_ms is None else timeout_ms)
        try:
            if self._closed:
                raise CoordinatorClosedError("the memory coordinator is closed")
            if expire:
                self._expire_due_locked(self.clock())
            yield
        finally:
            self._lock.release()
            self._dispatcher.run()

    def _write(self, build: Callable[[int], Sequence[MetadataChange]]) -> int:
        """Append the records of one atomic write (they share a seq) and queue their delivery."""
        batch = self._log.append(build)
        for token, sub in list(self._feed_subs.items()):
            self._push(token, sub, batch)
        return batch.next_seq - 1

    def _push(self, token: int, sub: _FeedSubscriber, batch: ChangeBatch) -> None:
        def deliver() -> None:
            if token in self._feed_subs:
                sub.callback(batch)

        self._dispatcher.enqueue(deliver)

    def _emit_session(self, session: _Session, state: SessionState) -> None:
        session.state = state
        event = session_event(session.broker.broker_id, session.broker.incarnation_epoch, state)
        for callback in self._session_listeners.callbacks(event.broker_id):
            self._dispatcher.enqueue(functools.partial(callback, event))

    # ---- sessions ----

    def _expire_due_locked(self, now_ms: int) -> list[int]:
        due = sorted(
            (s.deadline_ms, broker_id)
            for broker_id, s in self._sessions.items()
            if s.deadline_ms <= now_ms
        )
        for _, broker_id in due:
            self._end_session_locked(broker_id, BrokerChangeReason.EXPIRED)
        return [broker_id for _, broker_id in due]

    def _end_session_locked(self, broker_id: int, reason: BrokerChangeReason) -> None:
        session = self._sessions.pop(broker_id)
        broker = session.broker
        was_controller = self._controller is not None and self._controller.controller_id == (
            broker_id
        )
        if was_controller:
            self._controller = None
        self._write(
            lambda seq: records.broker_gone(
                seq, reason, broker_id, broker.incarnation_epoch, was_controller=was_controller
            )
        )
        self._emit_session(session, SessionState.LOST)

    def _session_for(self, broker_id: int, incarnation_epoch: int) -> _Session:
        """The incarnation's session, usable for a call acting as that broker."""
        session = self._sessions.get(broker_id)
        rules.check_incarnation(
            broker_id, incarnation_epoch, None if session is None else session.broker
        )
        if session is None:  # pragma: no cover - check_incarnation raised
            raise SessionExpiredError(broker_id, incarnation_epoch, None)
        if session.state is SessionState.SUSPENDED:
            raise CoordinatorUnavailableError(f"broker {broker_id}'s session is suspended")
        return session

    def check_sessions(self) -> list[int]:
        """Expire every session whose deadline has passed; return their broker ids."""
        with self._op(None, expire=False):
            return self._expire_due_locked(self.clock())

    def advance(self, now_ms: int) -> list[int]:
        """Set the ``ManualClock`` to ``now_ms`` and expire what is due; return those ids."""
        if not isinstance(self.clock, ManualClock):
            raise TypeError("advance() needs a ManualClock; this coordinator has another clock")
        self.clock.set(now_ms)
        return self.check_sessions()

    def expire_session(self, broker_id: int) -> None:
        """Test hook: expire the broker's session now (no-op without one)."""
        with self._op(None):
            if broker_id in self._sessions:
                self._end_session_locked(broker_id, BrokerChangeReason.EXPIRED)

    def suspend_session(self, broker_id: int) -> None:
        """Test hook: cut the broker off (SUSPENDED); its deadline keeps running."""
        with self._op(None):
            session = self._sessions.get(broker_id)
            if session is not None and session.state is SessionState.CONNECTED:
                self._emit_session(session, SessionState.SUSPENDED)

    def resume_session(self, broker_id: int) -> None:
        """Test hook: reconnect; CONNECTED with a fresh deadline unless it expired meanwhile."""
        with self._op(None):
            session = self._sessions.get(broker_id)
            if session is not None and session.state is SessionState.SUSPENDED:
                session.deadline_ms = self.clock() + session.session_timeout_ms
                self._emit_session(session, SessionState.CONNECTED)

    # ---- lifecycle ----

    @property
    def closed(self) -> bool:
        """Whether ``close()`` was called."""
        return self._closed

    def close(self) -> None:
        """Close the store: sessions end (LOST to their listeners) and listeners stop."""
        with self._lock.held(self._default_timeout_ms):
            if self._closed:
                return
            for session in self._sessions.values():
                self._emit_session(session, SessionState.LOST)
            self._sessions.clear()
            self._controller = None
            self._closed = True
        self._dispatcher.run()
        self._feed_subs.clear()
        self._session_listeners.clear()

    # ---- brokers ----

    def register_broker(
        self,
        broker_id: int,
        host: str,
        port: int,
        *,
        rack: str | None = None,
        session_timeout_ms: int,
        timeout_ms: int | None = None,
        clean_shutdown: bool = True,
        fenced: bool = False,
    ) -> BrokerInfo:
        """See ``Coordinator.register_broker``."""
        rules.check_registration(broker_id, session_timeout_ms)
        with self._op(timeout_ms):
            held = self._sessions.get(broker_id)
            if held is not None:
                raise BrokerIdInUseError(broker_id, held.broker.incarnation_epoch)
            broker = rules.registration(
                broker_id,
                self._log.next_seq,
                host,
                port,
                rack,
                clean_shutdown=clean_shutdown,
                fenced=fenced,
            )
            session = _Session(broker, session_timeout_ms, self.clock() + session_timeout_ms)
            self._sessions[broker_id] = session
            self._write(lambda seq: records.broker_registered(seq, broker))
            self._emit_session(session, SessionState.CONNECTED)
            return broker

    def heartbeat(
        self, broker_id: int, incarnation_epoch: int, *, timeout_ms: int | None = None
    ) -> SessionState:
        """See ``Coordinator.heartbeat``."""
        with self._op(timeout_ms):
            session = self._session_for(broker_id, incarnation_epoch)
            session.deadline_ms = self.clock() + session.session_timeout_ms
            return session.state

    def update_broker(
        self,
        broker_id: int,
        incarnation_epoch: int,
        *,
        fenced: bool | None = None,
        in_controlled_shutdown: bool | None = None,
        timeout_ms: int | None = None,
    ) -> BrokerInfo:
        """See ``Coordinator.update_broker``."""
        with self._op(timeout_ms):
            session = self._session_for(broker_id, incarnation_epoch)
            new = rules.updated_broker(session.broker, fenced, in_controlled_shutdown)
            if new != session.broker:
                session.broker = new
                self._write(lambda seq: records.broker_updated(seq, new))
            return new

    def admit_broker(
        self,
        broker_id: int,
        incarnation_epoch: int,
        *,
        controller_epoch: int,
        timeout_ms: int | None = None,
    ) -> bool:
        """See ``Coordinator.admit_broker``."""
        with self._op(timeout_ms):
            rules.check_controller_epoch(self._controller, controller_epoch)
            session = self._sessions.get(broker_id)
            new = rules.admitted_broker(
                None if session is None else session.broker, incarnation_epoch
            )
            if session is None or new is None:
                return False
            if new != session.broker:
                session.broker = new
                self._write(lambda seq: records.broker_updated(seq, new))
            return True

    def unregister_broker(
        self, broker_id: int, incarnation_epoch: int, *, timeout_ms: int | None = None
    ) -> bool:
        """See ``Coordinator.unregister_broker``."""
        with self._op(timeout_ms):
            try:
                self._session_for(broker_id, incarnation_epoch)
            except SessionExpiredError:
                return False
            self._end_session_locked(broker_id, BrokerChangeReason.UNREGISTERED)
            return True

    def get_broker(self, broker_id: int, *, timeout_ms: int | None = None) -> BrokerInfo | None:
        """See ``Coordinator.get_broker``."""
        with self._op(timeout_ms):
            session = self._sessions.get(broker_id)
            return None if session is None else session.broker

    def live_brokers(self, *, timeout_ms: int | None = None) -> dict[int, BrokerInfo]:
        """See ``Coordinator.live_brokers``."""
        with self._op(timeout_ms):
            return {b: s.broker for b, s in sorted(self._sessions.items())}

    def session_state(self, broker_id: int) -> SessionState:
        """See ``Coordinator.session_state`` (also expires due sessions first)."""
        with self._op(None):
            session = self._sessions.get(broker_id)
            return SessionState.LOST if session is None else session.state

    def add_session_listener(
        self, broker_id: int, callback: Callable[[SessionEvent], None]
    ) -> Subscription:
        """See ``Coordinator.add_session_listener``."""
        with self._op(None):
            return self._session_listeners.add(broker_id, callback)

    # ---- controller ----

    def elect_controller(
        self, broker_id: int, incarnation_epoch: int, *, timeout_ms: int | None = None
    ) -> ControllerInfo:
        """See ``Coordinator.elect_controller``."""
        with self._op(timeout_ms):
            self._session_for(broker_id, incarnation_epoch)
            if self._controller is not None:
                return self._controller
            self._controller_epoch += 1
            controller = ControllerInfo(broker_id, self._controller_epoch, incarnation_epoch)
            self._controller = controller
            self._write(lambda seq: records.controller_changed(seq, controller))
            return controller

    def resign_controller(
        self, broker_id: int, controller_epoch: int, *, timeout_ms: int | None = None
    ) -> bool:
        """See ``Coordinator.resign_controller``."""
        with self._op(timeout_ms):
            current = self._controller
            if current is None or not rules.holds_controller(current, broker_id, controller_epoch):
                return False
            self._session_for(broker_id, current.incarnation_epoch)
            self._controller = None
            self._write(lambda seq: records.controller_changed(seq, None))
            return True

    def current_controller(self, *, timeout_ms: int | None = None) -> ControllerInfo | None:
        """See ``Coordinator.current_controller``."""
        with self._op(timeout_ms):
            return self._controller

    def _check_controller(self, controller_epoch: int) -> None:
        """Raise unless ``controller_epoch`` is the active controller's and it is reachable."""
        active = rules.check_controller_epoch(self._controller, controller_epoch)
        self._session_for(active.controller_id, active.incarnation_epoch)

    # ---- topics and partitions ----

    def _assignment(self, topic: str) -> TopicAssignment:
        info = self._topics[topic]
        replicas = [self._partitions[(topic, p)].replicas for p in range(info.partition_count)]
        return TopicAssignment(
            topic=topic, topic_id=info.topic_id, replicas=replicas, configs=info.configs
        )

    def create_topic(
        self,
        topic: str,
        replica_assignment: Sequence[Sequence[int]],
        *,
        controller_epoch: int,
        initial_states: Sequence[PartitionState] | None = None,
        configs: Mapping[str, str] | None = None,
        timeout_ms: int | None = None,
    ) -> TopicAssignment:
        """See ``Coordinator.create_topic``."""
        assignment, states, stored_configs = rules.new_topic(
            topic, replica_assignment, initial_states, configs
        )
        with self._op(timeout_ms):
            self._check_controller(controller_epoch)
            rules.check_topic_free(topic, self._topics)
            result = TopicAssignment(
                topic=topic,
                topic_id=self._topic_ids(),
                replicas=assignment,
                configs=stored_configs,
            )
            self._topics[topic] = _Topic(result.topic_id, len(assignment), stored_configs)
            for p, state in enumerate(states):
                self._partitions[(topic, p)] = state
            self._write(lambda seq: records.topic_created(seq, result, states))
            return result

    def delete_topic(
        self, topic: str, *, controller_epoch: int, timeout_ms: int | None = None
    ) -> TopicAssignment:
        """See ``Coordinator.delete_topic``."""
        with self._op(timeout_ms):
            self._check_controller(controller_epoch)
            if topic not in self._topics:
                raise UnknownTopicError(topic)
            removed = self._assignment(topic)
            for p in range(removed.partition_count):
                del self._partitions[(topic, p)]
            del self._topics[topic]
            self._write(lambda seq: records.topic_deleted(seq, removed))
            return removed

    def add_partitions(
        self,
        topic: str,
        new_replica_assignment: Sequence[Sequence[int]],
        *,
        controller_epoch: int,
        initial_states: Sequence[PartitionState] | None = None,
        timeout_ms: int | None = None,
    ) -> TopicAssignment:
        """See ``Coordinator.add_partitions``."""
        _, states = rules.new_partitions(new_replica_assignment, initial_states)
        with self._op(timeout_ms):
            self._check_controller(controller_epoch)
            info = self._topics.get(topic)
            if info is None:
                raise UnknownTopicError(topic)
            first = info.partition_count
            for i, state in enumerate(states):
                self._partitions[(topic, first + i)] = state
            info.partition_count += len(states)
            result = self._assignment(topic)
            self._write(lambda seq: records.partitions_added(seq, result, first, states))
            return result

    def list_topics(self, *, timeout_ms: int | None = None) -> list[str]:
        """See ``Coordinator.list_topics``."""
        with self._op(timeout_ms):
            return sorted(self._topics)

    def get_topic(self, topic: str, *, timeout_ms: int | None = None) -> TopicAssignment | None:
        """See ``Coordinator.get_topic``."""
        with self._op(timeout_ms):
            return self._assignment(topic) if topic in self._topics else None

    def get_partition_state(
        self, topic: str, partition: int, *, timeout_ms: int | None = None
    ) -> PartitionState | None:
        """See ``Coordinator.get_partition_state``."""
        with self._op(timeout_ms):
            return self._partitions.get((topic, partition))

    def compare_and_set_partition_state(
        self,
        topic: str,
        partition: int,
        expected_partition_epoch: int,
        new_state: PartitionState,
        *,
        controller_epoch: int,
        timeout_ms: int | None = None,
    ) -> CasResult:
        """See ``Coordinator.compare_and_set_partition_state``."""
        validate_partition_state(new_state)
        with self._op(timeout_ms):
            try:
                self._check_controller(controller_epoch)
            except FencedControllerError as e:
                return rules.cas_fenced(e)
            current = self._partitions.get((topic, partition))
            stored = rules.cas_decision(current, expected_partition_epoch, new_state)
            if isinstance(stored, CasResult):
                return stored
            self._partitions[(topic, partition)] = stored
            seq = self._write(lambda s: records.partition_changed(s, topic, partition, stored))
            return rules.cas_ok(stored, seq)

    # ---- dynamic configs ----

    def alter_topic_configs(
        self,
        topic: str,
        configs: Mapping[str, str],
        *,
        controller_epoch: int,
        timeout_ms: int | None = None,
    ) -> TopicAssignment:
        """See ``Coordinator.alter_topic_configs``."""
        stored = topic_configs(configs)
        with self._op(timeout_ms):
            self._check_controller(controller_epoch)
            info = self._topics.get(topic)
            if info is None:
                raise UnknownTopicError(topic)
            info.configs = stored
            result = self._assignment(topic)
            self._write(lambda seq: records.topic_configs_altered(seq, result))
            return result

    def alter_broker_configs(
        self,
        broker_id: int,
        configs: Mapping[str, str],
        *,
        controller_epoch: int,
        timeout_ms: int | None = None,
    ) -> None:
        """See ``Coordinator.alter_broker_configs``."""
        stored = rules.broker_configs_to_store(broker_id, configs)
        with self._op(timeout_ms):
            self._check_controller(controller_epoch)
            if stored:
                self._broker_configs[broker_id] = stored
            else:
                self._broker_configs.pop(broker_id, None)
            self._write(lambda seq: records.broker_configs_altered(seq, broker_id, stored))

    def broker_configs(self, *, timeout_ms: int | None = None) -> dict[int, TopicConfigs]:
        """See ``Coordinator.broker_configs``."""
        with self._op(timeout_ms):
            return dict(sorted(self._broker_configs.items()))

    # ---- feed ----

    def changes_since(
        self,
        seq: int,
        *,
        max_changes: int = MAX_CHANGES_PER_BATCH,
        timeout_ms: int | None = None,
    ) -> ChangeBatch:
        """See ``Coordinator.changes_since``."""
        rules.check_feed_read(seq, max_changes)
        with self._op(timeout_ms):
            return self._log.read(seq, max_changes)

    def snapshot(self, *, timeout_ms: int | None = None) -> MetadataSnapshot:
        """See ``Coordinator.snapshot``."""
        with self._op(timeout_ms):
            return MetadataSnapshot(
                seq=self._log.next_seq,
                brokers={b: s.broker for b, s in sorted(self._sessions.items())},
                topics={t: self._assignment(t) for t in sorted(self._topics)},
                partitions=dict(sorted(self._partitions.items())),
                controller=self._controller,
                controller_epoch=self._controller_epoch,
                broker_configs=dict(sorted(self._broker_configs.items())),
            )

    def subscribe(
        self, callback: Callable[[ChangeBatch], None], *, from_seq: int | None = None
    ) -> Subscription:
        """See ``Coordinator.subscribe``."""
        with self._op(None):
            token = next(self._tokens)
            sub = _FeedSubscriber(callback)
            self._feed_subs[token] = sub
            head = self._log.next_seq
            if from_seq is not None and from_seq < self._log.trimmed_before:
                self._push(token, sub, ChangeBatch((), head, resync_required=True))
            elif from_seq is not None and (backlog := self._log.tail(from_seq)):
                self._push(token, sub, ChangeBatch(backlog, head))

        def cancel() -> None:
            with self._lock.held(self._default_timeout_ms):
                self._feed_subs.pop(token, None)

        return Subscription(cancel)

    def trim_history(self, before_seq: int, *, timeout_ms: int | None = None) -> int:
        """See ``Coordinator.trim_history``."""
        with self._op(timeout_ms):
            return self._log.trim(before_seq)

    # ---- admin queue ----

    def submit_admin_request(
        self, target: int, payload: AdminPayload, *, timeout_ms: int | None = None
    ) -> AdminRequest:
        """See ``Coordinator.submit_admin_request``."""
        with self._op(timeout_ms):
            return self._admin.submit(self._write, target, payload)

    def pending_admin_requests(
        self, target: int, *, timeout_ms: int | None = None
    ) -> list[AdminRequest]:
        """See ``Coordinator.pending_admin_requests``."""
        with self._op(timeout_ms):
            return self._admin.pending(target)

    def complete_admin_request(
        self,
        request_id: int,
        *,
        outcome: ErrorCode = ErrorCode.NONE,
        message: str = "",
        result: AlterPartitionResult | None = None,
        controller_epoch: int | None = None,
        timeout_ms: int | None = None,
    ) -> bool:
        """See ``Coordinator.complete_admin_request``."""
        with self._op(timeout_ms):
            if controller_epoch is not None:
                self._check_controller(controller_epoch)
            return self._admin.complete(self._write, request_id, outcome, message, result)

    # ---- producer ids ----

    def allocate_producer_ids(
        self,
        broker_id: int,
        broker_epoch: int,
        *,
        count: int = PRODUCER_ID_BLOCK_SIZE,
        controller_epoch: int,
        timeout_ms: int | None = None,
    ) -> ProducerIdBlock:
        """See ``Coordinator.allocate_producer_ids``."""
        with self._op(timeout_ms):
            self._check_controller(controller_epoch)
            block, self._producer_id_blocks = rules.allocated_producer_ids(
                self._producer_id_blocks, broker_id, broker_epoch, count
            )
            return block

    def producer_id_block(
        self, broker_id: int, *, timeout_ms: int | None = None
    ) -> ProducerIdBlock | None:
        """See ``Coordinator.producer_id_block``."""
        with self._op(timeout_ms):
            return next((b for b in self._producer_id_blocks if b.broker_id == broker_id), None)
