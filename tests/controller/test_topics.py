"""Create / delete topic and add partitions through the controller's admin queue."""

from __future__ import annotations

from replog.coord.contract import Coordinator
from replog.election.state_change import Phase, StateChangeKind
from replog.errors import ErrorCode
from replog.metadata.types import (
    AddPartitions,
    CloseReplica,
    CreateTopic,
    DeleteTopic,
    TopicChanged,
    TopicChangeReason,
)

from ._harness import Cluster


def test_placement_is_kafkas_with_a_fixed_start(coordinator: Coordinator) -> None:
    """The AdminUtils table: brokers 0..4, start index 0, 10 partitions, RF 3 (the controller is
    broker 0, so the live brokers are exactly 0..4)."""
    cluster = Cluster(coordinator)
    cluster.register(0, 1, 2, 3, 4)
    controller = cluster.controller(0)
    create = cluster.submit(CreateTopic(topic="t", partition_count=10, replication_factor=3))
    changes = cluster.poll(controller)
    assert cluster.outcome(create) is ErrorCode.NONE
    replicas = {p: cluster.state("t", p).replicas for p in range(10)}
    assert (replicas[0], replicas[4], replicas[5], replicas[9]) == (
        (0, 1, 2), (4, 0, 1), (0, 2, 3), (4, 1, 2),
    )  # fmt: skip
    assert all(cluster.state("t", p).leader == replicas[p][0] for p in range(10))
    leaders = [c for c in changes if c.kind is StateChangeKind.BECOME_LEADER]
    assert len(leaders) == 10 and all(c.phase is Phase.REQUESTED for c in leaders)


def test_replication_factor_above_live_brokers_is_refused(coordinator: Coordinator) -> None:
    cluster = Cluster(coordinator)
    cluster.register(1, 2, 3)
    cluster.fence(3)  # fenced brokers get no replicas
    controller = cluster.controller(1)
    create = cluster.submit(CreateTopic(topic="t", partition_count=1, replication_factor=3))
    changes = cluster.poll(controller)
    done = cluster.completion(create)
    assert done.outcome is ErrorCode.INVALID_REPLICATION_FACTOR
    assert "replication factor 3 is larger than the 2 available brokers" in done.message
    assert coordinator.get_topic("t") is None
    assert [c.phase for c in changes] == [Phase.REJECTED]
    ok = cluster.submit(CreateTopic(topic="t", partition_count=2, replication_factor=2))
    cluster.poll(controller)
    assert cluster.outcome(ok) is ErrorCode.NONE
    assert all(3 not in cluster.state("t", p).replicas for p in range(2))


def test_existing_or_colliding_topic_is_refused(coordinator: Coordinator) -> None:
    cluster = Cluster(coordinator)
    cluster.register(1)
    controller = cluster.controller(1)
    first = cluster.submit(CreateTopic(topic="a.b", partition_count=1, replication_factor=1))
    again = cluster.submit(CreateTopic(topic="a_b", partition_count=1, replication_factor=1))
    cluster.poll(controller)
    assert cluster.outcome(first) is ErrorCode.NONE
    assert cluster.outcome(again) is ErrorCode.TOPIC_ALREADY_EXISTS


def test_requests_wait_in_the_queue_for_a_controller(coordinator: Coordinator) -> None:
    """Submitted while no controller is active (its broker is down), handled once one wins."""
    cluster = Cluster(coordinator)
    cluster.register(1, 2)
    create = cluster.submit(CreateTopic(topic="t", partition_count=2, replication_factor=2))
    grow = cluster.submit(AddPartitions(topic="t", partition_count=3))
    controller = cluster.controller(1)
    cluster.poll(controller)
    assert cluster.outcome(create) is ErrorCode.NONE and cluster.outcome(grow) is ErrorCode.NONE
    topic = coordinator.get_topic("t")
    assert topic is not None and topic.partition_count == 3
    assert all(len(r) == 2 for r in topic.replicas)


