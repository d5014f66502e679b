"""The ``replog`` DataFrame source and sink (PySpark's Python Data Source API, PySpark >= 4.0).

``spark.dataSource.register(ReplogDataSource)`` (or ``replog.spark.register(spark)``) makes
``spark.read.format("replog")``, ``readStream``, ``write`` and ``writeStream`` available, with
the options of Spark's Kafka source (see ``options.py``) and its schema: ``key binary, value
binary, topic string, partition int, offset long, timestamp timestamp, timestampType int`` plus
``headers array<struct<key string, value binary>>`` with ``includeHeaders=true``.

Every hook runs in its own Python worker process, so the source keeps only plain option values;
planning opens an ``AdminOffsetSource`` and each task a ``Consumer``, both over TCP.

- Batch: ``partitions()`` resolves the ranges once (pinned to the HW) and splits them with
  ``plan_ranges`` (``minPartitions``, ``maxRecordsPerPartition``); ``read`` yields one pyarrow
  ``RecordBatch`` per fetch answer (at most ``reading.FETCH_BYTES`` of records), built from the
  decoded numpy columns (``read_range_arrays``): no Python object per row.
- Streaming: offsets are ``{"topic": {"partition": next_offset}}`` (Spark's
  ``KafkaSourceOffset``). ``startingOffsets`` defaults to latest; partitions that appear later
  start at their log start. ``maxOffsetsPerTrigger`` becomes the default read limit (PySpark >=
  4.2; split across partitions like Spark's ``rateLimit``), and ``Trigger.AvailableNow`` reads up
  to the HWs seen when the query starts. Nothing is committed back to replog (``commit`` is a
  no-op, as in Spark); the checkpoint is the source of truth.
- Sink: rows with ``value`` (required, binary or string), ``key``, ``topic`` (or the ``topic``
  option, which wins), ``partition`` and ``headers``. Each task produces its rows directly and
  waits for every acknowledgement: at-least-once, as Spark's Kafka sink. Overwrite is rejected.
"""

from __future__ import annotations

import asyncio
import math
import warnings
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import numpy as np
import pyarrow as pa
from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    DataSourceStreamWriter,
    DataSourceWriter,
    InputPartition,
    WriterCommitMessage,
)

from replog.client import AsyncProducer
from replog.spark.arrays import BinaryColumn, RecordArrays
from replog.spark.options import SourceOptions
from replog.spark.ranges import (
    EARLIEST,
    LATEST,
    DataLossError,
    OffsetRange,
    OffsetSpecError,
    TopicPartition,
    parse_offsets,
    plan_ranges,
    resolve_ranges,
)
from replog.spark.reading import AdminOffsetSource, read_range_arrays

try:  # PySpark >= 4.2: admission control and Trigger.AvailableNow for Python streams
    from pyspark.sql.streaming import datasource as _streaming

    _ReadMaxRows: Any = _streaming.ReadMaxRows
    _AvailableNow: Any = _streaming.SupportsTriggerAvailableNow
except (ImportError, AttributeError):  # pragma: no cover - older PySpark: single batch
    _ReadMaxRows = None
    _AvailableNow = object

__all__ = ["ReplogDataSource", "register"]

Offsets = dict[str, dict[str, int]]


def register(spark: Any) -> None:
    """Register the ``replog`` format with a SparkSession (needed once per session)."""
    spark.dataSource.register(ReplogDataSource)


class ReplogDataSource(DataSource):
    """``format("replog")``: batch and streaming reads and writes (see module doc)."""

    @classmethod
    def name(cls) -> str:
        return "replog"

    def schema(self) -> str:
        return SourceOptions.parse(self.options, for_read=False).schema_ddl

    def reader(self, schema: Any) -> DataSourceReader:
        return ReplogBatchReader(SourceOptions.parse(self.options))

    def streamReader(self, schema: Any) -> DataSourceStreamReader:
        opts = SourceOptions.parse(self.options)
        if opts.ending_offsets is not None:
            raise OffsetSpecError("endingOffsets is for batch queries only")
        return ReplogStreamReader(opts)

    def writer(self, schema: Any, overwrite: bool) -> DataSourceWriter:
        return ReplogWriter(_check_overwrite(self.options, overwrite), _columns(schema))

    def streamWriter(self, schema: Any, overwrite: bool) -> DataSourceStreamWriter:
        return ReplogStreamWriter(_check_overwrite(self.options, overwrite), _columns(schema))


# -- reading ----------------------------------------------------------------------------------


class RangePartition(InputPartition):
    """One Spark input partition: an ``OffsetRange`` as plain values."""

    def __init__(self, topic: str, partition: int, from_offset: int, until_offset: int) -> None:
        super().__init__((topic, partition, from_offset, until_offset))
        self.range = OffsetRange(topic, partition, from_offset, until_offset)


