"""Every public method of ``Admin`` and ``AsyncAdmin`` against a real 3-broker cluster, each
effect checked through an independent Kafka client (kafka-python's ``KafkaAdminClient``,
``KafkaConsumer``, ``KafkaProducer``) rather than through replog's own reads: a DeleteTopics
that deleted nothing passed every replog-side check, because replog's reads agreed with
replog's writes.

Each test runs twice: with the synchronous ``Admin`` and with ``AsyncAdmin`` driven on a private
event loop. Metadata reaches every broker shortly after the controller commits it, so checks
through kafka-python wait (briefly) for the state they expect.
"""

from __future__ import annotations

import asyncio
import warnings
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

import pytest

from replog import Admin, Cluster
from replog.client import (
    AsyncAdmin,
    BrokerResponseError,
    ClientClosedError,
    ElectionType,
    RetriableBrokerResponseError,
)
from replog.errors import ErrorCode, InvalidConfigError
from tests.waiting import wait_for

with warnings.catch_warnings():
    # kafka-python loads its schemas with the deprecated importlib.resources API
    warnings.filterwarnings("ignore", ".*(read_text|open_text) is deprecated", DeprecationWarning)
    from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
    from kafka.admin import ConfigResource, ConfigResourceType, NewTopic

pytestmark = [
    pytest.mark.system,
    pytest.mark.timeout(120),
    # kafka-python loads its schemas with the deprecated importlib.resources API
    pytest.mark.filterwarnings("ignore:.*(read_text|open_text) is deprecated:DeprecationWarning"),
]

T = TypeVar("T")
UNKNOWN_TOPIC_OR_PARTITION = 3

#: the public methods of Admin, each covered by a test below (and the guard test checks it)
TESTED = {
    "create_topics",
    "delete_topics",
    "create_partitions",
    "list_topics",
    "describe_topics",
    "describe_cluster",
    "describe_configs",
    "describe_broker_configs",
    "config_entries",
    "alter_configs",
    "delete_records",
    "list_offsets",
    "reassign_partition",
    "elect_preferred_leaders",
    "elect_leaders",
    "elect_leaders_results",
    "alter_broker_configs",
    "alter_partition_reassignments",
    "list_partition_reassignments",
    "describe_log_dirs",
    "read_replica",
    "close",
    # the group methods: tests/client/test_group_admin_e2e.py
    "list_groups",
    "describe_groups",
    "delete_groups",
    "list_group_offsets",
    "alter_group_offsets",
    "delete_group_offsets",
}


class AsyncAdminOnLoop:
    """``AsyncAdmin`` driven from a test: each method runs on one private event loop."""

    def __init__(self, bootstrap: str, **options: Any) -> None:
        self._loop = asyncio.new_event_loop()
        self.admin = self._loop.run_until_complete(AsyncAdmin.start(bootstrap, **options))

    def __getattr__(self, name: str) -> Callable[..., Any]:
        method = getattr(self.admin, name)

        def call(*args: Any, **kwargs: Any) -> Any:
            return self._loop.run_until_complete(method(*args, **kwargs))

        return call

    def close(self) -> None:
        self._loop.run_until_complete(self.admin.close())

    def shutdown(self) -> None:
        self.close()
        self._loop.close()


@pytest.fixture(scope="module")
def cluster() -> Iterator[Cluster]:
    with Cluster.local(3) as c:
        yield c


@pytest.fixture(scope="module")
def kafka_admin(cluster: Cluster) -> Iterator[KafkaAdminClient]:
    client = KafkaAdminClient(bootstrap_servers=cluster.bootstrap, request_timeout_ms=20_000)
    yield client
    client.close()


