"""Broker sessions of the ZooKeeper backend: one kazoo client per registered broker, whose
ZooKeeper session *is* the broker's session (its ephemeral ``/brokers/ids/<id>``, and
``/controller`` if it wins, go with it). Registration, flag updates and unregistration; kazoo's
CONNECTED/SUSPENDED/LOST mapped to ``SessionState``; the feed record of an expiry (written once,
marker ``/replog/gone/<id>-<incarnation>``); and the ``SessionFaults`` test hooks.

Expiries of dead processes. A broker killed uncleanly never runs its own LOST handler, so every
handle records expiries it notices: registration also writes the persistent
``/replog/seen/<id>`` (its incarnation), and the end of a session (unregister or an expiry
record) deletes it. A ``seen`` node without its ephemeral ``/brokers/ids/<id>`` is an
unrecorded expiry: ``_reap`` writes BrokerChanged(EXPIRED), plus ControllerChanged(None) if
that incarnation held the role, in one multi-op whose create of the marker fails if another
handle won. It runs on the worker thread whenever the main client's watches on
``/brokers/ids`` children or ``/controller`` fire, on every reconnect of the main client (and
again 0.5 s after a failed attempt); ``elect_controller`` reaps first, and a re-registration
records its predecessor's expiry in its own write. Until the record lands, reads already see
the vacancy: the server deleted the ephemerals.

``ZkSessionsMixin`` is a part of ``ZooKeeperCoordinator``: it uses the handle's state, declared
below, and is not used on its own."""

from __future__ import annotations

import functools
import logging
import queue
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import attrs
from kazoo.client import KazooClient
from kazoo.protocol.states import KazooState
from kazoo.retry import KazooRetry

from replog.clock import monotonic_s
from replog.coord import rules
from replog.coord.errors import (
    BrokerIdInUseError,
    CoordinatorClosedError,
    CoordinatorUnavailableError,
    SessionExpiredError,
)
from replog.coord.sessions import SessionListeners, session_event
from replog.coord.zookeeper.znode_io import Op, Plan, ZkIo, kazoo_errors
from replog.coord.zookeeper.znodes import (
    CONTROLLER,
    EPOCH,
    GONE,
    IDS,
    SEEN,
    decode_broker,
    decode_controller,
    decode_epoch,
    encode_broker,
    encode_epoch,
)
from replog.metadata import records
from replog.metadata.types import (
    BrokerChangeReason,
    BrokerInfo,
    MetadataChange,
    SessionEvent,
    SessionState,
    Subscription,
)

__all__ = ["ZkSession", "ZkSessionsMixin", "new_client", "stop_client"]

_log = logging.getLogger(__name__)


@attrs.define(eq=False)
class ZkSession:
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


#: The longest pause between reconnect attempts, and the share of a session's timeout it may take.
RECONNECT_MAX_DELAY_S = 1.0
_RECONNECT_SHARE_OF_TIMEOUT = 0.25


def new_client(hosts: str, session_timeout_s: float, **kwargs: Any) -> KazooClient:
    """A kazoo client that keeps trying to reconnect at most ``RECONNECT_MAX_DELAY_S`` apart.

    kazoo's default reconnect back-off doubles up to an hour: after a ZooKeeper server is down a
    few seconds, the next attempt can come later than the session timeout, so a session that a
    restarted server would have kept expires instead. Attempts stay well inside the timeout.
    """
    max_delay = min(RECONNECT_MAX_DELAY_S, session_timeout_s * _RECONNECT_SHARE_OF_TIMEOUT)
    retry = KazooRetry(max_tries=-1, delay=min(0.1, max_delay), backoff=2, max_delay=max_delay)
    return KazooClient(hosts=hosts, timeout=session_timeout_s, connection_retry=retry, **kwargs)


def stop_client(client: Any) -> None:
    """Stop and close a kazoo client, ignoring failures."""
    try:
        client.stop()
        client.close()
    except Exception:
        _log.debug("stopping a kazoo client failed", exc_info=True)


