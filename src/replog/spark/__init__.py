"""replog for Apache Spark: plan and read replog partitions as Spark tasks.

``replog.spark.ranges`` is the pure planning core (no pyspark, no pyarrow): offset specs in
Spark's Kafka JSON format, ranges pinned to the high watermark, and the split into tasks that
mirrors Spark's ``KafkaOffsetRangeCalculator``. Importing this package never imports pyspark, so
the planner works (and is tested) without a JVM.

Front-ends: ``create_rdd`` (classic PySpark RDDs of ``RddRecord``) and the ``replog`` DataFrame
source and sink (``register(spark)``, then ``spark.read.format("replog")``; see
``replog.spark.datasource``). ``AdminOffsetSource`` plans against a live cluster. pyspark and
pyarrow are imported only when a front-end is used.
"""

from __future__ import annotations

from typing import Any

from replog.spark.ranges import (
    EARLIEST,
    LATEST,
    DataLossError,
    DataLossWarning,
    OffsetRange,
    OffsetSource,
    OffsetSpec,
    OffsetSpecError,
    ResolvedRanges,
    TopicPartition,
    offsets_to_json,
    parse_offsets,
    plan_ranges,
    resolve_ranges,
)
from replog.spark.rdd import create_rdd, offset_ranges_of
from replog.spark.reading import AdminOffsetSource, RddRecord, ReadTimeoutError, read_range


def register(spark: Any) -> None:
    """Register the ``replog`` data source with ``spark`` (once per SparkSession)."""
    from replog.spark.datasource import register as register_source

    register_source(spark)


__all__ = [
    "EARLIEST",
    "AdminOffsetSource",
    "ReadTimeoutError",
    "RddRecord",
    "create_rdd",
    "offset_ranges_of",
    "read_range",
    "register",
    "LATEST",
    "DataLossError",
    "DataLossWarning",
    "OffsetRange",
    "OffsetSource",
    "OffsetSpec",
    "OffsetSpecError",
    "ResolvedRanges",
    "TopicPartition",
    "offsets_to_json",
    "parse_offsets",
    "plan_ranges",
    "resolve_ranges",
]
