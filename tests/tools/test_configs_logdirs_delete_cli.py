"""``replog configs``, ``log-dirs`` and ``delete-records`` against a live 3-broker cluster, each
effect checked with kafka-python's admin client and consumer, bad input included (an unknown
key, a missing topic or broker, a malformed file): clear message, exit status, nothing changed."""

from __future__ import annotations

import json
import pathlib
import sys
import warnings
from collections.abc import Iterator
from typing import Any

import pytest

from replog import Cluster
from replog.cli import main
from replog.tools.configs import parse_add_config
from replog.tools.delete_records import parse_offsets

with warnings.catch_warnings():
    warnings.filterwarnings("ignore", ".*(read_text|open_text) is deprecated", DeprecationWarning)
    from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
    from kafka.admin import ConfigResource, ConfigResourceType, NewTopic

pytestmark = [
    pytest.mark.system,
    pytest.mark.timeout(120),
    pytest.mark.filterwarnings("ignore:.*(read_text|open_text) is deprecated:DeprecationWarning"),
]

_names = iter(range(1, 10_000))


@pytest.fixture(scope="module")
def cluster() -> Iterator[Cluster]:
    with Cluster.local(3, test_mode=True) as c:
        yield c


@pytest.fixture(scope="module")
def kafka_admin(cluster: Cluster) -> Iterator[KafkaAdminClient]:
    client = KafkaAdminClient(bootstrap_servers=cluster.bootstrap, request_timeout_ms=20_000)
    yield client
    client.close()


@pytest.fixture
def topic(kafka_admin: KafkaAdminClient) -> str:
    name = f"cfg-{next(_names)}"
    kafka_admin.create_topics([NewTopic(name, 2, 3)])
    return name


def topic_configs(kafka_admin: KafkaAdminClient, name: str) -> dict[str, Any]:
    resource = ConfigResource(ConfigResourceType.TOPIC, name)
    entries = kafka_admin.describe_configs([resource], config_filter="all")["topic"][name]
    return {k: v["value"] for k, v in entries.items()}


def broker_config(kafka_admin: KafkaAdminClient, broker: int, key: str) -> str | None:
    resource = ConfigResource(ConfigResourceType.BROKER, str(broker))
    entries = kafka_admin.describe_configs([resource], config_filter="all")["broker"][str(broker)]
    entry = entries.get(key)
    return None if entry is None else entry["value"]


def configs(cluster: Cluster, *args: str) -> int:
    return main(["configs", "--bootstrap-server", cluster.bootstrap, *args])


def usage_error(*args: str) -> int:
    with pytest.raises(SystemExit) as exit_:
        main(list(args))
    return int(exit_.value.code or 0)


# -- configs -------------------------------------------------------------------------------------


def test_add_config_parses_kafkas_bracket_syntax() -> None:
    assert parse_add_config("a=1,b=[x,y],c=2") == {"a": "1", "b": "x,y", "c": "2"}
    with pytest.raises(ValueError, match="not closed"):
        parse_add_config("b=[x,y")
    with pytest.raises(ValueError, match="is not KEY=VALUE"):
        parse_add_config("novalue")


def test_alter_and_describe_a_topics_configs(
    cluster: Cluster, kafka_admin: KafkaAdminClient, topic: str, capsys: pytest.CaptureFixture[str]
) -> None:
    status = configs(
        cluster,
        *("--alter", "--entity-type", "topics", "--entity-name", topic),
        *("--add-config", "retention.ms=60000,cleanup.policy=[compact,delete]"),
    )
    assert status == 0
    assert capsys.readouterr().out == f"Completed updating config for topic {topic}.\n"
    seen = topic_configs(kafka_admin, topic)
    assert seen["retention.ms"] == "60000" and seen["cleanup.policy"] == "compact,delete"
    assert configs(cluster, "--describe", "--topic", topic) == 0
    assert capsys.readouterr().out.splitlines() == [
        f"Dynamic configs for topic {topic} are:",
        "  cleanup.policy=compact,delete sensitive=false "
        "synonyms={DYNAMIC_TOPIC_CONFIG:cleanup.policy=compact,delete}",
        "  retention.ms=60000 sensitive=false synonyms={DYNAMIC_TOPIC_CONFIG:retention.ms=60000}",
    ]
    assert configs(cluster, "--alter", "--topic", topic, "--delete-config", "retention.ms") == 0
    capsys.readouterr()
    assert topic_configs(kafka_admin, topic)["retention.ms"] != "60000"
    assert configs(cluster, "--describe", "--topic", topic, "--all", "--output", "json") == 0
    document = json.loads(capsys.readouterr().out)
    sources = {c["name"]: c["source"] for c in document["entities"][0]["configs"]}
    assert sources["cleanup.policy"] == "DYNAMIC_TOPIC_CONFIG"
    assert sources["retention.ms"] != "DYNAMIC_TOPIC_CONFIG" and len(sources) > 5


