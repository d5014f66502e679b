"""Admin request queues: the rules every backend shares (payload checks, what a full queue may
drop). Each backend keeps its queues its own way (``memory.admin_queues``,
``zookeeper.admin_queues``, ``etcd.admin_queues``, the raft quorum's ``MetadataMachine``).

A request is stored durably per target and waits for its target however long the target is
away (its sessions may end and begin again): only a completion removes it. A queue has a
limit; when it is reached, requests that a later one makes pointless are dropped first: every
START_REPLICA (the target re-reads its assignment when it returns anyway) and every
CLOSE_REPLICA but the newest per partition. Dropped requests are completed with
OPERATION_NOT_ATTEMPTED, visibly in the feed, never silently.
"""

from __future__ import annotations

from collections.abc import Sequence

from replog.coord.errors import AdminQueueFullError
from replog.metadata.types import (
    CONTROLLER_TARGET,
    AddPartitions,
    AdminPayload,
    AdminRequest,
    AlterConfigs,
    AlterPartition,
    CloseReplica,
    ConfigResourceType,
    CreateTopic,
    DamagedReplica,
    ElectLeader,
    ReassignPartition,
    StartReplica,
)
from replog.topics import validate_topic_name

__all__ = ["requests_to_drop", "superseded_requests", "validate_admin_request"]


def validate_admin_request(target: int, payload: AdminPayload) -> None:
    """Raise ``ValueError`` (``InvalidTopicError`` for names) for a request no target could act
    on: a bad target, topic name, partition number or count."""
    if target < CONTROLLER_TARGET:
        raise ValueError(f"admin target {target} is neither a broker id nor CONTROLLER_TARGET")
    topic = getattr(payload, "topic", None)
    if topic is not None:
        validate_topic_name(topic)
    if isinstance(payload, (CreateTopic, AddPartitions)) and payload.partition_count < 1:
        raise ValueError(f"partition count {payload.partition_count} must be >= 1")
    if isinstance(payload, CreateTopic) and payload.replication_factor < 1:
        raise ValueError(f"replication factor {payload.replication_factor} must be >= 1")
    partitioned = (
        ReassignPartition,
        StartReplica,
        CloseReplica,
        AlterPartition,
        DamagedReplica,
        ElectLeader,
    )
    if isinstance(payload, partitioned) and (payload.partition < 0):
        raise ValueError(f"partition {payload.partition} must be >= 0")
    if isinstance(payload, AlterConfigs):
        name = payload.resource_name
        if payload.resource_type is ConfigResourceType.TOPIC:
            validate_topic_name(name)
        elif name and not (name.isascii() and name.isdigit()):
            raise ValueError(f"broker config resource {name!r} is neither a broker id nor ''")
    for topic_name, _ in getattr(payload, "partitions", ()):
        validate_topic_name(topic_name)


def superseded_requests(pending: Sequence[AdminRequest]) -> list[AdminRequest]:
    """The requests a full queue may drop: every START_REPLICA, and every CLOSE_REPLICA except
    the newest (highest leader epoch, then latest id) of its partition and topic ID."""
    newest_close: dict[tuple[str, int, str], AdminRequest] = {}
    for request in pending:
        p = request.payload
        if isinstance(p, CloseReplica):
            key = (p.topic, p.partition, p.topic_id)
            kept = newest_close.get(key)
            if kept is None or _close_rank(request) > _close_rank(kept):
                newest_close[key] = request
    keep = {r.request_id for r in newest_close.values()}
    return [
        r
        for r in pending
        if isinstance(r.payload, StartReplica)
        or (isinstance(r.payload, CloseReplica) and r.request_id not in keep)
    ]


def requests_to_drop(
    pending: Sequence[AdminRequest], target: int, limit: int
) -> list[AdminRequest]:
    """What submitting one more request to a queue holding ``pending`` must drop: nothing
    below ``limit``, else the superseded requests, or ``AdminQueueFullError`` if dropping them
    still leaves no room."""
    if len(pending) < limit:
        return []
    dropped = superseded_requests(pending)
    if len(pending) - len(dropped) >= limit:
        raise AdminQueueFullError(target, limit)
    return dropped


def _close_rank(request: AdminRequest) -> tuple[int, int]:
    payload = request.payload
    epoch = payload.leader_epoch if isinstance(payload, CloseReplica) else -1
    return (epoch, request.request_id)
