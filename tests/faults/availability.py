"""How available the fault suite's cluster stays: a librdkafka (confluent-kafka) idempotent
producer at a fixed rate with acks=all that notes when each record was acknowledged, a
confluent-kafka consumer group (so ``__consumer_offsets`` exists at its default size, as it does
for real users), and the report of each fault: the longest stretch without any acknowledged
write, and how long the cluster took to get every partition back to min ISR and to a full ISR.

The figures are reported (printed at the end of the session, "fault availability"), not
asserted against a time: this suite runs on shared, noisy machines. ``make availability`` runs
the faults that report them three times on each coordinator; issue 23's bound (no stretch above
5 s without an acknowledged write after a single fault) is read from that report."""

from __future__ import annotations

import itertools
import threading
import time
from typing import Any

import attrs
from confluent_kafka import Consumer as CkConsumer
from confluent_kafka import KafkaError
from confluent_kafka import Producer as CkProducer

from replog.client import Admin
from tests.faults.workload import PARTITIONS, TOPIC

__all__ = [
    "AVAILABILITY_PROPERTY",
    "FaultReport",
    "GroupConsumer",
    "IsrWatcher",
    "RateProducer",
    "longest_gap_s",
]


@attrs.frozen
class FaultReport:
    """One fault's figures, in seconds (None: the cluster never got there)."""

    test: str
    fault: str
    #: the longest stretch without any acknowledgement, from the fault until the cluster was
    #: whole again and acknowledging
    longest_gap_s: float
    #: the longest stretch any one partition spent without a leader or below min ISR (None:
    #: not watched)
    below_min_isr_s: float | None = None
    #: from the restart of the faulted broker until every partition had a full ISR
    restart_to_full_isr_s: float | None = None

    def line(self) -> str:
        parts = [f"longest stretch without an acknowledged write {self.longest_gap_s:.1f} s"]
        if self.below_min_isr_s is not None:
            parts.append(f"longest below min ISR {self.below_min_isr_s:.1f} s")
        if self.restart_to_full_isr_s is not None:
            parts.append(f"full ISR {self.restart_to_full_isr_s:.1f} s after the restart")
        return f"{self.test} / {self.fault}: " + "; ".join(parts)


#: the ``record_property`` name of a ``FaultReport.line``, printed by ``tests/faults/conftest.py``
#: at the end of the session
AVAILABILITY_PROPERTY = "fault_availability"


def longest_gap_s(ack_times: list[float], start: float, end: float) -> float:
    """The longest stretch in [start, end] without a time of ``ack_times`` in it."""
    edges = [start, *(t for t in ack_times if start <= t <= end), end]
    return max(b - a for a, b in itertools.pairwise(edges))


@attrs.define
class RateProducer:
    """Sends numbered records round-robin over the test topic's partitions at ``rate`` records
    per second from a thread, with librdkafka's idempotent producer (acks=all); each delivery
    report is noted with the monotonic time it arrived. ``acked`` and ``failed`` have the
    shape ``workload.check_acked_records_consumed`` reads."""

    bootstrap: str
    rate: int = 300
    acked: list[tuple[int, int, bytes]] = attrs.Factory(list)  # (partition, offset, value)
    ack_times: list[float] = attrs.Factory(list)
    failed: int = 0
    sent: int = 0
    _stop: threading.Event = attrs.Factory(threading.Event)
    _thread: threading.Thread | None = None
    _error: BaseException | None = None

    def start(self) -> RateProducer:
        self._thread = threading.Thread(target=self._run, name="rate-producer", daemon=True)
        self._thread.start()
        return self

    def _delivered(self, err: Any, msg: Any) -> None:
        if err is not None:
            self.failed += 1
            return
        self.acked.append((msg.partition(), msg.offset(), msg.value()))
        self.ack_times.append(time.monotonic())

    def _run(self) -> None:
        try:
            producer = CkProducer(
                {
                    "bootstrap.servers": self.bootstrap,
                    "enable.idempotence": True,
                    "acks": "all",
                    "linger.ms": 5,
                    "message.timeout.ms": 60_000,
                }
            )
            interval = 1.0 / self.rate
            next_send = time.monotonic()
            while not self._stop.is_set():
                now = time.monotonic()
                while next_send <= now:
                    value = b"r%08d" % self.sent
                    producer.produce(
                        TOPIC, value, partition=self.sent % PARTITIONS, on_delivery=self._delivered
                    )
                    self.sent += 1
                    next_send += interval
                producer.poll(min(interval, 0.05))
            if producer.flush(60) != 0:
                raise AssertionError("records still undelivered 60 s after the producer stopped")
        except BaseException as exc:
            self._error = exc

    def acked_count(self) -> int:
        return len(self.acked)

    def longest_gap_s(self, start: float, end: float) -> float:
        """The longest stretch in [start, end] with no acknowledgement arriving."""
        return longest_gap_s(self.ack_times, start, end)

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(120)
            if self._thread.is_alive():
                raise AssertionError("the producer thread did not stop")
        if self._error is not None:
            raise AssertionError(f"the producer failed: {self._error!r}") from self._error


