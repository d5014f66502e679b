"""The producer's record accumulator: per-partition queues of batches waiting to be sent.

No IO and no clock: callers pass ``now_ms``. A record joins the newest open batch of its
partition if it fits within ``batch_bytes_max`` (a record larger than that gets a batch of its
own); otherwise a new batch starts. A batch is *ready* when it is full (size limit reached, or a
newer batch follows it), when it has waited ``linger_ms``, or while a flush or close is under way
-- and, for a batch being retried, once its backoff has passed.

An idempotent producer stamps each batch with its producer id, epoch and first sequence when it
is first sent (``ProducerBatch.producer_id`` ...); a retried batch keeps them, and goes back into
its queue in sequence order, ahead of batches never sent.

Memory is bounded: the estimated bytes of every record accepted and not yet completed stay
under ``buffer_bytes_max``; ``append`` raises ``BufferFullError`` instead of growing.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Container, Iterator

import attrs

from replog.client.errors import BufferFullError
from replog.errors import invariant
from replog.log.compression import Compression
from replog.log.encoding import encode_batch
from replog.log.records import (
    MAX_RECORD_OVERHEAD,
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    NO_SEQUENCE,
    RECORD_BATCH_OVERHEAD,
)
from replog.topics import TopicPartitionLike

__all__ = ["PendingRecord", "ProducerBatch", "RecordAccumulator", "TopicPartitionLike"]


@attrs.frozen(kw_only=True)
class RecordMetadata:
    """Where an acknowledged record landed. ``offset`` is -1 for acks=0 (no answer)."""

    topic: str
    partition: int
    offset: int
    timestamp: int


@attrs.define
class PendingRecord:
    """One record accepted by ``send`` and not yet acknowledged."""

    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...]
    timestamp_ms: int
    future: asyncio.Future[RecordMetadata]

    @property
    def size_bytes(self) -> int:
        """Upper estimate of the record's encoded size."""
        size = MAX_RECORD_OVERHEAD + len(self.key or b"") + len(self.value or b"")
        return size + sum(len(k) + len(v or b"") + 10 for k, v in self.headers)


@attrs.define(eq=False)
class ProducerBatch:
    """Records for one partition, sent together as one record batch."""

    topic: str
    partition: int
    created_ms: int
    records: list[PendingRecord] = attrs.field(factory=list)
    size_bytes: int = RECORD_BATCH_OVERHEAD
    attempts: int = 0
    retry_at_ms: int = 0
    #: an idempotent producer's identity for the batch, fixed at its first send (retries
    #: reuse it); NO_SEQUENCE: not assigned (never sent, or reassigned after an epoch bump)
    producer_id: int = NO_PRODUCER_ID
    producer_epoch: int = NO_PRODUCER_EPOCH
    base_sequence: int = NO_SEQUENCE

    @property
    def tp(self) -> TopicPartitionLike:
        """(topic, partition)."""
        return (self.topic, self.partition)

    @property
    def has_sequence(self) -> bool:
        """Whether an idempotent producer has stamped the batch with a sequence."""
        return self.base_sequence != NO_SEQUENCE

    def set_sequence(self, producer_id: int, producer_epoch: int, base_sequence: int) -> None:
        """Stamp the batch for an idempotent producer (NO_SEQUENCE: clear the stamp)."""
        self.producer_id = producer_id
        self.producer_epoch = producer_epoch
        self.base_sequence = base_sequence

    def encode(self, compression: Compression = Compression.NONE) -> bytes:
        """The record batch v2 bytes (base offset 0: the leader assigns offsets)."""
        return encode_batch(
            [r.value for r in self.records],
            keys=[r.key for r in self.records],
            headers=[r.headers for r in self.records],
            timestamps=[r.timestamp_ms for r in self.records],
            base_timestamp=min(r.timestamp_ms for r in self.records),
            compression=compression,
            producer_id=self.producer_id,
            producer_epoch=self.producer_epoch,
            base_sequence=self.base_sequence,
        )

    def complete(self, base_offset: int, log_append_time_ms: int = -1) -> None:
        """Resolve every record's future with its offset (base_offset -1: acks=0)."""
        for index, record in enumerate(self.records):
            if record.future.done():
                continue
            offset = -1 if base_offset < 0 else base_offset + index
            timestamp = record.timestamp_ms if log_append_time_ms < 0 else log_append_time_ms
            record.future.set_result(
                RecordMetadata(
                    topic=self.topic, partition=self.partition, offset=offset, timestamp=timestamp
                )
            )

    def fail(self, error: BaseException) -> None:
        """Fail every record's future with ``error``."""
        for record in self.records:
            if not record.future.done():
                record.future.set_exception(error)


