"""A crash and restart of a broker on ``raft://`` that resumes from its metadata image cache.

Real processes, so the crash is real: three ``replog broker`` processes on a one-voter
``replog controller`` quorum; one broker is SIGKILLed (its quorum session is left to expire,
nothing is flushed or written at shutdown) while topics exist and its cache has been written,
the cluster moves on without it (a new topic, more records), and it is started again. It must
start from the cache (its log says so, and no full snapshot was read), serve the metadata the
others serve, and hold every acknowledged record: once it is back in every ISR the two other
brokers are killed and an independent client (kafka-python) reads every record from it alone.

``time.sleep`` is allowed here (real processes); every process is one this module started."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import pytest
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import NewTopic

from replog.broker.driver.image_cache import read_image
from replog.log.fs import REAL_FS
from tests.coord.test_raft_processes import VOTER_ARGS
from tests.faults.harness import ProcessCluster, QuorumProcesses

pytestmark = [pytest.mark.system, pytest.mark.timeout(300)]

SETTINGS = {
    "session_timeout_ms": 3_000,
    "heartbeat_interval_ms": 200,
    "replica_lag_ms_max": 3_000,
    "replica_fetch_wait_ms_max": 100,
    "default_replication_factor": 3,
    "default_min_insync_replicas": 2,
    "controlled_shutdown_timeout_ms": 5_000,
    "request_timeout_ms": 5_000,
    "metadata_image_cache_interval_ms": 100,
}
CRASHED = 1
LOADED_FROM_CACHE = "loaded from the image cache"
LOADED_FROM_SNAPSHOT = "loaded from a full snapshot"
T = TypeVar("T")


@pytest.fixture
def quorum(tmp_path: Path) -> Iterator[QuorumProcesses]:
    with QuorumProcesses.running(tmp_path / "quorum", 1, VOTER_ARGS) as q:
        yield q


@pytest.fixture
def cluster(quorum: QuorumProcesses, tmp_path: Path) -> Iterator[ProcessCluster]:
    with ProcessCluster.running(tmp_path / "brokers", quorum.url, 3, settings=SETTINGS) as c:
        yield c


def _until(what: Callable[[], T | None], timeout_s: float = 30.0) -> T:
    """``what()`` once it is truthy (errors count as not yet)."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            value = what()
            if value:
                return value
        except Exception:
            if time.monotonic() > deadline:
                raise
        if time.monotonic() > deadline:
            raise AssertionError(f"not true after {timeout_s} s: {what}")
        time.sleep(0.2)


def _create(bootstrap: str, *topics: NewTopic) -> None:
    admin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=10_000)
    try:
        answer = admin.create_topics(list(topics))
    finally:
        admin.close()
    assert [t["error_code"] for t in answer["topics"]] == [0] * len(topics)


def _layout(address: str, topics: list[str]) -> dict[str, dict[int, tuple[int, ...]]]:
    """Topic -> partition -> replicas, as the broker at ``address`` alone answers them."""
    admin = KafkaAdminClient(bootstrap_servers=address, request_timeout_ms=5_000)
    try:
        described = admin.describe_topics(topics)
    finally:
        admin.close()
    layout: dict[str, dict[int, tuple[int, ...]]] = {}
    for topic, name in zip(described, topics, strict=True):
        assert topic["error_code"] == 0, topic
        parts = topic["partitions"]
        layout[name] = {p["partition_index"]: tuple(p["replica_nodes"]) for p in parts}
    return layout


def _live_brokers(bootstrap: str) -> set[int]:
    admin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=5_000)
    try:
        return {b["broker_id"] for b in admin.describe_cluster()["brokers"]}
    finally:
        admin.close()


def _isrs(address: str, topics: list[str]) -> dict[tuple[str, int], set[int]]:
    admin = KafkaAdminClient(bootstrap_servers=address, request_timeout_ms=5_000)
    try:
        described = admin.describe_topics(topics)
    finally:
        admin.close()
    return {
        (name, p["partition_index"]): set(p["isr_nodes"])
        for t, name in zip(described, topics, strict=True)
        for p in t["partitions"]
    }


