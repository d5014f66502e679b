"""Testing a Kafka application with replog's pytest plugin (docs/testing.md walks through it).

Run it as any test file, with replog and the Kafka clients installed:

    pytest examples/test_kafka_app.py

The application under test is ``uppercase``: it consumes a topic with confluent-kafka, turns
each value to upper case and produces it to another topic, committing its input offsets after
the output is acknowledged. The tests drive it with kafka-python, confluent-kafka and aiokafka
against a real (in-process) replog cluster, inject faults into it, and fail a leader over.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import pytest
from confluent_kafka import Consumer, KafkaError, Producer
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer
from kafka.admin import NewTopic

from replog import Cluster
from replog.testing.faults import ClusterFaults

# -- the application -----------------------------------------------------------------------------


def uppercase(bootstrap: str, source: str, sink: str, group: str, count: int) -> None:
    """Copy ``count`` records from ``source`` to ``sink`` in upper case (at least once)."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
    consumer.subscribe([source])
    try:
        done = 0
        while done < count:
            message = consumer.poll(10)
            if message is None:
                raise TimeoutError(f"only {done} of {count} records came")
            if message.error() is not None:
                continue
            producer.produce(sink, message.value().upper(), key=message.key())
            if producer.flush(30) != 0:
                raise RuntimeError("the output was not acknowledged")
            consumer.commit(message, asynchronous=False)
            done += 1
    finally:
        consumer.close()


def read_values(bootstrap: str, topic: str, count: int) -> list[bytes]:
    consumer = KafkaConsumer(
        topic, bootstrap_servers=bootstrap, auto_offset_reset="earliest", consumer_timeout_ms=20_000
    )
    try:
        return [record.value for _, record in zip(range(count), consumer, strict=False)]
    finally:
        consumer.close()


# -- the tests: one shared cluster, a fresh topic per test ---------------------------------------


def test_the_app_with_kafka_python(kafka_bootstrap: str, replog_topic: str) -> None:
    producer = KafkaProducer(bootstrap_servers=kafka_bootstrap, acks="all")
    for word in (b"hello", b"world"):
        producer.send(replog_topic, word).get(timeout=30)
    producer.close()
    uppercase(kafka_bootstrap, replog_topic, f"{replog_topic}-out", "upper", count=2)
    assert read_values(kafka_bootstrap, f"{replog_topic}-out", 2) == [b"HELLO", b"WORLD"]


def test_the_app_with_aiokafka(kafka_bootstrap: str, replog_topic: str) -> None:
    from aiokafka import AIOKafkaProducer

    async def produce() -> None:
        async with AIOKafkaProducer(bootstrap_servers=kafka_bootstrap, acks="all") as producer:
            await producer.send_and_wait(replog_topic, b"async")

    asyncio.run(produce())
    uppercase(kafka_bootstrap, replog_topic, f"{replog_topic}-out", "upper-aio", count=1)
    assert read_values(kafka_bootstrap, f"{replog_topic}-out", 1) == [b"ASYNC"]


def test_the_app_survives_injected_errors(
    kafka_bootstrap: str, replog_topic: str, replog_faults: ClusterFaults
) -> None:
    KafkaProducer(bootstrap_servers=kafka_bootstrap).send(replog_topic, b"retry").get(timeout=30)
    requests = replog_faults.track_requests()
    replog_faults.inject_errors("Produce", ["NOT_LEADER_OR_FOLLOWER", "REQUEST_TIMED_OUT"])
    uppercase(kafka_bootstrap, replog_topic, f"{replog_topic}-out", "upper-err", count=1)
    assert read_values(kafka_bootstrap, f"{replog_topic}-out", 1) == [b"RETRY"]
    assert [r.api for r in requests].count("Produce") == 3  # two errors, then the answer


def test_a_cut_off_broker_times_the_producer_out(
    kafka_bootstrap: str, replog_topic: str, replog_faults: ClusterFaults
) -> None:
    replog_faults.cut_clients()
    producer = Producer({"bootstrap.servers": kafka_bootstrap, "message.timeout.ms": 1000})
    errors: list[KafkaError] = []
    producer.produce(replog_topic, b"lost", on_delivery=lambda err, msg: errors.append(err))
    producer.flush(10)
    assert errors[0].code() == KafkaError._MSG_TIMED_OUT


def test_the_app_across_a_leader_failover(
    replog_cluster_factory: Callable[..., Cluster],
) -> None:
    cluster = replog_cluster_factory(3)  # a cluster of its own: this test kills a broker
    faults = ClusterFaults(cluster)
    bootstrap = cluster.bootstrap
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    admin.create_topics([NewTopic("orders", 1, 3), NewTopic("orders-out", 1, 3)])
    admin.close()
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all")
    producer.send("orders", b"before").get(timeout=30)
    faults.kill(faults.leader("orders"))  # the acknowledged record must survive
    producer.send("orders", b"after").get(timeout=30)
    producer.close()
    uppercase(bootstrap, "orders", "orders-out", "upper-failover", count=2)
    assert read_values(bootstrap, "orders-out", 2) == [b"BEFORE", b"AFTER"]


@pytest.mark.replog_topic(partitions=3)
def test_one_record_per_partition(kafka_bootstrap: str, replog_topic: str) -> None:
    producer = Producer({"bootstrap.servers": kafka_bootstrap})
    for partition in range(3):
        producer.produce(replog_topic, b"p%d" % partition, partition=partition)
    assert producer.flush(30) == 0
    assert sorted(read_values(kafka_bootstrap, replog_topic, 3)) == [b"p0", b"p1", b"p2"]
