"""replog for Apache Spark: plan and read replog partitions as Spark tasks.

``replog.spark.ranges`` is the pure planning core (no pyspark, no pyarrow): offset specs in
Spark's Kafka JSON format, ranges pinned to the high watermark, and the split into tasks that
mirrors Spark's ``KafkaOffsetRangeCalculator``. Importing this package never imports pyspark, so
the planner works (and is tested) without a JVM.
"""

from __future__ import annotations

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

__all__ = [
    "EARLIEST",
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
