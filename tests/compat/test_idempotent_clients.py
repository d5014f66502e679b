"""Idempotent producers of the Kafka clients against a 3-broker replog cluster.

kafka-python 3 enables idempotence by default, so a plain ``KafkaProducer()`` used to fail its
first send ("broker does not support InitProducerIdRequest"); confluent-kafka, aiokafka and
kafkajs refused ``enable.idempotence``. Each client here gets a producer id (InitProducerId),
produces batches that carry it and their sequence numbers, and every record reads back exactly
once, at the offset it was acknowledged at. The partition leaders' producer state shows the
client's producer id.

kafkajs runs in Node (``tests/js/kafkajs_idempotent.js``; see ``test_kafkajs`` for how the
package is installed).
"""

from __future__ import annotations

import asyncio
import json
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import confluent_kafka
import pytest
from aiokafka import AIOKafkaProducer
from kafka import KafkaProducer

from replog import Admin, Cluster, Consumer

pytestmark = [pytest.mark.system, pytest.mark.timeout(180)]

PARTITIONS = 2
PER_PARTITION = 60
JS_DIR = Path(__file__).resolve().parents[1] / "js"

Placed = tuple[int, int, bytes]  # (partition, offset, value)


@pytest.fixture(scope="module")
def cluster() -> Iterator[Cluster]:
    with Cluster.local(3) as c:
        yield c


def new_topic(cluster: Cluster, name: str) -> str:
    with Admin(cluster.bootstrap) as admin:
        admin.create_topics(name, PARTITIONS, 3, {"min.insync.replicas": "2"})
    return name


def values(client: str) -> list[tuple[int, bytes]]:
    """(partition, value) of every record a test sends, in send order per partition."""
    return [
        (p, b"%s-%d-%d" % (client.encode(), p, i))
        for i in range(PER_PARTITION)
        for p in range(PARTITIONS)
    ]


def read_back(cluster: Cluster, topic: str, count: int) -> list[Placed]:
    got: list[Placed] = []
    with Consumer(cluster.bootstrap, auto_reset="earliest") as consumer:
        consumer.assign([(topic, p) for p in range(PARTITIONS)])
        deadline = time.monotonic() + 30
        while len(got) < count and time.monotonic() < deadline:
            got += [(r.partition, r.offset, r.value or b"") for r in consumer.poll(timeout_ms=200)]
        time.sleep(0.2)
        got += [(r.partition, r.offset, r.value or b"") for r in consumer.poll(timeout_ms=200)]
    return got


def leaders_producer_ids(cluster: Cluster, topic: str) -> set[int]:
    """Producer ids in the producer state of the partitions' logs on every broker."""

    def collect() -> set[int]:
        found: set[int] = set()
        for broker in cluster.brokers.values():
            for p in range(PARTITIONS):
                log = broker.local_log(topic, p)
                if log is not None:
                    found |= set(log.producer_state.producers)
        return found

    ids: set[int] = cluster.call(collect)
    return ids


def check_exactly_once(cluster: Cluster, topic: str, client: str, acked: list[Placed]) -> None:
    sent = values(client)
    assert sorted(acked) == sorted(set(acked)) and len(acked) == len(sent)
    got = read_back(cluster, topic, len(sent))
    assert sorted(got) == sorted(acked)  # each record once, where it was acknowledged
    assert sorted((p, v) for p, _, v in got) == sorted(sent)
    for p in range(PARTITIONS):  # in send order
        mine = sorted((o, v) for q, o, v in got if q == p)
        assert [v for _, v in mine] == [v for q, v in sent if q == p]
    assert leaders_producer_ids(cluster, topic), "no batch carried a producer id"


def test_kafka_python_default_producer_is_idempotent(cluster: Cluster) -> None:
    topic = new_topic(cluster, "idem-kafka-python")
    producer = KafkaProducer(bootstrap_servers=cluster.bootstrap)
    try:
        assert producer.config["enable_idempotence"]  # kafka-python 3's default
        futures = [(v, producer.send(topic, v, partition=p)) for p, v in values("kp")]
        producer.flush(timeout=60)
        acked = [(f.get(timeout=10).partition, f.get(timeout=10).offset, v) for v, f in futures]
    finally:
        producer.close(timeout=10)
    check_exactly_once(cluster, topic, "kp", acked)


def test_confluent_kafka_with_enable_idempotence(cluster: Cluster) -> None:
    topic = new_topic(cluster, "idem-confluent")
    producer = confluent_kafka.Producer(
        {"bootstrap.servers": cluster.bootstrap, "enable.idempotence": True, "linger.ms": 2}
    )
    acked: list[Placed] = []
    errors: list[object] = []

    def delivered(error: object, message: confluent_kafka.Message) -> None:
        if error is not None:
            errors.append(error)
        else:
            acked.append((message.partition(), message.offset(), message.value()))

    for p, v in values("ck"):
        producer.produce(topic, v, partition=p, on_delivery=delivered)
    assert producer.flush(60) == 0
    assert errors == []
    check_exactly_once(cluster, topic, "ck", acked)


def test_aiokafka_with_enable_idempotence(cluster: Cluster) -> None:
    topic = new_topic(cluster, "idem-aiokafka")

    async def produce() -> list[Placed]:
        producer = AIOKafkaProducer(
            bootstrap_servers=cluster.bootstrap, enable_idempotence=True, linger_ms=2
        )
        await producer.start()
        try:
            pending = [(v, await producer.send(topic, v, partition=p)) for p, v in values("aio")]
            return [((m := await f).partition, m.offset, v) for v, f in pending]
        finally:
            await producer.stop()

    acked = asyncio.run(asyncio.wait_for(produce(), 60))
    check_exactly_once(cluster, topic, "aio", acked)


def test_kafkajs_idempotent_producer(cluster: Cluster) -> None:
    topic = new_topic(cluster, "idem-kafkajs")
    node = shutil.which("node")
    assert node is not None, "node is not installed (Node 20+ is a test dependency)"
    assert (JS_DIR / "node_modules" / "kafkajs").is_dir(), (
        "kafkajs is not installed: run `make system-deps` (npm ci --prefix tests/js)"
    )
    done = subprocess.run(
        [
            node,
            str(JS_DIR / "kafkajs_idempotent.js"),
            cluster.bootstrap,
            topic,
            str(PARTITIONS),
            str(PER_PARTITION),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    produced = json.loads(done.stdout.strip().splitlines()[-1])["produced"]
    assert all(r["errorCode"] == 0 for r in produced)
    # kafkajs reports each request's base offset per partition: expand to every record.
    acked: list[Placed] = []
    sent = values("kafkajs-idem")
    for p in range(PARTITIONS):
        mine = [v for q, v in sent if q == p]
        bases = sorted(int(r["baseOffset"]) for r in produced if int(r["partition"]) == p)
        assert bases == list(range(0, PER_PARTITION, 5))
        acked += [(p, offset, v) for offset, v in enumerate(mine)]
    check_exactly_once(cluster, topic, "kafkajs-idem", acked)
