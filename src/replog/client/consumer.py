"""The asyncio consumer, ``AsyncConsumer`` (``sync_consumer.Consumer`` is its synchronous facade).

Two ways to choose partitions: ``assign`` them (then ``seek`` and ``poll``), or, with a
``group_id``, ``subscribe`` to topics (or a pattern) and let the group divide them among its
members (``group_consumer``: rebalances, ``on_assign`` / ``on_revoke``, ``commit``,
``committed``, auto-commit). Kafka's setting names are accepted too (``kafka_names``:
``bootstrap_servers``, ``auto_offset_reset``, ``enable_auto_commit``, dotted or not).
``pause`` / ``resume`` stop and restart fetching partitions without giving them up; iterating
a consumer polls for ever (or until ``consumer_timeout_ms`` passes without a record).

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
import re
from collections.abc import AsyncIterator, Callable, Iterable, Mapping, Sequence
from typing import Any

import attrs

from replog.client.connection import ClusterClient, now_ms
from replog.client.consumer_config import ConsumerConfig, ResetPolicy
from replog.client.errors import (
    ConnectionLostError,
    LogTruncationError,
    NoOffsetForPartitionError,
    error_for_code,
)
from replog.client.fetching import ColumnSlice, ConsumerRecord, slice_columns
from replog.client.group import GroupClient, OffsetAndMetadata
from replog.client.group_consumer import GroupConsumer, RebalanceCallback
from replog.client.kafka_names import consumer_options
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
    "ConsumerConfig",
    "ConsumerRecord",
    "OffsetAndMetadata",
    "OffsetAndTimestamp",
]

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
        self._paused: set[TopicPartitionLike] = set()
        self._group: GroupConsumer | None = None
        if config.group_id is not None:
            group = GroupClient.connect(
                client.bootstrap,
                config.group_id,
                client_id=config.client_id,
                request_timeout_ms=config.request_timeout_ms,
                retry_backoff_ms=config.retry_backoff_ms,
            )
            self._group = GroupConsumer(
                _Positions(self),
                group,
                config.membership(),
                enable_auto_commit=config.enable_auto_commit,
                auto_commit_interval_ms=config.auto_commit_interval_ms,
            )

    @classmethod
    async def start(
        cls, bootstrap: str | Sequence[str] | None = None, **config: Any
    ) -> AsyncConsumer:
        """A consumer for the cluster at ``bootstrap`` (or ``bootstrap_servers=``); ``config``:
        ``ConsumerConfig`` fields, or Kafka's names for them."""
        bootstrap, options = consumer_options(bootstrap, config)
        cfg = ConsumerConfig(**options)
        timeout_ms = cfg.request_timeout_ms + cfg.fetch_max_wait_ms
        client = ClusterClient.from_bootstrap(
            bootstrap,
            client_id=cfg.client_id,
            request_timeout_ms=timeout_ms,
            metadata_max_age_ms=cfg.metadata_max_age_ms,
        )
        return cls(client, cfg)

    async def __aenter__(self) -> AsyncConsumer:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # -- assignment and positions -------------------------------------------------------------

    def assign(self, partitions: Iterable[TopicPartitionLike]) -> None:
        """Read exactly these partitions; kept ones keep their positions. Not with
        ``subscribe`` (the group assigns partitions then)."""
        if self._group is not None and self._group.subscribed:
            raise InvalidConfigError("assign() and subscribe() cannot be mixed: unsubscribe first")
        self._assign(partitions)

    def _assign(self, partitions: Iterable[TopicPartitionLike]) -> None:
        wanted = [(t, int(p)) for t, p in partitions]
        self._positions = {tp: self._positions.get(tp, _Position()) for tp in wanted}
        self._paused &= set(self._positions)

    def assignment(self) -> list[TopicPartitionLike]:
        """The assigned partitions (by ``assign``, or by the group)."""
        return list(self._positions)

    # -- consumer groups ----------------------------------------------------------------------

    def subscribe(
        self,
        topics: Iterable[str] | str | re.Pattern[str] | None = None,
        *,
        pattern: str | re.Pattern[str] | None = None,
        on_assign: RebalanceCallback | None = None,
        on_revoke: RebalanceCallback | None = None,
    ) -> None:
        """Consume ``topics`` (names; one name starting with "^", or a compiled pattern, is a
        regular expression) or the topics ``pattern`` matches, as a member of ``group_id``.
        The partitions arrive on a poll; ``on_assign`` / ``on_revoke`` are called with them."""
        group = self._require_group("subscribe")
        if isinstance(topics, re.Pattern) or (isinstance(topics, str) and topics.startswith("^")):
            topics, pattern = None, topics
        names = [topics] if isinstance(topics, str) else topics
        compiled = re.compile(pattern) if isinstance(pattern, str) else pattern
        if self._positions and not group.subscribed:
            raise InvalidConfigError("assign() and subscribe() cannot be mixed: assign([]) first")
        group.subscribe(None if names is None else list(names), compiled, on_assign, on_revoke)

    async def unsubscribe(self) -> None:
        """Give the group's partitions up and leave the group."""
        if self._group is not None and self._group.subscribed:
            await self._group.unsubscribe()

    def subscription(self) -> frozenset[str]:
        """The topics subscribed to (a pattern's current matches)."""
        return frozenset() if self._group is None else self._group.subscription

    async def commit(
        self,
        offsets: Mapping[TopicPartitionLike, int | OffsetAndMetadata] | None = None,
        *,
        timeout_ms: int | None = None,
    ) -> None:
        """Commit ``offsets`` for the group (default: the position of every assigned
        partition, the next offset poll would return). Raises ``CommitFailedError`` when the
        group has moved on (rebalance) and the partitions may be someone else's."""
        await self._require_group("commit").commit(offsets, timeout_ms=timeout_ms)

    def commit_async(
        self,
        offsets: Mapping[TopicPartitionLike, int | OffsetAndMetadata] | None = None,
        callback: Callable[[BaseException | None], None] | None = None,
    ) -> asyncio.Task[None]:
        """``commit`` in the background, the offsets taken now; ``callback(error)`` after."""
        chosen = offsets if offsets is not None else self.consumed_offsets()
        task = asyncio.get_running_loop().create_task(self.commit(dict(chosen)))
        if callback is not None:
            task.add_done_callback(lambda t: callback(None if t.cancelled() else t.exception()))
        return task

    async def committed(
        self, partitions: Iterable[TopicPartitionLike], *, timeout_ms: int | None = None
    ) -> dict[TopicPartitionLike, int | None]:
        """The group's committed offset of each partition (None: nothing committed)."""
        found = await self._require_group("committed").committed(partitions, timeout_ms=timeout_ms)
        return dict(found)

    @property
    def group_generation(self) -> tuple[int, str]:
        """(generation, member id) of this member (-1 and "" outside a generation)."""
        group = self._group
        return (-1, "") if group is None else (group.generation, group.member_id)

    def _require_group(self, what: str) -> GroupConsumer:
        if self._group is None:
            raise InvalidConfigError(f"{what} needs a group_id")
        return self._group

    def consumed_offsets(self) -> dict[TopicPartitionLike, OffsetAndMetadata]:
        """The position of every assigned partition that has one, with the leader epoch of
        the record before it: what ``commit()`` commits."""
        return {
            tp: OffsetAndMetadata(pos.offset, pos.offset_epoch)
            for tp, pos in self._positions.items()
            if pos.offset is not None
        }

    def pause(self, partitions: Iterable[TopicPartitionLike]) -> None:
        """Stop fetching these assigned partitions (they stay assigned, positions kept)."""
        self._paused |= {self._key(tp) for tp in partitions}

    def resume(self, partitions: Iterable[TopicPartitionLike]) -> None:
        """Fetch these paused partitions again."""
        self._paused -= {(t, int(p)) for t, p in partitions}

    def paused(self) -> list[TopicPartitionLike]:
        """The paused partitions."""
        return sorted(self._paused)

    def _key(self, tp: TopicPartitionLike) -> TopicPartitionLike:
        key = (tp[0], int(tp[1]))
        if key not in self._positions:
            raise ValueError(f"{tp[0]}-{tp[1]} is not assigned")
        return key

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

    async def poll(
        self, timeout_ms: int = 1000, max_records: int | None = None
    ) -> list[ConsumerRecord]:
        """Records from the assigned partitions, waiting up to ``timeout_ms`` for some.
        Raises ``LogTruncationError`` / ``OffsetOutOfRangeError`` / ``NoOffsetForPartitionError``
        as the module doc says; network trouble is retried until the timeout."""
        records: list[ConsumerRecord] = []
        for column_slice in await self.poll_columns(timeout_ms, max_records):
            records += column_slice.records()
        return records

    async def poll_columns(
        self, timeout_ms: int = 1000, max_records: int | None = None
    ) -> list[ColumnSlice]:
        """``poll`` as columns: the same records (same positions, HW, seeks and errors), one
        ``ColumnSlice`` per fetched batch they came from, in the order ``poll`` returns them.
        No object is built per record. With a group, each round first runs the group's duties
        (``GroupConsumer.before_fetch``: auto-commit, rebalances)."""
        deadline = now_ms() + max(0, timeout_ms)
        limit = self.config.max_poll_records if max_records is None else max_records
        while True:
            group = self._group
            if group is not None and not await group.before_fetch(deadline):
                return []
            try:
                await self._prepare()
                remaining = max(0, deadline - now_ms())
                wait_ms = min(self.config.fetch_max_wait_ms, remaining)
                slices = await self._fetch_once(wait_ms, limit)
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
            if pos.offset is not None and not pos.needs_validation and tp not in self._paused
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

    async def __aiter__(self) -> AsyncIterator[ConsumerRecord]:
        """Every record, polling for ever (or until ``consumer_timeout_ms`` passes without
        one)."""
        idle_ms = self.config.consumer_timeout_ms
        last_ms = now_ms()
        while True:
            records = await self.poll(timeout_ms=min(1000, idle_ms) if idle_ms else 1000)
            for record in records:
                yield record
            if records:
                last_ms = now_ms()
            elif idle_ms is not None and now_ms() - last_ms >= idle_ms:
                return

    async def close(self) -> None:
        """Leave the group (committing first with auto-commit) and close every connection."""
        try:
            if self._group is not None:
                await self._group.close()
        finally:
            await self._client.close()

    # -- what the group side reads (``group_consumer.PositionOwner``) ------------------------

    async def partition_counts(self, topics: set[str]) -> dict[str, int]:
        """Partition counts of the existing ``topics``, from fresh metadata."""
        if not topics:
            return {}
        metadata = await self._client.refresh_metadata(sorted(topics))
        counts = {t: metadata.partition_count(t) for t in topics}
        return {t: c for t, c in counts.items() if c}

    async def topic_names(self) -> list[str]:
        """Every topic name (all-topic metadata, refreshed when stale or old)."""
        metadata = await self._client.refresh_metadata_if_needed()
        if not metadata.topics and metadata.updated_ms is not None:
            metadata = await self._client.refresh_metadata()
        return sorted(metadata.topics)


class _Positions:
    """``AsyncConsumer`` as its ``GroupConsumer`` sees it (``assign`` there is the group's)."""

    def __init__(self, consumer: AsyncConsumer) -> None:
        self._consumer = consumer

    def assign(self, partitions: Iterable[TopicPartitionLike]) -> None:
        self._consumer._assign(partitions)

    def seek(self, tp: TopicPartitionLike, offset: int) -> None:
        self._consumer.seek(tp, offset)

    def consumed_offsets(self) -> dict[tuple[str, int], OffsetAndMetadata]:
        return {(t, int(p)): o for (t, p), o in self._consumer.consumed_offsets().items()}

    async def partition_counts(self, topics: set[str]) -> dict[str, int]:
        return await self._consumer.partition_counts(topics)

    async def topic_names(self) -> list[str]:
        return await self._consumer.topic_names()
