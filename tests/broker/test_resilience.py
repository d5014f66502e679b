"""Broker behaviour around failures: restarts, lost sessions, a slow coordinator, a leader that
is behind its follower, REPLICATED durability, and bounded teardown."""

from __future__ import annotations

import gc
import logging
import os
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from replog import Admin, Cluster, Consumer, Producer
from replog.broker import BrokerConfig
from replog.isr import DurabilityMode
from replog.metadata.types import CasStatus, PartitionState
from tests.broker.support import Client, metadata, produce
from tests.broker.test_cluster import wait_for

pytestmark = [pytest.mark.system, pytest.mark.timeout(60)]


@pytest.fixture
def cluster(tmp_path: object) -> Iterator[Cluster]:
    c = Cluster.local(3, base_dir=str(tmp_path))
    try:
        yield c
    finally:
        c.close()


def describe(cluster: Cluster, topic: str, partition: int = 0) -> Any:
    with Admin(cluster.bootstrap) as admin:
        return admin.describe_topics([topic])[topic].partitions[partition]


def create(cluster: Cluster, topic: str, replication_factor: int = 3, min_isr: int = 2) -> Any:
    with Admin(cluster.bootstrap) as admin:
        admin.create_topics(topic, 1, replication_factor, {"min.insync.replicas": str(min_isr)})
    wait_for(lambda: len(describe(cluster, topic).isr) == replication_factor)
    return describe(cluster, topic)


def read_all(cluster: Cluster, topic: str, count: int) -> list[bytes]:
    values: list[bytes] = []
    with Consumer(cluster.bootstrap, auto_reset="earliest") as consumer:
        consumer.assign([(topic, 0)])
        wait_for(
            lambda: (
                bool(values.extend(r.value or b"" for r in consumer.poll(200)))
                or len(values) >= count
            ),
            timeout_s=20,
        )
    return values


def test_restarted_follower_rejoins_the_isr(cluster: Cluster) -> None:
    info = create(cluster, "rejoin")
    follower = next(r for r in info.replicas if r != info.leader)
    with Producer(cluster.bootstrap, acks="all") as producer:
        for i in range(10):
            producer.send("rejoin", b"a%d" % i, partition=0).result(20)
        cluster.kill(follower)
        wait_for(lambda: follower not in describe(cluster, "rejoin").isr, timeout_s=20)
        for i in range(10):  # min ISR 2 still holds with two replicas
            producer.send("rejoin", b"b%d" % i, partition=0).result(20)
        cluster.start(follower)
        wait_for(lambda: follower in describe(cluster, "rejoin").isr, timeout_s=20)
    log = cluster.brokers[follower].local_log("rejoin", 0)
    assert log is not None
    wait_for(lambda: cluster.call(lambda: log.log_end_offset) == 20)


def test_leader_without_a_coordinator_session_completes_no_acks_all_produce(
    cluster: Cluster,
) -> None:
    info = create(cluster, "session")
    client = Client(cluster.brokers[info.leader].address)
    assert produce(client, "session", [b"before"], acks=-1) == (0, 0)
    coordinator: Any = cluster.coordinator
    coordinator.suspend_session(info.leader)
    broker = cluster.brokers[info.leader]
    wait_for(lambda: not cluster.call(lambda: broker.rm.metadata_current))
    code, _ = produce(client, "session", [b"while-suspended"], acks=-1)
    assert code != 0  # NOT_LEADER_OR_FOLLOWER: the client retries on fresh metadata
    coordinator.resume_session(info.leader)
    wait_for(lambda: cluster.call(lambda: broker.rm.metadata_current))
    code, offset = produce(client, "session", [b"after"], acks=-1)
    assert code == 0 and offset == 1  # nothing was appended while the session was suspended
    client.close()


def test_slow_coordinator_calls_do_not_block_the_event_loop(cluster: Cluster) -> None:
    coordinator: Any = cluster.coordinator
    real = coordinator.changes_since
    entered, release = threading.Event(), threading.Event()

    def blocking_changes_since(*args: Any, **kwargs: Any) -> Any:
        entered.set()
        release.wait(20)
        return real(*args, **kwargs)

    coordinator.changes_since = blocking_changes_since
    try:
        assert entered.wait(10)
        # With the call on the loop, this request could not be answered until release.
        client = Client(cluster.brokers[1].address, timeout_s=5)
        assert sorted(b.node_id for b in metadata(client).brokers) == [1, 2, 3]
        client.close()
    finally:
        release.set()
        del coordinator.changes_since


