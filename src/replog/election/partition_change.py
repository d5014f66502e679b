"""The partition change builder: from a registration and a requested change to the next one.

Theory of operation (KRaft's PartitionChangeBuilder, KIP-966, KIP-704). A caller describes what it
wants (a new ISR, a new assignment, an election type, ELR on/off, whether unclean election is
allowed) and ``build()`` works out everything that follows, in this order:

1. **Assignment.** The target replicas/adding/removing, and the ISR restricted to the replicas.
2. **Reassignment completion (KRaft rule).** When the ISR minus the removing replicas is
   non-empty and holds every replica of ``replicas - removing``, the removing replicas leave the
   replicas and the ISR, and adding/removing are cleared.
3. **Empty ISR.** With ELR off the ISR never becomes empty: a change that would empty it leaves it
   as it was (the last member stays, and leads only once acceptable again). With ELR on it may.
4. **Election.** "Valid" = in the assignment, acceptable (registered, unfenced, not shutting
   down) and in the requested ISR, or, when that ISR is empty, in the ELR. Keep the current leader
   if valid; else the first valid replica in assignment order (an ELR member becomes ISR=[it]);
   else the last known leader (below), with ISR=[it] and RECOVERING; else, if unclean election
   is allowed, the first acceptable replica (last-known-ELR members first), with ISR=[it] and
   RECOVERING; else no leader. PREFERRED tries ``replicas[0]`` first and never elects uncleanly
   (but may elect the last known leader); REASSIGN never keeps or elects a replica that is
   being removed.
5. **ELR.** ``ELR = (oldELR | oldISR) - ISR - uncleanShutdownReplicas``, cleared whenever
   ``ISR >= minISR``; an unclean election clears it. The last-known ELR has two modes, as
   Kafka's ``useLastKnownLeaderInBalancedRecovery`` (KIP-966 "balanced" recovery, on by default):
   it holds only the **last known leader** -- set to the leader of the moment the partition
   becomes leaderless (Kafka sets it when the ISR becomes empty; here a leader can also go while
   a departed broker still sits in the ISR, so the moment the leader goes is the one that
   counts), kept while it has no leader, cleared once it has one -- and when ISR and
   ELR are both empty that one replica is elected as soon as it is acceptable, as an unclean
   election (it may have restarted uncleanly, but it held the most records when the partition
   went leaderless). With the mode off it holds every replica that was an ISR/ELR member since
   the ISR fell below minISR and is neither any more (cleared with the ELR), and only an
   allowed unclean election uses it.
6. **Epochs.** The leader field is set when the leader changes, when a bump is forced, or when the
   assignment loses replicas; then ``leader_epoch + 1``. Every change: ``partition_epoch + 1``.
   No change: the current registration comes back unchanged and nothing is emitted.
"""

from __future__ import annotations

import enum
from collections.abc import Collection, Iterable, Sequence

import attrs

from replog.election.decision import Decision
from replog.election.state import ClusterView, PartitionRegistration, TopicPartition, format_ids
from replog.election.state_change import (
    DEFAULT_REQUESTER,
    Actor,
    StateChange,
    StateChangeKind,
    handled_request,
    transition_changes,
)
from replog.errors import ErrorCode, invariant
from replog.metadata.types import NO_LEADER, LeaderRecoveryState

__all__ = [
    "ElectionPolicy",
    "LeaderElectionStrategy",
    "PartitionChangeBuilder",
    "ReplicaAssignment",
    "UNCLEAN_ELECTION_NOTE",
    "create_partition",
]

#: how the leader's state-change record of an unclean election begins (metrics count them)
UNCLEAN_ELECTION_NOTE = "unclean election of"


class LeaderElectionStrategy(enum.Enum):
    """How a leader is chosen when the current one cannot (or should not) stay."""

    ONLINE = "online"
    """Keep a valid leader; else first valid in order; unclean only if allowed by config."""
    PREFERRED = "preferred"
    """Aim for ``replicas[0]``; otherwise as ONLINE but never unclean."""
    UNCLEAN = "unclean"
    """As ONLINE, with unclean election allowed whatever the config (an explicit admin request)."""
    REASSIGN = "reassign"
    """ZK reassignment: the first replica of the *target* that is valid; removing ones are not."""


@attrs.frozen(kw_only=True)
class ElectionPolicy:
    """The per-topic settings elections depend on (Kafka defaults: minISR 1, ELR off, unclean
    off). ``min_isr`` is min.insync.replicas; it matters to the ELR rules only."""

    min_isr: int = 1
    elr_enabled: bool = False
    unclean_allowed: bool = False
    #: KIP-966 balanced recovery: last-known ELR = the last known leader (module docstring)
    last_known_leader: bool = True

    def __attrs_post_init__(self) -> None:
        if self.min_isr < 1:
            raise ValueError(f"min_isr must be at least 1, got {self.min_isr}")


