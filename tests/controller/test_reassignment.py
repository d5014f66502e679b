"""A reassignment OAR {1,2,3} -> RAR {4,5,6} through the ControllerService, step by
step, on every backend; and a controller failover in the middle of it finishes the move."""

from __future__ import annotations

import pytest

from replog.coord.contract import Coordinator
from replog.election.state_change import StateChangeKind
from replog.errors import ErrorCode
from replog.metadata.types import CloseReplica, ControllerChanged, CreateTopic, ReassignPartition

from ._harness import Cluster, row

SEED_TABLE = [
    ({1, 2, 3}, 1, {1, 2, 3}),  # initial state
    ({1, 2, 3, 4, 5, 6}, 1, {1, 2, 3}),  # step 2: AR = OAR + RAR, leader epoch bumped
    ({1, 2, 3, 4, 5, 6}, 1, {1, 2, 3, 4, 5, 6}),  # step 4: RAR caught up and joined the ISR
    ({1, 2, 3, 4, 5, 6}, 4, {1, 2, 3, 4, 5, 6}),  # step 7: leader elected from RAR
    ({1, 2, 3, 4, 5, 6}, 4, {4, 5, 6}),  # step 8: OAR - RAR leave the ISR
    ({4, 5, 6}, 4, {4, 5, 6}),  # step 10: AR = RAR
]
CONTROLLER, STANDBY = 100, 101


def _start(coordinator: Coordinator) -> Cluster:
    cluster = Cluster(coordinator)
    cluster.register(1, 2, 3, 4, 5, 6, CONTROLLER, STANDBY)
    return cluster


def test_seed_001_table_step_by_step(coordinator: Coordinator) -> None:
    cluster = _start(coordinator)
    controller = cluster.controller(CONTROLLER)
    create = cluster.submit(
        CreateTopic(
            topic="foo", partition_count=1, replication_factor=3, replica_assignment=[[1, 2, 3]]
        )
    )
    cluster.poll(controller)
    assert cluster.outcome(create) is ErrorCode.NONE
    assert row(cluster.state("foo")) == SEED_TABLE[0]

    reassign = cluster.submit(
        ReassignPartition(topic="foo", partition=0, target_replicas=(4, 5, 6))
    )
    cluster.poll(controller)
    assert cluster.outcome(reassign) is ErrorCode.NONE
    started = cluster.state("foo")
    assert row(started) == SEED_TABLE[1]
    assert started.leader_epoch == 1  # the START step forces a leader-epoch bump
    assert (started.adding_replicas, started.removing_replicas) == ((4, 5, 6), (1, 2, 3))

    assert cluster.poll(controller) == []  # RAR has not caught up: WAIT

    # The leader (1) sees 4, 5 and 6 catch up and proposes them, as replog.isr would.
    expand = cluster.propose_isr("foo", 0, [1, 2, 3, 4, 5, 6])
    cluster.poll(controller)  # the ISR grows (step 4), then the leader moves into RAR (step 7)
    result = cluster.response(expand)
    assert result.error is ErrorCode.NONE and set(result.isr) == {1, 2, 3, 4, 5, 6}
    assert row(cluster.state("foo")) == SEED_TABLE[3]
    cluster.poll(controller)
    assert row(cluster.state("foo")) == SEED_TABLE[4]
    cluster.poll(controller)
    done = cluster.state("foo")
    assert row(done) == SEED_TABLE[5] and not done.adding_replicas and not done.removing_replicas
    assert cluster.poll(controller) == []

    # Every step is one stored registration, in the seed's order, one partition epoch apart.
    history = cluster.history("foo", 0)
    assert [row(s) for s in history] == SEED_TABLE
    assert [s.partition_epoch for s in history] == list(range(len(SEED_TABLE)))
    # OAR - RAR are stopped and deleted through their brokers' persistent queues.
    topic_id = coordinator.get_topic("foo").topic_id  # type: ignore[union-attr]
    for broker in (1, 2, 3):
        closes = [r.payload for r in coordinator.pending_admin_requests(broker)]
        close = CloseReplica(
            topic="foo", partition=0, leader_epoch=done.leader_epoch, topic_id=topic_id
        )
        assert close in closes
    stops = {
        c.target.broker_id
        for c in cluster.log
        if c.kind is StateChangeKind.STOP_REPLICA and c.target
    }
    assert stops == {1, 2, 3}


@pytest.mark.parametrize("fail_after", [1, 2, 3])
def test_controller_failover_mid_reassignment_finishes_it(
    coordinator: Coordinator, fail_after: int
) -> None:
    """The old controller dies after writing ``fail_after`` rows of the table; the new one
    rebuilds from the store alone and completes the move with the same rows."""
    cluster = _start(coordinator)
    old = cluster.controller(CONTROLLER)
    cluster.submit(
        CreateTopic(
            topic="foo", partition_count=1, replication_factor=3, replica_assignment=[[1, 2, 3]]
        )
    )
    cluster.poll(old)
    cluster.submit(ReassignPartition(topic="foo", partition=0, target_replicas=(4, 5, 6)))
    cluster.poll(old)
    if fail_after >= 2:
        cluster.propose_isr("foo", 0, [1, 2, 3, 4, 5, 6])
        cluster.poll(old)  # steps 4 and 7
    if fail_after >= 3:
        cluster.poll(old)  # step 8
    cluster.expire(CONTROLLER)
    if fail_after == 1:  # the leader's proposal waits in the queue for the next controller
        cluster.propose_isr("foo", 0, [1, 2, 3, 4, 5, 6])

    new = cluster.controller(STANDBY)
    assert new.controller_epoch == 2
    cluster.settle(new)
    assert [row(s) for s in cluster.history("foo", 0)] == SEED_TABLE
    assert cluster.poll(old) == [] and not old.is_active
    epochs = [
        c.controller.controller_epoch
        for c in cluster.feed()
        if isinstance(c, ControllerChanged) and c.controller
    ]
    assert epochs == [1, 2]
