"""Replication throttling (KIP-73) on a live in-process cluster: ``replog reassign --execute
--throttle`` holds a new replica to the rate, raising it lets the reassignment finish, and
``--verify`` removes the throttle; in-sync replicas are never throttled; bad values are
INVALID_CONFIG. Every config is checked through kafka-python's ``KafkaAdminClient``, an
independent client, and the throttle's effect on the new replica's log files on disk."""

from __future__ import annotations

import pathlib
import time
import warnings
from collections.abc import Iterator
from typing import Any

import pytest

from replog import Cluster

with warnings.catch_warnings():
    warnings.filterwarnings("ignore", ".*(read_text|open_text) is deprecated", DeprecationWarning)
    from kafka import KafkaAdminClient, KafkaProducer
    from kafka.admin import ConfigResource, ConfigResourceType

from tests.tools.test_reassign_cli import create, kafka_replicas, reassign, wait_for, write_json
from tests.waiting import eventually

pytestmark = [
    pytest.mark.system,
    pytest.mark.timeout(180),
    pytest.mark.filterwarnings("ignore:.*(read_text|open_text) is deprecated:DeprecationWarning"),
]

#: a follower asks for at most this much per fetch (so one fetch's overshoot stays small)
FETCH_BYTES = 16_384
#: producer batches stay within one fetch: the leader sends one whole batch at most past it
ONE_FETCH_BYTES = 2 * FETCH_BYTES
#: Kafka's quota windows: 11 samples of 1 s
WINDOWS_S = 11
LEADER_RATE = "leader.replication.throttled.rate"
FOLLOWER_RATE = "follower.replication.throttled.rate"
LEADER_REPLICAS = "leader.replication.throttled.replicas"
FOLLOWER_REPLICAS = "follower.replication.throttled.replicas"
UNTHROTTLED = str(2**63 - 1)


@pytest.fixture(scope="module")
def cluster() -> Iterator[Cluster]:
    with Cluster.local(3, replica_fetch_bytes_max=FETCH_BYTES) as c:
        yield c


@pytest.fixture(scope="module")
def kafka_admin(cluster: Cluster) -> Iterator[KafkaAdminClient]:
    client = KafkaAdminClient(bootstrap_servers=cluster.bootstrap, request_timeout_ms=20_000)
    yield client
    client.close()


def broker_configs(kafka_admin: KafkaAdminClient, broker_id: int) -> dict[str, Any]:
    resource = ConfigResource(ConfigResourceType.BROKER, str(broker_id))
    described = kafka_admin.describe_configs([resource], config_filter="all")
    return dict(described["broker"][str(broker_id)])


def topic_configs(kafka_admin: KafkaAdminClient, name: str) -> dict[str, Any]:
    resource = ConfigResource(ConfigResourceType.TOPIC, name)
    return dict(kafka_admin.describe_configs([resource], config_filter="all")["topic"][name])


def alter(
    kafka_admin: KafkaAdminClient, kind: ConfigResourceType, name: str, configs: dict[str, Any]
) -> str:
    """One resource's IncrementalAlterConfigs through kafka-python: "OK" or its error."""
    resource = ConfigResource(kind, name, configs)
    answer = kafka_admin.alter_configs([resource], incremental=True, raise_on_unknown=False)
    kind_name = "broker" if kind is ConfigResourceType.BROKER else "topic"
    return str(answer[kind_name][name])


def produce(
    cluster: Cluster, topic: str, count: int, size: int, acks: Any = 1, retries: int = 5
) -> None:
    producer = KafkaProducer(
        bootstrap_servers=cluster.bootstrap,
        acks=acks,
        retries=retries,
        batch_size=FETCH_BYTES,
        linger_ms=5,
        request_timeout_ms=10_000,
    )
    try:
        futures = [producer.send(topic, b"x" * size, partition=0) for _ in range(count)]
        for future in futures:
            future.get(timeout=20)
    finally:
        producer.close()


def replica_bytes(cluster: Cluster, broker_id: int, topic: str) -> int:
    """Bytes of record data in the broker's replica of ``topic``-0, from its segment files."""
    directory = pathlib.Path(cluster.base_dir) / f"broker-{broker_id}" / f"{topic}-0"
    return sum(p.stat().st_size for p in directory.glob("*.log"))


