"""``replog verify-replicas`` against live 3-broker clusters: every replica (followers too) is
read with Kafka's debugging-consumer fetch, a healthy cluster verifies clean, and a follower
whose log was altered below the high watermark -- one record rewritten in its segment file while
it was stopped, with a valid CRC so that the broker accepts the file -- is reported diverged at
that record's offset. The records are written by an independent client (kafka-python)."""

from __future__ import annotations

import json
import pathlib
import struct
import warnings
from typing import Any, TypeVar

import crc32c
import pytest

from replog import Cluster
from replog.cli import main
from replog.client.replica_reads import ReplicaBatch
from replog.log.records import CRC_START, iter_batches
from replog.tools.verify_replicas import compare_replicas
from tests.waiting import wait_for

with warnings.catch_warnings():
    warnings.filterwarnings("ignore", ".*(read_text|open_text) is deprecated", DeprecationWarning)
    from kafka import KafkaProducer

pytestmark = [
    pytest.mark.system,
    pytest.mark.timeout(180),
    pytest.mark.filterwarnings("ignore:.*(read_text|open_text) is deprecated:DeprecationWarning"),
]

T = TypeVar("T")
RECORDS = 20


def produce(cluster: Cluster, topic: str, partitions: int) -> None:
    """``RECORDS`` records per partition, one batch each (flushed one by one)."""
    producer = KafkaProducer(bootstrap_servers=cluster.bootstrap, acks="all")
    try:
        for partition in range(partitions):
            for i in range(RECORDS):
                producer.send(topic, value=b"value-%02d" % i, partition=partition)
                producer.flush(timeout=30)
    finally:
        producer.close()


def verify(
    cluster: Cluster, capsys: pytest.CaptureFixture[str], *args: str
) -> tuple[int, dict[str, Any]]:
    capsys.readouterr()
    status = main(
        ["verify-replicas", "--bootstrap-server", cluster.bootstrap, "--output", "json", *args]
    )
    return status, json.loads(capsys.readouterr().out)


def in_sync(cluster: Cluster, capsys: pytest.CaptureFixture[str], topic: str) -> dict[str, Any]:
    """The report once every replica of ``topic`` has every record below its HW."""
    return wait_for(
        lambda: verify(cluster, capsys, "--topic-white-list", topic)[1],
        lambda report: all(
            r["high_watermark"] == RECORDS for p in report["partitions"] for r in p["replicas"]
        ),
    )


