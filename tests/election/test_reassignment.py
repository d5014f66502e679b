"""Reassignment as explicit steps: the seed-001 table OAR {1,2,3} -> RAR {4,5,6}, and
cancellation (which needs unclean election when no original replica is left in the ISR)."""

from __future__ import annotations

from collections.abc import Collection

from replog.election import (
    ClusterView,
    ElectionPolicy,
    PartitionRegistration,
    ReassignmentProgress,
    ReassignmentStep,
    StateChangeKind,
    cancel_reassignment,
    next_reassignment_step,
)
from replog.errors import ErrorCode
from replog.metadata.types import NO_LEADER, LeaderRecoveryState

from ._support import TP, applied

POLICY = ElectionPolicy()
CLUSTER = ClusterView.of(1, 2, 3, 4, 5, 6)
TARGET = [4, 5, 6]


def step(
    current: PartitionRegistration,
    caught_up: Collection[int] = (),
    *,
    cluster: ClusterView = CLUSTER,
) -> ReassignmentProgress:
    """One call of the step machine towards TARGET."""
    return next_reassignment_step(
        TP, current, TARGET, cluster, caught_up=caught_up, policy=POLICY, now_ms=1
    )


def row(partition: PartitionRegistration) -> tuple[set[int], int, set[int]]:
    """A row of the seed table: AR, leader/ISR."""
    return set(partition.assigned), partition.leader, set(partition.isr)


def test_seed_reassignment_table_step_by_step() -> None:
    table = [
        (None, ({1, 2, 3}, 1, {1, 2, 3})),
        (ReassignmentStep.START, ({1, 2, 3, 4, 5, 6}, 1, {1, 2, 3})),
        (ReassignmentStep.EXPAND_ISR, ({1, 2, 3, 4, 5, 6}, 1, {1, 2, 3, 4, 5, 6})),
        (ReassignmentStep.ELECT_LEADER, ({1, 2, 3, 4, 5, 6}, 4, {1, 2, 3, 4, 5, 6})),
        (ReassignmentStep.SHRINK_ISR, ({1, 2, 3, 4, 5, 6}, 4, {4, 5, 6})),
        (ReassignmentStep.COMPLETE, ({4, 5, 6}, 4, {4, 5, 6})),
    ]
    partition = PartitionRegistration.initial([1, 2, 3])
    assert row(partition) == table[0][1]
    for expected_step, expected_row in table[1:]:
        progress = step(partition, caught_up={4, 5, 6})
        assert progress.step is expected_step
        after = progress.registration
        assert row(after) == expected_row, expected_step
        assert after.partition_epoch == partition.partition_epoch + 1
        assert after.leader_epoch >= partition.leader_epoch
        partition = after
    assert partition.replicas == (4, 5, 6) and not partition.is_reassigning
    assert step(partition).step is ReassignmentStep.DONE


def test_reassignment_vocabulary_during_the_move() -> None:
    started = step(PartitionRegistration.initial([1, 2, 3])).registration
    assert started.replicas == (4, 5, 6, 1, 2, 3)  # KRaft: target, then the removing ones
    assert started.reassigning == (4, 5, 6)  # RAR
    assert started.original_replicas == (1, 2, 3)  # OAR
    assert started.catching_up == (4, 5, 6)  # CUR = AR - ISR
    assert (started.adding_replicas, started.removing_replicas) == ((4, 5, 6), (1, 2, 3))


def test_start_bumps_leader_epoch_and_starts_new_replicas() -> None:
    before = PartitionRegistration.initial([1, 2, 3])
    progress = step(before)
    assert progress.registration.leader_epoch == before.leader_epoch + 1
    started = [
        c.target.broker_id
        for c in progress.decision.state_changes
        if c.kind is StateChangeKind.START_REPLICA and c.target is not None
    ]
    assert started == [4, 5, 6]


def test_waits_until_new_replicas_catch_up() -> None:
    started = step(PartitionRegistration.initial([1, 2, 3])).registration
    waiting = step(started, caught_up=set())
    assert waiting.step is ReassignmentStep.WAIT
    assert waiting.registration is started and waiting.decision.state_changes == []
    partial = step(started, caught_up={4})
    assert partial.step is ReassignmentStep.EXPAND_ISR
    assert set(partial.registration.isr) == {1, 2, 3, 4}
    assert step(partial.registration, caught_up={4}).step is ReassignmentStep.WAIT


def test_fenced_new_replica_does_not_join_isr() -> None:
    started = step(PartitionRegistration.initial([1, 2, 3])).registration
    progress = step(started, caught_up={4, 5, 6}, cluster=CLUSTER.with_fenced(6))
    assert set(progress.registration.isr) == {1, 2, 3, 4, 5}


