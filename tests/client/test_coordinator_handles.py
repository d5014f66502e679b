"""Closing a coordinator handle never breaks the brokers of the same process.

Before, ``Admin(..., coordinator_url="memory://...").close()`` -- or any
``replog.coord.connect(url).close()`` -- closed the in-process store itself: every broker of a
``Cluster.local`` then saw its session as not current and refused acks=all produce with
NOT_LEADER_OR_FOLLOWER for good, while metadata still named a leader. The effect is checked
with kafka-python (an independent client), producing with acks=all and reading back.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest
from kafka import KafkaConsumer, KafkaProducer, TopicPartition

from replog import Admin, Cluster
from replog.client import AsyncAdmin
from replog.coord import connect

pytestmark = pytest.mark.system

TOPIC = "handles"


@pytest.fixture
def cluster() -> Iterator[Cluster]:
    with Cluster.local(3) as c:
        with Admin(c.bootstrap) as admin:
            admin.create_topics(TOPIC, 1, 3, {"min.insync.replicas": "2"})
        yield c


def _produce_and_read(cluster: Cluster, values: list[bytes]) -> list[bytes]:
    producer = KafkaProducer(
        bootstrap_servers=cluster.bootstrap, acks="all", enable_idempotence=False, retries=0
    )
    try:
        for value in values:
            producer.send(TOPIC, value, partition=0).get(timeout=10)
    finally:
        producer.close(timeout=10)
    consumer = KafkaConsumer(bootstrap_servers=cluster.bootstrap, enable_auto_commit=False)
    try:
        tp = TopicPartition(TOPIC, 0)
        consumer.assign([tp])
        consumer.seek_to_beginning(tp)
        got: list[bytes] = []
        for _ in range(50):
            for records in consumer.poll(timeout_ms=200).values():
                got.extend(r.value for r in records)
            if len(got) >= len(values):
                break
        return got
    finally:
        consumer.close()


def test_closing_an_admin_with_a_coordinator_url_leaves_the_brokers_working(
    cluster: Cluster,
) -> None:
    # coordinator_url is deprecated and ignored now (the election is a Kafka API), but an old
    # caller passing it still works and still leaves the brokers alone.
    with pytest.warns(DeprecationWarning, match="coordinator_url"):
        admin = Admin(cluster.bootstrap, coordinator_url=cluster.coordinator_url)
    assert admin.elect_preferred_leaders([(TOPIC, 0)]) == {(TOPIC, 0): False}
    admin.close()

    async def async_admin() -> None:
        with pytest.warns(DeprecationWarning, match="coordinator_url"):
            started = await AsyncAdmin.start(
                cluster.bootstrap, coordinator_url=cluster.coordinator_url
            )
        async with started:
            assert await started.elect_preferred_leaders([(TOPIC, 0)]) == {(TOPIC, 0): False}

    asyncio.run(async_admin())
    assert _produce_and_read(cluster, [b"a", b"b"]) == [b"a", b"b"]


def test_closing_a_connected_handle_leaves_the_brokers_working(cluster: Cluster) -> None:
    handle = connect(cluster.coordinator_url)
    assert TOPIC in handle.list_topics()
    handle.close()
    handle.close()  # idempotent
    assert _produce_and_read(cluster, [b"c"]) == [b"c"]
