"""The consumer-group methods of ``Admin`` and ``AsyncAdmin`` against a real 3-broker cluster,
each checked through independent Kafka clients: the groups are joined and their offsets
committed by kafka-python's ``KafkaConsumer``, and what replog's admin reports or changes is
compared with kafka-python's ``KafkaAdminClient`` and confluent-kafka's ``AdminClient``
(librdkafka). Each test runs with the synchronous ``Admin`` and with ``AsyncAdmin``.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import ConsumerGroupTopicPartitions
from confluent_kafka.admin import AdminClient

from replog import Admin, Cluster, Producer
from replog.client import BrokerResponseError, OffsetAndMetadata
from replog.errors import ErrorCode
from replog.groups import OFFSETS_TOPIC

from .test_admin_e2e import AsyncAdminOnLoop, wait_for

with warnings.catch_warnings():
    warnings.filterwarnings("ignore", ".*(read_text|open_text) is deprecated", DeprecationWarning)
    from kafka import KafkaAdminClient, KafkaConsumer, TopicPartition
    from kafka.admin import ConfigResource, ConfigResourceType
    from kafka.errors import RebalanceInProgressError
    from kafka.structs import OffsetAndMetadata as KafkaOffsetAndMetadata

pytestmark = [
    pytest.mark.system,
    pytest.mark.timeout(120),
    pytest.mark.filterwarnings("ignore:.*(read_text|open_text) is deprecated:DeprecationWarning"),
]

PARTITIONS = 3


@pytest.fixture(scope="module")
def cluster() -> Iterator[Cluster]:
    with Cluster.local(3, groups={"initial_rebalance_delay_ms": 0}) as c:
        yield c


@pytest.fixture(scope="module")
def kafka_admin(cluster: Cluster) -> Iterator[KafkaAdminClient]:
    client = KafkaAdminClient(bootstrap_servers=cluster.bootstrap, request_timeout_ms=20_000)
    yield client
    client.close()


@pytest.fixture(scope="module")
def confluent_admin(cluster: Cluster) -> AdminClient:
    return AdminClient({"bootstrap.servers": cluster.bootstrap})


@pytest.fixture(params=["sync", "async"])
def mode(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def admin(cluster: Cluster, mode: str) -> Iterator[Any]:
    if mode == "sync":
        sync = Admin(cluster.bootstrap)
        yield sync
        sync.close()
    else:
        on_loop = AsyncAdminOnLoop(cluster.bootstrap)
        yield on_loop
        on_loop.shutdown()


@pytest.fixture
def topic(cluster: Cluster, request: pytest.FixtureRequest) -> str:
    """A topic of its own for each test, with 5 records in each partition."""
    name = request.node.name.replace("[", "-").replace("]", "")[-60:]
    with Admin(cluster.bootstrap) as admin:
        admin.create_topics(name, PARTITIONS, 3)
    with Producer(cluster.bootstrap, acks="all") as producer:
        futures = [
            producer.send(name, f"v{i}".encode(), partition=i % PARTITIONS) for i in range(15)
        ]
        for future in futures:
            future.result(timeout=30)
    return name


class KafkaMember:
    """A kafka-python ``KafkaConsumer`` in a group, polled from the test's thread."""

    def __init__(self, cluster: Cluster, group: str, topic: str) -> None:
        self.consumer = KafkaConsumer(
            bootstrap_servers=cluster.bootstrap,
            group_id=group,
            client_id="kafka-python-member",
            auto_offset_reset="earliest",
            enable_auto_commit=False,
        )
        # A metadata refresh after subscribing (topics() always asks the cluster), so the first
        # generation's assignment already covers the topic: otherwise kafka-python 3.0.12
        # rejoins for a second generation at once and, if a poll's timer runs out while that
        # SyncGroup is in flight, never applies its assignment (see group_member.py).
        self.consumer.subscribe([topic])
        wait_for(lambda: topic in self.consumer.topics(), bool)
        self.read: list[tuple[int, int]] = []

    def poll_until_assigned(self, count: int) -> None:
        def polled() -> int:
            for records in self.consumer.poll(timeout_ms=100).values():
                self.read += [(r.partition, r.offset) for r in records]
            return len(self.consumer.assignment())

        wait_for(polled, lambda n: n == count, timeout_s=30)

    def poll_until_read(self, count: int) -> None:
        def polled() -> int:
            for records in self.consumer.poll(timeout_ms=100).values():
                self.read += [(r.partition, r.offset) for r in records]
            return len(self.read)

        wait_for(polled, lambda n: n >= count, timeout_s=30)

    def commit(self, offsets: dict[TopicPartition, KafkaOffsetAndMetadata]) -> None:
        """Commit ``offsets``; a commit refused because a rebalance is under way (kafka-python
        raises while its SyncGroup is in flight, against Kafka too) is retried after a poll."""

        def committed() -> bool:
            try:
                self.consumer.commit(offsets)
            except RebalanceInProgressError:
                self.poll_until_assigned(PARTITIONS)
                return False
            return True

        wait_for(committed, bool, timeout_s=30)

    def close(self) -> None:
        self.consumer.close()


