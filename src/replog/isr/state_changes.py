"""The state-change records a partition replica writes, its part of a change's life from request to
completion: a change it acted on (COMPLETED, or REJECTED with an error) and an ISR change a leader
proposes (REQUESTED). The controller that asked is not known at this layer: ``controller -1``."""

from __future__ import annotations

from typing import NamedTuple

from replog.errors import ErrorCode
from replog.state_change import Actor, StateChange
from replog.state_change import StateChangeKind as Kind
from replog.topics import TopicPartition

__all__ = ["PartitionAt", "acted_on", "proposed"]


class PartitionAt(NamedTuple):
    """Which replica of which partition, at which epochs and time, a record is about."""

    topic_partition: TopicPartition
    broker_id: int
    leader_epoch: int
    partition_epoch: int
    now_ms: int


def acted_on(
    where: PartitionAt,
    kind: Kind,
    detail: str,
    *,
    error: ErrorCode = ErrorCode.NONE,
    as_leader: bool = False,
) -> StateChange:
    """A change the replica completed (or refused: ``error``), as the partition's leader
    answering its own proposal (``as_leader``) or as the broker acting on metadata."""
    me = Actor.leader(where.broker_id) if as_leader else Actor.broker(where.broker_id)
    record = StateChange(
        kind=kind,
        topic_partition=where.topic_partition,
        requester=Actor.controller(-1),
        target=me,
        leader_epoch=where.leader_epoch,
        partition_epoch=where.partition_epoch,
        requested_ms=where.now_ms,
        detail=detail,
    )
    if error is ErrorCode.NONE:
        return record.completed(where.now_ms)
    return record.rejected(where.now_ms, error)


def proposed(where: PartitionAt, detail: str) -> StateChange:
    """An ISR change the leader proposes to the controller (REQUESTED)."""
    return StateChange(
        kind=Kind.ALTER_PARTITION,
        topic_partition=where.topic_partition,
        requester=Actor.leader(where.broker_id),
        target=Actor.controller(-1),
        leader_epoch=where.leader_epoch,
        partition_epoch=where.partition_epoch,
        requested_ms=where.now_ms,
        detail=detail,
    )
