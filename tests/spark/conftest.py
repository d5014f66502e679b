"""Fixtures of the Spark tests: one local[2] SparkSession and one replog cluster for all of them.

The session is set up for a small shared CI machine: workers run this interpreter
(PYSPARK_PYTHON), everything binds to 127.0.0.1, the UI is off and the session is stopped at the
end so /tmp/spark-* goes away. Without pyspark the tests skip; without Java they skip too, unless
REPLOG_REQUIRE_BACKENDS=1, which turns a missing backend into a failure.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import sys
from collections.abc import Iterator, Sequence
from typing import Any

import pytest

from replog.broker.shell.cluster import Cluster
from replog.client import Admin, AsyncProducer

Row = tuple[int, bytes | None, bytes | None, Sequence[tuple[str, bytes | None]]]


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    """The one SparkSession of the run, with the replog source registered."""
    pytest.importorskip("pyspark")
    pytest.importorskip("pyarrow")
    if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
        if os.environ.get("REPLOG_REQUIRE_BACKENDS") == "1":
            pytest.fail("Java 17+ is required for the Spark tests (REPLOG_REQUIRE_BACKENDS=1)")
        pytest.skip("no java on PATH and no JAVA_HOME: Spark tests need Java 17+")
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    os.environ["SPARK_LOCAL_IP"] = "127.0.0.1"
    from pyspark.sql import SparkSession

    from replog.spark import register

    session = (
        SparkSession.builder.master("local[2]")
        .appName("replog-tests")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.default.parallelism", "2")
        .config("spark.driver.memory", "1g")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    register(session)
    try:
        yield session
    finally:
        session.stop()


@pytest.fixture(scope="session")
def cluster() -> Iterator[Cluster]:
    """Two brokers on 127.0.0.1, shared by the Spark tests (each test uses its own topics)."""
    with Cluster.local(2) as c:
        yield c


def create_topic(cluster: Cluster, name: str, partitions: int) -> None:
    with Admin(cluster.bootstrap) as admin:
        admin.create_topics(name, partitions, 1)


def produce(cluster: Cluster, topic: str, rows: Sequence[Row]) -> None:
    """Write ``rows`` (partition, key, value, headers) and wait for every acknowledgement."""

    async def go() -> None:
        producer = await AsyncProducer.start(cluster.bootstrap, linger_ms=5, acks="all")
        try:
            futures = [
                await producer.send(topic, value, key, list(headers), partition)
                for partition, key, value, headers in rows
            ]
            await producer.flush()
            await asyncio.gather(*futures)
        finally:
            await producer.close()

    asyncio.run(go())


def move_log_start(cluster: Cluster, topic: str, partition: int, offset: int) -> None:
    """What retention or deleteRecords does: records below ``offset`` are gone."""

    def move() -> None:
        for broker in cluster.brokers.values():
            log = broker.rm.log(topic, partition)
            if log is not None:
                log.maybe_increment_log_start_offset(offset)

    cluster.call(move)
