"""The etcd v3 coordinator: the ``Coordinator`` contract on etcd's HTTP/JSON gateway (httpx).

URL: ``etcd://host:port[,host:port...]/prefix`` (plain HTTP; prefix default ``replog``).

Layout under ``<prefix>/`` (values are JSON from ``etcd_codec`` unless said otherwise)::

    feed/seq                         last feed seq (decimal); every write CASes it
    feed/trimmed                     feed records below this seq are gone (decimal)
    changes/<seq, 20 digits>         the records of one atomic write (a JSON list)
    brokers/ids/<id>                 BrokerInfo, put with the broker's lease (= liveness)
    brokers/seen/<id>                incarnation epoch, no lease: the feed's view of the broker
    topics/<t>                       {"topic_id", "partition_count"}
    topics/<t>/partitions/<p>/state  PartitionState, its partition epoch inside the value
    controller                       ControllerInfo (no lease, see below)
    controller_epoch                 last controller epoch (decimal)
    admin/q/<target>/<id, 20 digits> AdminRequest;  admin/id/<id> -> its target

Every write is one txn: it reads what it needs at one revision (a compare-less txn of ranges),
checks the contract's rules in Python, then commits with compares on ``feed/seq``'s
mod_revision (so no other write came between), on the keys that can change without a feed
write (the leased ``brokers/ids/*`` keys: create_revision), and on the keys it replaces
(mod_revision). The commit puts ``feed/seq`` = seq and ``changes/<seq>`` in the same txn, so
records of one write share a seq and are never lost or split. A failed compare re-reads and
re-checks (a stale partition epoch then shows as VERSION_MISMATCH, a fenced controller as
FENCED), until the call's timeout. Incarnation epochs and admin request ids are the seq of
their write (a CAS'd counter), as in the memory backend.

Controller: ``controller`` + ``controller_epoch`` are written by the election txn (compare
``controller`` absent, ``controller_epoch`` mod_revision, candidate's lease key present). The
``controller`` key carries no lease: the role is *active* iff the registration of its broker
incarnation (a leased key) is present. Every controller write compares ``controller``'s
mod_revision and that broker key's create_revision, so a zombie whose lease expired is fenced
even before a successor is elected.

Lease expiry deletes ``brokers/ids/<id>`` without a feed record. Any handle that notices a
``brokers/seen/<id>`` without its ``brokers/ids/<id>`` (a background check every
``reap_interval_ms``, and before registering or electing) writes BrokerChanged(EXPIRED), plus
ControllerChanged(None) and the deletion of ``controller`` if it was the controller, in one txn
guarded by compares, so exactly one handle records each expiry.

Sessions: ``register_broker`` grants a lease (TTL = ceil(session timeout)); a background thread
renews it every TTL/3 with ``/v3/lease/keepalive``. A renewal that times out or cannot connect
makes the session SUSPENDED; one that succeeds, CONNECTED; a renewal answered without TTL
(lease gone), LOST. ``heartbeat`` renews synchronously.

Feed push: ``subscribe`` is served by polling (``changes_since`` from each subscriber's cursor)
on the background thread every ``poll_interval_ms``, woken at once by this handle's own writes;
polling keeps one code path with ``changes_since`` and no long-lived watch stream to babysit.
"""

from __future__ import annotations

import contextlib
import functools
import itertools
import json
import logging
import math
import threading
import time
import urllib.parse
import uuid
from collections.abc import Callable, Sequence
from typing import Any, Generic, TypeVar

import attrs

