"""Existing Kafka clients against a 3-broker replog cluster: kafka-python and confluent-kafka
produce with acks=all and consume with manual assignment, and get every record back in order.

Client settings that differ from their defaults, and why:

- idempotence off (``enable_idempotence=False`` / ``enable.idempotence=false``): kafka-python 3
  enables it by default and needs InitProducerId, which replog does not serve.
- consumers use manual assignment with no offset commits: kafka-python with ``group_id=None``
  (no FindCoordinator/OffsetFetch at all); confluent-kafka needs a ``group.id`` to build a
  consumer but, with ``assign`` and ``enable.auto.commit=false``, sends no group requests
  replog's ApiVersions answer does not list.

A missing client package skips its test, or fails it under ``REPLOG_REQUIRE_BACKENDS=1``.
"""

from __future__ import annotations

import importlib
import os
import time
from collections.abc import Iterator
from types import ModuleType
from typing import Any

import pytest

from replog import Admin, Cluster

pytestmark = [
    pytest.mark.system,
    pytest.mark.timeout(120),
    # kafka-python loads its schemas with the deprecated importlib.resources API
    pytest.mark.filterwarnings("ignore:.*(read_text|open_text) is deprecated:DeprecationWarning"),
]

RECORDS = 200
PARTITIONS = 2


def require(module: str, package: str) -> ModuleType:
    """Import ``module``; skip without it, or fail under REPLOG_REQUIRE_BACKENDS=1."""
    try:
        return importlib.import_module(module)
    except ImportError:
        message = f"the {package} package is not installed (pip install {package})"
        if os.environ.get("REPLOG_REQUIRE_BACKENDS") == "1":
            pytest.fail(f"REPLOG_REQUIRE_BACKENDS=1 but {message}", pytrace=False)
        pytest.skip(message)


@pytest.fixture(scope="module")
def cluster() -> Iterator[Cluster]:
    with Cluster.local(3) as c:
        yield c


def create_topic(cluster: Cluster, name: str) -> None:
    with Admin(cluster.bootstrap) as admin:
        admin.create_topics(name, PARTITIONS, 3, {"min.insync.replicas": "2"})


def expected() -> dict[int, list[tuple[bytes, bytes]]]:
    """(key, value) per partition, in the order they are sent."""
    out: dict[int, list[tuple[bytes, bytes]]] = {p: [] for p in range(PARTITIONS)}
    for i in range(RECORDS):
        out[i % PARTITIONS].append((b"k%d" % i, b"v%d" % i))
    return out


