"""The etcd v3 coordinator: the ``Coordinator`` contract on etcd's HTTP/JSON gateway (httpx).

URL: ``etcd://host:port[,host:port...]/prefix`` (plain HTTP; prefix default ``replog``).

Layout under ``<prefix>/`` (values are JSON from ``replog.coord.codec`` unless said otherwise)::

    feed/seq                         last feed seq (decimal); every write CASes it
    feed/trimmed                     feed records below this seq are gone (decimal)
    changes/<seq, 20 digits>         the records of one atomic write (a JSON list)
    brokers/ids/<id>                 BrokerInfo, put with the broker's lease (= liveness)
    brokers/seen/<id>                incarnation epoch, no lease: the feed's view of the broker
    topics/<t>                       {"topic_id", "partition_count", "configs": {k: v}}
                                     (no "configs": written before topics had them, none)
    topics/<t>/partitions/<p>/state  PartitionState, its partition epoch inside the value
    controller                       ControllerInfo (no lease, see below)
    controller_epoch                 last controller epoch (decimal)
    admin/q/<target>/<id, 20 digits> AdminRequest;  admin/id/<id> -> its target
    configs/brokers/<id>|<default>   dynamic broker configs (``replog.coord.etcd_configs``)

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

The handle is split by responsibility: the txn plumbing in ``replog.coord.etcd_txn``, broker
sessions and expiry records in ``replog.coord.etcd_sessions``, the feed in
``replog.coord.etcd_feed``, admin queues in ``replog.coord.etcd_admin``, dynamic configs in
``replog.coord.etcd_configs``; controller, topics, partition states, snapshot and the
background thread here.
"""

from __future__ import annotations

import contextlib
import functools
import itertools
import json
import threading
import urllib.parse
import uuid
from collections.abc import Mapping, Sequence
from typing import Any

