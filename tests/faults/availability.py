"""How available the fault suite's cluster stays: a librdkafka (confluent-kafka) idempotent
producer at a fixed rate with acks=all that notes when each record was acknowledged, a
confluent-kafka consumer group (so ``__consumer_offsets`` exists at its default size, as it does
for real users), and the report of each fault: the longest stretch without any acknowledged
write, and how long the cluster took to get every partition back to min ISR and to a full ISR.

The figures are reported (printed at the end of the session, "fault availability"), not
asserted against a time: this suite runs on shared, noisy machines. ``make availability`` runs
the faults that report them three times on each coordinator; the bound to hold (no stretch
above 5 s without an acknowledged write after a single fault) is read from that report."""

from __future__ import annotations

import threading
import time
from typing import Any

import attrs
from confluent_kafka import Consumer as CkConsumer
from confluent_kafka import KafkaError
from confluent_kafka import Producer as CkProducer

from replog.client import Admin
from tests.faults.workload import PARTITIONS, TOPIC, ProducerThread

__all__ = [
    "AVAILABILITY_PROPERTY",
    "FaultReport",
    "GroupConsumer",
    "IsrWatcher",
    "RateProducer",
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


@attrs.define
class RateProducer(ProducerThread):
    """Sends numbered records round-robin over the test topic's partitions at ``rate`` records
    per second, with librdkafka's idempotent producer (acks=all)."""

    rate: int = 300

    def _delivered(self, err: Any, msg: Any) -> None:
        if err is not None:
            self.failed += 1
        else:
            self._acked(msg.partition(), msg.offset(), msg.value())

    def _produce(self) -> None:
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
