"""Static membership and offsets retention, as librdkafka (confluent-kafka) sees them.

- Static membership (KIP-345, ``group.instance.id``): a static member that closes (librdkafka
  sends no LeaveGroup for one) and comes back within its session timeout gets its partitions
  back under its instance id, and the other member sees no rebalance (no revoke, no assign).
- Offsets retention (``offsets_retention_ms``, Kafka's ``offsets.retention.minutes``, checked
  every ``offsets_retention_check_interval_ms``): once a group is empty its offsets expire after
  the retention and the group goes away; a group with a member subscribed to the topic keeps
  its offsets however old its last commit is (KIP-211).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from confluent_kafka import Consumer as KafkaConsumer
from confluent_kafka import TopicPartition

from replog import Admin, Cluster, Producer

pytestmark = [pytest.mark.system, pytest.mark.timeout(120)]

PARTITIONS = 4
SESSION_MS = 6_000


def _consumer(cluster: Cluster, group: str, **extra: Any) -> KafkaConsumer:
    return KafkaConsumer(
        {
            "bootstrap.servers": cluster.bootstrap,
            "group.id": group,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "session.timeout.ms": SESSION_MS,
            "heartbeat.interval.ms": 300,
            **extra,
        }
    )


def _topic(cluster: Cluster, name: str) -> str:
    with Admin(cluster.bootstrap) as admin:
        admin.create_topics(name, PARTITIONS, 3)
    with Producer(cluster.bootstrap) as producer:
        for n in range(20):
            producer.send(name, f"v{n}".encode(), partition=n % PARTITIONS)
        producer.flush()
    return name


def _poll_until(
    consumers: list[KafkaConsumer], done: Callable[[], bool], timeout_s: float, what: str
) -> None:
    deadline = time.monotonic() + timeout_s
    while not done():
        assert time.monotonic() < deadline, f"{what} did not happen within {timeout_s} s"
        for consumer in consumers:
            consumer.poll(0.05)


class _Rebalances:
    """A member's rebalance callbacks, in order."""

    def __init__(self) -> None:
        self.events: list[tuple[str, frozenset[int]]] = []

    def on_assign(self, consumer: Any, partitions: list[Any]) -> None:
        del consumer
        self.events.append(("assign", frozenset(p.partition for p in partitions)))

    def on_revoke(self, consumer: Any, partitions: list[Any]) -> None:
        del consumer
        self.events.append(("revoke", frozenset(p.partition for p in partitions)))


def _owned(consumer: KafkaConsumer) -> frozenset[int]:
    return frozenset(tp.partition for tp in consumer.assignment())


@pytest.fixture(scope="module")
def cluster() -> Iterator[Cluster]:
    groups = {
        "initial_rebalance_delay_ms": 0,
        "session_timeout_ms_min": 1_000,
        "offsets_retention_ms": 3_000,
        "offsets_retention_check_interval_ms": 200,
    }
    with Cluster.local(3, groups=groups) as c:
        yield c


def test_a_static_member_that_comes_back_within_its_session_gets_its_partitions_back(
    cluster: Cluster,
) -> None:
    topic = _topic(cluster, "static-members")
    group = "static-group"
    seen_a, seen_b = _Rebalances(), _Rebalances()
    a = _consumer(cluster, group, **{"group.instance.id": "instance-a"})
    b = _consumer(cluster, group, **{"group.instance.id": "instance-b"})
    a.subscribe([topic], on_assign=seen_a.on_assign, on_revoke=seen_a.on_revoke)
    b.subscribe([topic], on_assign=seen_b.on_assign, on_revoke=seen_b.on_revoke)
    _poll_until(
        [a, b],
        lambda: len(_owned(a)) == 2 and len(_owned(b)) == 2,
        30,
        "both static members owning two partitions",
    )
    owned_by_a, owned_by_b = _owned(a), _owned(b)
    b_events = list(seen_b.events)
    a.close()  # a static member sends no LeaveGroup: the coordinator keeps its place
    closed = time.monotonic()
    again = _Rebalances()
    a2 = _consumer(cluster, group, **{"group.instance.id": "instance-a"})
    a2.subscribe([topic], on_assign=again.on_assign, on_revoke=again.on_revoke)
    try:
        _poll_until([a2, b], lambda: bool(_owned(a2)), 10, "the returning member's assignment")
        assert time.monotonic() - closed < SESSION_MS / 1000, "came back after the session"
        assert _owned(a2) == owned_by_a
        _poll_until([a2, b], lambda: False or time.monotonic() - closed > 3, 5, "settling")
        assert seen_b.events == b_events, "the other member went through a rebalance"
        assert _owned(b) == owned_by_b
        with Admin(cluster.bootstrap) as admin:
            members = admin.describe_groups([group])[group].members
        assert sorted(m.group_instance_id or "" for m in members) == ["instance-a", "instance-b"]
    finally:
        a2.close()
        b.close()


def test_an_empty_groups_offsets_expire_and_a_group_with_members_keeps_them(
    cluster: Cluster,
) -> None:
    topic = _topic(cluster, "retention")
    gone, kept = _consumer(cluster, "retention-empty"), _consumer(cluster, "retention-live")
    for consumer in (gone, kept):
        consumer.subscribe([topic])
    _poll_until(
        [gone, kept],
        lambda: len(_owned(gone)) == PARTITIONS and len(_owned(kept)) == PARTITIONS,
        30,
        "both groups assigned",
    )
    # every partition committed explicitly: a plain commit() covers only the partitions the
    # consumer has fetched from so far, which under load may be fewer than all of them
    every = [TopicPartition(topic, p, 1) for p in range(PARTITIONS)]
    for consumer in (gone, kept):
        consumer.commit(offsets=every, asynchronous=False)
    gone.close()
    with Admin(cluster.bootstrap) as admin:
        assert len(admin.list_group_offsets("retention-empty")) == PARTITIONS
        assert len(admin.list_group_offsets("retention-live")) == PARTITIONS
        committed_at = time.monotonic()
        # the live member keeps polling (no new commit) well past the 3 s retention
        _poll_until([kept], lambda: time.monotonic() - committed_at > 6, 10, "the retention")
        assert admin.list_group_offsets("retention-empty") == {}
        assert "retention-empty" not in {g.group_id for g in admin.list_groups()}
        assert len(admin.list_group_offsets("retention-live")) == PARTITIONS
    kept.close()
