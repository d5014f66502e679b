"""Reading planned ranges from a replog cluster over TCP (no pyspark import).

Spark runs every hook of a Python data source, and every RDD task, in a separate Python process,
so nothing here holds an in-process cluster: each function takes a bootstrap string and opens
its own client.

- ``AdminOffsetSource`` is the ``OffsetSource`` the planner uses against a live cluster: partition
  lists from metadata, log start offsets from ListOffsets "earliest", HWs from "latest".
- ``read_range_arrays`` reads one ``OffsetRange`` with an ``AsyncConsumer`` (assign + seek,
  ``auto_reset`` = "none") on an event loop of the calling thread and yields the records of each
  fetch answer as ``RecordArrays`` (numpy columns, ``replog.spark.arrays``), never past
  ``until_offset``. Offsets below the log start (retention, deleteRecords) raise
  ``DataLossError``; with ``fail_on_data_loss=False`` the reader skips to the log start and
  warns, as Spark's Kafka source does. The DataFrame source turns the arrays into Arrow arrays,
  the RDD into ``RddRecord`` tuples.
- ``read_range`` is the same read as ``ConsumerRecord`` lists.
- ``RddRecord`` is what the RDD path yields: (topic, partition, offset, timestamp, key, value,
  headers).
"""

from __future__ import annotations

import asyncio
import warnings
from collections.abc import Collection, Iterator, Mapping, Sequence
from itertools import repeat
from typing import Any, NamedTuple

from replog.client import Admin, AsyncConsumer, ConsumerConfig, ConsumerRecord
from replog.client.connection import ClusterClient, now_ms
from replog.client.errors import ConnectionLostError
from replog.client.fetching import ColumnSlice, consumer_record
from replog.clock import monotonic_s
from replog.errors import OffsetOutOfRangeError, ReplogError, RequestTimeoutError
from replog.log.records import Buffer
from replog.spark.arrays import RecordArrays, slice_arrays
from replog.spark.ranges import DataLossError, DataLossWarning, OffsetRange, TopicPartition

__all__ = [
    "AdminOffsetSource",
    "ReadTimeoutError",
    "RddRecord",
    "read_range",
    "read_range_arrays",
    "replica_hosts",
]

READ_CHUNK_RECORDS = 10_000
"""Records per chunk of ``read_range``."""
FETCH_BYTES = 8 * 1024 * 1024
"""Bytes per fetch answer of the Spark readers (``partition_fetch_bytes_max``). Every record
of an answer is used (none is dropped to be fetched again), so this bounds memory per task
(about 75k records of 100 bytes) rather than trading against refetches."""


class RddRecord(NamedTuple):
    """One record of an RDD built by ``create_rdd``."""

    topic: str
    partition: int
    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...]


class ReadTimeoutError(ReplogError):
    """A range could not be read to its end: no progress for ``poll_timeout_ms``."""


