"""The AlterPartition channel between partition leaders and the controller (see the package
docstring): the leader's ``AlterPartition`` is queued as it is -> the controller completes the
admin request with an ``AlterPartitionResult`` -> the leader takes that result back."""

from __future__ import annotations

from replog.coord.contract import Coordinator
from replog.metadata.types import (
    CONTROLLER_TARGET,
    AdminRequest,
    AdminRequestChanged,
    AdminRequestChangeReason,
    AlterPartition,
    AlterPartitionResult,
)

__all__ = ["alter_partition_result", "submit_alter_partition"]


def submit_alter_partition(
    coordinator: Coordinator, request: AlterPartition, *, timeout_ms: int | None = None
) -> AdminRequest:
    """Queue a leader's proposal for whichever broker is (or will be) the controller."""
    return coordinator.submit_admin_request(CONTROLLER_TARGET, request, timeout_ms=timeout_ms)


def alter_partition_result(change: AdminRequestChanged) -> AlterPartitionResult:
    """The leader's view of a completed AlterPartition request: the controller's result, or
    the outcome alone for a completion that carries none (a request dropped unhandled, e.g.
    superseded in a full queue)."""
    if change.reason is not AdminRequestChangeReason.COMPLETED or not isinstance(
        change.request.payload, AlterPartition
    ):
        raise ValueError(f"not a completed AlterPartition request: {change}")
    if change.result is None:
        return AlterPartitionResult(change.outcome)
    return change.result
