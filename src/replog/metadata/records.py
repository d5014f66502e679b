"""Builders of the change-feed records each kind of write appends, shared by every backend, so
what a write puts in the feed is decided in one place. Each takes the write's ``seq`` and
returns the records of that one atomic write, in feed order."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from replog.errors import ErrorCode
from replog.metadata.types import (
    AdminRequest,
    AdminRequestChanged,
    AdminRequestChangeReason,
    AlterPartitionResult,
    BrokerChanged,
    BrokerChangeReason,
    BrokerConfigsChanged,
    BrokerInfo,
    ControllerChanged,
    ControllerInfo,
    MetadataChange,
    PartitionChanged,
    PartitionState,
    TopicAssignment,
    TopicChanged,
    TopicChangeReason,
    TopicConfigs,
)

__all__ = [
    "admin_completed",
    "admin_submitted",
    "broker_configs_altered",
    "broker_gone",
    "broker_registered",
    "broker_updated",
    "controller_changed",
    "partition_changed",
    "partitions_added",
    "topic_configs_altered",
    "topic_created",
    "topic_deleted",
]


def broker_registered(seq: int, broker: BrokerInfo) -> list[MetadataChange]:
    """``register_broker``: BrokerChanged(REGISTERED)."""
    return [
        BrokerChanged(
            seq=seq,
            reason=BrokerChangeReason.REGISTERED,
            broker_id=broker.broker_id,
            incarnation_epoch=broker.incarnation_epoch,
            broker=broker,
        )
    ]


def broker_updated(seq: int, broker: BrokerInfo) -> list[MetadataChange]:
    """``update_broker`` that changed a flag: BrokerChanged(UPDATED)."""
    return [
        BrokerChanged(
            seq=seq,
            reason=BrokerChangeReason.UPDATED,
            broker_id=broker.broker_id,
            incarnation_epoch=broker.incarnation_epoch,
            broker=broker,
        )
    ]


def broker_gone(
    seq: int,
    reason: BrokerChangeReason,
    broker_id: int,
    incarnation_epoch: int,
    *,
    was_controller: bool,
) -> list[MetadataChange]:
    """The end of a session (UNREGISTERED or EXPIRED), plus ControllerChanged(None) if that
    incarnation held the controller role."""
    records: list[MetadataChange] = [
        BrokerChanged(
            seq=seq,
            reason=reason,
            broker_id=broker_id,
            incarnation_epoch=incarnation_epoch,
            broker=None,
        )
    ]
    if was_controller:
        records.append(ControllerChanged(seq=seq, controller=None))
    return records


def controller_changed(seq: int, controller: ControllerInfo | None) -> list[MetadataChange]:
    """An election (``controller``) or a resignation (None)."""
    return [ControllerChanged(seq=seq, controller=controller)]


def _partitions(
    seq: int, topic: str, first: int, states: Iterable[PartitionState]
) -> list[MetadataChange]:
    return [
        PartitionChanged(seq=seq, topic=topic, partition=first + i, state=s)
        for i, s in enumerate(states)
    ]


def topic_created(
    seq: int, assignment: TopicAssignment, states: Sequence[PartitionState]
) -> list[MetadataChange]:
    """``create_topic``: TopicChanged(CREATED) and a PartitionChanged per partition."""
    return [
        TopicChanged(seq=seq, reason=TopicChangeReason.CREATED, assignment=assignment),
        *_partitions(seq, assignment.topic, 0, states),
    ]


def partitions_added(
    seq: int, assignment: TopicAssignment, first: int, states: Sequence[PartitionState]
) -> list[MetadataChange]:
    """``add_partitions``: TopicChanged(PARTITIONS_ADDED) with the whole new assignment and a
    PartitionChanged per new partition (``first`` is the first new partition)."""
    return [
        TopicChanged(seq=seq, reason=TopicChangeReason.PARTITIONS_ADDED, assignment=assignment),
        *_partitions(seq, assignment.topic, first, states),
    ]


def topic_deleted(seq: int, removed: TopicAssignment) -> list[MetadataChange]:
    """``delete_topic``: TopicChanged(DELETED) with the removed assignment."""
    return [TopicChanged(seq=seq, reason=TopicChangeReason.DELETED, assignment=removed)]


def topic_configs_altered(seq: int, assignment: TopicAssignment) -> list[MetadataChange]:
    """``alter_topic_configs``: TopicChanged(CONFIGS_ALTERED) with the whole new assignment."""
    return [TopicChanged(seq=seq, reason=TopicChangeReason.CONFIGS_ALTERED, assignment=assignment)]


def broker_configs_altered(seq: int, broker_id: int, configs: TopicConfigs) -> list[MetadataChange]:
    """``alter_broker_configs``: BrokerConfigsChanged with the broker's whole new configs."""
    return [BrokerConfigsChanged(seq=seq, broker_id=broker_id, configs=configs)]


def partition_changed(
    seq: int, topic: str, partition: int, state: PartitionState
) -> list[MetadataChange]:
    """An accepted partition-state CAS."""
    return [PartitionChanged(seq=seq, topic=topic, partition=partition, state=state)]


def admin_completed(
    seq: int,
    request: AdminRequest,
    outcome: ErrorCode,
    message: str,
    result: AlterPartitionResult | None = None,
) -> list[MetadataChange]:
    """``complete_admin_request``: AdminRequestChanged(COMPLETED)."""
    return [
        AdminRequestChanged(
            seq=seq,
            reason=AdminRequestChangeReason.COMPLETED,
            request=request,
            outcome=outcome,
            message=message,
            result=result,
        )
    ]


def admin_submitted(
    seq: int, request: AdminRequest, dropped: Sequence[AdminRequest]
) -> list[MetadataChange]:
    """``submit_admin_request``: the superseded requests a full queue drops, completed with
    OPERATION_NOT_ATTEMPTED, then AdminRequestChanged(SUBMITTED)."""
    message = f"superseded: queue for target {request.target} was full"
    records: list[MetadataChange] = []
    for old in dropped:
        records += admin_completed(seq, old, ErrorCode.OPERATION_NOT_ATTEMPTED, message)
    records.append(
        AdminRequestChanged(seq=seq, reason=AdminRequestChangeReason.SUBMITTED, request=request)
    )
    return records