class AdminOffsetSource:
    """An ``OffsetSource`` backed by ``replog.client.Admin`` (one connection set, reused)."""

    def __init__(self, bootstrap: str, **admin_options: Any) -> None:
        self.bootstrap = bootstrap
        self.admin = Admin(bootstrap, **admin_options)

    def __enter__(self) -> AdminOffsetSource:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Close the admin client."""
        self.admin.close()

    def list_partitions(self, topics: Collection[str] | None = None) -> Mapping[str, Sequence[int]]:
        """Partition ids per existing topic (all topics when ``topics`` is None)."""
        names = self.admin.list_topics()
        wanted = names if topics is None else [t for t in topics if t in set(names)]
        if not wanted:
            return {}
        described = self.admin.describe_topics(wanted)
        return {name: [p.partition for p in d.partitions] for name, d in described.items()}

    def log_start_offsets(
        self, partitions: Collection[TopicPartition]
    ) -> Mapping[TopicPartition, int]:
        """ListOffsets "earliest" for every partition, in one round per leader."""
        return self._list(partitions, "earliest")

    def high_watermarks(
        self, partitions: Collection[TopicPartition]
    ) -> Mapping[TopicPartition, int]:
        """ListOffsets "latest" (the HW) for every partition."""
        return self._list(partitions, "latest")

    def _list(
        self, partitions: Collection[TopicPartition], which: str
    ) -> dict[TopicPartition, int]:
        if not partitions:
            return {}
        answer = self.admin.list_offsets([(tp[0], tp[1]) for tp in partitions], which)
        return {TopicPartition(t, p): offset for (t, p), offset in answer.items()}


def replica_hosts(
    bootstrap: str, partitions: Collection[TopicPartition]
) -> dict[TopicPartition, list[str]]:
    """Hosts of each partition's replicas, leader first (for RDD preferred locations).

    Broker addresses come from ``Admin.describe_cluster``; replicas on brokers it does not list
    (offline) are left out, and so are partitions with no listed replica.
    """
    with Admin(bootstrap) as admin:
        topics = sorted({tp.topic for tp in partitions})
        described = admin.describe_topics(topics)
        brokers = {b.broker_id: b.host for b in admin.describe_cluster().brokers}
    hosts: dict[TopicPartition, list[str]] = {}
    for tp in partitions:
        desc = described[tp.topic].partitions[tp.partition]
        order = [desc.leader, *[r for r in desc.replicas if r != desc.leader]]
        found = [brokers[b] for b in order if b in brokers]
        if found:
            hosts[tp] = list(dict.fromkeys(found))
    return hosts


def read_range(
    bootstrap: str,
    offset_range: OffsetRange,
    *,
    fail_on_data_loss: bool = True,
    chunk_records: int = READ_CHUNK_RECORDS,
    poll_timeout_ms: int = 120_000,
    **consumer_config: Any,
) -> Iterator[list[ConsumerRecord]]:
    """Yield the records of ``[from_offset, until_offset)`` in chunks of at most
    ``chunk_records``, stopping at ``until_offset`` (records past it are never returned).

    Gaps (control batches, compaction) are skipped. Offsets below the log start raise
    ``DataLossError`` or, with ``fail_on_data_loss=False``, are skipped with a
    ``DataLossWarning``. No progress for ``poll_timeout_ms`` raises ``ReadTimeoutError``.
    """
    chunk_records = max(1, chunk_records)
    pending: list[ConsumerRecord] = []
    for pieces in read_range_arrays(
        bootstrap,
        offset_range,
        fail_on_data_loss=fail_on_data_loss,
        poll_timeout_ms=poll_timeout_ms,
        **consumer_config,
    ):
        for arrays in pieces:
            pending += map(
                consumer_record,
                repeat(arrays.topic),
                repeat(arrays.partition),
                arrays.offsets.tolist(),
                arrays.timestamps.tolist(),
                arrays.keys.to_list(),
                arrays.values.to_list(),
                arrays.header_list(),
                repeat(arrays.leader_epoch),
            )
        while len(pending) >= chunk_records:
            yield pending[:chunk_records]
            del pending[:chunk_records]
    if pending:
        yield pending


class _ArrayConsumer(AsyncConsumer):
    """An ``AsyncConsumer`` whose fetch answers become ``RecordArrays`` (``slice_arrays``)
    instead of ``ColumnSlice``s, never past ``until_offset``.

    It replaces the consumer's private per-partition hook ``_on_fetched`` (same rules, another
    decoder) and polls through its private ``_prepare`` / ``_fetch_once``, so positions,
    leader epochs, position validation and errors stay the consumer's own. If those hooks
    change shape, tests/spark fail loudly rather than reading wrongly.
    """

    def __init__(self, client: ClusterClient, config: ConsumerConfig) -> None:
        super().__init__(client, config)
        self._fetched: list[RecordArrays] = []
        self._until_offset = 0

    @classmethod
    def create(cls, bootstrap: str, **config: Any) -> _ArrayConsumer:
        """``AsyncConsumer.start`` for this class (connections open on first use)."""
        cfg = ConsumerConfig(**config)
        client = ClusterClient.from_bootstrap(
            bootstrap,
            client_id=cfg.client_id,
            request_timeout_ms=cfg.request_timeout_ms + cfg.fetch_max_wait_ms,
        )
        return cls(client, cfg)

    async def poll_arrays(self, timeout_ms: int, until_offset: int) -> list[RecordArrays]:
        """``poll_columns`` with ``RecordArrays``, cut at ``until_offset``."""
        self._until_offset = until_offset
        deadline = now_ms() + max(0, timeout_ms)
        while True:
            try:
                await self._prepare()
                remaining = max(0, deadline - now_ms())
                await self._fetch_once(min(self.config.fetch_max_wait_ms, remaining), 1 << 62)
            except (ConnectionLostError, RequestTimeoutError):
                self._client.metadata.mark_stale()
                await asyncio.sleep(min(self.config.retry_backoff_ms, remaining) / 1000)
            fetched, self._fetched = self._fetched, []
            if fetched or now_ms() >= deadline:
                return fetched

    def _take_records(
        self, topic: str, partition: int, records: Buffer, pos: Any, budget: int
    ) -> list[ColumnSlice]:
        """Decode into ``RecordArrays`` (kept in ``_fetched``), cut at ``until_offset``; the
        consumer's own rules handle positions, epochs and errors."""
        sliced = slice_arrays(topic, partition, records, pos.offset, self._until_offset)
        pos.offset = sliced.next_offset
        if sliced.last_epoch >= 0:
            pos.offset_epoch = sliced.last_epoch
        self._fetched += sliced.pieces
        return []


