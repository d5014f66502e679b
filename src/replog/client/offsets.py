"""ListOffsets for the clients: ``ask_leader`` (one request to a partition leader, shared by
the consumer's position resets, ``Admin.list_offsets`` and the lookups here) and
``offsets_for_times`` (a time instead of earliest/latest, retried across leader changes until
the deadline)."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import NamedTuple

from replog.client.connection import ClusterClient, now_ms
from replog.client.errors import ConnectionLostError, error_for_code, is_retriable
from replog.errors import ErrorCode, RequestTimeoutError
from replog.protocol.messages import (
    ListOffsetsPartition,
    ListOffsetsPartitionResponse,
    ListOffsetsRequest,
    ListOffsetsResponse,
    ListOffsetsTopic,
)
from replog.topics import TopicPartitionLike

__all__ = ["OffsetAndTimestamp", "ask_leader", "offsets_for_times"]


class OffsetAndTimestamp(NamedTuple):
    """The first record at or after the asked time: its offset and its own timestamp."""

    offset: int
    timestamp: int


async def offsets_for_times(
    client: ClusterClient,
    timestamps: Mapping[TopicPartitionLike, int],
    *,
    timeout_ms: int,
    backoff_ms: int,
) -> dict[TopicPartitionLike, OffsetAndTimestamp | None]:
    """Per partition, the earliest record whose timestamp is >= the given time (ms since the
    epoch), or None when no such record is below the HW. ``ValueError`` for a negative time;
    ``RequestTimeoutError`` if some leader cannot be reached before ``timeout_ms``."""
    for (topic, partition), timestamp in timestamps.items():
        if not isinstance(timestamp, int) or timestamp < 0:
            raise ValueError(f"{topic}-{partition}: timestamp must be an int >= 0: {timestamp!r}")
    pending = dict(timestamps)
    found: dict[TopicPartitionLike, OffsetAndTimestamp | None] = {}
    deadline = now_ms() + timeout_ms
    while pending:
        metadata = await client.refresh_metadata_if_needed()
        by_leader: dict[int, list[TopicPartitionLike]] = {}
        for tp in pending:
            leader = metadata.leader_for(*tp)
            if leader is None:
                metadata.mark_stale()
            else:
                by_leader.setdefault(leader, []).append(tp)
        for leader, tps in by_leader.items():
            try:
                answered = await _ask(client, leader, {tp: pending[tp] for tp in tps})
            except ConnectionLostError:
                metadata.mark_stale()
                continue
            for tp, result in answered.items():
                found[tp] = result
                del pending[tp]
        if pending:
            if now_ms() >= deadline:
                names = ", ".join(f"{t}-{p}" for t, p in sorted(pending))
                raise RequestTimeoutError(f"offsets by time not found in time for {names}")
            await asyncio.sleep(backoff_ms / 1000)
    return found


async def ask_leader(
    client: ClusterClient, leader: int, queries: Mapping[TopicPartitionLike, tuple[int, int]]
) -> dict[TopicPartitionLike, ListOffsetsPartitionResponse]:
    """One ListOffsets (as a consumer) to ``leader``: per partition, (timestamp or
    EARLIEST/LATEST, current leader epoch or -1) -> the broker's answer for it."""
    topics: dict[str, list[ListOffsetsPartition]] = {}
    for (topic, partition), (timestamp, leader_epoch) in queries.items():
        topics.setdefault(topic, []).append(
            ListOffsetsPartition(
                partition_index=partition,
                current_leader_epoch=leader_epoch,
                timestamp=timestamp,
            )
        )
    request = ListOffsetsRequest(
        replica_id=-1,
        isolation_level=0,
        topics=[ListOffsetsTopic(name=t, partitions=ps) for t, ps in topics.items()],
    )
    response = await client.send(leader, request, ListOffsetsResponse)
    return {
        (answer.name, p.partition_index): p
        for answer in response.topics
        for p in answer.partitions
        if (answer.name, p.partition_index) in queries
    }


async def _ask(
    client: ClusterClient, leader: int, timestamps: dict[TopicPartitionLike, int]
) -> dict[TopicPartitionLike, OffsetAndTimestamp | None]:
    """One lookup to ``leader``; partitions with a retriable error are left out."""
    answers = await ask_leader(client, leader, {tp: (ts, -1) for tp, ts in timestamps.items()})
    found: dict[TopicPartitionLike, OffsetAndTimestamp | None] = {}
    for tp, p in answers.items():
        if p.error_code != ErrorCode.NONE:
            if is_retriable(p.error_code):
                client.metadata.mark_stale()
                continue
            raise error_for_code(p.error_code, f"offsets by time for {tp[0]}-{tp[1]}")
        found[tp] = None if p.offset < 0 else OffsetAndTimestamp(p.offset, p.timestamp)
    return found