def test_a_throttled_reassignment_copies_at_most_the_rate_until_it_is_raised(
    cluster: Cluster, kafka_admin: KafkaAdminClient, tmp_path: pathlib.Path
) -> None:
    create(cluster, "heavy", "1")
    produce(cluster, "heavy", 2_000, 1_000)  # ~2 MB on broker 1
    total_bytes = replica_bytes(cluster, 1, "heavy")
    rate = 40_000
    plan = {"version": 1, "partitions": [{"topic": "heavy", "partition": 0, "replicas": [1, 2]}]}
    plan_file = write_json(tmp_path, "heavy.json", plan)
    started = time.monotonic()
    args = ("--execute", "--reassignment-json-file", plan_file, "--throttle", str(rate))
    assert reassign(cluster, *args) == 0
    for broker_id in (1, 2):  # the rates on every broker involved, as Kafka describes them
        configs = broker_configs(kafka_admin, broker_id)
        assert configs[LEADER_RATE]["value"] == configs[FOLLOWER_RATE]["value"] == str(rate)
        assert configs[LEADER_RATE]["config_source"] == "DYNAMIC_BROKER_CONFIG"
    configs = topic_configs(kafka_admin, "heavy")
    assert (configs[LEADER_REPLICAS]["value"], configs[FOLLOWER_REPLICAS]["value"]) == (
        "0:1",
        "0:2",
    )
    # a second's worth of the quota copied: the throttled copy is under way
    copied = eventually(
        lambda: replica_bytes(cluster, 2, "heavy"),
        what="the new replica copying at the throttled rate",
        done=lambda n: n >= rate,
        retry_on=(FileNotFoundError,),
    )
    elapsed_s = time.monotonic() - started
    # One-sided and load-proof: however slow the machine, the new replica cannot hold more
    # than the quota lets through (replog.isr.replication_quota's bound). Unthrottled, it
    # would hold all ~2 MB within a fraction of a second.
    assert copied <= rate * (elapsed_s + WINDOWS_S) + ONE_FETCH_BYTES < total_bytes
    print(f"throttled at {rate} B/s: {copied} B copied in {elapsed_s:.2f} s")
    assert reassign(cluster, "--verify", "--reassignment-json-file", plan_file) == 0
    assert topic_configs(kafka_admin, "heavy")[LEADER_REPLICAS]["value"] == "0:1"  # still set
    # raising the throttle lets it finish; --verify then removes every throttle config
    args = ("--execute", "--additional", "--reassignment-json-file", plan_file)
    assert reassign(cluster, *args, "--throttle", "1000000000") == 0
    configs = topic_configs(kafka_admin, "heavy")  # still Kafka's lists: 2 is being added
    assert (configs[LEADER_REPLICAS]["value"], configs[FOLLOWER_REPLICAS]["value"]) == (
        "0:1",
        "0:2",
    )
    assert broker_configs(kafka_admin, 2)[FOLLOWER_RATE]["value"] == "1000000000"
    wait_for(lambda: kafka_replicas(kafka_admin, "heavy"), lambda r: r == {0: [1, 2]}, 60)
    wait_for(kafka_admin.list_partition_reassignments, lambda running: not running, 60)
    assert reassign(cluster, "--verify", "--reassignment-json-file", plan_file) == 0
    assert replica_bytes(cluster, 2, "heavy") == total_bytes
    assert_unthrottled(kafka_admin, "heavy", (1, 2, 3))


def assert_unthrottled(kafka_admin: KafkaAdminClient, topic: str, brokers: tuple[int, ...]) -> None:
    for broker_id in brokers:
        configs = broker_configs(kafka_admin, broker_id)
        for key in (LEADER_RATE, FOLLOWER_RATE):
            assert (configs[key]["value"], configs[key]["config_source"]) == (
                UNTHROTTLED,
                "DEFAULT_CONFIG",
            )
    configs = topic_configs(kafka_admin, topic)
    for key in (LEADER_REPLICAS, FOLLOWER_REPLICAS):
        assert (configs[key]["value"], configs[key]["config_source"]) == ("", "DEFAULT_CONFIG")


