"""`SessionKeeper`: the sessions one `RaftCoordinator` handle registered, the keep-alive thread
that heartbeats them, their state changes pushed to session listeners, and what the
``SessionFaults`` hooks of the contract suite do to them.

A session lives while its handle does: the keep-alive thread heartbeats each one every third of
its session timeout (capped at 2 s, as KRaft brokers heartbeat their controller). A heartbeat
(a BrokerHeartbeat to the active controller) that cannot reach it makes the session SUSPENDED,
the next that does CONNECTED again; one answered ``SessionExpiredError`` (the leader's clock
passed the deadline and the expiry committed) makes it LOST.

The keeper reaches the quorum through two ports the handle gives it, ``send_heartbeat`` (one
BrokerHeartbeat) and ``get_broker`` (a read of a registration); it keeps its own lock, taken
for its sessions only and never while a port is called.
"""

from __future__ import annotations

import contextlib
import functools
import threading
from collections.abc import Callable
from typing import Protocol

import attrs

from replog.clock import Clock
from replog.coord.dispatch import Dispatcher
from replog.coord.errors import (
    CoordinatorClosedError,
    CoordinatorUnavailableError,
    SessionExpiredError,
)
from replog.coord.sessions import SessionListeners, session_event
from replog.metadata.types import BrokerInfo, SessionEvent, SessionState, Subscription

__all__ = ["HEARTBEAT_INTERVAL_MS_MAX", "HeldSession", "SessionKeeper"]

HEARTBEAT_INTERVAL_MS_MAX = 2_000
#: the pause between the heartbeats that ask for a controlled shutdown until it is recorded
SHUTDOWN_RETRY_MS = 50


