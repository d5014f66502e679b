"""``replog topics`` against a live 3-broker cluster, each effect checked with an independent
Kafka client (kafka-python's ``KafkaAdminClient`` and ``KafkaConsumer``), not with replog's own
reads. Commands run through ``replog.cli.main`` and, once, as the installed ``replog`` script in
a child process (exit statuses and streams as a shell sees them)."""

from __future__ import annotations

import json
import pathlib
import subprocess
import sys
import warnings
from collections.abc import Iterator
from typing import Any, TypeVar

import pytest

from replog import Cluster
from replog.cli import main
from replog.tools.topics import parse_configs, parse_replica_assignment
from tests.waiting import wait_for

with warnings.catch_warnings():
    warnings.filterwarnings("ignore", ".*(read_text|open_text) is deprecated", DeprecationWarning)
    from kafka import KafkaAdminClient, KafkaConsumer
    from kafka.admin import ConfigResource, ConfigResourceType

pytestmark = [
    pytest.mark.system,
    pytest.mark.timeout(120),
    pytest.mark.filterwarnings("ignore:.*(read_text|open_text) is deprecated:DeprecationWarning"),
]

T = TypeVar("T")


@pytest.fixture(scope="module")
def cluster() -> Iterator[Cluster]:
    with Cluster.local(3) as c:
        yield c


@pytest.fixture(scope="module")
def kafka_admin(cluster: Cluster) -> Iterator[KafkaAdminClient]:
    client = KafkaAdminClient(bootstrap_servers=cluster.bootstrap, request_timeout_ms=20_000)
    yield client
    client.close()


def topics(cluster: Cluster, *args: str) -> int:
    return main(["topics", "--bootstrap-server", cluster.bootstrap, *args])


def described(kafka_admin: KafkaAdminClient, name: str) -> dict[str, Any]:
    (topic,) = kafka_admin.describe_topics([name])
    return dict(topic)


def exists(kafka_admin: KafkaAdminClient, name: str) -> dict[str, Any]:
    return wait_for(lambda: described(kafka_admin, name), lambda t: t["error_code"] == 0)


def test_create_with_partitions_replication_factor_and_configs(
    cluster: Cluster, kafka_admin: KafkaAdminClient, capsys: pytest.CaptureFixture[str]
) -> None:
    status = topics(
        cluster,
        *("--create", "--topic", "made", "--partitions", "3", "--replication-factor", "2"),
        *("--config", "min.insync.replicas=2", "--config", "retention.ms=3600000"),
    )
    assert status == 0
    assert capsys.readouterr().out == "Created topic made.\n"
    topic = exists(kafka_admin, "made")
    assert sorted(p["partition_index"] for p in topic["partitions"]) == [0, 1, 2]
    assert all(len(set(p["replica_nodes"])) == 2 for p in topic["partitions"])
    resource = ConfigResource(ConfigResourceType.TOPIC, "made")
    configs = kafka_admin.describe_configs([resource], config_filter="all")["topic"]["made"]
    assert configs["min.insync.replicas"]["value"] == "2"
    assert configs["retention.ms"]["value"] == "3600000"


def test_create_with_replica_assignment_places_the_replicas(
    cluster: Cluster, kafka_admin: KafkaAdminClient
) -> None:
    assert topics(cluster, "--create", "--topic", "placed", "--replica-assignment", "1:2,2:3") == 0
    topic = exists(kafka_admin, "placed")
    replicas = {p["partition_index"]: p["replica_nodes"] for p in topic["partitions"]}
    assert replicas == {0: [1, 2], 1: [2, 3]}


def test_create_of_an_existing_topic_fails_unless_if_not_exists(
    cluster: Cluster, capsys: pytest.CaptureFixture[str]
) -> None:
    args = ("--create", "--topic", "twice", "--partitions", "1", "--replication-factor", "1")
    assert topics(cluster, *args) == 0
    capsys.readouterr()
    assert topics(cluster, *args) == 1
    err = capsys.readouterr().err
    assert err.startswith("replog topics: ") and "TOPIC_ALREADY_EXISTS" in err
    assert topics(cluster, *args, "--if-not-exists") == 0