@attrs.define
class RecordAccumulator:
    """Per-partition batch queues with a memory bound (see module doc)."""

    batch_bytes_max: int
    linger_ms: int
    buffer_bytes_max: int
    buffered_bytes: int = 0
    flushing: bool = False
    _queues: dict[TopicPartitionLike, deque[ProducerBatch]] = attrs.field(factory=dict)

    def append(self, tp: TopicPartitionLike, record: PendingRecord, now_ms: int) -> ProducerBatch:
        """Add ``record`` to the partition's open batch (or a new one); ``BufferFullError``
        when it would push the buffered bytes over ``buffer_bytes_max``."""
        size = record.size_bytes
        if self.buffered_bytes + size > self.buffer_bytes_max:
            raise BufferFullError(size, self.buffered_bytes, self.buffer_bytes_max)
        queue = self._queues.setdefault(tp, deque())
        batch = queue[-1] if queue else None
        fits = batch is not None and batch.size_bytes + size <= self.batch_bytes_max
        if batch is None or batch.attempts > 0 or not fits:
            batch = ProducerBatch(tp[0], tp[1], created_ms=now_ms)
            queue.append(batch)
        batch.records.append(record)
        batch.size_bytes += size
        self.buffered_bytes += size
        return batch

    def _is_ready(self, batch: ProducerBatch, is_last: bool, now_ms: int) -> bool:
        if batch.attempts > 0:
            return now_ms >= batch.retry_at_ms
        full = not is_last or batch.size_bytes >= self.batch_bytes_max
        return full or self.flushing or now_ms - batch.created_ms >= self.linger_ms

    def ready(self, now_ms: int) -> list[TopicPartitionLike]:
        """Partitions whose first batch may be sent now."""
        return [
            tp
            for tp, queue in self._queues.items()
            if queue and self._is_ready(queue[0], len(queue) == 1, now_ms)
        ]

    def next_ready_delay_ms(
        self, now_ms: int, blocked: Container[TopicPartitionLike] = ()
    ) -> int | None:
        """Milliseconds until some first batch becomes ready by time alone (None: no batches
        outside ``blocked``, the partitions that may not send now)."""
        delays: list[int] = []
        for tp, queue in self._queues.items():
            if not queue or tp in blocked:
                continue
            head = queue[0]
            if head.attempts > 0:
                delays.append(head.retry_at_ms - now_ms)
            elif len(queue) > 1 or self.flushing or head.size_bytes >= self.batch_bytes_max:
                delays.append(0)
            else:
                delays.append(head.created_ms + self.linger_ms - now_ms)
        return max(0, min(delays)) if delays else None

    def pop(self, tp: TopicPartitionLike) -> ProducerBatch:
        """Take the partition's first batch for sending."""
        queue = self._queues[tp]
        batch = queue.popleft()
        if not queue:
            del self._queues[tp]
        return batch

    def reenqueue(self, batch: ProducerBatch, retry_at_ms: int) -> None:
        """Put a batch back at the head of its queue, to be retried at ``retry_at_ms``; a
        batch with a sequence goes after the queued ones with lower sequences."""
        batch.attempts += 1
        batch.retry_at_ms = retry_at_ms
        queue = self._queues.setdefault(batch.tp, deque())
        position = 0
        if batch.has_sequence:
            while (
                position < len(queue)
                and queue[position].has_sequence
                and queue[position].base_sequence < batch.base_sequence
            ):
                position += 1
        queue.insert(position, batch)

    def queued(self, tp: TopicPartitionLike) -> list[ProducerBatch]:
        """The partition's queued batches, in sending order."""
        return list(self._queues.get(tp, ()))

    def head(self, tp: TopicPartitionLike) -> ProducerBatch | None:
        """The partition's next batch to send, or None."""
        queue = self._queues.get(tp)
        return queue[0] if queue else None

    def release(self, batch: ProducerBatch) -> None:
        """A batch is finished (acknowledged or failed): free its bytes."""
        self.buffered_bytes -= batch.size_bytes - RECORD_BATCH_OVERHEAD
        invariant(self.buffered_bytes >= 0, f"buffered bytes went negative: {self.buffered_bytes}")

    def batches(self) -> Iterator[ProducerBatch]:
        """Every queued batch."""
        for queue in self._queues.values():
            yield from queue

    def expire(self, now_ms: int, delivery_timeout_ms: int) -> list[ProducerBatch]:
        """Take out every queued batch created ``delivery_timeout_ms`` or more before
        ``now_ms`` (the caller fails and releases them)."""
        expired: list[ProducerBatch] = []
        for tp in list(self._queues):
            queue = self._queues[tp]
            kept = deque(b for b in queue if now_ms - b.created_ms < delivery_timeout_ms)
            expired += [b for b in queue if now_ms - b.created_ms >= delivery_timeout_ms]
            if kept:
                self._queues[tp] = kept
            else:
                del self._queues[tp]
        return expired

    def fail_all(self, error: BaseException) -> None:
        """Fail and drop every queued batch (close without flush)."""
        for batch in list(self.batches()):
            batch.fail(error)
            self.release(batch)
        self._queues.clear()

    @property
    def empty(self) -> bool:
        """No queued batches."""
        return not self._queues
