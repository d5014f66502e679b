"""Incremental fetch sessions (KIP-227) on real brokers: followers fetch through sessions, so
with many idle partitions a steady-state replica fetch lists only the partitions that moved
and the leader reads only those (the idle ones stay quiet);
kafka-python (which opens sessions by default) reads everything exactly once through them,
also after the leader restarts and has forgotten every session."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from kafka import KafkaConsumer, KafkaProducer, TopicPartition

from replog import Admin, Cluster
from replog.broker.driver.fetch_session_cache import FetchContext
from replog.protocol import messages as m
from tests.waiting import eventually

pytestmark = [pytest.mark.system, pytest.mark.timeout(120)]

IDLE = 40


@pytest.fixture(scope="module")
def cluster() -> Iterator[Cluster]:
    with Cluster.local(2) as c:
        yield c


def _listed(body: m.FetchRequest) -> int:
    return sum(len(t.partitions) for t in body.topics)


def test_a_steady_follower_fetch_lists_only_the_partitions_that_moved(cluster: Cluster) -> None:
    with Admin(cluster.bootstrap) as admin:
        admin.create_topics("idle", IDLE, 2, {"min.insync.replicas": "2"})
        # led by broker 1, so broker 2's session with it is the one every ack goes through
        admin.create_topics("busy", 1, 2, {"min.insync.replicas": "2"}, replica_assignment=[[1, 2]])
    driver = cluster.brokers[1].driver
    assert driver is not None
    cache = driver.fetch_session_cache
    seen: list[tuple[int, int, int]] = []  # (replica id, session epoch, partitions listed)
    original = cache.context
    services = driver.requests._services
    idle_reads: list[int] = []  # the idle partitions broker 1 read for broker 2's fetches
    original_fetch = services.fetch

    def reading(topic: str, partition: int, request: Any, now_ms: int) -> Any:
        if topic == "idle" and request.replica_id == 2 and seen:
            idle_reads.append(partition)
        return original_fetch(topic, partition, request, now_ms)

    def spying(body: m.FetchRequest, now_ms: int, feed: Any) -> FetchContext | Any:
        if body.replica_id == 2:
            seen.append((body.replica_id, body.session_epoch, _listed(body)))
        return original(body, now_ms, feed)

    cluster.call(setattr, cache, "context", spying)
    cluster.call(setattr, services, "fetch", reading)
    try:
        assert _leader_of(cluster, "busy") == 1
        eventually(lambda: [e for e in seen if e[1] > 0], what="incremental follower fetches")
        seen.clear()  # the session is open: from here on it is the steady state
        producer = KafkaProducer(bootstrap_servers=cluster.bootstrap, acks="all", linger_ms=0)
        for i in range(30):  # acks=all: each completes once broker 2 reported it fetched
            producer.send("busy", b"v%d" % i).get(timeout=30)
        producer.close()
    finally:
        cluster.call(delattr, cache, "context")
        cluster.call(delattr, services, "fetch")
    incremental = [listed for _, epoch, listed in seen if epoch > 0]
    assert incremental, seen
    # Broker 2 follows ~20 idle partitions on broker 1; a steady fetch names at most the busy
    # one -- never the idle ones again.
    assert max(incremental) <= 1, seen
    # Nor does broker 1 read them: 30 acknowledgements each took at least one fetch, which
    # would read the ~20 idle partitions broker 1 leads every time; quiet partitions are read
    # only on a refresh (every replica_lag_ms_max / 4).
    assert len(seen) >= 30, seen
    assert len(idle_reads) <= 2 * IDLE, sorted(idle_reads)


def _leader_of(cluster: Cluster, topic: str) -> int:
    def read() -> int:
        driver = cluster.brokers[1].driver
        assert driver is not None
        state = driver.rm.image.partitions.get((topic, 0))
        return -1 if state is None else state.leader

    return int(eventually(lambda: cluster.call(read), done=lambda v: v > 0, what="a leader"))


def test_kafka_python_reads_everything_through_sessions_across_a_leader_restart(
    cluster: Cluster,
) -> None:
    partitions = 6
    with Admin(cluster.bootstrap) as admin:
        admin.create_topics("sess", partitions, 2, {"min.insync.replicas": "1"})
    producer = KafkaProducer(bootstrap_servers=cluster.bootstrap, acks="all")
    sent = {p: [b"a-%d-%d" % (p, i) for i in range(20)] for p in range(partitions)}
    for p, values in sent.items():
        for v in values:
            producer.send("sess", v, partition=p)
    producer.flush(timeout=30)
    consumer = KafkaConsumer(
        bootstrap_servers=cluster.bootstrap,
        enable_incremental_fetch_sessions=True,
        fetch_max_wait_ms=100,
        consumer_timeout_ms=200,
    )
    consumer.assign([TopicPartition("sess", p) for p in range(partitions)])
    consumer.seek_to_beginning()
    got: dict[int, list[bytes]] = {p: [] for p in range(partitions)}

    def read_until(expected: int) -> int:
        def drain() -> int:
            for record in consumer:
                got[record.partition].append(record.value)
            return sum(len(v) for v in got.values())

        return int(eventually(drain, done=lambda n: n >= expected, what=f"{expected} records"))

    read_until(20 * partitions)
    fetchers = cluster.call(
        lambda: [
            f
            for b in cluster.brokers.values()
            if b.driver
            for f in b.driver.fetch_session_cache.fetchers()
        ]
    )
    assert -1 in fetchers, fetchers  # the consumer's session (beside the followers')

    cluster.restart(1)  # its sessions are gone: kafka-python must start over
    for p in range(partitions):
        sent[p].append(b"b-%d" % p)
        producer.send("sess", sent[p][-1], partition=p)
    producer.flush(timeout=60)
    read_until(21 * partitions)
    consumer.close()
    producer.close()
    assert got == sent
