"""Broker sessions of the etcd backend: a lease per registered broker (its registration key
``brokers/ids/<id>`` carries it), renewed by the handle's background thread; registration, flag
updates, unregistration; the feed record of an expiry (any handle that notices a lease gone
writes it, once); and the ``SessionFaults`` test hooks. See ``replog.coord.etcd.coordinator``."""

from __future__ import annotations

import contextlib
import functools
import math
import threading
from collections.abc import Callable

import attrs

from replog.clock import monotonic_s
from replog.coord import codec, rules
from replog.coord.dispatch import Dispatcher
from replog.coord.errors import (
    BrokerIdInUseError,
    CoordinatorUnavailableError,
    SessionExpiredError,
)
from replog.coord.etcd.client import KeyValue, cmp_create, cmp_mod, op_delete, op_put, op_range
from replog.coord.etcd.store import (
    RETRY,
    Done,
    EtcdStore,
    Records,
    Retry,
    TxnPlan,
    mod_rev,
    plan,
)
from replog.coord.sessions import SessionListeners, session_event
from replog.metadata import records
from replog.metadata.types import (
    BrokerChangeReason,
    BrokerInfo,
    ControllerInfo,
    MetadataChange,
    SessionEvent,
    SessionState,
    Subscription,
)

__all__ = ["EtcdSession", "EtcdSessions", "decode_broker", "decode_brokers"]


@attrs.define
class EtcdSession:
    """One broker session held by this handle: its registration and lease."""

    broker: BrokerInfo
    lease_id: int
    ttl_s: int
    state: SessionState = SessionState.CONNECTED
    hook_suspended: bool = False
    next_renewal_s: float = 0.0


def decode_broker(kvs: list[KeyValue]) -> BrokerInfo | None:
    """The registration a read of one ``brokers/ids/<id>`` key found (None: absent)."""
    if not kvs:
        return None
    broker: BrokerInfo = codec.loads(kvs[0].value)
    return broker


def decode_brokers(kvs: list[KeyValue]) -> dict[int, BrokerInfo]:
    """The registrations a read of ``brokers/ids/`` found, by broker id."""
    brokers = [b for b in (decode_broker([kv]) for kv in kvs) if b is not None]
    return {b.broker_id: b for b in sorted(brokers, key=lambda b: b.broker_id)}