class ZkSessionsMixin:
    """The broker-session part of ``ZooKeeperCoordinator``."""

    _hosts: str
    _io: ZkIo
    _main: Any
    _default_timeout_ms: int
    _lock: threading.Lock
    _closed: bool
    _sessions: dict[int, ZkSession]
    _listeners: SessionListeners
    _events: queue.Queue[Callable[[], None] | None]
    _reap_pending: bool

    if TYPE_CHECKING:  # provided by ZooKeeperCoordinator; declared here for the type checker

        def _deadline(self, timeout_ms: int | None) -> float: ...

    def _emit(self, session: ZkSession, state: SessionState) -> None:
        """Deliver a session transition (worker thread), skipping repeats."""
        if session.last_emitted is state or session.last_emitted is SessionState.LOST:
            return
        session.last_emitted = state
        event = session_event(session.broker_id, session.incarnation_epoch, state)
        for callback in self._listeners.callbacks(session.broker_id):
            try:
                callback(event)
            except Exception:
                _log.exception("session listener raised; continuing")

    def _kazoo_listener(self, session: ZkSession) -> Callable[[str], None]:
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

    def _session_lost(self, session: ZkSession) -> None:
        """The session expired (worker thread): record it in the feed, then report LOST."""
        if session.ended:
            return
        try:
            with kazoo_errors():
                self._record_expiry(session, monotonic_s() + self._default_timeout_ms / 1000)
        except Exception:
            _log.exception("could not record the expiry of broker %d", session.broker_id)
        self._end(session)
        stop_client(session.client)

    def _end(self, session: ZkSession) -> None:
        with self._lock:
            session.ended = True
            if self._sessions.get(session.broker_id) is session:
                del self._sessions[session.broker_id]
        self._events.put(functools.partial(self._emit, session, SessionState.LOST))

    def _record_expiry(self, session: ZkSession, deadline: float) -> None:
        self._record_gone(session.broker_id, session.incarnation_epoch, deadline)

    def _record_gone(self, broker_id: int, inc: int, deadline: float) -> bool:
        """Write BrokerChanged(EXPIRED) for incarnation ``inc`` (plus ControllerChanged(None) if
        it held the role) unless it is alive or its end is already in the feed. Any handle may
        call this: the marker's create makes exactly one writer win. True if that end is in
        the feed now (whoever wrote it), False if the incarnation is alive or superseded."""
        marker = f"{GONE}/{broker_id}-{inc}"
        io, c = self._io, self._main

        def prepare(seq: int) -> Plan[bool]:
            if io.get(c, marker, deadline) is not None:
                return Plan(True, write=False)
            if io.get(c, f"{IDS}/{broker_id}", deadline) is not None:
                return Plan(False, write=False)  # alive, or re-registered (which recorded it)
            ops, gone = self._expiry_parts(c, broker_id, inc, seq, deadline)
            return Plan(True, [*ops, *self._unsee_ops(c, broker_id, inc, deadline)], gone)

        return io.transact(c, prepare, deadline)

    def _expiry_parts(
        self, c: Any, broker_id: int, inc: int, seq: int, deadline: float
    ) -> tuple[list[Op], list[MetadataChange]]:
        """The ops (marker create, end of the controller role if it held it) and feed records
        of the expiry of incarnation ``inc``, whose registration is already gone."""
        vacate = self._vacate_if_holder(c, broker_id, inc, deadline)
        gone = records.broker_gone(
            seq, BrokerChangeReason.EXPIRED, broker_id, inc, was_controller=bool(vacate)
        )
        return [("create", f"{GONE}/{broker_id}-{inc}", b"", False), *vacate], gone

    def _unsee_ops(self, c: Any, broker_id: int, inc: int, deadline: float) -> list[Op]:
        """Delete ``/replog/seen/<id>`` if it still names incarnation ``inc``."""
        got = self._io.get(c, f"{SEEN}/{broker_id}", deadline)
        if got is None or int(got[0] or b"0") != inc:
            return []
        return [("delete", f"{SEEN}/{broker_id}", got[1].version)]

    # ---- expiries noticed by any handle ----

    def _reap(self, deadline: float) -> list[int]:
        """Record the expiry of every broker whose ``seen`` node outlived its registration (its
        process died with its session, so its own handle never wrote the record), and end
        this handle's sessions of those incarnations now (kazoo's LOST may come later); return
        their ids."""
        io, c = self._io, self._main
        alive = set(io.children(c, IDS, deadline))
        reaped: list[int] = []
        for name in io.children(c, SEEN, deadline):
            if name in alive:
                continue
            got = io.get(c, f"{SEEN}/{name}", deadline)
            if got is None:
                continue
            broker_id, inc = int(name), int(got[0] or b"0")
            if not self._record_gone(broker_id, inc, deadline):
                continue
            reaped.append(broker_id)
            session = self._held(broker_id)
            if session is not None and session.incarnation_epoch == inc:
                self._end(session)
                stop_client(session.client)
        return reaped

    def _start_reaper(self) -> None:
        """Watch ``/brokers/ids`` children and ``/controller`` on the main client: every change
        (and every reconnect, see ``_schedule_reap``) runs ``_reap`` on the worker thread."""
        self._reap_pending = False
        self._main.ChildrenWatch(self._io.p(IDS), self._vacancy_hint)
        self._main.DataWatch(self._io.p(CONTROLLER), self._vacancy_hint)

    def _vacancy_hint(self, *_: Any) -> bool:
        if self._closed:
            return False  # stops the kazoo watch
        self._schedule_reap()
        return True

    def _schedule_reap(self) -> None:
        """Queue one ``_reap`` on the worker thread (coalesced)."""
        with self._lock:
            if self._closed or self._reap_pending:
                return
            self._reap_pending = True
        self._events.put(self._reap_now)

    def _reap_now(self) -> None:
        with self._lock:
            self._reap_pending = False
        if self._closed:
            return
        try:
            with kazoo_errors():
                self._reap(monotonic_s() + self._default_timeout_ms / 1000)
        except Exception:
            if self._closed:
                return
            _log.debug("recording expiries failed; retrying", exc_info=True)
            retry = threading.Timer(0.5, self._schedule_reap)
            retry.daemon = True
            retry.start()

    def _vacate_if_holder(
        self,
        c: Any,
        broker_id: int,
        inc: int,
        deadline: float,
    ) -> list[Op]:
        """Ops ending the controller role if this incarnation holds it (none: it does not)."""
        ops: list[Op] = []
        got = self._io.get(c, CONTROLLER, deadline)
        epoch_node = self._epoch_node(c, deadline)
        epoch, holder = decode_epoch(epoch_node[0])
        if got is not None:
            ctl = decode_controller(got[0])
            if (ctl.controller_id, ctl.incarnation_epoch) != (broker_id, inc):
                return ops
            ops.append(("delete", CONTROLLER, got[1].version))
        elif holder != [broker_id, inc]:
            return ops
        ops.append(("set", EPOCH, encode_epoch(epoch, None), epoch_node[1].version))
        return ops

    def _epoch_node(self, client: Any, deadline: float) -> tuple[bytes, Any]:
        got = self._io.get(client, EPOCH, deadline)
        if got is None:
            raise CoordinatorUnavailableError("the ZooKeeper layout is missing /controller_epoch")
        return got

    def _held(self, broker_id: int) -> ZkSession | None:
        with self._lock:
            session = self._sessions.get(broker_id)
        return None if session is None or session.ended else session

    def _store_incarnation(self, broker_id: int, deadline: float) -> int | None:
        got = self._io.get(self._main, f"{IDS}/{broker_id}", deadline)
        return None if got is None else decode_broker(broker_id, got[0]).incarnation_epoch

    def _session_for(self, broker_id: int, inc: int, deadline: float) -> ZkSession:
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
        """See ``Coordinator.register_broker``. Opens a kazoo client whose session is the
        broker's, with ``session_timeout_ms`` (the server clamps it to its min/max)."""
        rules.check_registration(broker_id, session_timeout_ms)
        deadline = self._deadline(timeout_ms)
        held = self._held(broker_id)
        if held is not None and not held.lost:
            raise BrokerIdInUseError(broker_id, held.incarnation_epoch)
        client = new_client(self._hosts, session_timeout_ms / 1000)
        session = ZkSession(broker_id, client)
        client.add_listener(self._kazoo_listener(session))
        io, path = self._io, f"{IDS}/{broker_id}"

        def prepare(seq: int) -> Plan[BrokerInfo]:
            current = io.get(client, path, deadline)
            if current is not None:
                raise BrokerIdInUseError(
                    broker_id, decode_broker(broker_id, current[0]).incarnation_epoch
                )
            broker = rules.registration(
                broker_id,
                seq,
                host,
                port,
                rack,
                clean_shutdown=clean_shutdown,
                fenced=fenced,
            )
            ops: list[Op] = [("create", path, encode_broker(broker), True)]
            done = records.broker_registered(seq, broker)
            seen = io.get(client, f"{SEEN}/{broker_id}", deadline)
            if seen is None:
                ops.append(("create", f"{SEEN}/{broker_id}", str(seq).encode(), False))
                return Plan(broker, ops, done)
            old = int(seen[0] or b"0")  # an earlier incarnation whose end may be unrecorded
            if io.get(client, f"{GONE}/{broker_id}-{old}", deadline) is None:
                gone_ops, gone = self._expiry_parts(client, broker_id, old, seq, deadline)
                ops, done = [*gone_ops, *ops], [*gone, *done]
            ops.append(("set", f"{SEEN}/{broker_id}", str(seq).encode(), seen[1].version))
            return Plan(broker, ops, done)

        try:
            with kazoo_errors():
                client.start(timeout=max(deadline - monotonic_s(), 0.001))
                broker = io.transact(client, prepare, deadline)
        except BaseException:
            stop_client(client)
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
                old = rules.check_incarnation(
                    broker_id,
                    incarnation_epoch,
                    None if got is None else decode_broker(broker_id, got[0]),
                )
                new = rules.updated_broker(old, fenced, in_controlled_shutdown)
                if new == old or got is None:
                    return Plan(new, write=False)
                ops: list[Op] = [("set", path, encode_broker(new), got[1].version)]
                return Plan(new, ops, records.broker_updated(seq, new))

            return io.transact(client, prepare, deadline)

    def _unregister(self, client: Any, broker_id: int, inc: int, deadline: float) -> bool:
        io, path = self._io, f"{IDS}/{broker_id}"

        def prepare(seq: int) -> Plan[bool]:
            got = io.get(client, path, deadline)
            if got is None or decode_broker(broker_id, got[0]).incarnation_epoch != inc:
                return Plan(False, write=False)
            vacate = self._vacate_if_holder(client, broker_id, inc, deadline)
            ops: list[Op] = [
                ("delete", path, got[1].version),
                ("create", f"{GONE}/{broker_id}-{inc}", b"", False),
                *vacate,
                *self._unsee_ops(client, broker_id, inc, deadline),
            ]
            gone = records.broker_gone(
                seq, BrokerChangeReason.UNREGISTERED, broker_id, inc, was_controller=bool(vacate)
            )
            return Plan(True, ops, gone)

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
            stop_client(session.client)
        return done

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
        return self._listeners.add(broker_id, callback)

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
        twin = new_client(self._hosts, 10.0, client_id=client_id)
        with kazoo_errors():
            try:
                twin.start(timeout=self._default_timeout_ms / 1000)
            finally:
                stop_client(twin)

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
