"""KIP-966 Eligible Leader Replicas: the last replica standing (ISR {0,1,2}, min ISR 2; 0 drops,
1 drops, 2 crashes uncleanly) step by step, and the legacy behaviour."""

from __future__ import annotations

from replog.election import (
    BrokerRegistration,
    ClusterView,
    ElectionPolicy,
    PartitionChangeBuilder,
    PartitionRegistration,
    handle_alter_partition,
    on_broker_fenced,
    on_broker_unclean_restart,
    on_broker_unfenced,
)
from replog.metadata.types import NO_LEADER, AlterPartition

from ._support import TP, applied

ELR = ElectionPolicy(min_isr=2, elr_enabled=True)
LEGACY = ElectionPolicy(min_isr=2, elr_enabled=False)


def _down_to_last_replica_standing(
    policy: ElectionPolicy,
) -> tuple[PartitionRegistration, ClusterView]:
    """The first two steps (0 drops, then 1 drops), checked on the way."""
    start = PartitionRegistration.initial([0, 1, 2])
    cluster = ClusterView.of(0, 1, 2)
    after_0 = applied(on_broker_fenced(TP, start, 0, cluster, policy=policy, now_ms=1))
    cluster = cluster.with_fenced(0)
    assert (after_0.leader, after_0.isr, after_0.elr) == (1, (1, 2), ())  # ISR >= minISR
    after_1 = applied(on_broker_fenced(TP, after_0, 1, cluster, policy=policy, now_ms=2))
    cluster = cluster.with_fenced(1)
    assert (after_1.leader, after_1.isr) == (2, (2,))
    return after_1, cluster


def test_elr_keeps_replicas_removed_below_min_isr() -> None:
    last_standing, _ = _down_to_last_replica_standing(ELR)
    assert last_standing.elr == (1,)  # 1 left while ISR < minISR: it holds every committed record
    assert 0 not in last_standing.elr  # 0 left while ISR was still >= minISR


def test_last_isr_member_fenced_empties_isr_into_elr() -> None:
    last_standing, cluster = _down_to_last_replica_standing(ELR)
    empty = applied(on_broker_fenced(TP, last_standing, 2, cluster, policy=ELR, now_ms=3))
    assert (empty.leader, empty.isr, set(empty.elr)) == (NO_LEADER, (), {1, 2})
    assert empty.leader_epoch == last_standing.leader_epoch + 1


def test_unfenced_elr_member_is_elected_with_isr_of_itself() -> None:
    last_standing, cluster = _down_to_last_replica_standing(ELR)
    empty = applied(on_broker_fenced(TP, last_standing, 2, cluster, policy=ELR, now_ms=3))
    cluster = cluster.with_fenced(2)
    back = applied(on_broker_unfenced(TP, empty, 1, cluster, policy=ELR, now_ms=4))
    assert (back.leader, back.isr, back.elr) == (1, (1,), (2,))
    assert back.leader_epoch == empty.leader_epoch + 1


def test_partition_stays_offline_until_an_elr_member_returns() -> None:
    last_standing, cluster = _down_to_last_replica_standing(ELR)
    empty = applied(on_broker_fenced(TP, last_standing, 2, cluster, policy=ELR, now_ms=3))
    cluster = cluster.with_fenced(2)
    # 0 returns, but 0 is in neither ISR nor ELR: no clean candidate, and unclean is off.
    decision = on_broker_unfenced(TP, empty, 0, cluster, policy=ELR, now_ms=4)
    assert decision.outcome == empty and decision.state_changes == []


def test_unclean_restart_removes_replica_from_elr_so_it_cannot_lead() -> None:
    last_standing, cluster = _down_to_last_replica_standing(ELR)
    empty = applied(on_broker_fenced(TP, last_standing, 2, cluster, policy=ELR, now_ms=3))
    cluster = cluster.with_fenced(2)
    reborn = BrokerRegistration(broker_id=2, broker_epoch=7)  # new incarnation, unfenced
    after = applied(on_broker_unclean_restart(TP, empty, reborn, cluster, policy=ELR, now_ms=4))
    assert (after.leader, after.isr, after.elr) == (NO_LEADER, (), (1,))
    assert after.last_known_elr == (2,)
    cluster = cluster.with_registration(reborn)
    # 2 is back and acceptable, but it lost its tail: it is not elected.
    assert on_broker_unfenced(TP, after, 2, cluster, policy=ELR, now_ms=5).outcome == after
    # When 1 returns it is elected; 2 then follows 1 and truncates to it.
    elected = applied(on_broker_unfenced(TP, after, 1, cluster, policy=ELR, now_ms=6))
    assert (elected.leader, elected.isr, elected.elr) == (1, (1,), ())


def test_elr_is_cleared_once_isr_reaches_min_isr() -> None:
    partition = PartitionRegistration(
        replicas=(0, 1, 2), isr=(1,), leader=1, leader_epoch=3, partition_epoch=8, elr=(2,)
    )
    request = AlterPartition(
        topic=TP.topic,
        partition=TP.partition,
        leader_id=1,
        leader_epoch=3,
        partition_epoch=8,
        new_isr=[1, 0],
    )
    after = applied(
        handle_alter_partition(request, partition, ClusterView.of(0, 1, 2), policy=ELR, now_ms=1)
    )
    assert (set(after.isr), after.elr, after.last_known_elr) == ({0, 1}, (), ())


def test_shrink_below_min_isr_by_alter_partition_moves_member_to_elr() -> None:
    partition = PartitionRegistration.initial([0, 1, 2], isr=[0, 1], leader=0)
    request = AlterPartition(
        topic=TP.topic,
        partition=TP.partition,
        leader_id=0,
        leader_epoch=0,
        partition_epoch=0,
        new_isr=[0],
    )
    after = applied(
        handle_alter_partition(request, partition, ClusterView.of(0, 1, 2), policy=ELR, now_ms=1)
    )
    assert (after.isr, after.elr) == ((0,), (1,))


def test_without_elr_last_replica_keeps_isr_and_is_reelected_with_short_log() -> None:
    # Legacy behaviour (no ELR): committed data can be lost globally.
    last_standing, cluster = _down_to_last_replica_standing(LEGACY)
    assert last_standing.elr == ()
    offline = applied(on_broker_fenced(TP, last_standing, 2, cluster, policy=LEGACY, now_ms=3))
    assert (offline.leader, offline.isr) == (NO_LEADER, (2,))
    reborn = BrokerRegistration(broker_id=2, broker_epoch=7)
    cluster = cluster.with_fenced(2)
    restarted = on_broker_unclean_restart(TP, offline, reborn, cluster, policy=LEGACY, now_ms=4)
    assert restarted.state_changes == []  # no ELR: nothing records that 2 lost its tail
    cluster = cluster.with_registration(reborn)
    reelected = applied(on_broker_unfenced(TP, offline, 2, cluster, policy=LEGACY, now_ms=5))
    assert (reelected.leader, reelected.isr) == (2, (2,))


def test_unclean_election_with_elr_prefers_last_known_elr_member() -> None:
    partition = PartitionRegistration(
        replicas=(0, 1, 2),
        isr=(),
        leader=NO_LEADER,
        leader_epoch=4,
        partition_epoch=9,
        last_known_elr=(2,),
    )
    policy = ElectionPolicy(min_isr=2, elr_enabled=True, unclean_allowed=True)
    after = applied(
        PartitionChangeBuilder.for_partition(TP, partition, ClusterView.of(0, 1, 2), policy).build(
            now_ms=1
        )
    )
    assert (after.leader, after.isr, after.elr, after.last_known_elr) == (2, (2,), (), ())