def test_add_partitions(coordinator: Coordinator) -> None:
    cluster = Cluster(coordinator)
    cluster.register(1, 2, 3)
    controller = cluster.controller(1)
    cluster.submit(CreateTopic(topic="t", partition_count=1, replication_factor=2))
    explicit = cluster.submit(
        AddPartitions(topic="t", partition_count=2, replica_assignment=[[3, 1]])
    )
    shrink = cluster.submit(AddPartitions(topic="t", partition_count=1))
    unknown = cluster.submit(AddPartitions(topic="nope", partition_count=2))
    cluster.poll(controller)
    assert cluster.outcome(explicit) is ErrorCode.NONE
    assert (cluster.state("t", 1).replicas, cluster.state("t", 1).leader) == ((3, 1), 3)
    assert cluster.outcome(shrink) is ErrorCode.INVALID_PARTITIONS
    assert cluster.outcome(unknown) is ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


def test_delete_topic_queues_close_replica_for_a_down_broker(coordinator: Coordinator) -> None:
    """Seeds: a broker that is down when its replicas are deleted finds the request queued."""
    cluster = Cluster(coordinator)
    cluster.register(1, 2, 3)
    controller = cluster.controller(1)
    cluster.submit(CreateTopic(topic="t", partition_count=1, replication_factor=2,
                               replica_assignment=[[1, 2]]))  # fmt: skip
    cluster.poll(controller)
    cluster.expire(2)
    cluster.poll(controller)
    delete = cluster.submit(DeleteTopic(topic="t"))
    changes = cluster.poll(controller)
    assert cluster.outcome(delete) is ErrorCode.NONE
    assert coordinator.get_topic("t") is None
    deleted = [c for c in cluster.feed() if isinstance(c, TopicChanged)]
    assert deleted[-1].reason is TopicChangeReason.DELETED
    cluster.register(2)  # back as a new incarnation: the request is still there
    closes = [r.payload for r in coordinator.pending_admin_requests(2)]
    assert [(c.topic, c.partition, c.delete) for c in closes if isinstance(c, CloseReplica)] == [
        ("t", 0, True)
    ]
    stops = sorted(
        c.target.broker_id for c in changes if c.kind is StateChangeKind.STOP_REPLICA and c.target
    )
    assert stops == [1, 2]
    again = cluster.submit(DeleteTopic(topic="t"))
    cluster.poll(controller)
    assert cluster.outcome(again) is ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


def test_a_full_broker_queue_does_not_cost_the_controller_role() -> None:
    """A deletion queues a CloseReplica per partition for every replica's broker; with the
    broker down its queue fills. AdminQueueFullError once escaped the controller's poll and
    dropped the role; now the clean-up is left to the broker's start-up (stray logs)."""
    from replog.coord.memory import MemoryCoordinator
    from replog.metadata.types import CreateTopic, DeleteTopic

    coordinator = MemoryCoordinator(admin_queue_limit=2)
    cluster = Cluster(coordinator)
    cluster.register(1, 2, 100)
    controller = cluster.controller(100)
    created = cluster.submit(
        CreateTopic(topic="t", partition_count=3, replication_factor=2,
                    replica_assignment=[[1, 2], [1, 2], [1, 2]])
    )  # fmt: skip
    cluster.settle(controller)
    assert cluster.outcome(created) is ErrorCode.NONE
    deleted = cluster.submit(DeleteTopic(topic="t"))
    cluster.settle(controller)
    assert controller.is_active
    assert cluster.outcome(deleted) is ErrorCode.NONE
    assert coordinator.get_topic("t") is None
    assert len(coordinator.pending_admin_requests(2)) == 2


def test_absurd_partition_counts_are_refused_before_anything_is_placed(
    coordinator: Coordinator,
) -> None:
    """A count from the wire (2^31-1 new partitions) is refused as INVALID_PARTITIONS, as
    Kafka refuses more than 10,000 per request; before, the controller tried to place them and
    ate memory until killed."""
    cluster = Cluster(coordinator)
    cluster.register(1, 2, 3)
    controller = cluster.controller(1)
    create = cluster.submit(CreateTopic(topic="t", partition_count=2**31 - 1, replication_factor=1))
    cluster.submit(CreateTopic(topic="u", partition_count=1, replication_factor=1))
    grow = cluster.submit(AddPartitions(topic="u", partition_count=2**31 - 1))
    cluster.poll(controller)
    assert cluster.outcome(create) is ErrorCode.INVALID_PARTITIONS
    assert cluster.outcome(grow) is ErrorCode.INVALID_PARTITIONS
    assert coordinator.get_topic("t") is None
    topic = coordinator.get_topic("u")
    assert topic is not None and topic.partition_count == 1
