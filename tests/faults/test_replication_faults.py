"""Kafka's replication fault matrix against real broker processes.

Three brokers on loopback with the ZooKeeper backend, topic RF 3 / min ISR 2, fsync durability,
a producer with acks=all running throughout. Each case injects one fault while the producer
runs, waits for the cluster to make progress again, then checks that every acknowledged record
is consumed at its acknowledged offset, in order per partition.
"""

from __future__ import annotations

import signal
import time
from collections.abc import Callable

import pytest

from tests.faults.availability import AVAILABILITY_PROPERTY, FaultReport
from tests.faults.harness import ProcessCluster
from tests.faults.workload import (
    PARTITIONS,
    BackgroundProducer,
    check_acked_records_consumed,
    controller_id,
    describe,
    leader_of,
    wait_until,
)

pytestmark = [pytest.mark.faults, pytest.mark.timeout(180)]

ACKS_BETWEEN_STEPS = 100


def _isr_complete(cluster: ProcessCluster) -> bool:
    return all(len(p.isr) == 3 for p in describe(cluster).values())


def _target(cluster: ProcessCluster, role: str) -> int:
    target = leader_of(cluster, 0) if role == "leader" else controller_id(cluster)
    assert target in cluster.brokers, f"no {role} found: {target}"
    return target


def _wait_role_moved(cluster: ProcessCluster, role: str, old: int) -> None:
    if role == "leader":
        wait_until(
            f"a new leader of partition 0 (was {old})",
            lambda: leader_of(cluster, 0) not in (old, -1),
            cluster,
        )
    else:
        wait_until(
            f"a new controller (was {old})",
            lambda: controller_id(cluster) not in (old, -1),
            cluster,
        )


@pytest.mark.parametrize("role", ["leader", "controller"])
@pytest.mark.parametrize(
    "fault",
    [
        "clean_shutdown",
        "hard_shutdown",
        "clean_bounce",
        "hard_bounce",
    ],
)
def test_acked_records_survive(
    cluster: ProcessCluster,
    role: str,
    fault: str,
    record_property: Callable[[str, object], None],
) -> None:
    wait_until("a full ISR", lambda: _isr_complete(cluster), cluster)
    producer = BackgroundProducer(cluster.bootstrap).start()
    try:
        producer.wait_for_acks(ACKS_BETWEEN_STEPS, cluster)
        start = time.monotonic()
        target = _target(cluster, role)
        broker = cluster.brokers[target]
        if fault.startswith("clean"):
            assert broker.terminate() == 0, broker.log_tail()
        else:
            broker.kill9()
        _wait_role_moved(cluster, role, target)
        producer.wait_for_acks(ACKS_BETWEEN_STEPS, cluster)
        if fault.endswith("bounce"):
            broker.start()
            wait_until(f"broker {target} in every ISR", lambda: _isr_complete(cluster), cluster)
            producer.wait_for_acks(ACKS_BETWEEN_STEPS, cluster)
        gap = producer.longest_gap_s(start, time.monotonic())
        report = FaultReport("acked_records_survive", f"{fault} of the {role}", gap)
        record_property(AVAILABILITY_PROPERTY, report.line())
    finally:
        producer.stop()
    check_acked_records_consumed(cluster, producer)


def test_paused_leader_acknowledges_nothing_as_a_zombie(cluster: ProcessCluster) -> None:
    """SIGSTOP the leader past its session: a new leader takes over; after SIGCONT the old one
    must not acknowledge anything the new leader's log does not hold."""
    wait_until("a full ISR", lambda: _isr_complete(cluster), cluster)
    producer = BackgroundProducer(cluster.bootstrap).start()
    try:
        producer.wait_for_acks(ACKS_BETWEEN_STEPS, cluster)
        target = _target(cluster, "leader")
        zombie = cluster.brokers[target]
        zombie.pause()  # until its session expires and the leadership moves
        _wait_role_moved(cluster, "leader", target)
        producer.wait_for_acks(ACKS_BETWEEN_STEPS, cluster)
        zombie.resume()  # it works through what queued up while it was stopped, meanwhile
        producer.wait_for_acks(ACKS_BETWEEN_STEPS, cluster)
        wait_until(f"broker {target} back in every ISR", lambda: _isr_complete(cluster), cluster)
    finally:
        producer.stop()
    check_acked_records_consumed(cluster, producer)