class _How(enum.Enum):
    KEPT = "kept"
    CLEAN = "clean"
    FROM_ELR = "elr"
    UNCLEAN = "unclean"
    LAST_KNOWN = "last_known"
    NONE = "none"


def _in_order(order: Iterable[int], members: Collection[int]) -> tuple[int, ...]:
    return tuple(r for r in order if r in members)


def _keep_if_same(old: tuple[int, ...], new: tuple[int, ...]) -> tuple[int, ...]:
    """Sets kept as tuples: an unchanged set keeps its old order (so it is not a change)."""
    return old if set(old) == set(new) else new


@attrs.frozen
class ReplicaAssignment:
    """Replicas in order plus the adding/removing subsets of an ongoing reassignment."""

    replicas: tuple[int, ...]
    adding: tuple[int, ...] = ()
    removing: tuple[int, ...] = ()

    @classmethod
    def of(cls, partition: PartitionRegistration) -> ReplicaAssignment:
        """The assignment a registration holds now."""
        return cls(partition.replicas, partition.adding_replicas, partition.removing_replicas)

    @classmethod
    def reassigning_to(cls, current: Sequence[int], target: Sequence[int]) -> ReplicaAssignment:
        """KRaft's merged assignment for moving ``current`` to ``target``: replicas = target then
        the removing ones; adding = target - current; removing = current - target."""
        target_t = tuple(target)
        removing = tuple(r for r in current if r not in target_t)
        adding = tuple(r for r in target_t if r not in current)
        return cls(target_t + removing, adding, removing)

    def maybe_complete(self, isr: tuple[int, ...]) -> tuple[ReplicaAssignment, tuple[int, ...]]:
        """The KRaft completion rule: returns (assignment, ISR) after completing, or unchanged."""
        if not (self.adding or self.removing):
            return self, isr
        new_isr = tuple(r for r in isr if r not in self.removing)
        new_replicas = tuple(r for r in self.replicas if r not in self.removing)
        if not new_isr or not set(new_replicas) <= set(new_isr):
            return self, isr
        return ReplicaAssignment(new_replicas), new_isr


