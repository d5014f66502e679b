"""A replog -> Spark -> replog pipeline: ``python examples/spark_pipeline.py``.

1. Starts a local 3-broker replog cluster and writes 3,000 click events (key = user) to
   ``clicks`` (3 partitions, replication factor 3).
2. Runs a Spark job (local[2]) that reads ``clicks`` with the ``replog`` DataFrame source,
   counts clicks and sums the amounts per user, and writes one record per user to
   ``clicks-per-user`` with the ``replog`` sink.
3. Reads ``clicks-per-user`` back, once through Spark's RDD path (``create_rdd``) and prints it.

Needs ``pip install 'replog[spark]'`` and Java 17+. Spark's worker processes reach the cluster
over TCP (127.0.0.1), like any other client.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys

from replog.broker.shell.cluster import Cluster
from replog.client import Admin, AsyncProducer

USERS = ("ada", "bob", "cyd", "dee", "eve")
EVENTS = 3_000


async def write_events(bootstrap: str) -> None:
    producer = await AsyncProducer.start(bootstrap, acks="all", linger_ms=5)
    try:
        futures = []
        for i in range(EVENTS):
            user = USERS[i * 7 % len(USERS)]
            event = {"user": user, "amount": i % 10}
            futures.append(await producer.send("clicks", json.dumps(event).encode(), user.encode()))
        await producer.flush()
        await asyncio.gather(*futures)
    finally:
        await producer.close()


def main() -> None:
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    from pyspark.sql import SparkSession
    from pyspark.sql import functions as F

    from replog.spark import AdminOffsetSource, create_rdd, register, resolve_ranges

    with Cluster.local(3) as cluster:
        bootstrap = cluster.bootstrap
        with Admin(bootstrap) as admin:
            admin.create_topics("clicks", 3, 3)
            admin.create_topics("clicks-per-user", 1, 3)
        asyncio.run(write_events(bootstrap))
        print(f"wrote {EVENTS} events to 'clicks' on {bootstrap}")

        spark = (
            SparkSession.builder.master("local[2]")
            .appName("replog-example")
            .config("spark.ui.enabled", "false")
            .config("spark.ui.showConsoleProgress", "false")
            .config("spark.sql.shuffle.partitions", "2")
            .config("spark.driver.host", "127.0.0.1")
            .getOrCreate()
        )
        spark.sparkContext.setLogLevel("ERROR")
        try:
            register(spark)
            clicks = (
                spark.read.format("replog")
                .option("replog.bootstrap", bootstrap)
                .option("subscribe", "clicks")
                .load()
            )
            event = F.from_json(F.col("value").cast("string"), "user string, amount int")
            per_user = (
                clicks.select(event.alias("e"))
                .groupBy("e.user")
                .agg(F.count("*").alias("clicks"), F.sum("e.amount").alias("amount"))
            )
            (
                per_user.select(
                    F.col("user").alias("key"),
                    F.to_json(F.struct("user", "clicks", "amount")).alias("value"),
                )
                .write.format("replog")
                .option("replog.bootstrap", bootstrap)
                .option("topic", "clicks-per-user")
                .mode("append")
                .save()
            )

            with AdminOffsetSource(bootstrap) as source:
                ranges = resolve_ranges(source, subscribe="clicks-per-user").ranges
            result = create_rdd(spark.sparkContext, bootstrap, ranges)
            print(f"'clicks-per-user' ({result.count()} records, ranges {list(ranges)}):")
            for record in sorted(result.collect(), key=lambda r: r.key):
                print(f"  offset {record.offset}: {record.key.decode()} -> {record.value.decode()}")
        finally:
            spark.stop()


if __name__ == "__main__":
    main()
