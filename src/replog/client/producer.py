"""The producer: ``AsyncProducer`` (asyncio) and ``Producer`` (synchronous facade).

``send()`` puts a record in the ``RecordAccumulator`` and returns a future of its
``RecordMetadata``; a sender task drains ready batches, groups them by partition leader into
Produce requests and completes the futures from the answers.

Delivery rules:

- ``acks``: 0 (no answer; offsets are -1; errors are invisible), 1 (the leader appended it), or
  "all"/-1 (the whole ISR has it; the broker refuses it while the ISR is under
  min.insync.replicas).
- Retries happen only for retriable errors (``ErrorCode.retriable``, lost connections, request
  timeouts), at most ``retries`` times per batch (Kafka's default: effectively unbounded), the
  back-off doubling from ``retry_backoff_ms`` up to ``retry_backoff_max_ms``; NOT_LEADER,
  FENCED/UNKNOWN_LEADER_EPOCH and a lost connection first refresh metadata. Anything else fails
  the batch's futures at once.
- Delivery timeout: a record not acknowledged within ``delivery_timeout_ms`` of its batch's
  creation (no leader, failing retries, an answer that never comes) fails with
  ``DeliveryTimeoutError``, so ``flush()`` and ``close()`` always end. It must be at least
  ``linger_ms + request_timeout_ms``, as in Kafka.
- **Idempotence** (``enable_idempotence``, on by default as in current Kafka clients): the
  producer gets a producer id from the cluster (InitProducerId) and stamps each batch with it and
  a sequence number; a retry reuses them, so a Produce whose answer was lost (dropped connection,
  timeout, leader change) is answered by the leader with the original offsets instead of being
  appended again, and a partition's records land in the order they were sent. It needs acks=all,
  ``retries`` >= 1 and ``in_flight_per_partition_max`` <= 5; left unset, idempotence is off when
  those settings say otherwise (as Kafka's clients do), set to True it makes them an error. See
  ``idempotence`` for the recovery from a lost batch (an epoch bump).
- Ordering: by default one batch per partition is in flight (``in_flight_per_partition_max=1``),
  so a retried batch is resent before anything that follows it and order is kept. With a higher
  limit a retry can land after a later batch -- unless the producer is idempotent, when a retry
  goes alone and the leader refuses a batch that skips a sequence.
- Without idempotence a retry after a lost answer appends the records again: Kafka's classic
  at-least-once delivery. Set ``retries=0`` for at-most-once.
- Memory: at most ``buffer_bytes_max`` of records wait in the producer; beyond that ``send``
  raises ``BufferFullError`` at once (Kafka would block for max.block.ms).
- Partitioning: see ``partitioner`` (murmur2 for keys as Kafka's Java client, round-robin for
  keyless records).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
from collections.abc import Sequence
from typing import Any

import attrs

from replog.client._sync import LoopThread
from replog.client.accumulator import (
    PendingRecord,
    ProducerBatch,
    RecordAccumulator,
    RecordMetadata,
    TopicPartitionLike,
)
from replog.client.connection import ClusterClient, now_ms
from replog.client.errors import (
    BrokerResponseError,
    ClientClosedError,
    ConnectionLostError,
    DeliveryTimeoutError,
    FlushTimeoutError,
    error_for_code,
    is_retriable,
)
from replog.client.idempotence import IN_FLIGHT_MAX, IdempotenceState
from replog.client.partitioner import DefaultPartitioner
from replog.clock import wall_ms
from replog.errors import (
    ErrorCode,
    InvalidConfigError,
    ProtocolError,
    ReplogError,
    RequestTimeoutError,
    RetriableError,
)
from replog.log.compression import Compression
from replog.protocol.messages import (
    InitProducerIdRequest,
    InitProducerIdResponse,
    PartitionProduceData,
    ProduceRequest,
    ProduceResponse,
    TopicProduceData,
)

__all__ = ["AsyncProducer", "Producer", "ProducerConfig", "RecordMetadata"]

Headers = Sequence[tuple[str, bytes | None]]


def _acks(value: int | str) -> int:
    if value in ("all", -1, "-1"):
        return -1
    if value in (0, 1, "0", "1"):
        return int(value)
    raise InvalidConfigError(f"acks must be 0, 1 or 'all' (-1), not {value!r}")


def _compression(value: Compression | str) -> Compression:
    """Kafka's compression.type names (none, gzip, snappy, lz4, zstd) or a ``Compression``."""
    if isinstance(value, Compression):
        return value
    if isinstance(value, str):
        try:
            return Compression[value.strip().upper()]
        except KeyError:
            pass
    names = ", ".join(c.name.lower() for c in Compression)
    raise InvalidConfigError(f"compression must be one of {names}, not {value!r}")