def test_alter_adds_partitions(cluster: Cluster, kafka_admin: KafkaAdminClient) -> None:
    create = ["--create", "--topic", "grow", "--partitions", "1", "--replication-factor", "3"]
    assert topics(cluster, *create) == 0
    exists(kafka_admin, "grow")
    assert topics(cluster, "--alter", "--topic", "grow", "--partitions", "4") == 0

    def partitions() -> set[int] | None:
        consumer = KafkaConsumer(bootstrap_servers=cluster.bootstrap)  # fresh metadata each time
        try:
            return consumer.partitions_for_topic("grow")
        finally:
            consumer.close()

    assert wait_for(partitions, lambda p: p == {0, 1, 2, 3}) == {0, 1, 2, 3}


def test_delete_removes_every_matching_topic(
    cluster: Cluster, kafka_admin: KafkaAdminClient, capsys: pytest.CaptureFixture[str]
) -> None:
    for name in ("doomed-a", "doomed-b", "kept"):
        assert topics(cluster, "--create", "--topic", name, "--replica-assignment", "1") == 0
        exists(kafka_admin, name)
    capsys.readouterr()
    assert topics(cluster, "--delete", "--topic", "doomed-.*", "--output", "json") == 0
    assert json.loads(capsys.readouterr().out) == {"deleted": ["doomed-a", "doomed-b"]}
    for name in ("doomed-a", "doomed-b"):
        wait_for(lambda n=name: described(kafka_admin, n), lambda t: t["error_code"] != 0)
    assert "kept" in kafka_admin.list_topics()


def test_delete_of_a_missing_topic_fails_unless_if_exists(
    cluster: Cluster, capsys: pytest.CaptureFixture[str]
) -> None:
    assert topics(cluster, "--delete", "--topic", "never-made") == 1
    assert capsys.readouterr().err == "replog topics: no topic matches 'never-made'\n"
    assert topics(cluster, "--delete", "--topic", "never-made", "--if-exists") == 0


def test_list_prints_what_kafka_python_lists(
    cluster: Cluster, kafka_admin: KafkaAdminClient, capsys: pytest.CaptureFixture[str]
) -> None:
    assert topics(cluster, "--create", "--topic", "listed", "--replica-assignment", "3:1") == 0
    exists(kafka_admin, "listed")
    capsys.readouterr()
    assert topics(cluster, "--list", "--output", "json") == 0
    listed = json.loads(capsys.readouterr().out)["topics"]
    assert set(listed) == set(kafka_admin.list_topics()) and "listed" in listed
    assert topics(cluster, "--list") == 0
    assert capsys.readouterr().out.splitlines() == listed


def test_describe_shows_leader_replicas_and_isr_as_kafka_python_sees_them(
    cluster: Cluster, kafka_admin: KafkaAdminClient, capsys: pytest.CaptureFixture[str]
) -> None:
    assert topics(cluster, "--create", "--topic", "shown", "--replica-assignment", "1:2,2:3") == 0
    kafka = {p["partition_index"]: p for p in exists(kafka_admin, "shown")["partitions"]}
    wait_for(
        lambda: described(kafka_admin, "shown"),
        lambda t: all(len(p["isr_nodes"]) == 2 for p in t["partitions"]),
    )
    kafka = {p["partition_index"]: p for p in described(kafka_admin, "shown")["partitions"]}
    capsys.readouterr()
    assert topics(cluster, "--describe", "--topic", "shown", "--output", "json") == 0
    (topic,) = json.loads(capsys.readouterr().out)["topics"]
    assert topic["name"] == "shown"
    for part in topic["partitions"]:
        theirs = kafka[part["partition"]]
        assert part["leader"] == theirs["leader_id"]
        assert part["replicas"] == theirs["replica_nodes"]
        assert sorted(part["isr"]) == sorted(theirs["isr_nodes"])
    assert topics(cluster, "--describe", "--topic", "shown") == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "Topic: shown\tPartitionCount: 2\tReplicationFactor: 2"
    assert lines[1].startswith("\tTopic: shown\tPartition: 0\tLeader: ")
    assert "\tReplicas: 1,2\tIsr: " in lines[1]
    assert topics(cluster, "--describe", "--output", "json") == 0  # no --topic: every topic
    every = {t["name"] for t in json.loads(capsys.readouterr().out)["topics"]}
    assert "shown" in every and every >= set(kafka_admin.list_topics())


