"""Hypothesis state machine over one partition: random broker events, ISR proposals, elections
and reassignment steps, checking the controller's invariants after every decision.

Properties: leader in ISR (or -1); ISR within the replicas; ELR disjoint from the ISR and empty
once ISR >= minISR; partition epoch +1 on every real change and unchanged otherwise; leader epoch
never decreases; a newly elected leader is acceptable; with unclean election off, a new leader
always comes from the previous ISR or ELR (or the ISR its leader just proposed) and the
partition is never RECOVERING.
"""

from __future__ import annotations

import attrs
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from replog.election import (
    BrokerRegistration,
    ClusterView,
    Decision,
    ElectionPolicy,
    LeaderElectionStrategy,
    PartitionChangeBuilder,
    PartitionRegistration,
    cancel_reassignment,
    handle_alter_partition,
    next_reassignment_step,
    on_broker_fenced,
    on_broker_unclean_restart,
    on_broker_unfenced,
    on_controlled_shutdown,
)
from replog.metadata.types import NO_LEADER, AlterPartition, IsrMember, LeaderRecoveryState

from ._support import TP

BROKERS = list(range(6))
broker_ids = st.sampled_from(BROKERS)


class PartitionMachine(RuleBasedStateMachine):
    """One partition of RF 3 on six brokers, driven by random events."""

    def __init__(self) -> None:
        super().__init__()
        self.partition = PartitionRegistration.initial([0, 1, 2])
        self.cluster = ClusterView.of(*BROKERS)
        self.policy = ElectionPolicy()
        self.now_ms = 0
        self.next_broker_epoch = 100

    @initialize(
        min_isr=st.integers(1, 3),
        elr_enabled=st.booleans(),
        unclean_allowed=st.booleans(),
        last_known_leader=st.booleans(),
    )
    def choose_policy(
        self, min_isr: int, elr_enabled: bool, unclean_allowed: bool, last_known_leader: bool
    ) -> None:
        self.policy = ElectionPolicy(
            min_isr=min_isr,
            elr_enabled=elr_enabled,
            unclean_allowed=unclean_allowed,
            last_known_leader=last_known_leader,
        )

    # -- applying a decision, with the per-decision checks ---------------------------------

    def apply(
        self, decision: Decision, cluster: ClusterView, vouched: frozenset[int] = frozenset()
    ) -> None:
        """Check one decision and make its registration current. ``vouched``: replicas the
        leader itself proposed as in sync (an AlterPartition), so clean candidates too."""
        old = self.partition
        self.now_ms += 1
        self.cluster = cluster
        if not decision.ok:
            return
        new = decision.registration
        if new == old:
            assert new.partition_epoch == old.partition_epoch
            return
        assert decision.state_changes, "a real change emits state changes"
        assert new.partition_epoch == old.partition_epoch + 1
        assert new.leader_epoch >= old.leader_epoch
        if new.leader != old.leader:
            assert new.leader_epoch == old.leader_epoch + 1
        if new.leader != NO_LEADER and new.leader_epoch != old.leader_epoch:
            assert cluster.is_acceptable_leader(new.leader)
        if not self.policy.unclean_allowed and new.leader not in (NO_LEADER, old.leader):
            in_sync = set(old.isr) | set(old.elr) | vouched
            if new.leader not in in_sync:
                # KIP-966 balanced recovery: only the last known leader, only once ISR and ELR
                # are empty, and as an unclean election
                policy = self.policy
                assert policy.elr_enabled and policy.last_known_leader, (old, new)
                assert not old.isr and not old.elr and old.last_known_elr == (new.leader,)
                assert new.leader_recovery_state is LeaderRecoveryState.RECOVERING
                assert new.isr == (new.leader,) and not new.elr and not new.last_known_elr
        self.partition = new

    # -- rules -------------------------------------------------------------------------------

    @rule(broker=broker_ids)
    def fence(self, broker: int) -> None:
        decision = on_broker_fenced(
            TP, self.partition, broker, self.cluster, policy=self.policy, now_ms=self.now_ms
        )
        self.apply(decision, self.cluster.with_fenced(broker))

    @rule(broker=broker_ids)
    def unfence(self, broker: int) -> None:
        decision = on_broker_unfenced(
            TP, self.partition, broker, self.cluster, policy=self.policy, now_ms=self.now_ms
        )
        self.apply(decision, self.cluster.with_unfenced(broker))

    @rule(broker=broker_ids)
    def controlled_shutdown(self, broker: int) -> None:
        decision = on_controlled_shutdown(
            TP, self.partition, broker, self.cluster, policy=self.policy, now_ms=self.now_ms
        )
        self.apply(decision, self.cluster.with_controlled_shutdown(broker))

    @rule(broker=broker_ids, fenced=st.booleans())
    def unclean_restart(self, broker: int, fenced: bool) -> None:
        self.next_broker_epoch += 1
        reborn = BrokerRegistration(broker_id=broker, broker_epoch=self.next_broker_epoch)
        reborn = attrs.evolve(reborn, fenced=fenced)
        decision = on_broker_unclean_restart(
            TP, self.partition, reborn, self.cluster, policy=self.policy, now_ms=self.now_ms
        )
        self.apply(decision, self.cluster.with_registration(reborn))

    @precondition(lambda self: self.partition.has_leader)
    @rule(members=st.sets(broker_ids), stale_epoch=st.booleans())
    def leader_proposes_isr(self, members: set[int], stale_epoch: bool) -> None:
        partition = self.partition
        proposed = [partition.leader, *sorted(members - {partition.leader})]
        isr = []
        for b in proposed:
            registered = self.cluster.broker(b)
            epoch = -1 if registered is None else registered.broker_epoch - int(stale_epoch)
            isr.append(IsrMember(b, epoch))
        request = AlterPartition(
            topic=TP.topic,
            partition=TP.partition,
            leader_id=partition.leader,
            leader_epoch=partition.leader_epoch,
            partition_epoch=partition.partition_epoch,
            new_isr=isr,
            leader_recovery_state=LeaderRecoveryState.RECOVERED,
        )
        decision = handle_alter_partition(
            request, partition, self.cluster, policy=self.policy, now_ms=self.now_ms
        )
        self.apply(decision, self.cluster, frozenset(proposed))

    @rule(
        election=st.sampled_from([LeaderElectionStrategy.ONLINE, LeaderElectionStrategy.PREFERRED])
    )
    def elect(self, election: LeaderElectionStrategy) -> None:
        builder = PartitionChangeBuilder.for_partition(
            TP, self.partition, self.cluster, self.policy
        ).with_election(election)
        self.apply(builder.build(self.now_ms), self.cluster)

    @rule(
        new_replicas=st.permutations(BROKERS).map(lambda order: order[:3]),
        caught_up=st.sets(broker_ids),
        steps=st.integers(1, 5),
    )
    def reassign(self, new_replicas: list[int], caught_up: set[int], steps: int) -> None:
        target = new_replicas
        if self.partition.is_reassigning:
            target = list(self.partition.target_replicas)
        for _ in range(steps):
            progress = next_reassignment_step(
                TP,
                self.partition,
                target,
                self.cluster,
                caught_up=caught_up,
                policy=self.policy,
                now_ms=self.now_ms,
            )
            self.apply(progress.decision, self.cluster)

    @rule()
    def cancel(self) -> None:
        decision = cancel_reassignment(
            TP, self.partition, self.cluster, policy=self.policy, now_ms=self.now_ms
        )
        self.apply(decision, self.cluster)

    # -- invariants ---------------------------------------------------------------------------

    @invariant()
    def leader_is_in_isr_or_none(self) -> None:
        p = self.partition
        assert p.leader == NO_LEADER or p.leader in p.isr

    @invariant()
    def isr_and_elr_within_replicas(self) -> None:
        p = self.partition
        assert set(p.isr) <= set(p.replicas)
        assert set(p.elr) <= set(p.replicas)
        assert not set(p.elr) & set(p.isr)

    @invariant()
    def elr_follows_min_isr(self) -> None:
        p = self.partition
        if not self.policy.elr_enabled or len(p.isr) >= self.policy.min_isr:
            assert p.elr == () and p.last_known_elr == ()

    @invariant()
    def isr_never_empty_without_elr(self) -> None:
        if not self.policy.elr_enabled and not self.policy.unclean_allowed:
            assert self.partition.isr

    @invariant()
    def clean_partitions_never_recover(self) -> None:
        policy = self.policy
        balanced_recovery = policy.elr_enabled and policy.last_known_leader
        if not policy.unclean_allowed and not balanced_recovery:
            assert self.partition.leader_recovery_state is LeaderRecoveryState.RECOVERED


PartitionMachine.TestCase.settings = settings(
    max_examples=100,
    stateful_step_count=30,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
TestPartitionChangeProperties = PartitionMachine.TestCase