def test_follower_ahead_of_an_unclean_leader_truncates_to_the_leader_end_offset(
    tmp_path: object,
) -> None:
    with Cluster.local(2, base_dir=str(tmp_path)) as cluster:
        info = create(cluster, "unclean", replication_factor=2, min_isr=1)
        old_leader = info.leader
        ahead = next(r for r in info.replicas if r != old_leader)
        with Producer(cluster.bootstrap, acks="all") as producer:
            for i in range(5):
                producer.send("unclean", b"c%d" % i, partition=0).result(20)
        cluster.stop(old_leader, controlled=False)
        wait_for(lambda: describe(cluster, "unclean").leader == ahead, timeout_s=20)
        with Producer(cluster.bootstrap, acks=1) as producer:
            for i in range(3):  # only `ahead` has these
                producer.send("unclean", b"u%d" % i, partition=0).result(20)
        cluster.stop(ahead, controlled=False)
        # Its epoch cache is gone, so it cannot name a last fetched epoch: the leader can only
        # answer OFFSET_OUT_OF_RANGE, and the follower must learn the leader's end offset.
        os.remove(f"{tmp_path}/broker-{ahead}/unclean-0/leader-epoch-checkpoint")
        cluster.start(old_leader)
        force_leader(cluster, "unclean", old_leader)  # the unclean election, by hand
        cluster.start(ahead)
        log = cluster.brokers[ahead].local_log("unclean", 0)
        assert log is not None
        wait_for(lambda: cluster.call(lambda: log.log_end_offset) == 5, timeout_s=20)
        wait_for(lambda: ahead in describe(cluster, "unclean").isr, timeout_s=20)
        assert read_all(cluster, "unclean", 5) == [b"c%d" % i for i in range(5)]


def force_leader(cluster: Cluster, topic: str, leader: int) -> None:
    """Write ``leader`` (alone in the ISR, next leader epoch) as the controller would after an
    unclean election; retried while the running controller moves the partition epoch."""
    coord = cluster.coordinator

    def attempt() -> bool:
        state = coord.get_partition_state(topic, 0)
        controller = coord.current_controller()
        if state is None or controller is None:
            return False
        unclean = PartitionState(
            replicas=state.replicas,
            leader=leader,
            leader_epoch=state.leader_epoch + 1,
            isr=(leader,),
        )
        result = coord.compare_and_set_partition_state(
            topic, 0, state.partition_epoch, unclean, controller_epoch=controller.controller_epoch
        )
        return result.status is CasStatus.OK

    wait_for(attempt)


def test_replicated_durability_end_to_end(tmp_path: object) -> None:
    with Cluster.local(3, base_dir=str(tmp_path), durability="replicated") as cluster:
        assert all(
            b.config.durability is DurabilityMode.REPLICATED for b in cluster.brokers.values()
        )
        info = create(cluster, "replicated")
        leader = cluster.brokers[info.leader]
        assert (
            cluster.call(lambda: leader.rm.partition_config.durability) is DurabilityMode.REPLICATED
        )
        acked = [b"r%d" % i for i in range(50)]
        with Producer(cluster.bootstrap, acks="all", retries=50) as producer:
            for value in acked[:25]:
                producer.send("replicated", value, partition=0).result(20)
            cluster.kill(info.leader)
            for value in acked[25:]:
                producer.send("replicated", value, partition=0).result(30)
        got = read_all(cluster, "replicated", 50)
        assert sorted(set(got)) == sorted(acked)
        assert [v for v in got if v in acked][:25] == acked[:25]


@pytest.mark.timeout(20)
def test_close_after_stop_and_restart_is_bounded_and_leaks_no_task(
    tmp_path: object, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.ERROR, logger="asyncio")
    cluster = Cluster.local(3, base_dir=str(tmp_path))
    try:
        create(cluster, "teardown")
        with Producer(cluster.bootstrap, acks="all", retries=50) as producer:
            for i in range(10):
                producer.send("teardown", b"%d" % i, partition=0).result(10)
            cluster.restart(2)
            cluster.kill(3)
            cluster.start(3)
            for i in range(10):
                producer.send("teardown", b"%d" % i, partition=0).result(10)
    finally:
        cluster.close()
    gc.collect()
    assert not [r for r in caplog.records if "destroyed but it is pending" in r.getMessage()]
    assert not [t for t in threading.enumerate() if t.name == "replog-cluster-loop"]


def test_broker_config_accepts_replicated_durability() -> None:
    config = BrokerConfig(broker_id=1, log_dirs=("x",), durability="replicated")
    assert config.partition_config().durability is DurabilityMode.REPLICATED
