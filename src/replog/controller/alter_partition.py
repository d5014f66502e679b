"""The AlterPartition channel between partition leaders and the controller (see the package
docstring): leader request -> queued ``AlterPartition`` payload -> completion -> leader
response."""

from __future__ import annotations

from replog.coord.contract import Coordinator
from replog.coord.types import (
    CONTROLLER_TARGET,
    AdminRequest,
    AdminRequestChanged,
    AdminRequestChangeReason,
    AlterPartition,
    LeaderRecoveryState,
)
from replog.election.controller_writes import parse_alter_partition_result
from replog.isr.messages import AlterPartitionRequest, AlterPartitionResponse

__all__ = ["alter_partition_payload", "alter_partition_response", "submit_alter_partition"]


def alter_partition_payload(
    request: AlterPartitionRequest,
    *,
    leader_broker_epoch: int = -1,
    leader_recovery_state: LeaderRecoveryState = LeaderRecoveryState.RECOVERED,
) -> AlterPartition:
    """The admin payload carrying a leader's proposal (``leader_broker_epoch``: the leader's
    own incarnation, checked by the controller unless -1)."""
    return AlterPartition(
        topic=request.topic,
        partition=request.partition,
        leader_id=request.leader_id,
        leader_epoch=request.leader_epoch,
        partition_epoch=request.partition_epoch,
        new_isr=tuple((m.broker_id, m.broker_epoch) for m in request.new_isr),
        leader_broker_epoch=leader_broker_epoch,
        leader_recovery_state=leader_recovery_state,
    )


def submit_alter_partition(
    coordinator: Coordinator,
    request: AlterPartitionRequest,
    *,
    leader_broker_epoch: int = -1,
    timeout_ms: int | None = None,
) -> AdminRequest:
    """Queue a leader's proposal for whichever broker is (or will be) the controller."""
    payload = alter_partition_payload(request, leader_broker_epoch=leader_broker_epoch)
    return coordinator.submit_admin_request(CONTROLLER_TARGET, payload, timeout_ms=timeout_ms)


def alter_partition_response(change: AdminRequestChanged) -> AlterPartitionResponse:
    """The leader's view of a completed AlterPartition request."""
    if change.reason is not AdminRequestChangeReason.COMPLETED or not isinstance(
        change.request.payload, AlterPartition
    ):
        raise ValueError(f"not a completed AlterPartition request: {change}")
    result = parse_alter_partition_result(change.outcome, change.message)
    return AlterPartitionResponse(
        error_code=result.error,
        leader_epoch=result.leader_epoch,
        partition_epoch=result.partition_epoch,
        isr=frozenset(result.isr),
    )