@attrs.frozen(kw_only=True)
class PartitionChangeBuilder:
    """A requested change to one partition; ``build(now_ms)`` decides the next registration.

    Fields left at None keep the current value. ``requester`` names who asked (for the state
    changes). ``min_isr`` is the topic's min.insync.replicas, used by the ELR rules only.
    """

    topic_partition: TopicPartition
    partition: PartitionRegistration
    cluster: ClusterView
    requester: Actor = DEFAULT_REQUESTER
    min_isr: int = 1
    elr_enabled: bool = False
    unclean_allowed: bool = False
    last_known_leader: bool = True
    election: LeaderElectionStrategy = LeaderElectionStrategy.ONLINE
    target_isr: tuple[int, ...] | None = None
    target_assignment: ReplicaAssignment | None = None
    target_leader_recovery_state: LeaderRecoveryState | None = None
    unclean_shutdown_replicas: frozenset[int] = frozenset()
    force_leader_epoch_bump: bool = False
    complete_reassignment: bool = True

    @classmethod
    def for_partition(
        cls,
        topic_partition: TopicPartition,
        partition: PartitionRegistration,
        cluster: ClusterView,
        policy: ElectionPolicy,
        requester: Actor = DEFAULT_REQUESTER,
    ) -> PartitionChangeBuilder:
        """A builder that changes nothing yet, with the topic's ``policy``."""
        return cls(
            topic_partition=topic_partition,
            partition=partition,
            cluster=cluster,
            requester=requester,
            min_isr=policy.min_isr,
            elr_enabled=policy.elr_enabled,
            unclean_allowed=policy.unclean_allowed,
            last_known_leader=policy.last_known_leader,
        )

    def with_target_isr(self, isr: Iterable[int]) -> PartitionChangeBuilder:
        """The same request with a new target ISR."""
        return attrs.evolve(self, target_isr=tuple(isr))

    def with_target_replicas(self, target: Sequence[int]) -> PartitionChangeBuilder:
        """The same request, starting a reassignment of the current replicas to ``target``."""
        assignment = ReplicaAssignment.reassigning_to(self.partition.replicas, target)
        return attrs.evolve(self, target_assignment=assignment)

    def with_assignment(
        self, replicas: Sequence[int], adding: Sequence[int] = (), removing: Sequence[int] = ()
    ) -> PartitionChangeBuilder:
        """The same request with an explicit assignment (used to finish or revert a move)."""
        assignment = ReplicaAssignment(tuple(replicas), tuple(adding), tuple(removing))
        return attrs.evolve(self, target_assignment=assignment)

    def with_unclean_shutdown(self, *broker_ids: int) -> PartitionChangeBuilder:
        """The same request, noting brokers that restarted uncleanly (they leave the ELR)."""
        return attrs.evolve(
            self, unclean_shutdown_replicas=self.unclean_shutdown_replicas | set(broker_ids)
        )

    def with_election(self, election: LeaderElectionStrategy) -> PartitionChangeBuilder:
        """The same request with another election type."""
        return attrs.evolve(self, election=election)

    def build(self, now_ms: int) -> Decision:
        """The next registration and its state changes (see the module docstring for the rules).
        An unchanged outcome is the current registration itself, with no state changes."""
        old = self.partition
        assignment = self.target_assignment
        if assignment is None:
            assignment = ReplicaAssignment.of(old)
        requested = self.target_isr if self.target_isr is not None else old.isr
        isr = tuple(dict.fromkeys(r for r in requested if r in assignment.replicas))
        if self.complete_reassignment:
            assignment, isr = assignment.maybe_complete(isr)
        replicas = assignment.replicas
        election_isr = isr
        if not isr and not self.elr_enabled:
            isr = _in_order(old.isr, replicas)
        provisional_elr = self._next_elr(election_isr, replicas)
        leader, how = self._elect(assignment, election_isr, provisional_elr)
        recovery = self.target_leader_recovery_state
        if recovery is None:
            recovery = old.leader_recovery_state
        invariant(
            not (
                recovery is LeaderRecoveryState.RECOVERING
                and old.leader_recovery_state is LeaderRecoveryState.RECOVERED
            ),
            f"{self.topic_partition}: RECOVERED -> RECOVERING only through an unclean election",
        )
        unclean = how in (_How.UNCLEAN, _How.LAST_KNOWN)
        if unclean:
            isr, recovery = (leader,), LeaderRecoveryState.RECOVERING
        elif how is _How.FROM_ELR:
            isr = (leader,)
        elr, last_known_elr = self._final_elr(isr, replicas, leader, unclean=unclean)
        leader_field_set = (
            leader != old.leader
            or self.force_leader_epoch_bump
            or not set(old.replicas) <= set(replicas)
        )
        candidate = PartitionRegistration(
            replicas=replicas,
            isr=_keep_if_same(old.isr, _in_order(replicas, isr)),
            leader=leader,
            leader_epoch=old.leader_epoch + (1 if leader_field_set else 0),
            partition_epoch=old.partition_epoch,
            leader_recovery_state=recovery,
            elr=_keep_if_same(old.elr, elr),
            last_known_elr=_keep_if_same(old.last_known_elr, last_known_elr),
            adding_replicas=assignment.adding,
            removing_replicas=assignment.removing,
        )
        if candidate == old:
            return Decision(old, [])
        new = attrs.evolve(candidate, partition_epoch=old.partition_epoch + 1)
        invariant(new.leader_epoch >= old.leader_epoch, "leader epoch went backwards")
        return Decision(new, self._state_changes(old, new, how, now_ms))

    # -- the steps -------------------------------------------------------------------------

    def _next_elr(self, isr: tuple[int, ...], replicas: tuple[int, ...]) -> tuple[int, ...]:
        """KIP-966: ``(oldELR | oldISR) - ISR - uncleanShutdown``; empty when ISR >= minISR."""
        if not self.elr_enabled or len(isr) >= self.min_isr:
            return ()
        old = self.partition
        members = (set(old.elr) | set(old.isr)) - set(isr) - self.unclean_shutdown_replicas
        return _in_order(replicas, members)

    def _final_elr(
        self, isr: tuple[int, ...], replicas: tuple[int, ...], leader: int, *, unclean: bool
    ) -> tuple[tuple[int, ...], tuple[int, ...]]:
        """The ELR and last-known ELR for the final ISR and leader (module docstring, step 5).
        Without the last-known-leader mode, the last-known ELR keeps the replicas that were
        ISR/ELR members since the ISR fell below minISR but are no longer either (an unclean
        shutdown): they are the best unclean candidates."""
        old = self.partition
        if not self.elr_enabled:
            return (), ()
        elr = () if unclean or len(isr) >= self.min_isr else self._next_elr(isr, replicas)
        if self.last_known_leader:
            if leader == NO_LEADER and old.leader != NO_LEADER:
                return elr, (old.leader,)  # the partition goes leaderless: remember who led
            return elr, () if leader != NO_LEADER else old.last_known_elr
        if unclean or len(isr) >= self.min_isr:
            return (), ()
        seen = set(old.last_known_elr) | set(old.elr) | set(old.isr)
        return elr, _in_order(replicas, seen - set(isr) - set(elr))

    def _elect(
        self, assignment: ReplicaAssignment, isr: tuple[int, ...], elr: tuple[int, ...]
    ) -> tuple[int, _How]:
        old = self.partition
        excluded = (
            set(assignment.removing) if self.election is LeaderElectionStrategy.REASSIGN else set()
        )
        order = [r for r in assignment.replicas if r not in excluded]

        def acceptable(broker: int) -> bool:
            return broker in order and self.cluster.is_acceptable_leader(broker)

        def valid(broker: int) -> bool:
            in_sync = broker in isr if isr else broker in elr
            return acceptable(broker) and in_sync

        if self.election is LeaderElectionStrategy.PREFERRED:
            candidates = [assignment.replicas[0], old.leader, *order]
        else:
            candidates = [old.leader, *order]
        for broker in candidates:
            if broker != NO_LEADER and valid(broker):
                if not isr:
                    return broker, _How.FROM_ELR
                return broker, _How.KEPT if broker == old.leader else _How.CLEAN
        last_known = old.last_known_elr
        if (
            self.elr_enabled
            and self.last_known_leader
            and not isr
            and not elr
            and len(last_known) == 1
            and acceptable(last_known[0])
        ):
            return last_known[0], _How.LAST_KNOWN
        unclean = self.unclean_allowed or self.election is LeaderElectionStrategy.UNCLEAN
        if unclean and self.election is not LeaderElectionStrategy.PREFERRED:
            last_known = old.last_known_elr if self.elr_enabled else ()
            for broker in [*last_known, *order]:
                if acceptable(broker):
                    return broker, _How.UNCLEAN
        return NO_LEADER, _How.NONE

    def _state_changes(
        self, old: PartitionRegistration, new: PartitionRegistration, how: _How, now_ms: int
    ) -> list[StateChange]:
        note = ""
        if how is _How.LAST_KNOWN:
            note = (
                f"elected the last known leader {new.leader} (balanced recovery): ISR and ELR"
                f" are empty; records it lost in an unclean restart may be lost"
            )
        elif how is _How.UNCLEAN:
            lost = sorted(set(old.isr) | set(old.elr))
            note = (
                f"{UNCLEAN_ELECTION_NOTE} {new.leader}: records only on {format_ids(lost)} may be"
                f" lost (previous leader {old.leader}, leader epoch {old.leader_epoch})"
            )
        elif how is _How.FROM_ELR:
            note = f"elected {new.leader} from the eligible leader replicas"
        return transition_changes(self.topic_partition, old, new, self.requester, now_ms, note)


