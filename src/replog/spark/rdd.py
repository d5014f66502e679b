"""``create_rdd``: an RDD whose partition i reads ``offset_ranges[i]`` (classic PySpark only).

The design of Spark's ``KafkaUtils.createRDD`` / ``KafkaRDD``: ranges are planned on the driver
(``resolve_ranges`` + ``plan_ranges``), one Spark partition per range, so a log partition maps to
one RDD partition when nothing is split. The ranges travel to executors as small JSON strings;
each task opens its own consumer over TCP (``reading.read_range_arrays``), decodes each fetch
answer into numpy columns and yields ``RddRecord`` named tuples built from them.
``rdd.offset_ranges`` gives the ranges back (Spark's ``HasOffsetRanges``; like Spark's, the
mapping is lost after a shuffle or any other transformation).

Locality: with ``preferred_locations=True`` (the default) each partition prefers the hosts of its
log partition's replicas, leader first, through the JVM's ``SparkContext.makeRDD(seq of (item,
hosts))``; this is a private py4j route, so when it is not available (Spark Connect, a changed
JVM API) the RDD is built with ``parallelize`` and has no preferences. Ranges that already carry
``preferred_location`` (from ``plan_ranges(executors=...)``) keep it.

``count()`` counts in the executors and ships one number per partition; it still fetches and
decodes every record into columns (unlike Spark's ``KafkaRDD``, which returns
``sum(until - from)``), but builds no ``RddRecord``; so it is exact on logs with gaps (control
batches, compaction) and still detects data loss and corrupt batches.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Iterable, Iterator, Sequence
from itertools import repeat
from typing import Any

from replog.spark.ranges import OffsetRange, TopicPartition
from replog.spark.reading import RddRecord, read_range_arrays, replica_hosts

__all__ = ["create_rdd", "offset_ranges_of"]


def _range_to_json(r: OffsetRange) -> str:
    return json.dumps([r.topic, r.partition, r.from_offset, r.until_offset])


def _range_from_json(text: str) -> OffsetRange:
    topic, partition, start, until = json.loads(text)
    return OffsetRange(topic, partition, start, until)


def _read_task(bootstrap: str, fail_on_data_loss: bool, consumer_config: dict[str, Any]) -> Any:
    """The per-partition function the executors run (picklable closure over plain values)."""

    make = functools.partial(tuple.__new__, RddRecord)  # RddRecord(*fields) without Python code

    def read(items: Iterable[str]) -> Iterator[RddRecord]:
        for item in items:
            r = _range_from_json(item)
            chunks = read_range_arrays(
                bootstrap, r, fail_on_data_loss=fail_on_data_loss, **consumer_config
            )
            for chunk in chunks:
                for piece in chunk:
                    fields = zip(
                        repeat(piece.topic),
                        repeat(piece.partition),
                        piece.offsets.tolist(),
                        piece.timestamps.tolist(),
                        piece.keys.to_list(),
                        piece.values.to_list(),
                        piece.header_list(),
                    )
                    yield from map(make, fields)

    return read


def _count_task(bootstrap: str, fail_on_data_loss: bool, consumer_config: dict[str, Any]) -> Any:
    """Per-partition record count: still fetches, CRC-checks and decodes every record of the
    range into columns (keys and values included), so data loss and corruption are detected,
    but builds no Python object per record."""

    def count(items: Iterable[str]) -> Iterator[int]:
        total = 0
        for item in items:
            r = _range_from_json(item)
            chunks = read_range_arrays(
                bootstrap, r, fail_on_data_loss=fail_on_data_loss, **consumer_config
            )
            for chunk in chunks:
                total += sum(map(len, chunk))
        yield total

    return count


def _base_rdd(sc: Any, items: Sequence[str], hosts: Sequence[Sequence[str]]) -> Any:
    """An RDD of JSON strings, one per partition, with per-partition preferred hosts if the
    JVM route is available (classic PySpark), else plain ``parallelize``."""
    if any(hosts):
        try:
            from pyspark.rdd import RDD
            from pyspark.serializers import UTF8Deserializer

            jvm = sc._jvm
            pairs = jvm.java.util.ArrayList()
            for item, item_hosts in zip(items, hosts, strict=True):
                host_list = jvm.java.util.ArrayList()
                for host in item_hosts:
                    host_list.add(host)
                seq_hosts = jvm.scala.jdk.javaapi.CollectionConverters.asScala(host_list).toSeq()
                pairs.add(jvm.scala.Tuple2(item, seq_hosts))
            seq = jvm.scala.jdk.javaapi.CollectionConverters.asScala(pairs).toSeq()
            tag = jvm.scala.reflect.ClassTag.apply(jvm.java.lang.Class.forName("java.lang.String"))
            jrdd = sc._jsc.sc().makeRDD(seq, tag)
            return RDD(jrdd.toJavaRDD(), sc, UTF8Deserializer())  # type: ignore[no-untyped-call]
        except Exception:
            pass
    return sc.parallelize(list(items), max(len(items), 1))


def create_rdd(
    sc: Any,
    bootstrap: str,
    offset_ranges: Sequence[OffsetRange],
    *,
    preferred_locations: bool = True,
    fail_on_data_loss: bool = True,
    **consumer_config: Any,
) -> Any:
    """An RDD of ``RddRecord`` whose partition i reads ``offset_ranges[i]`` from ``bootstrap``.

    Ranges must be resolved (see ``resolve_ranges``; split them with ``plan_ranges``). Empty
    ranges still get their (empty) partition, so indexes keep matching. The result has
    ``offset_ranges`` (a tuple, in partition order) and a ``count()`` that counts per range in
    the executors. ``consumer_config`` is passed to each task's ``Consumer``.
    """
    ranges = tuple(offset_ranges)
    for r in ranges:
        if not isinstance(r, OffsetRange) or not r.is_resolved:
            raise ValueError(f"create_rdd needs resolved OffsetRanges, got {r!r}")
    items = [_range_to_json(r) for r in ranges]
    hosts: list[list[str]] = [
        [r.preferred_location] if r.preferred_location else [] for r in ranges
    ]
    if preferred_locations and ranges and not all(hosts):
        replicas = replica_hosts(bootstrap, {r.topic_partition for r in ranges})
        hosts = [
            h or replicas.get(TopicPartition(r.topic, r.partition), [])
            for r, h in zip(ranges, hosts, strict=True)
        ]
    base = _base_rdd(sc, items, hosts if preferred_locations else [[] for _ in ranges])
    rdd = base.mapPartitions(_read_task(bootstrap, fail_on_data_loss, dict(consumer_config)))
    counter = _count_task(bootstrap, fail_on_data_loss, dict(consumer_config))

    def count() -> int:
        return int(base.mapPartitions(counter).sum())

    rdd.offset_ranges = ranges
    rdd.preferred_hosts = tuple(tuple(h) for h in hosts)
    rdd.count = count
    return rdd


def offset_ranges_of(rdd: Any) -> tuple[OffsetRange, ...]:
    """The ranges of an RDD made by ``create_rdd`` (``HasOffsetRanges``); ``TypeError`` for
    any other RDD, including one derived from it by a transformation."""
    ranges = getattr(rdd, "offset_ranges", None)
    if ranges is None:
        raise TypeError(
            "not an RDD from replog.spark.create_rdd (offset ranges do not survive transformations)"
        )
    return tuple(ranges)
