"""AlterPartition validation: ineligible members (shutting down, fenced, a stale broker epoch),
fencing, and the order of the checks (KRaft's validateAlterPartitionData)."""

from __future__ import annotations

import attrs
import pytest

from replog.election import (
    BrokerRegistration,
    ClusterView,
    ElectionPolicy,
    PartitionRegistration,
    Phase,
    handle_alter_partition,
    response_error,
)
from replog.election.decision import Decision
from replog.errors import ErrorCode
from replog.metadata.types import AlterPartition, IsrMember, LeaderRecoveryState

from ._support import TP, applied, registration

POLICY = ElectionPolicy()
CURRENT = registration([1, 2, 3], [1, 2], 1, leader_epoch=5, partition_epoch=9)
CLUSTER = ClusterView(BrokerRegistration(broker_id=b, broker_epoch=100 + b) for b in (1, 2, 3))


def request(**changes: object) -> AlterPartition:
    base = AlterPartition(
        topic=TP.topic,
        partition=TP.partition,
        leader_id=1,
        leader_broker_epoch=101,
        leader_epoch=5,
        partition_epoch=9,
        new_isr=[IsrMember(1, 101), IsrMember(2, 102), IsrMember(3, 103)],
    )
    return attrs.evolve(base, **changes)  # type: ignore[arg-type]


def decide(
    req: AlterPartition,
    current: PartitionRegistration | None = CURRENT,
    cluster: ClusterView = CLUSTER,
) -> Decision:
    return handle_alter_partition(req, current, cluster, policy=POLICY, now_ms=50, requested_ms=40)


def test_valid_expansion_commits_with_new_partition_epoch() -> None:
    decision = decide(request())
    after = applied(decision)
    assert (after.isr, after.leader_epoch, after.partition_epoch) == ((1, 2, 3), 5, 10)
    record = decision.state_changes[0]
    assert record.phase is Phase.COMPLETED
    assert (record.requested_ms, record.completed_ms) == (40, 50)
    assert str(record) == (
        "controller 0 completed alter-partition for foo-0 requested by leader 1 at epoch 5"
    )
    assert response_error(request(), decision) is ErrorCode.NONE


def test_shutting_down_follower_proposed_for_isr_is_ineligible() -> None:
    # C (3) is in controlled shutdown and caught up; the leader proposes it anyway.
    decision = decide(request(), cluster=CLUSTER.with_controlled_shutdown(3))
    assert decision.outcome is ErrorCode.INELIGIBLE_REPLICA
    assert decision.state_changes[0].phase is Phase.REJECTED
    assert str(decision.state_changes[0]).endswith(": INELIGIBLE_REPLICA")


def test_fenced_follower_proposed_for_isr_is_ineligible() -> None:
    assert decide(request(), cluster=CLUSTER.with_fenced(3)).outcome is (
        ErrorCode.INELIGIBLE_REPLICA
    )


def test_stale_broker_epoch_member_is_ineligible() -> None:
    # C restarted with an empty disk as epoch 203; a delayed request carries 103 (KIP-903).
    restarted = CLUSTER.with_registration(BrokerRegistration(broker_id=3, broker_epoch=203))
    assert decide(request(), cluster=restarted).outcome is ErrorCode.INELIGIBLE_REPLICA
    current_epoch = request(new_isr=[IsrMember(1, 101), IsrMember(2, 102), IsrMember(3, 203)])
    assert applied(decide(current_epoch, cluster=restarted)).isr == (1, 2, 3)
    unknown_epoch = request(new_isr=[1, 2, 3])  # -1: not checked (older request versions)
    assert decide(unknown_epoch, cluster=restarted).ok


def test_stale_sender_broker_epoch_is_rejected_first() -> None:
    stale = request(leader_broker_epoch=99)
    assert decide(stale, current=None).outcome is ErrorCode.STALE_BROKER_EPOCH