def create_partition(
    topic_partition: TopicPartition,
    replicas: Sequence[int],
    cluster: ClusterView,
    *,
    now_ms: int,
    requester: Actor = DEFAULT_REQUESTER,
) -> Decision:
    """The first registration of a new partition: ISR = the acceptable replicas (assignment
    order), leader = the first of them, epochs 0/0. INVALID_REPLICA_ASSIGNMENT for an empty or
    duplicated assignment or an unregistered broker; INVALID_REPLICATION_FACTOR when no replica
    is acceptable (every one fenced or shutting down)."""
    error = ErrorCode.NONE
    distinct = bool(replicas) and len(set(replicas)) == len(replicas)
    if not distinct or any(cluster.broker(r) is None for r in replicas):
        error = ErrorCode.INVALID_REPLICA_ASSIGNMENT
    isr = tuple(r for r in replicas if cluster.is_acceptable_leader(r))
    if error is ErrorCode.NONE and not isr:
        error = ErrorCode.INVALID_REPLICATION_FACTOR
    if error is not ErrorCode.NONE:
        record = handled_request(
            StateChangeKind.CREATE_PARTITION,
            topic_partition,
            requester=requester,
            handler=requester,
            registration=None,
            requested_ms=now_ms,
            now_ms=now_ms,
            error=error,
            detail=f"replicas={format_ids(replicas)}",
        )
        return Decision(error, [record])
    registration = PartitionRegistration(replicas=tuple(replicas), isr=isr, leader=isr[0])
    return Decision(
        registration, transition_changes(topic_partition, None, registration, requester, now_ms)
    )