def read_range_arrays(
    bootstrap: str,
    offset_range: OffsetRange,
    *,
    fail_on_data_loss: bool = True,
    poll_timeout_ms: int = 120_000,
    **consumer_config: Any,
) -> Iterator[list[RecordArrays]]:
    """``read_range`` as columns: each item is the ``RecordArrays`` of one fetch answer (one
    per batch, at most ``partition_fetch_bytes_max`` of records), cut at ``until_offset``;
    same semantics. Runs its own event loop in the calling thread: no loop thread, and no
    record fetched is dropped and fetched again."""
    r = offset_range
    if not r.is_resolved:
        raise ValueError(f"{r} is unresolved; plan it with resolve_ranges first")
    if r.from_offset >= r.until_offset:
        return
    config: dict[str, Any] = {
        "auto_reset": "none",
        "partition_fetch_bytes_max": FETCH_BYTES,
        "fetch_bytes_max": FETCH_BYTES,
        "fetch_max_wait_ms": 100,
        "client_id": "replog-spark",
        **consumer_config,
    }
    loop = asyncio.new_event_loop()
    try:
        consumer = _ArrayConsumer.create(bootstrap, **config)
        try:
            yield from _read_loop(loop, consumer, r, fail_on_data_loss, poll_timeout_ms)
        finally:
            loop.run_until_complete(consumer.close())
    finally:
        loop.close()


def _read_loop(
    loop: asyncio.AbstractEventLoop,
    consumer: _ArrayConsumer,
    r: OffsetRange,
    fail_on_data_loss: bool,
    poll_timeout_ms: int,
) -> Iterator[list[RecordArrays]]:
    tp = (r.topic, r.partition)
    consumer.assign([tp])
    consumer.seek(tp, r.from_offset)
    position = r.from_offset
    last_progress = monotonic_s()
    while position < r.until_offset:
        try:
            pieces = loop.run_until_complete(consumer.poll_arrays(500, r.until_offset))
        except OffsetOutOfRangeError as error:
            position = _skip_lost(loop, consumer, r, position, error, fail_on_data_loss)
            consumer.seek(tp, min(position, r.until_offset))
            continue
        if pieces:
            last_progress = monotonic_s()
            if pieces[0].offsets[0] > position and position == r.from_offset:
                _check_start_gap(loop, consumer, r, fail_on_data_loss)
            yield pieces
            position = int(pieces[-1].offsets[-1]) + 1
            continue
        new_position = loop.run_until_complete(consumer.position(tp))
        if new_position > position:
            position, last_progress = new_position, monotonic_s()
        elif (monotonic_s() - last_progress) * 1000 > poll_timeout_ms:
            raise ReadTimeoutError(
                f"{r.topic}-{r.partition}: no progress at offset {position} for "
                f"{poll_timeout_ms} ms while reading up to {r.until_offset}"
            )


def _skip_lost(
    loop: asyncio.AbstractEventLoop,
    consumer: AsyncConsumer,
    r: OffsetRange,
    position: int,
    error: OffsetOutOfRangeError,
    fail_on_data_loss: bool,
) -> int:
    """Handle OFFSET_OUT_OF_RANGE at ``position``: raise, or warn and return the log start."""
    log_start = error.log_start_offset
    if log_start < 0 or log_start <= position:
        consumer.seek_to_beginning([(r.topic, r.partition)])
        log_start = loop.run_until_complete(consumer.position((r.topic, r.partition)))
    if position >= log_start:
        # not a loss at the start: the range reaches past the log end (truncated log)
        raise DataLossError(r.topic, r.partition, position, log_start) from error
    if fail_on_data_loss:
        raise DataLossError(r.topic, r.partition, position, log_start) from error
    warning = DataLossWarning(r.topic, r.partition, position, log_start)
    warnings.warn(str(warning), RuntimeWarning, stacklevel=3)
    return log_start


def _check_start_gap(
    loop: asyncio.AbstractEventLoop,
    consumer: AsyncConsumer,
    r: OffsetRange,
    fail_on_data_loss: bool,
) -> None:
    """The first record came after ``from_offset``: a gap (compaction) or a lost start."""
    tp = (r.topic, r.partition)
    resume_at = loop.run_until_complete(consumer.position(tp))
    consumer.seek_to_beginning([tp])
    log_start = loop.run_until_complete(consumer.position(tp))
    consumer.seek(tp, resume_at)
    if log_start > r.from_offset and fail_on_data_loss:
        raise DataLossError(r.topic, r.partition, r.from_offset, log_start)