@pytest.mark.parametrize(
    "args",
    [
        ["--create", "--topic", "x", "--partitions", "1"],  # no replication factor
        ["--create", "--topic", "x", "--replica-assignment", "1:2,3"],  # unequal sizes
        ["--create", "--topic", "x", "--replica-assignment", "1", "--partitions", "1"],
        ["--create", "--partitions", "1", "--replication-factor", "1"],  # no topic
        ["--alter", "--topic", "x"],  # nothing to alter
        ["--list", "--delete-config", "a"],
        ["--describe", "--topic", "x", "--config", "a=b"],
        ["--delete", "--topic", "x", "--config", "a=b"],
        ["--list", "--under-replicated-partitions"],
        ["--describe", "--topic", "x", "--under-min-isr-partitions", "--unavailable-partitions"],
        ["--list", "--describe"],
        ["--topic", "x"],  # no action
    ],
)
def test_usage_errors_exit_2_without_touching_the_cluster(
    args: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["topics", "--bootstrap-server", "127.0.0.1:1", *args])
    assert exit_.value.code == 2
    assert "usage: replog topics" in capsys.readouterr().err


@pytest.mark.parametrize("bootstrap", ["localhost", "host:port", ":9092", "a:1,b", ""])
def test_a_malformed_bootstrap_server_is_a_usage_error(
    bootstrap: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["topics", "--bootstrap-server", bootstrap, "--list"])
    assert exit_.value.code == 2
    assert "is not host:port" in capsys.readouterr().err


def test_an_unreachable_cluster_fails_with_exit_1(capsys: pytest.CaptureFixture[str]) -> None:
    args = ["topics", "--bootstrap-server", "127.0.0.1:1", "--list", "--timeout-ms", "2000"]
    assert main(args) == 1
    err = capsys.readouterr().err
    assert err.startswith("replog topics: ") and "127.0.0.1:1" in err


def test_parse_replica_assignment() -> None:
    assert parse_replica_assignment("1:2, 2:3,3:1") == [[1, 2], [2, 3], [3, 1]]
    with pytest.raises(ValueError, match="twice"):
        parse_replica_assignment("1:1")