def test_complete_bumps_leader_epoch_and_stops_removed_replicas() -> None:
    partition = PartitionRegistration.initial([1, 2, 3])
    for _ in range(4):
        partition = step(partition, caught_up={4, 5, 6}).registration
    progress = step(partition)
    assert progress.step is ReassignmentStep.COMPLETE
    assert progress.registration.leader_epoch == partition.leader_epoch + 1
    stopped = [
        c.target.broker_id
        for c in progress.decision.state_changes
        if c.kind is StateChangeKind.STOP_REPLICA and c.target is not None
    ]
    assert stopped == [1, 2, 3]


def test_overlapping_reassignment_keeps_leader_in_target() -> None:
    partition = PartitionRegistration.initial([1, 2, 3])
    seen = []
    for _ in range(6):
        progress = next_reassignment_step(
            TP, partition, [2, 3, 4], CLUSTER, caught_up={4}, policy=POLICY, now_ms=1
        )
        seen.append(progress.step)
        partition = progress.registration
    assert seen[:5] == [
        ReassignmentStep.START,
        ReassignmentStep.EXPAND_ISR,
        ReassignmentStep.ELECT_LEADER,
        ReassignmentStep.SHRINK_ISR,
        ReassignmentStep.COMPLETE,
    ]
    assert (partition.replicas, partition.leader, set(partition.isr)) == ((2, 3, 4), 2, {2, 3, 4})


def test_invalid_targets_are_refused() -> None:
    fresh = PartitionRegistration.initial([1, 2, 3])
    for bad in ([], [4, 4, 5], [4, 5, 9]):
        progress = next_reassignment_step(
            TP, fresh, bad, CLUSTER, caught_up=(), policy=POLICY, now_ms=1
        )
        assert progress.decision.outcome is ErrorCode.INVALID_REPLICA_ASSIGNMENT
    moving = step(fresh).registration
    other = next_reassignment_step(
        TP, moving, [1, 5, 6], CLUSTER, caught_up=(), policy=POLICY, now_ms=1
    )
    assert other.decision.outcome is ErrorCode.REASSIGNMENT_IN_PROGRESS


def test_cancel_reverts_to_original_replicas() -> None:
    partition = PartitionRegistration.initial([1, 2, 3])
    for _ in range(3):  # START, EXPAND_ISR, ELECT_LEADER: 4 leads, ISR {1..6}
        partition = step(partition, caught_up={4, 5, 6}).registration
    assert partition.leader == 4
    reverted = applied(cancel_reassignment(TP, partition, CLUSTER, policy=POLICY, now_ms=2))
    assert reverted.replicas == (1, 2, 3)
    assert (reverted.leader, set(reverted.isr)) == (1, {1, 2, 3})
    assert not reverted.is_reassigning
    assert reverted.leader_epoch == partition.leader_epoch + 1
    assert reverted.leader_recovery_state is LeaderRecoveryState.RECOVERED


def test_cancel_without_original_replica_in_isr_requires_unclean() -> None:
    partition = PartitionRegistration.initial([1, 2, 3])
    for _ in range(4):  # ... SHRINK_ISR: ISR {4,5,6}
        partition = step(partition, caught_up={4, 5, 6}).registration
    assert set(partition.isr) == {4, 5, 6}
    refused = cancel_reassignment(TP, partition, CLUSTER, policy=POLICY, now_ms=2)
    assert refused.outcome is ErrorCode.INVALID_REPLICA_ASSIGNMENT
    unclean = ElectionPolicy(unclean_allowed=True)
    reverted = applied(cancel_reassignment(TP, partition, CLUSTER, policy=unclean, now_ms=2))
    assert (reverted.replicas, reverted.leader, reverted.isr) == ((1, 2, 3), 1, (1,))
    assert reverted.leader_recovery_state is LeaderRecoveryState.RECOVERING


def test_cancel_with_no_reassignment_in_progress() -> None:
    fresh = PartitionRegistration.initial([1, 2, 3])
    decision = cancel_reassignment(TP, fresh, CLUSTER, policy=POLICY, now_ms=2)
    assert decision.outcome is ErrorCode.NO_REASSIGNMENT_IN_PROGRESS


def test_elect_leader_step_fails_when_no_target_replica_can_lead() -> None:
    partition = PartitionRegistration.initial([1, 2, 3])
    for _ in range(2):
        partition = step(partition, caught_up={4, 5, 6}).registration
    down = CLUSTER.with_fenced(4).with_fenced(5).with_fenced(6)
    progress = step(partition, cluster=down)
    assert progress.step is ReassignmentStep.ELECT_LEADER
    assert progress.decision.outcome is ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE
    assert partition.leader != NO_LEADER  # the current leader keeps serving
