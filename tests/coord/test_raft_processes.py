"""The built-in quorum as processes: three ``replog controller`` voters, three brokers on
``raft://`` (``replog broker`` processes), a kafka-python producer with acks=all. Stop the
quorum's leader voter: the two survivors elect another, the brokers' coordinator calls follow
it, and the producer is acknowledged again.

Real processes on loopback (this is where ``time.sleep`` is allowed); every process is one this
module started, stopped by its PID."""

from __future__ import annotations

import signal
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from kafka import KafkaAdminClient, KafkaProducer
from kafka.admin import NewTopic
from kafka.errors import NotLeaderForPartitionError

from replog.coord.errors import CoordinatorUnavailableError
from replog.quorum import commands as rc
from replog.quorum.channel import QuorumChannel
from tests.faults.harness import ProcessCluster, QuorumProcesses
from tests.faults.workload import read_with_kafka_python

pytestmark = pytest.mark.system

#: quick elections so a case fits in seconds (the CLI defaults are 1 s / 2 s)
VOTER_ARGS = ["--election-timeout-ms", "300", "--fetch-timeout-ms", "1000"]
VOTER_ARGS += ["--request-timeout-ms", "500"]
BROKER_SETTINGS = {
    "session_timeout_ms": 4_000,
    "heartbeat_interval_ms": 200,
    "replica_lag_ms_max": 4_000,
    "replica_fetch_wait_ms_max": 100,
    "default_replication_factor": 3,
    "default_min_insync_replicas": 2,
    "controlled_shutdown_timeout_ms": 5_000,
    "request_timeout_ms": 5_000,
}
TOPIC = "quorum-failover"


@pytest.fixture
def quorum(tmp_path: Path) -> Iterator[QuorumProcesses]:
    with QuorumProcesses.running(tmp_path / "quorum", 3, VOTER_ARGS) as q:
        yield q


@pytest.fixture
def cluster(quorum: QuorumProcesses, tmp_path: Path) -> Iterator[ProcessCluster]:
    with ProcessCluster.running(
        tmp_path / "brokers", quorum.url, 3, settings=BROKER_SETTINGS
    ) as brokers:
        yield brokers


def _create_topic(cluster: ProcessCluster) -> None:
    """RF 3, min ISR 2, asked for as soon as the brokers serve: a broker serves only once the
    controller counts it, so every one of the three is available to the placement."""
    admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap, request_timeout_ms=10_000)
    try:
        admin.create_topics([NewTopic(TOPIC, 1, 3, topic_configs={"min.insync.replicas": "2"})])
    finally:
        admin.close()


def _produce(producer: KafkaProducer, value: bytes, timeout_s: float) -> float:
    """Send until acknowledged (retrying what the cluster refuses meanwhile); seconds taken."""
    start = time.monotonic()
    while True:
        try:
            producer.send(TOPIC, value, partition=0).get(timeout=10)
            return time.monotonic() - start
        except Exception:
            if time.monotonic() - start > timeout_s:
                raise
            time.sleep(0.2)


def test_a_killed_leader_voter_is_replaced_long_before_the_fetch_timeout(tmp_path: Path) -> None:
    """SIGKILL the leader of three voters whose fetch timeout is 10 s: the OS closes the dead
    process's sockets, the followers' reconnects are refused, and they elect at once (E9)
    instead of waiting out the fetch timeout, which was all a follower had before."""
    fetch_timeout_s = 10
    args = ["--election-timeout-ms", "300", "--fetch-timeout-ms", str(fetch_timeout_s * 1000)]
    quorum = QuorumProcesses.start(tmp_path / "quorum", 3, [*args, "--request-timeout-ms", "500"])
    try:
        leader = quorum.leader()
        quorum.voters[leader].stop(signal.SIGKILL)
        killed = time.monotonic()
        new_leader = quorum.leader(timeout_s=3 * fetch_timeout_s)
        elected_s = time.monotonic() - killed
        print(f"leader {leader} got SIGKILL: {new_leader} leads after {elected_s:.2f} s")
        assert new_leader != leader
        assert elected_s < fetch_timeout_s / 2, quorum.log_tails()
    finally:
        quorum.close()


