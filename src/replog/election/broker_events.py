"""What a broker's liveness changes do to one partition (KRaft's broker failure handling).

The driver calls one of these for every partition that names the broker (in its replicas, ISR or
ELR). Each applies the event to the ``ClusterView`` it is given (so passing the view from before
or after the event gives the same answer) and returns the ``Decision`` for that partition:

- fenced (missed heartbeats): leaves every ISR; a leader is re-elected where it led. Removing the
  last ISR member with ELR off leaves the ISR as it is and the leader at -1 (offline);
- controlled shutdown: the same, since a shutting-down broker is not an acceptable leader;
- unfenced: leaderless partitions elect a leader, the returning broker now acceptable;
- re-registered as a new incarnation after an unclean shutdown: with ELR on it leaves the ISR
  and the ELR (its unflushed tail may be gone, KIP-966); with ELR off it is handled as fenced
  (the legacy behaviour: the last ISR member stays and is re-elected with its shorter log).
"""

from __future__ import annotations

from replog.election.decision import Decision
from replog.election.partition_change import ElectionPolicy, PartitionChangeBuilder
from replog.election.state import (
    BrokerRegistration,
    ClusterView,
    PartitionRegistration,
    TopicPartition,
)
from replog.election.state_change import DEFAULT_REQUESTER, Actor

__all__ = [
    "on_broker_fenced",
    "on_broker_unclean_restart",
    "on_broker_unfenced",
    "on_controlled_shutdown",
]


def _without(partition: PartitionRegistration, broker_id: int) -> tuple[int, ...]:
    return tuple(r for r in partition.isr if r != broker_id)


def on_broker_fenced(
    topic_partition: TopicPartition,
    partition: PartitionRegistration,
    broker_id: int,
    cluster: ClusterView,
    *,
    policy: ElectionPolicy,
    now_ms: int,
    requester: Actor = DEFAULT_REQUESTER,
) -> Decision:
    """``broker_id`` was fenced: drop it from the ISR and move leadership off it."""
    view = cluster.with_fenced(broker_id) if cluster.broker(broker_id) else cluster
    builder = PartitionChangeBuilder.for_partition(
        topic_partition, partition, view, policy, requester
    )
    return builder.with_target_isr(_without(partition, broker_id)).build(now_ms)


def on_controlled_shutdown(
    topic_partition: TopicPartition,
    partition: PartitionRegistration,
    broker_id: int,
    cluster: ClusterView,
    *,
    policy: ElectionPolicy,
    now_ms: int,
    requester: Actor = DEFAULT_REQUESTER,
) -> Decision:
    """``broker_id`` asked to shut down: drop it from the ISR and move leadership off it (the
    ZK rule: first in assignment order that is live, in the ISR and not shutting down)."""
    view = cluster.with_controlled_shutdown(broker_id) if cluster.broker(broker_id) else cluster
    builder = PartitionChangeBuilder.for_partition(
        topic_partition, partition, view, policy, requester
    )
    return builder.with_target_isr(_without(partition, broker_id)).build(now_ms)


def on_broker_unfenced(
    topic_partition: TopicPartition,
    partition: PartitionRegistration,
    broker_id: int,
    cluster: ClusterView,
    *,
    policy: ElectionPolicy,
    now_ms: int,
    requester: Actor = DEFAULT_REQUESTER,
) -> Decision:
    """``broker_id`` is back: elect a leader if the partition has none (a partition that has a
    valid leader is left alone; the broker rejoins the ISR through its leader's AlterPartition)."""
    view = cluster.with_unfenced(broker_id)
    builder = PartitionChangeBuilder.for_partition(
        topic_partition, partition, view, policy, requester
    )
    return builder.build(now_ms)


def on_broker_unclean_restart(
    topic_partition: TopicPartition,
    partition: PartitionRegistration,
    registration: BrokerRegistration,
    cluster: ClusterView,
    *,
    policy: ElectionPolicy,
    now_ms: int,
    requester: Actor = DEFAULT_REQUESTER,
) -> Decision:
    """The broker re-registered as a new incarnation (``registration``, with its new epoch)
    without a clean shutdown. With ELR on it leaves both the ISR and the ELR; with ELR off this
    is the same as fencing it."""
    view = cluster.with_registration(registration)
    broker_id = registration.broker_id
    builder = PartitionChangeBuilder.for_partition(
        topic_partition, partition, view, policy, requester
    ).with_target_isr(_without(partition, broker_id))
    if policy.elr_enabled:
        builder = builder.with_unclean_shutdown(broker_id)
    return builder.build(now_ms)
