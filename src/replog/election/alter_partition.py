"""AlterPartition: the controller's side of a leader's ISR change proposal (KIP-497/841/903/704).

A leader proposes a new ISR (each member with the broker epoch it last saw, KIP-903) together
with the leader epoch and partition epoch it holds. The controller checks, in this order (KRaft's
``validateAlterPartitionData``, plus the request-level check first):

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

The request is ``replog.metadata.types.AlterPartition``, the value the leader's partition machine
made and the broker queued: ``leader_id`` / ``leader_broker_epoch`` identify the sender.
"""

from __future__ import annotations

import attrs

from replog.election.decision import Decision
from replog.election.partition_change import ElectionPolicy, PartitionChangeBuilder
from replog.election.state import ClusterView, PartitionRegistration, format_ids
from replog.election.state_change import (
    DEFAULT_REQUESTER,
    Actor,
    StateChange,
    StateChangeKind,
    handled_request,
)
from replog.errors import ErrorCode, unreachable
from replog.metadata.types import AlterPartition, LeaderRecoveryState

__all__ = ["handle_alter_partition", "response_error"]


def _validate(
    request: AlterPartition, current: PartitionRegistration | None, cluster: ClusterView
) -> ErrorCode | None:
    """The error for ``request`` (steps 0-8), ``ErrorCode.NONE`` for an idempotent retry that
    matches the current state, or None when the proposal is valid and must be built."""
    sender = cluster.broker(request.leader_id)
    if request.leader_broker_epoch != -1 and (
        sender is None or sender.broker_epoch != request.leader_broker_epoch
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
    if request.leader_id != current.leader:
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
    request: AlterPartition,
    current: PartitionRegistration | None,
    cluster: ClusterView,
    *,
    policy: ElectionPolicy,
    now_ms: int,
    requested_ms: int | None = None,
    controller: Actor = DEFAULT_REQUESTER,
    complete_reassignment: bool = True,
) -> Decision:
    """Validate ``request`` against ``current`` (None: unknown partition) and decide.

    Returns the new registration (or the current one for an idempotent retry) or the error
    code; the state changes start with the alter-partition record (COMPLETED or REJECTED),
    which says the leader asked at ``requested_ms`` (default: ``now_ms``)."""
    error = _validate(request, current, cluster)
    proposed = f"proposed isr={format_ids(request.isr_ids)}"
    if request.leader_recovery_state is LeaderRecoveryState.RECOVERING:
        proposed += " RECOVERING"

    def record(registration: PartitionRegistration | None, code: ErrorCode) -> list[StateChange]:
        return [
            handled_request(
                StateChangeKind.ALTER_PARTITION,
                request.topic_partition,
                requester=Actor.leader(request.leader_id),
                handler=controller,
                registration=registration,
                requested_ms=now_ms if requested_ms is None else requested_ms,
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


def response_error(request: AlterPartition, decision: Decision) -> ErrorCode:
    """The error code the AlterPartition response carries: the decision's error; else
    NEW_LEADER_ELECTED when the change moved leadership off the sender (a reassignment that
    completed as a side effect); else NONE."""
    if not decision.ok:
        return decision.error
    if decision.registration.leader != request.leader_id:
        return ErrorCode.NEW_LEADER_ELECTED
    return ErrorCode.NONE