def _input_partitions(ranges: Sequence[OffsetRange]) -> list[RangePartition]:
    parts = [RangePartition(r.topic, r.partition, r.from_offset, r.until_offset) for r in ranges]
    return parts


def _arrow_schema(include_headers: bool) -> pa.Schema:
    fields = [
        pa.field("key", pa.binary()),
        pa.field("value", pa.binary()),
        pa.field("topic", pa.string()),
        pa.field("partition", pa.int32()),
        pa.field("offset", pa.int64()),
        pa.field("timestamp", pa.timestamp("us", tz="UTC")),
        pa.field("timestampType", pa.int32()),
    ]
    if include_headers:
        header = pa.struct([pa.field("key", pa.string()), pa.field("value", pa.binary())])
        fields.append(pa.field("headers", pa.list_(header)))
    return pa.schema(fields)


def _binary_array(column: BinaryColumn) -> pa.Array:
    """An Arrow binary array over the column's buffers (offsets narrowed to int32)."""
    count = len(column)
    if int(column.ends[-1]) >= 1 << 31:
        raise ValueError("a binary column over 2 GiB does not fit an Arrow binary array")
    validity = None
    null_count = 0
    if column.nulls is not None:
        null_count = int(column.nulls.sum())
        validity = pa.py_buffer(np.packbits(~column.nulls, bitorder="little"))
    buffers = [
        validity,
        pa.py_buffer(column.ends.astype(np.int32)),
        pa.py_buffer(column.data),
    ]
    return pa.Array.from_buffers(pa.binary(), count, buffers, null_count)


def arrays_to_record_batch(
    pieces: Sequence[RecordArrays], schema: pa.Schema, include_headers: bool
) -> pa.RecordBatch:
    """One Arrow batch of the records of ``pieces`` (one partition, offset order), built from
    their buffers: no Python object per row unless headers are asked for. Timestamps go from
    ms to us; ``timestampType`` is each batch's (0 CreateTime, 1 LogAppendTime)."""
    first = pieces[0]
    count = sum(map(len, pieces))
    keys = BinaryColumn.concat([p.keys for p in pieces])
    values = BinaryColumn.concat([p.values for p in pieces])
    offsets = np.concatenate([p.offsets for p in pieces])
    micros = np.concatenate([p.timestamps for p in pieces]) * 1000
    kinds = np.concatenate([np.full(len(p), p.timestamp_type, np.int32) for p in pieces])
    columns = [
        _binary_array(keys),
        _binary_array(values),
        pa.repeat(pa.scalar(first.topic, pa.string()), count),
        pa.repeat(pa.scalar(first.partition, pa.int32()), count),
        pa.array(offsets, pa.int64()),
        pa.array(micros, pa.int64()).cast(schema.field(5).type),
        pa.array(kinds, pa.int32()),
    ]
    if include_headers:
        headers = [
            [{"key": k, "value": v} for k, v in record_headers]
            for piece in pieces
            for record_headers in piece.header_list()
        ]
        columns.append(pa.array(headers, schema.field(7).type))
    return pa.RecordBatch.from_arrays(columns, schema=schema)


def _read_partition(opts: SourceOptions, partition: Any) -> Iterator[pa.RecordBatch]:
    r: OffsetRange = partition.range
    schema = _arrow_schema(opts.include_headers)
    chunks = read_range_arrays(
        opts.bootstrap,
        r,
        fail_on_data_loss=opts.fail_on_data_loss,
        **dict(opts.consumer_config),
    )
    for chunk in chunks:
        yield arrays_to_record_batch(chunk, schema, opts.include_headers)


class ReplogBatchReader(DataSourceReader):
    """Batch read: ranges resolved once at planning, pinned to the HW."""

    def __init__(self, opts: SourceOptions) -> None:
        self.opts = opts

    def partitions(self) -> list[RangePartition]:
        opts = self.opts
        with AdminOffsetSource(opts.bootstrap) as source:
            resolved = resolve_ranges(
                source,
                subscribe=opts.subscribe,
                subscribe_pattern=opts.subscribe_pattern,
                assign=opts.assign,
                starting=opts.starting_offsets or "earliest",
                ending=opts.ending_offsets or "latest",
                fail_on_data_loss=opts.fail_on_data_loss,
            )
        for warning in resolved.warnings:
            warnings.warn(str(warning), RuntimeWarning, stacklevel=2)
        planned = plan_ranges(
            resolved.ranges,
            min_partitions=opts.min_partitions,
            max_records_per_partition=opts.max_records_per_partition,
        )
        return _input_partitions(planned)

    def read(self, partition: Any) -> Iterator[pa.RecordBatch]:
        return _read_partition(self.opts, partition)


