"""The ZooKeeper coordinator (kazoo): the ``Coordinator`` contract on Kafka's znode layout.

Layout and encodings: ``replog.coord.zookeeper.znodes`` (feed records and admin requests:
``replog.coord.codec``). Writes: ``replog.coord.zookeeper.znode_io`` (every feed-visible write
is one multi-op that also advances the feed head, so the change feed is a persistent,
contiguous log ``/replog/changes/c-<seq>`` written atomically with the change).

The handle composes one part per concept, each holding only the clients it reads and writes
with: broker sessions (``sessions``), the controller role and its fence (``controller``),
registrations (``brokers``), topics and partition states (``topics``), dynamic configs
(``configs``), admin queues (``admin_queues``), producer-id blocks (``producer_ids``) and the
change feed (``feed``). The handle itself checks each call's arguments and that it is open,
turns ``timeout_ms`` into a deadline, maps kazoo's errors where a part leaves that to its
caller, and owns the clients' lifecycle and the worker thread.

Sessions. The handle keeps one kazoo client ("main") for reads, admin queues and the feed, and
opens one kazoo client per registered broker: its ZooKeeper session *is* the broker's session,
and its ephemeral ``/brokers/ids/<id>`` (and ``/controller``, if it wins) go with it. kazoo's
CONNECTED/SUSPENDED/LOST map to ``SessionState``. After LOST the handle records
BrokerChanged(EXPIRED) (plus ControllerChanged(None) if it held the role) in the feed, once
(marker ``/replog/gone/<id>-<incarnation>``), reports LOST, and closes that client: kazoo would
reconnect on a fresh session, but the contract wants a new ``register_broker`` (a new
incarnation). A broker whose process died never gets there, so every handle also watches
``/brokers/ids`` and ``/controller`` and records expiries it notices (the same write, the same
marker, so exactly once; see ``replog.coord.zookeeper.sessions``). Incarnation epochs are the
feed seq of the registration write (the head is the CAS counter), so they grow store-wide.

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
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from kazoo.protocol.states import KazooState

from replog.clock import monotonic_s
from replog.coord import rules
from replog.coord.admin import validate_admin_request
from replog.coord.contract import (
    ADMIN_QUEUE_LIMIT,
    DEFAULT_TIMEOUT_MS,
    MAX_CHANGES_PER_BATCH,
    Coordinator,
    validate_partition_state,
)
from replog.coord.errors import CoordinatorClosedError
from replog.coord.zookeeper.admin_queues import ZkAdminQueues
from replog.coord.zookeeper.brokers import ZkBrokers, read_brokers
from replog.coord.zookeeper.clients import new_client, stop_client
from replog.coord.zookeeper.configs import BROKER_CONFIGS, ZkConfigs, read_broker_configs
from replog.coord.zookeeper.controller import ZkController
from replog.coord.zookeeper.expiry import epoch_node
from replog.coord.zookeeper.feed import ZkFeed
from replog.coord.zookeeper.producer_ids import ZkProducerIds
from replog.coord.zookeeper.sessions import ZkSessions
from replog.coord.zookeeper.topics import ZkTopics, read_topic
from replog.coord.zookeeper.znode_io import CHANGES, HEAD, ZkIo, kazoo_errors
from replog.coord.zookeeper.znodes import (
    CONTROLLER,
    EPOCH,
    GONE,
    IDS,
    PRODUCER_IDS,
    QUEUES,
    SEEN,
    TOPICS,
    decode_controller,
    decode_epoch,
)
from replog.errors import ErrorCode, InvalidConfigError
from replog.metadata.types import (
    PRODUCER_ID_BLOCK_SIZE,
    AdminPayload,
    AdminRequest,
    AlterPartitionResult,
    BrokerInfo,
    CasResult,
    ChangeBatch,
    ControllerInfo,
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

__all__ = ["ZooKeeperCoordinator"]

_log = logging.getLogger(__name__)

_LAYOUT = (IDS, TOPICS, EPOCH, HEAD, CHANGES, GONE, SEEN, QUEUES, PRODUCER_IDS, BROKER_CONFIGS)


class ZooKeeperCoordinator(Coordinator):
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
        io = ZkIo(root)
        self._io = io
        self._main = main
        self._default_timeout_ms = default_timeout_ms
        self._lock = threading.Lock()
        self._closed = False
        self._events: queue.Queue[Callable[[], None] | None] = queue.Queue()
        schedule = self._events.put
        self._sessions = ZkSessions(hosts, io, main, schedule, default_timeout_ms)
        self._controller = ZkController(io, main, self._sessions)
        self._brokers = ZkBrokers(io, main, self._controller)
        self._topics = ZkTopics(io, main, self._controller)
        self._configs = ZkConfigs(io, main, self._controller)
        self._admin = ZkAdminQueues(io, main, admin_queue_limit, self._controller)
        self._producer_ids = ZkProducerIds(io, main, self._controller)
        self._feed = ZkFeed(io, main, schedule, default_timeout_ms)
        self._worker = threading.Thread(target=self._run_worker, daemon=True, name="zk-coord")
        self._worker.start()
        main.add_listener(self._main_listener)
        self._sessions.start_reaper()

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

    def _check_open(self) -> None:
        if self._closed:
            raise CoordinatorClosedError("the ZooKeeper coordinator is closed")

    def _deadline(self, timeout_ms: int | None) -> float:
        self._check_open()
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
            self._sessions.schedule_reap()

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
        self._sessions.close()
        self._feed.close()
        self._events.put(None)
        if threading.current_thread() is not self._worker:
            self._worker.join(timeout=10)
        self._sessions.drop_listeners()
        stop_client(self._main)

    # ---- brokers and sessions ----

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
        """See ``Coordinator.register_broker``. Opens a kazoo client whose session is the
        broker's, with ``session_timeout_ms`` (the server clamps it to its min/max)."""
        rules.check_registration(broker_id, session_timeout_ms)
        deadline = self._deadline(timeout_ms)
        return self._sessions.register(
            broker_id,
            host,
            port,
            rack,
            session_timeout_ms,
            deadline,
            clean_shutdown=clean_shutdown,
            fenced=fenced,
        )

    def heartbeat(
        self, broker_id: int, incarnation_epoch: int, *, timeout_ms: int | None = None
    ) -> SessionState:
        """See ``Coordinator.heartbeat``: kazoo pings by itself, so this only checks."""
        deadline = self._deadline(timeout_ms)
        return self._sessions.heartbeat(broker_id, incarnation_epoch, deadline)

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
        deadline = self._deadline(timeout_ms)
        return self._sessions.update(
            broker_id, incarnation_epoch, fenced, in_controlled_shutdown, deadline
        )

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
        return self._brokers.admit(broker_id, incarnation_epoch, controller_epoch, deadline)

    def unregister_broker(
        self, broker_id: int, incarnation_epoch: int, *, timeout_ms: int | None = None
    ) -> bool:
        """See ``Coordinator.unregister_broker`` (also works for a session another handle
        holds: the ephemeral is deleted and that session later sees nothing but a gap)."""
        deadline = self._deadline(timeout_ms)
        return self._sessions.unregister(broker_id, incarnation_epoch, deadline)

    def get_broker(self, broker_id: int, *, timeout_ms: int | None = None) -> BrokerInfo | None:
        """See ``Coordinator.get_broker``."""
        return self._brokers.get(broker_id, self._deadline(timeout_ms))

    def live_brokers(self, *, timeout_ms: int | None = None) -> dict[int, BrokerInfo]:
        """See ``Coordinator.live_brokers``."""
        return self._brokers.live(self._deadline(timeout_ms))

    def session_state(self, broker_id: int) -> SessionState:
        """See ``Coordinator.session_state``."""
        self._check_open()
        return self._sessions.state(broker_id)

    def add_session_listener(
        self, broker_id: int, callback: Callable[[SessionEvent], None]
    ) -> Subscription:
        """See ``Coordinator.add_session_listener`` (callbacks run on the worker thread)."""
        self._check_open()
        return self._sessions.add_listener(broker_id, callback)

    # ---- SessionFaults (tests) ----

    def expire_session(self, broker_id: int) -> None:
        """Expire the broker's session now: a twin client on the same session id and password
        connects and closes it (the server deletes its ephemerals); LOST follows."""
        self._sessions.expire(broker_id)

    def suspend_session(self, broker_id: int) -> None:
        """Simulated SUSPENDED (calls as this broker raise ``CoordinatorUnavailableError``);
        the real session stays alive."""
        self._sessions.suspend(broker_id)

    def resume_session(self, broker_id: int) -> None:
        """End a simulated SUSPENDED (CONNECTED again unless the session was lost)."""
        self._sessions.resume(broker_id)

    def broker_client_id(self, broker_id: int) -> tuple[int, bytes] | None:
        """The (session id, password) of the broker's session held here (fault tests)."""
        return self._sessions.client_id(broker_id)

    # ---- controller ----

    def elect_controller(
        self, broker_id: int, incarnation_epoch: int, *, timeout_ms: int | None = None
    ) -> ControllerInfo:
        """See ``Coordinator.elect_controller``: one multi-op creating the ephemeral
        /controller and compare-and-setting /controller_epoch."""
        deadline = self._deadline(timeout_ms)
        return self._controller.elect(broker_id, incarnation_epoch, deadline)

    def resign_controller(
        self, broker_id: int, controller_epoch: int, *, timeout_ms: int | None = None
    ) -> bool:
        """See ``Coordinator.resign_controller``."""
        deadline = self._deadline(timeout_ms)
        return self._controller.resign(broker_id, controller_epoch, deadline)

    def current_controller(self, *, timeout_ms: int | None = None) -> ControllerInfo | None:
        """See ``Coordinator.current_controller``."""
        return self._controller.current(self._deadline(timeout_ms))

    # ---- topics and partitions ----

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
        return self._topics.create(topic, assignment, states, stored, controller_epoch, deadline)

    def delete_topic(
        self, topic: str, *, controller_epoch: int, timeout_ms: int | None = None
    ) -> TopicAssignment:
        """See ``Coordinator.delete_topic``."""
        deadline = self._deadline(timeout_ms)
        return self._topics.delete(topic, controller_epoch, deadline)

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
        return self._topics.add_partitions(topic, states, controller_epoch, deadline)

    def list_topics(self, *, timeout_ms: int | None = None) -> list[str]:
        """See ``Coordinator.list_topics``."""
        return self._topics.names(self._deadline(timeout_ms))

    def get_topic(self, topic: str, *, timeout_ms: int | None = None) -> TopicAssignment | None:
        """See ``Coordinator.get_topic``."""
        return self._topics.get(topic, self._deadline(timeout_ms))

    def get_partition_state(
        self, topic: str, partition: int, *, timeout_ms: int | None = None
    ) -> PartitionState | None:
        """See ``Coordinator.get_partition_state``."""
        return self._topics.partition_state(topic, partition, self._deadline(timeout_ms))

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
        return self._topics.compare_and_set(
            topic, partition, expected_partition_epoch, new_state, controller_epoch, deadline
        )

    # ---- dynamic configs ----

    def alter_topic_configs(
        self,
        topic: str,
        configs: Mapping[str, str],
        *,
        controller_epoch: int,
        timeout_ms: int | None = None,
    ) -> TopicAssignment:
        """See ``Coordinator.alter_topic_configs`` (the configs live in the topic znode)."""
        stored = topic_configs(configs)
        deadline = self._deadline(timeout_ms)
        return self._configs.alter_topic_configs(topic, stored, controller_epoch, deadline)

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
        deadline = self._deadline(timeout_ms)
        self._configs.alter_broker_configs(broker_id, stored, controller_epoch, deadline)

    def broker_configs(self, *, timeout_ms: int | None = None) -> dict[int, TopicConfigs]:
        """See ``Coordinator.broker_configs``."""
        return self._configs.broker_configs(self._deadline(timeout_ms))

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
                brokers = read_brokers(io, c, deadline)
                topics: dict[str, TopicAssignment] = {}
                partitions: dict[tuple[str, int], PartitionState] = {}
                for topic in io.children(c, TOPICS, deadline):
                    read = read_topic(io, c, topic, deadline)
                    if read is not None:
                        topics[topic] = read[0]
                        for p, (state, _) in enumerate(read[2]):
                            partitions[(topic, p)] = state
                got = io.get(c, CONTROLLER, deadline)
                epoch, _ = decode_epoch(epoch_node(io, c, deadline)[0])
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

    # ---- admin queue ----

    def submit_admin_request(
        self, target: int, payload: AdminPayload, *, timeout_ms: int | None = None
    ) -> AdminRequest:
        """See ``Coordinator.submit_admin_request``: a persistent node
        ``/admin/queues/<target>/<request_id>``; the request id is the submission's seq."""
        validate_admin_request(target, payload)
        deadline = self._deadline(timeout_ms)
        with kazoo_errors():
            return self._admin.submit(target, payload, deadline)

    def pending_admin_requests(
        self, target: int, *, timeout_ms: int | None = None
    ) -> list[AdminRequest]:
        """See ``Coordinator.pending_admin_requests``."""
        deadline = self._deadline(timeout_ms)
        with kazoo_errors():
            return self._admin.pending(target, deadline)

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
        """See ``Coordinator.complete_admin_request``: with ``controller_epoch``, the checks
        on the controller nodes go into the removal's multi-op, as in other controller writes."""
        deadline = self._deadline(timeout_ms)
        with kazoo_errors():
            return self._admin.complete(
                request_id, outcome, message, result, controller_epoch, deadline
            )

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
        """See ``Coordinator.allocate_producer_ids``: the blocks node is set at the version
        read, in one multi-op with the controller fence (no feed record)."""
        deadline = self._deadline(timeout_ms)
        return self._producer_ids.allocate(
            broker_id, broker_epoch, count, controller_epoch, deadline
        )

    def producer_id_block(
        self, broker_id: int, *, timeout_ms: int | None = None
    ) -> ProducerIdBlock | None:
        """See ``Coordinator.producer_id_block``."""
        return self._producer_ids.block(broker_id, self._deadline(timeout_ms))
