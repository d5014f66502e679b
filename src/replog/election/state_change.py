"""The state changes a controller decision implies, as ``replog.state_change`` records (the
controller's part of each change's life; the brokers record the rest): ``transition_changes``
for a partition's move from one registration to the next, ``handled_request`` for a request
the controller handled."""

from __future__ import annotations

from replog.election.state import PartitionRegistration, TopicPartition
from replog.errors import ErrorCode
from replog.metadata.types import NO_LEADER
from replog.state_change import (
    DEFAULT_REQUESTER,
    Actor,
    Phase,
    Role,
    StateChange,
    StateChangeKind,
    parse_log_line,
)

__all__ = [
    "DEFAULT_REQUESTER",
    "Actor",
    "Phase",
    "Role",
    "StateChange",
    "StateChangeKind",
    "handled_request",
    "parse_log_line",
    "transition_changes",
]


def transition_changes(
    topic_partition: TopicPartition,
    old: PartitionRegistration | None,
    new: PartitionRegistration,
    requester: Actor,
    now_ms: int,
    note: str = "",
) -> list[StateChange]:
    """The requests a controller sends for the move ``old`` -> ``new`` (``old`` None: created).

    New replicas get start-replica; a set leader field gives become-leader to the leader and
    become-follower to every other replica (or partition-offline when the leader is -1); any
    other change goes to the leader as isr-change (ISR/ELR/recovery only) or update-partition;
    replicas dropped from the assignment get stop-replica (their data is deleted). ``note``
    goes into the leader's (or offline) record, e.g. what an unclean election may have lost.
    """
    detail = new.describe() + (f"; {note}" if note else "")

    def change(kind: StateChangeKind, target: int | None, text: str = detail) -> StateChange:
        return StateChange(
            kind=kind,
            topic_partition=topic_partition,
            requester=requester,
            target=None if target is None else Actor.broker(target),
            leader_epoch=new.leader_epoch,
            partition_epoch=new.partition_epoch,
            requested_ms=now_ms,
            detail=text,
        )

    old_replicas = () if old is None else old.replicas
    out = [change(StateChangeKind.START_REPLICA, r) for r in new.replicas if r not in old_replicas]
    leader_set = old is None or new.leader_epoch != old.leader_epoch
    if leader_set and new.leader == NO_LEADER:
        out.append(change(StateChangeKind.PARTITION_OFFLINE, None))
    elif leader_set:
        out.append(change(StateChangeKind.BECOME_LEADER, new.leader))
        out.extend(
            change(StateChangeKind.BECOME_FOLLOWER, r, new.describe())
            for r in new.replicas
            if r != new.leader
        )
    elif old is not None:
        same_assignment = (old.replicas, old.adding_replicas, old.removing_replicas) == (
            new.replicas,
            new.adding_replicas,
            new.removing_replicas,
        )
        kind = StateChangeKind.ISR_CHANGE if same_assignment else StateChangeKind.UPDATE_PARTITION
        out.append(change(kind, new.leader if new.has_leader else None))
    out.extend(
        change(StateChangeKind.STOP_REPLICA, r, f"delete=true; {new.describe()}")
        for r in old_replicas
        if r not in new.replicas
    )
    return out


def handled_request(
    kind: StateChangeKind,
    topic_partition: TopicPartition,
    *,
    requester: Actor,
    handler: Actor,
    registration: PartitionRegistration | None,
    requested_ms: int,
    now_ms: int,
    error: ErrorCode = ErrorCode.NONE,
    detail: str = "",
) -> StateChange:
    """The record of a request the controller handled at ``now_ms``: COMPLETED, or REJECTED with
    ``error``. Epochs are those of ``registration`` (the resulting or current one; -1 if none)."""
    record = StateChange(
        kind=kind,
        topic_partition=topic_partition,
        requester=requester,
        target=handler,
        leader_epoch=-1 if registration is None else registration.leader_epoch,
        partition_epoch=-1 if registration is None else registration.partition_epoch,
        requested_ms=min(requested_ms, now_ms),
        detail=detail,
    )
    if error is ErrorCode.NONE:
        return record.completed(now_ms)
    return record.rejected(now_ms, error)