@attrs.frozen(kw_only=True)
class ProducerConfig:
    """Producer settings; Kafka's names in snake_case with units last."""

    acks: int = attrs.field(default=-1, converter=_acks)
    linger_ms: int = 5
    batch_bytes_max: int = 16_384
    buffer_bytes_max: int = 32 * 1024 * 1024
    retries: int = 2**31 - 1
    retry_backoff_ms: int = 100
    retry_backoff_max_ms: int = 1_000
    delivery_timeout_ms: int = 120_000
    request_timeout_ms: int = 30_000
    metadata_wait_ms: int = 10_000
    in_flight_per_partition_max: int = 1
    #: a ``Compression`` or Kafka's name for it ("none", "gzip", "snappy", "lz4", "zstd")
    compression: Compression = attrs.field(default=Compression.NONE, converter=_compression)
    client_id: str = "replog-producer"
    #: None: on unless acks, retries or in_flight_per_partition_max rule it out (module doc)
    enable_idempotence: bool | None = None

    @property
    def idempotent(self) -> bool:
        """Whether batches carry a producer id and sequence numbers."""
        if self.enable_idempotence is not None:
            return self.enable_idempotence
        return not self._idempotence_conflicts()

    def _idempotence_conflicts(self) -> list[str]:
        conflicts = []
        if self.acks != -1:
            conflicts.append("acks must be 'all'")
        if self.retries < 1:
            conflicts.append("retries must be >= 1")
        if self.in_flight_per_partition_max > IN_FLIGHT_MAX:
            conflicts.append(f"in_flight_per_partition_max must be <= {IN_FLIGHT_MAX}")
        return conflicts

    def __attrs_post_init__(self) -> None:
        for name in ("linger_ms", "retries", "retry_backoff_ms"):
            if getattr(self, name) < 0:
                raise InvalidConfigError(f"{name} must be >= 0")
        for name in ("batch_bytes_max", "buffer_bytes_max", "in_flight_per_partition_max"):
            if getattr(self, name) < 1:
                raise InvalidConfigError(f"{name} must be >= 1")
        if self.request_timeout_ms < 1:
            raise InvalidConfigError("request_timeout_ms must be >= 1")
        if self.retry_backoff_max_ms < self.retry_backoff_ms:
            raise InvalidConfigError("retry_backoff_max_ms must be >= retry_backoff_ms")
        if self.delivery_timeout_ms < self.linger_ms + self.request_timeout_ms:
            raise InvalidConfigError(
                f"delivery_timeout_ms ({self.delivery_timeout_ms}) must be >= linger_ms + "
                f"request_timeout_ms ({self.linger_ms + self.request_timeout_ms})"
            )

    def backoff_ms(self, attempts: int) -> int:
        """The wait before retry number ``attempts + 1``: ``retry_backoff_ms`` doubling per
        attempt, capped at ``retry_backoff_max_ms``."""
        return int(min(self.retry_backoff_max_ms, self.retry_backoff_ms * 2 ** min(attempts, 30)))
        conflicts = self._idempotence_conflicts()
        if self.enable_idempotence and conflicts:
            raise InvalidConfigError("enable_idempotence: " + "; ".join(conflicts))


def classify(error: BaseException) -> bool:
    """Whether a failed Produce may be retried: retriable broker codes, lost connections and
    timeouts yes; everything else (bad records, too large, unknown codes) no."""
    return isinstance(error, RetriableError)


