"""The fault suite's workload and its check: a producer (acks=all) that runs in the background
and remembers every acknowledged record, and a consumer that reads every partition from the
start and must find each acknowledged record at its acknowledged offset, in offset order."""

from __future__ import annotations

import asyncio
import itertools
import threading
import time
from collections.abc import Callable, Iterable
from typing import Any, Self

import attrs
from kafka import KafkaConsumer, TopicPartition

from replog.client import Admin, Consumer, Producer
from replog.client.connection import ClusterClient
from tests.faults.harness import ProcessCluster
from tests.waiting import eventually

__all__ = [
    "FAULT_SETTINGS",
    "PARTITIONS",
    "TOPIC",
    "BackgroundProducer",
    "ProducerThread",
    "check_acked_records_consumed",
    "controller_id",
    "create_topic",
    "describe",
    "leader_of",
    "read_with_kafka_python",
    "wait_until",
]

TOPIC = "faults"
PARTITIONS = 2
SESSION_TIMEOUT_MS = 2_000

#: broker settings: quick session expiry and ISR shrink, so a case fits in seconds
FAULT_SETTINGS: dict[str, Any] = {
    "session_timeout_ms": SESSION_TIMEOUT_MS,
    "heartbeat_interval_ms": 200,
    "replica_lag_ms_max": 2_000,
    "replica_fetch_wait_ms_max": 100,
    "default_replication_factor": 3,
    "default_min_insync_replicas": 2,
    "controlled_shutdown_timeout_ms": 5_000,
    "request_timeout_ms": 5_000,
    "durability": "fsync",
}


def create_topic(cluster: ProcessCluster) -> None:
    """The test topic: ``PARTITIONS`` partitions, RF 3, min ISR 2. Asked for as soon as the
    brokers serve: a broker serves only once the controller counts it."""
    with Admin(cluster.bootstrap) as admin:
        admin.create_topics(TOPIC, PARTITIONS, 3, {"min.insync.replicas": "2"})


def describe(cluster: ProcessCluster) -> dict[int, Any]:
    """Partition index -> ``PartitionDescription`` of the test topic."""
    with Admin(cluster.bootstrap, request_timeout_ms=5_000) as admin:
        topic = admin.describe_topics([TOPIC])[TOPIC]
    return {p.partition: p for p in topic.partitions}


def leader_of(cluster: ProcessCluster, partition: int = 0) -> int:
    """The current leader of ``partition`` (-1: none)."""
    leader: int = describe(cluster)[partition].leader
    return leader


def controller_id(cluster: ProcessCluster) -> int:
    """The controller as the metadata reports it."""

    async def ask() -> int:
        client = ClusterClient.from_bootstrap(cluster.bootstrap, request_timeout_ms=5_000)
        try:
            metadata = await client.refresh_metadata([TOPIC])
            return metadata.controller_id
        finally:
            await client.close()

    return asyncio.run(ask())


def wait_until(
    what: str, condition: Callable[[], bool], cluster: ProcessCluster, timeout_s: float = 30.0
) -> None:
    """Poll ``condition`` (exceptions count as not yet) until true (``tests.waiting``)."""
    eventually(condition, what=what, timeout_s=timeout_s, retry_on=(Exception,))


@attrs.define
class ProducerThread:
    """A producer that runs in a thread of its own (``_produce``, until ``stop``) and records
    each acknowledgement with the monotonic time it arrived, for the check of acknowledged
    records and the availability report."""

    bootstrap: str
    acked: list[tuple[int, int, bytes]] = attrs.Factory(list)  # (partition, offset, value)
    #: when each acknowledgement arrived (monotonic), for the availability report
    ack_times: list[float] = attrs.Factory(list)
    failed: int = 0
    sent: int = 0
    _stop: threading.Event = attrs.Factory(threading.Event)
    _thread: threading.Thread | None = None
    _error: BaseException | None = None

    def start(self) -> Self:
        self._thread = threading.Thread(target=self._run, name=type(self).__name__, daemon=True)
        self._thread.start()
        return self

    def _run(self) -> None:
        try:
            self._produce()
        except BaseException as exc:
            self._error = exc

    def _produce(self) -> None:
        raise NotImplementedError

    def _acked(self, partition: int, offset: int, value: bytes) -> None:
        self.acked.append((partition, offset, value))
        self.ack_times.append(time.monotonic())

    def acked_count(self) -> int:
        return len(self.acked)

    def wait_for_acks(self, more: int, cluster: ProcessCluster, timeout_s: float = 30.0) -> None:
        """Wait until ``more`` further records are acknowledged (progress after a fault)."""
        target = len(self.acked) + more
        wait_until(f"{more} more acks", lambda: len(self.acked) >= target, cluster, timeout_s)

    def longest_gap_s(self, start: float, end: float) -> float:
        """The longest stretch in [start, end] with no acknowledgement arriving."""
        edges = [start, *(t for t in self.ack_times if start <= t <= end), end]
        return max(b - a for a, b in itertools.pairwise(edges))

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(120)
            if self._thread.is_alive():
                raise AssertionError("the producer thread did not stop")
        if self._error is not None:
            raise AssertionError(f"the producer failed: {self._error!r}") from self._error