@pytest.mark.parametrize(
    ("changes", "expected"),
    [
        ({"leader_epoch": 4}, ErrorCode.FENCED_LEADER_EPOCH),
        ({"partition_epoch": 8}, ErrorCode.INVALID_UPDATE_VERSION),
        ({"leader_id": 2, "leader_broker_epoch": 102}, ErrorCode.INVALID_REQUEST),
        ({"leader_epoch": 6}, ErrorCode.NOT_CONTROLLER),
        ({"partition_epoch": 10}, ErrorCode.NOT_CONTROLLER),
        ({"new_isr": [1, 2, 4]}, ErrorCode.INVALID_REQUEST),
        ({"new_isr": [2, 3]}, ErrorCode.INVALID_REQUEST),
        ({"new_isr": [1, 2, 2]}, ErrorCode.INVALID_REQUEST),
        ({"leader_recovery_state": LeaderRecoveryState.RECOVERING}, ErrorCode.INVALID_REQUEST),
    ],
)
def test_alter_partition_fencing(changes: dict[str, object], expected: ErrorCode) -> None:
    # Fencing (stale leader epoch, stale partition epoch, a non-leader sender) and the other
    # checks: an ISR outside the replicas or without the leader, a RECOVERING ISR above 1.
    decision = decide(request(**changes))
    assert decision.outcome is expected
    assert response_error(request(**changes), decision) is expected


def test_unknown_partition() -> None:
    assert decide(request(), current=None).outcome is ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


def test_checks_run_in_spec_order() -> None:
    # Newer epoch beats everything after it; a stale leader epoch beats a wrong sender, which
    # beats a stale partition epoch, which beats a bad ISR, which beats an ineligible member.
    from_2 = {"leader_id": 2, "leader_broker_epoch": 102}
    assert decide(request(leader_epoch=6, **from_2)).outcome is ErrorCode.NOT_CONTROLLER
    assert decide(request(leader_epoch=4, **from_2)).outcome is ErrorCode.FENCED_LEADER_EPOCH
    assert decide(request(partition_epoch=8, **from_2)).outcome is ErrorCode.INVALID_REQUEST
    stale_and_bad = request(partition_epoch=8, new_isr=[2, 3])
    assert decide(stale_and_bad).outcome is ErrorCode.INVALID_UPDATE_VERSION
    bad_and_ineligible = request(new_isr=[1, 4])
    assert decide(bad_and_ineligible, cluster=CLUSTER.with_fenced(2)).outcome is (
        ErrorCode.INVALID_REQUEST
    )


def test_identical_proposal_succeeds_with_current_state_even_with_old_partition_epoch() -> None:
    # ZK idempotence: a retry of an applied request returns the current state.
    applied_once = applied(decide(request()))
    retry = decide(request(), current=applied_once)  # carries partition epoch 9, current is 10
    assert retry.outcome is applied_once
    assert [c.phase for c in retry.state_changes] == [Phase.COMPLETED]
    assert response_error(request(), retry) is ErrorCode.NONE


def test_rejection_leaves_registration_for_leader_to_revert() -> None:
    decision = decide(request(), cluster=CLUSTER.with_fenced(3))
    assert not decision.ok
    assert decision.error is ErrorCode.INELIGIBLE_REPLICA
    assert ErrorCode.INELIGIBLE_REPLICA.retriable is False


def test_recovered_to_recovering_is_rejected() -> None:
    lone = registration([1, 2, 3], [1], 1)
    req = request(new_isr=[IsrMember(1, 101)], leader_recovery_state=LeaderRecoveryState.RECOVERING)
    assert decide(req, current=lone).outcome is ErrorCode.INVALID_REQUEST


def test_alter_partition_completing_reassignment_reports_new_leader_elected() -> None:
    # KRaft: the ISR catching up completes the reassignment; leader 1 is removed -> 4 leads.
    moving = PartitionRegistration(
        replicas=(4, 2, 3, 1),
        isr=(1, 2, 3),
        leader=1,
        leader_epoch=5,
        partition_epoch=9,
        adding_replicas=(4,),
        removing_replicas=(1,),
    )
    cluster = ClusterView.of(1, 2, 3, 4)
    req = request(leader_broker_epoch=-1, new_isr=[1, 2, 3, 4])
    decision = decide(req, current=moving, cluster=cluster)
    after = applied(decision)
    assert (after.replicas, set(after.isr), after.leader) == ((4, 2, 3), {2, 3, 4}, 4)
    assert not after.is_reassigning
    assert after.leader_epoch == 6
    assert response_error(req, decision) is ErrorCode.NEW_LEADER_ELECTED
