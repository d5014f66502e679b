"""The ZooKeeper coordinator (kazoo): the ``Coordinator`` contract on Kafka's znode layout.

Layout and encodings: ``replog.coord.zk_codec``. Writes: ``replog.coord.zk_io`` (every
feed-visible write is one multi-op that also advances the feed head, so the change feed is a
persistent, contiguous log ``/replog/changes/c-<seq>`` written atomically with the change).

Sessions. The handle keeps one kazoo client ("main") for reads, admin queues and the feed, and
opens one kazoo client per registered broker: its ZooKeeper session *is* the broker's session,
and its ephemeral ``/brokers/ids/<id>`` (and ``/controller``, if it wins) go with it. kazoo's
CONNECTED/SUSPENDED/LOST map to ``SessionState``. After LOST the handle records
BrokerChanged(EXPIRED) (plus ControllerChanged(None) if it held the role) in the feed, once
(marker ``/replog/gone/<id>-<incarnation>``), reports LOST, and closes that client: kazoo would
reconnect on a fresh session, but the contract wants a new ``register_broker`` (a new
incarnation). Incarnation epochs are the feed seq of the registration write (the head is the
CAS counter), so they grow store-wide.

Controller fencing. Election is one multi-op: create the ephemeral ``/controller`` and
compare-and-set ``/controller_epoch``. Every controller write checks the versions of both
nodes in its transaction, so a controller whose session expired (its ``/controller`` is gone)
or that was replaced is refused even before anyone else is elected.

SUSPENDED from ``suspend_session`` (the ``SessionFaults`` hook) is simulated on the client side,
as in the memory backend: the real session keeps pinging. ``expire_session`` is real
(twin-session close). Listener callbacks and feed pushes run on one worker thread per handle.
"""

from __future__ import annotations

import functools
import itertools
import json
import logging
import queue
import threading
import time
import urllib.parse
import uuid
from collections.abc import Callable, Sequence
from typing import Any

import attrs
from kazoo.client import KazooClient
from kazoo.protocol.states import KazooState

from replog.coord.admin import superseded_requests, validate_admin_request
from replog.coord.contract import (
    ADMIN_QUEUE_LIMIT,
    DEFAULT_TIMEOUT_MS,
    MAX_CHANGES_PER_BATCH,
    Coordinator,
    new_partition_states,
    validate_partition_state,
    validate_replica_assignment,
)
from replog.coord.errors import (
    AdminQueueFullError,
    BrokerIdInUseError,
    CoordinatorClosedError,
    CoordinatorUnavailableError,
    FencedControllerError,
    MustResyncError,
    SessionExpiredError,
    TopicExistsError,
    UnknownTopicError,
)
from replog.coord.types import (
    CONTROLLER_TARGET,
    AdminPayload,
    AdminRequest,
    AdminRequestChanged,
    AdminRequestChangeReason,
    BrokerChanged,
    BrokerChangeReason,
    BrokerInfo,
    CasResult,
    CasStatus,
    ChangeBatch,
    ControllerChanged,
    ControllerInfo,
    MetadataChange,
    MetadataSnapshot,
    PartitionChanged,
    PartitionState,
    SessionEvent,
    SessionState,
    Subscription,
    TopicAssignment,
    TopicChanged,
    TopicChangeReason,
)
from replog.coord.zk_codec import (
    decode_admin_request,
    decode_broker,
    decode_controller,
    decode_records,
    decode_state,
    encode_admin_request,
    encode_broker,
    encode_controller,
    encode_json,
    encode_state,
)
from replog.coord.zk_io import CHANGES, HEAD, Op, Plan, ZkIo, change_path, kazoo_errors
from replog.errors import ErrorCode, InvalidConfigError
from replog.topics import collision_key, validate_topic_name

__all__ = ["ZooKeeperCoordinator"]

_log = logging.getLogger(__name__)

IDS = "/brokers/ids"
TOPICS = "/brokers/topics"
CONTROLLER = "/controller"
EPOCH = "/controller_epoch"
GONE = "/replog/gone"
QUEUES = "/admin/queues"
_LAYOUT = (IDS, TOPICS, EPOCH, HEAD, CHANGES, GONE, QUEUES)


def _queue_dir(target: int) -> str:
    return f"{QUEUES}/{'controller' if target == CONTROLLER_TARGET else target}"


def _state_path(topic: str, partition: int) -> str:
    return f"{TOPICS}/{topic}/partitions/{partition}/state"


