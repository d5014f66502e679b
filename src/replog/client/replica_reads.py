"""Reading one replica's copy of a partition: ``read_replica`` of ``AsyncAdmin`` and ``Admin``.

A Fetch sent with Kafka's debugging-consumer replica id (-2) to a chosen broker: the leader
answers it as it answers a consumer, and a follower, which refuses consumers, answers it from
its own log up to its own high watermark (the rule Kafka's replica verification tool relies
on). The answer is summarised batch by batch (offsets and CRC), enough to compare replicas
without keeping their records.
"""

from __future__ import annotations

from typing import Generic, TypeVar

import attrs

from replog.client._sync import LoopThread
from replog.client.connection import ClusterClient
from replog.errors import ErrorCode
from replog.log.records import iter_batches
from replog.protocol.messages import FetchPartition, FetchRequest, FetchResponse, FetchTopic

__all__ = ["AsyncReplicaReads", "ReplicaBatch", "ReplicaRead", "ReplicaReads"]

#: Kafka's ``FetchRequest.DEBUGGING_CONSUMER_ID``
DEBUGGING_CONSUMER_ID = -2

_A = TypeVar("_A", bound="AsyncReplicaReads")


@attrs.frozen
class ReplicaBatch:
    """One record batch as a replica holds it: its offsets and its CRC (which covers every byte
    from the attributes on, so two copies with the same CRC hold the same records)."""

    base_offset: int
    last_offset: int
    crc: int


@attrs.frozen(kw_only=True)
class ReplicaRead:
    """What one broker answered for one partition: its error name ("NONE" when it served the
    read), its high watermark and log start offset, and the whole batches it returned."""

    broker_id: int
    error: str
    high_watermark: int
    log_start_offset: int
    batches: tuple[ReplicaBatch, ...]

    @property
    def next_offset(self) -> int | None:
        """The offset after the last batch read (None: no batch)."""
        return self.batches[-1].last_offset + 1 if self.batches else None


class AsyncReplicaReads:
    """The replica-read method of ``AsyncAdmin`` (a base class: it provides ``_client`` and
    ``request_timeout_ms``)."""

    _client: ClusterClient
    request_timeout_ms: int

    async def read_replica(
        self, broker_id: int, topic: str, partition: int, offset: int, max_bytes: int = 1 << 20
    ) -> ReplicaRead:
        """Read ``topic``-``partition`` from ``offset`` on as broker ``broker_id`` holds it (up
        to its high watermark), whether it leads the partition or follows. A broker the client
        cannot reach raises ``ConnectionLostError``."""
        request = FetchRequest(
            replica_id=DEBUGGING_CONSUMER_ID,
            max_wait_ms=0,
            min_bytes=0,
            max_bytes=max_bytes,
            isolation_level=0,
            session_id=0,
            session_epoch=-1,
            topics=[
                FetchTopic(
                    topic=topic,
                    partitions=[
                        FetchPartition(
                            partition=partition,
                            current_leader_epoch=-1,
                            fetch_offset=offset,
                            partition_max_bytes=max_bytes,
                        )
                    ],
                )
            ],
            forgotten_topics_data=[],
        )
        if broker_id not in self._client.metadata.brokers:
            await self._client.refresh_metadata([])  # learn the broker's address
        response: FetchResponse = await self._client.send(
            broker_id, request, FetchResponse, timeout_ms=self.request_timeout_ms
        )
        part = response.responses[0].partitions[0]
        records = part.records if isinstance(part.records, (bytes, bytearray, memoryview)) else b""
        batches = tuple(
            ReplicaBatch(header.base_offset, header.last_offset, header.crc)
            for _, header in iter_batches(records)
        )
        return ReplicaRead(
            broker_id=broker_id,
            error=ErrorCode(part.error_code).name,
            high_watermark=part.high_watermark,
            log_start_offset=part.log_start_offset,
            batches=batches,
        )


class ReplicaReads(Generic[_A]):
    """The replica-read method of the synchronous ``Admin`` (a base class: it provides
    ``_loop`` and ``_admin``, the ``AsyncAdmin``)."""

    _loop: LoopThread
    _admin: _A

    def read_replica(
        self, broker_id: int, topic: str, partition: int, offset: int, max_bytes: int = 1 << 20
    ) -> ReplicaRead:
        """See ``AsyncReplicaReads.read_replica``."""
        return self._loop.run(
            self._admin.read_replica(broker_id, topic, partition, offset, max_bytes)
        )