@pytest.fixture(params=["sync", "async"])
def mode(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def admin(cluster: Cluster, mode: str) -> Iterator[Any]:
    if mode == "sync":
        sync = Admin(cluster.bootstrap)  # no coordinator_url: every method is a Kafka API
        yield sync
        sync.close()
    else:
        on_loop = AsyncAdminOnLoop(cluster.bootstrap)
        yield on_loop
        on_loop.shutdown()


def described(kafka_admin: KafkaAdminClient, name: str) -> dict[str, Any]:
    """kafka-python's Metadata view of one topic (error_code 3 when it does not exist)."""
    (topic,) = kafka_admin.describe_topics([name])
    return dict(topic)


def kafka_configs(kafka_admin: KafkaAdminClient, name: str) -> dict[str, dict[str, Any]]:
    resource = ConfigResource(ConfigResourceType.TOPIC, name)
    result = kafka_admin.describe_configs([resource], config_filter="all")
    return dict(result["topic"][name])


def kafka_create(kafka_admin: KafkaAdminClient, name: str, partitions: int, rf: int) -> None:
    """Create a topic through kafka-python (so replog's reads are checked against it)."""
    answer = kafka_admin.create_topics([NewTopic(name, partitions, rf)])
    assert [(t["error_code"], t["error_message"]) for t in answer["topics"]] == [(0, None)]
    wait_for(lambda: described(kafka_admin, name), lambda t: t["error_code"] == 0)


def test_every_public_admin_method_is_tested() -> None:
    public = {name for name in dir(Admin) if not name.startswith("_")}
    assert public == TESTED
    async_public = {name for name in dir(AsyncAdmin) if not name.startswith("_")}
    assert async_public == TESTED | {"start"}  # start: every async test's fixture


def test_config_entries_give_the_sources_kafka_python_sees(
    admin: Any, kafka_admin: KafkaAdminClient, mode: str
) -> None:
    name = f"sourced-{mode}"
    admin.create_topics(name, 1, 1, {"retention.ms": "3600000"})
    wait_for(lambda: described(kafka_admin, name), lambda t: t["error_code"] == 0)
    ours = {e.name: e for e in admin.config_entries("topics", [name])[name]}
    theirs = kafka_configs(kafka_admin, name)
    assert {k: e.source for k, e in ours.items()} == {
        k: v["config_source"] for k, v in theirs.items()
    }
    assert ours["retention.ms"].is_dynamic and not ours["cleanup.policy"].is_dynamic
    (broker,) = admin.config_entries("brokers", ["1"]).values()
    assert broker and all(e.source != "UNKNOWN" for e in broker)


def test_create_topics_is_what_kafka_python_describes(
    admin: Any, kafka_admin: KafkaAdminClient, mode: str
) -> None:
    name = f"created-{mode}"
    admin.create_topics(name, 3, 2, {"min.insync.replicas": "2", "retention.ms": "3600000"})
    topic = wait_for(lambda: described(kafka_admin, name), lambda t: t["error_code"] == 0)
    assert [p["partition_index"] for p in topic["partitions"]] == [0, 1, 2]
    for p in topic["partitions"]:
        assert len(set(p["replica_nodes"])) == 2 and p["leader_id"] in p["replica_nodes"]
    configs = kafka_configs(kafka_admin, name)
    assert configs["min.insync.replicas"]["value"] == "2"
    assert configs["min.insync.replicas"]["config_source"] == "DYNAMIC_TOPIC_CONFIG"
    assert configs["retention.ms"]["value"] == "3600000"
    assert configs["cleanup.policy"]["config_source"] != "DYNAMIC_TOPIC_CONFIG"


def test_delete_topics_removes_the_topic_for_kafka_python(
    admin: Any, kafka_admin: KafkaAdminClient, mode: str
) -> None:
    names = [f"doomed-{mode}-{i}" for i in range(2)]
    for name in names:
        kafka_create(kafka_admin, name, 2, 3)
    admin.delete_topics(names)
    for name in names:
        gone = wait_for(lambda n=name: described(kafka_admin, n), lambda t: t["error_code"] != 0)
        assert gone["error_code"] == UNKNOWN_TOPIC_OR_PARTITION
    assert not set(names) & set(kafka_admin.list_topics())
    with pytest.raises(RetriableBrokerResponseError) as error:
        admin.delete_topics([names[0]])
    assert error.value.code == UNKNOWN_TOPIC_OR_PARTITION


def test_create_partitions_grows_the_topic_for_kafka_python(
    admin: Any, cluster: Cluster, kafka_admin: KafkaAdminClient, mode: str
) -> None:
    name = f"grown-{mode}"
    kafka_create(kafka_admin, name, 1, 3)
    admin.create_partitions(name, 3)
    topic = wait_for(
        lambda: described(kafka_admin, name),
        lambda t: len(t["partitions"]) == 3 and all(p["leader_id"] >= 0 for p in t["partitions"]),
    )
    assert sorted(p["partition_index"] for p in topic["partitions"]) == [0, 1, 2]
    producer = KafkaProducer(
        bootstrap_servers=cluster.bootstrap, acks="all", enable_idempotence=False
    )
    try:
        metadata = producer.send(name, b"to the new partition", partition=2).get(timeout=30)
    finally:
        producer.close(timeout=10)
    assert (metadata.partition, metadata.offset) == (2, 0)


def test_list_topics_matches_kafka_python(
    admin: Any, kafka_admin: KafkaAdminClient, mode: str
) -> None:
    names = {f"listed-{mode}-a", f"listed-{mode}-b"}
    for name in names:
        kafka_create(kafka_admin, name, 1, 1)
    listed = wait_for(admin.list_topics, lambda topics: names <= set(topics))
    assert listed == sorted(listed)
    assert set(listed) == set(kafka_admin.list_topics())


def test_describe_topics_matches_kafka_python(
    admin: Any, kafka_admin: KafkaAdminClient, mode: str
) -> None:
    name = f"described-{mode}"
    kafka_create(kafka_admin, name, 3, 3)
    ours = admin.describe_topics([name])[name]
    theirs = described(kafka_admin, name)
    assert [
        (p.partition, p.leader, p.leader_epoch, list(p.replicas), sorted(p.isr))
        for p in ours.partitions
    ] == [
        (
            p["partition_index"],
            p["leader_id"],
            p["leader_epoch"],
            p["replica_nodes"],
            sorted(p["isr_nodes"]),
        )
        for p in sorted(theirs["partitions"], key=lambda p: p["partition_index"])
    ]
    assert name in admin.describe_topics()
    with pytest.raises(BrokerResponseError) as error:
        admin.describe_topics([f"missing-{mode}"])
    assert error.value.code == UNKNOWN_TOPIC_OR_PARTITION
    assert described(kafka_admin, f"missing-{mode}")["error_code"] == UNKNOWN_TOPIC_OR_PARTITION


def test_describe_cluster_matches_kafka_python(
    admin: Any, cluster: Cluster, kafka_admin: KafkaAdminClient
) -> None:
    ours = admin.describe_cluster()
    theirs = kafka_admin.describe_cluster()
    assert [(b.broker_id, b.host, b.port, b.rack) for b in ours.brokers] == sorted(
        (b["broker_id"], b["host"], b["port"], b["rack"]) for b in theirs["brokers"]
    )
    assert [b.port for b in ours.brokers] == [cluster.brokers[i].port for i in (1, 2, 3)]
    assert (ours.controller_id, ours.cluster_id) == (
        theirs["controller_id"],
        theirs["cluster_id"],
    )
    assert ours.controller_id in (1, 2, 3)


def test_describe_configs_matches_kafka_python(
    admin: Any, kafka_admin: KafkaAdminClient, mode: str
) -> None:
    name = f"configured-{mode}"
    kafka_admin.create_topics([NewTopic(name, 1, 3, topic_configs={"retention.bytes": "1048576"})])
    wait_for(lambda: described(kafka_admin, name), lambda t: t["error_code"] == 0)
    ours = admin.describe_configs([name])[name]
    theirs = kafka_configs(kafka_admin, name)
    assert ours == {key: entry["value"] for key, entry in theirs.items()}
    assert ours["retention.bytes"] == "1048576"
    assert theirs["retention.bytes"]["config_source"] == "DYNAMIC_TOPIC_CONFIG"


def test_alter_configs_is_what_kafka_python_describes(
    admin: Any, kafka_admin: KafkaAdminClient, mode: str
) -> None:
    name = f"reconfigured-{mode}"
    kafka_admin.create_topics([NewTopic(name, 1, 3, topic_configs={"retention.bytes": "1048576"})])
    wait_for(lambda: described(kafka_admin, name), lambda t: t["error_code"] == 0)
    admin.alter_configs(name, {"retention.ms": "120000"})
    theirs = wait_for(
        lambda: kafka_configs(kafka_admin, name), lambda c: c["retention.ms"]["value"] == "120000"
    )
    assert theirs["retention.ms"]["config_source"] == "DYNAMIC_TOPIC_CONFIG"
    assert theirs["retention.bytes"]["value"] == "1048576"  # keys not named keep their values
    admin.alter_configs(name, delete_configs=["retention.bytes"])
    theirs = wait_for(
        lambda: kafka_configs(kafka_admin, name),
        lambda c: c["retention.bytes"]["config_source"] != "DYNAMIC_TOPIC_CONFIG",
    )
    assert theirs["retention.bytes"]["value"] == "-1"
    assert theirs["retention.ms"]["value"] == "120000"
    with pytest.raises(BrokerResponseError) as error:
        admin.alter_configs(name, {"message.downconversion.enable": "true"})
    assert error.value.code == 40  # INVALID_CONFIG


def kafka_broker_configs(
    kafka_admin: KafkaAdminClient, broker_id: int, *, synonyms: bool = False
) -> dict[str, Any]:
    resource = ConfigResource(ConfigResourceType.BROKER, str(broker_id))
    result = kafka_admin.describe_configs(
        [resource], config_filter="all", include_synonyms=synonyms
    )
    return dict(result["broker"][str(broker_id)])


def test_describe_broker_configs_matches_kafka_python(
    admin: Any, kafka_admin: KafkaAdminClient, mode: str
) -> None:
    """Each broker's configs as kafka-python describes them (it asks each broker about itself),
    with a per-broker and a cluster-wide dynamic config set; the cluster-wide default (None),
    which kafka-python cannot ask for, is the DYNAMIC_DEFAULT_BROKER_CONFIG synonyms it shows."""
    retention = "7200000" if mode == "sync" else "10800000"
    rate, rate_value = "follower.replication.throttled.rate", "1000000000"
    admin.alter_broker_configs(3, {"log.retention.ms": retention})
    admin.alter_broker_configs(None, {rate: rate_value})

    def applied(broker_id: int, configs: dict[str, Any]) -> bool:
        own = broker_id != 3 or configs["log.retention.ms"]["value"] == retention
        return bool(own and configs[rate]["value"] == rate_value)

    try:
        theirs = {
            b: wait_for(
                lambda b=b: kafka_broker_configs(kafka_admin, b, synonyms=True),
                lambda c, b=b: applied(b, c),
            )
            for b in (1, 2, 3)
        }
        ours = admin.describe_broker_configs([1, 2, 3, None])
    finally:
        admin.alter_broker_configs(3, delete_configs=["log.retention.ms"])
        admin.alter_broker_configs(None, delete_configs=[rate])
    assert sorted(ours, key=str) == [1, 2, 3, None]
    for broker_id in (1, 2, 3):
        assert ours[broker_id] == {
            key: entry["value"]
            for key, entry in theirs[broker_id].items()
            if entry["value"] is not None
        }
        assert ours[broker_id]["broker.id"] == str(broker_id)
    assert ours[3]["log.retention.ms"] == retention
    assert theirs[3]["log.retention.ms"]["config_source"] == "DYNAMIC_BROKER_CONFIG"
    assert theirs[1]["log.retention.ms"]["config_source"] != "DYNAMIC_BROKER_CONFIG"
    assert theirs[1][rate]["config_source"] == "DYNAMIC_DEFAULT_BROKER_CONFIG"
    assert ours[None] == {
        key: synonym["value"]
        for key, entry in theirs[1].items()
        for synonym in entry["synonyms"]
        if synonym["source"] == "DYNAMIC_DEFAULT_BROKER_CONFIG"
    }
    assert ours[None] == {rate: rate_value}
    with pytest.raises(BrokerResponseError) as error:
        admin.describe_broker_configs([99])
    assert error.value.code == ErrorCode.BROKER_NOT_AVAILABLE


def test_alter_broker_configs_is_what_kafka_python_describes(
    admin: Any, kafka_admin: KafkaAdminClient, mode: str
) -> None:
    broker_id = 1 if mode == "sync" else 2
    admin.alter_broker_configs(broker_id, {"log.retention.ms": "7200000"})
    theirs = wait_for(
        lambda: kafka_broker_configs(kafka_admin, broker_id),
        lambda c: c["log.retention.ms"]["value"] == "7200000",
    )
    assert theirs["log.retention.ms"]["config_source"] == "DYNAMIC_BROKER_CONFIG"
    admin.alter_broker_configs(broker_id, delete_configs=["log.retention.ms"])
    theirs = wait_for(
        lambda: kafka_broker_configs(kafka_admin, broker_id),
        lambda c: c["log.retention.ms"]["config_source"] != "DYNAMIC_BROKER_CONFIG",
    )
    rate = "leader.replication.throttled.rate"  # a broker-only dynamic key (KIP-73)
    admin.alter_broker_configs(broker_id, {rate: "1000"})
    theirs = wait_for(
        lambda: kafka_broker_configs(kafka_admin, broker_id), lambda c: c[rate]["value"] == "1000"
    )
    assert theirs[rate]["config_source"] == "DYNAMIC_BROKER_CONFIG"
    admin.alter_broker_configs(broker_id, delete_configs=[rate])
    theirs = wait_for(
        lambda: kafka_broker_configs(kafka_admin, broker_id),
        lambda c: c[rate]["config_source"] == "DEFAULT_CONFIG",
    )
    assert theirs[rate]["value"] == str(2**63 - 1)  # Kafka's default: unthrottled
    with pytest.raises(BrokerResponseError) as error:
        admin.alter_broker_configs(broker_id, {rate: "-1"})
    assert error.value.code == ErrorCode.INVALID_CONFIG


def test_delete_records_moves_what_kafka_python_sees_as_earliest(
    admin: Any, cluster: Cluster, kafka_admin: KafkaAdminClient, mode: str
) -> None:
    name = f"trimmed-{mode}"
    kafka_create(kafka_admin, name, 1, 3)
    producer = KafkaProducer(
        bootstrap_servers=cluster.bootstrap, acks="all", enable_idempotence=False
    )
    try:
        for i in range(6):
            producer.send(name, b"v%d" % i, partition=0).get(timeout=30)
    finally:
        producer.close(timeout=10)
    assert admin.delete_records({(name, 0): 4}) == {(name, 0): 4}
    tp = TopicPartition(name, 0)
    consumer = KafkaConsumer(bootstrap_servers=cluster.bootstrap, group_id=None)
    try:
        assert consumer.beginning_offsets([tp]) == {tp: 4}
    finally:
        consumer.close()
    assert admin.list_offsets([(name, 0)], "earliest") == {(name, 0): 4}
    assert admin.delete_records({(name, 0): -1}) == {(name, 0): 6}
    with pytest.raises(BrokerResponseError) as error:
        admin.delete_records({(name, 0): 7})
    assert error.value.code == 1  # OFFSET_OUT_OF_RANGE


def test_read_replica_reads_leader_and_followers_alike(
    admin: Any, cluster: Cluster, kafka_admin: KafkaAdminClient, mode: str
) -> None:
    """Each replica's copy, read with the debugging-consumer fetch: the same batches, at the
    offsets kafka-python's producer was told, up to each replica's own HW."""
    name = f"replicas-{mode}"
    kafka_create(kafka_admin, name, 1, 3)
    producer = KafkaProducer(
        bootstrap_servers=cluster.bootstrap, acks="all", enable_idempotence=False
    )
    try:
        offsets = [
            producer.send(name, b"v%d" % i, partition=0).get(timeout=30).offset for i in range(5)
        ]  # one batch each
    finally:
        producer.close(timeout=10)
    assert offsets == [0, 1, 2, 3, 4]
    replicas = described(kafka_admin, name)["partitions"][0]["replica_nodes"]
    reads = {
        b: wait_for(lambda b=b: admin.read_replica(b, name, 0, 0), lambda r: r.high_watermark == 5)
        for b in replicas
    }
    for read in reads.values():
        assert read.error == "NONE" and read.log_start_offset == 0
        assert [(b.base_offset, b.last_offset) for b in read.batches] == [(i, i) for i in range(5)]
        assert read.batches == reads[replicas[0]].batches and read.next_offset == 5
    tail = admin.read_replica(replicas[-1], name, 0, 3)
    assert [b.base_offset for b in tail.batches] == [3, 4]
    assert admin.read_replica(replicas[-1], name, 0, 9).error == "OFFSET_OUT_OF_RANGE"


def test_list_offsets_matches_kafka_python(
    admin: Any, cluster: Cluster, kafka_admin: KafkaAdminClient, mode: str
) -> None:
    name = f"offsets-{mode}"
    kafka_create(kafka_admin, name, 2, 3)
    base_ms = 1_700_000_000_000
    producer = KafkaProducer(
        bootstrap_servers=cluster.bootstrap, acks="all", enable_idempotence=False
    )
    try:
        for i in range(10):
            producer.send(name, b"v%d" % i, partition=0, timestamp_ms=base_ms + i * 1000)
            producer.flush(timeout=30)  # one batch per record: a timestamp index entry each
    finally:
        producer.close(timeout=10)
    tps = [(name, 0), (name, 1)]
    kafka_tps = [TopicPartition(name, p) for p in (0, 1)]
    consumer = KafkaConsumer(bootstrap_servers=cluster.bootstrap, group_id=None)
    try:
        end = consumer.end_offsets(kafka_tps)
        start = consumer.beginning_offsets(kafka_tps)
        at = consumer.offsets_for_times({kafka_tps[0]: base_ms + 3_500})[kafka_tps[0]]
    finally:
        consumer.close()
    assert admin.list_offsets(tps) == {(t.topic, t.partition): o for t, o in end.items()}
    assert admin.list_offsets(tps) == {(name, 0): 10, (name, 1): 0}
    assert admin.list_offsets(tps, "earliest") == {
        (t.topic, t.partition): o for t, o in start.items()
    }
    assert (
        admin.list_offsets([(name, 0)], base_ms + 3_500) == {(name, 0): at.offset} == {(name, 0): 4}
    )


def test_reassign_partition_moves_the_replicas_kafka_python_sees(
    admin: Any, kafka_admin: KafkaAdminClient, mode: str
) -> None:
    name = f"moved-{mode}"
    kafka_create(kafka_admin, name, 1, 2)
    before = described(kafka_admin, name)["partitions"][0]["replica_nodes"]
    (outside,) = {1, 2, 3} - set(before)
    target = [outside, before[0]]
    assert admin.reassign_partition(name, 0, target) is None
    moved = wait_for(
        lambda: described(kafka_admin, name)["partitions"][0],
        lambda p: p["replica_nodes"] == target and sorted(p["isr_nodes"]) == sorted(target),
    )
    assert moved["leader_id"] in target


def test_elect_preferred_leaders_moves_leadership_kafka_python_sees(
    admin: Any, kafka_admin: KafkaAdminClient, mode: str
) -> None:
    name = f"elected-{mode}"
    kafka_create(kafka_admin, name, 1, 3)
    first = described(kafka_admin, name)["partitions"][0]
    leader = first["leader_id"]
    # Reorder the replicas: another broker becomes preferred; the leader stays where it is.
    preferred = next(b for b in first["replica_nodes"] if b != leader)
    order = [preferred, *(b for b in first["replica_nodes"] if b != preferred)]
    admin.reassign_partition(name, 0, order)
    reordered = wait_for(
        lambda: described(kafka_admin, name)["partitions"][0],
        lambda p: p["replica_nodes"] == order,
    )
    assert reordered["leader_id"] == leader != preferred
    wait_for(
        lambda: described(kafka_admin, name)["partitions"][0],
        lambda p: sorted(p["isr_nodes"]) == sorted(order),
    )
    assert admin.elect_preferred_leaders([(name, 0)]) == {(name, 0): True}
    elected = wait_for(
        lambda: described(kafka_admin, name)["partitions"][0],
        lambda p: p["leader_id"] == preferred,
    )
    assert elected["leader_epoch"] > reordered["leader_epoch"]
    # Already led by its preferred replica: nothing to elect, no error.
    assert admin.elect_preferred_leaders([(name, 0)]) == {(name, 0): False}
    assert described(kafka_admin, name)["partitions"][0]["leader_epoch"] == elected["leader_epoch"]


def test_elect_leaders_for_every_partition_is_what_kafka_python_sees(
    admin: Any, kafka_admin: KafkaAdminClient, mode: str
) -> None:
    name = f"all-elected-{mode}"
    kafka_create(kafka_admin, name, 2, 3)
    before = {p["partition_index"]: p for p in described(kafka_admin, name)["partitions"]}
    orders = {}
    for index, p in before.items():
        preferred = next(b for b in p["replica_nodes"] if b != p["leader_id"])
        orders[index] = [preferred, *(b for b in p["replica_nodes"] if b != preferred)]
    admin.alter_partition_reassignments({(name, i): order for i, order in orders.items()})
    wait_for(
        lambda: described(kafka_admin, name)["partitions"],
        lambda ps: all(
            p["replica_nodes"] == orders[p["partition_index"]] and len(p["isr_nodes"]) == 3
            for p in ps
        ),
    )
    elected = admin.elect_leaders(election_type="preferred")  # None: every partition
    assert {(name, 0): True, (name, 1): True}.items() <= elected.items()
    after = wait_for(
        lambda: described(kafka_admin, name)["partitions"],
        lambda ps: all(p["leader_id"] == orders[p["partition_index"]][0] for p in ps),
    )
    assert all(p["leader_epoch"] > before[p["partition_index"]]["leader_epoch"] for p in after)
    # Every partition is led as asked now: nothing is left to elect among them.
    assert (name, 0) not in admin.elect_leaders(election_type=ElectionType.PREFERRED)
    assert admin.elect_leaders([(name, 0)], "unclean") == {(name, 0): False}  # it has a leader
    with pytest.raises(RetriableBrokerResponseError) as error:
        admin.elect_leaders([(name, 7)])
    assert error.value.code == UNKNOWN_TOPIC_OR_PARTITION
    # elect_leaders_results answers every partition instead of raising the first failure
    results = admin.elect_leaders_results([(name, 0), (name, 7)], "preferred")
    assert results[(name, 0)].error == ErrorCode.ELECTION_NOT_NEEDED
    assert results[(name, 7)].error == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    with pytest.raises(InvalidConfigError):
        admin.elect_leaders([(name, 0)], "sideways")


def test_alter_partition_reassignments_is_what_kafka_python_sees(
    admin: Any, kafka_admin: KafkaAdminClient, mode: str
) -> None:
    name = f"realigned-{mode}"
    answer = kafka_admin.create_topics([NewTopic(name, replica_assignments={0: [1, 2], 1: [2, 3]})])
    assert [t["error_code"] for t in answer["topics"]] == [0]
    target = {(name, 0): [3, 1], (name, 1): [1, 2]}
    assert admin.alter_partition_reassignments(target) is None
    moved = wait_for(
        lambda: described(kafka_admin, name)["partitions"],
        lambda ps: all(
            p["replica_nodes"] == target[(name, p["partition_index"])]
            and sorted(p["isr_nodes"]) == sorted(p["replica_nodes"])
            for p in ps
        ),
    )
    assert all(p["leader_id"] in p["replica_nodes"] for p in moved)
    # Done: no reassignment runs, as kafka-python's ListPartitionReassignments agrees.
    tps = [(name, 0), (name, 1)]
    assert admin.list_partition_reassignments(tps) == {}
    assert kafka_admin.list_partition_reassignments([TopicPartition(*tp) for tp in tps]) == {}
    with pytest.raises(BrokerResponseError) as error:
        admin.alter_partition_reassignments({(name, 0): [1, 1]})
    assert error.value.code == 39  # INVALID_REPLICA_ASSIGNMENT
    with pytest.raises(RetriableBrokerResponseError) as error:
        admin.list_partition_reassignments([(f"missing-{mode}", 0)])
    assert error.value.code == UNKNOWN_TOPIC_OR_PARTITION


def test_describe_log_dirs_lists_the_replicas_kafka_python_sees(
    admin: Any, cluster: Cluster, kafka_admin: KafkaAdminClient, mode: str
) -> None:
    name = f"stored-{mode}"
    answer = kafka_admin.create_topics([NewTopic(name, replica_assignments={0: [1, 2], 1: [2, 3]})])
    assert [t["error_code"] for t in answer["topics"]] == [0]
    wait_for(lambda: described(kafka_admin, name), lambda t: t["error_code"] == 0)
    producer = KafkaProducer(
        bootstrap_servers=cluster.bootstrap, acks="all", enable_idempotence=False
    )
    try:
        for i in range(4):
            producer.send(name, b"v%d" % i, partition=i % 2).get(timeout=30)
    finally:
        producer.close(timeout=10)

    def sizes() -> dict[int, dict[tuple[str, int], int]]:
        return {
            broker: {
                (r.topic, r.partition): r.size_bytes
                for d in dirs
                for r in d.replicas
                if r.topic == name
            }
            for broker, dirs in admin.describe_log_dirs().items()
        }

    hosted = {1: {(name, 0)}, 2: {(name, 0), (name, 1)}, 3: {(name, 1)}}
    ours = wait_for(
        sizes,
        lambda s: (
            {b: set(tps) for b, tps in s.items()} == hosted
            and all(size > 0 for tps in s.values() for size in tps.values())
        ),
    )
    theirs = {
        answer["broker"]: {
            (t["name"], p["partition_index"]): p["partition_size"]
            for d in answer["log_dirs"]
            for t in d["topics"]
            if t["name"] == name
            for p in t["partitions"]
        }
        for answer in kafka_admin.describe_log_dirs()
    }
    assert theirs == ours
    dirs = admin.describe_log_dirs([2], [(name, 1)])
    assert list(dirs) == [2]
    (only,) = dirs[2]
    assert only.error == ErrorCode.NONE and only.total_bytes >= only.usable_bytes > 0
    assert [(r.topic, r.partition) for r in only.replicas] == [(name, 1)]


def test_a_fresh_admin_describes_one_brokers_log_dirs(cluster: Cluster) -> None:
    # Its first call names a broker: the client must learn the broker's address first.
    with Admin(cluster.bootstrap) as fresh:
        dirs = fresh.describe_log_dirs([3])
    assert list(dirs) == [3] and dirs[3][0].error == ErrorCode.NONE


def test_close_ends_the_admin(cluster: Cluster, kafka_admin: KafkaAdminClient) -> None:
    sync = Admin(cluster.bootstrap)
    assert set(sync.list_topics()) == set(kafka_admin.list_topics())
    sync.close()
    sync.close()  # idempotent
    with pytest.raises(RuntimeError):
        sync.list_topics()

    async def use_and_close() -> AsyncAdmin:
        async with await AsyncAdmin.start(cluster.bootstrap) as async_admin:
            assert await async_admin.list_topics() is not None
        return async_admin

    closed = asyncio.run(use_and_close())
    with pytest.raises(ClientClosedError):
        asyncio.run(closed.list_topics())