def _epoch_value(data: bytes) -> tuple[int, list[int] | None]:
    if not data:
        return 0, None
    obj = json.loads(data)
    return int(obj["epoch"]), obj.get("holder")


@attrs.define(eq=False)
class _Session:
    """One broker session held by this handle (its own kazoo client)."""

    broker_id: int
    client: Any
    incarnation_epoch: int = 0
    kazoo_suspended: bool = False
    fault_suspended: bool = False
    expiring: bool = False
    lost: bool = False
    ended: bool = False
    last_emitted: SessionState | None = None

    @property
    def state(self) -> SessionState:
        if self.ended:
            return SessionState.LOST
        if self.lost or self.kazoo_suspended or self.fault_suspended:
            return SessionState.SUSPENDED
        return SessionState.CONNECTED


@attrs.define(eq=False)
class _FeedSub:
    callback: Callable[[ChangeBatch], None]
    cursor: int


def _stop_client(client: Any) -> None:
    try:
        client.stop()
        client.close()
    except Exception:
        _log.debug("stopping a kazoo client failed", exc_info=True)


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
        self._hosts = hosts
        self._io = ZkIo(root)
        self._main = main
        self._default_timeout_ms = default_timeout_ms
        self._admin_limit = admin_queue_limit
        self._lock = threading.Lock()
        self._closed = False
        self._sessions: dict[int, _Session] = {}
        self._listeners: dict[int, dict[int, Callable[[SessionEvent], None]]] = {}
        self._subs: dict[int, _FeedSub] = {}
        self._tokens = itertools.count(1)
        self._watching = False
        self._events: queue.Queue[Callable[[], None] | None] = queue.Queue()
        self._worker = threading.Thread(target=self._run_worker, daemon=True, name="zk-coord")
        self._worker.start()
        main.add_listener(self._main_listener)

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
        main = KazooClient(hosts=hosts, timeout=max(default_timeout_ms, 4000) / 1000)
        deadline = time.monotonic() + default_timeout_ms / 1000
        with kazoo_errors():
            try:
                main.start(timeout=default_timeout_ms / 1000)
                ZkIo(root).ensure(main, _LAYOUT, deadline)
            except BaseException:
                _stop_client(main)
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
        return time.monotonic() + ms / 1000

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
        if state == KazooState.CONNECTED and self._subs:
            self._events.put(self._pump)

    def _emit(self, session: _Session, state: SessionState) -> None:
        """Deliver a session transition (worker thread), skipping repeats."""
        if session.last_emitted is state or session.last_emitted is SessionState.LOST:
            return
        session.last_emitted = state
        event = SessionEvent(session.broker_id, session.incarnation_epoch, state)
        for callback in list(self._listeners.get(session.broker_id, {}).values()):
            try:
                callback(event)
            except Exception:
                _log.exception("session listener raised; continuing")

    def _kazoo_listener(self, session: _Session) -> Callable[[str], None]:
        def listener(state: str) -> None:
            with self._lock:
                if session.ended or session.lost or session.incarnation_epoch == 0:
                    if state == KazooState.LOST and session.incarnation_epoch and not session.ended:
                        session.lost = True
                    return
                if state == KazooState.LOST:
                    session.lost = True
                    self._events.put(functools.partial(self._session_lost, session))
                    return
                if state == KazooState.SUSPENDED and session.expiring:
                    return
                session.kazoo_suspended = state == KazooState.SUSPENDED
                now = session.state
            self._events.put(functools.partial(self._emit, session, now))

        return listener

    def _session_lost(self, session: _Session) -> None:
        """The session expired (worker thread): record it in the feed, then report LOST."""
        if session.ended:
            return
        try:
            with kazoo_errors():
                self._record_expiry(session, time.monotonic() + self._default_timeout_ms / 1000)
        except Exception:
            _log.exception("could not record the expiry of broker %d", session.broker_id)
        self._end(session)
        _stop_client(session.client)

    def _end(self, session: _Session) -> None:
        with self._lock:
            session.ended = True
            if self._sessions.get(session.broker_id) is session:
                del self._sessions[session.broker_id]
        self._events.put(functools.partial(self._emit, session, SessionState.LOST))

    def _record_expiry(self, session: _Session, deadline: float) -> None:
        broker_id, inc = session.broker_id, session.incarnation_epoch
        marker = f"{GONE}/{broker_id}-{inc}"
        io, c = self._io, self._main

        def prepare(seq: int) -> Plan[None]:
            if io.get(c, marker, deadline) is not None:
                return Plan(None, write=False)
            if io.get(c, f"{IDS}/{broker_id}", deadline) is not None:
                return Plan(None, write=False)  # re-registered (that record supersedes) or alive
            records: list[MetadataChange] = [
                BrokerChanged(
                    seq=seq,
                    reason=BrokerChangeReason.EXPIRED,
                    broker_id=broker_id,
                    incarnation_epoch=inc,
                    broker=None,
                )
            ]
            ops: list[Op] = [("create", marker, b"", False)]
            ops += self._vacate_if_holder(c, broker_id, inc, seq, records, deadline)
            return Plan(None, ops, records)

        io.transact(c, prepare, deadline)

    def _vacate_if_holder(
        self,
        c: Any,
        broker_id: int,
        inc: int,
        seq: int,
        records: list[MetadataChange],
        deadline: float,
    ) -> list[Op]:
        """Ops (and a ControllerChanged(None)) ending the role if this incarnation holds it."""
        ops: list[Op] = []
        got = self._io.get(c, CONTROLLER, deadline)
        epoch_node = self._io.get(c, EPOCH, deadline)
        if epoch_node is None:
            raise CoordinatorUnavailableError("the ZooKeeper layout is missing /controller_epoch")
        epoch, holder = _epoch_value(epoch_node[0])
        if got is not None:
            ctl = decode_controller(got[0])
            if (ctl.controller_id, ctl.incarnation_epoch) != (broker_id, inc):
                return ops
            ops.append(("delete", CONTROLLER, got[1].version))
        elif holder != [broker_id, inc]:
            return ops
        ops.append(
            ("set", EPOCH, encode_json({"epoch": epoch, "holder": None}), epoch_node[1].version)
        )
        records.append(ControllerChanged(seq=seq, controller=None))
        return ops

    def _held(self, broker_id: int) -> _Session | None:
        with self._lock:
            session = self._sessions.get(broker_id)
        return None if session is None or session.ended else session

    def _store_incarnation(self, broker_id: int, deadline: float) -> int | None:
        got = self._io.get(self._main, f"{IDS}/{broker_id}", deadline)
        return None if got is None else decode_broker(broker_id, got[0]).incarnation_epoch

    def _session_for(self, broker_id: int, inc: int, deadline: float) -> _Session:
        session = self._held(broker_id)
        if session is None or session.incarnation_epoch != inc:
            current = (
                session.incarnation_epoch
                if session is not None
                else self._store_incarnation(broker_id, deadline)
            )
            raise SessionExpiredError(broker_id, inc, current)
        if session.state is SessionState.SUSPENDED:
            raise CoordinatorUnavailableError(f"broker {broker_id}'s session is suspended")
        return session

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
            sessions = list(self._sessions.values())
        for session in sessions:
            try:
                with kazoo_errors():
                    self._unregister(
                        session.client,
                        session.broker_id,
                        session.incarnation_epoch,
                        time.monotonic() + 2.0,
                    )
            except Exception:
                _log.debug("unregistering broker %d at close failed", session.broker_id)
            self._end(session)
            _stop_client(session.client)
        self._subs.clear()
        self._events.put(None)
        if threading.current_thread() is not self._worker:
            self._worker.join(timeout=10)
        self._listeners.clear()
        _stop_client(self._main)

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
    ) -> BrokerInfo:
        """See ``Coordinator.register_broker``. Opens a kazoo client whose session is the
        broker's, with ``session_timeout_ms`` (the server clamps it to its min/max)."""
        if broker_id < 0 or session_timeout_ms <= 0:
            raise ValueError(f"bad broker id {broker_id} or session timeout {session_timeout_ms}")
        deadline = self._deadline(timeout_ms)
        held = self._held(broker_id)
        if held is not None and not held.lost:
            raise BrokerIdInUseError(broker_id, held.incarnation_epoch)
        client = KazooClient(hosts=self._hosts, timeout=session_timeout_ms / 1000)
        session = _Session(broker_id, client)
        client.add_listener(self._kazoo_listener(session))
        io, path = self._io, f"{IDS}/{broker_id}"

        def prepare(seq: int) -> Plan[BrokerInfo]:
            current = io.get(client, path, deadline)
            if current is not None:
                raise BrokerIdInUseError(
                    broker_id, decode_broker(broker_id, current[0]).incarnation_epoch
                )
            broker = BrokerInfo(
                broker_id=broker_id, incarnation_epoch=seq, host=host, port=port, rack=rack
            )
            record = BrokerChanged(
                seq=seq,
                reason=BrokerChangeReason.REGISTERED,
                broker_id=broker_id,
                incarnation_epoch=seq,
                broker=broker,
            )
            return Plan(broker, [("create", path, encode_broker(broker), True)], [record])

        try:
            with kazoo_errors():
                client.start(timeout=max(deadline - time.monotonic(), 0.001))
                broker = io.transact(client, prepare, deadline)
        except BaseException:
            _stop_client(client)
            raise
        with self._lock:
            session.incarnation_epoch = broker.incarnation_epoch
            self._sessions[broker_id] = session
        self._events.put(functools.partial(self._emit, session, SessionState.CONNECTED))
        return broker

    def heartbeat(
        self, broker_id: int, incarnation_epoch: int, *, timeout_ms: int | None = None
    ) -> SessionState:
        """See ``Coordinator.heartbeat``: kazoo pings by itself, so this only checks."""
        deadline = self._deadline(timeout_ms)
        with kazoo_errors():
            return self._session_for(broker_id, incarnation_epoch, deadline).state

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
        io, path = self._io, f"{IDS}/{broker_id}"
        with kazoo_errors():
            client = self._session_for(broker_id, incarnation_epoch, deadline).client

            def prepare(seq: int) -> Plan[BrokerInfo]:
                got = io.get(client, path, deadline)
                old = None if got is None else decode_broker(broker_id, got[0])
                if got is None or old is None or old.incarnation_epoch != incarnation_epoch:
                    current = None if old is None else old.incarnation_epoch
                    raise SessionExpiredError(broker_id, incarnation_epoch, current)
                new = attrs.evolve(
                    old,
                    fenced=old.fenced if fenced is None else fenced,
                    in_controlled_shutdown=(
                        old.in_controlled_shutdown
                        if in_controlled_shutdown is None
                        else in_controlled_shutdown
                    ),
                )
                if new == old:
                    return Plan(new, write=False)
                record = BrokerChanged(
                    seq=seq,
                    reason=BrokerChangeReason.UPDATED,
                    broker_id=broker_id,
                    incarnation_epoch=incarnation_epoch,
                    broker=new,
                )
                return Plan(new, [("set", path, encode_broker(new), got[1].version)], [record])

            return io.transact(client, prepare, deadline)

    def _unregister(self, client: Any, broker_id: int, inc: int, deadline: float) -> bool:
        io, path = self._io, f"{IDS}/{broker_id}"

        def prepare(seq: int) -> Plan[bool]:
            got = io.get(client, path, deadline)
            if got is None or decode_broker(broker_id, got[0]).incarnation_epoch != inc:
                return Plan(False, write=False)
            records: list[MetadataChange] = [
                BrokerChanged(
                    seq=seq,
                    reason=BrokerChangeReason.UNREGISTERED,
                    broker_id=broker_id,
                    incarnation_epoch=inc,
                    broker=None,
                )
            ]
            ops: list[Op] = [
                ("delete", path, got[1].version),
                ("create", f"{GONE}/{broker_id}-{inc}", b"", False),
            ]
            ops += self._vacate_if_holder(client, broker_id, inc, seq, records, deadline)
            return Plan(True, ops, records)

        return io.transact(client, prepare, deadline)

    def unregister_broker(
        self, broker_id: int, incarnation_epoch: int, *, timeout_ms: int | None = None
    ) -> bool:
        """See ``Coordinator.unregister_broker`` (also works for a session another handle
        holds: the ephemeral is deleted and that session later sees nothing but a gap)."""
        deadline = self._deadline(timeout_ms)
        session = self._held(broker_id)
        if session is not None and session.incarnation_epoch != incarnation_epoch:
            return False
        if session is not None and session.state is SessionState.SUSPENDED:
            raise CoordinatorUnavailableError(f"broker {broker_id}'s session is suspended")
        client = self._main if session is None else session.client
        with kazoo_errors():
            done = self._unregister(client, broker_id, incarnation_epoch, deadline)
        if done and session is not None:
            self._end(session)
            _stop_client(session.client)
        return done

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

    def session_state(self, broker_id: int) -> SessionState:
        """See ``Coordinator.session_state``."""
        if self._closed:
            raise CoordinatorClosedError("the ZooKeeper coordinator is closed")
        session = self._held(broker_id)
        return SessionState.LOST if session is None else session.state

    def add_session_listener(
        self, broker_id: int, callback: Callable[[SessionEvent], None]
    ) -> Subscription:
        """See ``Coordinator.add_session_listener`` (callbacks run on the worker thread)."""
        self._deadline(None)
        token = next(self._tokens)
        with self._lock:
            self._listeners.setdefault(broker_id, {})[token] = callback

        def cancel() -> None:
            with self._lock:
                self._listeners.get(broker_id, {}).pop(token, None)

        return Subscription(cancel)

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

            def prepare(seq: int) -> Plan[ControllerInfo]:
                got = io.get(client, CONTROLLER, deadline)
                if got is not None:
                    return Plan(decode_controller(got[0]), write=False)
                me = io.get(client, f"{IDS}/{broker_id}", deadline)
                mine = None if me is None else decode_broker(broker_id, me[0])
                if me is None or mine is None or mine.incarnation_epoch != incarnation_epoch:
                    current = None if mine is None else mine.incarnation_epoch
                    raise SessionExpiredError(broker_id, incarnation_epoch, current)
                epoch_node = self._epoch_node(client, deadline)
                epoch, _ = _epoch_value(epoch_node[0])
                new = ControllerInfo(broker_id, epoch + 1, incarnation_epoch)
                holder = {"epoch": epoch + 1, "holder": [broker_id, incarnation_epoch]}
                ops: list[Op] = [
                    ("check", f"{IDS}/{broker_id}", me[1].version),
                    ("create", CONTROLLER, encode_controller(new), True),
                    ("set", EPOCH, encode_json(holder), epoch_node[1].version),
                ]
                return Plan(new, ops, [ControllerChanged(seq=seq, controller=new)])

            return io.transact(client, prepare, deadline)

    def _epoch_node(self, client: Any, deadline: float) -> tuple[bytes, Any]:
        got = self._io.get(client, EPOCH, deadline)
        if got is None:
            raise CoordinatorUnavailableError("the ZooKeeper layout is missing /controller_epoch")
        return got

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
            if (ctl.controller_id, ctl.controller_epoch) != (broker_id, controller_epoch):
                return False
            client = self._client_of(ctl)

            def prepare(seq: int) -> Plan[bool]:
                now = io.get(client, CONTROLLER, deadline)
                if now is None or decode_controller(now[0]) != ctl:
                    return Plan(False, write=False)
                epoch_node = self._epoch_node(client, deadline)
                epoch, _ = _epoch_value(epoch_node[0])
                ops: list[Op] = [
                    ("delete", CONTROLLER, now[1].version),
                    (
                        "set",
                        EPOCH,
                        encode_json({"epoch": epoch, "holder": None}),
                        epoch_node[1].version,
                    ),
                ]
                return Plan(True, ops, [ControllerChanged(seq=seq, controller=None)])

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
        active = None if got is None else decode_controller(got[0])
        if got is None or active is None or active.controller_epoch != controller_epoch:
            raise FencedControllerError(
                controller_epoch, None if active is None else active.controller_epoch
            )
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
        obj = json.loads(got[0])
        count = len(obj["partitions"])
        nodes = self._io.gets(client, [_state_path(topic, p) for p in range(count)], deadline)
        states = []
        for node in nodes:
            if node is None:
                return None  # deleted meanwhile
            states.append((decode_state(node[0], node[1].version), node[1]))
        assignment = TopicAssignment(
            topic=topic, topic_id=obj["topic_id"], replicas=[s.replicas for s, _ in states]
        )
        return assignment, got[1], states

    @staticmethod
    def _topic_json(topic_id: str, replicas: Sequence[Sequence[int]]) -> bytes:
        return encode_json(
            {
                "version": 3,
                "topic_id": topic_id,
                "partitions": {str(p): list(r) for p, r in enumerate(replicas)},
                "adding_replicas": {},
                "removing_replicas": {},
            }
        )

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
        timeout_ms: int | None = None,
    ) -> TopicAssignment:
        """See ``Coordinator.create_topic``."""
        validate_topic_name(topic)
        assignment = validate_replica_assignment(replica_assignment)
        states = new_partition_states(assignment, initial_states)
        deadline = self._deadline(timeout_ms)
        io = self._io
        with kazoo_errors():
            client = self._controller_client(controller_epoch, deadline)

            def prepare(seq: int) -> Plan[TopicAssignment]:
                ops = self._fence(client, controller_epoch, deadline)
                key = collision_key(topic)
                for existing in io.children(client, TOPICS, deadline):
                    if collision_key(existing) == key:
                        raise TopicExistsError(topic, existing)
                result = TopicAssignment(
                    topic=topic, topic_id=uuid.uuid4().hex, replicas=assignment
                )
                base = f"{TOPICS}/{topic}"
                ops.append(("create", base, self._topic_json(result.topic_id, assignment), False))
                ops.append(("create", f"{base}/partitions", b"", False))
                ops += self._partition_ops(topic, 0, states, controller_epoch)
                records: list[MetadataChange] = [
                    TopicChanged(seq=seq, reason=TopicChangeReason.CREATED, assignment=result)
                ]
                records += [
                    PartitionChanged(seq=seq, topic=topic, partition=p, state=s)
                    for p, s in enumerate(states)
                ]
                return Plan(result, ops, records)

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
                record = TopicChanged(seq=seq, reason=TopicChangeReason.DELETED, assignment=removed)
                return Plan(removed, ops, [record])

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
        assignment = validate_replica_assignment(new_replica_assignment)
        states = new_partition_states(assignment, initial_states)
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
                result = attrs.evolve(current, replicas=(*current.replicas, *assignment))
                data = self._topic_json(result.topic_id, result.replicas)
                ops.append(("set", f"{TOPICS}/{topic}", data, topic_stat.version))
                ops += self._partition_ops(topic, first, states, controller_epoch)
                records: list[MetadataChange] = [
                    TopicChanged(
                        seq=seq, reason=TopicChangeReason.PARTITIONS_ADDED, assignment=result
                    )
                ]
                records += [
                    PartitionChanged(seq=seq, topic=topic, partition=first + i, state=s)
                    for i, s in enumerate(states)
                ]
                return Plan(result, ops, records)

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
            got = self._io.get(self._main, _state_path(topic, partition), deadline)
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
        io, path = self._io, _state_path(topic, partition)
        with kazoo_errors():
            client = self._controller_client(controller_epoch, deadline)

            def prepare(seq: int) -> Plan[CasResult]:
                try:
                    ops = self._fence(client, controller_epoch, deadline)
                except FencedControllerError as e:
                    fenced = CasResult(
                        status=CasStatus.FENCED_CONTROLLER,
                        active_controller_epoch=e.active_controller_epoch,
                    )
                    return Plan(fenced, write=False)
                got = io.get(client, path, deadline) if partition >= 0 else None
                if got is None:
                    return Plan(CasResult(status=CasStatus.UNKNOWN_PARTITION), write=False)
                current = decode_state(got[0], got[1].version)
                if current.partition_epoch != expected_partition_epoch:
                    mismatch = CasResult(status=CasStatus.VERSION_MISMATCH, state=current)
                    return Plan(mismatch, write=False)
                validate_partition_state(new_state, current)
                stored = attrs.evolve(new_state, partition_epoch=expected_partition_epoch + 1)
                data = encode_state(stored, controller_epoch)
                ops.append(("set", path, data, expected_partition_epoch))
                record = PartitionChanged(seq=seq, topic=topic, partition=partition, state=stored)
                return Plan(CasResult(status=CasStatus.OK, state=stored, seq=seq), ops, [record])

            return io.transact(client, prepare, deadline)

    # ---- the change feed ----

    def _feed_bounds(self, deadline: float) -> tuple[int, int, Any]:
        """(trimmed_before, head, stat of the changes node)."""
        trimmed = self._io.get(self._main, CHANGES, deadline)
        head = self._io.get(self._main, HEAD, deadline)
        if trimmed is None or head is None:
            raise CoordinatorUnavailableError("the ZooKeeper feed layout is missing")
        return int(trimmed[0] or b"0"), int(head[0] or b"1"), trimmed[1]

    def _read_feed(self, seq: int, max_changes: int, deadline: float) -> ChangeBatch:
        trimmed, head, _ = self._feed_bounds(deadline)
        if seq < trimmed:
            raise MustResyncError(seq, trimmed)
        first = max(seq, 1)
        seqs = list(range(first, min(head, first + max_changes)))
        nodes = self._io.gets(self._main, [change_path(s) for s in seqs], deadline)
        changes: list[MetadataChange] = []
        for node in nodes:
            if node is None:
                trimmed, _, _ = self._feed_bounds(deadline)
                raise MustResyncError(seq, trimmed)
            changes += decode_records(node[0])
            if len(changes) >= max_changes:
                break
        return ChangeBatch(tuple(changes), changes[-1].seq + 1 if changes else seq)

    def changes_since(
        self,
        seq: int,
        *,
        max_changes: int = MAX_CHANGES_PER_BATCH,
        timeout_ms: int | None = None,
    ) -> ChangeBatch:
        """See ``Coordinator.changes_since``."""
        if seq < 0 or max_changes < 1:
            raise ValueError(f"bad seq {seq} or max_changes {max_changes}")
        deadline = self._deadline(timeout_ms)
        with kazoo_errors():
            return self._read_feed(seq, max_changes, deadline)

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
                epoch, _ = _epoch_value(self._epoch_node(c, deadline)[0])
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
                    )

    def _pump(self) -> None:
        """Push new feed records to every subscriber (worker thread)."""
        if self._closed:
            return
        deadline = time.monotonic() + self._default_timeout_ms / 1000
        for token, sub in list(self._subs.items()):
            while token in self._subs:
                try:
                    with kazoo_errors():
                        batch = self._read_feed(sub.cursor, MAX_CHANGES_PER_BATCH, deadline)
                except MustResyncError:
                    with kazoo_errors():
                        _, head, _ = self._feed_bounds(deadline)
                    sub.cursor = head
                    sub.callback(ChangeBatch((), head, resync_required=True))
                    break
                if not batch.changes:
                    break
                sub.cursor = batch.next_seq
                sub.callback(batch)

    def _on_head(self, data: bytes | None, stat: Any, event: Any = None) -> bool:
        if self._closed:
            return False
        self._events.put(self._pump)
        return True

    def subscribe(
        self, callback: Callable[[ChangeBatch], None], *, from_seq: int | None = None
    ) -> Subscription:
        """See ``Coordinator.subscribe``: a data watch on the feed head wakes the worker,
        which reads from each subscriber's cursor."""
        deadline = self._deadline(None)
        with kazoo_errors():
            cursor = self._feed_bounds(deadline)[1] if from_seq is None else from_seq
        token = next(self._tokens)
        self._subs[token] = _FeedSub(callback, cursor)
        with self._lock:
            start_watch, self._watching = not self._watching, True
        if start_watch:
            self._main.DataWatch(self._io.p(HEAD), self._on_head)
        self._events.put(self._pump)

        def cancel() -> None:
            self._subs.pop(token, None)

        return Subscription(cancel)

    def trim_history(self, before_seq: int, *, timeout_ms: int | None = None) -> int:
        """See ``Coordinator.trim_history`` (this backend trims only when asked)."""
        deadline = self._deadline(timeout_ms)
        io, c = self._io, self._main
        with kazoo_errors():
            while True:
                trimmed, head, stat = self._feed_bounds(deadline)
                new = max(trimmed, min(before_seq, head))
                if new == trimmed:
                    return trimmed
                try:
                    io.wait(
                        c.set_async(io.p(CHANGES), str(new).encode(), version=stat.version),
                        deadline,
                    )
                except Exception as e:  # BadVersion: someone else trimmed; re-read
                    if type(e).__name__ != "BadVersionError":
                        raise
                    continue
                io.delete_many(c, [change_path(s) for s in range(max(trimmed, 1), new)], deadline)
                return new

    # ---- admin queue ----

    def _pending(self, client: Any, target: int, deadline: float) -> list[tuple[AdminRequest, Any]]:
        qdir = _queue_dir(target)
        names = self._io.children(client, qdir, deadline)
        got = self._io.gets(client, [f"{qdir}/{n}" for n in names], deadline)
        return [(decode_admin_request(g[0]), g[1]) for g in got if g is not None]

    def submit_admin_request(
        self, target: int, payload: AdminPayload, *, timeout_ms: int | None = None
    ) -> AdminRequest:
        """See ``Coordinator.submit_admin_request``: a persistent node
        ``/admin/queues/<target>/<request_id>``; the request id is the submission's seq."""
        validate_admin_request(target, payload)
        deadline = self._deadline(timeout_ms)
        io, c, qdir = self._io, self._main, _queue_dir(target)
        with kazoo_errors():
            io.ensure(c, [qdir], deadline)

            def prepare(seq: int) -> Plan[AdminRequest]:
                pending = self._pending(c, target, deadline)
                dropped: list[AdminRequest] = []
                if len(pending) >= self._admin_limit:
                    dropped = superseded_requests([r for r, _ in pending])
                    if len(pending) - len(dropped) >= self._admin_limit:
                        raise AdminQueueFullError(target, self._admin_limit)
                versions = {r.request_id: stat.version for r, stat in pending}
                request = AdminRequest(
                    request_id=seq, target=target, payload=payload, submitted_seq=seq
                )
                ops: list[Op] = [
                    ("delete", f"{qdir}/{old.request_id:010d}", versions[old.request_id])
                    for old in dropped
                ]
                ops.append(("create", f"{qdir}/{seq:010d}", encode_admin_request(request), False))
                records: list[MetadataChange] = [
                    AdminRequestChanged(
                        seq=seq,
                        reason=AdminRequestChangeReason.COMPLETED,
                        request=old,
                        outcome=ErrorCode.OPERATION_NOT_ATTEMPTED,
                        message=f"superseded: queue for target {target} was full",
                    )
                    for old in dropped
                ]
                records.append(
                    AdminRequestChanged(
                        seq=seq, reason=AdminRequestChangeReason.SUBMITTED, request=request
                    )
                )
                return Plan(request, ops, records)

            return io.transact(c, prepare, deadline)

    def pending_admin_requests(
        self, target: int, *, timeout_ms: int | None = None
    ) -> list[AdminRequest]:
        """See ``Coordinator.pending_admin_requests``."""
        deadline = self._deadline(timeout_ms)
        with kazoo_errors():
            return [r for r, _ in self._pending(self._main, target, deadline)]

    def complete_admin_request(
        self,
        request_id: int,
        *,
        outcome: ErrorCode = ErrorCode.NONE,
        message: str = "",
        timeout_ms: int | None = None,
    ) -> bool:
        """See ``Coordinator.complete_admin_request``."""
        deadline = self._deadline(timeout_ms)
        io, c = self._io, self._main
        with kazoo_errors():
            dirs = io.children(c, QUEUES, deadline)
            paths = [f"{QUEUES}/{d}/{request_id:010d}" for d in dirs]
            found = [p for p, g in zip(paths, io.gets(c, paths, deadline), strict=True) if g]
            if not found:
                return False
            path = found[0]

            def prepare(seq: int) -> Plan[bool]:
                got = io.get(c, path, deadline)
                if got is None:
                    return Plan(False, write=False)
                record = AdminRequestChanged(
                    seq=seq,
                    reason=AdminRequestChangeReason.COMPLETED,
                    request=decode_admin_request(got[0]),
                    outcome=outcome,
                    message=message,
                )
                return Plan(True, [("delete", path, got[1].version)], [record])

            return io.transact(c, prepare, deadline)

    # ---- SessionFaults (tests) ----

    def expire_session(self, broker_id: int) -> None:
        """Expire the broker's session now: a twin client on the same session id and password
        connects and closes it (the server deletes its ephemerals); LOST follows."""
        session = self._held(broker_id)
        if session is None:
            return
        client_id = session.client.client_id
        if client_id is None:
            return
        with self._lock:
            session.expiring = True
        twin = KazooClient(hosts=self._hosts, client_id=client_id, timeout=10.0)
        with kazoo_errors():
            try:
                twin.start(timeout=self._default_timeout_ms / 1000)
            finally:
                _stop_client(twin)

    def suspend_session(self, broker_id: int) -> None:
        """Simulated SUSPENDED (calls as this broker raise ``CoordinatorUnavailableError``);
        the real session stays alive."""
        session = self._held(broker_id)
        if session is None:
            return
        with self._lock:
            if session.state is not SessionState.CONNECTED:
                return
            session.fault_suspended = True
        self._events.put(functools.partial(self._emit, session, SessionState.SUSPENDED))

    def resume_session(self, broker_id: int) -> None:
        """End a simulated SUSPENDED (CONNECTED again unless the session was lost)."""
        session = self._held(broker_id)
        if session is None:
            return
        with self._lock:
            if not session.fault_suspended:
                return
            session.fault_suspended = False
            now = session.state
        if now is SessionState.CONNECTED:
            self._events.put(functools.partial(self._emit, session, now))

    def broker_client_id(self, broker_id: int) -> tuple[int, bytes] | None:
        """The (session id, password) of the broker's session held here (fault tests)."""
        session = self._held(broker_id)
        if session is None:
            return None
        client_id: tuple[int, bytes] | None = session.client.client_id
        return client_id
