"""``Cluster.reset``: a session cluster emptied between tests, checked with kafka-python."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import NewTopic

from replog.broker.shell.cluster import Cluster
from replog.broker.shell.cluster_reset import ResetError

pytestmark = [pytest.mark.system, pytest.mark.timeout(120)]


@pytest.fixture(scope="module")
def cluster() -> Iterator[Cluster]:
    with Cluster.local(2, test_mode=True) as cluster:
        yield cluster


def _fill(cluster: Cluster, topic: str, group: str) -> None:
    producer = KafkaProducer(bootstrap_servers=cluster.bootstrap, acks="all")
    producer.send(topic, b"one").get(timeout=30)
    producer.close()
    consumer = KafkaConsumer(
        topic,
        bootstrap_servers=cluster.bootstrap,
        group_id=group,
        auto_offset_reset="earliest",
        consumer_timeout_ms=20_000,
    )
    assert next(iter(consumer)).value == b"one"
    consumer.commit()
    consumer.close()


def test_reset_drops_topics_groups_and_offsets(cluster: Cluster) -> None:
    admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap)
    try:
        _fill(cluster, "orders", "billing")
        assert "orders" in admin.list_topics()
        cluster.reset()
        assert [t for t in admin.list_topics() if not t.startswith("__")] == []
        assert list(admin.list_groups()) == []
        # The same names again start from nothing: no committed offset, no records.
        admin.create_topics([NewTopic("orders", 1, 2)])
        consumer = KafkaConsumer(bootstrap_servers=cluster.bootstrap, group_id="billing")
        try:
            assert consumer.committed(TopicPartition("orders", 0)) is None
            end = consumer.end_offsets([TopicPartition("orders", 0)])
            assert end == {TopicPartition("orders", 0): 0}
        finally:
            consumer.close()
    finally:
        admin.close()
        cluster.reset()


def test_a_group_still_in_use_is_named(cluster: Cluster) -> None:
    consumer = KafkaConsumer(
        "busy", bootstrap_servers=cluster.bootstrap, group_id="still-open", consumer_timeout_ms=1
    )
    try:
        consumer.poll(5_000)
        with pytest.raises(ResetError, match="group still-open still has members"):
            cluster.reset()
    finally:
        consumer.close()
    cluster.reset()  # closed: now it goes
