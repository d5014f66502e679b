"""``replog console-producer``, ``console-consumer`` and ``get-offsets`` against a live 3-broker
cluster, each effect checked with kafka-python (what it reads, what a group committed), bad
input included: a clear message on stderr, Kafka's exit status, nothing changed."""

from __future__ import annotations

import io
import json
import pathlib
import signal
import subprocess
import sys
import time
import warnings
from collections.abc import Iterator

import pytest

from replog import Cluster
from replog.cli import main
from tests.waiting import eventually

with warnings.catch_warnings():
    warnings.filterwarnings("ignore", ".*(read_text|open_text) is deprecated", DeprecationWarning)
    from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
    from kafka.admin import NewTopic

pytestmark = [
    pytest.mark.system,
    pytest.mark.timeout(120),
    pytest.mark.filterwarnings("ignore:.*(read_text|open_text) is deprecated:DeprecationWarning"),
]

SCRIPT = str(pathlib.Path(sys.executable).parent / "replog")
_names = iter(range(1, 10_000))


@pytest.fixture(scope="module")
def cluster() -> Iterator[Cluster]:
    with Cluster.local(3, test_mode=True) as c:
        yield c


@pytest.fixture
def topic(cluster: Cluster) -> str:
    name = f"console-{next(_names)}"
    admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap)
    admin.create_topics([NewTopic(name, 2, 3)])
    admin.close()
    return name


def read_all(cluster: Cluster, topic: str, count: int) -> list[tuple[bytes | None, bytes | None]]:
    consumer = KafkaConsumer(
        topic,
        bootstrap_servers=cluster.bootstrap,
        auto_offset_reset="earliest",
        consumer_timeout_ms=10_000,
    )
    try:
        got = [(r.key, r.value) for _, r in zip(range(count), consumer, strict=False)]
    finally:
        consumer.close()
    return sorted(got, key=lambda kv: kv[1] or b"")


def record_count(cluster: Cluster, topic: str) -> int:
    consumer = KafkaConsumer(bootstrap_servers=cluster.bootstrap)
    try:
        ends = consumer.end_offsets([TopicPartition(topic, p) for p in (0, 1)])
    finally:
        consumer.close()
    return sum(ends.values())


def produce(cluster: Cluster, topic: str, *values: bytes, partition: int = 0) -> None:
    producer = KafkaProducer(bootstrap_servers=cluster.bootstrap, acks="all")
    for value in values:
        producer.send(topic, value, key=b"k", partition=partition).get(timeout=30)
    producer.close()


def cli(monkeypatch: pytest.MonkeyPatch, stdin: str, *args: str) -> int:
    monkeypatch.setattr(sys, "stdin", io.StringIO(stdin))
    return main(list(args))


def usage_error(*args: str) -> int:
    with pytest.raises(SystemExit) as exit_:
        main(list(args))
    return int(exit_.value.code or 0)


# -- console-producer ----------------------------------------------------------------------------


def test_console_producer_sends_keys_values_and_nulls(
    cluster: Cluster, topic: str, monkeypatch: pytest.MonkeyPatch, tmp_path: pathlib.Path
) -> None:
    config = tmp_path / "producer.properties"
    config.write_text("# Kafka's keys\nlinger.ms=0\nclient.id=console-test\n")
    lines = "a:one\nb:two\nc:NULL\n"
    status = cli(
        monkeypatch,
        lines,
        *("console-producer", "--bootstrap-server", cluster.bootstrap, "--topic", topic),
        *("--property", "parse.key=true", "--property", "key.separator=:"),
        *("--property", "null.marker=NULL", "--producer.config", str(config)),
        *("--producer-property", "acks=all", "--sync"),
    )
    assert status == 0
    assert read_all(cluster, topic, 3) == [(b"c", None), (b"a", b"one"), (b"b", b"two")]


