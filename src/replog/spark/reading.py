"""Reading planned ranges from a replog cluster over TCP (no pyspark import).

Spark runs every hook of a Python data source, and every RDD task, in a separate Python process,
so nothing here holds an in-process cluster: each function takes a bootstrap string and opens
its own client.

- ``AdminOffsetSource`` is the ``OffsetSource`` the planner uses against a live cluster: partition
  lists from metadata, log start offsets from ListOffsets "earliest", HWs from "latest".
- ``read_range`` reads one ``OffsetRange`` with a ``Consumer`` (assign + seek, ``auto_reset`` =
  "none") and yields records in chunks, never past ``until_offset``. Offsets below the log start
  (retention, deleteRecords) raise ``DataLossError``; with ``fail_on_data_loss=False`` the reader
  skips to the log start and warns, as Spark's Kafka source does.
- ``read_range_columns`` is the same read as columns (``ColumnSlice`` lists, no object per
  record): the DataFrame source turns them into Arrow arrays and the RDD into ``Record`` tuples.
- ``Record`` is what the RDD path yields: (topic, partition, offset, timestamp, key, value,
  headers).
"""

from __future__ import annotations

import bisect
import time
import warnings
from collections.abc import Collection, Iterator, Mapping, Sequence
from typing import Any, NamedTuple

from replog.client import Admin, Consumer, ConsumerRecord
from replog.client.fetching import ColumnSlice
from replog.errors import OffsetOutOfRangeError, ReplogError
from replog.spark.ranges import DataLossError, DataLossWarning, OffsetRange, TopicPartition

__all__ = [
    "AdminOffsetSource",
    "ReadTimeoutError",
    "Record",
    "read_range",
    "read_range_columns",
    "replica_hosts",
]

READ_CHUNK_RECORDS = 10_000
"""Records per poll of ``read_range``."""
COLUMN_CHUNK_RECORDS = 65_536
"""Records per poll of ``read_range_columns`` (and so at most per Arrow batch): a poll that
takes only part of a fetched 8 MiB answer makes the next poll fetch the rest again, so the
columnar readers take large chunks (about 7 MB of 100-byte values)."""
_FETCH_BYTES = 8 * 1024 * 1024


