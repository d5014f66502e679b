"""Replication benchmark (issue 5): 3 brokers in 3 processes on loopback, ZooKeeper coordinator.

    python -m benchmarks.replication [--scale 1.0] [--batches 1,100,1000] [--modes replicated,fsync]

Cases: 100-byte records, ``acks=all``, batches of 1, 100 and 1000 records, in both durability
modes (a 3-broker cluster per mode, topic RF 3, min ISR 2); and, in the same run, a single-broker
``acks=1`` baseline (RF 1) at each batch size. One JSON line per case on stdout with
``records_per_s``, ``acked_batches_per_s``, ``p50_ms``/``p99_ms`` acknowledgement latency and
``ratio_to_baseline`` (records/s over the baseline's at the same batch size); a last line sums
up the issue's targets (reported, never asserted).

Load generator: the point is to measure the brokers, not a Python client, so each case encodes
one Produce request per partition once (``encode_batch`` + ``encode_request``) and resends the
same frame with a fresh correlation id. A broker answers one connection's requests in order
(``replog.broker.server``), so concurrency comes from ``--connections`` connections spread over
the partitions' leaders, each with one request in flight; a request's latency is from its write
to its answer. The generator runs in this process and shares the machine's cores with the
brokers and ZooKeeper -- the figures are for the whole box.

Default run: ~5 s measured (+1 s warm-up) per case, 9 cases, about 1.5 minutes all told;
``--scale`` multiplies the measured time.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import attrs

_ROOT = Path(__file__).resolve().parents[1]
if str(_ROOT) not in sys.path:  # the harness and the ZooKeeper helper live under tests/
    sys.path.insert(0, str(_ROOT))

from tests.faults.harness import ProcessCluster  # noqa: E402
from tests.servers import ZkServer, start_zookeeper  # noqa: E402

from replog.client import AsyncAdmin  # noqa: E402
from replog.client.connection import BrokerConnection  # noqa: E402
from replog.log import encode_batch  # noqa: E402
from replog.protocol import FrameReader, RequestHeader, decode_response, encode_request  # noqa: E402
from replog.protocol.messages import (  # noqa: E402
    PRODUCE,
    PartitionProduceData,
    ProduceRequest,
    ProduceResponse,
    TopicProduceData,
)

TOPIC = "bench"
RECORD_BYTES = 100
TARGET_RECORDS_PER_S_BATCH_1000 = 1_000_000
TARGET_BATCHES_PER_S_BATCH_1 = 6_500

_BROKER_SETTINGS: dict[str, Any] = {
    "session_timeout_ms": 6_000,
    "heartbeat_interval_ms": 500,
    "replica_lag_ms_max": 10_000,
    "replica_fetch_wait_ms_max": 100,
}


@attrs.frozen
class Case:
    """One measured configuration."""

    name: str
    durability: str
    brokers: int
    acks: int
    batch_records: int


@attrs.define
class _Counters:
    """What the connections measured inside the window."""

    measuring: bool = False
    stopping: bool = False
    acked_batches: int = 0
    errors: int = 0
    latencies_s: list[float] = attrs.Factory(list)


def _produce_frame(partition: int, batch_records: int, acks: int, version: int) -> bytearray:
    """One encoded Produce request for ``partition`` (correlation id patched per send)."""
    batch = encode_batch(
        [b"v" * RECORD_BYTES] * batch_records, base_timestamp=int(time.time() * 1000)
    )
    request = ProduceRequest(
        acks=acks,
        timeout_ms=30_000,
        topic_data=[
            TopicProduceData(
                name=TOPIC, partition_data=[PartitionProduceData(index=partition, records=batch)]
            )
        ],
    )
    header = RequestHeader(
        api_key=PRODUCE.api_key, api_version=version, correlation_id=0, client_id="bench"
    )
    return bytearray(encode_request(header, request))


async def _connection_loop(
    host: str, port: int, frame: bytearray, version: int, counters: _Counters
) -> None:
    """Send ``frame`` again and again, one in flight, timing each acknowledgement."""
    reader, writer = await asyncio.open_connection(host, port)
    frames = FrameReader()
    correlation_id = 0
    try:
        while not counters.stopping:
            correlation_id = (correlation_id + 1) & 0x7FFFFFFF
            frame[8:12] = correlation_id.to_bytes(4, "big")  # size(4) api(2) version(2) corr(4)
            sent_s = time.perf_counter()
            writer.write(frame)
            response: list[bytes] = []
            while not response:
                data = await reader.read(65536)
                if not data:
                    raise ConnectionError(f"{host}:{port} closed the connection")
                response = list(frames.feed(data))
            done_s = time.perf_counter()
            _, body = decode_response(response[0], api_key=PRODUCE.api_key, api_version=version)
            assert isinstance(body, ProduceResponse)
            error = body.responses[0].partition_responses[0].error_code
            if not counters.measuring:
                continue
            if error:
                counters.errors += 1
                await asyncio.sleep(0.01)
            else:
                counters.acked_batches += 1
                counters.latencies_s.append(done_s - sent_s)
    finally:
        writer.close()


async def _leaders(bootstrap: str, partitions: int) -> dict[int, int]:
    admin = await AsyncAdmin.start(bootstrap)
    try:
        topic = (await admin.describe_topics([TOPIC]))[TOPIC]
    finally:
        await admin.close()
    leaders = {p.partition: p.leader for p in topic.partitions}
    if len(leaders) != partitions or any(leader < 0 for leader in leaders.values()):
        raise RuntimeError(f"not every partition has a leader: {leaders}")
    return leaders


async def _measure(
    case: Case,
    addresses: dict[int, str],
    leaders: dict[int, int],
    connections: int,
    warmup_s: float,
    duration_s: float,
) -> dict[str, Any]:
    host, port = addresses[leaders[0]].rsplit(":", 1)
    probe = await BrokerConnection.open(host, int(port))
    version = probe.versions[PRODUCE.api_key]
    await probe.close()
    counters = _Counters()
    tasks = []
    for n in range(connections):
        partition = n % len(leaders)
        host, port = addresses[leaders[partition]].rsplit(":", 1)
        frame = _produce_frame(partition, case.batch_records, case.acks, version)
        tasks.append(
            asyncio.create_task(_connection_loop(host, int(port), frame, version, counters))
        )
    await asyncio.sleep(warmup_s)
    counters.measuring = True
    started_s = time.perf_counter()
    await asyncio.sleep(duration_s)
    counters.measuring = False
    elapsed_s = time.perf_counter() - started_s
    counters.stopping = True
    results = await asyncio.gather(*tasks, return_exceptions=True)
    failures = [repr(r) for r in results if isinstance(r, BaseException)]
    latencies_ms = sorted(s * 1000 for s in counters.latencies_s)
    return {
        "case": case.name,
        "durability": case.durability,
        "brokers": case.brokers,
        "acks": "all" if case.acks == -1 else case.acks,
        "batch_records": case.batch_records,
        "record_bytes": RECORD_BYTES,
        "partitions": len(leaders),
        "connections": connections,
        "duration_s": round(elapsed_s, 2),
        "acked_batches": counters.acked_batches,
        "records_per_s": round(counters.acked_batches * case.batch_records / elapsed_s),
        "acked_batches_per_s": round(counters.acked_batches / elapsed_s, 1),
        "p50_ms": round(_percentile(latencies_ms, 50), 3),
        "p99_ms": round(_percentile(latencies_ms, 99), 3),
        "mean_ms": round(statistics.fmean(latencies_ms), 3) if latencies_ms else None,
        "errors": counters.errors,
        "connection_failures": failures,
    }


def _percentile(sorted_values: Sequence[float], pct: float) -> float:
    if not sorted_values:
        return float("nan")
    index = min(len(sorted_values) - 1, max(0, round(pct / 100 * len(sorted_values)) - 1))
    return sorted_values[index]


@contextmanager
def _cluster(
    zk: ZkServer, base: Path, name: str, brokers: int, durability: str, partitions: int
) -> Iterator[tuple[ProcessCluster, dict[int, int]]]:
    replication = min(3, brokers)
    cluster = ProcessCluster.create(
        base / name,
        zk.url(f"bench-{name}"),
        brokers,
        settings={
            **_BROKER_SETTINGS,
            "durability": durability,
            "default_replication_factor": replication,
            "default_min_insync_replicas": min(2, replication),
        },
    )
    cluster.start()
    try:

        async def setup() -> dict[int, int]:
            admin = await AsyncAdmin.start(cluster.bootstrap)
            try:
                await admin.create_topics(
                    TOPIC, partitions, replication, {"min.insync.replicas": str(min(2, brokers))}
                )
            finally:
                await admin.close()
            return await _leaders(cluster.bootstrap, partitions)

        yield cluster, asyncio.run(setup())
    except BaseException:
        print(cluster.log_tails(20), file=sys.stderr)
        raise
    finally:
        cluster.close()


def _cases(batches: Sequence[int], modes: Sequence[str]) -> list[tuple[str, int, list[Case]]]:
    """(durability, broker count, cases) per cluster, the baseline first."""
    plan = [
        (
            "replicated",
            1,
            [Case(f"baseline-acks1-batch{b}", "replicated", 1, 1, b) for b in batches],
        )
    ]
    for mode in modes:
        plan.append((mode, 3, [Case(f"{mode}-acksall-batch{b}", mode, 3, -1, b) for b in batches]))
    return plan


def run(args: argparse.Namespace) -> list[dict[str, Any]]:
    """Run every case; print and return one result dict per case."""
    batches = [int(b) for b in args.batches.split(",")]
    modes = [m for m in args.modes.split(",") if m]
    duration_s = 5.0 * args.scale
    base = Path(tempfile.mkdtemp(prefix="replog-bench-"))
    results: list[dict[str, Any]] = []
    baseline: dict[int, float] = {}
    zk = start_zookeeper(base / "zk")
    try:
        for durability, brokers, cases in _cases(batches, modes):
            name = f"{durability}-{brokers}b"
            with _cluster(zk, base, name, brokers, durability, args.partitions) as (cl, leaders):
                addresses = {i: b.address for i, b in cl.brokers.items()}
                for case in cases:
                    result = asyncio.run(
                        _measure(case, addresses, leaders, args.connections, 1.0, duration_s)
                    )
                    if case.brokers == 1:
                        baseline[case.batch_records] = result["records_per_s"]
                    reference = baseline.get(case.batch_records)
                    result["ratio_to_baseline"] = (
                        round(result["records_per_s"] / reference, 3) if reference else None
                    )
                    print(json.dumps(result), flush=True)
                    results.append(result)
    finally:
        zk.stop()
        if not args.keep:
            shutil.rmtree(base, ignore_errors=True)
    print(json.dumps(_summary(results)), flush=True)
    return results


def _summary(results: list[dict[str, Any]]) -> dict[str, Any]:
    def pick(case: str, key: str) -> Any:
        return next((r[key] for r in results if r["case"] == case), None)

    at_1000 = pick("replicated-acksall-batch1000", "records_per_s")
    at_1 = pick("replicated-acksall-batch1", "acked_batches_per_s")
    return {
        "summary": "targets (reported, not asserted)",
        "replicated_batch1000_records_per_s": at_1000,
        "target_records_per_s": TARGET_RECORDS_PER_S_BATCH_1000,
        "met_records_per_s": None if at_1000 is None else at_1000 >= 1_000_000,
        "replicated_batch1_acked_batches_per_s": at_1,
        "target_acked_batches_per_s": TARGET_BATCHES_PER_S_BATCH_1,
        "met_acked_batches_per_s": None if at_1 is None else at_1 >= 6_500,
    }


def main(argv: Sequence[str] | None = None) -> int:
    """Command-line entry point."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks.replication", description=__doc__)
    parser.add_argument("--scale", type=float, default=1.0, help="multiply measured time (5 s)")
    parser.add_argument("--batches", default="1,100,1000", help="records per batch, comma list")
    parser.add_argument("--modes", default="replicated,fsync", help="durability modes")
    parser.add_argument("--partitions", type=int, default=6, help="partitions of the topic")
    parser.add_argument(
        "--connections", type=int, default=24, help="concurrent producer connections"
    )
    parser.add_argument("--keep", action="store_true", help="keep the data dirs and logs")
    parser.add_argument(
        "--broker-setting",
        action="append",
        default=[],
        metavar="KEY=INT",
        help="override a BrokerConfig setting of the benchmark's brokers (repeatable), e.g. "
        "replica_fetch_min_bytes=4096",
    )
    args = parser.parse_args(argv)
    for item in args.broker_setting:
        key, _, value = item.partition("=")
        if not key or not value.lstrip("-").isdigit():
            parser.error(f"--broker-setting wants KEY=INT, got {item!r}")
        _BROKER_SETTINGS[key] = int(value)
    if args.scale <= 0 or args.partitions < 1 or args.connections < 1:
        parser.error("--scale, --partitions and --connections must be positive")
    run(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
