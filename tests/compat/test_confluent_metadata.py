"""confluent-kafka (librdkafka) metadata calls against a 3-broker replog cluster.

librdkafka's Metadata v12 request for all topics carries three bytes after its body; Kafka
ignores them, and replog used to drop the connection, so ``AdminClient.list_topics()`` and
``Consumer.list_topics()`` failed with a transport error.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from confluent_kafka import Consumer
from confluent_kafka.admin import AdminClient, ClusterMetadata

from replog import Admin, Cluster

pytestmark = [pytest.mark.system, pytest.mark.timeout(120)]

TOPICS = {"rdkafka-a": 3, "rdkafka-b": 1}


@pytest.fixture(scope="module")
def cluster() -> Iterator[Cluster]:
    with Cluster.local(3) as c:
        with Admin(c.bootstrap) as admin:
            for name, partitions in TOPICS.items():
                admin.create_topics(name, partitions, 3)
        yield c


def check_layout(metadata: ClusterMetadata, cluster: Cluster) -> None:
    """The topics, partitions, leaders, replicas and brokers librdkafka saw are replog's."""
    assert set(metadata.topics) >= set(TOPICS)
    assert sorted(metadata.brokers) == [1, 2, 3]
    assert {b.id: b.port for b in metadata.brokers.values()} == {
        i: cluster.brokers[i].port for i in (1, 2, 3)
    }
    with Admin(cluster.bootstrap) as admin:
        described = admin.describe_topics(list(TOPICS))
    for name, count in TOPICS.items():
        topic = metadata.topics[name]
        assert topic.error is None
        assert sorted(topic.partitions) == list(range(count))
        for index, partition in topic.partitions.items():
            ours = described[name].partitions[index]
            assert (partition.leader, list(partition.replicas)) == (
                ours.leader,
                list(ours.replicas),
            )


def test_admin_client_lists_every_topic(cluster: Cluster) -> None:
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    check_layout(admin.list_topics(timeout=20), cluster)
    one = admin.list_topics(topic="rdkafka-a", timeout=20)
    assert sorted(one.topics["rdkafka-a"].partitions) == [0, 1, 2]


def test_consumer_lists_every_topic(cluster: Cluster) -> None:
    consumer = Consumer(
        {
            "bootstrap.servers": cluster.bootstrap,
            "group.id": "unused",  # required to build a consumer; no group request is sent
            "enable.auto.commit": False,
        }
    )
    try:
        check_layout(consumer.list_topics(timeout=20), cluster)
    finally:
        consumer.close()
