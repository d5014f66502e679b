"""Broker sessions of the etcd backend: a lease per registered broker (its registration key
``brokers/ids/<id>`` carries it), renewed by the handle's background thread; registration, flag
updates, unregistration; the feed record of an expiry (any handle that notices a lease gone
writes it, once); and the ``SessionFaults`` test hooks. See ``replog.coord.etcd``.

``EtcdSessionsMixin`` is a part of ``EtcdCoordinator``, not used on its own."""

from __future__ import annotations

import contextlib
import functools
import math
from collections.abc import Callable

import attrs

from replog.clock import monotonic_s
from replog.coord import codec, rules
from replog.coord.errors import (
    BrokerIdInUseError,
    CoordinatorUnavailableError,
    SessionExpiredError,
)
from replog.coord.etcd_client import KeyValue, cmp_create, cmp_mod, op_delete, op_put, op_range
from replog.coord.etcd_txn import (
    RETRY,
    Done,
    EtcdTxnBase,
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

__all__ = ["EtcdSession", "EtcdSessionsMixin"]


@attrs.define
class EtcdSession:
    """One broker session held by this handle: its registration and lease."""

    broker: BrokerInfo
    lease_id: int
    ttl_s: int
    state: SessionState = SessionState.CONNECTED
    hook_suspended: bool = False
    next_renewal_s: float = 0.0


class EtcdSessionsMixin(EtcdTxnBase):
    """The broker-session part of ``EtcdCoordinator``."""

    _sessions: dict[int, EtcdSession]
    _listeners: SessionListeners

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

    def _lose(self, broker_id: int, incarnation_epoch: int) -> None:
        """Mark the local session of that incarnation LOST and deliver the event."""
        with self._lock:
            session = self._sessions.get(broker_id)
            if session is not None and session.broker.incarnation_epoch == incarnation_epoch:
                self._emit(session, SessionState.LOST)
                del self._sessions[broker_id]
        self._dispatcher.run()

    def _broker(self, kvs: list[KeyValue]) -> BrokerInfo | None:
        if not kvs:
            return None
        broker: BrokerInfo = codec.loads(kvs[0].value)
        return broker

    def _acting(self, broker_id: int, incarnation_epoch: int, kvs: list[KeyValue]) -> BrokerInfo:
        """The incarnation's registration, if it may act: else ``SessionExpiredError`` (not
        current) or ``CoordinatorUnavailableError`` (this handle's session is SUSPENDED)."""
        try:
            current = rules.check_incarnation(broker_id, incarnation_epoch, self._broker(kvs))
        except SessionExpiredError:
            self._lose(broker_id, incarnation_epoch)
            raise
        with self._lock:
            session = self._sessions.get(broker_id)
            if session is not None and session.state is SessionState.SUSPENDED:
                raise CoordinatorUnavailableError(f"broker {broker_id}'s session is suspended")
        return current

    def _ids_key(self, broker_id: int) -> str:
        return self._k(f"brokers/ids/{broker_id}")

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
        self._check_open()
        self._reap(timeout_ms)
        lease_id, ttl_s = self._client.lease_grant(
            max(1, math.ceil(session_timeout_ms / 1000)), timeout_ms=timeout_ms
        )
        ids, seen = self._ids_key(broker_id), self._k(f"brokers/seen/{broker_id}")

        def attempt() -> TxnPlan[BrokerInfo] | Retry:
            last, seq_mod, (held, was) = self._seq_read([op_range(ids), op_range(seen)], timeout_ms)
            if held:
                current = self._broker(held)
                raise BrokerIdInUseError(broker_id, current.incarnation_epoch if current else 0)
            if was:
                self._reap(timeout_ms)
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
            broker = self._run(timeout_ms, attempt)
        except BaseException:
            with contextlib.suppress(Exception):
                self._client.lease_revoke(lease_id, timeout_ms=self._bg_timeout_ms)
            raise
        with self._lock:
            session = EtcdSession(broker, lease_id, ttl_s, next_renewal_s=monotonic_s() + ttl_s / 3)
            self._sessions[broker_id] = session
            self._notify(session)
        self._dispatcher.run()
        self._ensure_thread()
        return broker

    def heartbeat(
        self, broker_id: int, incarnation_epoch: int, *, timeout_ms: int | None = None
    ) -> SessionState:
        """See ``Coordinator.heartbeat``: renews the lease now."""
        (kvs,) = self._read([op_range(self._ids_key(broker_id))], timeout_ms)
        self._acting(broker_id, incarnation_epoch, kvs)
        if self._client.lease_keepalive(kvs[0].lease, timeout_ms=timeout_ms) is None:
            self._lose(broker_id, incarnation_epoch)
            raise SessionExpiredError(broker_id, incarnation_epoch, None)
        return SessionState.CONNECTED

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
        ids = self._ids_key(broker_id)

        def attempt() -> TxnPlan[BrokerInfo] | Done[BrokerInfo]:
            last, seq_mod, (kvs,) = self._seq_read([op_range(ids)], timeout_ms)
            old = self._acting(broker_id, incarnation_epoch, kvs)
            new = rules.updated_broker(old, fenced, in_controlled_shutdown)
            if new == old:
                return Done(new)
            ops = [op_put(ids, codec.dumps(new), kvs[0].lease)]
            compares = [cmp_mod(ids, kvs[0].mod_revision)]
            build: Records = functools.partial(records.broker_updated, broker=new)
            return plan(last, seq_mod, compares, ops, build, lambda _: new)

        return self._run(timeout_ms, attempt)

    def unregister_broker(
        self, broker_id: int, incarnation_epoch: int, *, timeout_ms: int | None = None
    ) -> bool:
        """See ``Coordinator.unregister_broker``."""
        ids, ctl = self._ids_key(broker_id), self._k("controller")
        lease: list[int] = []

        def attempt() -> TxnPlan[bool] | Done[bool]:
            last, seq_mod, (kvs, ctl_kvs) = self._seq_read(
                [op_range(ids), op_range(ctl)], timeout_ms
            )
            try:
                self._acting(broker_id, incarnation_epoch, kvs)
            except SessionExpiredError:
                return Done(False)
            lease[:] = [kvs[0].lease]
            controller: ControllerInfo | None = codec.loads(ctl_kvs[0].value) if ctl_kvs else None
            was_controller = controller is not None and controller.controller_id == broker_id
            ops = [op_delete(ids), op_delete(self._k(f"brokers/seen/{broker_id}"))]
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

        done = self._run(timeout_ms, attempt)
        if done:
            with contextlib.suppress(Exception):
                self._client.lease_revoke(lease[0], timeout_ms=self._bg_timeout_ms)
            self._lose(broker_id, incarnation_epoch)
        return done

    def get_broker(self, broker_id: int, *, timeout_ms: int | None = None) -> BrokerInfo | None:
        """See ``Coordinator.get_broker``."""
        (kvs,) = self._read([op_range(self._ids_key(broker_id))], timeout_ms)
        return self._broker(kvs)

    def _brokers(self, kvs: list[KeyValue]) -> dict[int, BrokerInfo]:
        brokers = [b for b in (self._broker([kv]) for kv in kvs) if b is not None]
        return {b.broker_id: b for b in sorted(brokers, key=lambda b: b.broker_id)}

    def live_brokers(self, *, timeout_ms: int | None = None) -> dict[int, BrokerInfo]:
        """See ``Coordinator.live_brokers``."""
        (kvs,) = self._read([op_range(self._k("brokers/ids/"), prefix=True)], timeout_ms)
        return self._brokers(kvs)

    def session_state(self, broker_id: int) -> SessionState:
        """See ``Coordinator.session_state`` (this handle's view, no store access)."""
        with self._lock:
            session = self._sessions.get(broker_id)
            return SessionState.LOST if session is None else session.state

    def add_session_listener(
        self, broker_id: int, callback: Callable[[SessionEvent], None]
    ) -> Subscription:
        """See ``Coordinator.add_session_listener``."""
        self._check_open()
        return self._listeners.add(broker_id, callback)

    # ---- expiry bookkeeping ----

    def _reap(self, timeout_ms: int | None) -> list[int]:
        """Record the expiry of every broker whose lease is gone; return their ids."""
        seen_p, ids_p, ctl = (
            self._k("brokers/seen/"),
            self._k("brokers/ids/"),
            self._k("controller"),
        )
        reaped: list[int] = []

        def attempt() -> TxnPlan[int] | Done[int]:
            last, seq_mod, (seen, ids, ctl_kvs) = self._seq_read(
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
                cmp_create(self._ids_key(broker_id), 0),
                cmp_mod(ctl, mod_rev(ctl_kvs)),
            ]
            return plan(last, seq_mod, compares, ops, build, lambda _: broker_id)

        while (broker_id := self._run(timeout_ms, attempt)) >= 0:
            reaped.append(broker_id)
            with self._lock:
                session = self._sessions.get(broker_id)
                incarnation = None if session is None else session.broker.incarnation_epoch
            if incarnation is not None:
                self._lose(broker_id, incarnation)
        return reaped

    def _renew_due(self) -> None:
        now = monotonic_s()
        with self._lock:
            due = [
                s
                for s in self._sessions.values()
                if not s.hook_suspended and s.next_renewal_s <= now
            ]
        for session in due:
            try:
                ttl = self._client.lease_keepalive(session.lease_id, timeout_ms=self._bg_timeout_ms)
            except CoordinatorUnavailableError:
                with self._lock:
                    if not session.hook_suspended:
                        self._emit(session, SessionState.SUSPENDED)
                    session.next_renewal_s = monotonic_s() + 0.1
                self._dispatcher.run()
                continue
            if ttl is None:
                self._lose(session.broker.broker_id, session.broker.incarnation_epoch)
                continue
            with self._lock:
                session.next_renewal_s = monotonic_s() + session.ttl_s / 3
                if not session.hook_suspended:
                    self._emit(session, SessionState.CONNECTED)
            self._dispatcher.run()

    # ---- test hooks (SessionFaults) ----

    def expire_session(self, broker_id: int) -> None:
        """Test hook: revoke the broker's lease now and record the expiry."""
        (kvs,) = self._read([op_range(self._ids_key(broker_id))], None)
        if kvs:
            self._client.lease_revoke(kvs[0].lease)
            broker = self._broker(kvs)
            if broker is not None:
                self._lose(broker_id, broker.incarnation_epoch)
        self._reap(None)

    def suspend_session(self, broker_id: int) -> None:
        """Test hook: stop renewing the broker's lease and refuse its calls (SUSPENDED); the
        lease's TTL keeps running."""
        with self._lock:
            session = self._sessions.get(broker_id)
            if session is not None and session.state is SessionState.CONNECTED:
                session.hook_suspended = True
                self._emit(session, SessionState.SUSPENDED)
        self._dispatcher.run()

    def resume_session(self, broker_id: int) -> None:
        """Test hook: renew once: CONNECTED if the lease is still alive, else LOST."""
        with self._lock:
            session = self._sessions.get(broker_id)
        if session is None or not session.hook_suspended:
            return
        ttl = self._client.lease_keepalive(session.lease_id)
        with self._lock:
            session.hook_suspended = False
            if ttl is not None:
                self._emit(session, SessionState.CONNECTED)
        if ttl is None:
            self._lose(broker_id, session.broker.incarnation_epoch)
            self._reap(None)
        self._dispatcher.run()