from replog.clock import monotonic_s
from replog.coord import codec, rules
from replog.coord.contract import ADMIN_QUEUE_LIMIT, DEFAULT_TIMEOUT_MS, validate_partition_state
from replog.coord.dispatch import Dispatcher
from replog.coord.errors import (
    CoordinatorClosedError,
    CoordinatorUnavailableError,
    FencedControllerError,
    UnknownTopicError,
)
from replog.coord.etcd_admin import EtcdAdminMixin
from replog.coord.etcd_client import (
    EtcdClient,
    JsonObj,
    KeyValue,
    cmp_create,
    cmp_mod,
    op_delete,
    op_put,
    op_range,
)
from replog.coord.etcd_configs import EtcdConfigsMixin, decode_broker_configs
from replog.coord.etcd_feed import EtcdFeedMixin, FeedSubscriber
from replog.coord.etcd_sessions import EtcdSession, EtcdSessionsMixin
from replog.coord.etcd_txn import RETRY, Done, Records, Retry, TxnPlan, last_int, mod_rev, plan
from replog.coord.sessions import SessionListeners
from replog.errors import InvalidConfigError, RequestTimeoutError
from replog.metadata import records
from replog.metadata.types import (
    PRODUCER_ID_BLOCK_SIZE,
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

__all__ = ["EtcdCoordinator"]


class EtcdCoordinator(EtcdSessionsMixin, EtcdFeedMixin, EtcdAdminMixin, EtcdConfigsMixin):
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
        self._sessions: dict[int, EtcdSession] = {}
        self._listeners = SessionListeners()
        self._subs: dict[int, FeedSubscriber] = {}
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
        found, lease_kv = self._active(ctl_kvs, ids)
        active = rules.check_controller_epoch(found, controller_epoch)
        if lease_kv is None:  # pragma: no cover - found is None, check_controller_epoch raised
            raise FencedControllerError(controller_epoch, None)
        self._acting(active.controller_id, active.incarnation_epoch, [lease_kv])
        return [
            cmp_mod(self._k("controller"), ctl_kvs[0].mod_revision),
            cmp_create(lease_kv.key, lease_kv.create_revision),
        ]

    def admit_broker(
        self,
        broker_id: int,
        incarnation_epoch: int,
        *,
        controller_epoch: int,
        timeout_ms: int | None = None,
    ) -> bool:
        """See ``Coordinator.admit_broker``: the registration key is rewritten
        under the same lease, guarded by the controller fence and its own mod revision."""
        ids = self._ids_key(broker_id)

        def attempt() -> TxnPlan[bool] | Done[bool]:
            last, seq_mod, got = self._seq_read(self._ctl_ops(), timeout_ms)
            compares = self._guard(controller_epoch, got)
            kvs = [kv for kv in got[2] if kv.key == ids]
            old = self._broker(kvs)
            new = rules.admitted_broker(old, incarnation_epoch)
            if new is None:
                return Done(False)
            if new == old:
                return Done(True)
            compares.append(cmp_mod(ids, kvs[0].mod_revision))
            ops = [op_put(ids, codec.dumps(new), kvs[0].lease)]
            build: Records = functools.partial(records.broker_updated, broker=new)
            return plan(last, seq_mod, compares, ops, build, lambda _: True)

        return self._run(timeout_ms, attempt)

    def elect_controller(
        self, broker_id: int, incarnation_epoch: int, *, timeout_ms: int | None = None
    ) -> ControllerInfo:
        """See ``Coordinator.elect_controller`` (the election txn of coordination.md §4)."""
        ctl, epoch_key = self._k("controller"), self._k("controller_epoch")

        def attempt() -> TxnPlan[ControllerInfo] | Done[ControllerInfo] | Retry:
            last, seq_mod, got = self._seq_read(self._ctl_ops(), timeout_ms)
            ctl_kvs, epoch_kvs, ids = got
            me = [kv for kv in ids if kv.key == self._ids_key(broker_id)]
            self._acting(broker_id, incarnation_epoch, me)
            active, _ = self._active(ctl_kvs, ids)
            if active is not None:
                return Done(active)
            if ctl_kvs:  # its broker is gone: record that first
                self._reap(timeout_ms)
                return RETRY
            won = ControllerInfo(broker_id, last_int(epoch_kvs) + 1, incarnation_epoch)
            ops = [op_put(ctl, codec.dumps(won)), op_put(epoch_key, str(won.controller_epoch))]
            compares = [
                cmp_create(ctl, 0),
                cmp_mod(epoch_key, mod_rev(epoch_kvs)),
                cmp_create(me[0].key, me[0].create_revision),
            ]
            build: Records = functools.partial(records.controller_changed, controller=won)
            return plan(last, seq_mod, compares, ops, build, lambda _: won)

        return self._run(timeout_ms, attempt)

    def resign_controller(
        self, broker_id: int, controller_epoch: int, *, timeout_ms: int | None = None
    ) -> bool:
        """See ``Coordinator.resign_controller``."""
        ctl = self._k("controller")

        def attempt() -> TxnPlan[bool] | Done[bool]:
            last, seq_mod, got = self._seq_read(self._ctl_ops(), timeout_ms)
            active, _ = self._active(got[0], got[2])
            if not rules.holds_controller(active, broker_id, controller_epoch):
                return Done(False)
            compares = self._guard(controller_epoch, got)
            build: Records = functools.partial(records.controller_changed, controller=None)
            return plan(last, seq_mod, compares, [op_delete(ctl)], build, lambda _: True)

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
        configs = topic_configs(info.get("configs") or {})
        assignment = TopicAssignment(
            topic=topic, topic_id=info["topic_id"], replicas=replicas, configs=configs
        )
        return assignment, states

    def _put_topic(self, topic: str, topic_id: str, count: int, configs: TopicConfigs) -> JsonObj:
        meta = {"topic_id": topic_id, "partition_count": count, "configs": dict(configs)}
        return op_put(self._topic_key(topic), json.dumps(meta))

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
        """See ``Coordinator.create_topic`` (``configs`` go in the ``topics/<t>`` value)."""
        assignment, states, stored = rules.new_topic(
            topic, replica_assignment, initial_states, configs
        )
        topics_p = self._k("topics/")

        def attempt() -> TxnPlan[TopicAssignment]:
            last, seq_mod, got = self._seq_read(
                [*self._ctl_ops(), op_range(topics_p, prefix=True, keys_only=True)], timeout_ms
            )
            compares = self._guard(controller_epoch, got[:3])
            names = [kv.key[len(topics_p) :] for kv in got[3]]
            rules.check_topic_free(topic, (n for n in names if "/" not in n))
            result = TopicAssignment(
                topic=topic, topic_id=uuid.uuid4().hex, replicas=assignment, configs=stored
            )
            ops = [self._put_topic(topic, result.topic_id, len(states), stored)]
            ops += [op_put(self._state_key(topic, p), codec.dumps(s)) for p, s in enumerate(states)]
            compares.append(cmp_create(self._topic_key(topic), 0))

            def build(seq: int) -> list[MetadataChange]:
                return records.topic_created(seq, result, states)

            return plan(last, seq_mod, compares, ops, build, lambda _: result)

        return self._run(timeout_ms, attempt)

    def delete_topic(
        self, topic: str, *, controller_epoch: int, timeout_ms: int | None = None
    ) -> TopicAssignment:
        """See ``Coordinator.delete_topic``."""

        def attempt() -> TxnPlan[TopicAssignment]:
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
            build: Records = functools.partial(records.topic_deleted, removed=removed)
            return plan(last, seq_mod, compares, ops, build, lambda _: removed)

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
        _, states = rules.new_partitions(new_replica_assignment, initial_states)

        def attempt() -> TxnPlan[TopicAssignment]:
            last, seq_mod, got = self._seq_read(
                [*self._ctl_ops(), *self._topic_ops(topic)], timeout_ms
            )
            compares = self._guard(controller_epoch, got[:3])
            found = self._assignment(topic, got[3], got[4])
            if found is None:
                raise UnknownTopicError(topic)
            old = found[0]
            first = old.partition_count
            result = rules.grown_assignment(old, states)
            ops = [self._put_topic(topic, old.topic_id, result.partition_count, old.configs)]
            ops += [
                op_put(self._state_key(topic, first + i), codec.dumps(s))
                for i, s in enumerate(states)
            ]
            compares.append(cmp_mod(self._topic_key(topic), got[3][0].mod_revision))

            def build(seq: int) -> list[MetadataChange]:
                return records.partitions_added(seq, result, first, states)

            return plan(last, seq_mod, compares, ops, build, lambda _: result)

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

        def attempt() -> TxnPlan[CasResult] | Done[CasResult]:
            last, seq_mod, got = self._seq_read([*self._ctl_ops(), op_range(key)], timeout_ms)
            try:
                compares = self._guard(controller_epoch, got[:3])
            except FencedControllerError as e:
                return Done(rules.cas_fenced(e))
            current: PartitionState | None = codec.loads(got[3][0].value) if got[3] else None
            stored = rules.cas_decision(current, expected_partition_epoch, new_state)
            if isinstance(stored, CasResult):
                return Done(stored)
            compares.append(cmp_mod(key, got[3][0].mod_revision))

            def build(seq: int) -> list[MetadataChange]:
                return records.partition_changed(seq, topic, partition, stored)

            ops = [op_put(key, codec.dumps(stored))]
            return plan(
                last, seq_mod, compares, ops, build, functools.partial(rules.cas_ok, stored)
            )

        return self._run(timeout_ms, attempt)

    # ---- snapshot ----

    def snapshot(self, *, timeout_ms: int | None = None) -> MetadataSnapshot:
        """See ``Coordinator.snapshot`` (one read at one revision)."""
        topics_p = self._k("topics/")
        configs_p = self._broker_configs_prefix
        last, _, got = self._seq_read(
            [*self._ctl_ops(), op_range(topics_p, prefix=True), op_range(configs_p, prefix=True)],
            timeout_ms,
        )
        ctl_kvs, epoch_kvs, ids, topic_kvs, config_kvs = got
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
            controller_epoch=last_int(epoch_kvs),
            broker_configs=decode_broker_configs(configs_p, config_kvs),
        )

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
                if monotonic_s() >= next_reap:
                    next_reap = monotonic_s() + self._reap_s
                    with contextlib.suppress(CoordinatorUnavailableError, RequestTimeoutError):
                        self._reap(self._bg_timeout_ms)
                self._push_feed()

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
        """See ``Coordinator.allocate_producer_ids``: the ``producer_ids`` key is put at the
        mod revision read, guarded by the controller fence (no feed record)."""
        key = self._k("producer_ids")
        budget = self._default_timeout_ms if timeout_ms is None else timeout_ms
        deadline = monotonic_s() + budget / 1000
        while True:
            got = self._read([*self._ctl_ops(), op_range(key)], timeout_ms)
            compares = self._guard(controller_epoch, got[:3])
            stored = codec.loads(got[3][0].value) if got[3] else ()
            block, blocks = rules.allocated_producer_ids(stored, broker_id, broker_epoch, count)
            compares.append(cmp_mod(key, mod_rev(got[3])))
            ops = [op_put(key, codec.dumps(blocks))]
            left_ms = max(1, int((deadline - monotonic_s()) * 1000))
            if self._client.txn(compares, ops, timeout_ms=left_ms).succeeded:
                return block
            if monotonic_s() > deadline:
                raise RequestTimeoutError(f"etcd write kept conflicting for {budget} ms")

    def producer_id_block(
        self, broker_id: int, *, timeout_ms: int | None = None
    ) -> ProducerIdBlock | None:
        """See ``Coordinator.producer_id_block``."""
        got = self._read([op_range(self._k("producer_ids"))], timeout_ms)
        blocks: tuple[ProducerIdBlock, ...] = codec.loads(got[0][0].value) if got[0] else ()
        return next((b for b in blocks if b.broker_id == broker_id), None)

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
