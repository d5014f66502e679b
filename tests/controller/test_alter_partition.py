"""AlterPartition from partition leaders through the admin queue: fencing, ineligible members
(fenced, shutting down, a stale broker epoch) and the response the leader reads back."""

from __future__ import annotations

from replog.controller import ControllerService, submit_alter_partition
from replog.controller.service import REQUESTS_PER_POLL_MAX
from replog.coord.contract import Coordinator
from replog.errors import ErrorCode
from replog.metadata.types import AdminRequestChanged, AlterPartition, CreateTopic, IsrMember

from ._harness import Cluster

CONTROLLER = 100


def _cluster(coordinator: Coordinator) -> tuple[Cluster, ControllerService]:
    cluster = Cluster(coordinator)
    cluster.register(1, 2, 3, CONTROLLER)
    controller = cluster.controller(CONTROLLER)
    cluster.submit(CreateTopic(topic="t", partition_count=1, replication_factor=3,
                               replica_assignment=[[1, 2, 3]]))  # fmt: skip
    cluster.poll(controller)
    return cluster, controller


def test_leader_shrink_and_response(coordinator: Coordinator) -> None:
    cluster, controller = _cluster(coordinator)
    request = AlterPartition(
        topic="t", partition=0, leader_id=1, leader_epoch=0, partition_epoch=0,
        new_isr=(IsrMember(1, cluster.brokers[1].incarnation_epoch), IsrMember(2)),
    )  # fmt: skip
    queued = submit_alter_partition(coordinator, request)
    assert queued.payload == request
    cluster.poll(controller)
    result = cluster.response(queued)
    assert (result.error, result.leader, result.leader_epoch, result.partition_epoch) == (
        ErrorCode.NONE, 1, 0, 1,
    )  # fmt: skip
    assert set(result.isr) == {1, 2} and set(cluster.state("t").isr) == {1, 2}
    # The new state precedes the completion in the feed, so a leader following it has both.
    feed = cluster.feed()
    done = next(i for i, c in enumerate(feed) if isinstance(c, AdminRequestChanged)
                and c.request.request_id == queued.request_id and c.outcome is ErrorCode.NONE
                and c.reason.value == "completed")  # fmt: skip
    assert any(getattr(c, "state", None) == cluster.state("t") for c in feed[:done])


def test_fencing_in_the_reference_order(coordinator: Coordinator) -> None:
    """Fencing (stale leader epoch, stale partition epoch, a non-leader sender), after the
    leader moved 1 -> 2 (leader epoch 1) and 1 came back."""
    cluster, controller = _cluster(coordinator)
    cluster.fence(1)
    cluster.poll(controller)
    cluster.fence(1, fenced=False)
    cluster.poll(controller)
    current = cluster.state("t")
    assert (current.leader, current.leader_epoch, set(current.isr)) == (2, 1, {2, 3})

    stale_leader = cluster.propose_isr("t", 0, [1, 2, 3], sender=1, leader_epoch=0)
    stale_version = cluster.propose_isr("t", 0, [2], partition_epoch=current.partition_epoch - 1)
    not_leader = cluster.propose_isr("t", 0, [2, 3], sender=3)
    future = cluster.propose_isr("t", 0, [2], leader_epoch=current.leader_epoch + 1)
    retry = cluster.propose_isr("t", 0, [3, 2], partition_epoch=current.partition_epoch - 1)
    cluster.poll(controller)
    assert cluster.outcome(stale_leader) is ErrorCode.FENCED_LEADER_EPOCH
    assert cluster.outcome(stale_version) is ErrorCode.INVALID_UPDATE_VERSION
    assert cluster.outcome(not_leader) is ErrorCode.INVALID_REQUEST
    assert cluster.outcome(future) is ErrorCode.NOT_CONTROLLER
    same = cluster.response(retry)  # equal to the current state: success with that state
    assert (same.error, same.partition_epoch, set(same.isr)) == (
        ErrorCode.NONE, current.partition_epoch, {2, 3},
    )  # fmt: skip
    rejected = cluster.response(stale_version)  # a rejection carries the current state
    assert (rejected.leader_epoch, rejected.partition_epoch) == (1, current.partition_epoch)
    assert cluster.state("t") == current


