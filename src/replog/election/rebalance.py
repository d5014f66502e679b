"""Preferred-leader balance and leader elections asked for by an operator.

Over time leadership drifts away from ``replicas[0]`` (the preferred leader) as brokers fail and
return. Two rules pick the partitions to move back:

- ZK rule (``partitions_to_rebalance``): per broker B, ratio = (partitions whose preferred
  replica is B but whose leader is not B) / (partitions whose preferred replica is B). When the
  ratio exceeds ``leader.imbalance.per.broker.percentage`` / 100 (default 10), B's imbalanced
  partitions get a preferred election, those where B is acceptable and in the ISR only.
- KRaft rule (``imbalanced_partitions``): every partition whose leader is not ``replicas[0]``, at
  most ``elections_max`` (1000) per pass; the driver reschedules when more remain.

``elect_leader`` runs one admin-requested election (PREFERRED or UNCLEAN) with Kafka's answers:
ELECTION_NOT_NEEDED, PREFERRED_LEADER_NOT_AVAILABLE, ELIGIBLE_LEADERS_NOT_AVAILABLE.
"""

from __future__ import annotations

from collections.abc import Mapping

import attrs

from replog.election.decision import Decision
from replog.election.partition_change import (
    ElectionPolicy,
    LeaderElectionStrategy,
    PartitionChangeBuilder,
)
from replog.election.state import ClusterView, PartitionRegistration, TopicPartition
from replog.election.state_change import Actor, StateChange, StateChangeKind, handled_request
from replog.errors import ErrorCode

__all__ = [
    "ELECTIONS_PER_PASS_MAX",
    "LEADER_IMBALANCE_PER_BROKER_PERCENTAGE",
    "LeaderImbalance",
    "elect_leader",
    "imbalanced_partitions",
    "leader_imbalance",
    "partitions_to_rebalance",
]

LEADER_IMBALANCE_PER_BROKER_PERCENTAGE = 10
"""Kafka's default ``leader.imbalance.per.broker.percentage``."""

ELECTIONS_PER_PASS_MAX = 1000
"""KRaft's cap on preferred elections per balancing pass."""


@attrs.frozen
class LeaderImbalance:
    """One broker's preferred-leader balance: partitions it should lead, and those it does not."""

    broker_id: int
    preferred: tuple[TopicPartition, ...]
    not_leading: tuple[TopicPartition, ...]

    @property
    def ratio(self) -> float:
        """Share of the broker's preferred partitions that it does not lead (0.0 if none)."""
        return len(self.not_leading) / len(self.preferred) if self.preferred else 0.0


def leader_imbalance(
    partitions: Mapping[TopicPartition, PartitionRegistration],
) -> dict[int, LeaderImbalance]:
    """Preferred broker -> its imbalance, over every partition given."""
    preferred: dict[int, list[TopicPartition]] = {}
    not_leading: dict[int, list[TopicPartition]] = {}
    for tp, registration in sorted(partitions.items()):
        broker = registration.preferred_leader
        preferred.setdefault(broker, []).append(tp)
        if registration.leader != broker:
            not_leading.setdefault(broker, []).append(tp)
    return {
        broker: LeaderImbalance(broker, tuple(tps), tuple(not_leading.get(broker, ())))
        for broker, tps in sorted(preferred.items())
    }


def partitions_to_rebalance(
    partitions: Mapping[TopicPartition, PartitionRegistration],
    cluster: ClusterView,
    *,
    imbalance_percentage: int = LEADER_IMBALANCE_PER_BROKER_PERCENTAGE,
) -> list[TopicPartition]:
    """The ZK auto-rebalance rule: partitions to give a preferred election, sorted."""
    chosen: list[TopicPartition] = []
    for imbalance in leader_imbalance(partitions).values():
        if imbalance.ratio <= imbalance_percentage / 100:
            continue
        broker = imbalance.broker_id
        chosen.extend(
            tp
            for tp in imbalance.not_leading
            if cluster.is_acceptable_leader(broker) and broker in partitions[tp].isr
        )
    return sorted(chosen)


def imbalanced_partitions(
    partitions: Mapping[TopicPartition, PartitionRegistration],
    *,
    elections_max: int = ELECTIONS_PER_PASS_MAX,
) -> list[TopicPartition]:
    """The KRaft rule: partitions led by someone other than ``replicas[0]`` (at most
    ``elections_max``, sorted)."""
    out = [tp for tp, reg in sorted(partitions.items()) if reg.leader != reg.preferred_leader]
    return out[:elections_max]


def elect_leader(
    topic_partition: TopicPartition,
    current: PartitionRegistration,
    cluster: ClusterView,
    election: LeaderElectionStrategy,
    *,
    policy: ElectionPolicy,
    now_ms: int,
    requester: Actor,
    controller: Actor,
) -> Decision:
    """An election asked for by ``requester`` (an operator, or the controller's own balancer).

    PREFERRED: ELECTION_NOT_NEEDED when ``replicas[0]`` already leads; PREFERRED_LEADER_NOT_
    AVAILABLE when nothing would change. UNCLEAN: ELECTION_NOT_NEEDED when the partition has a
    leader; ELIGIBLE_LEADERS_NOT_AVAILABLE when no replica is acceptable."""
    if election not in (LeaderElectionStrategy.PREFERRED, LeaderElectionStrategy.UNCLEAN):
        raise ValueError(f"an operator asks for a PREFERRED or UNCLEAN election, not {election}")
    error = ErrorCode.NONE
    outcome: PartitionRegistration | ErrorCode = current
    changes: list[StateChange] = []
    if election is LeaderElectionStrategy.PREFERRED:
        not_needed = current.leader == current.preferred_leader
    else:
        not_needed = current.has_leader
    if not_needed:
        error = ErrorCode.ELECTION_NOT_NEEDED
    else:
        builder = PartitionChangeBuilder.for_partition(
            topic_partition, current, cluster, policy, controller
        ).with_election(election)
        outcome, changes = builder.build(now_ms)
        if outcome == current:
            error = (
                ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE
                if election is LeaderElectionStrategy.PREFERRED
                else ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE
            )
    record = handled_request(
        StateChangeKind.ELECT_LEADER,
        topic_partition,
        requester=requester,
        handler=controller,
        registration=outcome if isinstance(outcome, PartitionRegistration) else current,
        requested_ms=now_ms,
        now_ms=now_ms,
        error=error,
        detail=f"{election.value} election",
    )
    if error is not ErrorCode.NONE:
        return Decision(error, [record])
    return Decision(outcome, [record, *changes])