@attrs.define
class IsrWatcher:
    """Samples the leader and ISR of every partition of ``topics`` every ``interval_s`` from a
    thread, so a stretch below min ISR is seen while it lasts, not only after it."""

    bootstrap: str
    topics: tuple[str, ...]
    replicas: int = 3
    min_isr: int = 2
    interval_s: float = 0.1
    #: (monotonic time, (topic, partition) -> (leader, ISR))
    samples: list[tuple[float, dict[tuple[str, int], tuple[int, tuple[int, ...]]]]] = attrs.Factory(
        list
    )
    _stop: threading.Event = attrs.Factory(threading.Event)
    _thread: threading.Thread | None = None

    def start(self) -> IsrWatcher:
        self._thread = threading.Thread(target=self._run, name="isr-watcher", daemon=True)
        self._thread.start()
        return self

    def _run(self) -> None:
        with Admin(self.bootstrap, request_timeout_ms=2_000) as admin:
            while not self._stop.wait(self.interval_s):
                try:
                    topics = admin.describe_topics(list(self.topics))
                except Exception:  # a broker down, a leader moving: sample again
                    continue
                self.samples.append(
                    (
                        time.monotonic(),
                        {
                            (name, p.partition): (p.leader, tuple(p.isr))
                            for name, topic in topics.items()
                            for p in topic.partitions
                        },
                    )
                )

    def latest(self) -> dict[tuple[str, int], tuple[int, tuple[int, ...]]]:
        return self.samples[-1][1] if self.samples else {}

    def whole(self) -> bool:
        """The latest sample shows every partition of every topic led, with a full ISR."""
        state = self.latest()
        return bool(state) and all(
            lead >= 0 and len(isr) == self.replicas for lead, isr in state.values()
        )

    def longest_below_min_isr_s(self, start: float, end: float) -> float:
        """The longest stretch in [start, end] that one partition spent leaderless or below
        min ISR (from the first sample that showed it so until the first that did not)."""
        since: dict[tuple[str, int], float] = {}
        longest = 0.0
        for t, state in self.samples:
            if not start <= t <= end:
                continue
            for tp, (lead, isr) in state.items():
                if lead < 0 or len(isr) < self.min_isr:
                    since.setdefault(tp, t)
                elif tp in since:
                    longest = max(longest, t - since.pop(tp))
        return max([longest, *(end - t for t in since.values())])

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(30)


@attrs.define
class GroupConsumer:
    """A confluent-kafka consumer in group ``group`` subscribed to the test topic, polling from
    a thread and committing offsets (auto-commit), as an application's consumer would."""

    bootstrap: str
    group: str = "availability"
    consumed: int = 0
    errors: list[str] = attrs.Factory(list)
    _stop: threading.Event = attrs.Factory(threading.Event)
    _thread: threading.Thread | None = None

    def start(self) -> GroupConsumer:
        self._thread = threading.Thread(target=self._run, name="group-consumer", daemon=True)
        self._thread.start()
        return self

    def _run(self) -> None:
        consumer = CkConsumer(
            {
                "bootstrap.servers": self.bootstrap,
                "group.id": self.group,
                "auto.offset.reset": "earliest",
                "enable.auto.commit": True,
                "auto.commit.interval.ms": 500,
                "session.timeout.ms": 10_000,
            }
        )
        try:
            consumer.subscribe([TOPIC])
            while not self._stop.is_set():
                msg = consumer.poll(0.2)
                if msg is None:
                    continue
                error = msg.error()
                if error is None:
                    self.consumed += 1
                elif error.code() != KafkaError._PARTITION_EOF:
                    self.errors.append(str(error))
        finally:
            consumer.close()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(60)
