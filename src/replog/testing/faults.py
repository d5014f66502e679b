"""``ClusterFaults``: fault injection from Python for an in-process ``Cluster``.

Every fault is set inside the brokers (``replog.broker.shell.faults``) or under them (the
``FailingFileSystem`` of a test-mode cluster), never in a client, so kafka-python,
confluent-kafka, aiokafka, kafkajs and replog's own clients all meet the same fault::

    faults = ClusterFaults(cluster)          # or the pytest fixture ``replog_faults``
    faults.inject_errors("Produce", ["NOT_LEADER_OR_FOLLOWER"] * 2)   # retried by the client
    faults.add_latency(200, broker=1, api="Fetch")
    faults.cut_clients(broker=2)             # its clients' requests go unanswered
    faults.cut_brokers(1, 2)                 # replication between 1 and 2 times out
    faults.pause(3); faults.resume(3)        # as SIGSTOP / SIGCONT
    faults.kill(1); faults.restart(1)
    faults.fail_fsyncs(2); faults.fill_disk(3)   # test-mode clusters
    faults.move_leader("orders", 0, broker=2)
    faults.leader("orders", 0)               # -> 2
    requests = faults.track_requests()       # TrackedRequest(broker_id, client_id, api, ...)
    faults.heal()                            # all of it undone, dead brokers restarted

``broker=None`` means every broker. ``inject_errors`` takes the API by Kafka's name
("Produce", "Fetch", "Metadata", ...) or key, and the errors by ``ErrorCode``, name or number;
with ``count`` the errors repeat until that many requests got one; ``ErrorCode.NONE`` lets a
request through. Injected errors and latency never apply to the brokers' own requests to each
other (follower fetches): cut those with ``cut_brokers`` / ``isolate``.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable, Sequence

from replog.broker.shell.broker import Broker, BrokerState
from replog.broker.shell.cluster import Cluster
from replog.broker.shell.faults import BrokerFaults, ErrorRule, TrackedRequest
from replog.client.admin import Admin, PartitionDescription
from replog.clock import monotonic_s, sleep_s
from replog.errors import ErrorCode
from replog.log.failing_fs import FailingFileSystem
from replog.protocol import APIS

__all__ = ["ClusterFaults", "TrackedRequest"]

_API_KEYS = {spec.info.name: key for key, spec in APIS.items()}
_POLL_S = 0.01


class ClusterFaults:
    """Faults of one ``Cluster`` (module docstring). Methods return once the fault is set."""

    def __init__(self, cluster: Cluster) -> None:
        self.cluster = cluster

    # ------------------------------------------------------------------ requests

    def inject_errors(
        self,
        api: str | int,
        errors: Sequence[ErrorCode | str | int],
        *,
        broker: int | None = None,
        count: int | None = None,
        client_id: str | None = None,
    ) -> None:
        """Answer the next requests of ``api`` (from ``client_id``, or any client) with
        ``errors``, one per request, at ``broker`` or whichever broker is asked."""
        codes = [_error_code(e) for e in errors]
        if not codes:
            raise ValueError("inject_errors needs at least one error")
        if count is not None:
            if count < 1:
                raise ValueError(f"count must be at least 1, got {count}")
            codes = list(itertools.islice(itertools.cycle(codes), count))
        rule = ErrorRule(_api_key(api), codes, client_id)
        self._on_brokers(broker, lambda f: f.inject_errors(rule))

    def add_latency(
        self, ms: float, *, broker: int | None = None, api: str | int | None = None
    ) -> None:
        """Hold each request (of ``api``, or every one) ``ms`` milliseconds before handling."""
        if ms < 0:
            raise ValueError(f"latency must be >= 0 ms, got {ms}")
        key = None if api is None else _api_key(api)
        self._on_brokers(broker, lambda f: f.add_latency(ms / 1000, key))

    def cut_clients(self, broker: int | None = None, *, client_id: str | None = None) -> None:
        """Leave the requests of every client (or ``client_id``) unanswered, as a network
        partition between them and ``broker`` would; the clients time out."""
        self._on_brokers(broker, lambda f: f.cut_clients(client_id))

    def track_requests(self, broker: int | None = None) -> list[TrackedRequest]:
        """Record every request from now on, in arrival order; the list fills as they come
        (read it after the client's call returned). Inter-broker requests are included
        (their ``client_id`` starts with ``replica-``)."""
        tracked: list[TrackedRequest] = []
        self._on_brokers(broker, lambda f: f.track(tracked))
        return tracked

    # ------------------------------------------------------------------ brokers

    def cut_brokers(self, a: int, b: int) -> None:
        """Cut the link between brokers ``a`` and ``b`` both ways: their requests to each
        other (follower fetches) time out; clients and the controller still reach both."""
        self._check(a)
        self._check(b)
        if a == b:
            raise ValueError("cut_brokers needs two different brokers")
        self._on_brokers(a, lambda f: f.cut_broker(b))
        self._on_brokers(b, lambda f: f.cut_broker(a))

    def isolate(self, broker: int) -> None:
        """Cut ``broker`` from every other broker (``cut_brokers`` with each)."""
        for other in self.cluster.configs:
            if other != broker:
                self.cut_brokers(broker, other)

    def pause(self, broker: int) -> None:
        """Freeze ``broker`` as a stopped process: requests wait, no heartbeats (its session
        expires after ``session_timeout_ms`` and leadership moves), no replication."""
        self._on_brokers(broker, BrokerFaults.pause)

    def resume(self, broker: int) -> None:
        """Undo ``pause``."""
        self._on_brokers(broker, BrokerFaults.resume)

    def kill(self, broker: int) -> None:
        """Crash ``broker``: sockets closed, nothing flushed, its session left to expire."""
        self._check(broker)
        self.cluster.kill(broker)

    def restart(self, broker: int) -> None:
        """Start ``broker`` again (stopping it first if it runs) on its log dirs and port."""
        self._check(broker)
        self.cluster.restart(broker)

    # ------------------------------------------------------------------ disks

    def fail_fsyncs(self, broker: int, count: int | None = None) -> None:
        """The next ``count`` fsyncs of ``broker`` (every one when None) fail with EIO: its
        log dir goes offline and its partitions move (``heal`` restarts it)."""
        self._filesystem(broker).fail_fsync(count)

    def fill_disk(self, broker: int) -> None:
        """``broker``'s disk is full: every write fails with ENOSPC until ``heal``."""
        self._filesystem(broker).fill()

    # ------------------------------------------------------------------ leadership

    def leader(self, topic: str, partition: int = 0) -> int:
        """The broker the metadata names leader of ``topic``-``partition`` (-1: none)."""
        with Admin(self.cluster.bootstrap) as admin:
            return _partition(admin, topic, partition).leader

    def move_leader(self, topic: str, partition: int, broker: int, timeout_s: float = 10.0) -> None:
        """Make ``broker`` (a replica in the ISR) the leader of ``topic``-``partition``: it
        becomes the preferred replica and a preferred election runs; returns once the
        metadata names it."""
        self._check(broker)
        with Admin(self.cluster.bootstrap) as admin:
            state = _partition(admin, topic, partition)
            if state.leader == broker:
                return
            if broker not in state.isr:
                raise ValueError(
                    f"broker {broker} is not in the ISR {list(state.isr)} of {topic}-{partition}"
                )
            order = [broker, *(r for r in state.replicas if r != broker)]
            admin.reassign_partition(topic, partition, order)
            deadline = monotonic_s() + timeout_s
            while True:
                admin.elect_preferred_leaders([(topic, partition)])
                if _partition(admin, topic, partition).leader == broker:
                    return
                if monotonic_s() > deadline:
                    raise TimeoutError(
                        f"broker {broker} did not become leader of {topic}-{partition}"
                    )
                sleep_s(_POLL_S)

    # ------------------------------------------------------------------ undo

    def heal(self, timeout_s: float = 30.0) -> None:
        """Undo every fault: rules cleared, paused brokers resumed, links and disks healed,
        and every broker that is down (killed, or stopped by a failed disk) or has an offline
        log dir restarted; returns once every broker is online."""
        cluster = self.cluster
        cluster.call(cluster.heal_brokers)
        for broker_id in sorted(cluster.configs):
            broker = cluster.brokers.get(broker_id)
            if broker is not None and _offline_dirs(broker):
                cluster.kill(broker_id)  # a broken disk would only slow a clean stop
            if broker is None or broker.state is not BrokerState.ONLINE:
                cluster.restart(broker_id)
        deadline = monotonic_s() + timeout_s
        while not all(b.state is BrokerState.ONLINE for b in cluster.brokers.values()):
            if monotonic_s() > deadline:
                raise TimeoutError("brokers did not come back online after heal")
            sleep_s(_POLL_S)

    # ------------------------------------------------------------------ helpers

    def _check(self, broker: int) -> None:
        if broker not in self.cluster.configs:
            raise ValueError(f"no broker {broker}; the cluster has {sorted(self.cluster.configs)}")

    def _on_brokers(self, broker: int | None, change: Callable[[BrokerFaults], None]) -> None:
        """Apply ``change(faults)`` on the loop thread to ``broker``'s faults (None: all)."""
        ids: Iterable[int] = self.cluster.configs if broker is None else [broker]
        if broker is not None:
            self._check(broker)
        targets = [self.cluster.broker_faults[i] for i in ids]

        def apply() -> None:
            for faults in targets:
                change(faults)

        self.cluster.call(apply)

    def _filesystem(self, broker: int) -> FailingFileSystem:
        self._check(broker)
        fs = self.cluster.filesystems[broker]
        if not isinstance(fs, FailingFileSystem):
            raise RuntimeError(
                "disk faults need a test-mode cluster (Cluster.local(test_mode=True))"
            )
        return fs


def _partition(admin: Admin, topic: str, partition: int) -> PartitionDescription:
    """``topic``-``partition`` as the metadata has it; ValueError if there is no such one."""
    described = admin.describe_topics([topic])[topic].partitions
    state = next((p for p in described if p.partition == partition), None)
    if state is None:
        raise ValueError(f"{topic} has no partition {partition}")
    return state


def _offline_dirs(broker: Broker) -> bool:
    manager = broker.log_manager
    return manager is not None and any(d.offline_reason is not None for d in manager.dirs)


def _api_key(api: str | int) -> int:
    if isinstance(api, int):
        if api not in APIS:
            raise ValueError(f"replog serves no API with key {api}")
        return api
    key = _API_KEYS.get(api)
    if key is None:
        raise ValueError(f"unknown API {api!r}; replog serves {sorted(_API_KEYS)}")
    return key


def _error_code(error: ErrorCode | str | int) -> ErrorCode:
    try:
        if isinstance(error, str):
            return ErrorCode[error.upper()]
        return ErrorCode(error)
    except (KeyError, ValueError):
        raise ValueError(f"unknown Kafka error {error!r}") from None
