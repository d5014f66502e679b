"""End to end against a real 3-broker replog cluster on loopback (``Cluster.local(3)``)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from typing import Any

import pytest

from replog.client import (
    Admin,
    AsyncAdmin,
    AsyncConsumer,
    AsyncProducer,
    Consumer,
    ConsumerRecord,
    Producer,
    partition_for_key,
)

pytestmark = pytest.mark.system

broker = pytest.importorskip("replog.broker", reason="the broker runtime is not available")


@pytest.fixture(scope="module")
def cluster() -> Iterator[Any]:
    c = broker.Cluster.local(3)
    try:
        yield c
    finally:
        c.close()


def _consume_all(consumer: Consumer, count: int, timeout_s: float = 20) -> list[ConsumerRecord]:
    got: list[ConsumerRecord] = []
    deadline = time.monotonic() + timeout_s
    while len(got) < count and time.monotonic() < deadline:
        got += consumer.poll(timeout_ms=500)
    return got


def test_admin_creates_and_describes_topics(cluster: Any) -> None:
    with Admin(cluster.bootstrap) as admin:
        admin.create_topics("described", 3, 3, {"min.insync.replicas": "2"})
        assert "described" in admin.list_topics()
        topic = admin.describe_topics(["described"])["described"]
        assert [p.partition for p in topic.partitions] == [0, 1, 2]
        for p in topic.partitions:
            assert sorted(p.replicas) == [1, 2, 3] and p.leader in p.replicas
            assert set(p.isr) <= set(p.replicas) and p.leader in p.isr


def test_sync_produce_acks_all_then_consume_every_record_in_order(cluster: Any) -> None:
    with Admin(cluster.bootstrap) as admin:
        admin.create_topics("ordered", 2, 3, {"min.insync.replicas": "2"})
    keys = [b"k%d" % (i % 7) for i in range(200)]
    with Producer(cluster.bootstrap, acks="all", linger_ms=2) as producer:
        futures = [
            producer.send("ordered", b"v%d" % i, key=k, headers=[("h", b"x")])
            for i, k in enumerate(keys)
        ]
        producer.flush()
        metas = [f.result() for f in futures]
    for k, meta in zip(keys, metas, strict=True):
        assert meta.partition == partition_for_key(k, 2)
    with Consumer(cluster.bootstrap, auto_reset="earliest") as consumer:
        consumer.assign([("ordered", 0), ("ordered", 1)])
        got = _consume_all(consumer, 200)
        assert consumer.position(("ordered", 0)) + consumer.position(("ordered", 1)) == 200
    assert len(got) == 200
    for partition in (0, 1):
        mine = [r for r in got if r.partition == partition]
        assert [r.offset for r in mine] == list(range(len(mine)))
        sent = [(m.offset, b"v%d" % i) for i, m in enumerate(metas) if m.partition == partition]
        assert [(r.offset, r.value) for r in mine] == sent
        assert all(r.headers == (("h", b"x"),) for r in mine)


def test_seek_and_latest_reset(cluster: Any) -> None:
    with Admin(cluster.bootstrap) as admin:
        admin.create_topics("seeking", 1, 3)
        with Producer(cluster.bootstrap, acks="all") as producer:
            for i in range(10):
                producer.send("seeking", b"%d" % i, partition=0)
        assert admin.list_offsets([("seeking", 0)]) == {("seeking", 0): 10}
        assert admin.list_offsets([("seeking", 0)], "earliest") == {("seeking", 0): 0}
    with Consumer(cluster.bootstrap) as consumer:  # auto_reset="latest"
        consumer.assign([("seeking", 0)])
        assert consumer.position(("seeking", 0)) == 10
        consumer.seek(("seeking", 0), 7)
        assert [r.value for r in _consume_all(consumer, 3)] == [b"7", b"8", b"9"]
        consumer.seek_to_beginning()
        assert consumer.position(("seeking", 0)) == 0


def test_async_clients_long_poll(cluster: Any) -> None:
    async def go() -> None:
        admin_done = asyncio.to_thread(_create, cluster.bootstrap, "async-topic")
        await admin_done
        consumer = await AsyncConsumer.start(
            cluster.bootstrap, auto_reset="earliest", fetch_max_wait_ms=2000
        )
        consumer.assign([("async-topic", 0)])
        producer = await AsyncProducer.start(cluster.bootstrap, acks="all")
        poll = asyncio.ensure_future(consumer.poll(timeout_ms=5000))
        await asyncio.sleep(0.3)
        meta = await producer.send_and_wait("async-topic", b"late", partition=0)
        records = await poll
        assert meta.offset == 0 and [r.value for r in records] == [b"late"]
        await producer.close()
        await consumer.close()

    asyncio.run(go())


def _create(bootstrap: str, name: str) -> None:
    with Admin(bootstrap) as admin:
        admin.create_topics(name, 1, 3)


def test_producer_and_consumer_follow_a_leader_change(cluster: Any) -> None:
    with Admin(cluster.bootstrap) as admin:
        admin.create_topics("failover", 1, 3, {"min.insync.replicas": "2"})
        leader = admin.describe_topics(["failover"])["failover"].partitions[0].leader
    bootstrap = cluster.bootstrap
    with Producer(bootstrap, acks="all", retries=50, retry_backoff_ms=100) as producer:
        for i in range(20):
            producer.send("failover", b"%d" % i, partition=0).result(30)
        cluster.stop(leader)
        try:
            for i in range(20, 40):
                producer.send("failover", b"%d" % i, partition=0).result(60)
            with Consumer(bootstrap, auto_reset="earliest") as consumer:
                consumer.assign([("failover", 0)])
                got = _consume_all(consumer, 40, timeout_s=30)
        finally:
            cluster.start(leader)
    values = [int(r.value or b"") for r in got]
    # at-least-once: a retried batch may repeat, but every acked record is there, in order
    assert sorted(set(values)) == list(range(40))
    assert [r.offset for r in got] == list(range(len(got)))


def test_describe_cluster_lists_brokers_and_the_controller(cluster: Any) -> None:
    with Admin(cluster.bootstrap) as admin:
        described = admin.describe_cluster()
    assert [b.broker_id for b in described.brokers] == [1, 2, 3]
    by_id = {b.broker_id: b for b in described.brokers}
    for broker_id, running in cluster.brokers.items():
        assert (by_id[broker_id].host, by_id[broker_id].port) == ("127.0.0.1", running.port)
        assert by_id[broker_id].rack == running.config.rack
    assert described.controller_id in by_id


def test_async_describe_cluster_reports_racks() -> None:
    async def describe(bootstrap: str) -> Any:
        admin = await AsyncAdmin.start(bootstrap)
        try:
            for _ in range(200):  # -1 until the new cluster has elected its controller
                described = await admin.describe_cluster()
                if described.controller_id >= 0:
                    break
                await asyncio.sleep(0.05)
            return described
        finally:
            await admin.close()

    c = broker.Cluster.local(2, rack="r1")
    try:
        described = asyncio.run(describe(c.bootstrap))
    finally:
        c.close()
    assert [(b.broker_id, b.rack) for b in described.brokers] == [(1, "r1"), (2, "r1")]
    assert described.controller_id in (1, 2)


def test_producer_creates_a_missing_topic_when_the_brokers_allow_it(cluster: Any) -> None:
    with Producer(cluster.bootstrap, acks="all") as producer:
        meta = producer.send("created-by-producer", b"v", partition=None).result(timeout=30)
    assert meta.topic == "created-by-producer" and meta.offset == 0
    with Admin(cluster.bootstrap) as admin:
        assert "created-by-producer" in admin.list_topics()