def _key(offsets: Mapping[str, Mapping[str, int]]) -> dict[TopicPartition, int]:
    return {TopicPartition(t, int(p)): int(o) for t, ps in offsets.items() for p, o in ps.items()}


def _offsets(by_tp: Mapping[TopicPartition, int]) -> Offsets:
    out: Offsets = {}
    for tp in sorted(by_tp):
        out.setdefault(tp.topic, {})[str(tp.partition)] = by_tp[tp]
    return out


def rate_limit(
    start: Mapping[TopicPartition, int], end: Mapping[TopicPartition, int], limit: int
) -> dict[TopicPartition, int]:
    """Spark's ``KafkaMicroBatchStream.rateLimit``: share ``limit`` offsets across partitions in
    proportion to their backlog; a share below 1 rounds up so no partition starves."""
    sizes = {tp: end[tp] - start.get(tp, end[tp]) for tp in end}
    total = sum(size for size in sizes.values() if size > 0)
    if total <= limit:
        return dict(end)
    out: dict[TopicPartition, int] = {}
    for tp, until in end.items():
        begin = start.get(tp, until)
        size = sizes[tp]
        if size <= 0:
            out[tp] = until
            continue
        prorate = limit * (size / total)
        step = math.ceil(prorate) if prorate < 1 else math.floor(prorate)
        out[tp] = min(until, begin + step)
    return out


class ReplogStreamReader(DataSourceStreamReader, _AvailableNow):  # type: ignore[misc]
    """Micro-batch read (see module doc); lives in one long-lived runner process per query."""

    def __init__(self, opts: SourceOptions) -> None:
        self.opts = opts
        self._source: AdminOffsetSource | None = None
        self._target: dict[TopicPartition, int] | None = None

    def _admin(self) -> AdminOffsetSource:
        if self._source is None:
            self._source = AdminOffsetSource(self.opts.bootstrap)
        return self._source

    def _bounds(self) -> tuple[dict[TopicPartition, int], dict[TopicPartition, int]]:
        """(log start, HW) of every subscribed partition now."""
        resolved = resolve_ranges(
            self._admin(),
            subscribe=self.opts.subscribe,
            subscribe_pattern=self.opts.subscribe_pattern,
            assign=self.opts.assign,
        )
        starts = {r.topic_partition: r.from_offset for r in resolved.ranges}
        hws = {r.topic_partition: r.until_offset for r in resolved.ranges}
        return starts, hws

    def initialOffset(self) -> Offsets:
        starts, hws = self._bounds()
        spec = parse_offsets(
            self.opts.starting_offsets or "latest",
            default=LATEST,
            topics={tp.topic for tp in hws},
            name="startingOffsets",
        )
        initial: dict[TopicPartition, int] = {}
        for tp in hws:
            wanted = spec.offset_for(*tp)
            initial[tp] = (
                starts[tp] if wanted == EARLIEST else hws[tp] if wanted == LATEST else wanted
            )
        return _offsets(initial)

    def prepareForTriggerAvailableNow(self) -> None:
        self._target = self._bounds()[1]

    def getDefaultReadLimit(self) -> Any:
        if self.opts.max_offsets_per_trigger is not None and _ReadMaxRows is not None:
            return _ReadMaxRows(self.opts.max_offsets_per_trigger)
        return super().getDefaultReadLimit()

    def latestOffset(self, start: Any = None, limit: Any = None) -> Offsets:
        starts, hws = self._bounds()
        end = dict(hws)
        if self._target is not None:
            end = {tp: min(hw, self._target.get(tp, hw)) for tp, hw in end.items()}
        if start is not None:
            begin = {tp: starts[tp] for tp in end} | {
                tp: o for tp, o in _key(start).items() if tp in end
            }
            end = {tp: max(end[tp], begin[tp]) for tp in end}
            if _ReadMaxRows is not None and isinstance(limit, _ReadMaxRows):
                end = rate_limit(begin, end, limit.max_rows)
        return _offsets(end)

    def partitions(self, start: Offsets, end: Offsets) -> list[RangePartition]:
        begin, until = _key(start), _key(end)
        if begin == until:
            return []
        log_starts = dict(self._admin().log_start_offsets(list(until)))
        ranges: list[OffsetRange] = []
        for tp, stop in sorted(until.items()):
            first = begin.get(tp, log_starts[tp])  # a new partition starts at its log start
            if first < log_starts[tp]:
                if self.opts.fail_on_data_loss:
                    raise DataLossError(tp.topic, tp.partition, first, log_starts[tp])
                warnings.warn(
                    f"{tp.topic}-{tp.partition}: offsets [{first}, {log_starts[tp]}) were "
                    "removed by retention; skipping them",
                    RuntimeWarning,
                    stacklevel=2,
                )
                first = log_starts[tp]
            if stop > first:
                ranges.append(OffsetRange(tp.topic, tp.partition, first, stop))
        return _input_partitions(plan_ranges(ranges, min_partitions=self.opts.min_partitions))

    def read(self, partition: Any) -> Iterator[pa.RecordBatch]:
        return _read_partition(self.opts, partition)

    def commit(self, end: Offsets) -> None:
        """Nothing to do: the checkpoint holds the offsets (as Spark's Kafka source)."""

    def stop(self) -> None:
        if self._source is not None:
            self._source.close()
            self._source = None


