"""Broker sessions of the ZooKeeper backend: one kazoo client per registered broker, whose
ZooKeeper session *is* the broker's session (its ephemeral ``/brokers/ids/<id>``, and
``/controller`` if it wins, go with it). Registration, flag updates and unregistration; kazoo's
CONNECTED/SUSPENDED/LOST mapped to ``SessionState``; the feed record of an expiry (written once,
marker ``/replog/gone/<id>-<incarnation>``); and the ``SessionFaults`` test hooks.

Expiries of dead processes. A broker killed uncleanly never runs its own LOST handler, so every
handle records expiries it notices: registration also writes the persistent
``/replog/seen/<id>`` (its incarnation), and the end of a session (unregister or an expiry
record) deletes it. A ``seen`` node without its ephemeral ``/brokers/ids/<id>`` is an
unrecorded expiry: ``reap`` writes BrokerChanged(EXPIRED), plus ControllerChanged(None) if
that incarnation held the role, in one multi-op whose create of the marker fails if another
handle won. It runs on the worker thread whenever the main client's watches on
``/brokers/ids`` children or ``/controller`` fire, on every reconnect of the main client (and
again 0.5 s after a failed attempt); an election reaps first, and a re-registration records
its predecessor's expiry in its own write. Until the record lands, reads already see the
vacancy: the server deleted the ephemerals.
"""

from __future__ import annotations

import functools
import logging
import threading
from collections.abc import Callable
from typing import Any

import attrs
from kazoo.protocol.states import KazooState

from replog.clock import monotonic_s
from replog.coord import rules
from replog.coord.errors import (
    BrokerIdInUseError,
    CoordinatorUnavailableError,
    SessionExpiredError,
)
from replog.coord.sessions import SessionListeners, session_event
from replog.coord.zookeeper.clients import new_client, stop_client
from replog.coord.zookeeper.expiry import (
    expiry_parts,
    gone_marker,
    record_gone,
    unsee_ops,
    vacate_if_holder,
)
from replog.coord.zookeeper.znode_io import Op, Plan, ZkIo, kazoo_errors
from replog.coord.zookeeper.znodes import CONTROLLER, IDS, SEEN, decode_broker, encode_broker
from replog.metadata import records
from replog.metadata.types import (
    BrokerChangeReason,
    BrokerInfo,
    SessionEvent,
    SessionState,
    Subscription,
)

__all__ = ["ZkSession", "ZkSessions"]

_log = logging.getLogger(__name__)

Schedule = Callable[[Callable[[], None]], None]
"""Runs a function on the handle's worker thread (in order, after what was queued before)."""


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