@attrs.define
class BackgroundProducer(ProducerThread):
    """Sends numbered records round-robin over the partitions, at most ``window``
    unacknowledged at a time. The producer is idempotent (replog's default with acks=all)."""

    window: int = 20

    def _produce(self) -> None:
        with Producer(
            self.bootstrap,
            acks="all",
            linger_ms=2,
            retries=5,
            retry_backoff_ms=200,
            request_timeout_ms=3_000,
        ) as producer:
            pending: list[tuple[bytes, Any]] = []
            while not self._stop.is_set():
                value = b"r%08d" % self.sent
                pending.append(
                    (value, producer.send(TOPIC, value, partition=self.sent % PARTITIONS))
                )
                self.sent += 1
                if len(pending) >= self.window:
                    self._settle(pending)
                    pending = []
            self._settle(pending)

    def _settle(self, pending: list[tuple[bytes, Any]]) -> None:
        for value, future in pending:
            try:
                meta = future.result(timeout=30)
            except Exception:
                self.failed += 1
                continue
            self._acked(meta.partition, meta.offset, value)


def consume_all(
    cluster: ProcessCluster, end_offsets: dict[int, int], timeout_s: float = 30.0
) -> dict[int, list[tuple[int, bytes | None]]]:
    """Every record of every partition from the start until ``end_offsets`` (exclusive)."""
    got: dict[int, list[tuple[int, bytes | None]]] = {p: [] for p in range(PARTITIONS)}
    with Consumer(cluster.bootstrap, auto_reset="earliest", fetch_max_wait_ms=200) as consumer:
        consumer.assign([(TOPIC, p) for p in range(PARTITIONS)])
        consumer.seek_to_beginning()
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            done = all(
                (got[p][-1][0] + 1 if got[p] else 0) >= end for p, end in end_offsets.items()
            )
            if done:
                break
            for record in consumer.poll(500, 5_000):
                got[record.partition].append((record.offset, record.value))
    return got


def check_acked_records_consumed(cluster: ProcessCluster, producer: ProducerThread) -> None:
    """Every acknowledged record is consumed, in offset order per partition, at the offset its
    acknowledgement named, with its value; and no value is in the log twice (the producer is
    idempotent, replog's default, so a retry after a lost answer is not appended again)."""
    assert producer.acked, "nothing was acknowledged at all"
    end_offsets = {p: 0 for p in range(PARTITIONS)}
    for partition, offset, _ in producer.acked:
        end_offsets[partition] = max(end_offsets[partition], offset + 1)
    got = consume_all(cluster, end_offsets)
    problems: list[str] = []
    for partition, records in got.items():
        offsets = [o for o, _ in records]
        if offsets != sorted(set(offsets)):
            problems.append(f"partition {partition}: offsets out of order or repeated")
    by_offset = {(p, o): v for p, records in got.items() for o, v in records}
    missing = [(p, o, v) for p, o, v in producer.acked if (p, o) not in by_offset]
    wrong = [
        (p, o, v, by_offset[(p, o)])
        for p, o, v in producer.acked
        if (p, o) in by_offset and by_offset[(p, o)] != v
    ]
    if missing:
        problems.append(f"{len(missing)} acknowledged records not consumed, first {missing[:5]}")
    if wrong:
        problems.append(f"{len(wrong)} offsets hold another value, first {wrong[:5]}")
    seen: dict[bytes | None, tuple[int, int]] = {}
    twice = []
    for p, records in got.items():
        for o, v in records:
            if v in seen:
                twice.append((v, seen[v], (p, o)))
            seen[v] = (p, o)
    if twice:
        problems.append(f"{len(twice)} values written twice, first {twice[:5]}")
    assert not problems, (
        f"{len(producer.acked)} acked, {producer.failed} failed, consumed "
        f"{ {p: len(r) for p, r in got.items()} }, ends {end_offsets}: " + "; ".join(problems)
    )


def read_with_kafka_python(
    bootstrap: str, topic: str, partitions: Iterable[int], timeout_s: float = 60.0
) -> dict[int, dict[int, bytes]]:
    """partition -> offset -> value of every record of ``topic``'s ``partitions`` up to their
    end offsets, read from the start by kafka-python (an independent client's view)."""
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
    try:
        tps = [TopicPartition(topic, p) for p in partitions]
        consumer.assign(tps)
        consumer.seek_to_beginning(*tps)
        ends = consumer.end_offsets(tps)
        got: dict[int, dict[int, bytes]] = {tp.partition: {} for tp in tps}
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline and any(consumer.position(tp) < ends[tp] for tp in tps):
            for tp, records in consumer.poll(timeout_ms=1_000).items():
                got[tp.partition].update((r.offset, r.value) for r in records)
        return got
    finally:
        consumer.close()
