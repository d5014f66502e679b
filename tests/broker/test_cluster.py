"""Brokers over real TCP on 127.0.0.1: produce/fetch, followers, restarts, bad clients."""

from __future__ import annotations

import os
import socket
import time
from collections.abc import Callable, Iterator

import pytest

from replog.broker import Cluster
from replog.protocol import messages as m
from tests.broker.support import Client, fetch_values, metadata, produce
from tests.waiting import eventually

pytestmark = [pytest.mark.system, pytest.mark.timeout(60)]


def wait_for(condition: Callable[[], bool], timeout_s: float = 30.0) -> None:
    eventually(condition, what="the condition", timeout_s=timeout_s)


@pytest.fixture
def cluster(tmp_path: object) -> Iterator[Cluster]:
    c = Cluster.local(3, base_dir=str(tmp_path))
    try:
        yield c
    finally:
        c.close()


def create_topic(cluster: Cluster, topic: str, replicas: list[int]) -> None:
    """Create through the coordinator with the active controller's epoch (an explicit
    assignment, which the admin API does not take). Waits for a broker to win the controller
    election: electing one here on a broker's behalf would leave no ControllerService running."""
    coord = cluster.coordinator
    wait_for(lambda: coord.current_controller() is not None)
    controller = coord.current_controller()
    assert controller is not None
    coord.create_topic(topic, [replicas], controller_epoch=controller.controller_epoch)
    wait_for(
        lambda: all(
            cluster.call(lambda b: b.local_log(topic, 0) is not None, cluster.brokers[r])
            for r in replicas
        )
    )


def leader_client(cluster: Cluster, replicas: list[int]) -> Client:
    return Client(cluster.brokers[replicas[0]].address)


def test_produce_fetch_round_trip_with_acks_0_1_all(cluster: Cluster) -> None:
    create_topic(cluster, "t", [1, 2, 3])
    client = leader_client(cluster, [1, 2, 3])
    assert produce(client, "t", [b"a1", b"a2"], acks=1) == (0, 0)
    assert produce(client, "t", [b"all"], acks=-1) == (0, 2)
    client.send(__import__("tests.broker.support", fromlist=["x"]).produce_request("t", [b"z"], 0))
    wait_for(lambda: fetch_values(client, "t")[1] >= 4)
    code, hw, values = fetch_values(client, "t")
    assert code == 0 and hw == 4
    assert values == [b"a1", b"a2", b"all", b"z"]
    # every follower holds the acknowledged records
    for broker_id in (2, 3):
        log = cluster.brokers[broker_id].local_log("t", 0)
        assert log is not None
        wait_for(lambda log=log: log.log_end_offset == 4)
    meta = metadata(client)
    assert sorted(b.node_id for b in meta.brokers) == [1, 2, 3]
    (topic,) = meta.topics
    assert topic.partitions[0].leader_id == 1
    assert sorted(topic.partitions[0].isr_nodes) == [1, 2, 3]
    client.close()


def test_fetch_long_polls_until_data_arrives(cluster: Cluster) -> None:
    create_topic(cluster, "lp", [1, 2])
    consumer, producer = leader_client(cluster, [1]), leader_client(cluster, [1])
    consumer.send(
        m.FetchRequest(
            replica_id=-1,
            max_wait_ms=5_000,
            min_bytes=1,
            max_bytes=1 << 20,
            isolation_level=0,
            session_id=0,
            session_epoch=-1,
            topics=[
                m.FetchTopic(
                    topic="lp",
                    partitions=[
                        m.FetchPartition(partition=0, fetch_offset=0, partition_max_bytes=1 << 20)
                    ],
                )
            ],
            forgotten_topics_data=[],
            rack_id="",
        )
    )
    started = time.monotonic()
    assert produce(producer, "lp", [b"x"], acks=-1)[0] == 0
    response = consumer.receive(m.FETCH.api_key)
    assert isinstance(response, m.FetchResponse)
    assert response.responses[0].partitions[0].high_watermark == 1
    assert time.monotonic() - started < 4.0
    consumer.close()
    producer.close()