def test_list_and_describe_groups_agree_with_kafka_python_and_librdkafka(
    cluster: Cluster,
    admin: Any,
    kafka_admin: KafkaAdminClient,
    confluent_admin: AdminClient,
    topic: str,
) -> None:
    group = f"{topic}-g"
    member = KafkaMember(cluster, group, topic)
    try:
        member.poll_until_assigned(PARTITIONS)
        listed = {g.group_id: g for g in admin.list_groups()}
        assert listed[group].protocol_type == "consumer"
        assert listed[group].state == "Stable"
        assert group in {g.group_id for g in admin.list_groups(["Stable"])}
        assert group not in {g.group_id for g in admin.list_groups(["Empty"])}
        assert group in {g["group_id"] for g in kafka_admin.list_groups()}
        confluent_listed = confluent_admin.list_consumer_groups().result(timeout=20)
        assert group in {g.group_id for g in confluent_listed.valid}

        description = admin.describe_groups([group])[group]
        assert (description.state, description.protocol_type) == ("Stable", "consumer")
        (described,) = description.members
        assert described.client_id == "kafka-python-member"
        assert set(described.assignment) == {(topic, p) for p in range(PARTITIONS)}
        theirs = kafka_admin.describe_groups([group])[group]
        assert theirs["protocol_data"] == description.protocol
        assert [m["member_id"] for m in theirs["members"]] == [described.member_id]
        librdkafka = confluent_admin.describe_consumer_groups([group])[group].result(timeout=20)
        assert [m.member_id for m in librdkafka.members] == [described.member_id]
        assert {
            (tp.topic, tp.partition) for tp in librdkafka.members[0].assignment.topic_partitions
        } == set(described.assignment)
    finally:
        member.close()
    # After the member left: Empty, no members.
    assert admin.describe_groups([group])[group].state == "Empty"
    assert admin.describe_groups([f"{group}-never"])[f"{group}-never"].state == "Dead"


def test_group_offsets_listed_altered_and_deleted_agree_with_kafka_python(
    cluster: Cluster, admin: Any, kafka_admin: KafkaAdminClient, topic: str
) -> None:
    group = f"{topic}-g"
    member = KafkaMember(cluster, group, topic)
    try:
        member.poll_until_assigned(PARTITIONS)
        member.poll_until_read(15)
        member.commit({TopicPartition(topic, 0): KafkaOffsetAndMetadata(4, "m", -1)})
        assert admin.list_group_offsets(group) == {(topic, 0): OffsetAndMetadata(4, -1, "m")}
        # A member subscribes to the topic: its offsets cannot be deleted or altered.
        with pytest.raises(BrokerResponseError) as refused:
            admin.delete_group_offsets(group, [(topic, 0)])
        assert refused.value.code == ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC
    finally:
        member.close()

    admin.alter_group_offsets(group, {(topic, 1): 2, (topic, 2): OffsetAndMetadata(3, -1, "x")})
    theirs = kafka_admin.list_group_offsets({group: None})[group]
    assert {(tp.topic, tp.partition): (o.offset, o.metadata) for tp, o in theirs.items()} == {
        (topic, 0): (4, "m"),
        (topic, 1): (2, ""),
        (topic, 2): (3, "x"),
    }
    assert {tp: o.offset for tp, o in admin.list_group_offsets(group, [(topic, 2)]).items()} == {
        (topic, 2): 3
    }

    admin.delete_group_offsets(group, [(topic, 0)])
    theirs = kafka_admin.list_group_offsets({group: None})[group]
    assert {(tp.topic, tp.partition) for tp in theirs} == {(topic, 1), (topic, 2)}

    # A new kafka-python member resumes from the offsets the admin set (and from the earliest
    # on the partition whose offset was deleted).
    resumed = KafkaMember(cluster, group, topic)
    try:
        resumed.poll_until_read(5 + 3 + 2)
        assert sorted(resumed.read) == sorted(
            [(0, o) for o in range(5)]
            + [(1, o) for o in range(2, 5)]
            + [(2, o) for o in range(3, 5)]
        )
    finally:
        resumed.close()


