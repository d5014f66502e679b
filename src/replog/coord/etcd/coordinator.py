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
    configs/brokers/<id>|<default>   dynamic broker configs (``replog.coord.etcd.configs``)

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
even before a successor is elected (``replog.coord.etcd.controller``).

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

The handle composes one part per concept, all sharing one ``EtcdStore`` (the key prefix, the
reads and the write loop, ``replog.coord.etcd.store``): broker sessions and expiry records
(``sessions``), the controller role and its guard (``controller``), topics and partition
states (``topics``), dynamic configs (``configs``), admin queues (``admin_queues``),
producer-id blocks (``producer_ids``) and the feed (``feed``). The handle itself checks each
call's arguments, runs the background thread (lease renewals, expiry records, feed push) and
owns the lifecycle.
"""

from __future__ import annotations

import contextlib
import threading
import urllib.parse
from collections.abc import Callable, Mapping, Sequence
from typing import Any

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
from replog.coord.errors import CoordinatorClosedError, CoordinatorUnavailableError
from replog.coord.etcd.admin_queues import EtcdAdminQueues
from replog.coord.etcd.client import EtcdClient, op_range
from replog.coord.etcd.configs import EtcdConfigs, decode_broker_configs
from replog.coord.etcd.controller import EtcdController
from replog.coord.etcd.feed import EtcdFeed
from replog.coord.etcd.producer_ids import EtcdProducerIds
from replog.coord.etcd.sessions import EtcdSessions, decode_brokers
from replog.coord.etcd.store import EtcdStore, last_int
from replog.coord.etcd.topics import EtcdTopics
from replog.errors import ErrorCode, InvalidConfigError, RequestTimeoutError
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

__all__ = ["EtcdCoordinator"]


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
        self._bg_timeout_ms = background_timeout_ms
        self._poll_s = poll_interval_ms / 1000
        self._reap_s = reap_interval_ms / 1000
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        client = EtcdClient(endpoints, timeout_ms=default_timeout_ms)
        store = EtcdStore(client, self._p, default_timeout_ms, on_commit=self._wake.set)
        self._store = store
        self._sessions = EtcdSessions(store, background_timeout_ms, self._ensure_thread)
        self._controller = EtcdController(store, self._sessions)
        self._topics = EtcdTopics(store, self._controller)
        self._configs = EtcdConfigs(store, self._controller, self._topics)
        self._admin = EtcdAdminQueues(store, self._controller, admin_queue_limit)
        self._producer_ids = EtcdProducerIds(store, self._controller)
        self._feed = EtcdFeed(store, background_timeout_ms, self._ensure_thread, self._wake.set)

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

    # ---- background: lease renewals, expiry records, feed push ----

    def _ensure_thread(self) -> None:
        """Start the background thread if it is not running (and the handle is open)."""
        with self._lock:
            if self._thread is None and not self._store.closed:
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
                self._sessions.renew_due()
                if monotonic_s() >= next_reap:
                    next_reap = monotonic_s() + self._reap_s
                    with contextlib.suppress(CoordinatorUnavailableError, RequestTimeoutError):
                        self._sessions.reap(self._bg_timeout_ms)
                self._feed.push()

    # ---- lifecycle ----

    def close(self) -> None:
        """Unregister this handle's brokers (best effort, briefly; else their leases expire),
        stop the background thread, close the HTTP pool. Idempotent."""
        with self._lock:
            if self._store.closed:
                return
        self._sessions.end_all()
        with self._lock:
            self._store.closed = True
            thread = self._thread
        self._feed.close()
        self._sessions.drop_listeners()
        self._stop.set()
        self._wake.set()
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout=5)
        self._store.client.close()

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
        """See ``Coordinator.register_broker``: a lease carries the registration."""
        rules.check_registration(broker_id, session_timeout_ms)
        return self._sessions.register(
            broker_id,
            host,
            port,
            rack,
            session_timeout_ms,
            timeout_ms,
            clean_shutdown=clean_shutdown,
            fenced=fenced,
        )

    def heartbeat(
        self, broker_id: int, incarnation_epoch: int, *, timeout_ms: int | None = None
    ) -> SessionState:
        """See ``Coordinator.heartbeat``: renews the lease now."""
        return self._sessions.heartbeat(broker_id, incarnation_epoch, timeout_ms)

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
        return self._sessions.update(
            broker_id, incarnation_epoch, fenced, in_controlled_shutdown, timeout_ms
        )

    def admit_broker(
        self,
        broker_id: int,
        incarnation_epoch: int,
        *,
        controller_epoch: int,
        timeout_ms: int | None = None,
    ) -> bool:
        """See ``Coordinator.admit_broker``: the registration key is rewritten under the same
        lease, guarded by the controller fence and its own mod revision."""
        return self._controller.admit(broker_id, incarnation_epoch, controller_epoch, timeout_ms)

    def unregister_broker(
        self, broker_id: int, incarnation_epoch: int, *, timeout_ms: int | None = None
    ) -> bool:
        """See ``Coordinator.unregister_broker``."""
        return self._sessions.unregister(broker_id, incarnation_epoch, timeout_ms)

    def get_broker(self, broker_id: int, *, timeout_ms: int | None = None) -> BrokerInfo | None:
        """See ``Coordinator.get_broker``."""
        return self._sessions.get(broker_id, timeout_ms)

    def live_brokers(self, *, timeout_ms: int | None = None) -> dict[int, BrokerInfo]:
        """See ``Coordinator.live_brokers``."""
        return self._sessions.live(timeout_ms)

    def session_state(self, broker_id: int) -> SessionState:
        """See ``Coordinator.session_state`` (this handle's view, no store access)."""
        return self._sessions.state(broker_id)

    def add_session_listener(
        self, broker_id: int, callback: Callable[[SessionEvent], None]
    ) -> Subscription:
        """See ``Coordinator.add_session_listener``."""
        return self._sessions.add_listener(broker_id, callback)

    # ---- SessionFaults (tests) ----

    def expire_session(self, broker_id: int) -> None:
        """Test hook: revoke the broker's lease now and record the expiry."""
        self._sessions.expire(broker_id)

    def suspend_session(self, broker_id: int) -> None:
        """Test hook: stop renewing the broker's lease and refuse its calls (SUSPENDED); the
        lease's TTL keeps running."""
        self._sessions.suspend(broker_id)

    def resume_session(self, broker_id: int) -> None:
        """Test hook: renew once: CONNECTED if the lease is still alive, else LOST."""
        self._sessions.resume(broker_id)

    # ---- controller ----

    def elect_controller(
        self, broker_id: int, incarnation_epoch: int, *, timeout_ms: int | None = None
    ) -> ControllerInfo:
        """See ``Coordinator.elect_controller``: one txn compares ``controller`` absent, the
        ``controller_epoch`` read and the candidate's lease key present (module docstring)."""
        return self._controller.elect(broker_id, incarnation_epoch, timeout_ms)

    def resign_controller(
        self, broker_id: int, controller_epoch: int, *, timeout_ms: int | None = None
    ) -> bool:
        """See ``Coordinator.resign_controller``."""
        return self._controller.resign(broker_id, controller_epoch, timeout_ms)

    def current_controller(self, *, timeout_ms: int | None = None) -> ControllerInfo | None:
        """See ``Coordinator.current_controller``."""
        return self._controller.current(timeout_ms)

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
        """See ``Coordinator.create_topic`` (``configs`` go in the ``topics/<t>`` value)."""
        assignment, states, stored = rules.new_topic(
            topic, replica_assignment, initial_states, configs
        )
        return self._topics.create(topic, assignment, states, stored, controller_epoch, timeout_ms)

    def delete_topic(
        self, topic: str, *, controller_epoch: int, timeout_ms: int | None = None
    ) -> TopicAssignment:
        """See ``Coordinator.delete_topic``."""
        return self._topics.delete(topic, controller_epoch, timeout_ms)

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
        return self._topics.add_partitions(topic, states, controller_epoch, timeout_ms)

    def list_topics(self, *, timeout_ms: int | None = None) -> list[str]:
        """See ``Coordinator.list_topics``."""
        return self._topics.names(timeout_ms)

    def get_topic(self, topic: str, *, timeout_ms: int | None = None) -> TopicAssignment | None:
        """See ``Coordinator.get_topic``."""
        return self._topics.get(topic, timeout_ms)

    def get_partition_state(
        self, topic: str, partition: int, *, timeout_ms: int | None = None
    ) -> PartitionState | None:
        """See ``Coordinator.get_partition_state``."""
        return self._topics.partition_state(topic, partition, timeout_ms)

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
        return self._topics.compare_and_set(
            topic, partition, expected_partition_epoch, new_state, controller_epoch, timeout_ms
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
        """See ``Coordinator.alter_topic_configs`` (the configs live in ``topics/<t>``)."""
        stored = topic_configs(configs)
        return self._configs.alter_topic_configs(topic, stored, controller_epoch, timeout_ms)

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
        self._configs.alter_broker_configs(broker_id, stored, controller_epoch, timeout_ms)

    def broker_configs(self, *, timeout_ms: int | None = None) -> dict[int, TopicConfigs]:
        """See ``Coordinator.broker_configs``."""
        return self._configs.broker_configs(timeout_ms)

    # ---- the change feed ----

    def changes_since(
        self,
        seq: int,
        *,
        max_changes: int = MAX_CHANGES_PER_BATCH,
        timeout_ms: int | None = None,
    ) -> ChangeBatch:
        """See ``Coordinator.changes_since`` (a range read of ``changes/``)."""
        return self._feed.changes_since(seq, timeout_ms, max_changes)

    def snapshot(self, *, timeout_ms: int | None = None) -> MetadataSnapshot:
        """See ``Coordinator.snapshot`` (one read at one revision)."""
        topics_p = self._topics.prefix
        configs_p = self._configs.broker_configs_prefix
        last, _, got = self._store.seq_read(
            [
                *self._controller.ctl_ops(),
                op_range(topics_p, prefix=True),
                op_range(configs_p, prefix=True),
            ],
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
            found = self._topics.assignment(name, [metas[name]], parts)
            if found is not None:
                topics[name] = found[0]
                for p, state in sorted(found[1].items()):
                    partitions[(name, p)] = state
        return MetadataSnapshot(
            seq=last + 1,
            brokers=decode_brokers(ids),
            topics=topics,
            partitions=dict(sorted(partitions.items())),
            controller=self._controller.active(ctl_kvs, ids)[0],
            controller_epoch=last_int(epoch_kvs),
            broker_configs=decode_broker_configs(configs_p, config_kvs),
        )

    def subscribe(
        self, callback: Callable[[ChangeBatch], None], *, from_seq: int | None = None
    ) -> Subscription:
        """See ``Coordinator.subscribe`` (served by polling; module docstring)."""
        return self._feed.subscribe(callback, from_seq)

    def trim_history(self, before_seq: int, *, timeout_ms: int | None = None) -> int:
        """See ``Coordinator.trim_history``."""
        return self._feed.trim(before_seq, timeout_ms)

    # ---- admin queue ----

    def submit_admin_request(
        self, target: int, payload: AdminPayload, *, timeout_ms: int | None = None
    ) -> AdminRequest:
        """See ``Coordinator.submit_admin_request`` (request id = the submission's seq)."""
        validate_admin_request(target, payload)
        return self._admin.submit(target, payload, timeout_ms)

    def pending_admin_requests(
        self, target: int, *, timeout_ms: int | None = None
    ) -> list[AdminRequest]:
        """See ``Coordinator.pending_admin_requests``."""
        return self._admin.pending(target, timeout_ms)

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
        """See ``Coordinator.complete_admin_request``: with ``controller_epoch``, the controller
        keys are read with the index and compared in the removal's txn, as in other controller
        writes."""
        return self._admin.complete(
            request_id, outcome, message, result, controller_epoch, timeout_ms
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
        """See ``Coordinator.allocate_producer_ids``: the ``producer_ids`` key is put at the
        mod revision read, guarded by the controller fence (no feed record)."""
        return self._producer_ids.allocate(
            broker_id, broker_epoch, count, controller_epoch, timeout_ms
        )

    def producer_id_block(
        self, broker_id: int, *, timeout_ms: int | None = None
    ) -> ProducerIdBlock | None:
        """See ``Coordinator.producer_id_block``."""
        return self._producer_ids.block(broker_id, timeout_ms)
