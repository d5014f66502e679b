"""Controller failover and zombies: a controller that lost its role has its writes rejected
(FENCED_CONTROLLER) and stops acting; a VERSION_MISMATCH makes it decide again."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, cast

from replog.controller import ControllerRoleState
from replog.coord.contract import Coordinator
from replog.errors import ErrorCode
from replog.metadata.types import (
    CONTROLLER_TARGET,
    AdminRequestChanged,
    AdminRequestChangeReason,
    CreateTopic,
    DeleteTopic,
    PartitionState,
)

from ._harness import Cluster

OLD, NEW = 100, 101


class _BeforeWrite:
    """A coordinator proxy that runs ``hook`` once, right before the first write of ``method``
    (the zombie's pause between deciding and writing)."""

    def __init__(self, inner: Coordinator, method: str, hook: Callable[[], None]) -> None:
        self._inner, self._method, self._hook = inner, method, hook

    def __getattr__(self, name: str) -> Any:
        target = getattr(self._inner, name)
        if name != self._method:
            return target

        def call(*args: Any, **kwargs: Any) -> Any:
            hook, self._hook = self._hook, lambda: None
            hook()
            return target(*args, **kwargs)

        return call


def _cluster(coordinator: Coordinator) -> Cluster:
    cluster = Cluster(coordinator)
    cluster.register(1, 2, 3, OLD, NEW)
    return cluster


def _zombie(cluster: Cluster, method: str) -> tuple[Any, list[Any]]:
    """The OLD controller on a proxy whose first ``method`` call is preceded by its session
    expiring and NEW winning the election."""
    won: list[Any] = []

    def failover() -> None:
        cluster.expire(OLD)
        won.append(cluster.controller(NEW))

    old = cluster.controller(OLD)
    old.coordinator = cast(Coordinator, _BeforeWrite(cluster.coord, method, failover))
    return old, won


def test_zombie_partition_write_is_fenced_and_it_stops(coordinator: Coordinator) -> None:
    cluster = _cluster(coordinator)
    old, won = _zombie(cluster, "compare_and_set_partition_state")
    cluster.submit(CreateTopic(topic="t", partition_count=1, replication_factor=3,
                               replica_assignment=[[1, 2, 3]]))  # fmt: skip
    cluster.poll(old)
    shrink = cluster.propose_isr("t", 0, [1, 2])
    assert cluster.poll(old) == []  # the CAS was refused: nothing happened
    assert old.role is ControllerRoleState.LOST and "fenced" in old.lost_reason
    assert set(cluster.state("t").isr) == {1, 2, 3}
    assert coordinator.pending_admin_requests(-1)[0].request_id == shrink.request_id
    assert cluster.poll(old) == []  # and it keeps doing nothing

    (new,) = won
    cluster.poll(new)
    assert cluster.outcome(shrink) is ErrorCode.NONE
    assert set(cluster.state("t").isr) == {1, 2}


def test_zombie_topic_write_is_fenced(coordinator: Coordinator) -> None:
    cluster = _cluster(coordinator)
    old, won = _zombie(cluster, "create_topic")
    create = cluster.submit(CreateTopic(topic="t", partition_count=1, replication_factor=3))
    cluster.poll(old)
    assert old.role is ControllerRoleState.LOST
    assert coordinator.get_topic("t") is None
    cluster.poll(won[0])
    assert cluster.outcome(create) is ErrorCode.NONE


def test_controller_stops_when_the_feed_names_a_new_term(coordinator: Coordinator) -> None:
    cluster = _cluster(coordinator)
    old = cluster.controller(OLD)
    cluster.expire(OLD)
    new = cluster.controller(NEW)
    assert new.controller_epoch == (old.controller_epoch or 0) + 1
    assert cluster.poll(old) == [] and old.role is ControllerRoleState.LOST
    assert new.is_active


def test_resign_hands_over(coordinator: Coordinator) -> None:
    cluster = _cluster(coordinator)
    old = cluster.controller(OLD)
    assert old.resign() and not old.is_active
    new = cluster.controller(NEW)
    create = cluster.submit(CreateTopic(topic="t", partition_count=1, replication_factor=1))
    cluster.poll(new)
    assert cluster.outcome(create) is ErrorCode.NONE


def test_version_mismatch_is_decided_again(coordinator: Coordinator) -> None:
    """A partition write the controller has not seen yet (e.g. one whose outcome was unknown)
    makes its next CAS fail; it adopts the stored state and decides the request again."""
    cluster = _cluster(coordinator)
    controller = cluster.controller(OLD)
    cluster.submit(CreateTopic(topic="t", partition_count=1, replication_factor=3,
                               replica_assignment=[[1, 2, 3]]))  # fmt: skip
    cluster.poll(controller)
    shrink = cluster.propose_isr("t", 0, [1, 2])

    def unseen_write() -> None:
        state = cluster.state("t")
        other = PartitionState(replicas=state.replicas, leader=1, leader_epoch=0, isr=(1, 3))
        result = coordinator.compare_and_set_partition_state(
            "t", 0, state.partition_epoch, other, controller_epoch=controller.controller_epoch or 0
        )
        assert result.ok

    controller.coordinator = cast(
        Coordinator, _BeforeWrite(coordinator, "compare_and_set_partition_state", unseen_write)
    )
    cluster.poll(controller)
    # Decided again against ISR {1,3} at partition epoch 1: the leader's proposal is stale.
    assert cluster.outcome(shrink) is ErrorCode.INVALID_UPDATE_VERSION
    assert set(cluster.state("t").isr) == {1, 3} and controller.is_active


def test_zombie_admin_completion_is_fenced(coordinator: Coordinator) -> None:
    """A request the zombie rejects without any other write (its view says the topic does not
    exist): the completion itself is refused, so the request stays queued for NEW."""
    cluster = _cluster(coordinator)
    old, won = _zombie(cluster, "complete_admin_request")
    delete = cluster.submit(DeleteTopic(topic="missing"))
    assert cluster.poll(old) == []  # the completion was refused: nothing happened
    assert old.role is ControllerRoleState.LOST and "fenced" in old.lost_reason
    assert coordinator.pending_admin_requests(CONTROLLER_TARGET) == [delete]
    assert not any(
        isinstance(c, AdminRequestChanged) and c.reason is AdminRequestChangeReason.COMPLETED
        for c in cluster.feed()
    )
    assert cluster.poll(old) == []  # and it keeps doing nothing

    (new,) = won
    cluster.poll(new)
    assert cluster.outcome(delete) is ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert coordinator.pending_admin_requests(CONTROLLER_TARGET) == []