def test_stalled_follower_leaves_and_rejoins_the_isr(long_session_cluster: ProcessCluster) -> None:
    """A follower that stops fetching (SIGSTOP for longer than replica_lag_ms_max but within its
    session) is dropped from the ISR, produce goes on with ISR 2, and it rejoins on resume.

    (The network-cut variant -- a TCP fault proxy between the followers and a leader that
    advertises the proxy's address -- is tests/broker/test_advertised_address.py.)"""
    cluster = long_session_cluster
    wait_until("a full ISR", lambda: _isr_complete(cluster), cluster)
    producer = BackgroundProducer(cluster.bootstrap).start()
    try:
        producer.wait_for_acks(ACKS_BETWEEN_STEPS, cluster)
        leader = _target(cluster, "leader")
        follower = next(i for i in describe(cluster)[0].replicas if i != leader)
        cluster.brokers[follower].pause()
        try:
            wait_until(
                f"follower {follower} out of the ISR of partition 0",
                lambda: follower not in describe(cluster)[0].isr,
                cluster,
            )
            producer.wait_for_acks(ACKS_BETWEEN_STEPS, cluster)
        finally:
            cluster.brokers[follower].resume()
        wait_until(f"broker {follower} back in every ISR", lambda: _isr_complete(cluster), cluster)
        producer.wait_for_acks(ACKS_BETWEEN_STEPS, cluster)
    finally:
        producer.stop()
    check_acked_records_consumed(cluster, producer)


def test_leader_power_loss_in_fsync_mode(powerloss_cluster: ProcessCluster) -> None:
    """The leader loses power (every unsynced write gone, the first one torn), comes back,
    recovers and rejoins: fsync mode acknowledged nothing that only lived in its page cache."""
    cluster = powerloss_cluster
    wait_until("a full ISR", lambda: _isr_complete(cluster), cluster)
    producer = BackgroundProducer(cluster.bootstrap).start()
    try:
        producer.wait_for_acks(ACKS_BETWEEN_STEPS * 2, cluster)
        target = _target(cluster, "leader")
        broker = cluster.brokers[target]
        broker.send(signal.SIGUSR1)
        assert broker.proc is not None
        assert broker.proc.wait(10) == 137, broker.log_tail()
        broker.kill9()  # reap
        _wait_role_moved(cluster, "leader", target)
        producer.wait_for_acks(ACKS_BETWEEN_STEPS, cluster)
        broker.start()
        wait_until(f"broker {target} back in every ISR", lambda: _isr_complete(cluster), cluster)
        producer.wait_for_acks(ACKS_BETWEEN_STEPS, cluster)
    finally:
        producer.stop()
    check_acked_records_consumed(cluster, producer)


def test_unclean_restarts_then_controller_failover(replicated_cluster: ProcessCluster) -> None:
    """The black-box sequence that once left every partition leaderless for good: each
    non-controller is killed and restarted (re-registering uncleanly, leaving the ISRs,
    catching up and rejoining), then the controller, which leads partitions, is killed. A new
    controller must not replay the handled unclean restarts; acks=all produce goes on, and
    the old controller rejoins when it comes back."""
    cluster = replicated_cluster
    wait_until("a full ISR", lambda: _isr_complete(cluster), cluster)
    producer = BackgroundProducer(cluster.bootstrap).start()
    try:
        producer.wait_for_acks(ACKS_BETWEEN_STEPS, cluster)
        controller = _target(cluster, "controller")
        for victim in sorted(set(cluster.brokers) - {controller}):
            broker = cluster.brokers[victim]
            broker.kill9()
            wait_until(
                f"broker {victim} out of every ISR",
                lambda v=victim: all(v not in p.isr for p in describe(cluster).values()),
                cluster,
            )
            broker.start()
            wait_until(f"broker {victim} back in the ISRs", lambda: _isr_complete(cluster), cluster)
            producer.wait_for_acks(ACKS_BETWEEN_STEPS, cluster)
        assert _target(cluster, "controller") == controller
        cluster.brokers[controller].kill9()
        _wait_role_moved(cluster, "controller", controller)
        wait_until(
            "a leader for every partition",
            lambda: all(p.leader >= 0 for p in describe(cluster).values()),
            cluster,
        )
        producer.wait_for_acks(ACKS_BETWEEN_STEPS, cluster)
        cluster.brokers[controller].start()
        wait_until(f"{controller} back in every ISR", lambda: _isr_complete(cluster), cluster)
        producer.wait_for_acks(ACKS_BETWEEN_STEPS, cluster)
    finally:
        producer.stop()
    check_acked_records_consumed(cluster, producer)


def test_partitions_constant_matches_topic(cluster: ProcessCluster) -> None:
    """The harness's own sanity: the topic has the partitions the workload writes to."""
    assert sorted(describe(cluster)) == list(range(PARTITIONS))
