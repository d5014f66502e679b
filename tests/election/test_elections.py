"""Leader elections on broker events: the clean election order, the last ISR member lost (clean
and unclean), the lone ISR leader then an unclean election, a shutting-down broker, and Kafka's
epoch rules (the leader epoch +1 exactly when a change sets the leader, the partition epoch +1 on
every change, nothing for a no-op)."""

from __future__ import annotations

import attrs

from replog.election import (
    ClusterView,
    Decision,
    ElectionPolicy,
    LeaderElectionStrategy,
    PartitionChangeBuilder,
    handle_alter_partition,
    on_broker_fenced,
    on_broker_unfenced,
    on_controlled_shutdown,
)
from replog.errors import ErrorCode
from replog.metadata.types import NO_LEADER, AlterPartition, LeaderRecoveryState

from ._support import TP, applied, lines, registration

POLICY = ElectionPolicy()
UNCLEAN = ElectionPolicy(unclean_allowed=True)


def test_clean_election_skips_replicas_outside_isr() -> None:
    # Clean election order: AR [3,1,2], ISR {1,2}, leader 1; broker 1 is fenced.
    before = registration([3, 1, 2], [1, 2], 1)
    decision = on_broker_fenced(TP, before, 1, ClusterView.of(1, 2, 3), policy=POLICY, now_ms=7)
    after = applied(decision)
    assert after.leader == 2  # 3 comes first in AR order but is not in the ISR
    assert set(after.isr) == {2}
    assert after.leader_epoch == before.leader_epoch + 1
    assert after.partition_epoch == before.partition_epoch + 1
    assert "controller 0 requested become-leader for foo-0 to broker 2 at epoch 6" in lines(
        decision
    )


def test_last_isr_member_fenced_leaves_partition_offline_with_isr_unchanged() -> None:
    # The last ISR member lost: AR [1,2,3], ISR {1}; 1 is fenced while 2 and 3 are alive.
    before = registration([1, 2, 3], [1], 1)
    cluster = ClusterView.of(1, 2, 3)
    decision = on_broker_fenced(TP, before, 1, cluster, policy=POLICY, now_ms=1)
    offline = applied(decision)
    assert offline.leader == NO_LEADER
    assert offline.isr == (1,)
    assert offline.leader_epoch == before.leader_epoch + 1  # the leader field was set (to -1)
    assert offline.partition_epoch == before.partition_epoch + 1
    assert lines(decision) == ["controller 0 requested partition-offline for foo-0 at epoch 6"]


def test_returning_last_isr_member_is_reelected() -> None:
    # Continued: when 1 unfences it leads again (2 and 3 will truncate to it).
    offline = registration([1, 2, 3], [1], NO_LEADER, leader_epoch=6, partition_epoch=10)
    cluster = ClusterView.of(1, 2, 3).with_fenced(1)
    back = applied(on_broker_unfenced(TP, offline, 1, cluster, policy=POLICY, now_ms=2))
    assert (back.leader, back.isr, back.leader_epoch) == (1, (1,), 7)
    assert back.leader_recovery_state is LeaderRecoveryState.RECOVERED


def test_other_broker_unfencing_does_not_elect_outside_isr() -> None:
    offline = registration([1, 2, 3], [1], NO_LEADER, leader_epoch=6, partition_epoch=10)
    cluster = ClusterView.of(1, 2, 3).with_fenced(1).with_fenced(2)
    decision = on_broker_unfenced(TP, offline, 2, cluster, policy=POLICY, now_ms=2)
    assert decision.outcome == offline  # no change, no record
    assert decision.state_changes == []


def test_unclean_election_picks_first_live_replica_and_marks_recovering() -> None:
    # The last ISR member lost, unclean: leader 2 (first live in AR), ISR {2}, RECOVERING.
    before = registration([1, 2, 3], [1], 1)
    decision = on_broker_fenced(TP, before, 1, ClusterView.of(1, 2, 3), policy=UNCLEAN, now_ms=3)
    after = applied(decision)
    assert (after.leader, after.isr) == (2, (2,))
    assert after.leader_recovery_state is LeaderRecoveryState.RECOVERING
    assert after.leader_epoch == before.leader_epoch + 1
    leader_record = next(c for c in decision.state_changes if c.kind.value == "become-leader")
    assert "unclean election of 2" in leader_record.detail  # what may have been lost is recorded


def test_recovering_partition_rejects_isr_expansion_until_recovered() -> None:
    # The last ISR member lost, unclean: AlterPartition with ISR > 1 is rejected while
    # RECOVERING.
    recovering = registration(
        [1, 2, 3], [2], 2, leader_recovery_state=LeaderRecoveryState.RECOVERING
    )
    cluster = ClusterView.of(1, 2, 3)

    def alter(isr: list[int], state: LeaderRecoveryState, partition_epoch: int = 9) -> Decision:
        request = AlterPartition(
            topic=TP.topic,
            partition=TP.partition,
            leader_id=2,
            leader_epoch=5,
            partition_epoch=partition_epoch,
            new_isr=isr,
            leader_recovery_state=state,
        )
        return handle_alter_partition(request, recovering, cluster, policy=POLICY, now_ms=4)

    rejected = alter([2, 3], LeaderRecoveryState.RECOVERING)
    assert rejected.outcome is ErrorCode.INVALID_REQUEST
    recovered = alter([2], LeaderRecoveryState.RECOVERED)
    after = applied(recovered)
    assert after.leader_recovery_state is LeaderRecoveryState.RECOVERED
    assert after.leader_epoch == 5 and after.partition_epoch == 10
    expanded = handle_alter_partition(
        AlterPartition(
            topic=TP.topic,
            partition=TP.partition,
            leader_id=2,
            leader_epoch=5,
            partition_epoch=10,
            new_isr=[2, 3],
        ),
        after,
        cluster,
        policy=POLICY,
        now_ms=5,
    )
    assert applied(expanded).isr == (2, 3)


