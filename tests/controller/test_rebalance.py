"""Preferred-replica elections: the admin request and the automatic leader rebalance with its
imbalance threshold (the ZK rule: ratio above 10 % per preferred broker)."""

from __future__ import annotations

from replog.controller import ControllerConfig
from replog.coord.contract import Coordinator
from replog.errors import ErrorCode
from replog.metadata.types import CreateTopic, PreferredElection

from ._harness import Cluster

CONTROLLER = 100
INTERVAL_MS = 300_000


def _leaders(cluster: Cluster) -> list[int]:
    return [cluster.state("r", p).leader for p in range(10)]


def test_auto_rebalance_respects_the_threshold(coordinator: Coordinator) -> None:
    cluster = Cluster(coordinator)
    cluster.register(1, 2, 3, CONTROLLER)
    controller = cluster.controller(CONTROLLER)
    cluster.submit(CreateTopic(topic="r", partition_count=10, replication_factor=3,
                               replica_assignment=[[1, 2, 3]] * 10))  # fmt: skip
    cluster.poll(controller)
    cluster.fence(1)
    cluster.poll(controller)
    cluster.fence(1, fenced=False)
    cluster.poll(controller)
    assert _leaders(cluster) == [2] * 10  # a valid leader is kept when 1 returns
    for p in range(8):  # the leaders let 1 back into the ISR of p0..p7 only
        cluster.propose_isr("r", p, [2, 3, 1])
    cluster.poll(controller, now_ms=INTERVAL_MS - 1)
    assert _leaders(cluster) == [2] * 10  # the check has not come round yet

    cluster.poll(controller, now_ms=INTERVAL_MS)  # ratio 10/10: elect where 1 is in the ISR
    assert _leaders(cluster) == [1] * 8 + [2, 2]
    cluster.propose_isr("r", 8, [2, 3, 1])
    cluster.poll(controller, now_ms=INTERVAL_MS + 1)
    assert _leaders(cluster)[8] == 2  # in sync now, but the next check is an interval away
    cluster.poll(controller, now_ms=2 * INTERVAL_MS)  # ratio 2/10 = 0.2 > 0.1
    assert _leaders(cluster) == [1] * 9 + [2]
    cluster.propose_isr("r", 9, [2, 3, 1])
    cluster.poll(controller, now_ms=3 * INTERVAL_MS)  # ratio 1/10 = 0.1: not above it
    assert _leaders(cluster) == [1] * 9 + [2]

    elect = cluster.submit(PreferredElection(partitions=(("r", 9), ("r", 0))))
    cluster.poll(controller, now_ms=3 * INTERVAL_MS + 1)
    assert cluster.outcome(elect) is ErrorCode.NONE
    assert "r-9=NONE" in cluster.completion(elect).message
    assert "r-0=ELECTION_NOT_NEEDED" in cluster.completion(elect).message
    assert _leaders(cluster) == [1] * 10


def test_auto_rebalance_can_be_disabled(coordinator: Coordinator) -> None:
    cluster = Cluster(coordinator, ControllerConfig(auto_leader_rebalance=False))
    cluster.register(1, 2, CONTROLLER)
    controller = cluster.controller(CONTROLLER)
    cluster.submit(CreateTopic(topic="r", partition_count=1, replication_factor=2,
                               replica_assignment=[[1, 2]]))  # fmt: skip
    cluster.poll(controller)
    cluster.fence(1)
    cluster.poll(controller)
    cluster.fence(1, fenced=False)
    cluster.propose_isr("r", 0, [2, 1])
    cluster.poll(controller, now_ms=10 * INTERVAL_MS)
    assert cluster.state("r").leader == 2


def test_preferred_election_when_the_preferred_replica_is_not_in_sync(
    coordinator: Coordinator,
) -> None:
    cluster = Cluster(coordinator)
    cluster.register(1, 2, CONTROLLER)
    controller = cluster.controller(CONTROLLER)
    cluster.submit(CreateTopic(topic="r", partition_count=1, replication_factor=2,
                               replica_assignment=[[1, 2]]))  # fmt: skip
    cluster.poll(controller)
    cluster.fence(1)
    cluster.poll(controller)
    cluster.fence(1, fenced=False)
    elect = cluster.submit(PreferredElection())
    cluster.poll(controller)
    assert cluster.outcome(elect) is ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE
    assert cluster.state("r").leader == 2
