"""Spark read benchmark: ``python -m benchmarks.spark [--records N]`` (not part of the tests).

Starts one replog broker in its own process (``python -m replog.broker --config FILE``, so the
broker does not share the driver's interpreter; ``--in-process-broker`` puts it back in the
driver with ``Cluster.local(1)``, as before), writes N records (default 2,000,000; 100-byte
values, null keys, 2 partitions), then on a local[2] SparkSession measures, best of
``--repeats`` (the cases run interleaved, one round after another):

- ``df_count``: ``spark.read.format("replog")...load().count()`` (Arrow batches from the
  Python data source; every record is fetched, CRC-checked and decoded into Arrow columns);
- ``rdd_count``: ``create_rdd(...).count()`` (counted in the executors after every record is
  fetched and decoded into columns, keys and values included; no count from offset ranges);
- ``rdd_full``: ``create_rdd(...).map(lambda r: 1).sum()`` (every ``RddRecord`` tuple is built and
  reaches Python code).

Baselines, measured in the same run, read nothing from replog:

- ``df_baseline``: the same ``count()`` over a trivial Python data source with the same schema,
  row count, partitions and batch size, yielding Arrow batches built once per task;
- ``rdd_baseline``: ``sc.parallelize(range(N), 2).map(<7-field tuple with a 100-byte value>)``
  ``.map(lambda r: 1).sum()``.

``ratio_to_baseline`` is rows/s over the baseline's rows/s (df cases against ``df_baseline``,
rdd cases against ``rdd_baseline``): near 1 means Spark itself caps the rate on this machine.
Prints one JSON line per case. Targets: >= 1,000,000 rows/s for the DataFrame path
and >= 2,000,000 records/s for the RDD path.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from replog.client import Admin, AsyncProducer

VALUE = b"x" * 100
BASELINE_BATCH_ROWS = 75_000  # about one 8 MiB fetch answer of these records
SCHEMA_DDL = (
    "key binary, value binary, topic string, partition int, offset long, "
    "timestamp timestamp, timestampType int"
)


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


def _timed(run: Callable[[], int], expected: int) -> float:
    start = time.perf_counter()
    got = run()
    seconds = time.perf_counter() - start
    if got != expected:
        raise AssertionError(f"counted {got}, expected {expected}")
    return seconds


@contextlib.contextmanager
def _broker_process(base_dir: str) -> Iterator[str]:
    """One broker in a child process (memory coordinator: it is alone); yields its address."""
    config = Path(base_dir) / "broker.json"
    config.write_text(
        json.dumps(
            {
                "broker_id": 1,
                "log_dirs": [str(Path(base_dir) / "data")],
                "port": 0,
                "coordinator": "memory://spark-bench",
            }
        )
    )
    proc = subprocess.Popen(
        [sys.executable, "-m", "replog.broker", "--config", str(config)],
        stdout=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline().decode()
        info = json.loads(line) if line.startswith("{") else {}
        if info.get("event") != "serving":
            raise RuntimeError(f"the broker did not start: {line!r}")
        yield str(info["address"])
    finally:
        proc.terminate()
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@contextlib.contextmanager
def _broker(in_process: bool, bootstrap: str | None, records: int) -> Iterator[str]:
    """The cluster to read: ``bootstrap`` as it is, else a new broker filled with ``records``."""
    if bootstrap is not None:
        yield bootstrap
        return
    with _new_broker(in_process) as address:
        with Admin(address) as admin:
            admin.create_topics("bench", 2, 1)
        start = time.perf_counter()
        asyncio.run(_fill(address, "bench", records))
        fill_s = time.perf_counter() - start
        print(json.dumps({"case": "fill", "records": records, "seconds": round(fill_s, 1)}))
        yield address


@contextlib.contextmanager
def _new_broker(in_process: bool) -> Iterator[str]:
    with tempfile.TemporaryDirectory(prefix="replog-spark-bench-") as base_dir:
        if in_process:
            from replog.broker.shell.cluster import Cluster

            with Cluster.local(1, base_dir=base_dir) as cluster:
                yield cluster.bootstrap
        else:
            with _broker_process(base_dir) as address:
                yield address


def _baseline_source(records: int) -> Any:
    """A Python data source with the replog schema whose tasks yield pre-built Arrow batches
    (two partitions of ``records / 2`` rows): Spark's cost for the same rows, with no replog."""
    import pyarrow as pa
    from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition

    class BaselineReader(DataSourceReader):
        def partitions(self) -> list[InputPartition]:
            return [InputPartition(0), InputPartition(1)]

        def read(self, partition: Any) -> Iterator[Any]:
            index = partition.value
            rows = records // 2 + (records % 2 if index == 0 else 0)

            def batch(n: int) -> Any:
                return pa.RecordBatch.from_pydict(
                    {
                        "key": pa.nulls(n, pa.binary()),
                        "value": pa.array([VALUE] * n, pa.binary()),
                        "topic": pa.array(["bench"] * n, pa.string()),
                        "partition": pa.array([index] * n, pa.int32()),
                        "offset": pa.array(range(n), pa.int64()),
                        "timestamp": pa.array([1_700_000_000_000_000] * n, pa.int64()).cast(
                            pa.timestamp("us", tz="UTC")
                        ),
                        "timestampType": pa.array([0] * n, pa.int32()),
                    }
                )

            full = batch(BASELINE_BATCH_ROWS)
            while rows >= BASELINE_BATCH_ROWS:
                yield full
                rows -= BASELINE_BATCH_ROWS
            if rows:
                yield batch(rows)

    class BaselineSource(DataSource):
        @classmethod
        def name(cls) -> str:
            return "replog_baseline"

        def schema(self) -> str:
            return SCHEMA_DDL

        def reader(self, schema: Any) -> DataSourceReader:
            return BaselineReader()

    return BaselineSource


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--records", type=int, default=2_000_000)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--in-process-broker", action="store_true")
    parser.add_argument(
        "--bootstrap",
        help="use this running cluster, whose topic 'bench' already holds --records records",
    )
    args = parser.parse_args()
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    from pyspark.sql import SparkSession

    from replog.spark import AdminOffsetSource, RddRecord, create_rdd, register, resolve_ranges

    with _broker(args.in_process_broker, args.bootstrap, args.records) as bootstrap:
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
            spark.dataSource.register(_baseline_source(args.records))
            with AdminOffsetSource(bootstrap) as source:
                ranges = resolve_ranges(source, subscribe="bench").ranges
            sc = spark.sparkContext
            df = spark.read.format("replog").option("replog.bootstrap", bootstrap)
            df = df.option("subscribe", "bench")
            baseline_df = spark.read.format("replog_baseline")

            def as_record(i: int) -> RddRecord:
                return RddRecord("bench", i & 1, i >> 1, 1_700_000_000_000, None, VALUE, ())

            cases: dict[str, Callable[[], int]] = {
                "df_baseline": lambda: int(baseline_df.load().count()),
                "df_count": lambda: int(df.load().count()),
                "rdd_baseline": lambda: int(
                    sc.parallelize(range(args.records), 2).map(as_record).map(lambda r: 1).sum()
                ),
                "rdd_count": lambda: int(create_rdd(sc, bootstrap, ranges).count()),
                "rdd_full": lambda: int(create_rdd(sc, bootstrap, ranges).map(lambda r: 1).sum()),
            }
            best = {case: float("inf") for case in cases}
            for _ in range(args.repeats):  # interleaved, so warm-up does not favour one case
                for case, run in cases.items():
                    best[case] = min(best[case], _timed(run, args.records))
            rates = {case: args.records / seconds for case, seconds in best.items()}
            for case, seconds in best.items():
                line: dict[str, Any] = {
                    "case": case,
                    "records": args.records,
                    "seconds": round(seconds, 2),
                    "rows_per_s": round(rates[case]),
                }
                if not case.endswith("baseline"):
                    baseline = rates[case.split("_")[0] + "_baseline"]
                    line["ratio_to_baseline"] = round(rates[case] / baseline, 2)
                print(json.dumps(line), flush=True)
        finally:
            spark.stop()


if __name__ == "__main__":
    main()