def test_a_healthy_cluster_verifies_clean_and_a_dead_follower_is_reported(
    tmp_path: pathlib.Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with Cluster.local(3, base_dir=str(tmp_path)) as cluster:
        create = ["--create", "--topic", "healthy", "--replica-assignment", "1:2:3,2:3:1"]
        assert main(["topics", "--bootstrap-server", cluster.bootstrap, *create]) == 0
        produce(cluster, "healthy", 2)
        report = in_sync(cluster, capsys, "healthy")
        status, report = verify(cluster, capsys, "--topics-include", "heal.*")
        assert status == 0 and report["diverged"] == []
        for part in report["partitions"]:
            assert [r["broker_id"] for r in part["replicas"]] in ([1, 2, 3], [2, 3, 1])
            assert {r["error"] for r in part["replicas"]} == {"NONE"}  # followers served too
            assert (part["verified_from"], part["verified_to"], part["lag"]) == (0, RECORDS, 0)
            assert part["divergence"] is None
        assert report["max_lag"]["lag"] == 0
        assert main(["verify-replicas", "--bootstrap-server", cluster.bootstrap]) == 0
        text = capsys.readouterr().out.splitlines()
        assert text[0].startswith("healthy-0: high watermarks 1:20,2:20,3:20, lag 0")
        assert "max lag is 0 for partition" in text[-1] and "among 2 partitions" in text[-1]

        cluster.kill(3)
        status, report = verify(cluster, capsys, "--topic-white-list", "healthy")
        assert status == 1
        errors = {
            (p["partition"], r["broker_id"]): r["error"]
            for p in report["partitions"]
            for r in p["replicas"]
        }
        assert errors[(0, 3)] == errors[(1, 3)] == "UNREACHABLE"
        assert errors[(0, 1)] == errors[(0, 2)] == "NONE"


def rewrite_record(log_dir: pathlib.Path, old: bytes, new: bytes) -> int:
    """Replace ``old`` with ``new`` (same length) inside one batch of the segment files under
    ``log_dir`` and fix that batch's CRC; returns the batch's base offset."""
    for segment in sorted(log_dir.glob("*.log")):
        data = bytearray(segment.read_bytes())
        for position, header in iter_batches(data):
            end = position + header.size_bytes
            at = data.find(old, position, end)
            if at < 0:
                continue
            data[at : at + len(new)] = new
            crc = crc32c.crc32c(bytes(data[position + CRC_START : end]))
            struct.pack_into(">I", data, position + CRC_START - 4, crc)
            segment.write_bytes(bytes(data))
            return header.base_offset
    raise AssertionError(f"{old!r} not found under {log_dir}")


def test_a_follower_altered_below_the_high_watermark_is_reported_diverged(
    tmp_path: pathlib.Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with Cluster.local(3, base_dir=str(tmp_path)) as cluster:
        create = ["--create", "--topic", "altered", "--replica-assignment", "1:2:3"]
        assert main(["topics", "--bootstrap-server", cluster.bootstrap, *create]) == 0
        produce(cluster, "altered", 1)
        in_sync(cluster, capsys, "altered")
        cluster.stop(3)
        offset = rewrite_record(tmp_path / "broker-3" / "altered-0", b"value-07", b"VALUE-07")
        assert offset == 7
        cluster.restart(3)
        status, report = wait_for(
            lambda: verify(cluster, capsys, "--topic-white-list", "altered"),
            lambda answer: all(
                r["error"] == "NONE" and r["high_watermark"] == RECORDS
                for r in answer[1]["partitions"][0]["replicas"]
            ),
        )
        assert status == 1
        (part,) = report["partitions"]
        assert part["divergence"]["offset"] == 7
        batches = part["divergence"]["batches"]
        assert batches["1"] == batches["2"] != batches["3"]
        assert batches["3"][:2] == [7, 7]
        assert report["diverged"] == [{"topic": "altered", "partition": 0, "offset": 7}]
        assert main(["verify-replicas", "--bootstrap-server", cluster.bootstrap]) == 1
        assert "DIVERGED at offset 7" in capsys.readouterr().out


def test_no_matching_topic_and_usage_errors(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["verify-replicas", "--bootstrap-server", "127.0.0.1:1", "--reports", "2"])
    assert exit_.value.code == 2
    with pytest.raises(SystemExit) as exit_:
        both = ["--topic-white-list", "a", "--topics-include", "b"]
        main(["verify-replicas", "--broker-list", "127.0.0.1:1", *both])
    assert exit_.value.code == 2
    with Cluster.local(1) as cluster:
        capsys.readouterr()
        args = ["verify-replicas", "--broker-list", cluster.bootstrap, "--topic-white-list", "x"]
        assert main(args) == 1
        assert "no topic matches 'x'" in capsys.readouterr().err


def test_repeated_reports(tmp_path: pathlib.Path, capsys: pytest.CaptureFixture[str]) -> None:
    with Cluster.local(1, base_dir=str(tmp_path)) as cluster:
        create = ["--create", "--topic", "solo", "--replica-assignment", "1"]
        assert main(["topics", "--bootstrap-server", cluster.bootstrap, *create]) == 0
        capsys.readouterr()
        args = ["--report-interval-ms", "10", "--reports", "3"]
        assert main(["verify-replicas", "--bootstrap-server", cluster.bootstrap, *args]) == 0
        summaries = [line for line in capsys.readouterr().out.splitlines() if "max lag" in line]
        assert len(summaries) == 3


def test_compare_replicas() -> None:
    a, b, c = ReplicaBatch(0, 4, 11), ReplicaBatch(5, 5, 12), ReplicaBatch(5, 5, 99)
    assert compare_replicas({1: [a, b], 2: [a, b]}) == (None, {})
    assert compare_replicas({1: [a, b], 2: [a, c]}) == (5, {1: b, 2: c})
    assert compare_replicas({1: [a, b], 2: [a]}) == (5, {1: b, 2: None})
