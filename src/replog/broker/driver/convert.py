"""Wire messages <-> replication-machine values, in one pure module.

The request handlers, the follower's fetch sessions and the simulator meet the same
conversions here: a Fetch request's partitions become ``replog.isr.PartitionFetchRequest`` values,
the machine's ``PartitionFetchResponse`` answers become the wire partitions (records as zero-copy
``RecordsRef`` holes when the log gave a ``FetchSlice``), and a wire Fetch response becomes
the ``PartitionFetchResponse`` values a follower's ``Partition`` applies. Nothing here does IO.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from replog.errors import ErrorCode
from replog.isr import BytesSlice, LeaderEpochEnd, PartitionFetchRequest, PartitionFetchResponse
from replog.log.log import FetchSlice
from replog.protocol import RecordsRef
from replog.protocol import messages as m
from replog.topics import TopicPartition

__all__ = [
    "TopicPartition",
    "error_code_of",
    "fetch_partition_request",
    "fetch_partition_requests",
    "fetch_partitions",
    "fetch_response_partition",
    "follower_fetch_request",
    "follower_fetch_responses",
    "records_of",
    "wire_fetch_partition",
]


def error_code_of(value: int) -> ErrorCode:
    """An ``ErrorCode`` from a wire code (unknown codes: UNKNOWN_SERVER_ERROR)."""
    try:
        return ErrorCode(value)
    except ValueError:
        return ErrorCode.UNKNOWN_SERVER_ERROR


# ---------------------------------------------------------------------- leader side


def fetch_partitions(body: m.FetchRequest) -> list[tuple[TopicPartition, m.FetchPartition]]:
    """Every partition of a wire Fetch with its topic-partition, in request order."""
    return [
        (TopicPartition(topic.topic, p.partition), p)
        for topic in body.topics
        for p in topic.partitions
    ]


def fetch_partition_request(
    replica_id: int, p: m.FetchPartition, room_bytes: int | None = None
) -> PartitionFetchRequest:
    """One wire Fetch partition as a machine ``PartitionFetchRequest``, its ``max_bytes`` at
    least 1 and at most ``room_bytes`` (what is left of the response's budget) when given."""
    max_bytes = max(1, p.partition_max_bytes)
    if room_bytes is not None:
        max_bytes = max(1, min(max_bytes, room_bytes))
    return PartitionFetchRequest(
        replica_id=replica_id,
        fetch_offset=p.fetch_offset,
        current_leader_epoch=p.current_leader_epoch,
        last_fetched_epoch=p.last_fetched_epoch,
        log_start_offset=p.log_start_offset,
        max_bytes=max_bytes,
    )


def fetch_partition_requests(
    body: m.FetchRequest,
) -> list[tuple[TopicPartition, PartitionFetchRequest]]:
    """Every partition of a wire Fetch as a machine ``PartitionFetchRequest`` (sizes bounded
    later)."""
    return [(tp, fetch_partition_request(body.replica_id, p)) for tp, p in fetch_partitions(body)]


def records_of(answer: PartitionFetchResponse, room_bytes: int) -> tuple[Any, int]:
    """(the wire ``records`` value, bytes counted) for one answer given the room left in the
    response: a ``RecordsRef`` hole over a ``FetchSlice`` (sent zero-copy), bytes for an
    in-memory slice, or empty once the response is full (Kafka's first partition always gets
    its records)."""
    if answer.records is None or answer.records.size_bytes == 0 or room_bytes <= 0:
        return b"", 0
    size = answer.records.size_bytes
    if isinstance(answer.records, FetchSlice):
        return RecordsRef(size, answer.records), size
    return answer.records.to_bytes(), size


def fetch_response_partition(
    partition: int, answer: PartitionFetchResponse, records: Any
) -> m.FetchResponsePartition:
    """The wire partition of one machine answer (``records`` from ``records_of``)."""
    diverging = None
    if answer.diverging_epoch is not None:
        diverging = m.EpochEndOffset(
            epoch=answer.diverging_epoch.epoch, end_offset=answer.diverging_epoch.end_offset
        )
    return m.FetchResponsePartition(
        partition_index=partition,
        error_code=int(answer.error_code),
        high_watermark=answer.high_watermark,
        last_stable_offset=answer.high_watermark,
        log_start_offset=answer.log_start_offset,
        diverging_epoch=diverging,
        current_leader=None,
        snapshot_id=None,
        aborted_transactions=None,
        records=records,
    )


# ---------------------------------------------------------------------- follower side


def wire_fetch_partition(partition: int, r: PartitionFetchRequest) -> m.FetchPartition:
    """A follower's fetch of one partition as it goes on the wire."""
    return m.FetchPartition(
        partition=partition,
        current_leader_epoch=r.current_leader_epoch,
        fetch_offset=r.fetch_offset,
        last_fetched_epoch=r.last_fetched_epoch,
        log_start_offset=r.log_start_offset,
        partition_max_bytes=r.max_bytes,
    )


def follower_fetch_request(
    replica_id: int,
    requests: Sequence[tuple[TopicPartition, PartitionFetchRequest]],
    *,
    max_wait_ms: int,
    min_bytes: int,
    max_bytes: int,
) -> m.FetchRequest:
    """A follower's one wire Fetch (v12 fields) for every partition it follows on a leader."""
    by_topic: dict[str, list[m.FetchPartition]] = {}
    for (topic, partition), r in requests:
        by_topic.setdefault(topic, []).append(wire_fetch_partition(partition, r))
    return m.FetchRequest(
        replica_id=replica_id,
        max_wait_ms=max_wait_ms,
        min_bytes=min_bytes,
        max_bytes=max_bytes,
        isolation_level=0,
        session_id=0,
        session_epoch=-1,
        topics=[m.FetchTopic(topic=t, partitions=ps) for t, ps in by_topic.items()],
        forgotten_topics_data=[],
        rack_id="",
    )


def out_of_range_partitions(response: m.FetchResponse) -> list[TopicPartition]:
    """The partitions a leader answered OFFSET_OUT_OF_RANGE (the follower asks where its log
    starts and ends before truncating)."""
    return [
        TopicPartition(t.topic, p.partition_index)
        for t in response.responses
        for p in t.partitions
        if p.error_code == ErrorCode.OFFSET_OUT_OF_RANGE
    ]


def may_truncate(
    response: m.FetchResponse, leader_offsets: Mapping[TopicPartition, object]
) -> bool:
    """Whether applying ``response`` may truncate a log (an error or a diverging epoch)."""
    return bool(leader_offsets) or any(
        p.error_code or (p.diverging_epoch is not None and p.diverging_epoch.epoch >= 0)
        for t in response.responses
        for p in t.partitions
    )


def follower_fetch_responses(
    replica_id: int,
    requests: Mapping[TopicPartition, PartitionFetchRequest],
    response: m.FetchResponse,
    leader_offsets: Mapping[TopicPartition, tuple[int, int]],
) -> Iterable[tuple[TopicPartition, PartitionFetchResponse]]:
    """The machine answers of a wire Fetch response, for the partitions this follower asked
    about (others are ignored). ``leader_offsets``: (log start, LEO) the leader reported for
    the out-of-range ones."""
    for topic in response.responses:
        for p in topic.partitions:
            tp = TopicPartition(topic.topic, p.partition_index)
            request = requests.get(tp)
            if request is None:
                continue
            records = p.records
            data = (
                bytes(records)
                if records is not None and isinstance(records, (bytes, bytearray, memoryview))
                else b""
            )
            diverging = None
            if p.diverging_epoch is not None and p.diverging_epoch.epoch >= 0:
                diverging = LeaderEpochEnd(p.diverging_epoch.epoch, p.diverging_epoch.end_offset)
            log_start_offset, log_end_offset = leader_offsets.get(tp, (p.log_start_offset, -1))
            yield (
                tp,
                PartitionFetchResponse(
                    request_id=request.request_id,
                    error_code=error_code_of(p.error_code),
                    fetch_offset=request.fetch_offset,
                    high_watermark=p.high_watermark,
                    log_start_offset=log_start_offset,
                    log_end_offset=log_end_offset,
                    records=BytesSlice(data) if data else None,
                    diverging_epoch=diverging,
                    replica_id=replica_id,
                ),
            )


def replica_list_offsets_request(
    replica_id: int,
    tps: Iterable[TopicPartition],
    epochs: Mapping[TopicPartition, int],
    timestamp: int,
) -> m.ListOffsetsRequest:
    """ListOffsets as a replica (replica_id >= 0: latest is the leader's LEO, not its HW)."""
    by_topic: dict[str, list[m.ListOffsetsPartition]] = {}
    for topic, partition in tps:
        by_topic.setdefault(topic, []).append(
            m.ListOffsetsPartition(
                partition_index=partition,
                current_leader_epoch=epochs.get(TopicPartition(topic, partition), -1),
                timestamp=timestamp,
            )
        )
    return m.ListOffsetsRequest(
        replica_id=replica_id,
        isolation_level=0,
        topics=[m.ListOffsetsTopic(name=t, partitions=ps) for t, ps in by_topic.items()],
    )


def list_offsets_found(response: m.ListOffsetsResponse) -> dict[TopicPartition, int]:
    """The offsets a ListOffsets response found (errors and -1 left out)."""
    return {
        TopicPartition(t.name, p.partition_index): p.offset
        for t in response.topics
        for p in t.partitions
        if p.error_code == ErrorCode.NONE and p.offset >= 0
    }