def _produce(bootstrap: str, topic: str, count: int, acked: dict[Any, bytes]) -> None:
    """``count`` records over the topic's partitions, acks=all; record what was acknowledged."""
    producer = KafkaProducer(
        bootstrap_servers=bootstrap, acks="all", retries=10, request_timeout_ms=5_000
    )
    try:
        futures = [
            (producer.send(topic, f"{topic}-{i}".encode()), f"{topic}-{i}".encode())
            for i in range(count)
        ]
        for future, value in futures:
            meta = future.get(timeout=30)
            acked[(meta.topic, meta.partition, meta.offset)] = value
    finally:
        producer.close()


def _consume(address: str, wanted: dict[Any, bytes]) -> dict[Any, bytes]:
    """Every record of the partitions ``wanted`` names, read through ``address`` alone."""
    partitions = sorted({(topic, p) for topic, p, _ in wanted})
    consumer = KafkaConsumer(
        bootstrap_servers=address, enable_auto_commit=False, consumer_timeout_ms=2_000
    )
    try:
        tps = [TopicPartition(t, p) for t, p in partitions]
        consumer.assign(tps)
        consumer.seek_to_beginning(*tps)
        got: dict[Any, bytes] = {}
        deadline = time.monotonic() + 60
        while not wanted.keys() <= got.keys() and time.monotonic() < deadline:
            for tp, records in consumer.poll(timeout_ms=1_000).items():
                for r in records:
                    got[(tp.topic, tp.partition, r.offset)] = r.value
        return got
    finally:
        consumer.close()


def test_a_crashed_broker_restarts_from_its_image_cache(
    cluster: ProcessCluster, quorum: QuorumProcesses
) -> None:
    crashed = cluster.brokers[CRASHED]
    others = [b for i, b in cluster.brokers.items() if i != CRASHED]
    _create(cluster.bootstrap, NewTopic("a", 3, 3), NewTopic("b", 2, 3))
    acked: dict[Any, bytes] = {}
    _produce(cluster.bootstrap, "a", 60, acked)
    _produce(cluster.bootstrap, "b", 40, acked)
    _until(lambda: {"a", "b"} <= set(getattr(read_image(REAL_FS, str(crashed.log_dir)),
                                             "topics", {})))  # fmt: skip

    crashed.kill9()
    survivors = ",".join(b.address for b in others)
    _until(lambda: CRASHED not in _live_brokers(survivors))  # its session expired
    _create(survivors, NewTopic("c", 2, 2))  # the cache is behind: the feed brings the rest
    _produce(survivors, "a", 30, acked)
    _produce(survivors, "c", 20, acked)

    crashed.start()  # registers again once the crashed incarnation's session has expired
    second_start = crashed.log_path.read_text(errors="replace").split("===== start #2")[1]
    assert LOADED_FROM_CACHE in second_start, crashed.log_tail(60)
    assert LOADED_FROM_SNAPSHOT not in second_start, crashed.log_tail(60)

    topics = ["a", "b", "c"]
    expected = _until(lambda: _layout(others[0].address, topics))
    assert _until(lambda: _layout(crashed.address, topics)) == expected
    assert set(expected["a"]) == {0, 1, 2} and set(expected["c"]) == {0, 1}
    hosted = [(t, p) for t, parts in expected.items() for p, r in parts.items() if CRASHED in r]
    _until(lambda: all(CRASHED in isr for tp, isr in _isrs(crashed.address, topics).items()
                       if tp in hosted), timeout_s=60)  # fmt: skip

    for broker in others:
        broker.kill9()  # from now on only the restarted broker holds the data
    mine = {key: value for key, value in acked.items() if (key[0], key[1]) in hosted}
    got = _until(lambda: _consume(crashed.address, mine) or None, timeout_s=90)
    missing = {k: v for k, v in mine.items() if got.get(k) != v}
    assert not missing, f"{len(missing)} of {len(mine)} acknowledged records lost: {missing}"
