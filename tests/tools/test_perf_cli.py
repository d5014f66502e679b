"""``replog producer-perf-test`` and ``consumer-perf-test`` on a live cluster: Kafka's output
lines, their records checked with kafka-python, and bad input."""

from __future__ import annotations

import json
import pathlib
import re
import warnings
from collections.abc import Iterator

import pytest

from replog import Cluster
from replog.cli import main
from replog.tools.consumer_perf import HEADER

with warnings.catch_warnings():
    warnings.filterwarnings("ignore", ".*(read_text|open_text) is deprecated", DeprecationWarning)
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition

pytestmark = [
    pytest.mark.system,
    pytest.mark.timeout(120),
    pytest.mark.filterwarnings("ignore:.*(read_text|open_text) is deprecated:DeprecationWarning"),
]

_TOTALS = re.compile(
    r"^(\d+) records sent, [\d.]+ records/sec \([\d.]+ MB/sec\), [\d.]+ ms avg latency, "
    r"[\d.]+ ms max latency, \d+ ms 50th, \d+ ms 95th, \d+ ms 99th, \d+ ms 99\.9th\.$"
)


@pytest.fixture(scope="module")
def cluster() -> Iterator[Cluster]:
    with Cluster.local(1, test_mode=True) as c:
        yield c


def usage_error(*args: str) -> int:
    with pytest.raises(SystemExit) as exit_:
        main(list(args))
    return int(exit_.value.code or 0)


def test_producer_perf_test_sends_and_reports(
    cluster: Cluster, capsys: pytest.CaptureFixture[str], tmp_path: pathlib.Path
) -> None:
    status = main(
        [
            *("producer-perf-test", "--bootstrap-server", cluster.bootstrap, "--topic", "perf"),
            *("--num-records", "500", "--record-size", "64", "--throughput", "-1"),
            *("--producer-props", "acks=all", "linger.ms=2"),
        ]
    )
    assert status == 0
    last = capsys.readouterr().out.splitlines()[-1]
    match = _TOTALS.match(last)
    assert match is not None, last
    assert match.group(1) == "500"
    consumer = KafkaConsumer(bootstrap_servers=cluster.bootstrap)
    try:
        assert consumer.end_offsets([TopicPartition("perf", 0)]) == {TopicPartition("perf", 0): 500}
    finally:
        consumer.close()
    payloads = tmp_path / "payloads.txt"
    payloads.write_text("alpha\nbeta\n\n")
    status = main(
        [
            *("producer-perf-test", "--topic", "perf-file", "--num-records", "20"),
            *("--payload-file", str(payloads), "--throughput", "1000", "--output", "json"),
            *("--producer-props", f"bootstrap.servers={cluster.bootstrap}"),
        ]
    )
    assert status == 0
    assert json.loads(capsys.readouterr().out)["records"] == 20
    reader = KafkaConsumer(
        "perf-file",
        bootstrap_servers=cluster.bootstrap,
        auto_offset_reset="earliest",
        consumer_timeout_ms=10_000,
    )
    try:
        values = {r.value for _, r in zip(range(20), reader, strict=False)}
    finally:
        reader.close()
    assert values <= {b"alpha", b"beta"} and values


def test_consumer_perf_test_reads_and_reports(
    cluster: Cluster, capsys: pytest.CaptureFixture[str]
) -> None:
    producer = KafkaProducer(bootstrap_servers=cluster.bootstrap, acks="all")
    for n in range(300):
        producer.send("perf-in", b"%04d" % n)
    producer.flush()
    producer.close()
    args = ["consumer-perf-test", "--bootstrap-server", cluster.bootstrap, "--topic", "perf-in"]
    assert main([*args, "--messages", "300", "--group", "perf-g"]) == 0
    header, line = capsys.readouterr().out.splitlines()
    assert header == HEADER
    fields = dict(zip(HEADER.split(", "), line.split(", "), strict=True))
    assert fields["data.consumed.in.nMsg"] == "300"
    assert float(fields["data.consumed.in.MB"]) == pytest.approx(300 * 4 / 1024 / 1024, abs=1e-4)
    # Asking for more than there is ends at the timeout, reported, exit 1.
    assert main([*args, "--messages", "400", "--timeout", "1000", "--hide-header"]) == 1
    out, err = capsys.readouterr()
    assert "300 of 400 records came" in err and not out.startswith("start.time")


def test_perf_tests_bad_input(cluster: Cluster, capsys: pytest.CaptureFixture[str]) -> None:
    base = ["producer-perf-test", "--bootstrap-server", cluster.bootstrap, "--topic", "t"]
    assert usage_error(*base, "--num-records", "0", "--record-size", "1", "--throughput", "-1") == 2
    assert (
        usage_error(
            *base, "--num-records", "5", "--payload-file", "/no/such/file", "--throughput", "-1"
        )
        == 2
    )
    assert "cannot read /no/such/file" in capsys.readouterr().err
    assert (
        usage_error(
            *base,
            "--num-records",
            "5",
            "--record-size",
            "1",
            "--throughput",
            "-1",
            "--producer-props",
            "lingerms=1",
        )
        == 2
    )
    assert "unknown producer setting 'lingerms'" in capsys.readouterr().err
    assert (
        usage_error(
            "producer-perf-test",
            "--topic",
            "t",
            "--num-records",
            "1",
            "--record-size",
            "1",
            "--throughput",
            "-1",
        )
        == 2
    )
    assert "--bootstrap-server or bootstrap.servers" in capsys.readouterr().err
    assert (
        usage_error(
            "consumer-perf-test",
            "--bootstrap-server",
            cluster.bootstrap,
            "--topic",
            "t",
            "--messages",
            "0",
        )
        == 2
    )
