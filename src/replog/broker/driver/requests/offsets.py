"""ListOffsets (key 2) and OffsetForLeaderEpoch (key 23): where a partition's log starts and
ends, which offset a timestamp falls at, and where a leader epoch ends -- answered by the
leader, fenced by the caller's current leader epoch (KIP-320)."""

from __future__ import annotations

from replog.broker.driver.requests.base import (
    Handler,
    Outcome,
    Reply,
    RequestContext,
    RequestServices,
)
from replog.errors import CorruptRecordError, ErrorCode, StorageError
from replog.log.log import Log
from replog.log.time_lookup import offset_for_timestamp, offset_of_max_timestamp
from replog.protocol import messages as m
from replog.protocol.schema import Message

__all__ = ["HANDLERS", "handle_list_offsets", "handle_offset_for_leader_epoch", "leader_check"]


def leader_check(services: RequestServices, topic: str, partition: int, epoch: int) -> ErrorCode:
    """Whether this broker leads the partition at the caller's ``epoch`` (-1: any)."""
    replica = services.partition(topic, partition)
    if replica is None:
        return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    if not replica.is_leader:
        return ErrorCode.NOT_LEADER_OR_FOLLOWER
    if 0 <= epoch < replica.leader_epoch:
        return ErrorCode.FENCED_LEADER_EPOCH
    if epoch > replica.leader_epoch:
        return ErrorCode.UNKNOWN_LEADER_EPOCH
    return ErrorCode.NONE


def handle_list_offsets(
    ctx: RequestContext, body: m.ListOffsetsRequest, services: RequestServices
) -> Outcome:
    """Earliest, latest, by time or MAX_TIMESTAMP per partition; the leader epoch only from
    v4, the first version that carries it (Kafka's schema does not let it be dropped). A
    consumer is refused an offset while the new leader's HW is not yet current."""
    topics = []
    for topic in body.topics:
        parts = []
        for p in topic.partitions:
            code = leader_check(services, topic.name, p.partition_index, p.current_leader_epoch)
            offset, timestamp, epoch = -1, -1, -1
            log = services.log(topic.name, p.partition_index)
            if code is ErrorCode.NONE and log is not None:
                code, timestamp, offset = _offset_at(log, p.timestamp, body.replica_id >= 0)
                replica = services.partition(topic.name, p.partition_index)
                if body.replica_id < 0 and replica is not None and not replica.hw_is_current:
                    code, offset = ErrorCode.OFFSET_NOT_AVAILABLE, -1  # see Partition.hw_is_current
                epoch = -1 if replica is None or ctx.version < 4 else replica.leader_epoch
            parts.append(
                m.ListOffsetsPartitionResponse(
                    partition_index=p.partition_index,
                    error_code=int(code),
                    timestamp=timestamp,
                    offset=offset,
                    leader_epoch=epoch,
                )
            )
        topics.append(m.ListOffsetsTopicResponse(name=topic.name, partitions=parts))
    return Reply(m.ListOffsetsResponse(topics=topics))


def _offset_at(log: Log, timestamp: int, from_replica: bool) -> tuple[ErrorCode, int, int]:
    """(error, timestamp, offset) answering one ListOffsets partition. A consumer sees only
    offsets below the HW; a replica asking for the latest offset gets the LEO. A search by
    time that meets an undecodable batch answers CORRUPT_MESSAGE, and one on a log whose dir
    went offline KAFKA_STORAGE_ERROR (for that partition only)."""
    visible_end = log.log_end_offset if from_replica else log.high_watermark
    if timestamp == m.EARLIEST_TIMESTAMP:
        return ErrorCode.NONE, -1, log.log_start_offset
    if timestamp == m.LATEST_TIMESTAMP:
        return ErrorCode.NONE, -1, visible_end
    if timestamp < 0 and timestamp != m.MAX_TIMESTAMP:
        return ErrorCode.INVALID_REQUEST, -1, -1
    try:
        if timestamp == m.MAX_TIMESTAMP:
            found = offset_of_max_timestamp(log, visible_end)
        else:
            found = offset_for_timestamp(log, timestamp, visible_end)
    except CorruptRecordError:
        # A stored batch that cannot be decoded (damaged, or written before produce validated
        # records): the partition's answer is an error code, as Kafka's for a corrupt record.
        return ErrorCode.CORRUPT_MESSAGE, -1, -1
    except StorageError:
        return ErrorCode.KAFKA_STORAGE_ERROR, -1, -1
    return (ErrorCode.NONE, -1, -1) if found is None else (ErrorCode.NONE, *found)


def handle_offset_for_leader_epoch(
    ctx: RequestContext, body: m.OffsetForLeaderEpochRequest, services: RequestServices
) -> Outcome:
    """The end offset of each asked leader epoch on this leader's log (KIP-101/279)."""
    topics = []
    for topic in body.topics:
        parts = []
        for p in topic.partitions:
            code = leader_check(services, topic.topic, p.partition, p.current_leader_epoch)
            epoch, end_offset = -1, -1
            log = services.log(topic.topic, p.partition)
            if code is ErrorCode.NONE and log is not None:
                epoch, end_offset = log.end_offset_for_epoch(p.leader_epoch)
            parts.append(
                m.EpochEndOffsetResult(
                    error_code=int(code),
                    partition=p.partition,
                    leader_epoch=epoch,
                    end_offset=end_offset,
                )
            )
        topics.append(m.OffsetForLeaderTopicResult(topic=topic.topic, partitions=parts))
    return Reply(m.OffsetForLeaderEpochResponse(topics=topics))


HANDLERS: dict[type[Message], Handler] = {
    m.ListOffsetsRequest: handle_list_offsets,
    m.OffsetForLeaderEpochRequest: handle_offset_for_leader_epoch,
}
