"""After a fault, how soon every partition is back to min ISR, with a librdkafka idempotent
producer at a fixed rate (acks=all) and a confluent-kafka
consumer group, so ``__consumer_offsets`` exists at its default size (50 partitions, each with
leaders that propose ISR changes alongside the test topic's).

kill -9 a follower and restart it, then kill -9 the leader and restart it. Each step waits for
the cluster to be whole again (every partition of both topics with a full ISR) and reports, per
fault, the longest stretch without an acknowledged write and the times to min ISR and to a full
ISR (``tests.faults.availability``). Every acknowledged record must then be read back, by
replog's consumer and by kafka-python, at its acknowledged offset."""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest

from tests.faults.availability import (
    AVAILABILITY_PROPERTY,
    FaultReport,
    GroupConsumer,
    IsrWatcher,
    RateProducer,
)
from tests.faults.harness import ProcessCluster
from tests.faults.workload import (
    PARTITIONS,
    TOPIC,
    check_acked_records_consumed,
    read_with_kafka_python,
    wait_until,
)

pytestmark = [pytest.mark.faults, pytest.mark.system, pytest.mark.timeout(240)]

OFFSETS_TOPIC = "__consumer_offsets"


def test_kill9_follower_then_leader_returns_to_min_isr(
    cluster: ProcessCluster, record_property: Callable[[str, object], None]
) -> None:
    consumer = GroupConsumer(cluster.bootstrap).start()
    producer = RateProducer(cluster.bootstrap, rate=300).start()
    watcher = IsrWatcher(cluster.bootstrap, (TOPIC, OFFSETS_TOPIC)).start()

    def isr_of(topic: str) -> dict[int, tuple[int, tuple[int, ...]]]:
        return {p: v for (t, p), v in watcher.latest().items() if t == topic}

    try:
        wait_until(
            f"{OFFSETS_TOPIC} at its default size with a full ISR",
            lambda: len(isr_of(OFFSETS_TOPIC)) == 50 and watcher.whole(),
            cluster,
            timeout_s=60,
        )
        wait_until("acks flowing", lambda: producer.acked_count() > 300, cluster)
        leader = isr_of(TOPIC)[0][0]
        follower = next(b for b in sorted(cluster.brokers) if b != leader)
        for fault, victim in (("kill -9 follower", follower), ("kill -9 leader", leader)):
            start = time.monotonic()
            cluster.brokers[victim].kill9()
            wait_until(
                f"broker {victim} out of the test topic's ISRs",
                lambda v=victim: all(v not in isr for _, isr in isr_of(TOPIC).values()),
                cluster,
            )
            cluster.brokers[victim].start()
            restarted = time.monotonic()
            wait_until("every partition with a full ISR", watcher.whole, cluster, timeout_s=60)
            whole = time.monotonic()
            acked = producer.acked_count()
            wait_until(
                "acks after the fault", lambda a=acked: producer.acked_count() > a + 300, cluster
            )
            end = time.monotonic()
            report = FaultReport(
                "kill9_follower_then_leader",
                fault,
                longest_gap_s=producer.longest_gap_s(start, end),
                below_min_isr_s=watcher.longest_below_min_isr_s(start, end),
                restart_to_full_isr_s=whole - restarted,
            )
            record_property(AVAILABILITY_PROPERTY, report.line())
    finally:
        watcher.stop()
        producer.stop()
        consumer.stop()
    assert consumer.consumed > 0, consumer.errors
    check_acked_records_consumed(cluster, producer)
    by_kafka_python = read_with_kafka_python(cluster.bootstrap, TOPIC, range(PARTITIONS))
    for partition, offset, value in producer.acked:
        assert by_kafka_python[partition].get(offset) == value, (partition, offset)