class Record(NamedTuple):
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

    Broker addresses come from the admin client's metadata; partitions without a known host are
    left out.
    """
    with Admin(bootstrap) as admin:
        topics = sorted({tp.topic for tp in partitions})
        described = admin.describe_topics(topics)
        brokers = _broker_hosts(admin)
    hosts: dict[TopicPartition, list[str]] = {}
    for tp in partitions:
        desc = described[tp.topic].partitions[tp.partition]
        order = [desc.leader, *[r for r in desc.replicas if r != desc.leader]]
        found = [brokers[b] for b in order if b in brokers]
        if found:
            hosts[tp] = list(dict.fromkeys(found))
    return hosts


def _broker_hosts(admin: Admin) -> dict[int, str]:
    """Broker id -> host, from the metadata the admin client already holds.

    ``Admin`` has no public broker listing, so this reads its client's metadata; if that ever
    changes shape the RDD simply gets no locality.
    """
    try:
        brokers = admin._admin._client.metadata.brokers
        return {int(node): str(addr.host) for node, addr in brokers.items()}
    except AttributeError:
        return {}


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
    chunks = read_range_columns(
        bootstrap,
        offset_range,
        fail_on_data_loss=fail_on_data_loss,
        chunk_records=chunk_records,
        poll_timeout_ms=poll_timeout_ms,
        **consumer_config,
    )
    for chunk in chunks:
        records: list[ConsumerRecord] = []
        for column_slice in chunk:
            records += column_slice.records()
        yield records


def read_range_columns(
    bootstrap: str,
    offset_range: OffsetRange,
    *,
    fail_on_data_loss: bool = True,
    chunk_records: int = COLUMN_CHUNK_RECORDS,
    poll_timeout_ms: int = 120_000,
    **consumer_config: Any,
) -> Iterator[list[ColumnSlice]]:
    """``read_range`` as columns: each chunk is the non-empty ``ColumnSlice``s of one poll
    (at most ``chunk_records`` records in all), cut at ``until_offset``; same semantics."""
    r = offset_range
    if not r.is_resolved:
        raise ValueError(f"{r} is unresolved; plan it with resolve_ranges first")
    if r.from_offset >= r.until_offset:
        return
    config: dict[str, Any] = {
        "auto_reset": "none",
        "partition_fetch_bytes_max": _FETCH_BYTES,
        "fetch_bytes_max": _FETCH_BYTES,
        "fetch_max_wait_ms": 100,
        "client_id": "replog-spark",
        **consumer_config,
    }
    tp = (r.topic, r.partition)
    with Consumer(bootstrap, **config) as consumer:
        consumer.assign([tp])
        consumer.seek(tp, r.from_offset)
        position = r.from_offset
        last_progress = time.monotonic()
        while position < r.until_offset:
            try:
                slices = consumer.poll_columns(500, chunk_records)
            except OffsetOutOfRangeError as error:
                position = _skip_lost(consumer, r, position, error, fail_on_data_loss)
                consumer.seek(tp, min(position, r.until_offset))
                continue
            if slices:
                last_progress = time.monotonic()
                if slices[-1].columns.offsets[-1] >= r.until_offset:
                    slices = _cut(slices, r.until_offset)
                if slices:
                    if slices[0].columns.offsets[0] > position and position == r.from_offset:
                        _check_start_gap(consumer, r, fail_on_data_loss)
                    yield slices
                    position = slices[-1].columns.offsets[-1] + 1
                    continue
            new_position = consumer.position(tp)
            if new_position > position:
                position, last_progress = new_position, time.monotonic()
            elif (time.monotonic() - last_progress) * 1000 > poll_timeout_ms:
                raise ReadTimeoutError(
                    f"{r.topic}-{r.partition}: no progress at offset {position} for "
                    f"{poll_timeout_ms} ms while reading up to {r.until_offset}"
                )


def _cut(slices: list[ColumnSlice], until_offset: int) -> list[ColumnSlice]:
    """The records of ``slices`` below ``until_offset`` (poll returns offsets ascending)."""
    kept: list[ColumnSlice] = []
    for column_slice in slices:
        offsets = column_slice.columns.offsets
        stop = bisect.bisect_left(offsets, until_offset)
        if stop == len(offsets):
            kept.append(column_slice)
            continue
        if stop:
            columns = column_slice.columns.slice(0, stop)
            kept.append(
                ColumnSlice(
                    column_slice.topic, column_slice.partition, column_slice.leader_epoch, columns
                )
            )
        break
    return kept


def _skip_lost(
    consumer: Consumer,
    r: OffsetRange,
    position: int,
    error: OffsetOutOfRangeError,
    fail_on_data_loss: bool,
) -> int:
    """Handle OFFSET_OUT_OF_RANGE at ``position``: raise, or warn and return the log start."""
    log_start = error.log_start_offset
    if log_start < 0 or log_start <= position:
        consumer.seek_to_beginning([(r.topic, r.partition)])
        log_start = consumer.position((r.topic, r.partition))
    if position >= log_start:
        # not a loss at the start: the range reaches past the log end (truncated log)
        raise DataLossError(r.topic, r.partition, position, log_start) from error
    if fail_on_data_loss:
        raise DataLossError(r.topic, r.partition, position, log_start) from error
    warning = DataLossWarning(r.topic, r.partition, position, log_start)
    warnings.warn(str(warning), RuntimeWarning, stacklevel=3)
    return log_start


def _check_start_gap(consumer: Consumer, r: OffsetRange, fail_on_data_loss: bool) -> None:
    """The first record came after ``from_offset``: a gap (compaction) or a lost start."""
    tp = (r.topic, r.partition)
    resume_at = consumer.position(tp)
    consumer.seek_to_beginning([tp])
    log_start = consumer.position(tp)
    consumer.seek(tp, resume_at)
    if log_start > r.from_offset and fail_on_data_loss:
        raise DataLossError(r.topic, r.partition, r.from_offset, log_start)
