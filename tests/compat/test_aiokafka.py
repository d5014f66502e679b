"""aiokafka against a 3-broker replog cluster: produce with acks=all, consume by manual
assignment from ``auto_offset_reset``, and ``end_offsets`` / ``beginning_offsets`` /
``offsets_for_times``.

aiokafka asks ListOffsets at v3 at most; replog used to fail to encode that answer (it set a
leader epoch, which v3 does not carry) and leave aiokafka waiting until its request timeout, so
every offset reset and offset lookup failed. Consumer groups are not served yet (``group_id``
None, no commits) and neither is the idempotent producer (``enable_idempotence=False``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition

from replog import Admin, Cluster

pytestmark = [pytest.mark.system, pytest.mark.timeout(120)]

TOPIC = "aiokafka"
PARTITIONS = 2
PER_PARTITION = 50
BASE_MS = 1_700_000_000_000
#: a bound on each test's client work (it takes well under a second when replog answers)
WAIT_S = 60


@pytest.fixture(scope="module")
def cluster() -> Iterator[Cluster]:
    with Cluster.local(3) as c:
        with Admin(c.bootstrap) as admin:
            admin.create_topics(TOPIC, PARTITIONS, 3, {"min.insync.replicas": "2"})
        asyncio.run(produce(c.bootstrap))
        yield c


def sent(partition: int) -> list[tuple[bytes, bytes, int]]:
    """(key, value, timestamp) of what was produced to ``partition``, in order."""
    return [
        (b"k%d-%d" % (partition, i), b"v%d-%d" % (partition, i), BASE_MS + i)
        for i in range(PER_PARTITION)
    ]


async def produce(bootstrap: str) -> None:
    producer = AIOKafkaProducer(
        bootstrap_servers=bootstrap, acks="all", enable_idempotence=False, linger_ms=5
    )
    await producer.start()
    try:
        pending = [
            await producer.send(TOPIC, value, key=key, partition=p, timestamp_ms=ts)
            for p in range(PARTITIONS)
            for key, value, ts in sent(p)
        ]
        metadata = await asyncio.gather(*pending)
    finally:
        await producer.stop()
    offsets = {(m.partition, m.offset) for m in metadata}
    assert offsets == {(p, i) for p in range(PARTITIONS) for i in range(PER_PARTITION)}


def consumer(bootstrap: str, reset: str) -> AIOKafkaConsumer:
    return AIOKafkaConsumer(
        bootstrap_servers=bootstrap,
        group_id=None,
        enable_auto_commit=False,
        auto_offset_reset=reset,
        request_timeout_ms=20_000,
    )


def test_assigned_consumer_resets_to_earliest_and_reads_every_record(cluster: Cluster) -> None:
    async def consume() -> dict[int, list[tuple[bytes, bytes, int]]]:
        c = consumer(cluster.bootstrap, "earliest")
        await c.start()
        try:
            c.assign([TopicPartition(TOPIC, p) for p in range(PARTITIONS)])
            got: dict[int, list[tuple[bytes, bytes, int]]] = {p: [] for p in range(PARTITIONS)}
            while sum(map(len, got.values())) < PARTITIONS * PER_PARTITION:
                batches = await c.getmany(timeout_ms=500)
                for tp, records in batches.items():
                    got[tp.partition] += [(r.key, r.value, r.timestamp) for r in records]
            return got
        finally:
            await c.stop()

    assert asyncio.run(asyncio.wait_for(consume(), WAIT_S)) == {
        p: sent(p) for p in range(PARTITIONS)
    }


def test_latest_reset_starts_at_the_end(cluster: Cluster) -> None:
    async def position() -> list[int]:
        c = consumer(cluster.bootstrap, "latest")
        await c.start()
        try:
            tps = [TopicPartition(TOPIC, p) for p in range(PARTITIONS)]
            c.assign(tps)
            return [await c.position(tp) for tp in tps]
        finally:
            await c.stop()

    assert asyncio.run(asyncio.wait_for(position(), WAIT_S)) == [PER_PARTITION] * PARTITIONS


def test_end_beginning_and_time_offsets(cluster: Cluster) -> None:
    tps = [TopicPartition(TOPIC, p) for p in range(PARTITIONS)]

    async def lookups() -> tuple[object, object, object]:
        c = consumer(cluster.bootstrap, "earliest")
        await c.start()
        try:
            return (
                await c.end_offsets(tps),
                await c.beginning_offsets(tps),
                await c.offsets_for_times({tp: BASE_MS + 10 for tp in tps}),
            )
        finally:
            await c.stop()

    end, beginning, by_time = asyncio.run(asyncio.wait_for(lookups(), WAIT_S))
    assert end == {tp: PER_PARTITION for tp in tps}
    assert beginning == {tp: 0 for tp in tps}
    assert {tp: (o.offset, o.timestamp) for tp, o in by_time.items()} == {
        tp: (10, BASE_MS + 10) for tp in tps
    }
    with Admin(cluster.bootstrap) as admin:
        assert admin.list_offsets([(TOPIC, p) for p in range(PARTITIONS)]) == {
            (TOPIC, p): PER_PARTITION for p in range(PARTITIONS)
        }