def test_alter_a_broker_and_the_cluster_default(
    cluster: Cluster, kafka_admin: KafkaAdminClient, capsys: pytest.CaptureFixture[str]
) -> None:
    assert (
        configs(cluster, "--alter", "--broker", "2", "--add-config", "log.retention.ms=7200000")
        == 0
    )
    assert capsys.readouterr().out == "Completed updating config for broker 2.\n"
    assert broker_config(kafka_admin, 2, "log.retention.ms") == "7200000"
    assert (
        configs(
            cluster,
            "--alter",
            "--entity-type",
            "brokers",
            "--entity-default",
            "--add-config",
            "log.retention.ms=3600000",
        )
        == 0
    )
    assert "default config for brokers" in capsys.readouterr().out
    assert broker_config(kafka_admin, 3, "log.retention.ms") == "3600000"
    assert broker_config(kafka_admin, 2, "log.retention.ms") == "7200000"  # its own wins
    assert configs(cluster, "--describe", "--broker-defaults") == 0
    assert (
        capsys.readouterr().out.splitlines()[0] == "Default configs for brokers in the cluster are:"
    )
    for target in (["--broker", "2"], ["--broker-defaults"]):
        assert configs(cluster, "--alter", *target, "--delete-config", "log.retention.ms") == 0
    capsys.readouterr()
    assert broker_config(kafka_admin, 2, "log.retention.ms") not in ("7200000", "3600000")


def test_a_bad_key_changes_nothing(
    cluster: Cluster, kafka_admin: KafkaAdminClient, topic: str, capsys: pytest.CaptureFixture[str]
) -> None:
    before = topic_configs(kafka_admin, topic)
    status = configs(
        cluster, "--alter", "--topic", topic, "--add-config", "retention.ms=1000,no.such.key=1"
    )
    err = capsys.readouterr().err
    assert status == 1 and err.startswith("replog configs: ") and "no.such.key" in err
    assert topic_configs(kafka_admin, topic) == before


def test_configs_errors(cluster: Cluster, capsys: pytest.CaptureFixture[str]) -> None:
    assert configs(cluster, "--describe", "--topic", "no-such-topic") == 1
    assert "topic 'no-such-topic' does not exist" in capsys.readouterr().err
    assert configs(cluster, "--alter", "--topic", "no-such-topic", "--add-config", "a=1") == 1
    capsys.readouterr()
    assert configs(cluster, "--describe", "--broker", "9") == 1
    assert "broker 9" in capsys.readouterr().err
    assert configs(cluster, "--describe", "--entity-type", "users") == 1
    assert "replog has no users" in capsys.readouterr().err
    base = ("configs", "--bootstrap-server", cluster.bootstrap)
    assert usage_error(*base, "--alter", "--topic", "t") == 2
    assert usage_error(*base, "--describe", "--topic", "t", "--add-config", "a=1") == 2
    assert usage_error(*base, "--describe") == 2
    assert (
        usage_error(*base, "--alter", "--topic", "t", "--add-config", "a=1", "--delete-config", "a")
        == 2
    )


# -- log-dirs ------------------------------------------------------------------------------------