def test_ineligible_members_are_refused(coordinator: Coordinator) -> None:
    """A fenced or shutting-down member, and one with a stale broker epoch."""
    cluster, controller = _cluster(coordinator)
    cluster.propose_isr("t", 0, [1, 2])
    cluster.poll(controller)
    cluster.fence(3)
    cluster.poll(controller)
    fenced = cluster.propose_isr("t", 0, [1, 2, 3])
    cluster.poll(controller)
    assert cluster.outcome(fenced) is ErrorCode.INELIGIBLE_REPLICA
    cluster.fence(3, fenced=False)
    old_epoch = cluster.brokers[3].incarnation_epoch
    cluster.expire(3)
    cluster.register(3)  # a new incarnation
    cluster.poll(controller)
    stale = cluster.propose_isr("t", 0, [1, 2, 3], broker_epochs={3: old_epoch})
    current = cluster.propose_isr(
        "t", 0, [1, 2, 3], broker_epochs={3: cluster.brokers[3].incarnation_epoch}
    )
    cluster.poll(controller)
    assert cluster.outcome(stale) is ErrorCode.INELIGIBLE_REPLICA
    assert cluster.outcome(current) is ErrorCode.NONE
    assert set(cluster.state("t").isr) == {1, 2, 3}


def test_unknown_partition(coordinator: Coordinator) -> None:
    cluster, controller = _cluster(coordinator)
    request = cluster.submit(AlterPartition(topic="t", partition=7, leader_id=1, leader_epoch=0,
                                            partition_epoch=0, new_isr=[(1, -1)]))  # fmt: skip
    cluster.poll(controller)
    assert cluster.response(request).error is ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


def test_a_proposal_for_a_partition_below_min_isr_is_handled_first(
    coordinator: Coordinator,
) -> None:
    """After a fault every leader proposes at once; the expansion that gives a partition back
    its min ISR (so acks=all writes go on) is decided before the older, unrelated proposals and
    admin requests queued ahead of it."""
    cluster, controller = _cluster(coordinator)
    cluster.submit(CreateTopic(topic="busy", partition_count=6, replication_factor=3,
                               replica_assignment=[[1, 2, 3]] * 6))  # fmt: skip
    cluster.submit(CreateTopic(topic="acks", partition_count=1, replication_factor=3,
                               replica_assignment=[[1, 2, 3]],
                               configs={"min.insync.replicas": "2"}))  # fmt: skip
    cluster.poll(controller)
    cluster.propose_isr("acks", 0, [1])  # now below its min ISR
    cluster.poll(controller)
    assert list(cluster.state("acks").isr) == [1]
    older = [cluster.propose_isr("busy", p, [1, 2]) for p in range(6)]
    older.append(cluster.submit(CreateTopic(topic="other", partition_count=1,
                                            replication_factor=3)))  # fmt: skip
    expansion = cluster.propose_isr("acks", 0, [1, 2, 3])
    cluster.poll(controller)
    completed = [
        c.request.request_id
        for c in cluster.feed()
        if isinstance(c, AdminRequestChanged) and c.reason.value == "completed"
    ]
    order = [completed.index(r.request_id) for r in [expansion, *older]]
    assert order == sorted(order), "the expansion waited behind older requests"
    assert set(cluster.state("acks").isr) == {1, 2, 3}
    assert all(cluster.outcome(r) is ErrorCode.NONE for r in older)


def test_a_round_handles_a_bounded_number_of_requests_and_never_starves_the_oldest(
    coordinator: Coordinator,
) -> None:
    """A request that arrives while the controller works through a backlog waits for one
    bounded round, not the whole backlog; the oldest request is handled in every round."""
    cluster, controller = _cluster(coordinator)
    cluster.submit(CreateTopic(topic="busy", partition_count=20, replication_factor=3,
                               replica_assignment=[[1, 2, 3]] * 20))  # fmt: skip
    cluster.poll(controller)
    oldest = cluster.submit(CreateTopic(topic="first", partition_count=1, replication_factor=3))
    proposals = [cluster.propose_isr("busy", p, [1, 2]) for p in range(20)]
    cluster.poll(controller)
    done = {
        c.request.request_id
        for c in cluster.feed()
        if isinstance(c, AdminRequestChanged) and c.reason.value == "completed"
    }
    assert oldest.request_id in done
    assert sum(r.request_id in done for r in proposals) == REQUESTS_PER_POLL_MAX
    cluster.settle(controller)
    assert all(cluster.outcome(r) is ErrorCode.NONE for r in [oldest, *proposals])
