"""The ZooKeeper coordinator (kazoo): the ``Coordinator`` contract on Kafka's znode layout.

Layout and encodings: ``replog.coord.zookeeper.znodes`` (feed records and admin requests:
``replog.coord.codec``). Writes: ``replog.coord.zookeeper.znode_io`` (every
feed-visible write is one multi-op that also advances the feed head, so the change feed is a
persistent, contiguous log ``/replog/changes/c-<seq>`` written atomically with the change).

The handle is split by responsibility: broker sessions in ``replog.coord.zookeeper.sessions``,
the change feed in ``replog.coord.zookeeper.feed``, admin queues in
``replog.coord.zookeeper.admin_queues``, dynamic configs in ``replog.coord.zookeeper.configs``;
controller, topics and partition states here.

Sessions. The handle keeps one kazoo client ("main") for reads, admin queues and the feed, and
opens one kazoo client per registered broker: its ZooKeeper session *is* the broker's session,
and its ephemeral ``/brokers/ids/<id>`` (and ``/controller``, if it wins) go with it. kazoo's
CONNECTED/SUSPENDED/LOST map to ``SessionState``. After LOST the handle records
BrokerChanged(EXPIRED) (plus ControllerChanged(None) if it held the role) in the feed, once
(marker ``/replog/gone/<id>-<incarnation>``), reports LOST, and closes that client: kazoo would
reconnect on a fresh session, but the contract wants a new ``register_broker`` (a new
incarnation). A broker whose process died never gets there, so every handle also watches
``/brokers/ids`` and ``/controller`` and records expiries it notices (the same write, the same
marker, so exactly once; see ``replog.coord.zookeeper.sessions``). Incarnation epochs are the feed
seq of the registration write (the head is the CAS counter), so they grow store-wide.

Controller fencing. Election is one multi-op: create the ephemeral ``/controller`` and
compare-and-set ``/controller_epoch``. Every controller write checks the versions of both
nodes in its transaction, so a controller whose session expired (its ``/controller`` is gone)
or that was replaced is refused even before anyone else is elected.

SUSPENDED from ``suspend_session`` (the ``SessionFaults`` hook) is simulated on the client side,
as in the memory backend: the real session keeps pinging. ``expire_session`` is real
(twin-session close). Listener callbacks and feed pushes run on one worker thread per handle.
"""

from __future__ import annotations

import logging
import queue
import threading
import urllib.parse
import uuid
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from kazoo.protocol.states import KazooState

from replog.clock import monotonic_s
from replog.coord import rules
from replog.coord.contract import (
    ADMIN_QUEUE_LIMIT,
    DEFAULT_TIMEOUT_MS,
    MAX_CHANGES_PER_BATCH,
    Coordinator,
    validate_partition_state,
)
from replog.coord.errors import (
    CoordinatorClosedError,
    CoordinatorUnavailableError,
    FencedControllerError,
    SessionExpiredError,
    UnknownTopicError,
)
from replog.coord.sessions import SessionListeners
from replog.coord.zookeeper.admin_queues import ZkAdminQueues
from replog.coord.zookeeper.configs import BROKER_CONFIGS, ZkConfigsMixin, read_broker_configs
from replog.coord.zookeeper.feed import ZkFeed
from replog.coord.zookeeper.requests import ZkRequestsMixin
from replog.coord.zookeeper.sessions import ZkSession, ZkSessionsMixin, new_client, stop_client
from replog.coord.zookeeper.znode_io import CHANGES, HEAD, Op, Plan, ZkIo, kazoo_errors
from replog.coord.zookeeper.znodes import (
    CONTROLLER,
    EPOCH,
    GONE,
    IDS,
    PRODUCER_IDS,
    QUEUES,
    SEEN,
    TOPICS,
    decode_broker,
    decode_controller,
    decode_epoch,
    decode_state,
    decode_topic,
    encode_broker,
    encode_controller,
    encode_epoch,
    encode_state,
    encode_topic,
    state_path,
)
from replog.errors import InvalidConfigError
from replog.metadata import records
from replog.metadata.types import (
    BrokerInfo,
    CasResult,
    ChangeBatch,
    ControllerInfo,
    MetadataSnapshot,
    PartitionState,
    SessionState,
    Subscription,
    TopicAssignment,
)