from replog.coord import etcd_codec as codec
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
from replog.coord.dispatch import Dispatcher
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
from replog.coord.etcd_client import (
    EtcdClient,
    JsonObj,
    KeyValue,
    cmp_create,
    cmp_mod,
    op_delete,
    op_put,
    op_range,
    prefix_end,
)
from replog.coord.types import (
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
from replog.errors import ErrorCode, InvalidConfigError, RequestTimeoutError
from replog.topics import collision_key, validate_topic_name

__all__ = ["EtcdCoordinator"]

_log = logging.getLogger(__name__)

T = TypeVar("T")
Records = Callable[[int], Sequence[MetadataChange]]


@attrs.frozen
class _Plan(Generic[T]):
    """One write to attempt: extra compares and ops, its feed records, and its result."""

    seq_mod: int
    last_seq: int
    compares: list[JsonObj]
    ops: list[JsonObj]
    records: Records
    result: Callable[[int], T]


@attrs.frozen
class _Done(Generic[T]):
    """No write needed: the call's result."""

    value: T


class _Retry:
    """Something changed under the plan (e.g. an expiry was just recorded): read again."""


RETRY = _Retry()


@attrs.define
class _Session:
    broker: BrokerInfo
    lease_id: int
    ttl_s: int
    state: SessionState = SessionState.CONNECTED
    hook_suspended: bool = False
    next_renewal_s: float = 0.0


@attrs.define
class _FeedSub:
    callback: Callable[[ChangeBatch], None]
    cursor: int
    closed: bool = False


def _int(kvs: list[KeyValue]) -> int:
    return int(kvs[0].value) if kvs else 0


def _mod(kvs: list[KeyValue]) -> int:
    return kvs[0].mod_revision if kvs else 0


class EtcdCoordinator(Coordinator):
    """A coordinator on etcd; see the module docstring. Use ``from_url`` or pass endpoints
    (``http://host:port``) and a key prefix."""

    def __init__(
        self,
        endpoints: Sequence[str],
        prefix: str = "replog",
        *,
        default_timeout_ms: int = DEFAULT_TIMEOUT_MS,
        background_timeout_ms: int = 1_000,
        poll_interval_ms: int = 20,
        reap_interval_ms: int = 200,
        admin_queue_limit: int = ADMIN_QUEUE_LIMIT,
    ) -> None:
        if default_timeout_ms <= 0 or poll_interval_ms <= 0 or admin_queue_limit < 1:
            raise ValueError("timeouts and intervals must be > 0, admin_queue_limit >= 1")
        self._p = prefix.strip("/") + "/"
        self._client = EtcdClient(endpoints, timeout_ms=default_timeout_ms)
        self._default_timeout_ms = default_timeout_ms
        self._bg_timeout_ms = background_timeout_ms
        self._poll_s = poll_interval_ms / 1000
        self._reap_s = reap_interval_ms / 1000
        self._admin_limit = admin_queue_limit
        self._lock = threading.RLock()
        self._dispatcher = Dispatcher()
        self._closed = False
        self._sessions: dict[int, _Session] = {}
        self._listeners: dict[int, dict[int, Callable[[SessionEvent], None]]] = {}
        self._subs: dict[int, _FeedSub] = {}
        self._tokens = itertools.count(1)
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    @classmethod
    def from_url(cls, url: str, /, **options: Any) -> EtcdCoordinator:
        """Open ``etcd://host:port[,host:port]/prefix`` (options as ``__init__``)."""
        parts = urllib.parse.urlsplit(url)
        if parts.scheme.lower() != "etcd" or not parts.netloc or parts.query or parts.fragment:
            raise InvalidConfigError(f"an etcd URL is etcd://host:port[,host:port]/prefix: {url!r}")
        endpoints = [f"http://{hp.strip()}" for hp in parts.netloc.split(",") if hp.strip()]
        try:
            return cls(endpoints, parts.path.strip("/") or "replog", **options)
        except TypeError as e:
            raise InvalidConfigError(f"bad option for the etcd backend: {e}") from e

    # ---- plumbing ----

    def _k(self, name: str) -> str:
        return self._p + name

    def _check_open(self) -> None:
        if self._closed:
            raise CoordinatorClosedError("the etcd coordinator is closed")

    def _read(self, ops: Sequence[JsonObj], timeout_ms: int | None) -> list[list[KeyValue]]:
        self._check_open()
        return self._client.read(ops, timeout_ms=timeout_ms)

    def _seq_read(
        self, ops: Sequence[JsonObj], timeout_ms: int | None
    ) -> tuple[int, int, list[list[KeyValue]]]:
        """Read ``feed/seq`` and ``ops`` at one revision: (last seq, its mod_revision, ranges)."""
        got = self._read([op_range(self._k("feed/seq")), *ops], timeout_ms)
        return _int(got[0]), _mod(got[0]), got[1:]

    def _plan(
        self,
        last_seq: int,
        seq_mod: int,
        compares: list[JsonObj],
        ops: list[JsonObj],
        records: Records,
        result: Callable[[int], T],
    ) -> _Plan[T]:
        return _Plan(seq_mod, last_seq, compares, ops, records, result)

    def _run(
        self, timeout_ms: int | None, attempt: Callable[[], _Plan[T] | _Done[T] | _Retry]
    ) -> T:
        """Plan and commit until a commit succeeds, a plan needs no write, or time runs out."""
        budget = self._default_timeout_ms if timeout_ms is None else timeout_ms
        deadline = time.monotonic() + budget / 1000
        while True:
            self._check_open()
            plan = attempt()
            if isinstance(plan, _Done):
                return plan.value
            if isinstance(plan, _Plan):
                seq = plan.last_seq + 1
                records = list(plan.records(seq))
                ops = [
                    *plan.ops,
                    op_put(self._k("feed/seq"), str(seq)),
                    op_put(self._k(f"changes/{seq:020d}"), codec.dumps(records)),
                ]
                compares = [cmp_mod(self._k("feed/seq"), plan.seq_mod), *plan.compares]
                left_ms = max(1, int((deadline - time.monotonic()) * 1000))
                if self._client.txn(compares, ops, timeout_ms=left_ms).succeeded:
                    self._wake.set()
                    return plan.result(seq)
            if time.monotonic() > deadline:
                raise RequestTimeoutError(f"etcd write kept conflicting for {budget} ms")

    def _emit(self, session: _Session, state: SessionState) -> None:
        """Move a local session to ``state`` and queue its listeners (caller holds the lock)."""
        if session.state is state or session.state is SessionState.LOST:
            return
        session.state = state
        self._notify(session)

    def _notify(self, session: _Session) -> None:
        """Queue the session's current state to its listeners (caller holds the lock)."""
        broker = session.broker
        event = SessionEvent(broker.broker_id, broker.incarnation_epoch, session.state)
        for callback in list(self._listeners.get(event.broker_id, {}).values()):
            self._dispatcher.enqueue(functools.partial(callback, event))

    def _lose(self, broker_id: int, incarnation_epoch: int) -> None:
        """Mark the local session of that incarnation LOST and deliver the event."""
        with self._lock:
            session = self._sessions.get(broker_id)
            if session is not None and session.broker.incarnation_epoch == incarnation_epoch:
                self._emit(session, SessionState.LOST)
                del self._sessions[broker_id]
        self._dispatcher.run()

    # ---- sessions ----

    def _broker(self, kvs: list[KeyValue]) -> BrokerInfo | None:
        if not kvs:
            return None
        broker: BrokerInfo = codec.loads(kvs[0].value)
        return broker

    def _acting(self, broker_id: int, incarnation_epoch: int, kvs: list[KeyValue]) -> BrokerInfo:
        """The incarnation's registration, if it may act: else ``SessionExpiredError`` (not
        current) or ``CoordinatorUnavailableError`` (this handle's session is SUSPENDED)."""
        current = self._broker(kvs)
        if current is None or current.incarnation_epoch != incarnation_epoch:
            self._lose(broker_id, incarnation_epoch)
            now = None if current is None else current.incarnation_epoch
            raise SessionExpiredError(broker_id, incarnation_epoch, now)
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
    ) -> BrokerInfo:
        """See ``Coordinator.register_broker``."""
        if broker_id < 0 or session_timeout_ms <= 0:
            raise ValueError(f"bad broker id {broker_id} or session timeout {session_timeout_ms}")
        self._check_open()
        self._reap(timeout_ms)
        lease_id, ttl_s = self._client.lease_grant(
            max(1, math.ceil(session_timeout_ms / 1000)), timeout_ms=timeout_ms
        )
        ids, seen = self._ids_key(broker_id), self._k(f"brokers/seen/{broker_id}")

        def attempt() -> _Plan[BrokerInfo] | _Retry:
            last, seq_mod, (held, was) = self._seq_read([op_range(ids), op_range(seen)], timeout_ms)
            if held:
                current = self._broker(held)
                raise BrokerIdInUseError(broker_id, current.incarnation_epoch if current else 0)
            if was:
                self._reap(timeout_ms)
                return RETRY
            broker = BrokerInfo(
                broker_id=broker_id, incarnation_epoch=last + 1, host=host, port=port, rack=rack
            )
            ops = [op_put(ids, codec.dumps(broker), lease_id), op_put(seen, str(last + 1))]
            records: Records = lambda seq: [  # noqa: E731
                BrokerChanged(
                    seq=seq,
                    reason=BrokerChangeReason.REGISTERED,
                    broker_id=broker_id,
                    incarnation_epoch=seq,
                    broker=broker,
                )
            ]
            compares = [cmp_create(ids, 0), cmp_mod(seen, 0)]
            return self._plan(last, seq_mod, compares, ops, records, lambda _: broker)

        try:
            broker = self._run(timeout_ms, attempt)
        except BaseException:
            with contextlib.suppress(Exception):
                self._client.lease_revoke(lease_id, timeout_ms=self._bg_timeout_ms)
            raise
        with self._lock:
            session = _Session(broker, lease_id, ttl_s, next_renewal_s=time.monotonic() + ttl_s / 3)
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

        def attempt() -> _Plan[BrokerInfo] | _Done[BrokerInfo]:
            last, seq_mod, (kvs,) = self._seq_read([op_range(ids)], timeout_ms)
            old = self._acting(broker_id, incarnation_epoch, kvs)
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
                return _Done(new)
            records: Records = lambda seq: [  # noqa: E731
                BrokerChanged(
                    seq=seq,
                    reason=BrokerChangeReason.UPDATED,
                    broker_id=broker_id,
                    incarnation_epoch=incarnation_epoch,
                    broker=new,
                )
            ]
            ops = [op_put(ids, codec.dumps(new), kvs[0].lease)]
            compares = [cmp_mod(ids, kvs[0].mod_revision)]
            return self._plan(last, seq_mod, compares, ops, records, lambda _: new)

        return self._run(timeout_ms, attempt)

    def unregister_broker(
        self, broker_id: int, incarnation_epoch: int, *, timeout_ms: int | None = None
    ) -> bool:
        """See ``Coordinator.unregister_broker``."""
        ids, ctl = self._ids_key(broker_id), self._k("controller")
        lease: list[int] = []

        def attempt() -> _Plan[bool] | _Done[bool]:
            last, seq_mod, (kvs, ctl_kvs) = self._seq_read(
                [op_range(ids), op_range(ctl)], timeout_ms
            )
            try:
                self._acting(broker_id, incarnation_epoch, kvs)
            except SessionExpiredError:
                return _Done(False)
            lease[:] = [kvs[0].lease]
            controller: ControllerInfo | None = codec.loads(ctl_kvs[0].value) if ctl_kvs else None
            was_controller = controller is not None and controller.controller_id == broker_id
            ops = [op_delete(ids), op_delete(self._k(f"brokers/seen/{broker_id}"))]
            if was_controller:
                ops.append(op_delete(ctl))

            def records(seq: int) -> list[MetadataChange]:
                out: list[MetadataChange] = [
                    BrokerChanged(
                        seq=seq,
                        reason=BrokerChangeReason.UNREGISTERED,
                        broker_id=broker_id,
                        incarnation_epoch=incarnation_epoch,
                        broker=None,
                    )
                ]
                if was_controller:
                    out.append(ControllerChanged(seq=seq, controller=None))
                return out

            compares = [cmp_mod(ids, kvs[0].mod_revision), cmp_mod(ctl, _mod(ctl_kvs))]
            return self._plan(last, seq_mod, compares, ops, records, lambda _: True)

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
        token = next(self._tokens)
        with self._lock:
            self._listeners.setdefault(broker_id, {})[token] = callback

        def cancel() -> None:
            with self._lock:
                self._listeners.get(broker_id, {}).pop(token, None)

        return Subscription(cancel)

    # ---- expiry bookkeeping ----

    def _reap(self, timeout_ms: int | None) -> list[int]:
        """Record the expiry of every broker whose lease is gone; return their ids."""
        seen_p, ids_p, ctl = (
            self._k("brokers/seen/"),
            self._k("brokers/ids/"),
            self._k("controller"),
        )
        reaped: list[int] = []

        def attempt() -> _Plan[int] | _Done[int]:
            last, seq_mod, (seen, ids, ctl_kvs) = self._seq_read(
                [op_range(seen_p, prefix=True), op_range(ids_p, prefix=True, keys_only=True),
                 op_range(ctl)],
                timeout_ms,
            )  # fmt: skip
            alive = {kv.key[len(ids_p) :] for kv in ids}
            dead = [kv for kv in seen if kv.key[len(seen_p) :] not in alive]
            if not dead:
                return _Done(-1)
            kv = dead[0]
            broker_id, incarnation = int(kv.key[len(seen_p) :]), int(kv.value)
            controller: ControllerInfo | None = codec.loads(ctl_kvs[0].value) if ctl_kvs else None
            was_controller = controller is not None and controller.controller_id == broker_id
            ops = [op_delete(kv.key)] + ([op_delete(ctl)] if was_controller else [])

            def records(seq: int) -> list[MetadataChange]:
                out: list[MetadataChange] = [
                    BrokerChanged(
                        seq=seq,
                        reason=BrokerChangeReason.EXPIRED,
                        broker_id=broker_id,
                        incarnation_epoch=incarnation,
                        broker=None,
                    )
                ]
                if was_controller:
                    out.append(ControllerChanged(seq=seq, controller=None))
                return out

            compares = [
                cmp_mod(kv.key, kv.mod_revision),
                cmp_create(self._ids_key(broker_id), 0),
                cmp_mod(ctl, _mod(ctl_kvs)),
            ]
            return self._plan(last, seq_mod, compares, ops, records, lambda _: broker_id)

        while (broker_id := self._run(timeout_ms, attempt)) >= 0:
            reaped.append(broker_id)
            with self._lock:
                session = self._sessions.get(broker_id)
                incarnation = None if session is None else session.broker.incarnation_epoch
            if incarnation is not None:
                self._lose(broker_id, incarnation)
        return reaped

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

    # ---- controller ----

    def _active(
        self, ctl_kvs: list[KeyValue], ids: list[KeyValue]
    ) -> tuple[ControllerInfo | None, KeyValue | None]:
        """The active controller and its broker's lease key, from one read."""
        if not ctl_kvs:
            return None, None
        controller: ControllerInfo = codec.loads(ctl_kvs[0].value)
        for kv in ids:
            if kv.key == self._ids_key(controller.controller_id):
                broker = self._broker([kv])
                if broker is not None and broker.incarnation_epoch == controller.incarnation_epoch:
                    return controller, kv
        return None, None

    def _ctl_ops(self) -> list[JsonObj]:
        """The reads a controller check needs (controller, epoch, every lease key)."""
        return [
            op_range(self._k("controller")),
            op_range(self._k("controller_epoch")),
            op_range(self._k("brokers/ids/"), prefix=True),
        ]

    def _guard(self, controller_epoch: int, got: list[list[KeyValue]]) -> list[JsonObj]:
        """Check ``controller_epoch`` is the active controller's (``got`` from ``_ctl_ops``) and
        return the compares that keep it so until the commit."""
        ctl_kvs, _, ids = got
        active, lease_kv = self._active(ctl_kvs, ids)
        if active is None or lease_kv is None or active.controller_epoch != controller_epoch:
            raise FencedControllerError(
                controller_epoch, None if active is None else active.controller_epoch
            )
        self._acting(active.controller_id, active.incarnation_epoch, [lease_kv])
        return [
            cmp_mod(self._k("controller"), ctl_kvs[0].mod_revision),
            cmp_create(lease_kv.key, lease_kv.create_revision),
        ]

    def elect_controller(
        self, broker_id: int, incarnation_epoch: int, *, timeout_ms: int | None = None
    ) -> ControllerInfo:
        """See ``Coordinator.elect_controller`` (the election txn of coordination.md §4)."""
        ctl, epoch_key = self._k("controller"), self._k("controller_epoch")

        def attempt() -> _Plan[ControllerInfo] | _Done[ControllerInfo] | _Retry:
            last, seq_mod, got = self._seq_read(self._ctl_ops(), timeout_ms)
            ctl_kvs, epoch_kvs, ids = got
            me = [kv for kv in ids if kv.key == self._ids_key(broker_id)]
            self._acting(broker_id, incarnation_epoch, me)
            active, _ = self._active(ctl_kvs, ids)
            if active is not None:
                return _Done(active)
            if ctl_kvs:  # its broker is gone: record that first
                self._reap(timeout_ms)
                return RETRY
            won = ControllerInfo(broker_id, _int(epoch_kvs) + 1, incarnation_epoch)
            ops = [op_put(ctl, codec.dumps(won)), op_put(epoch_key, str(won.controller_epoch))]
            compares = [
                cmp_create(ctl, 0),
                cmp_mod(epoch_key, _mod(epoch_kvs)),
                cmp_create(me[0].key, me[0].create_revision),
            ]
            records: Records = lambda seq: [ControllerChanged(seq=seq, controller=won)]  # noqa: E731
            return self._plan(last, seq_mod, compares, ops, records, lambda _: won)

        return self._run(timeout_ms, attempt)

    def resign_controller(
        self, broker_id: int, controller_epoch: int, *, timeout_ms: int | None = None
    ) -> bool:
        """See ``Coordinator.resign_controller``."""
        ctl = self._k("controller")

        def attempt() -> _Plan[bool] | _Done[bool]:
            last, seq_mod, got = self._seq_read(self._ctl_ops(), timeout_ms)
            active, _ = self._active(got[0], got[2])
            if active is None or (active.controller_id, active.controller_epoch) != (
                broker_id,
                controller_epoch,
            ):
                return _Done(False)
            compares = self._guard(controller_epoch, got)
            records: Records = lambda seq: [ControllerChanged(seq=seq, controller=None)]  # noqa: E731
            return self._plan(last, seq_mod, compares, [op_delete(ctl)], records, lambda _: True)

        return self._run(timeout_ms, attempt)

    def current_controller(self, *, timeout_ms: int | None = None) -> ControllerInfo | None:
        """See ``Coordinator.current_controller``."""
        got = self._read(self._ctl_ops(), timeout_ms)
        return self._active(got[0], got[2])[0]

    # ---- topics and partitions ----

    def _topic_key(self, topic: str) -> str:
        return self._k(f"topics/{topic}")

    def _state_key(self, topic: str, partition: int) -> str:
        return self._k(f"topics/{topic}/partitions/{partition}/state")

    def _topic_ops(self, topic: str) -> list[JsonObj]:
        return [
            op_range(self._topic_key(topic)),
            op_range(self._topic_key(topic) + "/", prefix=True),
        ]

    def _assignment(
        self, topic: str, meta: list[KeyValue], parts: list[KeyValue]
    ) -> tuple[TopicAssignment, dict[int, PartitionState]] | None:
        if not meta:
            return None
        info = json.loads(meta[0].value)
        base = self._topic_key(topic) + "/partitions/"
        states: dict[int, PartitionState] = {}
        for kv in parts:
            states[int(kv.key[len(base) :].split("/")[0])] = codec.loads(kv.value)
        replicas = [states[p].replicas for p in range(int(info["partition_count"]))]
        return TopicAssignment(topic=topic, topic_id=info["topic_id"], replicas=replicas), states

    def _put_topic(self, topic: str, topic_id: str, count: int) -> JsonObj:
        meta = json.dumps({"topic_id": topic_id, "partition_count": count})
        return op_put(self._topic_key(topic), meta)

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
        topics_p = self._k("topics/")

        def attempt() -> _Plan[TopicAssignment]:
            last, seq_mod, got = self._seq_read(
                [*self._ctl_ops(), op_range(topics_p, prefix=True, keys_only=True)], timeout_ms
            )
            compares = self._guard(controller_epoch, got[:3])
            names = [kv.key[len(topics_p) :] for kv in got[3]]
            for existing in (n for n in names if "/" not in n):
                if collision_key(existing) == collision_key(topic):
                    raise TopicExistsError(topic, existing)
            result = TopicAssignment(topic=topic, topic_id=uuid.uuid4().hex, replicas=assignment)
            ops = [self._put_topic(topic, result.topic_id, len(states))]
            ops += [op_put(self._state_key(topic, p), codec.dumps(s)) for p, s in enumerate(states)]
            compares.append(cmp_create(self._topic_key(topic), 0))

            def records(seq: int) -> list[MetadataChange]:
                return [
                    TopicChanged(seq=seq, reason=TopicChangeReason.CREATED, assignment=result),
                    *self._partition_records(topic, 0, states, seq),
                ]

            return self._plan(last, seq_mod, compares, ops, records, lambda _: result)

        return self._run(timeout_ms, attempt)

    def _partition_records(
        self, topic: str, first: int, states: list[PartitionState], seq: int
    ) -> list[MetadataChange]:
        return [
            PartitionChanged(seq=seq, topic=topic, partition=first + i, state=s)
            for i, s in enumerate(states)
        ]

    def delete_topic(
        self, topic: str, *, controller_epoch: int, timeout_ms: int | None = None
    ) -> TopicAssignment:
        """See ``Coordinator.delete_topic``."""

        def attempt() -> _Plan[TopicAssignment]:
            last, seq_mod, got = self._seq_read(
                [*self._ctl_ops(), *self._topic_ops(topic)], timeout_ms
            )
            compares = self._guard(controller_epoch, got[:3])
            found = self._assignment(topic, got[3], got[4])
            if found is None:
                raise UnknownTopicError(topic)
            removed = found[0]
            key = self._topic_key(topic)
            ops = [op_delete(key), op_delete(key + "/", prefix=True)]
            compares.append(cmp_mod(key, got[3][0].mod_revision))
            records: Records = lambda seq: [  # noqa: E731
                TopicChanged(seq=seq, reason=TopicChangeReason.DELETED, assignment=removed)
            ]
            return self._plan(last, seq_mod, compares, ops, records, lambda _: removed)

        return self._run(timeout_ms, attempt)

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

        def attempt() -> _Plan[TopicAssignment]:
            last, seq_mod, got = self._seq_read(
                [*self._ctl_ops(), *self._topic_ops(topic)], timeout_ms
            )
            compares = self._guard(controller_epoch, got[:3])
            found = self._assignment(topic, got[3], got[4])
            if found is None:
                raise UnknownTopicError(topic)
            old = found[0]
            first = old.partition_count
            result = attrs.evolve(old, replicas=(*old.replicas, *(s.replicas for s in states)))
            ops = [self._put_topic(topic, old.topic_id, result.partition_count)]
            ops += [
                op_put(self._state_key(topic, first + i), codec.dumps(s))
                for i, s in enumerate(states)
            ]
            compares.append(cmp_mod(self._topic_key(topic), got[3][0].mod_revision))

            def records(seq: int) -> list[MetadataChange]:
                return [
                    TopicChanged(
                        seq=seq, reason=TopicChangeReason.PARTITIONS_ADDED, assignment=result
                    ),
                    *self._partition_records(topic, first, states, seq),
                ]

            return self._plan(last, seq_mod, compares, ops, records, lambda _: result)

        return self._run(timeout_ms, attempt)

    def list_topics(self, *, timeout_ms: int | None = None) -> list[str]:
        """See ``Coordinator.list_topics``."""
        topics_p = self._k("topics/")
        (kvs,) = self._read([op_range(topics_p, prefix=True, keys_only=True)], timeout_ms)
        return sorted(n for n in (kv.key[len(topics_p) :] for kv in kvs) if "/" not in n)

    def get_topic(self, topic: str, *, timeout_ms: int | None = None) -> TopicAssignment | None:
        """See ``Coordinator.get_topic``."""
        meta, parts = self._read(self._topic_ops(topic), timeout_ms)
        found = self._assignment(topic, meta, parts)
        return None if found is None else found[0]

    def get_partition_state(
        self, topic: str, partition: int, *, timeout_ms: int | None = None
    ) -> PartitionState | None:
        """See ``Coordinator.get_partition_state``."""
        (kvs,) = self._read([op_range(self._state_key(topic, partition))], timeout_ms)
        state: PartitionState | None = codec.loads(kvs[0].value) if kvs else None
        return state

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
        """See ``Coordinator.compare_and_set_partition_state``: a txn comparing the state key's
        mod_revision (and ``feed/seq``, and the controller's keys)."""
        validate_partition_state(new_state)
        key = self._state_key(topic, partition)

        def attempt() -> _Plan[CasResult] | _Done[CasResult]:
            last, seq_mod, got = self._seq_read([*self._ctl_ops(), op_range(key)], timeout_ms)
            try:
                compares = self._guard(controller_epoch, got[:3])
            except FencedControllerError as e:
                return _Done(
                    CasResult(
                        status=CasStatus.FENCED_CONTROLLER,
                        active_controller_epoch=e.active_controller_epoch,
                    )
                )
            if not got[3]:
                return _Done(CasResult(status=CasStatus.UNKNOWN_PARTITION))
            current: PartitionState = codec.loads(got[3][0].value)
            if current.partition_epoch != expected_partition_epoch:
                return _Done(CasResult(status=CasStatus.VERSION_MISMATCH, state=current))
            validate_partition_state(new_state, current)
            stored = attrs.evolve(new_state, partition_epoch=expected_partition_epoch + 1)
            compares.append(cmp_mod(key, got[3][0].mod_revision))
            records: Records = lambda seq: [  # noqa: E731
                PartitionChanged(seq=seq, topic=topic, partition=partition, state=stored)
            ]
            return self._plan(
                last,
                seq_mod,
                compares,
                [op_put(key, codec.dumps(stored))],
                records,
                lambda seq: CasResult(status=CasStatus.OK, state=stored, seq=seq),
            )

        return self._run(timeout_ms, attempt)

    # ---- the change feed ----

    def changes_since(
        self,
        seq: int,
        *,
        max_changes: int = MAX_CHANGES_PER_BATCH,
        timeout_ms: int | None = None,
    ) -> ChangeBatch:
        """See ``Coordinator.changes_since`` (a range read of ``changes/``)."""
        if seq < 0 or max_changes < 1:
            raise ValueError(f"bad seq {seq} or max_changes {max_changes}")
        end = prefix_end(self._k("changes/"))
        trimmed, groups = self._read(
            [
                op_range(self._k("feed/trimmed")),
                op_range(self._k(f"changes/{seq:020d}"), range_end=end, limit=max_changes),
            ],
            timeout_ms,
        )
        if seq < _int(trimmed):
            raise MustResyncError(seq, _int(trimmed))
        changes: list[MetadataChange] = []
        for kv in groups:
            if len(changes) >= max_changes:
                break
            changes.extend(codec.loads(kv.value))
        return ChangeBatch(tuple(changes), changes[-1].seq + 1 if changes else seq)

    def snapshot(self, *, timeout_ms: int | None = None) -> MetadataSnapshot:
        """See ``Coordinator.snapshot`` (one read at one revision)."""
        topics_p = self._k("topics/")
        last, _, got = self._seq_read(
            [*self._ctl_ops(), op_range(topics_p, prefix=True)], timeout_ms
        )
        ctl_kvs, epoch_kvs, ids, topic_kvs = got
        metas = {
            kv.key[len(topics_p) :]: kv for kv in topic_kvs if "/" not in kv.key[len(topics_p) :]
        }
        topics: dict[str, TopicAssignment] = {}
        partitions: dict[tuple[str, int], PartitionState] = {}
        for name in sorted(metas):
            base = f"{topics_p}{name}/"
            parts = [kv for kv in topic_kvs if kv.key.startswith(base)]
            found = self._assignment(name, [metas[name]], parts)
            if found is not None:
                topics[name] = found[0]
                for p, state in sorted(found[1].items()):
                    partitions[(name, p)] = state
        return MetadataSnapshot(
            seq=last + 1,
            brokers=self._brokers(ids),
            topics=topics,
            partitions=dict(sorted(partitions.items())),
            controller=self._active(ctl_kvs, ids)[0],
            controller_epoch=_int(epoch_kvs),
        )

    def subscribe(
        self, callback: Callable[[ChangeBatch], None], *, from_seq: int | None = None
    ) -> Subscription:
        """See ``Coordinator.subscribe`` (served by polling; module docstring)."""
        if from_seq is None:
            (kvs,) = self._read([op_range(self._k("feed/seq"))], None)
            from_seq = _int(kvs) + 1
        token = next(self._tokens)
        sub = _FeedSub(callback, from_seq)
        with self._lock:
            self._subs[token] = sub

        def cancel() -> None:
            with self._lock:
                sub.closed = True
                self._subs.pop(token, None)

        self._ensure_thread()
        self._wake.set()
        return Subscription(cancel)

    def trim_history(self, before_seq: int, *, timeout_ms: int | None = None) -> int:
        """See ``Coordinator.trim_history``."""
        key = self._k("feed/trimmed")
        budget = self._default_timeout_ms if timeout_ms is None else timeout_ms
        deadline = time.monotonic() + budget / 1000
        while True:
            last, _, (trimmed,) = self._seq_read([op_range(key)], timeout_ms)
            boundary = max(_int(trimmed), min(before_seq, last + 1))
            ops = [
                op_put(key, str(boundary)),
                {
                    "request_delete_range": op_range(
                        self._k("changes/"), range_end=self._k(f"changes/{boundary:020d}")
                    )["request_range"]
                },
            ]
            if self._client.txn(
                [cmp_mod(key, _mod(trimmed))], ops, timeout_ms=timeout_ms
            ).succeeded:
                return boundary
            if time.monotonic() > deadline:
                raise RequestTimeoutError(
                    f"trimming the etcd feed kept conflicting for {budget} ms"
                )

    # ---- admin request queue ----

    def submit_admin_request(
        self, target: int, payload: AdminPayload, *, timeout_ms: int | None = None
    ) -> AdminRequest:
        """See ``Coordinator.submit_admin_request`` (request id = the submission's seq)."""
        validate_admin_request(target, payload)
        queue_p = self._k(f"admin/q/{target}/")

        def attempt() -> _Plan[AdminRequest]:
            last, seq_mod, (queued,) = self._seq_read([op_range(queue_p, prefix=True)], timeout_ms)
            pending: list[AdminRequest] = [codec.loads(kv.value) for kv in queued]
            dropped: list[AdminRequest] = []
            if len(pending) >= self._admin_limit:
                dropped = superseded_requests(pending)
                if len(pending) - len(dropped) >= self._admin_limit:
                    raise AdminQueueFullError(target, self._admin_limit)
            request_id = last + 1
            request = AdminRequest(
                request_id=request_id, target=target, payload=payload, submitted_seq=request_id
            )
            ops = [
                op_put(f"{queue_p}{request_id:020d}", codec.dumps(request)),
                op_put(self._k(f"admin/id/{request_id:020d}"), str(target)),
            ]
            for old in dropped:
                ops.append(op_delete(f"{queue_p}{old.request_id:020d}"))
                ops.append(op_delete(self._k(f"admin/id/{old.request_id:020d}")))

            def records(seq: int) -> list[MetadataChange]:
                out: list[MetadataChange] = [
                    AdminRequestChanged(
                        seq=seq,
                        reason=AdminRequestChangeReason.COMPLETED,
                        request=old,
                        outcome=ErrorCode.OPERATION_NOT_ATTEMPTED,
                        message=f"superseded: queue for target {target} was full",
                    )
                    for old in dropped
                ]
                out.append(
                    AdminRequestChanged(
                        seq=seq, reason=AdminRequestChangeReason.SUBMITTED, request=request
                    )
                )
                return out

            return self._plan(last, seq_mod, [], ops, records, lambda _: request)

        return self._run(timeout_ms, attempt)

    def pending_admin_requests(
        self, target: int, *, timeout_ms: int | None = None
    ) -> list[AdminRequest]:
        """See ``Coordinator.pending_admin_requests``."""
        (kvs,) = self._read([op_range(self._k(f"admin/q/{target}/"), prefix=True)], timeout_ms)
        return [codec.loads(kv.value) for kv in kvs]

    def complete_admin_request(
        self,
        request_id: int,
        *,
        outcome: ErrorCode = ErrorCode.NONE,
        message: str = "",
        timeout_ms: int | None = None,
    ) -> bool:
        """See ``Coordinator.complete_admin_request``."""
        id_key = self._k(f"admin/id/{request_id:020d}")

        def attempt() -> _Plan[bool] | _Done[bool]:
            last, seq_mod, (index,) = self._seq_read([op_range(id_key)], timeout_ms)
            if not index:
                return _Done(False)
            queue_key = self._k(f"admin/q/{int(index[0].value)}/{request_id:020d}")
            (queued,) = self._read([op_range(queue_key)], timeout_ms)
            if not queued:
                return _Done(False)
            request: AdminRequest = codec.loads(queued[0].value)
            records: Records = lambda seq: [  # noqa: E731
                AdminRequestChanged(
                    seq=seq,
                    reason=AdminRequestChangeReason.COMPLETED,
                    request=request,
                    outcome=outcome,
                    message=message,
                )
            ]
            ops = [op_delete(id_key), op_delete(queue_key)]
            return self._plan(last, seq_mod, [], ops, records, lambda _: True)

        return self._run(timeout_ms, attempt)

    # ---- background: lease renewals, expiry records, feed push ----

    def _ensure_thread(self) -> None:
        with self._lock:
            if self._thread is None and not self._closed:
                self._thread = threading.Thread(
                    target=self._background, name=f"replog-etcd-{self._p}", daemon=True
                )
                self._thread.start()

    def _background(self) -> None:
        next_reap = 0.0
        while not self._stop.is_set():
            self._wake.wait(self._poll_s)
            self._wake.clear()
            if self._stop.is_set():
                return
            with contextlib.suppress(CoordinatorClosedError):
                self._renew_due()
                if time.monotonic() >= next_reap:
                    next_reap = time.monotonic() + self._reap_s
                    with contextlib.suppress(CoordinatorUnavailableError, RequestTimeoutError):
                        self._reap(self._bg_timeout_ms)
                self._push_feed()

    def _renew_due(self) -> None:
        now = time.monotonic()
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
                    session.next_renewal_s = time.monotonic() + 0.1
                self._dispatcher.run()
                continue
            if ttl is None:
                self._lose(session.broker.broker_id, session.broker.incarnation_epoch)
                continue
            with self._lock:
                session.next_renewal_s = time.monotonic() + session.ttl_s / 3
                if not session.hook_suspended:
                    self._emit(session, SessionState.CONNECTED)
            self._dispatcher.run()

    def _push_feed(self) -> None:
        with self._lock:
            subs = list(self._subs.values())
        for sub in subs:
            try:
                batch = self.changes_since(sub.cursor, timeout_ms=self._bg_timeout_ms)
            except MustResyncError:
                (kvs,) = self._read([op_range(self._k("feed/seq"))], self._bg_timeout_ms)
                batch = ChangeBatch((), _int(kvs) + 1, resync_required=True)
            except (CoordinatorUnavailableError, RequestTimeoutError):
                continue
            if not batch.changes and not batch.resync_required:
                continue
            sub.cursor = batch.next_seq
            if not sub.closed:
                try:
                    sub.callback(batch)
                except Exception:
                    _log.exception("etcd feed subscriber raised; continuing")

    # ---- lifecycle ----

    def close(self) -> None:
        """Unregister this handle's brokers (best effort, briefly; else their leases expire),
        stop the background thread, close the HTTP pool. Idempotent."""
        with self._lock:
            if self._closed:
                return
            sessions = list(self._sessions.values())
        for session in sessions:
            broker = session.broker
            with contextlib.suppress(Exception):
                if session.state is SessionState.SUSPENDED:
                    raise CoordinatorUnavailableError("suspended")
                self.unregister_broker(
                    broker.broker_id, broker.incarnation_epoch, timeout_ms=self._bg_timeout_ms
                )
            self._lose(broker.broker_id, broker.incarnation_epoch)
        with self._lock:
            self._closed = True
            self._subs.clear()
            self._listeners.clear()
            thread = self._thread
        self._stop.set()
        self._wake.set()
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout=5)
        self._client.close()