class ZkSessions:
    """The broker sessions one handle holds. ``hosts`` is the ensemble each session's client
    connects to; ``io`` and the handle's ``main`` client read and write the store; ``schedule``
    runs listener callbacks and expiry records on the handle's worker thread. Callers pass
    deadlines (monotonic seconds) and check that the handle is open."""

    def __init__(
        self, hosts: str, io: ZkIo, main: Any, schedule: Schedule, default_timeout_ms: int
    ) -> None:
        self._hosts = hosts
        self._io = io
        self._main = main
        self._schedule = schedule
        self._default_timeout_ms = default_timeout_ms
        self._lock = threading.Lock()
        self._closed = False
        self._sessions: dict[int, ZkSession] = {}
        self._listeners = SessionListeners()
        self._reap_pending = False

    # ---- session states ----

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
                    self._schedule(functools.partial(self._session_lost, session))
                    return
                if state == KazooState.SUSPENDED and session.expiring:
                    return
                session.kazoo_suspended = state == KazooState.SUSPENDED
                now = session.state
            self._schedule(functools.partial(self._emit, session, now))

        return listener

    def _session_lost(self, session: ZkSession) -> None:
        """The session expired (worker thread): record it in the feed, then report LOST."""
        if session.ended:
            return
        deadline = monotonic_s() + self._default_timeout_ms / 1000
        try:
            with kazoo_errors():
                record_gone(
                    self._io, self._main, session.broker_id, session.incarnation_epoch, deadline
                )
        except Exception:
            _log.exception("could not record the expiry of broker %d", session.broker_id)
        self._end(session)
        stop_client(session.client)

    def _end(self, session: ZkSession) -> None:
        with self._lock:
            session.ended = True
            if self._sessions.get(session.broker_id) is session:
                del self._sessions[session.broker_id]
        self._schedule(functools.partial(self._emit, session, SessionState.LOST))

    def held(self, broker_id: int) -> ZkSession | None:
        """The broker's session if this handle holds it and it has not ended."""
        with self._lock:
            session = self._sessions.get(broker_id)
        return None if session is None or session.ended else session

    def _store_incarnation(self, broker_id: int, deadline: float) -> int | None:
        got = self._io.get(self._main, f"{IDS}/{broker_id}", deadline)
        return None if got is None else decode_broker(broker_id, got[0]).incarnation_epoch

    def session_for(self, broker_id: int, inc: int, deadline: float) -> ZkSession:
        """The held session of incarnation ``inc``, if it may act: else
        ``SessionExpiredError`` (not held, or another incarnation) or
        ``CoordinatorUnavailableError`` (SUSPENDED). Runs inside the caller's ``kazoo_errors``."""
        session = self.held(broker_id)
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

    def state(self, broker_id: int) -> SessionState:
        """``session_state``: this handle's view of the broker's session."""
        session = self.held(broker_id)
        return SessionState.LOST if session is None else session.state

    def add_listener(
        self, broker_id: int, callback: Callable[[SessionEvent], None]
    ) -> Subscription:
        """``add_session_listener`` (callbacks run on the worker thread)."""
        return self._listeners.add(broker_id, callback)

    # ---- expiries noticed by any handle ----

    def reap(self, deadline: float) -> list[int]:
        """Record the expiry of every broker whose ``seen`` node outlived its registration (its
        process died with its session, so its own handle never wrote the record), and end
        this handle's sessions of those incarnations now (kazoo's LOST may come later); return
        their ids. Runs inside the caller's ``kazoo_errors``."""
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
            if not record_gone(io, c, broker_id, inc, deadline):
                continue
            reaped.append(broker_id)
            session = self.held(broker_id)
            if session is not None and session.incarnation_epoch == inc:
                self._end(session)
                stop_client(session.client)
        return reaped

    def start_reaper(self) -> None:
        """Watch ``/brokers/ids`` children and ``/controller`` on the main client: every change
        (and every reconnect, see ``schedule_reap``) runs ``reap`` on the worker thread."""
        self._main.ChildrenWatch(self._io.p(IDS), self._vacancy_hint)
        self._main.DataWatch(self._io.p(CONTROLLER), self._vacancy_hint)

    def _vacancy_hint(self, *_: Any) -> bool:
        if self._closed:
            return False  # stops the kazoo watch
        self.schedule_reap()
        return True

    def schedule_reap(self) -> None:
        """Queue one ``reap`` on the worker thread (coalesced)."""
        with self._lock:
            if self._closed or self._reap_pending:
                return
            self._reap_pending = True
        self._schedule(self._reap_now)

    def _reap_now(self) -> None:
        with self._lock:
            self._reap_pending = False
        if self._closed:
            return
        try:
            with kazoo_errors():
                self.reap(monotonic_s() + self._default_timeout_ms / 1000)
        except Exception:
            if self._closed:
                return
            _log.debug("recording expiries failed; retrying", exc_info=True)
            retry = threading.Timer(0.5, self.schedule_reap)
            retry.daemon = True
            retry.start()

    # ---- registration ----

    def register(
        self,
        broker_id: int,
        host: str,
        port: int,
        rack: str | None,
        session_timeout_ms: int,
        deadline: float,
        *,
        clean_shutdown: bool,
        fenced: bool,
    ) -> BrokerInfo:
        """``register_broker`` (arguments checked by the caller): opens a kazoo client whose
        session is the broker's, with ``session_timeout_ms`` (the server clamps it)."""
        held = self.held(broker_id)
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
            if io.get(client, gone_marker(broker_id, old), deadline) is None:
                gone_ops, gone = expiry_parts(io, client, broker_id, old, seq, deadline)
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
        self._schedule(functools.partial(self._emit, session, SessionState.CONNECTED))
        return broker

    def heartbeat(self, broker_id: int, incarnation_epoch: int, deadline: float) -> SessionState:
        """``heartbeat``: kazoo pings by itself, so this only checks."""
        with kazoo_errors():
            return self.session_for(broker_id, incarnation_epoch, deadline).state

    def update(
        self,
        broker_id: int,
        incarnation_epoch: int,
        fenced: bool | None,
        in_controlled_shutdown: bool | None,
        deadline: float,
    ) -> BrokerInfo:
        """``update_broker``, written through the broker's own session."""
        io, path = self._io, f"{IDS}/{broker_id}"
        with kazoo_errors():
            client = self.session_for(broker_id, incarnation_epoch, deadline).client

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
            vacate = vacate_if_holder(io, client, broker_id, inc, deadline)
            ops: list[Op] = [
                ("delete", path, got[1].version),
                ("create", gone_marker(broker_id, inc), b"", False),
                *vacate,
                *unsee_ops(io, client, broker_id, inc, deadline),
            ]
            gone = records.broker_gone(
                seq, BrokerChangeReason.UNREGISTERED, broker_id, inc, was_controller=bool(vacate)
            )
            return Plan(True, ops, gone)

        return io.transact(client, prepare, deadline)

    def unregister(self, broker_id: int, incarnation_epoch: int, deadline: float) -> bool:
        """``unregister_broker`` (also works for a session another handle holds: the
        ephemeral is deleted and that session later sees nothing but a gap)."""
        session = self.held(broker_id)
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

    def close(self) -> None:
        """End every session this handle holds: unregister it (best effort, within 2 s), report
        LOST and stop its client. The reaper stops too."""
        with self._lock:
            self._closed = True
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

    def drop_listeners(self) -> None:
        """Forget every session listener (after the worker delivered the last events)."""
        self._listeners.clear()

    # ---- SessionFaults (tests) ----

    def expire(self, broker_id: int) -> None:
        """Expire the broker's session now: a twin client on the same session id and password
        connects and closes it (the server deletes its ephemerals); LOST follows."""
        session = self.held(broker_id)
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

    def suspend(self, broker_id: int) -> None:
        """Simulated SUSPENDED (calls as this broker raise ``CoordinatorUnavailableError``);
        the real session stays alive."""
        session = self.held(broker_id)
        if session is None:
            return
        with self._lock:
            if session.state is not SessionState.CONNECTED:
                return
            session.fault_suspended = True
        self._schedule(functools.partial(self._emit, session, SessionState.SUSPENDED))

    def resume(self, broker_id: int) -> None:
        """End a simulated SUSPENDED (CONNECTED again unless the session was lost)."""
        session = self.held(broker_id)
        if session is None:
            return
        with self._lock:
            if not session.fault_suspended:
                return
            session.fault_suspended = False
            now = session.state
        if now is SessionState.CONNECTED:
            self._schedule(functools.partial(self._emit, session, now))

    def client_id(self, broker_id: int) -> tuple[int, bytes] | None:
        """The (session id, password) of the broker's session held here (fault tests)."""
        session = self.held(broker_id)
        if session is None:
            return None
        client_id: tuple[int, bytes] | None = session.client.client_id
        return client_id