def test_cancel_removes_the_throttle_unless_preserved(
    cluster: Cluster, kafka_admin: KafkaAdminClient, tmp_path: pathlib.Path
) -> None:
    create(cluster, "stuck", "1")
    produce(cluster, "stuck", 200, 1_000)
    plan = {"version": 1, "partitions": [{"topic": "stuck", "partition": 0, "replicas": [1, 3]}]}
    plan_file = write_json(tmp_path, "stuck.json", plan)
    args = ("--execute", "--reassignment-json-file", plan_file, "--throttle", "1")
    assert reassign(cluster, *args) == 0  # 1 B/s: it cannot finish before the cancel
    cancel = ("--cancel", "--reassignment-json-file", plan_file)
    assert reassign(cluster, *cancel, "--preserve-throttles") == 0
    wait_for(lambda: kafka_replicas(kafka_admin, "stuck"), lambda r: r == {0: [1]})
    assert broker_configs(kafka_admin, 3)[FOLLOWER_RATE]["value"] == "1"
    assert topic_configs(kafka_admin, "stuck")[FOLLOWER_REPLICAS]["value"] == "0:3"
    assert reassign(cluster, *cancel) == 0  # nothing running any more; the throttle goes
    assert_unthrottled(kafka_admin, "stuck", (1, 2, 3))


def isr(kafka_admin: KafkaAdminClient, name: str) -> list[int]:
    (topic,) = kafka_admin.describe_topics([name])
    return sorted(topic["partitions"][0]["isr_nodes"])


def test_in_sync_replicas_are_not_throttled(
    cluster: Cluster, kafka_admin: KafkaAdminClient
) -> None:
    create(cluster, "synced", "1:2:3")
    wait_for(lambda: isr(kafka_admin, "synced"), lambda members: members == [1, 2, 3])
    # min ISR 3: a follower the throttle held back would leave the ISR and fail the sends
    topic = {
        "min.insync.replicas": ("SET", "3"),
        LEADER_REPLICAS: ("SET", "*"),
        FOLLOWER_REPLICAS: ("SET", "*"),
    }
    assert alter(kafka_admin, ConfigResourceType.TOPIC, "synced", topic) == "OK"
    rates = {LEADER_RATE: ("SET", "1"), FOLLOWER_RATE: ("SET", "1")}
    try:
        for broker_id in (1, 2, 3):
            assert alter(kafka_admin, ConfigResourceType.BROKER, str(broker_id), rates) == "OK"
        wait_for(  # every broker has applied the throttle
            lambda: [
                b.rm.image.broker_configs.get(b.broker_id, ()) for b in cluster.brokers.values()
            ],
            lambda seen: all(dict(c).get(LEADER_RATE) == "1" for c in seen),
        )
        wait_for(
            lambda: [dict(b.rm.image.topics["synced"].configs) for b in cluster.brokers.values()],
            lambda seen: all(c.get(FOLLOWER_REPLICAS) == "*" for c in seen),
        )
        # 1 B/s on every replica: the first fetches exceed it at once, yet every acks=all
        # send completes (no retries), because the followers are in the ISR
        produce(cluster, "synced", 300, 1_000, acks="all", retries=0)
        assert isr(kafka_admin, "synced") == [1, 2, 3]
    finally:
        unset = {LEADER_RATE: ("DELETE", None), FOLLOWER_RATE: ("DELETE", None)}
        for broker_id in (1, 2, 3):
            alter(kafka_admin, ConfigResourceType.BROKER, str(broker_id), unset)


@pytest.mark.parametrize(
    ("kind", "key", "good", "bad"),
    [
        (ConfigResourceType.BROKER, LEADER_RATE, "0", "-1"),
        (ConfigResourceType.BROKER, FOLLOWER_RATE, "1048576", "fast"),
        (ConfigResourceType.TOPIC, LEADER_REPLICAS, "0:1,0:2", "0-1"),
        (ConfigResourceType.TOPIC, FOLLOWER_REPLICAS, "*", "0:1,*"),
    ],
)
def test_throttle_configs_are_accepted_and_bad_values_are_invalid_config(
    cluster: Cluster,
    kafka_admin: KafkaAdminClient,
    kind: ConfigResourceType,
    key: str,
    good: str,
    bad: str,
) -> None:
    name = "1"
    if kind is ConfigResourceType.TOPIC:
        name = "validated"
        if name not in kafka_admin.list_topics():
            create(cluster, name, "1")
    try:
        assert alter(kafka_admin, kind, name, {key: ("SET", good)}) == "OK"
        answer = alter(kafka_admin, kind, name, {key: ("SET", bad)})
        assert "InvalidConfigurationError" in answer and key in answer  # INVALID_CONFIG, named
    finally:
        alter(kafka_admin, kind, name, {key: ("DELETE", None)})