def test_lone_isr_leader_lost_unclean_election_elects_out_of_sync_replica() -> None:
    # The lone ISR leader, then an unclean election (election side): RF 3, minISR 1, unclean
    # on; the ISR shrank to {A}, A is lost.
    a, b, c = 1, 2, 3
    lone = registration([a, b, c], [a], a)
    cluster = ClusterView.of(a, b, c)
    after = applied(on_broker_fenced(TP, lone, a, cluster, policy=UNCLEAN, now_ms=1))
    assert (after.leader, after.isr) == (b, (b,))
    assert after.leader_recovery_state is LeaderRecoveryState.RECOVERING
    # Unclean disabled: the partition waits for A.
    waiting = applied(on_broker_fenced(TP, lone, a, cluster, policy=POLICY, now_ms=1))
    assert (waiting.leader, waiting.isr) == (NO_LEADER, (a,))


def test_shutting_down_broker_is_not_acceptable_as_leader() -> None:
    # ZK controlled shutdown (election side): leadership moves to the first in AR
    # order that is live, in the ISR and not shutting down; the broker leaves the ISR.
    before = registration([1, 2, 3], [1, 2, 3], 1)
    cluster = ClusterView.of(1, 2, 3).with_controlled_shutdown(2)
    after = applied(on_controlled_shutdown(TP, before, 1, cluster, policy=POLICY, now_ms=1))
    assert after.leader == 3
    assert set(after.isr) == {2, 3}  # 2 stays in the ISR until its own shutdown is processed
    preferred = PartitionChangeBuilder.for_partition(TP, after, cluster, POLICY).with_election(
        LeaderElectionStrategy.PREFERRED
    )
    assert applied(preferred.build(now_ms=2)).leader == 3  # 1 is shutting down, 2 as well


def test_follower_shutdown_shrinks_isr_without_leader_epoch_bump() -> None:
    before = registration([1, 2, 3], [1, 2, 3], 1)
    after = applied(
        on_controlled_shutdown(TP, before, 3, ClusterView.of(1, 2, 3), policy=POLICY, now_ms=1)
    )
    assert (after.leader, set(after.isr)) == (1, {1, 2})
    assert after.leader_epoch == before.leader_epoch  # ISR shrink does not bump (MV >= 3.6)
    assert after.partition_epoch == before.partition_epoch + 1


def test_no_op_change_produces_no_record() -> None:
    before = registration([1, 2, 3], [1, 2, 3], 1)
    builder = PartitionChangeBuilder.for_partition(TP, before, ClusterView.of(1, 2, 3), POLICY)
    decision = builder.with_target_isr([3, 2, 1]).build(now_ms=1)  # same set, other order
    assert decision.outcome is before
    assert decision.state_changes == []


def test_isr_expansion_bumps_partition_epoch_only() -> None:
    before = registration([1, 2, 3], [1], 1)
    builder = PartitionChangeBuilder.for_partition(TP, before, ClusterView.of(1, 2, 3), POLICY)
    after = applied(builder.with_target_isr([1, 3]).build(now_ms=1))
    assert (after.leader_epoch, after.partition_epoch) == (5, 10)
    assert after.isr == (1, 3)


def test_forced_bump_sets_same_leader_with_new_epoch() -> None:
    before = registration([1, 2, 3], [1, 2, 3], 1)
    builder = PartitionChangeBuilder.for_partition(TP, before, ClusterView.of(1, 2, 3), POLICY)
    after = applied(attrs.evolve(builder, force_leader_epoch_bump=True).build(now_ms=1))
    assert (after.leader, after.leader_epoch, after.partition_epoch) == (1, 6, 10)


def test_current_leader_kept_when_still_valid_even_if_not_first() -> None:
    before = registration([1, 2, 3], [1, 2, 3], 3)
    after = applied(
        on_broker_fenced(TP, before, 2, ClusterView.of(1, 2, 3), policy=POLICY, now_ms=1)
    )
    assert after.leader == 3 and after.leader_epoch == before.leader_epoch


def test_preferred_election_moves_leadership_back_to_first_replica() -> None:
    before = registration([1, 2, 3], [1, 2, 3], 2)
    builder = PartitionChangeBuilder.for_partition(TP, before, ClusterView.of(1, 2, 3), POLICY)
    after = applied(builder.with_election(LeaderElectionStrategy.PREFERRED).build(now_ms=1))
    assert (after.leader, after.leader_epoch) == (1, before.leader_epoch + 1)


def test_preferred_election_never_elects_uncleanly() -> None:
    before = registration([1, 2, 3], [1], NO_LEADER)
    cluster = ClusterView.of(1, 2, 3).with_fenced(1)
    builder = PartitionChangeBuilder.for_partition(TP, before, cluster, UNCLEAN)
    assert builder.with_election(LeaderElectionStrategy.PREFERRED).build(now_ms=1).outcome == before
    assert applied(builder.build(now_ms=1)).leader == 2  # ONLINE with unclean allowed does