def test_delete_groups_refuses_a_group_with_members_and_deletes_an_empty_one(
    cluster: Cluster,
    admin: Any,
    kafka_admin: KafkaAdminClient,
    confluent_admin: AdminClient,
    topic: str,
) -> None:
    group = f"{topic}-g"
    member = KafkaMember(cluster, group, topic)
    try:
        member.poll_until_assigned(PARTITIONS)
        member.commit({TopicPartition(topic, 1): KafkaOffsetAndMetadata(2, "", -1)})
        with pytest.raises(BrokerResponseError) as refused:
            admin.delete_groups([group])
        assert refused.value.code == ErrorCode.NON_EMPTY_GROUP
    finally:
        member.close()
    admin.delete_groups([group])
    assert group not in {g["group_id"] for g in kafka_admin.list_groups()}
    assert kafka_admin.list_group_offsets({group: None})[group] == {}
    offsets = confluent_admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)])
    assert offsets[group].result(timeout=20).topic_partitions == []

    with pytest.raises(BrokerResponseError) as missing:
        admin.delete_groups([group])
    assert missing.value.code == ErrorCode.GROUP_ID_NOT_FOUND


def test_the_offsets_topic_is_internal_and_compacted_as_kafka_python_sees_it(
    cluster: Cluster, kafka_admin: KafkaAdminClient, topic: str
) -> None:
    member = KafkaMember(cluster, f"{topic}-g", topic)  # the first group creates the topic
    try:
        member.poll_until_assigned(PARTITIONS)
    finally:
        member.close()
    (described,) = kafka_admin.describe_topics([OFFSETS_TOPIC])
    assert described["error_code"] == 0 and described["is_internal"]
    resource = ConfigResource(ConfigResourceType.TOPIC, OFFSETS_TOPIC)
    configs = kafka_admin.describe_configs([resource], config_filter="all")["topic"][OFFSETS_TOPIC]
    assert configs["cleanup.policy"]["value"] == "compact"


def test_kafka_pythons_group_admin_operations_are_what_replog_reports(
    cluster: Cluster, admin: Any, kafka_admin: KafkaAdminClient, topic: str
) -> None:
    """The other direction: kafka-python's KafkaAdminClient alters and deletes offsets and
    deletes the group; replog's admin sees each effect."""
    group = f"{topic}-g"
    # The first FindCoordinator creates __consumer_offsets and is answered
    # COORDINATOR_NOT_AVAILABLE until it has leaders (as Kafka does); kafka-python's admin does
    # not retry, replog's does.
    assert admin.describe_groups([group])[group].state == "Dead"
    kafka_admin.alter_group_offsets(
        group,
        {
            TopicPartition(topic, 0): KafkaOffsetAndMetadata(1, "a", -1),
            TopicPartition(topic, 1): KafkaOffsetAndMetadata(2, "b", -1),
        },
    )
    assert admin.list_group_offsets(group) == {
        (topic, 0): OffsetAndMetadata(1, -1, "a"),
        (topic, 1): OffsetAndMetadata(2, -1, "b"),
    }
    assert admin.describe_groups([group])[group].state == "Empty"

    errors = kafka_admin.delete_group_offsets(group, [TopicPartition(topic, 0)])
    assert [e.__name__ for e in errors.values()] == ["NoError"]
    assert set(admin.list_group_offsets(group)) == {(topic, 1)}

    assert kafka_admin.delete_groups([group]) == {group: "OK"}
    assert admin.list_group_offsets(group) == {}
    assert group not in {g.group_id for g in admin.list_groups()}
