"""AlterPartition: the controller's side of a leader's ISR change proposal (KIP-497/841/903/704).

A leader proposes a new ISR (each member with the broker epoch it last saw, KIP-903) together
with the leader epoch and partition epoch it holds. The controller checks, in this order (§6
"AlterPartition validation"):

0. the sender's own broker epoch is stale (not -1 and not its current incarnation)
   -> STALE_BROKER_EPOCH (a request-level check, so it comes before any partition is looked at);
1. unknown partition -> UNKNOWN_TOPIC_OR_PARTITION;
2. leader epoch or partition epoch *newer* than the controller's -> NOT_CONTROLLER;
3. leader epoch older -> FENCED_LEADER_EPOCH;
4. sender is not the leader -> INVALID_REQUEST;
   (ZK-style idempotence: a proposal equal to the current state succeeds with the current state,
   even with an older partition epoch, so a retry of an applied request is not an error;)
5. partition epoch older -> INVALID_UPDATE_VERSION;
6. ISR not within the replicas, or without the leader -> INVALID_REQUEST;
7. RECOVERING with an ISR larger than 1, or RECOVERED -> RECOVERING -> INVALID_REQUEST;
8. a member that is fenced, shutting down, unknown, or carries a stale broker epoch
   -> INELIGIBLE_REPLICA.

A valid proposal goes through the ``PartitionChangeBuilder`` (ELR maintenance, and the KRaft
reassignment completion, which may move leadership: the response is then NEW_LEADER_ELECTED,
see ``response_error``).
"""

from __future__ import annotations

from collections.abc import Iterable

import attrs

from replog.election.decision import Decision
from replog.election.partition_change import ElectionPolicy, PartitionChangeBuilder
from replog.election.state import (
    ClusterView,
    LeaderRecoveryState,
    PartitionRegistration,
    TopicPartition,
    format_ids,
)
from replog.election.state_change import (
    DEFAULT_REQUESTER,
    Actor,
    StateChange,
    StateChangeKind,
    handled_request,
)
from replog.errors import ErrorCode, unreachable

__all__ = [
    "AlterPartitionRequest",
    "IsrMember",
    "handle_alter_partition",
    "response_error",
]


@attrs.frozen
class IsrMember:
    """A proposed ISR member and the broker epoch the leader saw it fetch with (-1: unknown)."""

    broker_id: int
    broker_epoch: int = -1


def _members(values: Iterable[IsrMember | int]) -> tuple[IsrMember, ...]:
    return tuple(v if isinstance(v, IsrMember) else IsrMember(int(v)) for v in values)


@attrs.frozen(kw_only=True)
class AlterPartitionRequest:
    """One partition of an AlterPartition request. ``broker_id``/``broker_epoch`` identify the
    sender; ``requested_ms`` is when the leader sent it (for the state-change record)."""

    topic_partition: TopicPartition
    broker_id: int
    leader_epoch: int
    partition_epoch: int
    new_isr: tuple[IsrMember, ...] = attrs.field(converter=_members)
    leader_recovery_state: LeaderRecoveryState = LeaderRecoveryState.RECOVERED
    broker_epoch: int = -1
    requested_ms: int = 0

    @property
    def isr_ids(self) -> tuple[int, ...]:
        """The proposed ISR as broker ids, in the order proposed."""
        return tuple(m.broker_id for m in self.new_isr)


def _validate(
    request: AlterPartitionRequest, current: PartitionRegistration | None, cluster: ClusterView
) -> ErrorCode | None:
    """The error for ``request`` (steps 0-8), ``ErrorCode.NONE`` for an idempotent retry that
    matches the current state, or None when the proposal is valid and must be built."""
    sender = cluster.broker(request.broker_id)
    if request.broker_epoch != -1 and (
        sender is None or sender.broker_epoch != request.broker_epoch
    ):
        return ErrorCode.STALE_BROKER_EPOCH
    if current is None:
        return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    if (
        request.leader_epoch > current.leader_epoch
        or request.partition_epoch > current.partition_epoch
    ):
        return ErrorCode.NOT_CONTROLLER
    if request.leader_epoch < current.leader_epoch:
        return ErrorCode.FENCED_LEADER_EPOCH
    if request.broker_id != current.leader:
        return ErrorCode.INVALID_REQUEST
    ids = request.isr_ids
    if (
        set(ids) == set(current.isr)
        and len(set(ids)) == len(ids)
        and request.leader_recovery_state is current.leader_recovery_state
    ):
        return ErrorCode.NONE
    if request.partition_epoch < current.partition_epoch:
        return ErrorCode.INVALID_UPDATE_VERSION
    if (
        len(set(ids)) != len(ids)
        or not set(ids) <= set(current.replicas)
        or current.leader not in ids
    ):
        return ErrorCode.INVALID_REQUEST
    recovering = LeaderRecoveryState.RECOVERING
    if request.leader_recovery_state is recovering and (
        len(ids) > 1 or current.leader_recovery_state is LeaderRecoveryState.RECOVERED
    ):
        return ErrorCode.INVALID_REQUEST
    if any(not cluster.is_isr_eligible(m.broker_id, m.broker_epoch) for m in request.new_isr):
        return ErrorCode.INELIGIBLE_REPLICA
    return None


def handle_alter_partition(
    request: AlterPartitionRequest,
    current: PartitionRegistration | None,
    cluster: ClusterView,
    *,
    policy: ElectionPolicy,
    now_ms: int,
    controller: Actor = DEFAULT_REQUESTER,
    complete_reassignment: bool = True,
) -> Decision:
    """Validate ``request`` against ``current`` (None: unknown partition) and decide.

    Returns the new registration (or the current one for an idempotent retry) or the error
    code; the state changes start with the alter-partition record (COMPLETED or REJECTED)."""
    error = _validate(request, current, cluster)
    proposed = f"proposed isr={format_ids(request.isr_ids)}"
    if request.leader_recovery_state is LeaderRecoveryState.RECOVERING:
        proposed += " RECOVERING"

    def record(registration: PartitionRegistration | None, code: ErrorCode) -> list[StateChange]:
        return [
            handled_request(
                StateChangeKind.ALTER_PARTITION,
                request.topic_partition,
                requester=Actor.leader(request.broker_id),
                handler=controller,
                registration=registration,
                requested_ms=request.requested_ms,
                now_ms=now_ms,
                error=code,
                detail=proposed,
            )
        ]

    if error is not None and error is not ErrorCode.NONE:
        return Decision(error, record(current, error))
    if current is None:
        unreachable("_validate accepted an AlterPartition for an unknown partition")
    if error is ErrorCode.NONE:  # an idempotent retry: answer with the current state
        return Decision(current, record(current, ErrorCode.NONE))
    builder = attrs.evolve(
        PartitionChangeBuilder.for_partition(
            request.topic_partition, current, cluster, policy, controller
        ),
        target_leader_recovery_state=request.leader_recovery_state,
        complete_reassignment=complete_reassignment,
    ).with_target_isr(request.isr_ids)
    built = builder.build(now_ms)  # the builder always yields a registration
    return Decision(built.outcome, record(built.registration, ErrorCode.NONE) + built.state_changes)


def response_error(request: AlterPartitionRequest, decision: Decision) -> ErrorCode:
    """The error code the AlterPartition response carries: the decision's error; else
    NEW_LEADER_ELECTED when the change moved leadership off the sender (a reassignment that
    completed as a side effect); else NONE."""
    if not decision.ok:
        return decision.error
    if decision.registration.leader != request.broker_id:
        return ErrorCode.NEW_LEADER_ELECTED
    return ErrorCode.NONE
