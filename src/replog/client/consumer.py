"""The consumer: ``AsyncConsumer`` (asyncio) and ``Consumer`` (synchronous facade).

Manual assignment only (no consumer groups): ``assign`` partitions, ``seek``, then ``poll``.
``poll`` sends Fetch requests (read_uncommitted, so it reads up to the high watermark) to each
partition's leader, long-polling up to ``fetch_max_wait_ms`` for data, and returns records in
offset order per partition.

Positions and leaders (KIP-320):

- A position without an offset (just assigned, ``seek_to_beginning/end``, out of range) is reset
  with ListOffsets by ``auto_reset``: "earliest", "latest" (default, as Kafka), or "none"
  (``NoOffsetForPartitionError`` / ``OffsetOutOfRangeError`` instead).
- Every Fetch carries the leader epoch from metadata; FENCED_LEADER_EPOCH, NOT_LEADER,
  UNKNOWN_LEADER_EPOCH and lost connections refresh metadata and the consumer follows the new
  leader.
- When a partition's leader epoch changes, the position is **validated** before fetching again:
  OffsetsForLeaderEpoch asks the new leader where the epoch of the last consumed record ends.
  If it ends below the position, the log was truncated (an unclean election dropped records the
  consumer already returned). With ``auto_reset="none"`` poll raises ``LogTruncationError``
  carrying ``{tp: (position, end_offset)}`` and the position stays put. Otherwise the consumer
  logs nothing, and, like Kafka, moves the position back to the divergence point ``end_offset``
  (not to earliest/latest) so it re-reads what the new leader wrote there; when the leader
  cannot say where the epoch ended, the position is reset by ``auto_reset``.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Literal

import attrs

from replog.client._sync import LoopThread
from replog.client.connection import ClusterClient, now_ms
from replog.client.errors import (
    ConnectionLostError,
    LogTruncationError,
    NoOffsetForPartitionError,
    error_for_code,
)
from replog.client.fetching import ColumnSlice, ConsumerRecord, slice_columns
from replog.client.offsets import OffsetAndTimestamp, ask_leader, offsets_for_times
from replog.errors import (
    ErrorCode,
    InvalidConfigError,
    OffsetOutOfRangeError,
    RequestTimeoutError,
)
from replog.log.records import Buffer
from replog.protocol.messages import (
    EARLIEST_TIMESTAMP,
    LATEST_TIMESTAMP,
    FetchPartition,
    FetchRequest,
    FetchResponse,
    FetchResponsePartition,
    FetchTopic,
    OffsetForLeaderEpochRequest,
    OffsetForLeaderEpochResponse,
    OffsetForLeaderPartition,
    OffsetForLeaderTopic,
)
from replog.topics import TopicPartitionLike

__all__ = [
    "AsyncConsumer",
    "ColumnSlice",
    "Consumer",
    "ConsumerConfig",
    "ConsumerRecord",
    "OffsetAndTimestamp",
]

ResetPolicy = Literal["earliest", "latest", "none"]
_LEADER_CODES = frozenset(
    {
        ErrorCode.NOT_LEADER_OR_FOLLOWER,
        ErrorCode.UNKNOWN_LEADER_EPOCH,
        ErrorCode.LEADER_NOT_AVAILABLE,
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        ErrorCode.KAFKA_STORAGE_ERROR,
        ErrorCode.REPLICA_NOT_AVAILABLE,
    }
)


@attrs.frozen(kw_only=True)
class ConsumerConfig:
    """Consumer settings (Kafka's names in snake_case, units last)."""

    auto_reset: ResetPolicy = "latest"
    fetch_max_wait_ms: int = 500
    fetch_min_bytes: int = 1
    fetch_bytes_max: int = 50 * 1024 * 1024
    partition_fetch_bytes_max: int = 1024 * 1024
    request_timeout_ms: int = 30_000
    retry_backoff_ms: int = 100
    client_id: str = "replog-consumer"

    def __attrs_post_init__(self) -> None:
        if self.auto_reset not in ("earliest", "latest", "none"):
            raise InvalidConfigError(f"auto_reset must be earliest/latest/none: {self.auto_reset}")
        if self.fetch_max_wait_ms < 0 or self.partition_fetch_bytes_max < 1:
            raise InvalidConfigError("fetch_max_wait_ms >= 0 and partition_fetch_bytes_max >= 1")


@attrs.define
class _Position:
    """Where a partition is read from. ``offset`` None: reset with ``reset`` before fetching."""

    offset: int | None = None
    reset: ResetPolicy | None = None
    offset_epoch: int = -1  # leader epoch of the last consumed batch
    leader_epoch: int = -1  # leader epoch the position was last validated or fetched under
    needs_validation: bool = False
    high_watermark: int = -1


class AsyncConsumer:
    """The asyncio consumer (see module doc). Create with ``await AsyncConsumer.start(...)``."""

    def __init__(self, client: ClusterClient, config: ConsumerConfig) -> None:
        self.config = config
        self._client = client
        self._positions: dict[TopicPartitionLike, _Position] = {}

    @classmethod
    async def start(cls, bootstrap: str | Sequence[str], **config: Any) -> AsyncConsumer:
        """A consumer for the cluster at ``bootstrap``; ``config``: ``ConsumerConfig`` fields."""
        cfg = ConsumerConfig(**config)
        timeout_ms = cfg.request_timeout_ms + cfg.fetch_max_wait_ms
        client = ClusterClient.from_bootstrap(
            bootstrap, client_id=cfg.client_id, request_timeout_ms=timeout_ms
        )
        return cls(client, cfg)

    async def __aenter__(self) -> AsyncConsumer:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # -- assignment and positions -------------------------------------------------------------

    def assign(self, partitions: Iterable[TopicPartitionLike]) -> None:
        """Read exactly these partitions; kept ones keep their positions."""
        wanted = [(t, int(p)) for t, p in partitions]
        self._positions = {tp: self._positions.get(tp, _Position()) for tp in wanted}

    def assignment(self) -> list[TopicPartitionLike]:
        """The assigned partitions."""
        return list(self._positions)

    def _pos(self, tp: TopicPartitionLike) -> _Position:
        pos = self._positions.get((tp[0], int(tp[1])))
        if pos is None:
            raise ValueError(f"{tp[0]}-{tp[1]} is not assigned")
        return pos

    def seek(self, tp: TopicPartitionLike, offset: int) -> None:
        """Read ``tp`` from ``offset`` on the next poll."""
        if offset < 0:
            raise ValueError(f"offset {offset} must be >= 0")
        self._positions[(tp[0], int(tp[1]))] = attrs.evolve(
            self._pos(tp), offset=offset, reset=None, offset_epoch=-1, needs_validation=False
        )

    def seek_to_beginning(self, partitions: Iterable[TopicPartitionLike] | None = None) -> None:
        """Read from the log start offset (resolved lazily, on the next poll or position)."""
        for tp in self._positions if partitions is None else partitions:
            self._pos(tp).offset, self._pos(tp).reset = None, "earliest"

    def seek_to_end(self, partitions: Iterable[TopicPartitionLike] | None = None) -> None:
        """Read from the high watermark (resolved lazily)."""
        for tp in self._positions if partitions is None else partitions:
            self._pos(tp).offset, self._pos(tp).reset = None, "latest"

    async def position(self, tp: TopicPartitionLike) -> int:
        """The offset of the next record poll returns for ``tp`` (resets it first if needed)."""
        pos = self._pos(tp)
        deadline = now_ms() + self.config.request_timeout_ms
        while pos.offset is None:
            await self._prepare()
            if pos.offset is None:
                if now_ms() >= deadline:
                    raise RequestTimeoutError(f"could not find a position for {tp[0]}-{tp[1]}")
                await asyncio.sleep(self.config.retry_backoff_ms / 1000)
        return pos.offset

    async def offsets_for_times(
        self, timestamps: Mapping[TopicPartitionLike, int]
    ) -> dict[TopicPartitionLike, OffsetAndTimestamp | None]:
        """Per partition, the earliest offset whose record timestamp is >= the given time (ms);
        None where no such record is below the HW. Any partition, assigned or not; seek to the
        answer to read from that time on."""
        return await offsets_for_times(
            self._client,
            timestamps,
            timeout_ms=self.config.request_timeout_ms,
            backoff_ms=self.config.retry_backoff_ms,
        )

    def high_watermark(self, tp: TopicPartitionLike) -> int:
        """The HW the last fetch of ``tp`` reported (-1: none yet)."""
        return self._pos(tp).high_watermark

    # -- poll ---------------------------------------------------------------------------------

    async def poll(self, timeout_ms: int = 1000, max_records: int = 500) -> list[ConsumerRecord]:
        """Records from the assigned partitions, waiting up to ``timeout_ms`` for some.
        Raises ``LogTruncationError`` / ``OffsetOutOfRangeError`` / ``NoOffsetForPartitionError``
        as the module doc says; network trouble is retried until the timeout."""
        records: list[ConsumerRecord] = []
        for column_slice in await self.poll_columns(timeout_ms, max_records):
            records += column_slice.records()
        return records

    async def poll_columns(
        self, timeout_ms: int = 1000, max_records: int = 500
    ) -> list[ColumnSlice]:
        """``poll`` as columns: the same records (same positions, HW, seeks and errors), one
        ``ColumnSlice`` per fetched batch they came from, in the order ``poll`` returns them.
        No object is built per record."""
        deadline = now_ms() + max(0, timeout_ms)
        while True:
            try:
                await self._prepare()
                remaining = max(0, deadline - now_ms())
                wait_ms = min(self.config.fetch_max_wait_ms, remaining)
                slices = await self._fetch_once(wait_ms, max_records)
            except (ConnectionLostError, RequestTimeoutError):
                self._client.metadata.mark_stale()
                slices = []
                await asyncio.sleep(min(self.config.retry_backoff_ms, remaining) / 1000)
            if slices or now_ms() >= deadline:
                return slices

    async def _prepare(self) -> None:
        """Refresh metadata, note leader-epoch changes, reset and validate positions."""
        metadata = await self._client.refresh_metadata_if_needed()
        for (topic, partition), pos in self._positions.items():
            epoch = metadata.leader_epoch_for(topic, partition)
            if epoch > pos.leader_epoch:
                if pos.offset is not None and pos.offset_epoch >= 0 and pos.leader_epoch >= 0:
                    pos.needs_validation = True
                pos.leader_epoch = epoch
        to_reset = [tp for tp, pos in self._positions.items() if pos.offset is None]
        if to_reset:
            await self._reset_positions(to_reset)
        to_validate = [tp for tp, pos in self._positions.items() if pos.needs_validation]
        if to_validate:
            await self._validate_positions(to_validate)

    def _by_leader(self, tps: Iterable[TopicPartitionLike]) -> dict[int, list[TopicPartitionLike]]:
        groups: dict[int, list[TopicPartitionLike]] = {}
        for tp in tps:
            leader = self._client.metadata.leader_for(*tp)
            if leader is None:
                self._client.metadata.mark_stale()
            else:
                groups.setdefault(leader, []).append(tp)
        return groups

    async def _reset_positions(self, tps: list[TopicPartitionLike]) -> None:
        for leader, group in self._by_leader(tps).items():
            queries: dict[TopicPartitionLike, tuple[int, int]] = {}
            for tp in group:
                reset_pos = self._positions[tp]
                policy = reset_pos.reset or self.config.auto_reset
                if policy == "none":
                    raise NoOffsetForPartitionError(*tp)
                ts = EARLIEST_TIMESTAMP if policy == "earliest" else LATEST_TIMESTAMP
                queries[tp] = (ts, reset_pos.leader_epoch)
            for tp, p in (await ask_leader(self._client, leader, queries)).items():
                pos = self._positions.get(tp)
                if pos is None:
                    continue
                if p.error_code != ErrorCode.NONE:
                    self._on_partition_error(p.error_code)
                    continue
                pos.offset, pos.reset, pos.needs_validation = p.offset, None, False
                pos.offset_epoch = -1

    async def _validate_positions(self, tps: list[TopicPartitionLike]) -> None:
        diverged: dict[TopicPartitionLike, tuple[int, int]] = {}
        for leader, group in self._by_leader(tps).items():
            topics: dict[str, list[OffsetForLeaderPartition]] = {}
            for tp in group:
                known = self._positions[tp]
                topics.setdefault(tp[0], []).append(
                    OffsetForLeaderPartition(
                        partition=tp[1],
                        current_leader_epoch=known.leader_epoch,
                        leader_epoch=known.offset_epoch,
                    )
                )
            request = OffsetForLeaderEpochRequest(
                replica_id=-1,
                topics=[OffsetForLeaderTopic(topic=t, partitions=p) for t, p in topics.items()],
            )
            response = await self._client.send(leader, request, OffsetForLeaderEpochResponse)
            for topic in response.topics:
                for p in topic.partitions:
                    tp = (topic.topic, p.partition)
                    pos = self._positions.get(tp)
                    if pos is None or pos.offset is None:
                        continue
                    if p.error_code != ErrorCode.NONE:
                        self._on_partition_error(p.error_code)
                        continue
                    divergence = self._check_epoch_end(tp, pos, p.leader_epoch, p.end_offset)
                    if divergence is not None:
                        diverged[tp] = divergence
        if diverged:
            raise LogTruncationError(diverged)

    def _check_epoch_end(
        self, tp: TopicPartitionLike, pos: _Position, epoch: int, end_offset: int
    ) -> tuple[int, int] | None:
        """Apply the leader's answer for our last consumed epoch; the divergence to raise for
        ``auto_reset="none"``, else None (position validated, moved back, or reset)."""
        offset = pos.offset
        if offset is None:
            return None
        undefined = end_offset < 0 or epoch < 0
        if not undefined and end_offset >= offset:
            pos.needs_validation = False
            return None
        if self.config.auto_reset == "none":
            return (offset, -1 if undefined else end_offset)
        pos.needs_validation = False
        if undefined:
            pos.offset, pos.reset = None, None
        else:
            pos.offset, pos.offset_epoch = end_offset, epoch
        return None

    def _on_partition_error(self, code: int) -> None:
        if code in _LEADER_CODES or code == ErrorCode.FENCED_LEADER_EPOCH:
            self._client.metadata.mark_stale()
            return
        raise error_for_code(code)

    async def _fetch_once(self, wait_ms: int, max_records: int) -> list[ColumnSlice]:
        fetchable = [
            tp
            for tp, pos in self._positions.items()
            if pos.offset is not None and not pos.needs_validation
        ]
        groups = self._by_leader(fetchable)
        if not groups:
            await asyncio.sleep(min(wait_ms, self.config.retry_backoff_ms) / 1000)
            return []
        responses = await asyncio.gather(
            *(self._fetch_from(leader, group, wait_ms) for leader, group in groups.items()),
            return_exceptions=True,
        )
        slices: list[ColumnSlice] = []
        taken = 0
        for response in responses:
            if isinstance(response, (ConnectionLostError, RequestTimeoutError)):
                self._client.metadata.mark_stale()
                continue
            if isinstance(response, BaseException):
                raise response
            for topic in response.responses:
                for part in topic.partitions:
                    fetched = self._on_fetched(topic.topic, part, max_records - taken)
                    taken += sum(map(len, fetched))
                    slices += fetched
        return slices

    async def _fetch_from(
        self, leader: int, group: list[TopicPartitionLike], wait_ms: int
    ) -> FetchResponse:
        topics: dict[str, list[FetchPartition]] = {}
        for tp in group:
            pos = self._positions[tp]
            fetch_offset = pos.offset if pos.offset is not None else 0
            topics.setdefault(tp[0], []).append(
                FetchPartition(
                    partition=tp[1],
                    current_leader_epoch=pos.leader_epoch,
                    fetch_offset=fetch_offset,
                    partition_max_bytes=self.config.partition_fetch_bytes_max,
                )
            )
        request = FetchRequest(
            replica_id=-1,
            max_wait_ms=wait_ms,
            min_bytes=self.config.fetch_min_bytes,
            max_bytes=self.config.fetch_bytes_max,
            isolation_level=0,
            session_id=0,
            session_epoch=-1,
            topics=[FetchTopic(topic=t, partitions=p) for t, p in topics.items()],
            forgotten_topics_data=[],
        )
        timeout_ms = self.config.request_timeout_ms + wait_ms
        return await self._client.send(leader, request, FetchResponse, timeout_ms=timeout_ms)

    def _on_fetched(
        self, topic: str, part: FetchResponsePartition, budget: int
    ) -> list[ColumnSlice]:
        tp = (topic, part.partition_index)
        pos = self._positions.get(tp)
        if pos is None or pos.offset is None or pos.needs_validation:
            return []  # unassigned or moved while the fetch was out: drop the answer
        code = part.error_code
        if code == ErrorCode.OFFSET_OUT_OF_RANGE:
            if self.config.auto_reset == "none":
                raise OffsetOutOfRangeError(pos.offset, part.log_start_offset, part.high_watermark)
            pos.offset = None
            return []
        if code == ErrorCode.FENCED_LEADER_EPOCH and pos.offset_epoch >= 0:
            pos.needs_validation = True
        if code != ErrorCode.NONE:
            self._on_partition_error(code)
            return []
        pos.high_watermark = part.high_watermark
        records = part.records
        if budget <= 0 or not isinstance(records, (bytes, bytearray, memoryview)):
            return []
        return self._take_records(topic, tp[1], records, pos, budget)

    def _take_records(
        self, topic: str, partition: int, records: Buffer, pos: _Position, budget: int
    ) -> list[ColumnSlice]:
        """Decode up to ``budget`` records of a fetch answer from ``pos.offset`` on and move
        ``pos`` past them (offset, and the leader epoch of the last batch). The one step a
        reader with another record layout overrides (``replog.spark.reading``); positions,
        epochs, validation and errors stay the consumer's."""
        assert pos.offset is not None
        sliced = slice_columns(topic, partition, records, pos.offset, budget)
        pos.offset = sliced.next_offset
        if sliced.last_epoch >= 0:
            pos.offset_epoch = sliced.last_epoch
        return sliced.slices

    async def close(self) -> None:
        """Close every connection."""
        await self._client.close()


class Consumer:
    """The synchronous consumer: an ``AsyncConsumer`` on a background event loop."""

    def __init__(self, bootstrap: str | Sequence[str], **config: Any) -> None:
        self._loop = LoopThread("replog-consumer")
        try:
            self._consumer = self._loop.run(AsyncConsumer.start(bootstrap, **config))
        except BaseException:
            self._loop.stop()
            raise

    def __enter__(self) -> Consumer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    async def _call(self, fn: Any, *args: Any) -> Any:
        return fn(*args)

    def assign(self, partitions: Iterable[TopicPartitionLike]) -> None:
        """See ``AsyncConsumer.assign``."""
        self._loop.run(self._call(self._consumer.assign, list(partitions)))

    def assignment(self) -> list[TopicPartitionLike]:
        """See ``AsyncConsumer.assignment``."""
        result: list[TopicPartitionLike] = self._loop.run(self._call(self._consumer.assignment))
        return result

    def seek(self, tp: TopicPartitionLike, offset: int) -> None:
        """See ``AsyncConsumer.seek``."""
        self._loop.run(self._call(self._consumer.seek, tp, offset))

    def seek_to_beginning(self, partitions: Iterable[TopicPartitionLike] | None = None) -> None:
        """See ``AsyncConsumer.seek_to_beginning``."""
        tps = None if partitions is None else list(partitions)
        self._loop.run(self._call(self._consumer.seek_to_beginning, tps))

    def seek_to_end(self, partitions: Iterable[TopicPartitionLike] | None = None) -> None:
        """See ``AsyncConsumer.seek_to_end``."""
        tps = None if partitions is None else list(partitions)
        self._loop.run(self._call(self._consumer.seek_to_end, tps))

    def position(self, tp: TopicPartitionLike) -> int:
        """See ``AsyncConsumer.position``."""
        return self._loop.run(self._consumer.position(tp))

    def offsets_for_times(
        self, timestamps: Mapping[TopicPartitionLike, int]
    ) -> dict[TopicPartitionLike, OffsetAndTimestamp | None]:
        """See ``AsyncConsumer.offsets_for_times``."""
        return self._loop.run(self._consumer.offsets_for_times(timestamps))

    def poll(self, timeout_ms: int = 1000, max_records: int = 500) -> list[ConsumerRecord]:
        """See ``AsyncConsumer.poll``."""
        return self._loop.run(self._consumer.poll(timeout_ms, max_records))

    def poll_columns(self, timeout_ms: int = 1000, max_records: int = 500) -> list[ColumnSlice]:
        """See ``AsyncConsumer.poll_columns``."""
        return self._loop.run(self._consumer.poll_columns(timeout_ms, max_records))

    def close(self) -> None:
        """Close connections and stop the loop thread. Idempotent."""
        try:
            with contextlib.suppress(RuntimeError):
                self._loop.run(self._consumer.close())
        finally:
            self._loop.stop()