@attrs.define
class HeldSession:
    """A session this handle registered, and when its next heartbeat is due."""

    broker: BrokerInfo
    session_timeout_ms: int
    state: SessionState = SessionState.CONNECTED
    hook_suspended: bool = False
    next_heartbeat_ms: int = 0

    @property
    def interval_ms(self) -> int:
        """Heartbeat every third of the session timeout, capped (at least every 50 ms)."""
        return max(50, min(self.session_timeout_ms // 3, HEARTBEAT_INTERVAL_MS_MAX))


class SendHeartbeat(Protocol):
    """One BrokerHeartbeat to the active controller: CONNECTED, or `SessionExpiredError`
    (`CoordinatorUnavailableError` when it cannot reach one in ``timeout_ms``)."""

    def __call__(
        self,
        broker_id: int,
        incarnation_epoch: int,
        timeout_ms: int | None,
        *,
        want_shut_down: bool = False,
    ) -> SessionState: ...


#: (broker id, timeout_ms) -> the broker's registration, None if it has none
GetBroker = Callable[[int, int], BrokerInfo | None]


class SessionKeeper:
    """The sessions one handle holds (see the module docstring)."""

    def __init__(self, clock: Clock, send_heartbeat: SendHeartbeat, get_broker: GetBroker) -> None:
        self._clock = clock
        self._send_heartbeat = send_heartbeat
        self._get_broker = get_broker
        self._lock = threading.Lock()
        self._sessions: dict[int, HeldSession] = {}
        self._listeners = SessionListeners()
        self._dispatcher = Dispatcher()
        self._stop = threading.Event()
        self._keeper: threading.Thread | None = None

    # ------------------------------------------------------------------ the handle's calls

    def hold(self, broker: BrokerInfo, session_timeout_ms: int) -> None:
        """Keep the session of ``broker``, just registered (its listeners hear CONNECTED);
        the keep-alive thread starts with the first one."""
        with self._lock:
            session = HeldSession(broker, session_timeout_ms)
            session.next_heartbeat_ms = self._clock.monotonic_ms() + session.interval_ms
            self._sessions[broker.broker_id] = session
            self._notify(session)
            self._start_keeper()
        self._dispatcher.run()

    def heartbeat(
        self, broker_id: int, incarnation_epoch: int, timeout_ms: int | None
    ) -> SessionState:
        """One heartbeat now (``Coordinator.heartbeat``): an expired session is lost."""
        self.check_acting(broker_id)
        try:
            state = self._send_heartbeat(broker_id, incarnation_epoch, timeout_ms)
        except SessionExpiredError:
            self.lose(broker_id, incarnation_epoch)
            raise
        self._on_heartbeat_ok(broker_id, incarnation_epoch)
        return state

    def check_acting(self, broker_id: int) -> None:
        """A broker this handle cut off (``suspend``) cannot act."""
        with self._lock:
            session = self._sessions.get(broker_id)
            if session is not None and session.hook_suspended:
                raise CoordinatorUnavailableError(f"broker {broker_id}'s session is suspended")

    def lose(self, broker_id: int, incarnation_epoch: int) -> None:
        """The incarnation's session is over (expired or unregistered): LOST, and forgotten."""
        with self._lock:
            session = self._sessions.get(broker_id)
            if session is not None and session.broker.incarnation_epoch == incarnation_epoch:
                self._emit(session, SessionState.LOST)
                del self._sessions[broker_id]
        self._dispatcher.run()

    def update_broker(self, incarnation_epoch: int, broker: BrokerInfo) -> None:
        """The registration of a broker changed (fenced, controlled shutdown): keep it if
        ``incarnation_epoch`` is the incarnation held."""
        with self._lock:
            session = self._sessions.get(broker.broker_id)
            if session is not None and session.broker.incarnation_epoch == incarnation_epoch:
                session.broker = broker

    def state(self, broker_id: int) -> SessionState:
        """This handle's view of the broker's session (LOST if it holds none)."""
        with self._lock:
            session = self._sessions.get(broker_id)
            return SessionState.LOST if session is None else session.state

    def add_listener(
        self, broker_id: int, callback: Callable[[SessionEvent], None]
    ) -> Subscription:
        """Push the state changes of the broker's session to ``callback``."""
        return self._listeners.add(broker_id, callback)

    def stop(self) -> list[BrokerInfo]:
        """Stop keeping sessions: the keep-alive thread ends, listeners are dropped. Returns
        the brokers whose sessions were held (for the handle to unregister)."""
        with self._lock:
            brokers = [s.broker for s in self._sessions.values()]
            self._sessions.clear()
        self._stop.set()
        self._listeners.clear()
        return brokers

    def join(self) -> None:
        """Wait for the keep-alive thread to end (after `stop`; not from that thread)."""
        if self._keeper is not None and self._keeper is not threading.current_thread():
            self._keeper.join(5)

    # ------------------------------------------------------------------ SessionFaults

    def suspend(self, broker_id: int) -> None:
        """Cut the broker off in this handle (SUSPENDED); the leader's deadline runs on."""
        with self._lock:
            session = self._sessions.get(broker_id)
            if session is not None and session.state is SessionState.CONNECTED:
                session.hook_suspended = True
                self._emit(session, SessionState.SUSPENDED)
        self._dispatcher.run()

    def resume(self, broker_id: int) -> None:
        """Reconnect: one heartbeat says CONNECTED (in time) or LOST (expired meanwhile)."""
        with self._lock:
            session = self._sessions.get(broker_id)
            if session is None or not session.hook_suspended:
                return
            session.hook_suspended = False
            incarnation = session.broker.incarnation_epoch
        with contextlib.suppress(SessionExpiredError, CoordinatorUnavailableError):
            self.heartbeat(broker_id, incarnation, None)

    # ------------------------------------------------------------------ controlled shutdown

    def negotiate_shutdown(
        self, broker_id: int, incarnation_epoch: int, timeout_ms: int
    ) -> BrokerInfo:
        """``update_broker(in_controlled_shutdown=True)`` as Kafka's broker asks for it: a
        BrokerHeartbeat with ``want_shut_down`` (the active controller follows it with the
        registration's UpdateBroker), repeated until a read shows the registration in
        controlled shutdown; the keep-alive heartbeats go on wanting it. ``SessionExpiredError``
        when the incarnation is gone, ``CoordinatorUnavailableError`` past ``timeout_ms``."""
        self.check_acting(broker_id)
        deadline_ms = self._clock.monotonic_ms() + timeout_ms
        while True:
            remaining_ms = max(1, deadline_ms - self._clock.monotonic_ms())
            try:
                self._send_heartbeat(
                    broker_id, incarnation_epoch, remaining_ms, want_shut_down=True
                )
            except SessionExpiredError:
                self.lose(broker_id, incarnation_epoch)
                raise
            broker = self._get_broker(broker_id, remaining_ms)
            if broker is None or broker.incarnation_epoch != incarnation_epoch:
                self.lose(broker_id, incarnation_epoch)
                current = None if broker is None else broker.incarnation_epoch
                raise SessionExpiredError(broker_id, incarnation_epoch, current)
            if broker.in_controlled_shutdown:
                self.update_broker(incarnation_epoch, broker)
                return broker
            if self._clock.monotonic_ms() >= deadline_ms:
                raise CoordinatorUnavailableError(
                    f"broker {broker_id}'s controlled shutdown not recorded within {timeout_ms} ms"
                )
            self._stop.wait(SHUTDOWN_RETRY_MS / 1000)

    # ------------------------------------------------------------------ state changes

    def _emit(self, session: HeldSession, state: SessionState) -> None:
        """Move a held session to ``state`` and queue the event (caller holds the lock)."""
        if session.state is state or session.state is SessionState.LOST:
            return
        session.state = state
        self._notify(session)

    def _notify(self, session: HeldSession) -> None:
        """Queue the session's current state to its listeners (caller holds the lock)."""
        state = session.state
        broker = session.broker
        event = session_event(broker.broker_id, broker.incarnation_epoch, state)
        for callback in self._listeners.callbacks(broker.broker_id):
            self._dispatcher.enqueue(functools.partial(callback, event))

    # ------------------------------------------------------------------ keep-alive

    def _on_heartbeat_ok(self, broker_id: int, incarnation_epoch: int) -> None:
        with self._lock:
            session = self._sessions.get(broker_id)
            if session is None or session.broker.incarnation_epoch != incarnation_epoch:
                return
            session.next_heartbeat_ms = self._clock.monotonic_ms() + session.interval_ms
            if not session.hook_suspended:
                self._emit(session, SessionState.CONNECTED)
        self._dispatcher.run()

    def _start_keeper(self) -> None:
        """Start the keep-alive thread on first registration (caller holds the lock)."""
        if self._keeper is None:
            self._keeper = threading.Thread(
                target=self._keep_alive, name="replog-quorum-keepalive", daemon=True
            )
            self._keeper.start()

    def _keep_alive(self) -> None:
        while not self._stop.is_set():
            now_ms = self._clock.monotonic_ms()
            with self._lock:
                due = [
                    (
                        s.broker.broker_id,
                        s.broker.incarnation_epoch,
                        s.interval_ms,
                        s.broker.in_controlled_shutdown,
                    )
                    for s in self._sessions.values()
                    if not s.hook_suspended and s.next_heartbeat_ms <= now_ms
                ]
                waits = [s.next_heartbeat_ms - now_ms for s in self._sessions.values()]
            for broker_id, incarnation, interval_ms, shutting_down in due:
                self._keep_one(broker_id, incarnation, interval_ms, shutting_down)
            self._stop.wait(max(10, min([*waits, 200])) / 1000)

    def _keep_one(
        self, broker_id: int, incarnation: int, interval_ms: int, shutting_down: bool
    ) -> None:
        try:
            self._send_heartbeat(
                broker_id, incarnation, max(interval_ms, 200), want_shut_down=shutting_down
            )
        except SessionExpiredError:
            self.lose(broker_id, incarnation)
            return
        except (CoordinatorUnavailableError, CoordinatorClosedError):
            with self._lock:
                session = self._sessions.get(broker_id)
                if session is not None and session.broker.incarnation_epoch == incarnation:
                    session.next_heartbeat_ms = self._clock.monotonic_ms() + interval_ms // 4
                    if not session.hook_suspended:
                        self._emit(session, SessionState.SUSPENDED)
            self._dispatcher.run()
            return
        self._on_heartbeat_ok(broker_id, incarnation)