def test_log_dirs_describes_every_broker(
    cluster: Cluster, topic: str, capsys: pytest.CaptureFixture[str]
) -> None:
    producer = KafkaProducer(bootstrap_servers=cluster.bootstrap, acks="all")
    producer.send(topic, b"x" * 1000, partition=0).get(timeout=30)
    producer.close()
    args = ["log-dirs", "--bootstrap-server", cluster.bootstrap, "--describe"]
    assert main([*args, "--topic-list", topic]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "Querying brokers for log directories information"
    assert lines[1] == "Received log directory information from brokers 1,2,3"
    document = json.loads(lines[2])
    assert [b["broker"] for b in document["brokers"]] == [1, 2, 3]
    for broker in document["brokers"]:
        (log_dir,) = broker["logDirs"]
        assert log_dir["error"] is None
        assert pathlib.Path(log_dir["logDir"]).is_dir()  # the dir on disk
        parts = {p["partition"]: p for p in log_dir["partitions"]}
        assert set(parts) == {f"{topic}-0", f"{topic}-1"}  # RF 3: every broker has both
        assert parts[f"{topic}-0"]["size"] > 1000
    assert main([*args, "--broker-list", "2", "--output", "json"]) == 0
    assert [b["broker"] for b in json.loads(capsys.readouterr().out)["brokers"]] == [2]
    assert main([*args, "--broker-list", "9"]) == 1
    assert "brokers [9] are not in the cluster" in capsys.readouterr().err
    assert usage_error(*args, "--broker-list", "one") == 2


# -- delete-records ------------------------------------------------------------------------------


def offsets_file(tmp_path: pathlib.Path, document: object) -> str:
    path = tmp_path / "offsets.json"
    path.write_text(document if isinstance(document, str) else json.dumps(document))
    return str(path)


def test_delete_records_moves_the_log_start(
    cluster: Cluster, topic: str, tmp_path: pathlib.Path, capsys: pytest.CaptureFixture[str]
) -> None:
    producer = KafkaProducer(bootstrap_servers=cluster.bootstrap, acks="all")
    for n in range(5):
        producer.send(topic, b"%d" % n, partition=0).get(timeout=30)
    producer.close()
    file = offsets_file(
        tmp_path, {"partitions": [{"topic": topic, "partition": 0, "offset": 3}], "version": 1}
    )
    assert (
        main(
            ["delete-records", "--bootstrap-server", cluster.bootstrap, "--offset-json-file", file]
        )
        == 0
    )
    assert capsys.readouterr().out.splitlines() == [
        "Executing records delete operation",
        "Records delete operation completed:",
        f"partition: {topic}-0\tlow_watermark: 3",
    ]
    consumer = KafkaConsumer(bootstrap_servers=cluster.bootstrap)
    try:
        assert consumer.beginning_offsets([TopicPartition(topic, 0)]) == {
            TopicPartition(topic, 0): 3
        }
    finally:
        consumer.close()


def test_delete_records_checks_everything_first(
    cluster: Cluster, topic: str, tmp_path: pathlib.Path, capsys: pytest.CaptureFixture[str]
) -> None:
    producer = KafkaProducer(bootstrap_servers=cluster.bootstrap, acks="all")
    producer.send(topic, b"keep", partition=1).get(timeout=30)
    producer.close()
    base = ["delete-records", "--bootstrap-server", cluster.bootstrap, "--offset-json-file"]
    entries = [
        {"topic": topic, "partition": 1, "offset": -1},
        {"topic": topic, "partition": 7, "offset": 1},
    ]
    assert main([*base, offsets_file(tmp_path, {"partitions": entries})]) == 1
    assert f"topic {topic!r} has no partition 7; nothing was deleted" in capsys.readouterr().err
    consumer = KafkaConsumer(bootstrap_servers=cluster.bootstrap)
    try:
        assert consumer.beginning_offsets([TopicPartition(topic, 1)]) == {
            TopicPartition(topic, 1): 0
        }
    finally:
        consumer.close()
    assert usage_error(*base, offsets_file(tmp_path, "{not json")) == 2
    assert "not JSON" in capsys.readouterr().err
    assert usage_error(*base, str(tmp_path / "missing.json")) == 2
    with pytest.raises(ValueError, match="listed twice"):
        parse_offsets(json.dumps({"partitions": [{"topic": "t", "partition": 0, "offset": 1}] * 2}))
    with pytest.raises(ValueError, match="offset must be"):
        parse_offsets(json.dumps({"partitions": [{"topic": "t", "partition": 0, "offset": -5}]}))


def test_the_new_tools_run_as_the_installed_script(cluster: Cluster, topic: str) -> None:
    import subprocess

    script = str(pathlib.Path(sys.executable).parent / "replog")
    done = subprocess.run(
        [
            script,
            "configs",
            "--bootstrap-server",
            cluster.bootstrap,
            "--describe",
            "--topic",
            topic,
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert (done.returncode, done.stderr) == (0, "")
    assert done.stdout == f"Dynamic configs for topic {topic} are:\n"
