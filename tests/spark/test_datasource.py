"""The ``replog`` DataFrame source and sink against a real cluster: batch, streaming, writes."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from replog.broker.shell.cluster import Cluster
from tests.spark.conftest import create_topic, move_log_start, produce

pytestmark = pytest.mark.spark

COUNTS = (300, 200, 100)


@pytest.fixture(scope="module")
def df_topic(cluster: Cluster) -> str:
    create_topic(cluster, "df-events", len(COUNTS))
    rows = [
        (p, f"k{i % 5}".encode(), f"{p}:{i}".encode(), [("n", str(i).encode())])
        for p, n in enumerate(COUNTS)
        for i in range(n)
    ]
    produce(cluster, "df-events", rows)
    return "df-events"


def _reader(spark: Any, cluster: Cluster, **options: str) -> Any:
    reader = spark.read.format("replog").option("replog.bootstrap", cluster.bootstrap)
    for name, value in options.items():
        reader = reader.option(name, value)
    return reader


def test_batch_read_schema_counts_and_contents(spark: Any, cluster: Cluster, df_topic: str) -> None:
    df = _reader(spark, cluster, subscribe=df_topic, includeHeaders="true").load()
    assert [(f.name, f.dataType.simpleString()) for f in df.schema.fields] == [
        ("key", "binary"),
        ("value", "binary"),
        ("topic", "string"),
        ("partition", "int"),
        ("offset", "bigint"),
        ("timestamp", "timestamp"),
        ("timestampType", "int"),
        ("headers", "array<struct<key:string,value:binary>>"),
    ]
    assert df.rdd.getNumPartitions() == len(COUNTS)
    assert df.count() == sum(COUNTS)
    by_partition = {r["partition"]: r["count"] for r in df.groupBy("partition").count().collect()}
    assert by_partition == dict(enumerate(COUNTS))
    rows = df.where("partition = 2").orderBy("offset").collect()
    assert [bytes(r["value"]) for r in rows] == [f"2:{i}".encode() for i in range(COUNTS[2])]
    assert [r["offset"] for r in rows] == list(range(COUNTS[2]))
    assert rows[3]["headers"][0]["key"] == "n" and bytes(rows[3]["headers"][0]["value"]) == b"3"
    assert rows[0]["timestamp"].year >= 2024 and rows[0]["timestampType"] == 0


def test_batch_read_offsets_and_min_partitions(spark: Any, cluster: Cluster, df_topic: str) -> None:
    starting = json.dumps({df_topic: {"0": 10, "1": -2}})
    ending = json.dumps({df_topic: {"0": 20, "2": 5}})
    df = _reader(
        spark, cluster, subscribe=df_topic, startingOffsets=starting, endingOffsets=ending
    ).load()
    got = sorted((r["partition"], r["offset"]) for r in df.select("partition", "offset").collect())
    expected = [(0, o) for o in range(10, 20)] + [(1, o) for o in range(COUNTS[1])]
    assert got == expected + [(2, o) for o in range(5)]
    split = _reader(spark, cluster, assign=json.dumps({df_topic: [0, 1]}), minPartitions="6")
    split_df = split.load()
    assert split_df.rdd.getNumPartitions() == 6
    assert split_df.count() == COUNTS[0] + COUNTS[1]


def test_batch_fail_on_data_loss(spark: Any, cluster: Cluster) -> None:
    create_topic(cluster, "df-retention", 1)
    produce(cluster, "df-retention", [(0, None, b"%d" % i, []) for i in range(40)])
    move_log_start(cluster, "df-retention", 0, 15)
    starting = json.dumps({"df-retention": {"0": 0}})
    strict = _reader(spark, cluster, subscribe="df-retention", startingOffsets=starting)
    with pytest.raises(Exception, match=r"DataLossError|below the log start"):
        strict.load().count()
    lenient = _reader(
        spark,
        cluster,
        subscribe="df-retention",
        startingOffsets=starting,
        failOnDataLoss="false",
    )
    offsets = sorted(r["offset"] for r in lenient.load().select("offset").collect())
    assert offsets == list(range(15, 40))


def _stream_to_parquet(spark: Any, cluster: Cluster, topic: str, out: Path, **options: str) -> Any:
    stream = spark.readStream.format("replog").option("replog.bootstrap", cluster.bootstrap)
    stream = stream.option("subscribe", topic)
    for name, value in options.items():
        stream = stream.option(name, value)
    query = (
        stream.load()
        .writeStream.format("parquet")
        .option("path", str(out / "data"))
        .option("checkpointLocation", str(out / "checkpoint"))
        .trigger(availableNow=True)
        .start()
    )
    try:
        assert query.awaitTermination(120)
        return query
    finally:
        query.stop()


def test_stream_available_now_restarts_from_checkpoint_without_duplicates(
    spark: Any, cluster: Cluster, tmp_path: Path
) -> None:
    topic = "df-stream"
    create_topic(cluster, topic, 2)
    produce(cluster, topic, [(i % 2, None, b"a%d" % i, []) for i in range(400)])
    options = {"startingOffsets": "earliest", "maxOffsetsPerTrigger": "150"}
    first = _stream_to_parquet(spark, cluster, topic, tmp_path, **options)
    batches = [p["numInputRows"] for p in first.recentProgress if p["numInputRows"]]
    assert sum(batches) == 400
    assert max(batches) <= 150 + 2 and len(batches) >= 3  # admission control (PySpark >= 4.2)
    produce(cluster, topic, [(i % 2, None, b"b%d" % i, []) for i in range(100)])
    _stream_to_parquet(spark, cluster, topic, tmp_path, **options)
    data = spark.read.parquet(str(tmp_path / "data"))
    assert data.count() == 500
    assert data.select("partition", "offset").distinct().count() == 500
    values = {bytes(r["value"]) for r in data.select("value").collect()}
    assert values == {b"a%d" % i for i in range(400)} | {b"b%d" % i for i in range(100)}


def test_stream_defaults_to_latest(spark: Any, cluster: Cluster, tmp_path: Path) -> None:
    topic = "df-stream-latest"
    create_topic(cluster, topic, 1)
    produce(cluster, topic, [(0, None, b"old", [])])
    _stream_to_parquet(spark, cluster, topic, tmp_path)
    produce(cluster, topic, [(0, None, b"new", [])])
    _stream_to_parquet(spark, cluster, topic, tmp_path)
    values = [bytes(r["value"]) for r in spark.read.parquet(str(tmp_path / "data")).collect()]
    assert values == [b"new"]


def test_sink_batch_and_stream(spark: Any, cluster: Cluster, tmp_path: Path) -> None:
    create_topic(cluster, "sink-out", 3)
    rows = [(f"k{i}", f"v{i}", i % 3, [("src", b"test")]) for i in range(30)]
    df = spark.createDataFrame(
        rows,
        "key string, value string, partition int, headers array<struct<key:string,value:binary>>",
    )
    (
        df.write.format("replog")
        .option("replog.bootstrap", cluster.bootstrap)
        .option("topic", "sink-out")
        .mode("append")
        .save()
    )
    back = _reader(spark, cluster, subscribe="sink-out", includeHeaders="true").load().collect()
    assert sorted((r["partition"], bytes(r["key"]), bytes(r["value"])) for r in back) == sorted(
        (i % 3, f"k{i}".encode(), f"v{i}".encode()) for i in range(30)
    )
    assert all(bytes(r["headers"][0]["value"]) == b"test" for r in back)
    with pytest.raises(Exception, match="overwrite"):
        (
            df.write.format("replog")
            .option("replog.bootstrap", cluster.bootstrap)
            .option("topic", "sink-out")
            .mode("overwrite")
            .save()
        )

    create_topic(cluster, "sink-copy", 1)
    query = (
        spark.readStream.format("replog")
        .option("replog.bootstrap", cluster.bootstrap)
        .option("subscribe", "sink-out")
        .option("startingOffsets", "earliest")
        .load()
        .selectExpr("key", "value", "'sink-copy' AS topic")
        .writeStream.format("replog")
        .option("replog.bootstrap", cluster.bootstrap)
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
        .trigger(availableNow=True)
        .start()
    )
    try:
        assert query.awaitTermination(120)
    finally:
        query.stop()
    copied = _reader(spark, cluster, subscribe="sink-copy").load().collect()
    assert sorted(bytes(r["value"]) for r in copied) == sorted(f"v{i}".encode() for i in range(30))
