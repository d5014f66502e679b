"""Spark read benchmark: ``python -m benchmarks.spark [--records N]`` (not part of the tests).

Starts a one-broker replog cluster, writes N records (default 2,000,000; 100-byte values, 2
partitions), then on a local[2] SparkSession measures, best of ``--repeats``:

- ``df_count``: ``spark.read.format("replog")...load().count()`` (Arrow batches from the
  Python data source; every record is fetched and decoded);
- ``rdd_count``: ``create_rdd(...).count()`` (counted in the executors);
- ``rdd_full``: ``create_rdd(...).map(len).sum()`` (every ``Record`` reaches Python code).

Prints one JSON line per case with rows/s. Targets from issue 7: >= 1,000,000 rows/s for the
DataFrame path and >= 2,000,000 records/s for the RDD path.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import time
from collections.abc import Callable
from typing import Any

from replog.broker.cluster import Cluster
from replog.client import Admin, AsyncProducer

VALUE = b"x" * 100


async def _fill(bootstrap: str, topic: str, records: int) -> None:
    producer = await AsyncProducer.start(
        bootstrap, acks=1, linger_ms=20, batch_bytes_max=512 * 1024, buffer_bytes_max=1 << 30
    )
    try:
        for i in range(records):
            await producer.send(topic, VALUE, None, None, i % 2)
        await producer.flush()
    finally:
        await producer.close()


def _best(repeats: int, run: Callable[[], int], expected: int) -> float:
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        got = run()
        best = min(best, time.perf_counter() - start)
        if got != expected:
            raise AssertionError(f"counted {got}, expected {expected}")
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--records", type=int, default=2_000_000)
    parser.add_argument("--repeats", type=int, default=2)
    args = parser.parse_args()
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    from pyspark.sql import SparkSession

    from replog.spark import AdminOffsetSource, create_rdd, register, resolve_ranges

    with Cluster.local(1) as cluster:
        with Admin(cluster.bootstrap) as admin:
            admin.create_topics("bench", 2, 1)
        start = time.perf_counter()
        asyncio.run(_fill(cluster.bootstrap, "bench", args.records))
        fill_s = time.perf_counter() - start
        print(json.dumps({"case": "fill", "records": args.records, "seconds": round(fill_s, 1)}))
        spark: Any = (
            SparkSession.builder.master("local[2]")
            .config("spark.ui.enabled", "false")
            .config("spark.ui.showConsoleProgress", "false")
            .config("spark.driver.memory", "1g")
            .config("spark.driver.host", "127.0.0.1")
            .getOrCreate()
        )
        spark.sparkContext.setLogLevel("ERROR")
        try:
            register(spark)
            with AdminOffsetSource(cluster.bootstrap) as source:
                ranges = resolve_ranges(source, subscribe="bench").ranges
            sc = spark.sparkContext
            df = (
                spark.read.format("replog")
                .option("replog.bootstrap", cluster.bootstrap)
                .option("subscribe", "bench")
            )
            cases: dict[str, Callable[[], int]] = {
                "df_count": lambda: int(df.load().count()),
                "rdd_count": lambda: int(create_rdd(sc, cluster.bootstrap, ranges).count()),
                "rdd_full": lambda: int(
                    create_rdd(sc, cluster.bootstrap, ranges).map(lambda r: 1).sum()
                ),
            }
            for case, run in cases.items():
                seconds = _best(args.repeats, run, args.records)
                rate = args.records / seconds
                print(
                    json.dumps(
                        {
                            "case": case,
                            "records": args.records,
                            "seconds": round(seconds, 2),
                            "rows_per_s": round(rate),
                        }
                    ),
                    flush=True,
                )
        finally:
            spark.stop()


if __name__ == "__main__":
    main()
