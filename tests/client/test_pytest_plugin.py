"""The pytest plugin as a user meets it: a test file of their own, run by pytest in a fresh
process, with kafka-python, confluent-kafka and aiokafka against its fixtures and the
``kafka_clients`` factories (the plugin loads through its ``pytest11`` entry point, nothing
passed on the command line)."""

from __future__ import annotations

from pathlib import Path

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


FAULT_TESTS = """
import asyncio

import pytest
from aiokafka.errors import KafkaTimeoutError as AioTimeout, RequestTimedOutError
from confluent_kafka import KafkaError
from kafka.errors import KafkaTimeoutError

pytestmark = pytest.mark.replog_topic(replication_factor=3)


def confluent_delivery(kafka_clients, topic, value, **config):
    producer = kafka_clients.confluent_producer({"acks": "all", **config})
    outcome = []
    producer.produce(topic, value, on_delivery=lambda err, msg: outcome.append(err))
    producer.flush(30)
    return outcome[0]


def aio_send(kafka_clients, topic, value, faults=None, **config):
    async def go():
        async with kafka_clients.aiokafka_producer(acks="all", **config) as producer:
            await producer.send_and_wait(topic, b"warm-up")
            if faults is not None:
                faults()
            return await producer.send_and_wait(topic, value)

    return asyncio.run(go())


# -- an injected NOT_LEADER_OR_FOLLOWER is retried by every client


def test_kafka_python_retries_an_injected_error(kafka_clients, replog_topic, replog_faults):
    tracked = replog_faults.track_requests()
    replog_faults.inject_errors("Produce", ["NOT_LEADER_OR_FOLLOWER"])
    producer = kafka_clients.kafka_python_producer(acks="all")
    producer.send(replog_topic, b"v").get(timeout=30)
    assert [r.api for r in tracked].count("Produce") == 2


def test_confluent_retries_an_injected_error(kafka_clients, replog_topic, replog_faults):
    tracked = replog_faults.track_requests()
    replog_faults.inject_errors("Produce", ["NOT_LEADER_OR_FOLLOWER"])
    assert confluent_delivery(kafka_clients, replog_topic, b"v") is None
    assert [r.api for r in tracked].count("Produce") == 2


def test_aiokafka_retries_an_injected_error(kafka_clients, replog_topic, replog_faults):
    tracked = replog_faults.track_requests()
    inject = lambda: replog_faults.inject_errors("Produce", ["NOT_LEADER_OR_FOLLOWER"])
    assert aio_send(kafka_clients, replog_topic, b"v", inject).offset >= 1
    assert [r.api for r in tracked].count("Produce") == 3  # warm-up, the error, the retry


# -- a cut link times out


def test_kafka_python_times_out_on_a_cut_link(kafka_clients, replog_topic, replog_faults):
    producer = kafka_clients.kafka_python_producer(
        acks="all", request_timeout_ms=1000, delivery_timeout_ms=2000, linger_ms=0
    )
    producer.send(replog_topic, b"warm-up").get(timeout=30)
    replog_faults.cut_clients()
    with pytest.raises(KafkaTimeoutError):
        producer.send(replog_topic, b"lost").get(timeout=30)


def test_confluent_times_out_on_a_cut_link(kafka_clients, replog_topic, replog_faults):
    replog_faults.cut_clients()
    error = confluent_delivery(kafka_clients, replog_topic, b"lost", **{"message.timeout.ms": 1500})
    assert error.code() == KafkaError._MSG_TIMED_OUT


def test_aiokafka_times_out_on_a_cut_link(kafka_clients, replog_topic, replog_faults):
    with pytest.raises((AioTimeout, RequestTimedOutError)):  # aiokafka's two timeouts
        cut = replog_faults.cut_clients
        aio_send(kafka_clients, replog_topic, b"lost", cut, request_timeout_ms=1500)


# -- a killed leader fails over


def kill_leader(replog_faults, topic):
    leader = replog_faults.leader(topic)
    replog_faults.kill(leader)
    return leader


def test_kafka_python_follows_a_failover(kafka_clients, replog_topic, replog_faults):
    producer = kafka_clients.kafka_python_producer(acks="all")
    producer.send(replog_topic, b"before").get(timeout=30)
    kill_leader(replog_faults, replog_topic)
    producer.send(replog_topic, b"after").get(timeout=30)
    consumer = kafka_clients.kafka_python_consumer(
        replog_topic, auto_offset_reset="earliest", consumer_timeout_ms=20_000
    )
    assert [m.value for _, m in zip(range(2), consumer)] == [b"before", b"after"]


def test_confluent_follows_a_failover(kafka_clients, replog_topic, replog_faults):
    assert confluent_delivery(kafka_clients, replog_topic, b"before") is None
    old = kill_leader(replog_faults, replog_topic)
    assert confluent_delivery(kafka_clients, replog_topic, b"after") is None
    assert replog_faults.leader(replog_topic) != old


def test_aiokafka_follows_a_failover(kafka_clients, replog_topic, replog_faults):
    kill = lambda: kill_leader(replog_faults, replog_topic)
    assert aio_send(kafka_clients, replog_topic, b"after", kill).offset == 1
"""


GUIDE_EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "test_kafka_app.py"


def test_a_user_suite_runs_on_the_fixtures_under_xdist(pytester: pytest.Pytester) -> None:
    """One pytest run as a user's project has it: the fixture tests, the fault tests (each
    fault kind reaching each client) and the testing guide's example, on two xdist workers
    with three brokers each (one run: every worker starts its clusters once)."""
    pytester.makepyfile(
        test_user=USER_TESTS, test_faults=FAULT_TESTS, test_kafka_app=GUIDE_EXAMPLE.read_text()
    )
    result = pytester.runpytest_subprocess(
        "-p", "no:cacheprovider", "-q", "-n", "2", "--replog-brokers", "3"
    )
    result.assert_outcomes(passed=21)


def test_the_testing_guide_shows_the_example_as_it_runs() -> None:
    guide = (GUIDE_EXAMPLE.parents[1] / "docs" / "testing.md").read_text()
    code = GUIDE_EXAMPLE.read_text()
    quoted = 0
    for block in guide.split("```python\n")[1:]:
        snippet = block.split("```", 1)[0]
        if snippet.startswith("# examples/test_kafka_app.py"):
            body = snippet.split("\n", 1)[1].strip()
            assert body in code, f"docs/testing.md misquotes the example: {body[:80]!r}"
            quoted += 1
    assert quoted >= 3


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