def test_the_installed_script_runs_topics_in_a_child_process(
    cluster: Cluster, kafka_admin: KafkaAdminClient
) -> None:
    script = str(pathlib.Path(sys.executable).parent / "replog")
    base = [script, "topics", "--bootstrap-server", cluster.bootstrap]
    made = subprocess.run(
        [*base, "--create", "--topic", "scripted", "--replica-assignment", "2:3"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert (made.returncode, made.stdout, made.stderr) == (0, "Created topic scripted.\n", "")
    assert exists(kafka_admin, "scripted")["partitions"][0]["replica_nodes"] == [2, 3]
    missing = subprocess.run(
        [*base, "--describe", "--topic", "no-such-topic"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert missing.returncode == 1 and "no topic matches" in missing.stderr
    usage = subprocess.run(
        [*base, "--create"], capture_output=True, text=True, timeout=60, check=False
    )
    assert usage.returncode == 2 and "usage:" in usage.stderr


def describe_json(cluster: Cluster, capsys: pytest.CaptureFixture[str], *args: str) -> Any:
    assert topics(cluster, "--describe", "--topic", ".*", "--output", "json", *args) == 0
    return [
        (t["name"], p["partition"])
        for t in json.loads(capsys.readouterr().out)["topics"]
        for p in t["partitions"]
    ]


def test_describe_filters_follow_a_killed_broker(
    tmp_path: pathlib.Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with Cluster.local(3, base_dir=str(tmp_path)) as cluster:
        assert (
            topics(cluster, "--create", "--topic", "spread", "--replica-assignment", "1:3,1:2") == 0
        )
        assert topics(cluster, "--create", "--topic", "lonely", "--replica-assignment", "3") == 0
        strict = ("--replica-assignment", "2:3", "--config", "min.insync.replicas=2")
        assert topics(cluster, "--create", "--topic", "strict", *strict) == 0
        capsys.readouterr()
        healthy = wait_for(
            lambda: describe_json(cluster, capsys, "--under-replicated-partitions"),
            lambda found: found == [],
        )
        assert healthy == [] and describe_json(cluster, capsys, "--unavailable-partitions") == []
        assert describe_json(cluster, capsys, "--under-min-isr-partitions") == []
        # ISR size == min.insync.replicas (1 by default; 2 for strict)
        at_min = describe_json(cluster, capsys, "--at-min-isr-partitions")
        assert at_min == [("lonely", 0), ("strict", 0)]
        cluster.kill(3)
        under = wait_for(
            lambda: describe_json(cluster, capsys, "--under-replicated-partitions"),
            lambda found: ("spread", 0) in found,
        )
        assert ("spread", 1) not in under  # brokers 1 and 2 are alive
        kafka_admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap)
        try:
            (spread,) = kafka_admin.describe_topics(["spread"])
            isr = {p["partition_index"]: p["isr_nodes"] for p in spread["partitions"]}
            assert isr[0] == [1] and sorted(isr[1]) == [1, 2]
        finally:
            kafka_admin.close()
        unavailable = wait_for(
            lambda: describe_json(cluster, capsys, "--unavailable-partitions"),
            lambda found: ("lonely", 0) in found,
        )
        assert unavailable == [("lonely", 0)]
        under_min = wait_for(
            lambda: describe_json(cluster, capsys, "--under-min-isr-partitions"),
            lambda found: ("strict", 0) in found,
        )
        assert under_min == [("lonely", 0), ("strict", 0)]  # leaderless counts, as in Kafka
        at_min = describe_json(cluster, capsys, "--at-min-isr-partitions")
        assert ("spread", 0) in at_min and ("spread", 1) not in at_min
        assert topics(cluster, "--describe", "--topic", "lonely", "--unavailable-partitions") == 0
        assert "\tLeader: none\t" in capsys.readouterr().out


def confluent_configs(cluster: Cluster, name: str) -> dict[str, Any]:
    """``name``'s configs as confluent-kafka's AdminClient describes them."""
    from confluent_kafka.admin import AdminClient, ConfigResource

    client = AdminClient({"bootstrap.servers": cluster.bootstrap})
    (future,) = client.describe_configs([ConfigResource("topic", name)]).values()
    return dict(future.result(timeout=20))


def test_alter_sets_and_deletes_configs_as_confluent_kafka_sees_them(
    cluster: Cluster, kafka_admin: KafkaAdminClient, capsys: pytest.CaptureFixture[str]
) -> None:
    create = ["--create", "--topic", "tuned", "--replica-assignment", "1:2:3"]
    kept = ["--config", "max.message.bytes=500000"]
    assert topics(cluster, *create, *kept, "--config", "min.insync.replicas=2") == 0
    exists(kafka_admin, "tuned")
    before = confluent_configs(cluster, "tuned")
    assert before["min.insync.replicas"].value == "2"
    default_retention_ms = before["retention.ms"].value
    capsys.readouterr()
    alter = ["--alter", "--topic", "tuned", "--output", "json"]
    changes = ["--config", "retention.ms=7200000,segment.ms=600000"]
    assert topics(cluster, *alter, *changes, "--delete-config", "min.insync.replicas") == 0
    assert json.loads(capsys.readouterr().out) == {
        "altered": ["tuned"],
        "partitions": None,
        "configs": {"retention.ms": "7200000", "segment.ms": "600000"},
        "deleted_configs": ["min.insync.replicas"],
    }
    after = wait_for(
        lambda: confluent_configs(cluster, "tuned"),
        lambda c: c["retention.ms"].value == "7200000",
    )
    assert after["segment.ms"].value == "600000"
    assert after["min.insync.replicas"].value == "1" and after["min.insync.replicas"].is_default
    assert after["max.message.bytes"].value == "500000"  # not named: kept
    assert default_retention_ms != "7200000"
    assert topics(cluster, "--alter", "--topic", "tuned", "--config", "no.such.key=1") == 1
    assert "INVALID_CONFIG" in capsys.readouterr().err


def test_config_values_may_hold_commas() -> None:
    parsed = parse_configs(["cleanup.policy=compact,delete,retention.ms=5", "a=b"])
    assert parsed == {"cleanup.policy": "compact,delete", "retention.ms": "5", "a": "b"}