class AsyncProducer:
    """The asyncio producer (see module doc). Create with ``await AsyncProducer.start(...)``."""

    def __init__(self, client: ClusterClient, config: ProducerConfig) -> None:
        self.config = config
        self._client = client
        self._accumulator = RecordAccumulator(
            batch_bytes_max=config.batch_bytes_max,
            linger_ms=config.linger_ms,
            buffer_bytes_max=config.buffer_bytes_max,
        )
        self._partitioner = DefaultPartitioner()
        self._in_flight: dict[TopicPartitionLike, int] = {}
        self._in_flight_batches: set[ProducerBatch] = set()
        self._tasks: set[asyncio.Task[None]] = set()
        self._wakeup = asyncio.Event()
        self._closing = False
        self._sender: asyncio.Task[None] | None = None
        self._idempotence = IdempotenceState() if config.idempotent else None
        self._fatal: ReplogError | None = None

    @classmethod
    async def start(cls, bootstrap: str | Sequence[str], **config: Any) -> AsyncProducer:
        """A running producer for the cluster at ``bootstrap``; ``config``: ``ProducerConfig``."""
        cfg = ProducerConfig(**config)
        client = ClusterClient.from_bootstrap(
            bootstrap,
            client_id=cfg.client_id,
            request_timeout_ms=cfg.request_timeout_ms + 5_000,
            allow_auto_topic_creation=True,  # as Kafka's producer: the broker's setting decides
        )
        producer = cls(client, cfg)
        producer._sender = asyncio.get_running_loop().create_task(producer._run_sender())
        return producer

    async def __aenter__(self) -> AsyncProducer:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def _partition_count(self, topic: str) -> int:
        deadline = now_ms() + self.config.metadata_wait_ms
        await self._client.refresh_metadata_if_needed()
        while True:
            count = self._client.metadata.partition_count(topic)
            if count:
                return count
            if now_ms() >= deadline:
                code = self._client.metadata.topic_errors.get(
                    topic, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                )
                raise BrokerResponseError(code, f"no metadata for topic {topic!r}")
            await asyncio.sleep(self.config.retry_backoff_ms / 1000)
            with contextlib.suppress(ConnectionLostError, RequestTimeoutError):
                await self._client.refresh_metadata([topic])

    async def send(
        self,
        topic: str,
        value: bytes | None,
        key: bytes | None = None,
        headers: Headers | None = None,
        partition: int | None = None,
        timestamp_ms: int | None = None,
    ) -> asyncio.Future[RecordMetadata]:
        """Queue one record; the returned future completes when it is acknowledged (or fails).
        Raises at once for a closed producer or a full buffer, and after ``metadata_wait_ms``
        for a topic that does not exist (a missing topic is created first when the brokers'
        auto.create.topics.enable allows it)."""
        if self._closing:
            raise ClientClosedError("producer is closed")
        if self._fatal is not None:
            raise self._fatal
        if partition is None:
            count = await self._partition_count(topic)
            partition = self._partitioner.partition(topic, key, count)
        elif partition < 0:
            raise ValueError(f"partition {partition} must be >= 0")
        future: asyncio.Future[RecordMetadata] = asyncio.get_running_loop().create_future()
        record = PendingRecord(
            key=key,
            value=value,
            headers=tuple(headers or ()),
            timestamp_ms=wall_ms() if timestamp_ms is None else timestamp_ms,
            future=future,
        )
        batch = self._accumulator.append((topic, partition), record, now_ms())
        if batch.size_bytes >= self.config.batch_bytes_max or self.config.linger_ms == 0:
            self._wakeup.set()
        elif len(batch.records) == 1:
            self._wakeup.set()  # the sender learns the new linger deadline
        return future

    async def send_and_wait(
        self,
        topic: str,
        value: bytes | None,
        key: bytes | None = None,
        headers: Headers | None = None,
        partition: int | None = None,
    ) -> RecordMetadata:
        """``send`` and await the acknowledgement."""
        return await (await self.send(topic, value, key, headers, partition))

    async def flush(self, timeout_ms: int | None = None) -> None:
        """Send everything queued now and wait until each record is acknowledged or failed
        (at most ``delivery_timeout_ms``); ``FlushTimeoutError`` if ``timeout_ms`` passes first."""
        futures = [r.future for b in self._accumulator.batches() for r in b.records]
        futures += [r.future for b in self._in_flight_batches for r in b.records]
        if not futures:
            return
        self._accumulator.flushing = True
        self._wakeup.set()
        try:
            _, pending = await asyncio.wait(
                futures, timeout=None if timeout_ms is None else timeout_ms / 1000
            )
        finally:
            self._accumulator.flushing = False
        if pending:
            raise FlushTimeoutError(len(pending), timeout_ms or 0)

    async def close(self, *, flush: bool = True, timeout_ms: int | None = None) -> None:
        """Flush (unless ``flush=False``), waiting at most ``timeout_ms``; then records still
        queued or in flight fail with ``ClientClosedError``; stop the sender and close
        connections. Idempotent."""
        if self._sender is None:
            return
        if flush and not self._closing:
            with contextlib.suppress(FlushTimeoutError):
                await self.flush(timeout_ms)
        self._closing = True
        self._accumulator.fail_all(ClientClosedError("producer closed before sending"))
        sender, self._sender = self._sender, None
        sender.cancel()
        for task in [sender, *self._tasks]:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        for batch in list(self._in_flight_batches):
            batch.fail(ClientClosedError("producer closed with the batch in flight"))
        await self._client.close()

    # -- the sender ---------------------------------------------------------------------------

    async def _run_sender(self) -> None:
        # ends on ``_closing`` as well as on cancellation: asyncio.wait_for (Python 3.11) can
        # swallow a cancel that arrives as the wakeup fires, and the wait may now be long (the
        # next delivery timeout)
        while not self._closing:
            blocked = {
                tp
                for tp, count in self._in_flight.items()
                if count >= self.config.in_flight_per_partition_max
            }
            self._expire(now_ms())
            delay_ms = self._accumulator.next_ready_delay_ms(now_ms(), blocked)
            expiry_ms = self._next_expiry_ms(now_ms())
            if expiry_ms is not None:
                delay_ms = expiry_ms if delay_ms is None else min(delay_ms, expiry_ms)
            self._wakeup.clear()
            if delay_ms is None or delay_ms > 0:
                with contextlib.suppress(TimeoutError):
                    timeout = None if delay_ms is None else delay_ms / 1000
                    await asyncio.wait_for(self._wakeup.wait(), timeout)
            else:
                await asyncio.sleep(0)  # let sends and answers in between sends
            try:
                await self._drain_ready()
            except (RetriableError, ProtocolError):
                await asyncio.sleep(self.config.retry_backoff_ms / 1000)
            except ReplogError as exc:  # InitProducerId refused: nothing can be sent
                self._fatal = exc
                self._accumulator.fail_all(exc)

    def _expire(self, now: int) -> None:
        """Fail the records whose delivery timeout has passed: queued batches leave the
        accumulator; an in-flight batch's futures fail now, its answer is still awaited."""
        timeout_ms = self.config.delivery_timeout_ms
        for batch in self._accumulator.expire(now, timeout_ms):
            batch.fail(DeliveryTimeoutError(batch.topic, batch.partition, timeout_ms, None))
            self._accumulator.release(batch)
            if self._idempotence is not None:
                self._idempotence.on_failed(batch)
        for batch in self._in_flight_batches:
            if now - batch.created_ms >= timeout_ms:
                batch.fail(DeliveryTimeoutError(batch.topic, batch.partition, timeout_ms, None))

    def _next_expiry_ms(self, now: int) -> int | None:
        created = [b.created_ms for b in self._accumulator.batches()]
        created += [
            b.created_ms
            for b in self._in_flight_batches
            if not all(r.future.done() for r in b.records)
        ]
        if not created:
            return None
        return max(0, min(created) + self.config.delivery_timeout_ms - now)

    async def _init_producer_id(self, idempotence: IdempotenceState) -> None:
        """Ask a broker for a producer id and epoch (an idempotent producer, no transactional
        id); a retriable refusal raises a ``RetriableError`` (the sender backs off)."""
        request = InitProducerIdRequest(transactional_id=None, transaction_timeout_ms=2**31 - 1)
        response = await self._client.send_any(
            request, InitProducerIdResponse, timeout_ms=self.config.request_timeout_ms
        )
        if response.error_code != ErrorCode.NONE:
            raise error_for_code(response.error_code, "InitProducerId")
        idempotence.set_producer_id(response.producer_id, response.producer_epoch)

    def _may_send(self, tp: TopicPartitionLike) -> bool:
        in_flight = self._in_flight.get(tp, 0)
        if in_flight >= self.config.in_flight_per_partition_max:
            return False
        head = self._accumulator.head(tp)
        idempotence = self._idempotence
        return head is not None and (idempotence is None or idempotence.may_send(head, in_flight))

    async def _drain_ready(self) -> None:
        ready = [tp for tp in self._accumulator.ready(now_ms()) if self._may_send(tp)]
        if not ready:
            return
        idempotence = self._idempotence
        if idempotence is not None and not idempotence.has_producer_id:
            await self._init_producer_id(idempotence)
        metadata = await self._client.refresh_metadata_if_needed()
        by_leader: dict[int, list[ProducerBatch]] = {}
        leaderless = False
        for tp in ready:
            leader = metadata.leader_for(*tp)
            if leader is None:
                leaderless = True
                continue
            head = self._accumulator.head(tp)
            if head is None:
                continue  # expired while metadata was awaited
            in_flight = self._in_flight.get(tp, 0)
            if idempotence is not None and not idempotence.stamp(head, in_flight):
                continue  # old-epoch batches of the partition are still unresolved
            batch = self._accumulator.pop(tp)
            self._in_flight[tp] = self._in_flight.get(tp, 0) + 1
            self._in_flight_batches.add(batch)
            by_leader.setdefault(leader, []).append(batch)
        for leader, batches in by_leader.items():
            task = asyncio.get_running_loop().create_task(self._produce(leader, batches))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)
        if leaderless:
            metadata.mark_stale()
            await asyncio.sleep(self.config.retry_backoff_ms / 1000)
            self._wakeup.set()

    def _request_for(self, batches: list[ProducerBatch]) -> ProduceRequest:
        topics: dict[str, list[PartitionProduceData]] = {}
        for batch in batches:
            records = batch.encode(self.config.compression)
            topics.setdefault(batch.topic, []).append(
                PartitionProduceData(index=batch.partition, records=records)
            )
        return ProduceRequest(
            acks=self.config.acks,
            timeout_ms=self.config.request_timeout_ms,
            topic_data=[TopicProduceData(name=t, partition_data=p) for t, p in topics.items()],
        )

    async def _produce(self, leader: int, batches: list[ProducerBatch]) -> None:
        try:
            request = self._request_for(batches)
            if self.config.acks == 0:
                await self._client.send_no_response(leader, request)
                for batch in batches:
                    self._finish(batch, None, base_offset=-1)
                return
            response = await self._client.send(
                leader,
                request,
                ProduceResponse,
                timeout_ms=self.config.request_timeout_ms + 5_000,
            )
        except ReplogError as exc:
            for batch in batches:
                self._finish(batch, exc)
            return
        except ValueError as exc:  # a record that cannot be encoded
            for batch in batches:
                self._finish(batch, exc)
            return
        self._on_response(response, batches)

    def _on_response(self, response: ProduceResponse, batches: list[ProducerBatch]) -> None:
        results = {(t.name, p.index): p for t in response.responses for p in t.partition_responses}
        for batch in batches:
            result = results.get(batch.tp)
            if result is None:
                self._finish(batch, ProtocolError(f"no Produce result for {batch.tp}"))
            elif result.error_code != ErrorCode.NONE:
                self._client.metadata.on_partition_error(result.error_code)
                error = error_for_code(result.error_code, result.error_message or "")
                self._finish(batch, error)
            else:
                self._finish(
                    batch, None, base_offset=result.base_offset, append_ms=result.log_append_time_ms
                )

    def _finish(
        self,
        batch: ProducerBatch,
        error: BaseException | None,
        *,
        base_offset: int = -1,
        append_ms: int = -1,
    ) -> None:
        """One attempt of ``batch`` ended: complete, retry, or fail it."""
        self._in_flight[batch.tp] -= 1
        if self._in_flight[batch.tp] == 0:
            del self._in_flight[batch.tp]
        self._in_flight_batches.discard(batch)
        idempotence = self._idempotence
        if error is None:
            batch.complete(base_offset, append_ms)
            self._accumulator.release(batch)
            if idempotence is not None:
                idempotence.on_acked(batch)
        elif self._may_retry(batch, error):
            if is_retriable(getattr(error, "error_code", ErrorCode.NETWORK_EXCEPTION)):
                self._client.metadata.mark_stale()
            self._accumulator.reenqueue(batch, now_ms() + self.config.backoff_ms(batch.attempts))
        else:
            timeout_ms = self.config.delivery_timeout_ms
            if classify(error) and now_ms() - batch.created_ms >= timeout_ms:
                error = DeliveryTimeoutError(batch.topic, batch.partition, timeout_ms, error)
            batch.fail(error)
            self._accumulator.release(batch)
            if idempotence is not None:
                idempotence.on_failed(batch)
        self._wakeup.set()

    def _may_retry(self, batch: ProducerBatch, error: BaseException) -> bool:
        """Whether a failed attempt is retried (an idempotent producer's sequence errors are
        judged by ``IdempotenceState.on_error``, which may bump the epoch)."""
        if batch.attempts >= self.config.retries or self._closing:
            return False
        if now_ms() - batch.created_ms >= self.config.delivery_timeout_ms:
            return False
        code = getattr(error, "error_code", None)
        if self._idempotence is not None and batch.has_sequence and code is not None:
            try:
                return self._idempotence.on_error(batch, ErrorCode(code))
            except ValueError:
                return False
        return classify(error)