__all__ = ["ZooKeeperCoordinator"]

_log = logging.getLogger(__name__)

_LAYOUT = (IDS, TOPICS, EPOCH, HEAD, CHANGES, GONE, SEEN, QUEUES, PRODUCER_IDS, BROKER_CONFIGS)


class ZooKeeperCoordinator(ZkSessionsMixin, ZkConfigsMixin, ZkRequestsMixin, Coordinator):
    """The contract on ZooKeeper; see the module docstring. Open with ``connect`` or
    ``from_url`` (``zookeeper://host:port[,host:port]/chroot``)."""

    def __init__(
        self,
        hosts: str,
        root: str,
        main: Any,
        *,
        default_timeout_ms: int,
        admin_queue_limit: int,
    ) -> None:
        self._hosts = hosts
        self._io = ZkIo(root)
        self._main = main
        self._default_timeout_ms = default_timeout_ms
        self._lock = threading.Lock()
        self._closed = False
        self._sessions: dict[int, ZkSession] = {}
        self._listeners = SessionListeners()
        self._events: queue.Queue[Callable[[], None] | None] = queue.Queue()
        self._feed = ZkFeed(self._io, main, self._events.put, default_timeout_ms)
        self._admin = ZkAdminQueues(self._io, main, admin_queue_limit)
        self._worker = threading.Thread(target=self._run_worker, daemon=True, name="zk-coord")
        self._worker.start()
        main.add_listener(self._main_listener)
        self._start_reaper()

    # ---- opening ----

    @classmethod
    def connect(
        cls,
        hosts: str,
        chroot: str = "",
        *,
        default_timeout_ms: int = DEFAULT_TIMEOUT_MS,
        admin_queue_limit: int = ADMIN_QUEUE_LIMIT,
    ) -> ZooKeeperCoordinator:
        """Connect to ``hosts`` ("h:p,h:p"), create the layout under ``chroot`` if missing."""
        if default_timeout_ms <= 0 or admin_queue_limit < 1:
            raise ValueError("default_timeout_ms and admin_queue_limit must be positive")
        root = "/" + chroot.strip("/") if chroot.strip("/") else ""
        main = new_client(hosts, max(default_timeout_ms, 4000) / 1000)
        deadline = monotonic_s() + default_timeout_ms / 1000
        with kazoo_errors():
            try:
                main.start(timeout=default_timeout_ms / 1000)
                ZkIo(root).ensure(main, _LAYOUT, deadline)
            except BaseException:
                stop_client(main)
                raise
        return cls(
            hosts,
            root,
            main,
            default_timeout_ms=default_timeout_ms,
            admin_queue_limit=admin_queue_limit,
        )

    @classmethod
    def from_url(cls, url: str, /, **options: Any) -> ZooKeeperCoordinator:
        """The registry factory for ``zookeeper://host:port[,host:port]/chroot``."""
        parts = urllib.parse.urlsplit(url)
        if parts.scheme.lower() != "zookeeper" or not parts.netloc or parts.query:
            raise InvalidConfigError(f"a ZooKeeper URL is zookeeper://host:port/chroot: {url!r}")
        try:
            return cls.connect(parts.netloc, parts.path, **options)
        except TypeError as e:
            raise InvalidConfigError(f"bad option for the ZooKeeper backend: {e}") from e

    # ---- plumbing ----

    def _deadline(self, timeout_ms: int | None) -> float:
        if self._closed:
            raise CoordinatorClosedError("the ZooKeeper coordinator is closed")
        ms = self._default_timeout_ms if timeout_ms is None else timeout_ms
        return monotonic_s() + ms / 1000

    def _run_worker(self) -> None:
        while True:
            fn = self._events.get()
            if fn is None:
                return
            try:
                fn()
            except Exception:
                _log.exception("ZooKeeper coordinator listener failed; continuing")

    def _main_listener(self, state: str) -> None:
        if state == KazooState.CONNECTED:
            self._feed.on_connected()
            self._schedule_reap()

    # ---- lifecycle ----

    @property
    def closed(self) -> bool:
        """Whether ``close()`` was called."""
        return self._closed

    def close(self) -> None:
        """Unregister the sessions this handle holds (best effort), report them LOST, stop
        listeners and the clients. Idempotent."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            self._feed.closed = True
            sessions = list(self._sessions.values())
        for session in sessions:
            try:
                with kazoo_errors():
                    self._unregister(
                        session.client,
                        session.broker_id,
                        session.incarnation_epoch,
                        monotonic_s() + 2.0,
                    )
            except Exception:
                _log.debug("unregistering broker %d at close failed", session.broker_id)
            self._end(session)
            stop_client(session.client)
        self._feed.close()
        self._events.put(None)
        if threading.current_thread() is not self._worker:
            self._worker.join(timeout=10)
        self._listeners.clear()
        stop_client(self._main)

    # ---- brokers ----

    def get_broker(self, broker_id: int, *, timeout_ms: int | None = None) -> BrokerInfo | None:
        """See ``Coordinator.get_broker``."""
        deadline = self._deadline(timeout_ms)
        with kazoo_errors():
            got = self._io.get(self._main, f"{IDS}/{broker_id}", deadline)
        return None if got is None else decode_broker(broker_id, got[0])

    def _brokers(self, deadline: float) -> dict[int, BrokerInfo]:
        ids = sorted(int(n) for n in self._io.children(self._main, IDS, deadline))
        got = self._io.gets(self._main, [f"{IDS}/{b}" for b in ids], deadline)
        return {b: decode_broker(b, g[0]) for b, g in zip(ids, got, strict=True) if g is not None}

    def live_brokers(self, *, timeout_ms: int | None = None) -> dict[int, BrokerInfo]:
        """See ``Coordinator.live_brokers``."""
        deadline = self._deadline(timeout_ms)
        with kazoo_errors():
            return self._brokers(deadline)

    def admit_broker(
        self,
        broker_id: int,
        incarnation_epoch: int,
        *,
        controller_epoch: int,
        timeout_ms: int | None = None,
    ) -> bool:
        """See ``Coordinator.admit_broker``: the flags go into the broker's (ephemeral)
        registration znode, in one multi-op with the controller fence."""
        deadline = self._deadline(timeout_ms)
        io, path = self._io, f"{IDS}/{broker_id}"
        with kazoo_errors():
            client = self._controller_client(controller_epoch, deadline)

            def prepare(seq: int) -> Plan[bool]:
                ops = self._fence(client, controller_epoch, deadline)
                got = io.get(client, path, deadline)
                old = None if got is None else decode_broker(broker_id, got[0])
                new = rules.admitted_broker(old, incarnation_epoch)
                if got is None or new is None:
                    return Plan(False, write=False)
                if new == old:
                    return Plan(True, write=False)
                ops.append(("set", path, encode_broker(new), got[1].version))
                return Plan(True, ops, records.broker_updated(seq, new))

            return io.transact(client, prepare, deadline)

    # ---- controller ----

    def elect_controller(
        self, broker_id: int, incarnation_epoch: int, *, timeout_ms: int | None = None
    ) -> ControllerInfo:
        """See ``Coordinator.elect_controller``: one multi-op creating the ephemeral
        /controller and compare-and-setting /controller_epoch."""
        deadline = self._deadline(timeout_ms)
        io = self._io
        with kazoo_errors():
            client = self._session_for(broker_id, incarnation_epoch, deadline).client
            if io.get(client, CONTROLLER, deadline) is None:
                self._reap(deadline)  # a dead holder's expiry goes in the feed before its successor

            def prepare(seq: int) -> Plan[ControllerInfo]:
                got = io.get(client, CONTROLLER, deadline)
                if got is not None:
                    return Plan(decode_controller(got[0]), write=False)
                me = io.get(client, f"{IDS}/{broker_id}", deadline)
                mine = None if me is None else decode_broker(broker_id, me[0])
                rules.check_incarnation(broker_id, incarnation_epoch, mine)
                if me is None:  # pragma: no cover - check_incarnation raised
                    raise SessionExpiredError(broker_id, incarnation_epoch, None)
                epoch_node = self._epoch_node(client, deadline)
                epoch, _ = decode_epoch(epoch_node[0])
                new = ControllerInfo(broker_id, epoch + 1, incarnation_epoch)
                holder = encode_epoch(epoch + 1, [broker_id, incarnation_epoch])
                ops: list[Op] = [
                    ("check", f"{IDS}/{broker_id}", me[1].version),
                    ("create", CONTROLLER, encode_controller(new), True),
                    ("set", EPOCH, holder, epoch_node[1].version),
                ]
                return Plan(new, ops, records.controller_changed(seq, new))

            return io.transact(client, prepare, deadline)

    def resign_controller(
        self, broker_id: int, controller_epoch: int, *, timeout_ms: int | None = None
    ) -> bool:
        """See ``Coordinator.resign_controller``."""
        deadline = self._deadline(timeout_ms)
        io = self._io
        with kazoo_errors():
            got = io.get(self._main, CONTROLLER, deadline)
            if got is None:
                return False
            ctl = decode_controller(got[0])
            if not rules.holds_controller(ctl, broker_id, controller_epoch):
                return False
            client = self._client_of(ctl)

            def prepare(seq: int) -> Plan[bool]:
                now = io.get(client, CONTROLLER, deadline)
                if now is None or decode_controller(now[0]) != ctl:
                    return Plan(False, write=False)
                epoch_node = self._epoch_node(client, deadline)
                epoch, _ = decode_epoch(epoch_node[0])
                ops: list[Op] = [
                    ("delete", CONTROLLER, now[1].version),
                    ("set", EPOCH, encode_epoch(epoch, None), epoch_node[1].version),
                ]
                return Plan(True, ops, records.controller_changed(seq, None))

            return io.transact(client, prepare, deadline)

    def _client_of(self, ctl: ControllerInfo) -> Any:
        """The client to write as controller ``ctl``: its own session's if this handle holds
        it (refused while SUSPENDED), else the main one."""
        session = self._held(ctl.controller_id)
        if session is None or session.incarnation_epoch != ctl.incarnation_epoch:
            return self._main
        if session.state is SessionState.SUSPENDED:
            raise CoordinatorUnavailableError(
                f"controller {ctl.controller_id}'s session is suspended"
            )
        return session.client

    def current_controller(self, *, timeout_ms: int | None = None) -> ControllerInfo | None:
        """See ``Coordinator.current_controller``."""
        deadline = self._deadline(timeout_ms)
        with kazoo_errors():
            got = self._io.get(self._main, CONTROLLER, deadline)
        return None if got is None else decode_controller(got[0])

    def _controller_client(self, controller_epoch: int, deadline: float) -> Any:
        got = self._io.get(self._main, CONTROLLER, deadline)
        if got is not None:
            ctl = decode_controller(got[0])
            if ctl.controller_epoch == controller_epoch:
                return self._client_of(ctl)
        return self._main

    def _fence(self, client: Any, controller_epoch: int, deadline: float) -> list[Op]:
        """Checks that make a write conditional on ``controller_epoch`` being the active
        controller's; raises ``FencedControllerError`` if it is not now."""
        got = self._io.get(client, CONTROLLER, deadline)
        active = rules.check_controller_epoch(
            None if got is None else decode_controller(got[0]), controller_epoch
        )
        if got is None:  # pragma: no cover - check_controller_epoch raised
            raise FencedControllerError(controller_epoch, None)
        self._client_of(active)  # SUSPENDED check
        epoch_node = self._epoch_node(client, deadline)
        return [("check", CONTROLLER, got[1].version), ("check", EPOCH, epoch_node[1].version)]

    # ---- topics and partitions ----

    def _read_topic(
        self, client: Any, topic: str, deadline: float
    ) -> tuple[TopicAssignment, Any, list[tuple[PartitionState, Any]]] | None:
        """(assignment with current replicas, topic node stat, [(state, state stat)])."""
        got = self._io.get(client, f"{TOPICS}/{topic}", deadline)
        if got is None:
            return None
        topic_id, count, configs = decode_topic(got[0])
        nodes = self._io.gets(client, [state_path(topic, p) for p in range(count)], deadline)
        states = []
        for node in nodes:
            if node is None:
                return None  # deleted meanwhile
            states.append((decode_state(node[0], node[1].version), node[1]))
        replicas = [s.replicas for s, _ in states]
        assignment = TopicAssignment(
            topic=topic, topic_id=topic_id, replicas=replicas, configs=configs
        )
        return assignment, got[1], states

    @staticmethod
    def _partition_ops(
        topic: str, first: int, states: Sequence[PartitionState], controller_epoch: int
    ) -> list[Op]:
        ops: list[Op] = []
        for i, state in enumerate(states):
            base = f"{TOPICS}/{topic}/partitions/{first + i}"
            ops.append(("create", base, b"", False))
            ops.append(("create", f"{base}/state", encode_state(state, controller_epoch), False))
        return ops

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
        """See ``Coordinator.create_topic`` (``configs`` go in the topic znode)."""
        assignment, states, stored = rules.new_topic(
            topic, replica_assignment, initial_states, configs
        )
        deadline = self._deadline(timeout_ms)
        io = self._io
        with kazoo_errors():
            client = self._controller_client(controller_epoch, deadline)

            def prepare(seq: int) -> Plan[TopicAssignment]:
                ops = self._fence(client, controller_epoch, deadline)
                rules.check_topic_free(topic, io.children(client, TOPICS, deadline))
                result = TopicAssignment(
                    topic=topic, topic_id=uuid.uuid4().hex, replicas=assignment, configs=stored
                )
                base = f"{TOPICS}/{topic}"
                data = encode_topic(result.topic_id, assignment, stored)
                ops.append(("create", base, data, False))
                ops.append(("create", f"{base}/partitions", b"", False))
                ops += self._partition_ops(topic, 0, states, controller_epoch)
                return Plan(result, ops, records.topic_created(seq, result, states))

            return io.transact(client, prepare, deadline)

    def delete_topic(
        self, topic: str, *, controller_epoch: int, timeout_ms: int | None = None
    ) -> TopicAssignment:
        """See ``Coordinator.delete_topic``."""
        deadline = self._deadline(timeout_ms)
        io = self._io
        with kazoo_errors():
            client = self._controller_client(controller_epoch, deadline)

            def prepare(seq: int) -> Plan[TopicAssignment]:
                ops = self._fence(client, controller_epoch, deadline)
                read = self._read_topic(client, topic, deadline)
                if read is None:
                    raise UnknownTopicError(topic)
                removed, topic_stat, states = read
                base = f"{TOPICS}/{topic}"
                for p, (_, stat) in enumerate(states):
                    ops.append(("delete", f"{base}/partitions/{p}/state", stat.version))
                    ops.append(("delete", f"{base}/partitions/{p}", -1))
                ops.append(("delete", f"{base}/partitions", -1))
                ops.append(("delete", base, topic_stat.version))
                return Plan(removed, ops, records.topic_deleted(seq, removed))

            return io.transact(client, prepare, deadline)

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
        deadline = self._deadline(timeout_ms)
        io = self._io
        with kazoo_errors():
            client = self._controller_client(controller_epoch, deadline)

            def prepare(seq: int) -> Plan[TopicAssignment]:
                ops = self._fence(client, controller_epoch, deadline)
                read = self._read_topic(client, topic, deadline)
                if read is None:
                    raise UnknownTopicError(topic)
                current, topic_stat, _ = read
                first = current.partition_count
                result = rules.grown_assignment(current, states)
                data = encode_topic(result.topic_id, result.replicas, result.configs)
                ops.append(("set", f"{TOPICS}/{topic}", data, topic_stat.version))
                ops += self._partition_ops(topic, first, states, controller_epoch)
                return Plan(result, ops, records.partitions_added(seq, result, first, states))

            return io.transact(client, prepare, deadline)

    def list_topics(self, *, timeout_ms: int | None = None) -> list[str]:
        """See ``Coordinator.list_topics``."""
        deadline = self._deadline(timeout_ms)
        with kazoo_errors():
            return self._io.children(self._main, TOPICS, deadline)

    def get_topic(self, topic: str, *, timeout_ms: int | None = None) -> TopicAssignment | None:
        """See ``Coordinator.get_topic``."""
        deadline = self._deadline(timeout_ms)
        with kazoo_errors():
            read = self._read_topic(self._main, topic, deadline)
        return None if read is None else read[0]

    def get_partition_state(
        self, topic: str, partition: int, *, timeout_ms: int | None = None
    ) -> PartitionState | None:
        """See ``Coordinator.get_partition_state``."""
        deadline = self._deadline(timeout_ms)
        if partition < 0:
            return None
        with kazoo_errors():
            got = self._io.get(self._main, state_path(topic, partition), deadline)
        return None if got is None else decode_state(got[0], got[1].version)

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
        """See ``Coordinator.compare_and_set_partition_state``: ``set(version=expected)`` on
        the state znode, checked against the controller nodes, in one multi-op."""
        validate_partition_state(new_state)
        deadline = self._deadline(timeout_ms)
        io, path = self._io, state_path(topic, partition)
        with kazoo_errors():
            client = self._controller_client(controller_epoch, deadline)

            def prepare(seq: int) -> Plan[CasResult]:
                try:
                    ops = self._fence(client, controller_epoch, deadline)
                except FencedControllerError as e:
                    return Plan(rules.cas_fenced(e), write=False)
                got = io.get(client, path, deadline) if partition >= 0 else None
                current = None if got is None else decode_state(got[0], got[1].version)
                stored = rules.cas_decision(current, expected_partition_epoch, new_state)
                if isinstance(stored, CasResult):
                    return Plan(stored, write=False)
                data = encode_state(stored, controller_epoch)
                ops.append(("set", path, data, expected_partition_epoch))
                done = records.partition_changed(seq, topic, partition, stored)
                return Plan(rules.cas_ok(stored, seq), ops, done)

            return io.transact(client, prepare, deadline)

    # ---- the change feed ----

    def changes_since(
        self,
        seq: int,
        *,
        max_changes: int = MAX_CHANGES_PER_BATCH,
        timeout_ms: int | None = None,
    ) -> ChangeBatch:
        """See ``Coordinator.changes_since``."""
        rules.check_feed_read(seq, max_changes)
        deadline = self._deadline(timeout_ms)
        with kazoo_errors():
            return self._feed.read(seq, max_changes, deadline)

    def snapshot(self, *, timeout_ms: int | None = None) -> MetadataSnapshot:
        """See ``Coordinator.snapshot``: reads everything between two reads of the feed head
        and retries until no feed write happened in between."""
        deadline = self._deadline(timeout_ms)
        io, c = self._io, self._main
        with kazoo_errors():
            while True:
                before = io.get(c, HEAD, deadline)
                brokers = self._brokers(deadline)
                topics: dict[str, TopicAssignment] = {}
                partitions: dict[tuple[str, int], PartitionState] = {}
                for topic in io.children(c, TOPICS, deadline):
                    read = self._read_topic(c, topic, deadline)
                    if read is not None:
                        topics[topic] = read[0]
                        for p, (state, _) in enumerate(read[2]):
                            partitions[(topic, p)] = state
                got = io.get(c, CONTROLLER, deadline)
                epoch, _ = decode_epoch(self._epoch_node(c, deadline)[0])
                broker_configs = read_broker_configs(io, c, deadline)
                after = io.get(c, HEAD, deadline)
                if (
                    before is not None
                    and after is not None
                    and (before[1].version == after[1].version)
                ):
                    return MetadataSnapshot(
                        seq=int(after[0] or b"1"),
                        brokers=brokers,
                        topics=topics,
                        partitions=dict(sorted(partitions.items())),
                        controller=None if got is None else decode_controller(got[0]),
                        controller_epoch=epoch,
                        broker_configs=broker_configs,
                    )

    def subscribe(
        self, callback: Callable[[ChangeBatch], None], *, from_seq: int | None = None
    ) -> Subscription:
        """See ``Coordinator.subscribe``: a data watch on the feed head wakes the worker,
        which reads from each subscriber's cursor."""
        return self._feed.subscribe(callback, from_seq, self._deadline(None))

    def trim_history(self, before_seq: int, *, timeout_ms: int | None = None) -> int:
        """See ``Coordinator.trim_history`` (this backend trims only when asked)."""
        deadline = self._deadline(timeout_ms)
        with kazoo_errors():
            return self._feed.trim(before_seq, deadline)