def test_kafka_python_acks_all_and_manual_assignment(cluster: Cluster) -> None:
    kafka = require("kafka", "kafka-python")
    create_topic(cluster, "kafka-python")
    producer = kafka.KafkaProducer(
        bootstrap_servers=cluster.bootstrap,
        acks="all",
        enable_idempotence=False,
        request_timeout_ms=20_000,
    )
    try:
        futures = [
            producer.send("kafka-python", value=b"v%d" % i, key=b"k%d" % i, partition=i % 2)
            for i in range(RECORDS)
        ]
        producer.flush(timeout=30)
        metas = [f.get(timeout=30) for f in futures]
    finally:
        producer.close(timeout=10)
    for partition in range(PARTITIONS):
        offsets = [m.offset for m in metas if m.partition == partition]
        assert offsets == list(range(RECORDS // PARTITIONS))

    tps = [kafka.TopicPartition("kafka-python", p) for p in range(PARTITIONS)]
    consumer = kafka.KafkaConsumer(
        bootstrap_servers=cluster.bootstrap,
        group_id=None,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
    )
    got: dict[int, list[Any]] = {p: [] for p in range(PARTITIONS)}
    try:
        consumer.assign(tps)
        deadline = time.monotonic() + 30
        while sum(map(len, got.values())) < RECORDS and time.monotonic() < deadline:
            for tp, records in consumer.poll(timeout_ms=500).items():
                got[tp.partition].extend(records)
    finally:
        consumer.close()
    for partition, sent in expected().items():
        records = got[partition]
        assert [r.offset for r in records] == list(range(len(sent)))
        assert [(r.key, r.value) for r in records] == sent


def test_confluent_kafka_acks_all_and_manual_assignment(cluster: Cluster) -> None:
    ck = require("confluent_kafka", "confluent-kafka")
    create_topic(cluster, "confluent")
    delivered: list[tuple[int, int]] = []
    errors: list[object] = []

    def on_delivery(err: object, msg: Any) -> None:
        if err is not None:
            errors.append(err)
        else:
            delivered.append((msg.partition(), msg.offset()))

    producer = ck.Producer(
        {
            "bootstrap.servers": cluster.bootstrap,
            "acks": "all",
            "enable.idempotence": False,
            "linger.ms": 5,
        }
    )
    for i in range(RECORDS):
        producer.produce(
            "confluent", value=b"v%d" % i, key=b"k%d" % i, partition=i % 2, on_delivery=on_delivery
        )
    assert producer.flush(30) == 0
    del producer
    assert errors == []
    for partition in range(PARTITIONS):
        offsets = sorted(o for p, o in delivered if p == partition)
        assert offsets == list(range(RECORDS // PARTITIONS))

    consumer = ck.Consumer(
        {
            "bootstrap.servers": cluster.bootstrap,
            "group.id": "replog-manual-assignment",  # required by the client; never used
            "enable.auto.commit": False,
            "enable.auto.offset.store": False,
        }
    )
    got: dict[int, list[Any]] = {p: [] for p in range(PARTITIONS)}
    try:
        consumer.assign(
            [ck.TopicPartition("confluent", p, ck.OFFSET_BEGINNING) for p in range(PARTITIONS)]
        )
        deadline = time.monotonic() + 30
        while sum(map(len, got.values())) < RECORDS and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is None:
                continue
            assert msg.error() is None, msg.error()
            got[msg.partition()].append(msg)
    finally:
        consumer.close()
    for partition, sent in expected().items():
        records = got[partition]
        assert [r.offset() for r in records] == list(range(len(sent)))
        assert [(r.key(), r.value()) for r in records] == sent


def test_kafka_python_offsets_for_times(cluster: Cluster) -> None:
    """ListOffsets by timestamp: the earliest offset at or after a time, None past the end."""
    kafka = require("kafka", "kafka-python")
    with Admin(cluster.bootstrap) as admin:
        admin.create_topics("by-time", 1, 3, {"min.insync.replicas": "2"})
    producer = kafka.KafkaProducer(
        bootstrap_servers=cluster.bootstrap, acks="all", enable_idempotence=False, linger_ms=0
    )
    base = 1_700_000_000_000
    try:
        for i in range(10):
            # One batch per record (flush each), timestamps 1 s apart.
            producer.send("by-time", value=b"v%d" % i, partition=0, timestamp_ms=base + i * 1000)
            producer.flush(timeout=30)
    finally:
        producer.close(timeout=10)
    tp = kafka.TopicPartition("by-time", 0)
    consumer = kafka.KafkaConsumer(
        bootstrap_servers=cluster.bootstrap, group_id=None, enable_auto_commit=False
    )
    try:
        found = consumer.offsets_for_times({tp: base + 3_500})[tp]
        assert (found.offset, found.timestamp) == (4, base + 4_000)
        found = consumer.offsets_for_times({tp: 0})[tp]
        assert (found.offset, found.timestamp) == (0, base)
        assert consumer.offsets_for_times({tp: base + 60_000})[tp] is None
    finally:
        consumer.close()


def test_kafka_python_describe_configs(cluster: Cluster) -> None:
    """DescribeConfigs through kafka-python's admin client: the topic's own setting (reported as
    modified) and the broker's defaults (with config_filter="all")."""
    require("kafka", "kafka-python")
    admin_module = importlib.import_module("kafka.admin")
    with Admin(cluster.bootstrap) as admin:
        admin.create_topics("configured", 1, 3, {"min.insync.replicas": "2"})
    client = admin_module.KafkaAdminClient(bootstrap_servers=cluster.bootstrap)
    resource = admin_module.ConfigResource(admin_module.ConfigResourceType.TOPIC, "configured")
    try:
        modified = client.describe_configs([resource])["topic"]["configured"]
        everything = client.describe_configs([resource], config_filter="all")["topic"]["configured"]
    finally:
        client.close()
    assert set(modified) == {"min.insync.replicas"}
    assert modified["min.insync.replicas"]["value"] == "2"
    assert everything["retention.ms"]["value"] == str(7 * 24 * 3600 * 1000)
    assert everything["cleanup.policy"]["value"] == "delete"


def test_kafka_python_reads_what_replogs_producer_wrote_with_gzip(cluster: Cluster) -> None:
    kafka = require("kafka", "kafka-python")
    from replog import Producer

    create_topic(cluster, "replog-gzip")
    with Producer(cluster.bootstrap, acks="all", compression="gzip") as producer:
        futures = [
            producer.send("replog-gzip", b"v%d" % i, key=b"k%d" % i, partition=0) for i in range(50)
        ]
        producer.flush()
        assert [f.result().offset for f in futures] == list(range(50))
    consumer = kafka.KafkaConsumer(
        bootstrap_servers=cluster.bootstrap,
        group_id=None,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
    )
    got: list[Any] = []
    try:
        consumer.assign([kafka.TopicPartition("replog-gzip", 0)])
        deadline = time.monotonic() + 30
        while len(got) < 50 and time.monotonic() < deadline:
            for records in consumer.poll(timeout_ms=500).values():
                got.extend(records)
    finally:
        consumer.close()
    assert [(r.key, r.value) for r in got] == [(b"k%d" % i, b"v%d" % i) for i in range(50)]
