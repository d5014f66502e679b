"""Preferred-leader balance (the ZK rule: a broker that does not lead more than 10 % of the
partitions it is preferred for gets preferred elections for them) and operator-requested
elections."""

from __future__ import annotations

from replog.election import (
    Actor,
    ClusterView,
    Decision,
    ElectionPolicy,
    LeaderElectionStrategy,
    PartitionRegistration,
    TopicPartition,
    elect_leader,
    imbalanced_partitions,
    leader_imbalance,
    partitions_to_rebalance,
)
from replog.errors import ErrorCode
from replog.metadata.types import NO_LEADER, LeaderRecoveryState

from ._support import TP, applied, registration

CLUSTER = ClusterView.of(1, 2, 3)


def _broker_1_preferred_for_10_leads_8(
    isr_of_unbalanced: tuple[tuple[int, ...], tuple[int, ...]] = ((1, 2, 3), (1, 2, 3)),
) -> dict[TopicPartition, PartitionRegistration]:
    partitions = {
        TopicPartition("t", p): PartitionRegistration.initial([1, 2, 3]) for p in range(8)
    }
    for p, isr in zip((8, 9), isr_of_unbalanced, strict=True):
        partitions[TopicPartition("t", p)] = PartitionRegistration.initial([1, 2, 3], isr, 2)
    # Partitions where broker 2 is preferred and leads: balanced for broker 2.
    partitions[TopicPartition("u", 0)] = PartitionRegistration.initial([2, 3, 1])
    return partitions


def test_broker_over_imbalance_ratio_gets_preferred_elections() -> None:
    # Broker 1 is preferred for 10 partitions and leads 8 -> 0.2 > 0.10.
    partitions = _broker_1_preferred_for_10_leads_8()
    imbalance = leader_imbalance(partitions)
    assert imbalance[1].ratio == 0.2
    assert imbalance[2].ratio == 0.0
    assert partitions_to_rebalance(partitions, CLUSTER) == [
        TopicPartition("t", 8),
        TopicPartition("t", 9),
    ]


def test_partitions_where_preferred_is_not_in_isr_are_skipped() -> None:
    partitions = _broker_1_preferred_for_10_leads_8(((1, 2, 3), (2, 3)))
    assert partitions_to_rebalance(partitions, CLUSTER) == [TopicPartition("t", 8)]
    assert partitions_to_rebalance(partitions, CLUSTER.with_fenced(1)) == []


def test_ratio_at_threshold_is_not_rebalanced() -> None:
    partitions = _broker_1_preferred_for_10_leads_8()
    del partitions[TopicPartition("t", 9)]
    partitions[TopicPartition("t", 9)] = PartitionRegistration.initial([1, 2, 3])
    assert leader_imbalance(partitions)[1].ratio == 0.1  # 1 of 10: not > 10%
    assert partitions_to_rebalance(partitions, CLUSTER) == []
    assert partitions_to_rebalance(partitions, CLUSTER, imbalance_percentage=5) == [
        TopicPartition("t", 8)
    ]


def test_kraft_rule_attempts_every_imbalanced_partition() -> None:
    partitions = _broker_1_preferred_for_10_leads_8(((1, 2, 3), (2, 3)))
    assert imbalanced_partitions(partitions) == [TopicPartition("t", 8), TopicPartition("t", 9)]
    assert imbalanced_partitions(partitions, elections_max=1) == [TopicPartition("t", 8)]


def elect(
    partition: PartitionRegistration,
    election: LeaderElectionStrategy,
    cluster: ClusterView = CLUSTER,
) -> Decision:
    """An operator's election request, unclean election off in the topic config."""
    return elect_leader(
        TP,
        partition,
        cluster,
        election,
        policy=ElectionPolicy(),
        now_ms=3,
        requester=Actor.admin(),
        controller=Actor.controller(0),
    )


def test_preferred_election_outcomes() -> None:
    moved = elect(registration([1, 2, 3], [1, 2, 3], 2), LeaderElectionStrategy.PREFERRED)
    assert applied(moved).leader == 1
    assert str(moved.state_changes[0]) == (
        "controller 0 completed elect-leader for foo-0 requested by admin -1 at epoch 6"
    )
    not_needed = elect(registration([1, 2, 3], [1, 2, 3], 1), LeaderElectionStrategy.PREFERRED)
    assert not_needed.outcome is ErrorCode.ELECTION_NOT_NEEDED
    unavailable = elect(registration([1, 2, 3], [2, 3], 2), LeaderElectionStrategy.PREFERRED)
    assert unavailable.outcome is ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE


def test_unclean_election_on_request_overrides_config() -> None:
    offline = registration([1, 2, 3], [1], NO_LEADER)
    elected = applied(elect(offline, LeaderElectionStrategy.UNCLEAN, CLUSTER.with_fenced(1)))
    assert (elected.leader, elected.isr) == (2, (2,))
    assert elected.leader_recovery_state is LeaderRecoveryState.RECOVERING
    online = registration([1, 2, 3], [1], 1)
    assert elect(online, LeaderElectionStrategy.UNCLEAN).outcome is ErrorCode.ELECTION_NOT_NEEDED
    all_down = CLUSTER.with_fenced(1).with_fenced(2).with_fenced(3)
    assert elect(offline, LeaderElectionStrategy.UNCLEAN, all_down).outcome is (
        ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE
    )