class EtcdSessions:
    """The broker sessions one handle holds, in ``store``. Lease calls the handle makes in the
    background (renewals, revocations after a failure) take ``bg_timeout_ms``;
    ``ensure_thread`` starts the handle's background thread (renewals, expiry records) once a
    session needs it."""

    def __init__(
        self, store: EtcdStore, bg_timeout_ms: int, ensure_thread: Callable[[], None]
    ) -> None:
        self._store = store
        self._bg_timeout_ms = bg_timeout_ms
        self._ensure_thread = ensure_thread
        self._lock = threading.RLock()
        self._dispatcher = Dispatcher()
        self._sessions: dict[int, EtcdSession] = {}
        self._listeners = SessionListeners()

    def _emit(self, session: EtcdSession, state: SessionState) -> None:
        """Move a local session to ``state`` and queue its listeners (caller holds the lock)."""
        if session.state is state or session.state is SessionState.LOST:
            return
        session.state = state
        self._notify(session)

    def _notify(self, session: EtcdSession) -> None:
        """Queue the session's current state to its listeners (caller holds the lock)."""
        broker = session.broker
        event = session_event(broker.broker_id, broker.incarnation_epoch, session.state)
        for callback in self._listeners.callbacks(event.broker_id):
            self._dispatcher.enqueue(functools.partial(callback, event))

    def lose(self, broker_id: int, incarnation_epoch: int) -> None:
        """Mark the local session of that incarnation LOST and deliver the event."""
        with self._lock:
            session = self._sessions.get(broker_id)
            if session is not None and session.broker.incarnation_epoch == incarnation_epoch:
                self._emit(session, SessionState.LOST)
                del self._sessions[broker_id]
        self._dispatcher.run()

    def acting(self, broker_id: int, incarnation_epoch: int, kvs: list[KeyValue]) -> BrokerInfo:
        """The incarnation's registration, if it may act: else ``SessionExpiredError`` (not
        current) or ``CoordinatorUnavailableError`` (this handle's session is SUSPENDED)."""
        try:
            current = rules.check_incarnation(broker_id, incarnation_epoch, decode_broker(kvs))
        except SessionExpiredError:
            self.lose(broker_id, incarnation_epoch)
            raise
        with self._lock:
            session = self._sessions.get(broker_id)
            if session is not None and session.state is SessionState.SUSPENDED:
                raise CoordinatorUnavailableError(f"broker {broker_id}'s session is suspended")
        return current

    def ids_key(self, broker_id: int) -> str:
        """The registration key of ``broker_id`` (it carries the session's lease)."""
        return self._store.k(f"brokers/ids/{broker_id}")

    def register(
        self,
        broker_id: int,
        host: str,
        port: int,
        rack: str | None,
        session_timeout_ms: int,
        timeout_ms: int | None,
        *,
        clean_shutdown: bool,
        fenced: bool,
    ) -> BrokerInfo:
        """``register_broker`` (arguments checked by the caller): records the expiries it finds
        first, then a lease with TTL = ceil(session timeout) carries the registration key."""
        self._store.check_open()
        self.reap(timeout_ms)
        lease_id, ttl_s = self._store.client.lease_grant(
            max(1, math.ceil(session_timeout_ms / 1000)), timeout_ms=timeout_ms
        )
        ids, seen = self.ids_key(broker_id), self._store.k(f"brokers/seen/{broker_id}")

        def attempt() -> TxnPlan[BrokerInfo] | Retry:
            last, seq_mod, (held, was) = self._store.seq_read(
                [op_range(ids), op_range(seen)], timeout_ms
            )
            if held:
                current = decode_broker(held)
                raise BrokerIdInUseError(broker_id, current.incarnation_epoch if current else 0)
            if was:
                self.reap(timeout_ms)
                return RETRY
            broker = rules.registration(
                broker_id,
                last + 1,
                host,
                port,
                rack,
                clean_shutdown=clean_shutdown,
                fenced=fenced,
            )
            ops = [op_put(ids, codec.dumps(broker), lease_id), op_put(seen, str(last + 1))]
            compares = [cmp_create(ids, 0), cmp_mod(seen, 0)]
            build: Records = functools.partial(records.broker_registered, broker=broker)
            return plan(last, seq_mod, compares, ops, build, lambda _: broker)

        try:
            broker = self._store.run(timeout_ms, attempt)
        except BaseException:
            with contextlib.suppress(Exception):
                self._store.client.lease_revoke(lease_id, timeout_ms=self._bg_timeout_ms)
            raise
        with self._lock:
            session = EtcdSession(broker, lease_id, ttl_s, next_renewal_s=monotonic_s() + ttl_s / 3)
            self._sessions[broker_id] = session
            self._notify(session)
        self._dispatcher.run()
        self._ensure_thread()
        return broker

    def heartbeat(
        self, broker_id: int, incarnation_epoch: int, timeout_ms: int | None
    ) -> SessionState:
        """``heartbeat``: renews the lease now."""
        (kvs,) = self._store.read([op_range(self.ids_key(broker_id))], timeout_ms)
        self.acting(broker_id, incarnation_epoch, kvs)
        if self._store.client.lease_keepalive(kvs[0].lease, timeout_ms=timeout_ms) is None:
            self.lose(broker_id, incarnation_epoch)
            raise SessionExpiredError(broker_id, incarnation_epoch, None)
        return SessionState.CONNECTED

    def update(
        self,
        broker_id: int,
        incarnation_epoch: int,
        fenced: bool | None,
        in_controlled_shutdown: bool | None,
        timeout_ms: int | None,
    ) -> BrokerInfo:
        """``update_broker``: the registration key rewritten under the same lease."""
        ids = self.ids_key(broker_id)

        def attempt() -> TxnPlan[BrokerInfo] | Done[BrokerInfo]:
            last, seq_mod, (kvs,) = self._store.seq_read([op_range(ids)], timeout_ms)
            old = self.acting(broker_id, incarnation_epoch, kvs)
            new = rules.updated_broker(old, fenced, in_controlled_shutdown)
            if new == old:
                return Done(new)
            ops = [op_put(ids, codec.dumps(new), kvs[0].lease)]
            compares = [cmp_mod(ids, kvs[0].mod_revision)]
            build: Records = functools.partial(records.broker_updated, broker=new)
            return plan(last, seq_mod, compares, ops, build, lambda _: new)

        return self._store.run(timeout_ms, attempt)

    def unregister(self, broker_id: int, incarnation_epoch: int, timeout_ms: int | None) -> bool:
        """``unregister_broker``: the registration, its ``seen`` key and (if it held the role)
        ``controller`` deleted in one txn, then the lease revoked."""
        ids, ctl = self.ids_key(broker_id), self._store.k("controller")
        lease: list[int] = []

        def attempt() -> TxnPlan[bool] | Done[bool]:
            last, seq_mod, (kvs, ctl_kvs) = self._store.seq_read(
                [op_range(ids), op_range(ctl)], timeout_ms
            )
            try:
                self.acting(broker_id, incarnation_epoch, kvs)
            except SessionExpiredError:
                return Done(False)
            lease[:] = [kvs[0].lease]
            controller: ControllerInfo | None = codec.loads(ctl_kvs[0].value) if ctl_kvs else None
            was_controller = controller is not None and controller.controller_id == broker_id
            ops = [op_delete(ids), op_delete(self._store.k(f"brokers/seen/{broker_id}"))]
            if was_controller:
                ops.append(op_delete(ctl))

            def build(seq: int) -> list[MetadataChange]:
                return records.broker_gone(
                    seq,
                    BrokerChangeReason.UNREGISTERED,
                    broker_id,
                    incarnation_epoch,
                    was_controller=was_controller,
                )

            compares = [cmp_mod(ids, kvs[0].mod_revision), cmp_mod(ctl, mod_rev(ctl_kvs))]
            return plan(last, seq_mod, compares, ops, build, lambda _: True)

        done = self._store.run(timeout_ms, attempt)
        if done:
            with contextlib.suppress(Exception):
                self._store.client.lease_revoke(lease[0], timeout_ms=self._bg_timeout_ms)
            self.lose(broker_id, incarnation_epoch)
        return done

    def get(self, broker_id: int, timeout_ms: int | None) -> BrokerInfo | None:
        """``get_broker``."""
        (kvs,) = self._store.read([op_range(self.ids_key(broker_id))], timeout_ms)
        return decode_broker(kvs)

    def live(self, timeout_ms: int | None) -> dict[int, BrokerInfo]:
        """``live_brokers``."""
        (kvs,) = self._store.read(
            [op_range(self._store.k("brokers/ids/"), prefix=True)], timeout_ms
        )
        return decode_brokers(kvs)

    def state(self, broker_id: int) -> SessionState:
        """``session_state``: this handle's view, no store access."""
        with self._lock:
            session = self._sessions.get(broker_id)
            return SessionState.LOST if session is None else session.state

    def add_listener(
        self, broker_id: int, callback: Callable[[SessionEvent], None]
    ) -> Subscription:
        """``add_session_listener``."""
        self._store.check_open()
        return self._listeners.add(broker_id, callback)

    def end_all(self) -> None:
        """Unregister every session this handle holds (best effort, within ``bg_timeout_ms``; a
        SUSPENDED one is left to expire) and report each LOST."""
        with self._lock:
            sessions = list(self._sessions.values())
        for session in sessions:
            broker = session.broker
            with contextlib.suppress(Exception):
                if session.state is SessionState.SUSPENDED:
                    raise CoordinatorUnavailableError("suspended")
                self.unregister(broker.broker_id, broker.incarnation_epoch, self._bg_timeout_ms)
            self.lose(broker.broker_id, broker.incarnation_epoch)

    def drop_listeners(self) -> None:
        """Forget every session listener (the handle is closed)."""
        self._listeners.clear()

    # ---- expiry bookkeeping ----

    def reap(self, timeout_ms: int | None) -> list[int]:
        """Record the expiry of every broker whose lease is gone; return their ids."""
        seen_p, ids_p, ctl = (
            self._store.k("brokers/seen/"),
            self._store.k("brokers/ids/"),
            self._store.k("controller"),
        )
        reaped: list[int] = []

        def attempt() -> TxnPlan[int] | Done[int]:
            last, seq_mod, (seen, ids, ctl_kvs) = self._store.seq_read(
                [op_range(seen_p, prefix=True), op_range(ids_p, prefix=True, keys_only=True),
                 op_range(ctl)],
                timeout_ms,
            )  # fmt: skip
            alive = {kv.key[len(ids_p) :] for kv in ids}
            dead = [kv for kv in seen if kv.key[len(seen_p) :] not in alive]
            if not dead:
                return Done(-1)
            kv = dead[0]
            broker_id, incarnation = int(kv.key[len(seen_p) :]), int(kv.value)
            controller: ControllerInfo | None = codec.loads(ctl_kvs[0].value) if ctl_kvs else None
            was_controller = controller is not None and controller.controller_id == broker_id
            ops = [op_delete(kv.key)] + ([op_delete(ctl)] if was_controller else [])

            def build(seq: int) -> list[MetadataChange]:
                return records.broker_gone(
                    seq,
                    BrokerChangeReason.EXPIRED,
                    broker_id,
                    incarnation,
                    was_controller=was_controller,
                )

            compares = [
                cmp_mod(kv.key, kv.mod_revision),
                cmp_create(self.ids_key(broker_id), 0),
                cmp_mod(ctl, mod_rev(ctl_kvs)),
            ]
            return plan(last, seq_mod, compares, ops, build, lambda _: broker_id)

        while (broker_id := self._store.run(timeout_ms, attempt)) >= 0:
            reaped.append(broker_id)
            with self._lock:
                session = self._sessions.get(broker_id)
                incarnation = None if session is None else session.broker.incarnation_epoch
            if incarnation is not None:
                self.lose(broker_id, incarnation)
        return reaped

    def renew_due(self) -> None:
        """Renew the leases due (background thread): SUSPENDED while a renewal cannot reach
        etcd (retried 0.1 s later), CONNECTED when one succeeds, LOST when the lease is gone."""
        now = monotonic_s()
        with self._lock:
            due = [
                s
                for s in self._sessions.values()
                if not s.hook_suspended and s.next_renewal_s <= now
            ]
        for session in due:
            try:
                ttl = self._store.client.lease_keepalive(
                    session.lease_id, timeout_ms=self._bg_timeout_ms
                )
            except CoordinatorUnavailableError:
                with self._lock:
                    if not session.hook_suspended:
                        self._emit(session, SessionState.SUSPENDED)
                    session.next_renewal_s = monotonic_s() + 0.1
                self._dispatcher.run()
                continue
            if ttl is None:
                self.lose(session.broker.broker_id, session.broker.incarnation_epoch)
                continue
            with self._lock:
                session.next_renewal_s = monotonic_s() + session.ttl_s / 3
                if not session.hook_suspended:
                    self._emit(session, SessionState.CONNECTED)
            self._dispatcher.run()

    # ---- test hooks (SessionFaults) ----

    def expire(self, broker_id: int) -> None:
        """Test hook: revoke the broker's lease now and record the expiry."""
        (kvs,) = self._store.read([op_range(self.ids_key(broker_id))], None)
        if kvs:
            self._store.client.lease_revoke(kvs[0].lease)
            broker = decode_broker(kvs)
            if broker is not None:
                self.lose(broker_id, broker.incarnation_epoch)
        self.reap(None)

    def suspend(self, broker_id: int) -> None:
        """Test hook: stop renewing the broker's lease and refuse its calls (SUSPENDED); the
        lease's TTL keeps running."""
        with self._lock:
            session = self._sessions.get(broker_id)
            if session is not None and session.state is SessionState.CONNECTED:
                session.hook_suspended = True
                self._emit(session, SessionState.SUSPENDED)
        self._dispatcher.run()

    def resume(self, broker_id: int) -> None:
        """Test hook: renew once: CONNECTED if the lease is still alive, else LOST."""
        with self._lock:
            session = self._sessions.get(broker_id)
        if session is None or not session.hook_suspended:
            return
        ttl = self._store.client.lease_keepalive(session.lease_id)
        with self._lock:
            session.hook_suspended = False
            if ttl is not None:
                self._emit(session, SessionState.CONNECTED)
        if ttl is None:
            self.lose(broker_id, session.broker.incarnation_epoch)
            self.reap(None)
        self._dispatcher.run()