def test_follower_that_was_down_catches_up(cluster: Cluster) -> None:
    create_topic(cluster, "c", [1, 2, 3])
    client = leader_client(cluster, [1])
    assert produce(client, "c", [b"before"], acks=-1)[0] == 0
    cluster.kill(3)
    for i in range(20):
        assert produce(client, "c", [b"v%d" % i], acks=1)[0] == 0
    cluster.start(3)
    log = cluster.brokers[3].local_log("c", 0)
    assert log is not None
    wait_for(lambda: cluster.call(lambda: log.log_end_offset) == 21)
    assert produce(client, "c", [b"after"], acks=-1)[0] == 0
    client.close()


def test_broker_restart_recovers_its_logs(cluster: Cluster) -> None:
    create_topic(cluster, "r", [2, 1])
    client = Client(cluster.brokers[2].address)
    for i in range(5):
        assert produce(client, "r", [b"r%d" % i], acks=-1)[0] == 0
    client.close()
    cluster.stop(2, controlled=False)
    broker = cluster.start(2)
    log = broker.local_log("r", 0)
    assert log is not None
    assert cluster.call(lambda: log.log_end_offset) == 5

    def leader_address() -> str:
        state = cluster.coordinator.get_partition_state("r", 0)
        assert state is not None
        return cluster.brokers[state.leader].address

    client = Client(leader_address())
    wait_for(lambda: fetch_values(client, "r")[1] == 5)
    assert fetch_values(client, "r")[2] == [b"r%d" % i for i in range(5)]
    client.close()


def test_malformed_requests_do_not_hurt_other_clients(cluster: Cluster) -> None:
    create_topic(cluster, "m", [1])
    good = leader_client(cluster, [1])
    assert produce(good, "m", [b"ok"], acks=1)[0] == 0
    host, port = cluster.brokers[1].address.rsplit(":", 1)
    payloads = [
        os.urandom(64),
        b"\x7f\xff\xff\xff" + os.urandom(32),  # oversized frame
        b"\xff\xff\xff\xf0",  # negative size
        (10).to_bytes(4, "big") + (999).to_bytes(2, "big") + os.urandom(8),  # unknown api key
        (40).to_bytes(4, "big") + (0).to_bytes(2, "big") + (9).to_bytes(2, "big") + os.urandom(36),
        (6).to_bytes(4, "big") + b"\x00\x00\x00",  # truncated frame, then close
    ]
    for payload in payloads * 3:
        with socket.create_connection((host, int(port)), timeout=5) as bad:
            bad.sendall(payload)
            bad.settimeout(1.0)
            try:
                bad.recv(100)
            except (TimeoutError, ConnectionError):
                pass
    assert produce(good, "m", [b"still"], acks=1) == (0, 1)
    wait_for(lambda: fetch_values(good, "m")[1] == 2)
    assert fetch_values(good, "m")[2] == [b"ok", b"still"]
    assert cluster.brokers[1].state.value == "online"
    good.close()


def _leader(cluster: Cluster, topic: str) -> int:
    state = cluster.coordinator.get_partition_state(topic, 0)
    assert state is not None
    return state.leader


def test_leader_kill_loses_no_acknowledged_record(cluster: Cluster) -> None:
    create_topic(cluster, "k", [1, 2, 3])
    client = leader_client(cluster, [1])
    acked = [b"k%d" % i for i in range(10)]
    for value in acked:
        assert produce(client, "k", [value], acks=-1)[0] == 0
    client.close()
    cluster.kill(1)
    wait_for(lambda: _leader(cluster, "k") in (2, 3), timeout_s=20)
    client = Client(cluster.brokers[_leader(cluster, "k")].address)
    wait_for(lambda: fetch_values(client, "k")[1] >= 10, timeout_s=10)
    assert fetch_values(client, "k")[2][:10] == acked
    client.close()


def test_controlled_shutdown_moves_leaders(cluster: Cluster) -> None:
    create_topic(cluster, "s", [2, 3, 1])
    client = Client(cluster.brokers[2].address)
    assert produce(client, "s", [b"x"], acks=-1)[0] == 0
    client.close()
    cluster.stop(2, controlled=True)
    assert _leader(cluster, "s") in (1, 3)
