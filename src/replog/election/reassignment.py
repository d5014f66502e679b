"""Partition reassignment as explicit steps (the ZK controller's; KIP-455 vocabulary).

Moving a partition from its original replicas (OAR) to the reassigned ones (RAR) goes through
these steps; each call of ``next_reassignment_step`` takes the partition one step further (or
says it must wait), so the driver can persist every intermediate registration and a new
controller can resume from whatever was written last:

=============  ================================================  =========================
step           what happens                                      AR, leader/ISR afterwards
=============  ================================================  =========================
(start state)                                                    {1,2,3}  1/{1,2,3}
START          AR = RAR + (OAR - RAR), adding/removing recorded,  {1..6}   1/{1,2,3}
               leader epoch bumped, new replicas started
EXPAND_ISR     caught-up replicas of RAR join the ISR (what the   {1..6}   1/{1..6}
               leader's AlterPartition does in a live cluster)
ELECT_LEADER   leader not in RAR (or not acceptable): the first  {1..6}   4/{1..6}
               of RAR in order that is valid becomes leader
SHRINK_ISR     OAR - RAR leave the ISR                           {1..6}   4/{4,5,6}
COMPLETE       AR = RAR; OAR - RAR stopped and deleted           {4,5,6}  4/{4,5,6}
=============  ================================================  =========================

WAIT means nothing can happen until more of RAR catches up (or a leader becomes available);
DONE means the partition is already at its target. The KRaft builder would collapse EXPAND_ISR..
COMPLETE into one record (its completion rule); here completion is switched off so that each
step of the table above is one registration.

``cancel_reassignment`` reverts to OAR: the adding replicas leave the assignment and the ISR. If
no original replica is left in the ISR, reverting needs an unclean election, so it is refused
(INVALID_REPLICA_ASSIGNMENT) unless unclean election is allowed.
"""

from __future__ import annotations

import enum
from collections.abc import Collection, Sequence

import attrs

from replog.election.decision import Decision
from replog.election.partition_change import (
    ElectionPolicy,
    LeaderElectionStrategy,
    PartitionChangeBuilder,
    ReplicaAssignment,
)
from replog.election.state import ClusterView, PartitionRegistration, TopicPartition, format_ids
from replog.election.state_change import (
    DEFAULT_REQUESTER,
    Actor,
    StateChange,
    StateChangeKind,
    handled_request,
)
from replog.errors import ErrorCode
from replog.metadata.types import LeaderRecoveryState

__all__ = [
    "ReassignmentProgress",
    "ReassignmentStep",
    "cancel_reassignment",
    "next_reassignment_step",
]


class ReassignmentStep(enum.Enum):
    """The seed-001 steps of a reassignment (see the module docstring)."""

    START = "start"
    EXPAND_ISR = "expand-isr"
    ELECT_LEADER = "elect-leader"
    SHRINK_ISR = "shrink-isr"
    COMPLETE = "complete"
    WAIT = "wait"
    DONE = "done"


@attrs.frozen
class ReassignmentProgress:
    """The step taken and its decision: the registration after it (unchanged for WAIT/DONE),
    or an error code when the request or the step is refused."""

    step: ReassignmentStep
    decision: Decision

    @property
    def registration(self) -> PartitionRegistration:
        """The registration after this step."""
        return self.decision.registration


def _reject(
    step: ReassignmentStep,
    tp: TopicPartition,
    current: PartitionRegistration,
    error: ErrorCode,
    requester: Actor,
    now_ms: int,
    detail: str,
    kind: StateChangeKind = StateChangeKind.REASSIGN_PARTITION,
) -> ReassignmentProgress:
    record = handled_request(
        kind,
        tp,
        requester=requester,
        handler=requester,
        registration=current,
        requested_ms=now_ms,
        now_ms=now_ms,
        error=error,
        detail=detail,
    )
    return ReassignmentProgress(step, Decision(error, [record]))


def _target_error(
    current: PartitionRegistration, target: Sequence[int], cluster: ClusterView
) -> ErrorCode:
    if not target or len(set(target)) != len(target):
        return ErrorCode.INVALID_REPLICA_ASSIGNMENT
    if any(cluster.broker(r) is None for r in target):
        return ErrorCode.INVALID_REPLICA_ASSIGNMENT
    if current.is_reassigning and tuple(target) != current.target_replicas:
        return ErrorCode.REASSIGNMENT_IN_PROGRESS
    return ErrorCode.NONE