def _ms(timeout_s: float | None) -> int | None:
    return None if timeout_s is None else max(0, int(timeout_s * 1000))


class Producer:
    """The synchronous producer: an ``AsyncProducer`` on a background event loop.

    ``send`` returns a ``concurrent.futures.Future[RecordMetadata]``; ``close()`` flushes, stops
    the loop and joins its thread. Usable as a context manager.
    """

    def __init__(self, bootstrap: str | Sequence[str], **config: Any) -> None:
        self._loop = LoopThread("replog-producer")
        try:
            self._producer = self._loop.run(AsyncProducer.start(bootstrap, **config))
        except BaseException:
            self._loop.stop()
            raise

    def __enter__(self) -> Producer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    async def _send(
        self,
        topic: str,
        value: bytes | None,
        key: bytes | None,
        headers: Headers | None,
        partition: int | None,
        timestamp_ms: int | None,
    ) -> concurrent.futures.Future[RecordMetadata]:
        inner = await self._producer.send(topic, value, key, headers, partition, timestamp_ms)
        outer: concurrent.futures.Future[RecordMetadata] = concurrent.futures.Future()

        def copy(done: asyncio.Future[RecordMetadata]) -> None:
            if done.cancelled():
                outer.cancel()
            elif (exc := done.exception()) is not None:
                outer.set_exception(exc)
            else:
                outer.set_result(done.result())

        inner.add_done_callback(copy)
        return outer

    def send(
        self,
        topic: str,
        value: bytes | None,
        key: bytes | None = None,
        headers: Headers | None = None,
        partition: int | None = None,
        timestamp_ms: int | None = None,
    ) -> concurrent.futures.Future[RecordMetadata]:
        """Queue one record (see ``AsyncProducer.send``); ``future.result()`` waits for its
        acknowledgement."""
        return self._loop.run(self._send(topic, value, key, headers, partition, timestamp_ms))

    def flush(self, timeout_s: float | None = None) -> None:
        """Wait until every record sent so far is acknowledged or failed (at most the delivery
        timeout); ``FlushTimeoutError`` if ``timeout_s`` passes first."""
        self._loop.run(self._producer.flush(_ms(timeout_s)))

    def close(self, timeout_s: float | None = None, *, flush: bool = True) -> None:
        """Flush (by default, waiting at most ``timeout_s``), fail what is left, close
        connections, stop the loop thread. Idempotent."""
        try:
            with contextlib.suppress(RuntimeError):
                self._loop.run(self._producer.close(flush=flush, timeout_ms=_ms(timeout_s)))
        finally:
            self._loop.stop()