@pytest.mark.parametrize("signum", [signal.SIGKILL, signal.SIGTERM], ids=["kill", "term"])
def test_produce_survives_the_loss_of_the_quorum_leader(
    quorum: QuorumProcesses, cluster: ProcessCluster, signum: signal.Signals
) -> None:
    """SIGKILL: the followers stand after their fetch timeout; SIGTERM: the leader resigns
    first and a successor is elected at once."""
    _create_topic(cluster)
    producer = KafkaProducer(
        bootstrap_servers=cluster.bootstrap,
        acks="all",
        retries=5,
        request_timeout_ms=5_000,
    )
    try:
        _produce(producer, b"before", timeout_s=30)
        leader = quorum.leader()
        quorum.voters[leader].stop(signum)
        signalled = time.monotonic()
        new_leader = quorum.leader()
        elected_s = time.monotonic() - signalled
        assert new_leader != leader
        for i in range(20):
            _produce(producer, b"after-%d" % i, timeout_s=30)
        acked_s = time.monotonic() - signalled
        # the figures a run reports with -s
        print(f"leader {leader} got {signum.name}: {new_leader} leads after {elected_s:.2f} s")
        print(f"20 acks=all records acknowledged {acked_s:.2f} s after the signal")
    finally:
        producer.close()
    # the brokers' sessions lived through the failover: every one is still registered
    channel = QuorumChannel([v.address for i, v in quorum.voters.items() if i != leader])
    try:
        live = channel.call(rc.LiveBrokers(), timeout_ms=10_000, idempotent=True)
    finally:
        channel.close()
    assert sorted(live) == [1, 2, 3]
    dead = QuorumChannel([quorum.voters[leader].address])
    try:
        with pytest.raises(CoordinatorUnavailableError):
            dead.call(rc.CurrentController(), timeout_ms=500, idempotent=True)
    finally:
        dead.close()


def test_an_rf_n_topic_asked_for_as_soon_as_n_brokers_serve(
    quorum: QuorumProcesses, tmp_path: Path
) -> None:
    """Three brokers started together on a quorum with no controller: once each reports it
    serves, an RF 3 topic is placed on all three at the first attempt (a broker serves only
    once the controller counts it). Several rounds, each a fresh set of brokers."""
    for round_ in range(3):
        brokers = ProcessCluster.create(
            tmp_path / f"round-{round_}", quorum.url, 3, settings=BROKER_SETTINGS
        )
        brokers.start()
        try:
            admin = KafkaAdminClient(bootstrap_servers=brokers.bootstrap, request_timeout_ms=10_000)
            try:
                answer = admin.create_topics([NewTopic(f"rf3-{round_}", 3, 3)])
            finally:
                admin.close()
            errors = [(t["error_code"], t["error_message"]) for t in answer["topics"]]
            assert errors == [(0, None)], brokers.log_tails()
        finally:
            brokers.close()


def test_brokers_cut_off_from_the_quorum_fence_themselves(
    quorum: QuorumProcesses, cluster: ProcessCluster
) -> None:
    """A broker that cannot reach the active controller fences itself: with every voter paused
    (SIGSTOP: sockets open, nothing answered), no broker can reach it, so within its session
    timeout each stops acknowledging writes -- acks=1 included, since such a producer would
    otherwise write on to a leader the controller may have replaced. Refused sends are not in
    the log; once the voters resume, acks=1 is acknowledged again and every acknowledged record
    reads back."""
    admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap, request_timeout_ms=10_000)
    try:
        admin.create_topics([NewTopic(TOPIC, 1, 3)])
    finally:
        admin.close()
    producer = KafkaProducer(bootstrap_servers=cluster.bootstrap, acks=1, retries=0)
    acked: list[bytes] = []
    refused: list[bytes] = []

    def send(value: bytes) -> bool:
        try:
            producer.send(TOPIC, value, partition=0).get(timeout=10)
        except NotLeaderForPartitionError:
            refused.append(value)
            return False
        acked.append(value)
        return True

    try:
        _produce(producer, b"warm-up", timeout_s=30)
        acked.append(b"warm-up")
        assert send(b"before")
        for voter in quorum.voters.values():
            voter.pause()
        paused = time.monotonic()
        session_s = int(BROKER_SETTINGS["session_timeout_ms"]) / 1000
        i = 0
        while send(b"cut-off-%d" % i):  # acks=1 goes on only until the broker fences itself
            i += 1
            assert time.monotonic() - paused < session_s + 2, "no fence within the session"
            time.sleep(0.1)
        fenced_s = time.monotonic() - paused
        for j in range(5):  # and stays fenced while the quorum is unreachable
            assert not send(b"fenced-%d" % j)
            time.sleep(0.1)
        for voter in quorum.voters.values():
            voter.resume()
        resumed = time.monotonic()
        _produce(producer, b"after", timeout_s=60)
        acked.append(b"after")
        print(
            f"fenced {fenced_s:.2f} s after the pause (session {session_s:.0f} s), "
            f"acks=1 again {time.monotonic() - resumed:.2f} s after the resume"
        )
    finally:
        for voter in quorum.voters.values():
            voter.resume()
        producer.close()
    values = list(read_with_kafka_python(cluster.bootstrap, TOPIC, [0])[0].values())
    assert all(v in values for v in acked), (acked, values)
    assert not set(refused) & set(values), refused
