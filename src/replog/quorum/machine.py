"""`MetadataMachine`: the coordination contract as the state machine of the metadata log.

Theory of operation. Every voter of the built-in quorum applies the same committed commands
(``quorum/commands.py``) in log order, so every voter holds the same image: broker registrations
with their session timeouts, the controller role and its epoch, topics with their IDs, configs
and partition states, the admin request queues, the retained change feed, and the store's
cluster id (`InitCluster`). A command is
decided *when it is applied*, against the image at that offset, with the rules every backend
shares (``replog.coord.rules``, ``records``, ``admin``): the outcome of a CAS, a fenced
controller, a broker id in use are all functions of the log, never of a clock or of who
proposed. Nothing here reads time, randomness or files (sans-IO, like ``replog.isr``).

``apply`` returns what the call returns (a value) or the error it raises (an exception
*instance*, never raised here): an error leaves the image unchanged, and a record that changes
nothing still occupies its offset. The feed records of a command have its log offset as their
seq, so seqs grow with the log and are the same on every voter. The history kept is the newest
``feed_retention_max`` records, trimmed by ``TrimHistory`` commands too (the same on every
voter); a voter that loads a snapshot (KIP-630) keeps no history below it -- a reader there
gets ``MustResyncError`` and re-reads the image, as a KRaft broker below the log start loads
the snapshot.

Queries (``query``) read the image; ``quorum/frontend.py`` decides when that is linearizable.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import attrs

from replog.coord import rules
from replog.coord.admin import requests_to_drop, validate_admin_request
from replog.coord.contract import ADMIN_QUEUE_LIMIT, validate_partition_state
from replog.coord.errors import (
    BrokerIdInUseError,
    FencedControllerError,
    SessionExpiredError,
    UnknownTopicError,
)
from replog.coord.feed import FeedLog
from replog.errors import CorruptRecordError, ProtocolError, ReplogError, invariant
from replog.metadata import records
from replog.metadata.types import (
    AdminRequest,
    BrokerChangeReason,
    BrokerInfo,
    CasResult,
    ControllerInfo,
    MetadataChange,
    MetadataSnapshot,
    PartitionState,
    ProducerIdBlock,
    SessionState,
    TopicAssignment,
    TopicConfigs,
    topic_configs,
)
from replog.quorum import codec as raft_codec
from replog.quorum.commands import (
    AddPartitionsWrite,
    AdmitBroker,
    AllocateProducerIdsWrite,
    AlterBrokerConfigsWrite,
    AlterTopicConfigsWrite,
    Barrier,
    CasPartitionState,
    ChangesSince,
    Command,
    CompleteAdminRequest,
    CreateTopicWrite,
    CurrentController,
    DeleteTopicWrite,
    ElectController,
    ExpireSession,
    FeedHead,
    GetBroker,
    GetBrokerConfigs,
    GetClusterId,
    GetPartitionState,
    GetProducerIdBlock,
    GetSnapshot,
    GetTopic,
    Heartbeat,
    InitCluster,
    ListTopics,
    LiveBrokers,
    PendingAdminRequests,
    Query,
    RegisterBroker,
    ResignController,
    SnapshotAdmin,
    SnapshotBroker,
    SnapshotBrokerConfigs,
    SnapshotMeta,
    SnapshotTopic,
    SubmitAdminRequest,
    TrimHistory,
    UnregisterBroker,
    UpdateBroker,
    Watch,
)
from replog.raft.entries import Entry

__all__ = ["FEED_RETENTION_MAX", "MetadataMachine", "Registration"]

FEED_RETENTION_MAX = 100_000
"""Default number of feed records every voter keeps (the memory backend's default)."""

Outcome = object
"""What a command or query gives: its return value, or the exception it raises (an
instance)."""


@attrs.frozen
class Registration:
    """A live broker registration and the session timeout it was registered with."""

    broker: BrokerInfo
    session_timeout_ms: int


@attrs.define
class _TopicEntry:
    topic_id: str
    configs: TopicConfigs
    partition_count: int


class MetadataMachine:
    """The metadata image and the commands that change it; implements
    ``replog.raft.node.StateMachine`` (see the module docstring)."""

    def __init__(
        self,
        *,
        feed_retention_max: int = FEED_RETENTION_MAX,
        admin_queue_limit: int = ADMIN_QUEUE_LIMIT,
    ) -> None:
        if feed_retention_max < 1 or admin_queue_limit < 1:
            raise ValueError("feed_retention_max and admin_queue_limit must be >= 1")
        self._retention_max = feed_retention_max
        self._admin_limit = admin_queue_limit
        self._brokers: dict[int, Registration] = {}
        self._topics: dict[str, _TopicEntry] = {}
        self._partitions: dict[tuple[str, int], PartitionState] = {}
        self._controller: ControllerInfo | None = None
        self._controller_epoch = 0
        self._feed = FeedLog(feed_retention_max)
        self._admin: dict[int, dict[int, AdminRequest]] = {}
        self._producer_id_blocks: tuple[ProducerIdBlock, ...] = ()
        self._admin_target: dict[int, int] = {}
        self._broker_configs: dict[int, TopicConfigs] = {}
        self._cluster_id: str | None = None

    def _clear(self, feed_next_seq: int) -> None:
        """Forget the image; the feed history starts (empty) at ``feed_next_seq``."""
        self._brokers, self._topics, self._partitions = {}, {}, {}
        self._controller, self._controller_epoch = None, 0
        self._feed = FeedLog(self._retention_max)
        self._feed.next_seq = self._feed.trimmed_before = feed_next_seq
        self._admin, self._admin_target = {}, {}
        self._producer_id_blocks = ()
        self._broker_configs = {}
        self._cluster_id = None

    # ------------------------------------------------------------------ StateMachine

    def apply(self, entry: Entry) -> Outcome:
        """Apply one committed command (its offset is the seq of its feed records)."""
        try:
            command = raft_codec.loads(entry.value)
        except ProtocolError as exc:
            raise CorruptRecordError(f"metadata record at {entry.offset}: {exc}") from exc
        return self.apply_command(entry.offset, command)

    def apply_command(self, offset: int, command: Command) -> Outcome:
        """Apply ``command`` as the record at ``offset`` (tests and the simulator's reference
        model call this directly)."""
        invariant(offset >= self._feed.next_seq, f"command at {offset} below the feed head")
        handler = _HANDLERS.get(type(command))
        if handler is None:
            raise CorruptRecordError(f"metadata record at {offset} is not a command: {command!r}")
        try:
            return handler(self, offset, command)
        except (ReplogError, ValueError) as exc:  # decided by the rules: the call's error
            return exc

    def snapshot(self) -> list[bytes]:
        """The image as records: the meta record, then brokers, dynamic broker configs, topics
        and admin requests."""
        items: list[object] = [
            SnapshotMeta(
                controller=self._controller,
                controller_epoch=self._controller_epoch,
                feed_next_seq=self._feed.next_seq,
                producer_id_blocks=self._producer_id_blocks,
                cluster_id=self._cluster_id,
            )
        ]
        items += [
            SnapshotBroker(broker=r.broker, session_timeout_ms=r.session_timeout_ms)
            for _, r in sorted(self._brokers.items())
        ]
        items += [
            SnapshotBrokerConfigs(broker_id=b, configs=configs)
            for b, configs in sorted(self._broker_configs.items())
        ]
        for name, topic in sorted(self._topics.items()):
            states = tuple(self._partitions[(name, p)] for p in range(topic.partition_count))
            items.append(
                SnapshotTopic(
                    topic=name, topic_id=topic.topic_id, configs=topic.configs, states=states
                )
            )
        requests = sorted(
            (r for queue in self._admin.values() for r in queue.values()),
            key=lambda r: r.request_id,
        )
        items += [SnapshotAdmin(request=r) for r in requests]
        return [raft_codec.dumps(item) for item in items]

    def restore(self, snapshot_records: Sequence[bytes]) -> None:
        """Replace the image with a snapshot's; the feed history starts at its head. A
        snapshot that does not parse raises `CorruptRecordError` and changes nothing."""
        try:
            items = [raft_codec.loads(data) for data in snapshot_records]
        except ProtocolError as exc:
            raise CorruptRecordError(f"metadata snapshot record: {exc}") from exc
        if not items or not isinstance(items[0], SnapshotMeta):
            raise CorruptRecordError("a metadata snapshot starts with its meta record")
        meta = items[0]
        self._clear(meta.feed_next_seq)
        self._controller, self._controller_epoch = meta.controller, meta.controller_epoch
        self._producer_id_blocks = meta.producer_id_blocks
        self._cluster_id = meta.cluster_id
        for item in items[1:]:
            if isinstance(item, SnapshotBroker):
                registration = Registration(item.broker, item.session_timeout_ms)
                self._brokers[item.broker.broker_id] = registration
            elif isinstance(item, SnapshotBrokerConfigs):
                self._broker_configs[item.broker_id] = item.configs
            elif isinstance(item, SnapshotTopic):
                self._topics[item.topic] = _TopicEntry(
                    item.topic_id, item.configs, len(item.states)
                )
                for p, state in enumerate(item.states):
                    self._partitions[(item.topic, p)] = state
            elif isinstance(item, SnapshotAdmin):
                request = item.request
                self._admin.setdefault(request.target, {})[request.request_id] = request
                self._admin_target[request.request_id] = request.target
            else:
                raise CorruptRecordError(f"not a metadata snapshot record: {item!r}")

    def state(self) -> tuple[bytes, ...]:
        """The image as a comparable value (the simulator compares voters with it)."""
        return tuple(self.snapshot())

    # ------------------------------------------------------------------ what the frontend reads

    @property
    def cluster_id(self) -> str | None:
        """The store's id (`InitCluster`), None until one is applied."""
        return self._cluster_id

    @property
    def feed_next_seq(self) -> int:
        """The feed head: every feed record from now on has a seq at least this."""
        return self._feed.next_seq

    def registrations(self) -> dict[int, Registration]:
        """Live registrations by broker id (the leader tracks their session deadlines)."""
        return dict(self._brokers)

    def leads_partitions(self, broker_id: int) -> bool:
        """Whether ``broker_id`` is the leader of any partition (a broker in controlled
        shutdown may finish once it leads none: BrokerHeartbeat's ``should_shut_down``)."""
        return any(state.leader == broker_id for state in self._partitions.values())

    def query(self, query: Query) -> Outcome:
        """Answer a read from the image (a value, or the error the call raises)."""
        try:
            return self._query(query)
        except (ReplogError, ValueError) as exc:
            return exc

    def _query(self, query: Query) -> object:
        match query:
            case GetBroker(broker_id=broker_id):
                found = self._brokers.get(broker_id)
                return None if found is None else found.broker
            case LiveBrokers():
                return {b: r.broker for b, r in sorted(self._brokers.items())}
            case CurrentController():
                return self._controller
            case ListTopics():
                return sorted(self._topics)
            case GetTopic(topic=topic):
                return self._assignment(topic) if topic in self._topics else None
            case GetPartitionState(topic=topic, partition=partition):
                return self._partitions.get((topic, partition))
            case (
                ChangesSince(seq=seq, max_changes=max_changes)
                | Watch(seq=seq, max_changes=max_changes)
            ):
                rules.check_feed_read(seq, max_changes)
                return self._feed.read(seq, max_changes)
            case GetSnapshot():
                return self._image()
            case PendingAdminRequests(target=target):
                return list(self._admin.get(target, {}).values())
            case FeedHead():
                return self._feed.next_seq
            case GetProducerIdBlock(broker_id=broker_id):
                return next((b for b in self._producer_id_blocks if b.broker_id == broker_id), None)
            case GetBrokerConfigs():
                return dict(sorted(self._broker_configs.items()))
            case GetClusterId():
                return self._cluster_id
            case Heartbeat(broker_id=broker_id, incarnation_epoch=incarnation):
                current = self._brokers.get(broker_id)
                rules.check_incarnation(
                    broker_id, incarnation, None if current is None else current.broker
                )
                return SessionState.CONNECTED
        raise ValueError(f"not a query: {query!r}")

    def has_changes_from(self, seq: int) -> bool:
        """Whether a ``Watch`` from ``seq`` has something to return (records, or a gap)."""
        return seq < self._feed.trimmed_before or self._feed.next_seq > seq

    def _image(self) -> MetadataSnapshot:
        return MetadataSnapshot(
            seq=self._feed.next_seq,
            brokers={b: r.broker for b, r in sorted(self._brokers.items())},
            topics={t: self._assignment(t) for t in sorted(self._topics)},
            partitions=dict(sorted(self._partitions.items())),
            controller=self._controller,
            controller_epoch=self._controller_epoch,
            broker_configs=dict(sorted(self._broker_configs.items())),
            cluster_id=self._cluster_id,
        )

    def _assignment(self, topic: str) -> TopicAssignment:
        info = self._topics[topic]
        replicas = [self._partitions[(topic, p)].replicas for p in range(info.partition_count)]
        return TopicAssignment(
            topic=topic, topic_id=info.topic_id, replicas=replicas, configs=info.configs
        )

    # ------------------------------------------------------------------ brokers

    def _write(self, seq: int, build: Callable[[int], Sequence[MetadataChange]]) -> None:
        """Append one command's feed records, all with seq ``seq`` (its offset)."""
        invariant(seq >= self._feed.next_seq, f"feed seq {seq} below {self._feed.next_seq}")
        self._feed.next_seq = seq
        self._feed.append(build)

    def _register(self, seq: int, c: RegisterBroker) -> Outcome:
        rules.check_registration(c.broker_id, c.session_timeout_ms)
        held = self._brokers.get(c.broker_id)
        if held is not None:
            return BrokerIdInUseError(c.broker_id, held.broker.incarnation_epoch)
        broker = rules.registration(
            c.broker_id,
            seq,
            c.host,
            c.port,
            c.rack,
            clean_shutdown=c.clean_shutdown,
            fenced=c.fenced,
        )
        self._brokers[c.broker_id] = Registration(broker, c.session_timeout_ms)
        self._write(seq, lambda s: records.broker_registered(s, broker))
        return broker

    def _current(self, broker_id: int, incarnation_epoch: int) -> Registration:
        """The incarnation's registration, else ``SessionExpiredError``."""
        found = self._brokers.get(broker_id)
        if found is None:
            raise SessionExpiredError(broker_id, incarnation_epoch, None)
        rules.check_incarnation(broker_id, incarnation_epoch, found.broker)
        return found

    def _update(self, seq: int, c: UpdateBroker) -> Outcome:
        registration = self._current(c.broker_id, c.incarnation_epoch)
        new = rules.updated_broker(registration.broker, c.fenced, c.in_controlled_shutdown)
        if new != registration.broker:
            self._brokers[c.broker_id] = attrs.evolve(registration, broker=new)
            self._write(seq, lambda s: records.broker_updated(s, new))
        return new

    def _admit(self, seq: int, c: AdmitBroker) -> Outcome:
        rules.check_controller_epoch(self._controller, c.controller_epoch)
        registration = self._brokers.get(c.broker_id)
        new = rules.admitted_broker(
            None if registration is None else registration.broker, c.incarnation_epoch
        )
        if registration is None or new is None:
            return False
        if new != registration.broker:
            self._brokers[c.broker_id] = attrs.evolve(registration, broker=new)
            self._write(seq, lambda s: records.broker_updated(s, new))
        return True

    def _unregister(self, seq: int, c: UnregisterBroker) -> Outcome:
        found = self._brokers.get(c.broker_id)
        if found is None or found.broker.incarnation_epoch != c.incarnation_epoch:
            return False
        self._end_session(seq, c.broker_id, BrokerChangeReason.UNREGISTERED)
        return True

    def _expire(self, seq: int, c: ExpireSession) -> Outcome:
        found = self._brokers.get(c.broker_id)
        if found is None:
            return None
        incarnation = found.broker.incarnation_epoch
        if c.incarnation_epoch is not None and c.incarnation_epoch != incarnation:
            return None
        self._end_session(seq, c.broker_id, BrokerChangeReason.EXPIRED)
        return incarnation

    def _end_session(self, seq: int, broker_id: int, reason: BrokerChangeReason) -> None:
        broker = self._brokers.pop(broker_id).broker
        was_controller = self._controller is not None and (
            self._controller.controller_id == broker_id
        )
        if was_controller:
            self._controller = None
        self._write(
            seq,
            lambda s: records.broker_gone(
                s, reason, broker_id, broker.incarnation_epoch, was_controller=was_controller
            ),
        )

    # ------------------------------------------------------------------ controller

    def _elect(self, seq: int, c: ElectController) -> Outcome:
        self._current(c.broker_id, c.incarnation_epoch)
        if self._controller is not None:
            return self._controller
        self._controller_epoch += 1
        controller = ControllerInfo(c.broker_id, self._controller_epoch, c.incarnation_epoch)
        self._controller = controller
        self._write(seq, lambda s: records.controller_changed(s, controller))
        return controller

    def _resign(self, seq: int, c: ResignController) -> Outcome:
        if not rules.holds_controller(self._controller, c.broker_id, c.controller_epoch):
            return False
        self._controller = None
        self._write(seq, lambda s: records.controller_changed(s, None))
        return True

    # ------------------------------------------------------------------ topics and partitions

    def _create_topic(self, seq: int, c: CreateTopicWrite) -> Outcome:
        assignment, states, configs = rules.new_topic(
            c.topic, c.replica_assignment, c.initial_states, dict(c.configs)
        )
        rules.check_controller_epoch(self._controller, c.controller_epoch)
        rules.check_topic_free(c.topic, self._topics)
        result = TopicAssignment(
            topic=c.topic, topic_id=c.topic_id, replicas=assignment, configs=configs
        )
        self._topics[c.topic] = _TopicEntry(c.topic_id, configs, len(assignment))
        for p, state in enumerate(states):
            self._partitions[(c.topic, p)] = state
        self._write(seq, lambda s: records.topic_created(s, result, states))
        return result

    def _delete_topic(self, seq: int, c: DeleteTopicWrite) -> Outcome:
        rules.check_controller_epoch(self._controller, c.controller_epoch)
        if c.topic not in self._topics:
            raise UnknownTopicError(c.topic)
        removed = self._assignment(c.topic)
        for p in range(removed.partition_count):
            del self._partitions[(c.topic, p)]
        del self._topics[c.topic]
        self._write(seq, lambda s: records.topic_deleted(s, removed))
        return removed

    def _add_partitions(self, seq: int, c: AddPartitionsWrite) -> Outcome:
        _, states = rules.new_partitions(c.replica_assignment, c.initial_states)
        rules.check_controller_epoch(self._controller, c.controller_epoch)
        info = self._topics.get(c.topic)
        if info is None:
            raise UnknownTopicError(c.topic)
        first = info.partition_count
        for i, state in enumerate(states):
            self._partitions[(c.topic, first + i)] = state
        info.partition_count += len(states)
        result = self._assignment(c.topic)
        self._write(seq, lambda s: records.partitions_added(s, result, first, states))
        return result

    def _cas(self, seq: int, c: CasPartitionState) -> Outcome:
        validate_partition_state(c.new_state)
        try:
            rules.check_controller_epoch(self._controller, c.controller_epoch)
        except FencedControllerError as exc:
            return rules.cas_fenced(exc)
        current = self._partitions.get((c.topic, c.partition))
        stored = rules.cas_decision(current, c.expected_partition_epoch, c.new_state)
        if isinstance(stored, CasResult):
            return stored
        self._partitions[(c.topic, c.partition)] = stored
        self._write(seq, lambda s: records.partition_changed(s, c.topic, c.partition, stored))
        return rules.cas_ok(stored, seq)

    # ------------------------------------------------------------------ dynamic configs

    def _alter_topic_configs(self, seq: int, c: AlterTopicConfigsWrite) -> Outcome:
        stored = topic_configs(c.configs)
        rules.check_controller_epoch(self._controller, c.controller_epoch)
        info = self._topics.get(c.topic)
        if info is None:
            raise UnknownTopicError(c.topic)
        info.configs = stored
        result = self._assignment(c.topic)
        self._write(seq, lambda s: records.topic_configs_altered(s, result))
        return result

    def _alter_broker_configs(self, seq: int, c: AlterBrokerConfigsWrite) -> Outcome:
        stored = rules.broker_configs_to_store(c.broker_id, dict(c.configs))
        rules.check_controller_epoch(self._controller, c.controller_epoch)
        if stored:
            self._broker_configs[c.broker_id] = stored
        else:
            self._broker_configs.pop(c.broker_id, None)
        broker_id = c.broker_id
        self._write(seq, lambda s: records.broker_configs_altered(s, broker_id, stored))
        return None

    # ------------------------------------------------------------------ feed and admin queues

    def _trim(self, seq: int, c: TrimHistory) -> Outcome:
        del seq
        return self._feed.trim(c.before_seq)

    def _submit(self, seq: int, c: SubmitAdminRequest) -> Outcome:
        validate_admin_request(c.target, c.payload)
        queue = self._admin.get(c.target, {})
        dropped = requests_to_drop(list(queue.values()), c.target, self._admin_limit)
        request = AdminRequest(
            request_id=seq, target=c.target, payload=c.payload, submitted_seq=seq
        )
        self._write(seq, lambda s: records.admin_submitted(s, request, dropped))
        queue = self._admin.setdefault(c.target, {})
        for old in dropped:
            del queue[old.request_id]
            del self._admin_target[old.request_id]
        queue[request.request_id] = request
        self._admin_target[request.request_id] = c.target
        return request

    def _complete(self, seq: int, c: CompleteAdminRequest) -> Outcome:
        if c.controller_epoch is not None:
            rules.check_controller_epoch(self._controller, c.controller_epoch)
        target = self._admin_target.pop(c.request_id, None)
        if target is None:
            return False
        request = self._admin[target].pop(c.request_id)
        outcome, message, result = c.outcome, c.message, c.result
        self._write(seq, lambda s: records.admin_completed(s, request, outcome, message, result))
        return True

    def _allocate_producer_ids(self, seq: int, c: AllocateProducerIdsWrite) -> Outcome:
        del seq  # no feed record
        rules.check_controller_epoch(self._controller, c.controller_epoch)
        block, self._producer_id_blocks = rules.allocated_producer_ids(
            self._producer_id_blocks, c.broker_id, c.broker_epoch, c.count
        )
        return block

    def _init_cluster(self, seq: int, c: InitCluster) -> Outcome:
        """The first id applied is the store's for good; it returns the one in force."""
        del seq  # no feed record: the id is in every snapshot
        if not c.cluster_id:
            raise ValueError("a cluster id is not empty")
        if self._cluster_id is None:
            self._cluster_id = c.cluster_id
        return self._cluster_id

    def _barrier(self, seq: int, c: Barrier) -> Outcome:
        del seq, c
        return None


_Handler = Callable[[MetadataMachine, int, object], Outcome]
_HANDLERS: dict[type, _Handler] = {
    RegisterBroker: MetadataMachine._register,  # type: ignore[dict-item]
    UpdateBroker: MetadataMachine._update,  # type: ignore[dict-item]
    AdmitBroker: MetadataMachine._admit,  # type: ignore[dict-item]
    UnregisterBroker: MetadataMachine._unregister,  # type: ignore[dict-item]
    ExpireSession: MetadataMachine._expire,  # type: ignore[dict-item]
    ElectController: MetadataMachine._elect,  # type: ignore[dict-item]
    ResignController: MetadataMachine._resign,  # type: ignore[dict-item]
    CreateTopicWrite: MetadataMachine._create_topic,  # type: ignore[dict-item]
    DeleteTopicWrite: MetadataMachine._delete_topic,  # type: ignore[dict-item]
    AddPartitionsWrite: MetadataMachine._add_partitions,  # type: ignore[dict-item]
    CasPartitionState: MetadataMachine._cas,  # type: ignore[dict-item]
    TrimHistory: MetadataMachine._trim,  # type: ignore[dict-item]
    SubmitAdminRequest: MetadataMachine._submit,  # type: ignore[dict-item]
    CompleteAdminRequest: MetadataMachine._complete,  # type: ignore[dict-item]
    AllocateProducerIdsWrite: MetadataMachine._allocate_producer_ids,  # type: ignore[dict-item]
    AlterTopicConfigsWrite: MetadataMachine._alter_topic_configs,  # type: ignore[dict-item]
    AlterBrokerConfigsWrite: MetadataMachine._alter_broker_configs,  # type: ignore[dict-item]
    Barrier: MetadataMachine._barrier,  # type: ignore[dict-item]
    InitCluster: MetadataMachine._init_cluster,  # type: ignore[dict-item]
}
