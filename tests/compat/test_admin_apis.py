"""Kafka's admin APIs served by replog against a real 3-broker cluster, driven and checked by
independent clients (kafka-python's ``KafkaAdminClient`` / ``KafkaProducer`` /
``KafkaConsumer`` and confluent-kafka's ``AdminClient``), each change's *effect* checked, not
only its answer: a config change must change what the broker does, DeleteRecords must move
what a consumer sees as the earliest offset, and so on.

Metadata reaches every broker shortly after the controller commits it, so checks through
another broker wait (briefly) for the state they expect.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

import pytest

from replog import Cluster
from replog.log.compression import Compression
from replog.log.records import read_header
from tests.compat.test_version_sweep import exchange

with warnings.catch_warnings():
    # kafka-python loads its schemas with the deprecated importlib.resources API
    warnings.filterwarnings("ignore", ".*(read_text|open_text) is deprecated", DeprecationWarning)
    from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
    from kafka.admin import ConfigResource, ConfigResourceType, NewTopic
    from kafka.errors import KafkaError, OffsetOutOfRangeError
    from kafka.protocol.admin.cluster import DescribeClusterRequest, DescribeClusterResponse
    from kafka.protocol.metadata.metadata import MetadataRequest, MetadataResponse

from confluent_kafka import TopicPartition as ConfluentTopicPartition
from confluent_kafka import admin as confluent_admin

from tests.waiting import eventually

pytestmark = [
    pytest.mark.system,
    pytest.mark.timeout(120),
    pytest.mark.filterwarnings("ignore:.*(read_text|open_text) is deprecated:DeprecationWarning"),
]

T = TypeVar("T")
MESSAGE_TOO_LARGE = 10
OFFSET_OUT_OF_RANGE = 1
UNKNOWN_TOPIC_OR_PARTITION = 3
ELECTION_NOT_NEEDED = 84
LEADER_NOT_AVAILABLE = 5
INVALID_TOPIC_EXCEPTION = 17
INVALID_REPLICA_ASSIGNMENT = 39


def wait_for(read: Callable[[], T], done: Callable[[T], bool], timeout_s: float = 30.0) -> T:
    """``eventually``, reading again after a kafka-python error (a connection refused by a
    broker the test just stopped, which its admin client may still pick for a metadata
    request)."""
    return eventually(
        read, what="the admin read", done=done, timeout_s=timeout_s, retry_on=(KafkaError,)
    )


@pytest.fixture(scope="module")
def cluster() -> Iterator[Cluster]:
    with Cluster.local(3) as c:
        yield c


@pytest.fixture(scope="module")
def kafka_admin(cluster: Cluster) -> Iterator[KafkaAdminClient]:
    client = KafkaAdminClient(bootstrap_servers=cluster.bootstrap, request_timeout_ms=20_000)
    yield client
    client.close()


@pytest.fixture(scope="module")
def confluent(cluster: Cluster) -> Any:
    return confluent_admin.AdminClient({"bootstrap.servers": cluster.bootstrap})


def create(kafka_admin: KafkaAdminClient, name: str, partitions: int, rf: int) -> None:
    answer = kafka_admin.create_topics([NewTopic(name, partitions, rf)])
    assert [(t["error_code"], t["error_message"]) for t in answer["topics"]] == [(0, None)]
    wait_for(
        lambda: kafka_admin.describe_topics([name])[0],
        lambda t: t["error_code"] == 0 and all(p["leader_id"] >= 0 for p in t["partitions"]),
    )


def topic_configs(kafka_admin: KafkaAdminClient, name: str) -> dict[str, dict[str, Any]]:
    resource = ConfigResource(ConfigResourceType.TOPIC, name)
    result = kafka_admin.describe_configs([resource], config_filter="all")
    return dict(result["topic"][name])


def produce(cluster: Cluster, topic: str, count: int, *, partition: int = 0) -> None:
    producer = KafkaProducer(
        bootstrap_servers=cluster.bootstrap, acks="all", enable_idempotence=False, linger_ms=0
    )
    try:
        for i in range(count):
            producer.send(topic, f"value-{i}".encode(), partition=partition).get(timeout=30)
    finally:
        producer.close()


# ---- AlterConfigs / IncrementalAlterConfigs ----


def test_alter_configs_replaces_a_topics_configs_and_the_brokers_apply_them(
    cluster: Cluster, kafka_admin: KafkaAdminClient, confluent: Any
) -> None:
    name = "altered"
    create(kafka_admin, name, 1, 2)
    big = b"x" * 2_000
    assert _produce_error(cluster, name, big) is None
    resource = ConfigResource(
        ConfigResourceType.TOPIC, name, {"max.message.bytes": "1000", "retention.ms": "60000"}
    )
    kafka_admin.alter_configs([resource], incremental=False)
    configs = wait_for(
        lambda: topic_configs(kafka_admin, name),
        lambda c: c["max.message.bytes"]["value"] == "1000",
    )
    assert configs["max.message.bytes"]["config_source"] == "DYNAMIC_TOPIC_CONFIG"
    assert configs["retention.ms"]["value"] == "60000"
    # the effect: the leader now refuses a batch over the new limit
    assert wait_for(lambda: _produce_error(cluster, name, big), bool) == MESSAGE_TOO_LARGE
    # AlterConfigs replaces the set: leaving max.message.bytes out restores its default
    # (confluent-kafka sends the set as given; kafka-python adds the keys already set)
    resource = confluent_admin.ConfigResource(
        confluent_admin.ResourceType.TOPIC, name, set_config={"retention.ms": "60000"}
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # in favour of the incremental one
        futures = confluent.alter_configs([resource])
    for future in futures.values():
        future.result(timeout=30)
    configs = wait_for(
        lambda: topic_configs(kafka_admin, name),
        lambda c: c["max.message.bytes"]["config_source"] != "DYNAMIC_TOPIC_CONFIG",
    )
    assert configs["max.message.bytes"]["value"] == "1048588"
    assert configs["retention.ms"]["value"] == "60000"
    wait_for(lambda: _produce_error(cluster, name, big), lambda e: e is None)


def _produce_error(cluster: Cluster, topic: str, value: bytes) -> int | None:
    """The error code of one acks=all send to partition 0 with no retries (None: it worked)."""
    producer = KafkaProducer(
        bootstrap_servers=cluster.bootstrap, acks="all", enable_idempotence=False, retries=0
    )
    try:
        producer.send(topic, value, partition=0).get(timeout=30)
    except KafkaError as exc:
        return int(getattr(exc, "errno", None) or -1)
    finally:
        producer.close()
    return None


def test_incremental_alter_configs_from_confluent_kafka(
    kafka_admin: KafkaAdminClient, confluent: Any
) -> None:
    name = "incremental"
    create(kafka_admin, name, 1, 3)
    ops = confluent_admin.AlterConfigOpType
    resource = confluent_admin.ConfigResource(
        confluent_admin.ResourceType.TOPIC,
        name,
        incremental_configs=[
            confluent_admin.ConfigEntry("retention.ms", "120000", incremental_operation=ops.SET),
            confluent_admin.ConfigEntry(
                "cleanup.policy", "compact", incremental_operation=ops.APPEND
            ),
        ],
    )
    for future in confluent.incremental_alter_configs([resource]).values():
        future.result(timeout=30)
    configs = wait_for(
        lambda: topic_configs(kafka_admin, name), lambda c: c["retention.ms"]["value"] == "120000"
    )
    assert configs["cleanup.policy"]["value"] == "delete,compact"
    assert configs["cleanup.policy"]["config_source"] == "DYNAMIC_TOPIC_CONFIG"
    # DELETE one key: the others stay
    resource = confluent_admin.ConfigResource(
        confluent_admin.ResourceType.TOPIC,
        name,
        incremental_configs=[
            confluent_admin.ConfigEntry("retention.ms", None, incremental_operation=ops.DELETE)
        ],
    )
    for future in confluent.incremental_alter_configs([resource]).values():
        future.result(timeout=30)
    configs = wait_for(
        lambda: topic_configs(kafka_admin, name),
        lambda c: c["retention.ms"]["config_source"] != "DYNAMIC_TOPIC_CONFIG",
    )
    assert configs["cleanup.policy"]["value"] == "delete,compact"
    # a bad value is refused naming the key, and changes nothing
    resource = confluent_admin.ConfigResource(
        confluent_admin.ResourceType.TOPIC,
        name,
        incremental_configs=[
            confluent_admin.ConfigEntry("retention.ms", "soon", incremental_operation=ops.SET)
        ],
    )
    (future,) = confluent.incremental_alter_configs([resource]).values()
    with pytest.raises(Exception, match=r"retention\.ms"):
        future.result(timeout=30)
    assert topic_configs(kafka_admin, name)["cleanup.policy"]["value"] == "delete,compact"


def test_dynamic_broker_configs_apply_to_the_topics_they_host(
    cluster: Cluster, kafka_admin: KafkaAdminClient
) -> None:
    name = "broker-default"
    create(kafka_admin, name, 1, 3)
    big = b"x" * 2_000
    brokers = [str(b) for b in sorted(cluster.brokers)]

    def alter(operation: str, value: str | None) -> None:
        # neither client sends the cluster-wide default (resource ""): set every broker's
        resources = [
            ConfigResource(ConfigResourceType.BROKER, b, {"message.max.bytes": (operation, value)})
            for b in brokers
        ]
        answer = kafka_admin.alter_configs(resources, incremental=True, raise_on_unknown=False)
        assert answer == {"broker": dict.fromkeys(brokers, "OK")}

    alter("SET", "1000")
    try:
        configs = wait_for(
            lambda: topic_configs(kafka_admin, name),
            lambda c: c["max.message.bytes"]["value"] == "1000",
        )
        assert configs["max.message.bytes"]["config_source"] == "DYNAMIC_BROKER_CONFIG"
        broker = ConfigResource(ConfigResourceType.BROKER, "1")
        described = kafka_admin.describe_configs([broker], config_filter="all")
        entry = dict(described["broker"]["1"])["message.max.bytes"]
        assert (entry["value"], entry["config_source"]) == ("1000", "DYNAMIC_BROKER_CONFIG")
        assert not entry["read_only"]
        assert dict(described["broker"]["1"])["broker.id"]["read_only"]
        # the effect: the leader refuses a batch over the broker's new limit
        assert wait_for(lambda: _produce_error(cluster, name, big), bool) == MESSAGE_TOO_LARGE
    finally:
        alter("DELETE", None)
    configs = wait_for(
        lambda: topic_configs(kafka_admin, name),
        lambda c: c["max.message.bytes"]["config_source"] != "DYNAMIC_BROKER_CONFIG",
    )
    wait_for(lambda: _produce_error(cluster, name, big), lambda e: e is None)


def test_a_config_broker_does_not_honour_is_refused(kafka_admin: KafkaAdminClient) -> None:
    resource = ConfigResource(ConfigResourceType.BROKER, "1", {"num.io.threads": ("SET", "4")})
    answer = kafka_admin.alter_configs([resource], incremental=True, raise_on_unknown=False)
    assert "num.io.threads" in answer["broker"]["1"]
    assert "InvalidConfigurationError" in answer["broker"]["1"]


def test_compression_type_recompresses_what_producers_send(
    cluster: Cluster, kafka_admin: KafkaAdminClient
) -> None:
    name = "gzipped"
    create(kafka_admin, name, 1, 1)
    kafka_admin.alter_configs(
        [ConfigResource(ConfigResourceType.TOPIC, name, {"compression.type": "gzip"})],
        incremental=False,
    )
    wait_for(
        lambda: topic_configs(kafka_admin, name),
        lambda c: c["compression.type"]["value"] == "gzip",
    )
    wait_for(  # every broker has applied the change (the leader is the one that recompresses)
        lambda: [dict(b.rm.image.topics[name].configs) for b in cluster.brokers.values()],
        lambda seen: all(c.get("compression.type") == "gzip" for c in seen),
    )
    produce(cluster, name, 3)
    consumer = KafkaConsumer(bootstrap_servers=cluster.bootstrap, consumer_timeout_ms=5_000)
    try:
        consumer.assign([TopicPartition(name, 0)])
        consumer.seek_to_beginning()
        values = [r.value for r in consumer]
    finally:
        consumer.close()
    assert values == [b"value-0", b"value-1", b"value-2"]
    codecs = set()
    for broker in cluster.brokers.values():
        log = broker.local_log(name, 0)
        if log is not None:
            codecs |= {read_header(batch).compression for batch in log.batches()}
    assert codecs == {Compression.GZIP}


# ---- DeleteRecords ----


def test_delete_records_moves_the_earliest_offset_consumers_see(
    cluster: Cluster, kafka_admin: KafkaAdminClient, confluent: Any
) -> None:
    name = "trimmed"
    create(kafka_admin, name, 1, 3)
    produce(cluster, name, 10)
    tp = TopicPartition(name, 0)
    answer = kafka_admin.delete_records({tp: 4}, timeout_ms=20_000)
    assert answer[tp]["low_watermark"] == 4
    consumer = KafkaConsumer(bootstrap_servers=cluster.bootstrap, consumer_timeout_ms=5_000)
    try:
        assert consumer.beginning_offsets([tp]) == {tp: 4}
        consumer.assign([tp])
        consumer.seek_to_beginning()
        assert [r.value for r in consumer] == [f"value-{i}".encode() for i in range(4, 10)]
    finally:
        consumer.close()
    earliest = confluent_admin.OffsetSpec.earliest()
    (future,) = confluent.list_offsets({_ck_tp(name, 0): earliest}).values()
    assert future.result(timeout=30).offset == 4
    # a consumer asking below the new log start is OFFSET_OUT_OF_RANGE
    strict = KafkaConsumer(bootstrap_servers=cluster.bootstrap, auto_offset_reset="none")
    try:
        strict.assign([tp])
        strict.seek(tp, 1)
        with pytest.raises(OffsetOutOfRangeError):
            for _ in range(50):
                strict.poll(timeout_ms=200)
    finally:
        strict.close()
    # -1: up to the high watermark; past it: OFFSET_OUT_OF_RANGE, nothing moves
    assert kafka_admin.delete_records({tp: -1}, timeout_ms=20_000)[tp]["low_watermark"] == 10
    with pytest.raises(KafkaError) as error:
        kafka_admin.delete_records({tp: 11}, timeout_ms=20_000)
    assert error.value.errno == OFFSET_OUT_OF_RANGE
    (future,) = confluent.list_offsets({_ck_tp(name, 0): earliest}).values()
    assert future.result(timeout=30).offset == 10


def _ck_tp(topic: str, partition: int) -> Any:
    return ConfluentTopicPartition(topic, partition)


# ---- topic auto-creation ----


def test_producing_to_an_unknown_topic_creates_it(
    cluster: Cluster, kafka_admin: KafkaAdminClient
) -> None:
    name = "auto-created"
    assert name not in kafka_admin.list_topics()
    produce(cluster, name, 2)
    (topic,) = kafka_admin.describe_topics([name])
    assert topic["error_code"] == 0
    assert [len(p["replica_nodes"]) for p in topic["partitions"]] == [3]  # the broker defaults
    consumer = KafkaConsumer(bootstrap_servers=cluster.bootstrap, consumer_timeout_ms=5_000)
    try:
        consumer.assign([TopicPartition(name, 0)])
        consumer.seek_to_beginning()
        assert [r.value for r in consumer] == [b"value-0", b"value-1"]
    finally:
        consumer.close()


def test_metadata_that_disallows_auto_creation_creates_nothing(
    kafka_admin: KafkaAdminClient,
) -> None:
    # kafka-python's admin client sends Metadata with allow_auto_topic_creation false
    for _ in range(3):
        (topic,) = kafka_admin.describe_topics(["not-wanted"])
        assert topic["error_code"] == UNKNOWN_TOPIC_OR_PARTITION
    assert "not-wanted" not in kafka_admin.list_topics()


# ---- DescribeCluster, DescribeLogDirs, reassignments, ElectLeaders ----


def test_describe_cluster(cluster: Cluster, kafka_admin: KafkaAdminClient, confluent: Any) -> None:
    described = kafka_admin.describe_cluster()  # DescribeCluster (Metadata has no is_fenced)
    assert described["cluster_id"] == "replog"
    assert sorted(b["broker_id"] for b in described["brokers"]) == sorted(cluster.brokers)
    assert {b["is_fenced"] for b in described["brokers"]} == {False}
    ports = {b["broker_id"]: b["port"] for b in described["brokers"]}
    assert ports == {i: b.advertised_port for i, b in cluster.brokers.items()}
    assert described["controller_id"] in cluster.brokers
    result = confluent.describe_cluster().result(timeout=30)
    assert result.cluster_id == "replog"
    assert sorted(n.id for n in result.nodes) == sorted(cluster.brokers)
    assert result.controller.id == described["controller_id"]


def test_describe_log_dirs_lists_each_replica_with_its_size(
    cluster: Cluster, kafka_admin: KafkaAdminClient
) -> None:
    name = "log-dirs"
    create(kafka_admin, name, 2, 3)
    produce(cluster, name, 5, partition=1)
    answer = kafka_admin.describe_log_dirs(topic_partitions={name: [0, 1]})
    assert sorted(a["broker"] for a in answer) == sorted(cluster.brokers)
    for per_broker in answer:
        (log_dir,) = per_broker["log_dirs"]
        assert log_dir["error_code"] == 0
        assert log_dir["log_dir"].endswith(f"broker-{per_broker['broker']}")
        assert 0 < log_dir["usable_bytes"] <= log_dir["total_bytes"]
        (topic,) = log_dir["topics"]
        sizes = {p["partition_index"]: p["partition_size"] for p in topic["partitions"]}
        # acks=all: every replica holds the 5 records; partition 0 got none
        assert sizes[0] == 0 and sizes[1] > 0
        local = cluster.brokers[per_broker["broker"]].local_log(name, 1)
        assert local is not None and sizes[1] == local.size_bytes


def test_alter_partition_reassignments_moves_the_replicas(
    cluster: Cluster, kafka_admin: KafkaAdminClient
) -> None:
    name = "reassigned"
    create(kafka_admin, name, 1, 2)
    produce(cluster, name, 3)
    tp = TopicPartition(name, 0)
    (partition,) = kafka_admin.describe_topics([name])[0]["partitions"]
    (spare,) = set(cluster.brokers) - set(partition["replica_nodes"])
    target = [spare, partition["replica_nodes"][0]]
    assert kafka_admin.alter_partition_reassignments({tp: target}) == {tp: None}
    moved = wait_for(
        lambda: kafka_admin.describe_topics([name])[0]["partitions"][0],
        lambda p: sorted(p["replica_nodes"]) == sorted(target) and len(p["isr_nodes"]) == 2,
        timeout_s=30,
    )
    assert moved["leader_id"] in target
    wait_for(kafka_admin.list_partition_reassignments, lambda ongoing: ongoing == {})
    local = cluster.brokers[spare].local_log(name, 0)
    assert local is not None and local.log_end_offset == 3  # the new replica caught up
    # a replica set naming a broker twice is refused
    answer = kafka_admin.alter_partition_reassignments({tp: [spare, spare]})
    assert answer[tp] is not None and answer[tp].errno == INVALID_REPLICA_ASSIGNMENT


def test_elect_leaders_moves_leadership_back_to_the_preferred_replica(
    kafka_admin: KafkaAdminClient,
) -> None:
    with Cluster.local(3, auto_leader_rebalance_enable=False) as own:
        admin = KafkaAdminClient(bootstrap_servers=own.bootstrap, request_timeout_ms=20_000)
        try:
            _elect_preferred(own, admin)
        finally:
            admin.close()


def _elect_preferred(cluster: Cluster, admin: KafkaAdminClient) -> None:
    name = "elected"
    create(admin, name, 1, 3)
    (topic,) = admin.describe_topics([name])
    (partition,) = topic["partitions"]
    preferred = partition["replica_nodes"][0]
    assert partition["leader_id"] == preferred
    # already led by its preferred replica: ELECTION_NOT_NEEDED, as Kafka answers
    answer = admin.elect_leaders(0, {name: [0]}, raise_errors=False)
    assert _election_errors(answer) == {(name, 0): ELECTION_NOT_NEEDED}
    cluster.stop(preferred)
    moved = wait_for(
        lambda: admin.describe_topics([name])[0]["partitions"][0],
        lambda p: p["leader_id"] not in (-1, preferred),
    )
    cluster.start(preferred)
    wait_for(
        lambda: admin.describe_topics([name])[0]["partitions"][0],
        lambda p: preferred in p["isr_nodes"],
        timeout_s=30,
    )
    assert admin.describe_topics([name])[0]["partitions"][0]["leader_id"] == moved["leader_id"]
    # kafka-python's admin routes ElectLeaders by its own cached cluster view, which dropped
    # the restarted broker while it was down and is not refreshed by describe_*: once Metadata
    # lists the broker again, a new client (fresh view) asks, as an operator's next command.
    wait_for(
        admin.describe_cluster,
        lambda c: any(b["broker_id"] == preferred for b in c["brokers"]),
    )
    fresh = KafkaAdminClient(bootstrap_servers=cluster.bootstrap, request_timeout_ms=20_000)
    try:
        answer = fresh.elect_leaders(0, {name: [0]}, raise_errors=False)
    finally:
        fresh.close()
    assert _election_errors(answer) == {(name, 0): 0}
    wait_for(
        lambda: admin.describe_topics([name])[0]["partitions"][0]["leader_id"],
        lambda leader: leader == preferred,
    )


def _election_errors(answer: Any) -> dict[tuple[str, int], int]:
    return {
        (topic[0], part[0]): part[1]
        for topic in answer.replica_election_results
        for part in topic[1]
    }


@pytest.mark.parametrize("version", [3, 4, 12])
def test_metadata_allowing_auto_creation_creates_the_topic(
    cluster: Cluster, kafka_admin: KafkaAdminClient, version: int
) -> None:
    name = f"asked-v{version}"
    request = MetadataRequest(
        topics=[MetadataRequest.MetadataRequestTopic(name=name)], allow_auto_topic_creation=True
    )
    port = next(iter(cluster.brokers.values())).port
    answer = exchange(port, request, MetadataResponse, version, cid=version)
    (topic,) = answer.topics
    assert (topic.name, topic.error_code) == (name, LEADER_NOT_AVAILABLE)  # retriable
    created = wait_for(
        lambda: kafka_admin.describe_topics([name])[0],
        lambda t: t["error_code"] == 0 and t["partitions"][0]["leader_id"] >= 0,
    )
    assert len(created["partitions"]) == 1  # num.partitions
    answer = exchange(port, request, MetadataResponse, version, cid=100 + version)
    assert [(t.name, t.error_code) for t in answer.topics] == [(name, 0)]


def test_a_name_that_cannot_be_a_topic_is_not_created(cluster: Cluster) -> None:
    request = MetadataRequest(
        topics=[MetadataRequest.MetadataRequestTopic(name="bad/name")],
        allow_auto_topic_creation=True,
    )
    port = next(iter(cluster.brokers.values())).port
    (topic,) = exchange(port, request, MetadataResponse, 12, cid=1).topics
    assert topic.error_code == INVALID_TOPIC_EXCEPTION


def test_auto_creation_switched_off_creates_nothing() -> None:
    with Cluster.local(1, auto_create_topics_enable=False) as own:
        request = MetadataRequest(
            topics=[MetadataRequest.MetadataRequestTopic(name="stays-unknown")],
            allow_auto_topic_creation=True,
        )
        port = own.brokers[1].port
        for cid in range(3):
            (topic,) = exchange(port, request, MetadataResponse, 12, cid=cid).topics
            assert topic.error_code == UNKNOWN_TOPIC_OR_PARTITION
        producer = KafkaProducer(bootstrap_servers=own.bootstrap, max_block_ms=2_000)
        try:
            with pytest.raises(KafkaError):
                producer.send("stays-unknown", b"nowhere").get(timeout=10)
        finally:
            producer.close()
        assert "stays-unknown" not in own.brokers[1].rm.image.topics


def test_unclean_elect_leaders_elects_an_out_of_sync_replica() -> None:
    with Cluster.local(3) as own:
        admin = KafkaAdminClient(bootstrap_servers=own.bootstrap, request_timeout_ms=20_000)
        try:
            _elect_unclean(own, admin)
        finally:
            admin.close()


def _elect_unclean(cluster: Cluster, admin: KafkaAdminClient) -> None:
    name = "unclean"
    create(admin, name, 1, 2)
    (partition,) = admin.describe_topics([name])[0]["partitions"]
    leader = partition["leader_id"]
    (follower,) = set(partition["replica_nodes"]) - {leader}
    cluster.stop(follower)
    wait_for(
        lambda: admin.describe_topics([name])[0]["partitions"][0]["isr_nodes"],
        lambda isr: isr == [leader],
    )
    produce(cluster, name, 2)  # records the follower never gets
    cluster.stop(leader)
    cluster.start(follower)
    state = wait_for(
        lambda: admin.describe_topics([name])[0]["partitions"][0],
        lambda p: p["leader_id"] == -1 and follower in p["replica_nodes"],
    )
    assert state["isr_nodes"] in ([leader], [])
    # a preferred election cannot help; an unclean one elects the out-of-sync replica (a new
    # client: kafka-python keeps sending to the controller it first found, maybe the stopped one)
    fresh = KafkaAdminClient(bootstrap_servers=cluster.bootstrap, request_timeout_ms=20_000)
    try:
        answer = fresh.elect_leaders(1, {name: [0]}, raise_errors=False)
    finally:
        fresh.close()
    assert _election_errors(answer) == {(name, 0): 0}
    wait_for(
        lambda: admin.describe_topics([name])[0]["partitions"][0]["leader_id"],
        lambda now: now == follower,
    )


@pytest.mark.parametrize(("version", "code"), [(1, 114), (2, 114)])
def test_describe_cluster_asking_for_controllers_is_refused(
    cluster: Cluster, version: int, code: int
) -> None:
    # replog's endpoints are brokers: a broker asked for controllers (endpoint_type, v1+)
    # answers MISMATCHED_ENDPOINT_TYPE as Kafka's do
    request = DescribeClusterRequest(
        include_cluster_authorized_operations=False, endpoint_type=2, include_fenced_brokers=False
    )
    port = next(iter(cluster.brokers.values())).port
    answer = exchange(port, request, DescribeClusterResponse, version, cid=version)
    assert (answer.error_code, answer.brokers) == (code, [])