def test_console_producer_stops_at_a_line_without_a_separator(
    cluster: Cluster,
    topic: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    status = cli(
        monkeypatch,
        "k:sent\nno separator\nk:never\n",
        *("console-producer", "--bootstrap-server", cluster.bootstrap, "--topic", topic),
        *("--property", "parse.key=true", "--property", "key.separator=:"),
    )
    assert status == 1
    assert "no key separator found on line number 2" in capsys.readouterr().err
    assert read_all(cluster, topic, 1) == [(b"k", b"sent")]  # the line before it...
    assert record_count(cluster, topic) == 1  # ...and nothing after


def test_console_producer_bad_settings_are_usage_errors(
    cluster: Cluster, tmp_path: pathlib.Path, capsys: pytest.CaptureFixture[str]
) -> None:
    base = ("console-producer", "--bootstrap-server", cluster.bootstrap, "--topic", "unused")
    assert usage_error(*base, "--property", "parse.kee=true") == 2
    assert "unknown --property 'parse.kee'" in capsys.readouterr().err
    assert usage_error(*base, "--producer-property", "lingr.ms=5") == 2
    assert "unknown producer setting 'lingr.ms'" in capsys.readouterr().err
    assert usage_error(*base, "--producer-property", "linger.ms=soon") == 2
    assert "linger.ms='soon'" in capsys.readouterr().err
    broken = tmp_path / "broken.properties"
    broken.write_text("linger.ms 5\n")
    assert usage_error(*base, "--producer.config", str(broken)) == 2
    assert "line 1" in capsys.readouterr().err
    assert usage_error(*base, "--command-config", str(tmp_path / "missing")) == 2
    assert "cannot read" in capsys.readouterr().err
    assert usage_error(*base, "--producer-property", "security.protocol=SSL") == 2
    assert "PLAINTEXT only" in capsys.readouterr().err


def test_console_producer_reports_a_cluster_that_is_down(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    status = cli(
        monkeypatch,
        "lost\n",
        *("console-producer", "--bootstrap-server", "127.0.0.1:1", "--topic", "t"),
        *(
            "--producer-property",
            "max.block.ms=500",
            "--producer-property",
            "delivery.timeout.ms=1000",
        ),
    )
    err = capsys.readouterr().err
    assert status == 1
    assert err.startswith("replog console-producer: ") and "Traceback" not in err


# -- console-consumer ----------------------------------------------------------------------------


def test_console_consumer_prints_with_kafkas_formatter(
    cluster: Cluster, topic: str, capsys: pytest.CaptureFixture[str]
) -> None:
    produce(cluster, topic, b"first", b"second")
    status = main(
        [
            *("console-consumer", "--bootstrap-server", cluster.bootstrap, "--topic", topic),
            *("--from-beginning", "--max-messages", "2"),
            *("--property", "print.key=true", "--property", "print.offset=true"),
            *("--property", "print.partition=true", "--property", "print.headers=true"),
        ]
    )
    out, err = capsys.readouterr()
    assert status == 0
    assert out.splitlines() == [
        "Partition:0\tOffset:0\tNO_HEADERS\tk\tfirst",
        "Partition:0\tOffset:1\tNO_HEADERS\tk\tsecond",
    ]
    assert "Processed a total of 2 messages" in err


def test_console_consumer_commits_the_groups_offsets(
    cluster: Cluster, topic: str, capsys: pytest.CaptureFixture[str]
) -> None:
    produce(cluster, topic, b"a", b"b", b"c")
    args = ["console-consumer", "--bootstrap-server", cluster.bootstrap, "--topic", topic]
    assert main([*args, "--group", "console-g", "--from-beginning", "--max-messages", "3"]) == 0
    assert capsys.readouterr().out.splitlines() == ["a", "b", "c"]
    checker = KafkaConsumer(bootstrap_servers=cluster.bootstrap, group_id="console-g")
    try:
        assert checker.committed(TopicPartition(topic, 0)) == 3
    finally:
        checker.close()
    # The group resumes after its commit: nothing new, so the timeout ends it.
    assert main([*args, "--group", "console-g", "--timeout-ms", "1000"]) == 0
    out, err = capsys.readouterr()
    assert out == "" and "Timed out after 1000 ms" in err


def test_console_consumer_reads_one_partition_from_an_offset(
    cluster: Cluster, topic: str, capsys: pytest.CaptureFixture[str]
) -> None:
    produce(cluster, topic, b"p1-0", b"p1-1", b"p1-2", partition=1)
    status = main(
        [
            *("console-consumer", "--bootstrap-server", cluster.bootstrap, "--topic", topic),
            *("--partition", "1", "--offset", "1", "--timeout-ms", "1000"),
        ]
    )
    assert status == 0
    assert capsys.readouterr().out.splitlines() == ["p1-1", "p1-2"]


def test_console_consumer_includes_topics_by_regex(
    cluster: Cluster, capsys: pytest.CaptureFixture[str]
) -> None:
    admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap)
    admin.create_topics([NewTopic("inc-a", 1, 1), NewTopic("inc-b", 1, 1), NewTopic("exc-c", 1, 1)])
    admin.close()
    for name in ("inc-a", "inc-b", "exc-c"):
        produce(cluster, name, name.encode())
    status = main(
        [
            *("console-consumer", "--bootstrap-server", cluster.bootstrap),
            *("--include", "inc-.*", "--from-beginning", "--timeout-ms", "1500"),
        ]
    )
    assert status == 0
    assert sorted(capsys.readouterr().out.splitlines()) == ["inc-a", "inc-b"]


def test_console_consumer_errors(cluster: Cluster, capsys: pytest.CaptureFixture[str]) -> None:
    base = ["console-consumer", "--bootstrap-server", cluster.bootstrap]
    assert main([*base, "--topic", "no-such-topic", "--timeout-ms", "100"]) == 1
    assert "topic 'no-such-topic' does not exist" in capsys.readouterr().err
    assert usage_error(*base, "--topic", "t", "--partition", "0", "--group", "g") == 2
    assert usage_error(*base, "--topic", "t", "--offset", "5") == 2
    assert usage_error(*base, "--include", "(") == 2
    assert usage_error(*base, "--topic", "t", "--property", "print.kee=true") == 2
    assert "unknown --property 'print.kee'" in capsys.readouterr().err


def test_console_consumer_commits_and_exits_0_on_sigint(cluster: Cluster, topic: str) -> None:
    produce(cluster, topic, b"before-sigint")
    child = subprocess.Popen(
        [
            *(SCRIPT, "console-consumer", "--bootstrap-server", cluster.bootstrap),
            *("--topic", topic, "--group", "sigint-g", "--from-beginning"),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert child.stdout is not None
    assert child.stdout.readline() == "before-sigint\n"
    child.send_signal(signal.SIGINT)
    _, err = child.communicate(timeout=60)
    assert child.returncode == 0, err
    assert "Processed a total of 1 messages" in err and "Traceback" not in err
    checker = KafkaConsumer(bootstrap_servers=cluster.bootstrap, group_id="sigint-g")
    try:
        assert checker.committed(TopicPartition(topic, 0)) == 1
    finally:
        checker.close()


# -- get-offsets ---------------------------------------------------------------------------------


def test_get_offsets_latest_earliest_by_time_and_max_timestamp(
    cluster: Cluster, topic: str, capsys: pytest.CaptureFixture[str]
) -> None:
    producer = KafkaProducer(bootstrap_servers=cluster.bootstrap, acks="all")
    for n, ts in enumerate((1_000, 5_000, 3_000)):
        producer.send(topic, b"v%d" % n, partition=0, timestamp_ms=ts).get(timeout=30)
    producer.close()
    base = ["get-offsets", "--bootstrap-server", cluster.bootstrap, "--topic", topic]

    def offsets(*args: str) -> list[str]:
        assert main([*base, *args]) == 0
        return capsys.readouterr().out.splitlines()

    assert offsets() == [f"{topic}:0:3", f"{topic}:1:0"]
    assert offsets("--time", "earliest", "--partitions", "0") == [f"{topic}:0:0"]
    assert offsets("--time", "2000", "--partitions", "0") == [f"{topic}:0:1"]
    assert offsets("--time", "-3", "--partitions", "0") == [f"{topic}:0:1"]  # ts 5000
    admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap)
    admin.delete_records({TopicPartition(topic, 0): 2})
    admin.close()
    eventually(
        lambda: offsets("--time", "-2", "--partitions", "0"),
        what="log start moved",
        done=lambda lines: lines == [f"{topic}:0:2"],
    )
    assert main([*base, "--output", "json", "--partitions", "1"]) == 0
    document = json.loads(capsys.readouterr().out)
    assert document == {"offsets": [{"topic": topic, "partition": 1, "offset": 0}]}


def test_get_offsets_errors(cluster: Cluster, capsys: pytest.CaptureFixture[str]) -> None:
    base = ["get-offsets", "--bootstrap-server", cluster.bootstrap]
    assert main([*base, "--topic", "no-such-topic"]) == 1
    assert "no topic matches 'no-such-topic'" in capsys.readouterr().err
    assert usage_error(*base, "--time", "yesterday") == 2
    assert "is not -1/latest" in capsys.readouterr().err
    assert usage_error(*base, "--partitions", "a,b") == 2
    started = time.monotonic()
    down = subprocess.run(
        [SCRIPT, "get-offsets", "--bootstrap-server", "127.0.0.1:1", "--topic", "t"],
        capture_output=True,
        text=True,
        timeout=90,
        check=False,
    )
    assert down.returncode == 1 and down.stderr.startswith("replog get-offsets: ")
    assert "Traceback" not in down.stderr and time.monotonic() - started < 90