def next_reassignment_step(
    topic_partition: TopicPartition,
    current: PartitionRegistration,
    target: Sequence[int],
    cluster: ClusterView,
    *,
    caught_up: Collection[int],
    policy: ElectionPolicy,
    now_ms: int,
    requester: Actor = DEFAULT_REQUESTER,
) -> ReassignmentProgress:
    """The next step moving ``current`` to the replicas ``target`` (in preferred order).

    ``caught_up`` names the replicas the leader reports as caught up (they may join the ISR if
    eligible, and only while the partition has a serving leader). A target that differs from
    an ongoing reassignment's is refused with REASSIGNMENT_IN_PROGRESS (cancel first); an
    empty, duplicated or unknown-broker target with INVALID_REPLICA_ASSIGNMENT.
    """
    error = _target_error(current, target, cluster)
    detail = f"target={format_ids(target)}"
    if error is not ErrorCode.NONE:
        return _reject(
            ReassignmentStep.START, topic_partition, current, error, requester, now_ms, detail
        )
    base = attrs.evolve(
        PartitionChangeBuilder.for_partition(topic_partition, current, cluster, policy, requester),
        complete_reassignment=False,
    )
    target_t = tuple(target)
    if not current.is_reassigning:
        if current.replicas == target_t:
            return ReassignmentProgress(ReassignmentStep.DONE, Decision(current, []))
        assignment = ReplicaAssignment.reassigning_to(current.replicas, target_t)
        builder = attrs.evolve(base, target_assignment=assignment, force_leader_epoch_bump=True)
        return _step(ReassignmentStep.START, builder, now_ms, detail)
    isr = set(current.isr)
    missing = [r for r in target_t if r not in isr]
    if missing:
        # Only a serving leader can vouch that a replica caught up (it is the leader's
        # AlterPartition in a live cluster), and a RECOVERING leader may not grow its ISR.
        joining = [r for r in missing if r in caught_up and cluster.is_isr_eligible(r)]
        leader_serving = cluster.is_acceptable_leader(current.leader)
        recovering = current.leader_recovery_state is LeaderRecoveryState.RECOVERING
        if not joining or not leader_serving or recovering:
            return ReassignmentProgress(ReassignmentStep.WAIT, Decision(current, []))
        builder = base.with_target_isr((*current.isr, *joining))
        return _step(ReassignmentStep.EXPAND_ISR, builder, now_ms, detail)
    if current.leader not in target_t or not cluster.is_acceptable_leader(current.leader):
        builder = base.with_election(LeaderElectionStrategy.REASSIGN)
        progress = _step(ReassignmentStep.ELECT_LEADER, builder, now_ms, detail)
        if progress.decision.ok and not progress.registration.has_leader:
            return _reject(
                ReassignmentStep.ELECT_LEADER,
                topic_partition,
                current,
                ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE,
                requester,
                now_ms,
                detail,
            )
        if progress.registration == current:
            return ReassignmentProgress(ReassignmentStep.WAIT, Decision(current, []))
        return progress
    removing = set(current.removing_replicas)
    if isr & removing:
        builder = base.with_target_isr(r for r in current.isr if r not in removing)
        return _step(ReassignmentStep.SHRINK_ISR, builder, now_ms, detail)
    return _step(ReassignmentStep.COMPLETE, base.with_assignment(target_t), now_ms, detail)


def _step(
    step: ReassignmentStep, builder: PartitionChangeBuilder, now_ms: int, detail: str
) -> ReassignmentProgress:
    outcome, changes = builder.build(now_ms)
    record = handled_request(
        StateChangeKind.REASSIGN_PARTITION,
        builder.topic_partition,
        requester=builder.requester,
        handler=builder.requester,
        registration=outcome if isinstance(outcome, PartitionRegistration) else None,
        requested_ms=now_ms,
        now_ms=now_ms,
        detail=f"{step.value}; {detail}",
    )
    records: list[StateChange] = [record, *changes] if changes else []
    return ReassignmentProgress(step, Decision(outcome, records))


def cancel_reassignment(
    topic_partition: TopicPartition,
    current: PartitionRegistration,
    cluster: ClusterView,
    *,
    policy: ElectionPolicy,
    now_ms: int,
    requester: Actor = DEFAULT_REQUESTER,
) -> Decision:
    """Revert an ongoing reassignment to the original replicas (OAR = replicas - adding).

    NO_REASSIGNMENT_IN_PROGRESS when there is none; INVALID_REPLICA_ASSIGNMENT when no original
    replica is in the ISR and unclean election is not allowed (reverting would lose data).
    Otherwise the adding replicas leave the assignment and the ISR (they are stopped and
    deleted); the leader is re-elected among the original replicas if it was a new one."""
    kind = StateChangeKind.CANCEL_REASSIGNMENT
    if not current.is_reassigning:
        return _reject(
            ReassignmentStep.DONE,
            topic_partition,
            current,
            ErrorCode.NO_REASSIGNMENT_IN_PROGRESS,
            requester,
            now_ms,
            "",
            kind,
        ).decision
    original = current.original_replicas
    revert_isr = tuple(r for r in current.isr if r in original)
    unclean = not revert_isr
    if unclean and not policy.unclean_allowed:
        return _reject(
            ReassignmentStep.DONE,
            topic_partition,
            current,
            ErrorCode.INVALID_REPLICA_ASSIGNMENT,
            requester,
            now_ms,
            "reverting needs an unclean election: no original replica is in the ISR",
            kind,
        ).decision
    builder = (
        PartitionChangeBuilder.for_partition(topic_partition, current, cluster, policy, requester)
        .with_assignment(original)
        .with_target_isr(revert_isr)
        .with_election(LeaderElectionStrategy.UNCLEAN if unclean else LeaderElectionStrategy.ONLINE)
    )
    outcome, changes = builder.build(now_ms)
    record = handled_request(
        kind,
        topic_partition,
        requester=requester,
        handler=requester,
        registration=outcome if isinstance(outcome, PartitionRegistration) else current,
        requested_ms=now_ms,
        now_ms=now_ms,
        detail=f"revert to {format_ids(original)}" + (" (unclean)" if unclean else ""),
    )
    return Decision(outcome, [record, *changes])
