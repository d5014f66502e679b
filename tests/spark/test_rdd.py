"""``create_rdd`` against a real replog cluster: one RDD partition per range, exact contents."""

from __future__ import annotations

from typing import Any

import pytest

from replog.broker.shell.cluster import Cluster
from replog.spark import (
    AdminOffsetSource,
    OffsetRange,
    RddRecord,
    create_rdd,
    offset_ranges_of,
    plan_ranges,
    resolve_ranges,
)
from tests.spark.conftest import create_topic, move_log_start, produce

pytestmark = pytest.mark.spark

COUNTS = (120, 45, 0)


@pytest.fixture(scope="module")
def rdd_topic(cluster: Cluster) -> str:
    create_topic(cluster, "rdd-events", len(COUNTS))
    rows = [
        (p, f"k{i % 7}".encode(), f"p{p}-v{i}".encode(), [("h", str(i).encode())])
        for p, n in enumerate(COUNTS)
        for i in range(n)
    ]
    produce(cluster, "rdd-events", rows)
    return "rdd-events"


def _ranges(cluster: Cluster, topic: str) -> tuple[OffsetRange, ...]:
    with AdminOffsetSource(cluster.bootstrap) as source:
        return resolve_ranges(source, subscribe=topic).ranges


def test_one_partition_per_range_with_exact_contents(
    spark: Any, cluster: Cluster, rdd_topic: str
) -> None:
    ranges = _ranges(cluster, rdd_topic)
    assert [r.count for r in ranges] == list(COUNTS)
    rdd = create_rdd(spark.sparkContext, cluster.bootstrap, ranges)
    assert rdd.getNumPartitions() == len(COUNTS)
    assert offset_ranges_of(rdd) == ranges
    per_partition = rdd.glom().collect()
    for p, records in enumerate(per_partition):
        assert [r.offset for r in records] == list(range(COUNTS[p]))
        assert all(isinstance(r, tuple) and r.partition == p for r in records)
        assert [r.value for r in records] == [f"p{p}-v{i}".encode() for i in range(COUNTS[p])]
    first = per_partition[0][0]
    assert first._fields == RddRecord._fields
    assert (first.topic, first.key, first.headers) == (rdd_topic, b"k0", (("h", b"0"),))
    assert first.timestamp > 0
    assert rdd.count() == sum(COUNTS)
    assert rdd.preferred_hosts[0] == ("127.0.0.1",)
    with pytest.raises(TypeError):
        offset_ranges_of(rdd.map(lambda r: r))


def test_split_ranges_and_sub_ranges_never_read_past_the_end(
    spark: Any, cluster: Cluster, rdd_topic: str
) -> None:
    planned = plan_ranges(_ranges(cluster, rdd_topic), min_partitions=5)
    assert len(planned) >= 5
    bounded = [*planned, OffsetRange(rdd_topic, 0, 10, 13)]
    rdd = create_rdd(spark.sparkContext, cluster.bootstrap, bounded)
    got = rdd.glom().collect()
    for r, records in zip(bounded, got, strict=True):
        assert [x.offset for x in records] == list(range(r.from_offset, r.until_offset))
    assert rdd.map(lambda r: (r.partition, 1)).reduceByKey(lambda a, b: a + b).collectAsMap() == {
        0: COUNTS[0] + 3,
        1: COUNTS[1],
    }


def test_fail_on_data_loss(spark: Any, cluster: Cluster) -> None:
    create_topic(cluster, "rdd-retention", 1)
    produce(cluster, "rdd-retention", [(0, None, b"%d" % i, []) for i in range(50)])
    move_log_start(cluster, "rdd-retention", 0, 20)
    lost = [OffsetRange("rdd-retention", 0, 0, 50)]
    with pytest.raises(Exception, match=r"DataLossError|below the log start"):
        create_rdd(spark.sparkContext, cluster.bootstrap, lost).collect()
    skipped = create_rdd(spark.sparkContext, cluster.bootstrap, lost, fail_on_data_loss=False)
    assert [r.offset for r in skipped.collect()] == list(range(20, 50))
