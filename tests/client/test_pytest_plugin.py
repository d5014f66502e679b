"""The pytest plugin as a user meets it: a test file of their own, run by pytest in a fresh
process, with kafka-python, confluent-kafka and aiokafka against its fixtures and the
``kafka_clients`` factories (the plugin loads through its ``pytest11`` entry point, nothing
passed on the command line)."""

from __future__ import annotations

import pytest

pytest_plugins = ["pytester"]
pytestmark = [pytest.mark.system, pytest.mark.timeout(180)]

USER_TESTS = """
import asyncio
import time

import pytest
from aiokafka import AIOKafkaConsumer
from confluent_kafka import Consumer, Producer
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer


def test_kafka_python_round_trip_with_a_group(kafka_bootstrap, replog_topic):
    producer = KafkaProducer(bootstrap_servers=kafka_bootstrap, acks="all")
    producer.send(replog_topic, b"hello").get(timeout=30)
    producer.close()
    consumer = KafkaConsumer(
        replog_topic,
        bootstrap_servers=kafka_bootstrap,
        group_id="g-kp",
        auto_offset_reset="earliest",
        consumer_timeout_ms=20_000,
    )
    started = time.monotonic()
    assert next(iter(consumer)).value == b"hello"
    consumer.close()
    assert time.monotonic() - started < 2.5  # no 3 s initial rebalance delay in test mode


@pytest.mark.replog_topic(partitions=3)
def test_confluent_kafka_sees_the_marker_shape(kafka_bootstrap, replog_topic):
    producer = Producer({"bootstrap.servers": kafka_bootstrap})
    for p in range(3):
        producer.produce(replog_topic, b"v%d" % p, partition=p)
    assert producer.flush(30) == 0
    consumer = Consumer(
        {"bootstrap.servers": kafka_bootstrap, "group.id": "g-ck", "auto.offset.reset": "earliest"}
    )
    consumer.subscribe([replog_topic])
    got = set()
    deadline = time.monotonic() + 30
    while len(got) < 3 and time.monotonic() < deadline:
        message = consumer.poll(0.5)
        if message is not None and message.error() is None:
            got.add(message.value())
    consumer.close()
    assert got == {b"v0", b"v1", b"v2"}


def test_aiokafka_reads_a_fresh_topic(kafka_bootstrap, replog_topic):
    KafkaProducer(bootstrap_servers=kafka_bootstrap).send(replog_topic, b"a").get(timeout=30)

    async def read():
        consumer = AIOKafkaConsumer(
            replog_topic, bootstrap_servers=kafka_bootstrap, auto_offset_reset="earliest"
        )
        await consumer.start()
        try:
            return (await asyncio.wait_for(consumer.getone(), 30)).value
        finally:
            await consumer.stop()

    assert asyncio.run(read()) == b"a"


def test_topics_are_fresh_and_go_away(kafka_bootstrap, replog_topic):
    admin = KafkaAdminClient(bootstrap_servers=kafka_bootstrap)
    names = set(admin.list_topics())
    admin.close()
    assert replog_topic in names
    assert not any(n.startswith("test_kafka_python_round_trip") for n in names)  # deleted


def test_client_factories_point_at_the_cluster(kafka_clients, replog_topic):
    producer = kafka_clients.kafka_python_producer(acks="all")
    producer.send(replog_topic, b"x").get(timeout=30)
    other = kafka_clients.confluent_producer({"acks": "all"})
    other.produce(replog_topic, b"y")
    assert other.flush(30) == 0
    consumer = kafka_clients.kafka_python_consumer(
        replog_topic, auto_offset_reset="earliest", consumer_timeout_ms=20_000
    )
    assert {m.value for _, m in zip(range(2), consumer)} == {b"x", b"y"}


def test_a_factory_cluster_of_its_own(replog_cluster_factory, replog_cluster):
    other = replog_cluster_factory(2)
    assert len(other.brokers) == 2 and other.bootstrap != replog_cluster.bootstrap
"""


def test_a_user_suite_runs_on_the_fixtures(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_user=USER_TESTS)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-q")
    result.assert_outcomes(passed=6)


def test_bad_marker_arguments_are_a_usage_error(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        test_bad="""
import pytest

@pytest.mark.replog_topic(partitons=3)
def test_typo(replog_topic):
    pass
"""
    )
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-q")
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["*unknown arguments*partitons*"])