# -- writing ----------------------------------------------------------------------------------

_TYPES = {
    "value": ("binary", "string"),
    "key": ("binary", "string"),
    "topic": ("string",),
    "partition": ("integer", "long", "short", "byte"),
    "headers": ("array",),
}


def _columns(schema: Any) -> tuple[str, ...]:
    """The sink columns present in ``schema``; checks names and types like Spark's KafkaWriter."""
    names: list[str] = []
    for field in schema.fields:
        name = field.name
        if name not in _TYPES:
            continue
        kind = field.dataType.typeName()
        if kind not in _TYPES[name]:
            raise OffsetSpecError(
                f"sink column {name!r} has type {kind}; expected {' or '.join(_TYPES[name])}"
            )
        names.append(name)
    if "value" not in names:
        raise OffsetSpecError("the replog sink needs a 'value' column (binary or string)")
    return tuple(names)


def _check_overwrite(options: Mapping[str, str], overwrite: bool) -> SourceOptions:
    if overwrite:
        raise OffsetSpecError("the replog sink only appends; save mode overwrite is not supported")
    return SourceOptions.parse(options, for_read=False)


def _as_bytes(value: Any) -> bytes | None:
    if value is None:
        return None
    if isinstance(value, str):
        return value.encode()
    return bytes(value)


class ProduceCommit(WriterCommitMessage):
    """What a write task reports: how many records it produced."""

    def __init__(self, records: int) -> None:
        self.records = records


async def _produce_rows(opts: SourceOptions, columns: Sequence[str], rows: Iterator[Any]) -> int:
    config: dict[str, Any] = {
        "acks": "all",
        "linger_ms": 5,
        "batch_bytes_max": 256 * 1024,
        "client_id": "replog-spark-sink",
        **dict(opts.producer_config),
    }
    producer = await AsyncProducer.start(opts.bootstrap, **config)
    pending: list[asyncio.Future[Any]] = []
    count = 0
    try:
        for row in rows:
            topic = opts.topic or (row["topic"] if "topic" in columns else None)
            if not topic:
                raise OffsetSpecError("no topic: set the 'topic' option or a 'topic' column")
            headers = None
            if "headers" in columns and row["headers"] is not None:
                headers = [(h["key"], _as_bytes(h["value"])) for h in row["headers"]]
            partition = row["partition"] if "partition" in columns else None
            pending.append(
                await producer.send(
                    topic,
                    _as_bytes(row["value"]),
                    _as_bytes(row["key"]) if "key" in columns else None,
                    headers,
                    None if partition is None else int(partition),
                )
            )
            count += 1
            if len(pending) >= 50_000:
                await asyncio.gather(*pending)
                pending.clear()
        await producer.flush()
        await asyncio.gather(*pending)
    finally:
        await producer.close(flush=False)
    return count


class ReplogWriter(DataSourceWriter):
    """Batch sink: each task produces its rows and waits for every acknowledgement."""

    def __init__(self, opts: SourceOptions, columns: Sequence[str]) -> None:
        self.opts = opts
        self.columns = tuple(columns)

    def write(self, iterator: Iterator[Any]) -> ProduceCommit:
        return ProduceCommit(asyncio.run(_produce_rows(self.opts, self.columns, iterator)))

    def commit(self, messages: list[Any]) -> None:
        """Nothing to publish: the tasks already produced (at-least-once)."""

    def abort(self, messages: list[Any]) -> None:
        """Records of tasks that succeeded stay in the log (at-least-once, like Kafka)."""


class ReplogStreamWriter(DataSourceStreamWriter):
    """Streaming sink: the batch sink per micro-batch (at-least-once on replays)."""

    def __init__(self, opts: SourceOptions, columns: Sequence[str]) -> None:
        self.opts = opts
        self.columns = tuple(columns)

    def write(self, iterator: Iterator[Any]) -> ProduceCommit:
        return ProduceCommit(asyncio.run(_produce_rows(self.opts, self.columns, iterator)))

    def commit(self, messages: list[Any], batchId: int) -> None:
        """Nothing to publish (see ``ReplogWriter.commit``)."""

    def abort(self, messages: list[Any], batchId: int) -> None:
        """See ``ReplogWriter.abort``."""
