"""Replication benchmark: brokers in their own processes on loopback, on the
built-in metadata quorum (3 ``replog controller`` voters) or on ZooKeeper.

    python -m benchmarks.replication [--repeats 3] [--duration 3] [--warmup 1]
        [--batches 1,100,1000] [--modes replicated,fsync] [--cases NAME,...]
        [--ab loop=asyncio,uvloop | --ab src=/tmp/base/src,. | --ab setting.NAME=A,B]
        [--idle-partitions 0,100,1000] [--floor]

Cases: 100-byte records, ``acks=all``, batches of 1, 100 and 1000 records, per durability mode
(3 brokers, topic RF 3, min ISR 2); and a single-broker ``acks=1`` baseline (RF 1) per batch size.
``--idle-partitions N,...`` measures every case again beside a second topic of N partitions (RF
as the cluster's) that nothing writes to: the cost idle partitions add to each acknowledgement
(``broker_cpu_us_per_batch``), which fetch sessions are meant to keep near zero; such cases are
named ``...-idleN``, and the targets line gives each N's CPU per batch against N = 0.
``--floor`` adds ``floor-acks1-batch1``: the same load against ``benchmarks.floor_server`` (a
bare ``asyncio.Protocol`` server answering every Produce with a fixed response, the floor for a
Python request/response server), so the targets line can put the single broker's CPU per
produce against the floor measured in the same run.

Trustworthy figures on a small shared machine: every measurement gets a fresh cluster
(coordinator and brokers) and a warm-up before its window; every case is measured ``--repeats``
times, and the runs are interleaved (round 1: every case under A then B; round 2: B then A; ...)
so drift over the run hits both sides alike. ``--ab`` compares two configurations of the broker
processes within one run: their event loop, their source tree (a checkout of main against
this one), or an integer broker setting. One JSON line per run (``records_per_s``,
``acked_batches_per_s``, ``p50_ms``/``p99_ms`` acknowledgement latency, the brokers'
``broker_cpu_us_per_batch`` and ``broker_cpu_util`` from /proc), then one summary line per case
with the median and range (``spread_pct``) of each figure per variant and, with ``--ab``, the
ratio B/A of the medians; a last line compares the issue's targets with the last variant's
medians (reported, never asserted).

Load generator: the point is to measure the brokers, not a Python client, so each run encodes
one Produce request per partition once (``encode_batch`` + ``encode_request``) and resends the
same frame with a fresh correlation id. A broker answers one connection's requests in order, so
concurrency comes from ``--connections`` connections spread over the partitions' leaders, each
with one request in flight; a request's latency is from its write to its answer. The generator
runs in this process (on ``--client-loop``, the same for both variants) and shares the
machine's cores with the brokers and the coordinator.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, cast

import attrs

_ROOT = Path(__file__).resolve().parents[1]
if str(_ROOT) not in sys.path:  # the harness and the ZooKeeper helper live under tests/
    sys.path.insert(0, str(_ROOT))

from tests.faults.harness import ProcessCluster, QuorumProcesses  # noqa: E402
from tests.servers import ZkServer, start_zookeeper  # noqa: E402

from benchmarks import floor_server  # noqa: E402
from replog.client import AsyncAdmin  # noqa: E402
from replog.client.connection import BrokerConnection  # noqa: E402
from replog.event_loop import run as run_loop  # noqa: E402
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
IDLE_TOPIC = "bench-idle"
TARGET_IDLE_CPU_GROWTH = 1.10
TARGET_SINGLE_CPU_US = 40.0
TARGET_SINGLE_OVER_FLOOR = 2.5
FLOOR_CASE = "floor-acks1-batch1"
FLOOR_PRODUCE_VERSION = 9
RECORD_BYTES = 100
TARGET_RECORDS_PER_S_BATCH_1000 = 1_500_000
TARGET_BATCHES_PER_S_BATCH_1 = 6_500
TARGET_P99_MS_BATCH_1 = 10.0
TARGET_PRODUCES_PER_S_SINGLE = 20_000

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
    idle_partitions: int = 0


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


class _ProducerProtocol(asyncio.Protocol):
    """One load-generating connection: sends ``frame`` again and again, one in flight, timing
    each acknowledgement. The next request goes out from ``data_received`` as soon as the
    answer is in -- no task wakes up in between, so the generator costs the box little."""

    def __init__(self, frame: bytearray, version: int, counters: _Counters) -> None:
        self.frame, self.version, self.counters = frame, version, counters
        self.frames = FrameReader()
        self.transport: asyncio.Transport | None = None
        self.correlation_id = 0
        self.sent_s = 0.0
        self.done: asyncio.Future[None] = asyncio.get_running_loop().create_future()

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)  # uvloop's is no asyncio.Transport
        self._send()

    def _send(self) -> None:
        if self.counters.stopping:
            if not self.done.done():
                self.done.set_result(None)
            return
        self.correlation_id = (self.correlation_id + 1) & 0x7FFFFFFF
        self.frame[8:12] = self.correlation_id.to_bytes(4, "big")  # size api version corr
        self.sent_s = time.perf_counter()
        assert self.transport is not None
        self.transport.write(bytes(self.frame))

    def data_received(self, data: bytes) -> None:
        for frame in self.frames.feed(data):
            done_s = time.perf_counter()
            _, body = decode_response(frame, api_key=PRODUCE.api_key, api_version=self.version)
            assert isinstance(body, ProduceResponse)
            error = body.responses[0].partition_responses[0].error_code
            if self.counters.measuring:
                if error:
                    self.counters.errors += 1
                else:
                    self.counters.acked_batches += 1
                    self.counters.latencies_s.append(done_s - self.sent_s)
            if error:
                asyncio.get_running_loop().call_later(0.01, self._send)
            else:
                self._send()

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.done.done():
            self.done.set_exception(ConnectionError(f"the broker closed the connection: {exc}"))


async def _connection_loop(
    host: str, port: int, frame: bytearray, version: int, counters: _Counters
) -> None:
    """One ``_ProducerProtocol`` connection, until ``counters.stopping``."""
    loop = asyncio.get_running_loop()
    protocol = _ProducerProtocol(frame, version, counters)
    transport, _ = await loop.create_connection(lambda: protocol, host, port)
    try:
        await protocol.done
    finally:
        transport.close()


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
    on_window: Callable[[str], None] = lambda phase: None,
    version: int | None = None,
) -> dict[str, Any]:
    if version is None:  # the highest Produce version the leader serves
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
    on_window("start")
    counters.measuring = True
    started_s = time.perf_counter()
    await asyncio.sleep(duration_s)
    counters.measuring = False
    elapsed_s = time.perf_counter() - started_s
    on_window("end")
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
def _coordinator(zk: ZkServer | None, base: Path, name: str) -> Iterator[str]:
    """A chroot of the run's ZooKeeper, or a fresh 3-voter quorum for this cluster."""
    if zk is not None:
        yield zk.url(f"bench-{name}")
        return
    quorum = QuorumProcesses.start(base / f"{name}-quorum", 3)
    try:
        yield quorum.url
    finally:
        quorum.close()


@contextmanager
def _cluster(
    coordinator_url: str,
    base: Path,
    name: str,
    brokers: int,
    durability: str,
    partitions: int,
    settings: dict[str, Any],
    idle_partitions: int = 0,
) -> Iterator[tuple[ProcessCluster, dict[int, int]]]:
    replication = min(3, brokers)
    cluster = ProcessCluster.create(
        base / name,
        coordinator_url,
        brokers,
        settings={
            **settings,
            "durability": durability,
            "default_replication_factor": replication,
            "default_min_insync_replicas": min(2, replication),
        },
    )
    cluster.start()
    try:

        async def setup() -> dict[int, int]:
            admin = await AsyncAdmin.start(cluster.bootstrap)
            config = {"min.insync.replicas": str(min(2, brokers))}
            try:
                await admin.create_topics(TOPIC, partitions, replication, config)
                if idle_partitions:
                    await admin.create_topics(IDLE_TOPIC, idle_partitions, replication, config)
            finally:
                await admin.close()
            return await _leaders(cluster.bootstrap, partitions)

        yield cluster, run_loop(setup())
    except BaseException:
        print(cluster.log_tails(20), file=sys.stderr)
        raise
    finally:
        cluster.close()


@attrs.frozen
class Variant:
    """One side of an A/B comparison: what the brokers' processes get."""

    label: str
    env: dict[str, str] = attrs.field(factory=dict)
    settings: dict[str, int] = attrs.field(factory=dict)


def parse_ab(spec: str | None) -> list[Variant]:
    """``--ab KIND=A,B`` -> the two variants; without ``--ab``, one variant as configured.

    Kinds: ``loop`` (``REPLOG_EVENT_LOOP`` of the broker processes: asyncio, uvloop, auto),
    ``src`` (a source tree put first on the brokers' ``PYTHONPATH``: compares two checkouts,
    e.g. ``git archive main src | tar -x -C /tmp/base`` against this one; ``.`` is this tree),
    ``setting.NAME`` (an integer ``BrokerConfig`` field).
    """
    if not spec:
        return [Variant("as-configured")]
    kind, sep, values = spec.partition("=")
    sides = [v.strip() for v in values.split(",")]
    if not sep or len(sides) != 2 or not all(sides):
        raise ValueError(f"--ab wants KIND=A,B, got {spec!r}")
    variants = []
    for side in sides:
        if kind == "loop":
            variants.append(Variant(f"loop={side}", env={"REPLOG_EVENT_LOOP": side}))
        elif kind == "src":
            path = str((_ROOT / "src") if side == "." else Path(side).resolve())
            variants.append(Variant(f"src={side}", env={"PYTHONPATH": path}))
        elif kind.startswith("setting."):
            name = kind.removeprefix("setting.")
            variants.append(Variant(f"{name}={side}", settings={name: int(side)}))
        else:
            raise ValueError(f"--ab kind {kind!r}: expected loop, src or setting.NAME")
    return variants


@contextmanager
def _environment(env: dict[str, str]) -> Iterator[None]:
    """``env`` in ``os.environ`` while processes started inside inherit it."""
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def _cpu_s(pids: Sequence[int]) -> float:
    """User + system CPU seconds the processes ``pids`` used so far (Linux /proc)."""
    total_ticks = 0
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total_ticks += int(fields[11]) + int(fields[12])  # utime, stime (fields 14, 15)
    return total_ticks / os.sysconf("SC_CLK_TCK")


def _all_cases(
    batches: Sequence[int], modes: Sequence[str], baseline: bool, idle: Sequence[int] = (0,)
) -> list[Case]:
    cases = [Case(f"baseline-acks1-batch{b}", "replicated", 1, 1, b) for b in batches]
    if not baseline:
        cases = []
    for mode in modes:
        cases += [Case(f"{mode}-acksall-batch{b}", mode, 3, -1, b) for b in batches]
    return [
        attrs.evolve(case, name=f"{case.name}-idle{n}" if n else case.name, idle_partitions=n)
        for case in cases
        for n in idle
    ]


def _run_floor(case: Case, variant: Variant, args: argparse.Namespace) -> dict[str, Any]:
    with _environment(variant.env), floor_server.running(FLOOR_PRODUCE_VERSION) as (address, pid):
        probe: dict[str, float] = {}
        result = run_loop(
            _measure(
                case,
                {0: address},
                dict.fromkeys(range(args.partitions), 0),
                args.connections,
                args.warmup,
                args.duration,
                on_window=lambda phase: probe.__setitem__(phase, _cpu_s([pid])),
                version=FLOOR_PRODUCE_VERSION,
            ),
            choice=args.client_loop,
        )
    return _with_cpu(result, variant, probe.get("end", 0.0) - probe.get("start", 0.0))


def _with_cpu(result: dict[str, Any], variant: Variant, cpu_s: float) -> dict[str, Any]:
    result["variant"] = variant.label
    result["broker_cpu_util"] = round(cpu_s / result["duration_s"], 3)
    batches = result["acked_batches"]
    result["broker_cpu_us_per_batch"] = round(cpu_s * 1e6 / batches, 1) if batches else None
    return result


def run_one(
    case: Case, variant: Variant, args: argparse.Namespace, base: Path, zk: ZkServer | None
) -> dict[str, Any]:
    """One measurement of ``case`` under ``variant`` on a cluster of its own."""
    if case.name == FLOOR_CASE:
        return _run_floor(case, variant, args)
    name = f"{case.name}-{variant.label.replace('/', '_').replace('=', '-')}-{time.monotonic_ns()}"
    settings = {**_BROKER_SETTINGS, **variant.settings}
    with (
        _environment(variant.env),
        _coordinator(zk, base, name) as url,
        _cluster(
            url,
            base,
            name,
            case.brokers,
            case.durability,
            args.partitions,
            settings,
            case.idle_partitions,
        ) as (cluster, leaders),
    ):
        addresses = {i: b.address for i, b in cluster.brokers.items()}
        pids = [b.proc.pid for b in cluster.brokers.values() if b.proc is not None]
        probe: dict[str, float] = {}
        result = run_loop(
            _measure(
                case,
                addresses,
                leaders,
                args.connections,
                args.warmup,
                args.duration,
                on_window=lambda phase: probe.__setitem__(phase, _cpu_s(pids)),
            ),
            choice=args.client_loop,
        )
    return _with_cpu(result, variant, probe.get("end", 0.0) - probe.get("start", 0.0))


def _stats(values: Sequence[float]) -> dict[str, float]:
    return {
        "median": round(statistics.median(values), 3),
        "min": round(min(values), 3),
        "max": round(max(values), 3),
        "spread_pct": round(100 * (max(values) - min(values)) / statistics.median(values), 1)
        if statistics.median(values)
        else 0.0,
    }


_METRICS = ("records_per_s", "acked_batches_per_s", "p50_ms", "p99_ms", "broker_cpu_us_per_batch")


def summarize(results: list[dict[str, Any]], variants: list[Variant]) -> list[dict[str, Any]]:
    """Per case and variant: median and range of every metric over the repeats; with two
    variants, the ratio B/A of the medians."""
    lines = []
    for case in dict.fromkeys(r["case"] for r in results):
        line: dict[str, Any] = {"summary": case}
        medians: dict[str, dict[str, float]] = {}
        for variant in variants:
            runs = [r for r in results if r["case"] == case and r["variant"] == variant.label]
            per_metric = {}
            for metric in _METRICS:
                values = [r[metric] for r in runs if r.get(metric) is not None]
                if values:
                    per_metric[metric] = _stats(values)
            medians[variant.label] = {k: v["median"] for k, v in per_metric.items()}
            line[variant.label] = {"repeats": len(runs), **per_metric}
        if len(variants) == 2:
            a, b = (medians[v.label] for v in variants)
            line["ratio_b_over_a"] = {
                k: round(b[k] / a[k], 3) for k in _METRICS if a.get(k) and k in b
            }
        lines.append(line)
    return lines


def run(args: argparse.Namespace) -> list[dict[str, Any]]:
    """Every case under every variant, ``--repeats`` times, interleaved: each round measures
    every case once per variant (the variants' order alternates between rounds), each on a
    fresh cluster after a warm-up, so drift over the run shows in every case alike."""
    batches = [int(b) for b in args.batches.split(",")]
    modes = [m for m in args.modes.split(",") if m]
    idle = [int(n) for n in args.idle_partitions.split(",")]
    cases = _all_cases(batches, modes, not args.no_baseline, idle)
    if args.floor:
        cases.insert(0, Case(FLOOR_CASE, "none", 0, 1, 1))
    if args.cases:
        wanted = set(args.cases.split(","))
        cases = [c for c in cases if c.name in wanted]
    variants = parse_ab(args.ab)
    base = Path(tempfile.mkdtemp(prefix="replog-bench-"))
    results: list[dict[str, Any]] = []
    zk = start_zookeeper(base / "zk") if args.coordinator == "zookeeper" else None
    try:
        for round_ in range(args.repeats):
            order = variants if round_ % 2 == 0 else variants[::-1]
            for case in cases:
                for variant in order:
                    result = run_one(case, variant, args, base, zk)
                    result["round"] = round_
                    print(json.dumps(result), flush=True)
                    results.append(result)
    finally:
        if zk is not None:
            zk.stop()
        if not args.keep:
            shutil.rmtree(base, ignore_errors=True)
    for line in summarize(results, variants):
        print(json.dumps(line), flush=True)
    print(json.dumps(_targets(results, variants[-1].label)), flush=True)
    return results


def _targets(results: list[dict[str, Any]], variant: str) -> dict[str, Any]:
    def median(case: str, key: str) -> float | None:
        values = [r[key] for r in results if r["case"] == case and r["variant"] == variant]
        return statistics.median(values) if values else None

    figures = {
        "baseline_acks1_batch1_produces_per_s": (
            median("baseline-acks1-batch1", "acked_batches_per_s"),
            TARGET_PRODUCES_PER_S_SINGLE,
            ">=",
        ),
        "replicated_batch1_acked_batches_per_s": (
            median("replicated-acksall-batch1", "acked_batches_per_s"),
            TARGET_BATCHES_PER_S_BATCH_1,
            ">=",
        ),
        "replicated_batch1_p99_ms": (
            median("replicated-acksall-batch1", "p99_ms"),
            TARGET_P99_MS_BATCH_1,
            "<=",
        ),
        "replicated_batch1000_records_per_s": (
            median("replicated-acksall-batch1000", "records_per_s"),
            TARGET_RECORDS_PER_S_BATCH_1000,
            ">=",
        ),
    }
    summary: dict[str, Any] = {"targets": f"medians of {variant} (reported, not asserted)"}
    for key, (value, target, op) in figures.items():
        met = None if value is None else (value >= target if op == ">=" else value <= target)
        summary[key] = {"value": value, "target": f"{op} {target}", "met": met}
    summary.update(_idle_growth(results, variant))
    single = median("baseline-acks1-batch1", "broker_cpu_us_per_batch")
    floor = median(FLOOR_CASE, "broker_cpu_us_per_batch")
    if single is not None:
        summary["baseline_acks1_batch1_cpu_us_per_produce"] = _met(single, TARGET_SINGLE_CPU_US)
    if single is not None and floor:
        over = _met(round(single / floor, 2), TARGET_SINGLE_OVER_FLOOR)
        summary["baseline_acks1_batch1_cpu_over_floor"] = {**over, "floor_cpu_us": floor}
    return summary


def _met(value: float, at_most: float) -> dict[str, Any]:
    return {"value": value, "target": f"<= {at_most}", "met": value <= at_most}


def _idle_growth(results: list[dict[str, Any]], variant: str) -> dict[str, Any]:
    """Per ``...-idleN`` case: its median broker CPU per batch over its N = 0 case's."""
    cpu: dict[str, float] = {}
    for case in dict.fromkeys(r["case"] for r in results):
        values = [
            r["broker_cpu_us_per_batch"]
            for r in results
            if r["case"] == case and r["variant"] == variant and r["broker_cpu_us_per_batch"]
        ]
        if values:
            cpu[case] = statistics.median(values)
    growth: dict[str, Any] = {}
    for case, value in cpu.items():
        plain, sep, _ = case.rpartition("-idle")
        if sep and cpu.get(plain):
            ratio = round(value / cpu[plain], 3)
            growth[f"{case}_cpu_per_batch_over_idle0"] = {
                "value": ratio,
                "target": f"<= {TARGET_IDLE_CPU_GROWTH}",
                "met": ratio <= TARGET_IDLE_CPU_GROWTH,
            }
    return growth


def main(argv: Sequence[str] | None = None) -> int:
    """Command-line entry point."""
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.replication",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--duration", type=float, default=3.0, help="measured seconds per run")
    parser.add_argument("--warmup", type=float, default=1.0, help="warm-up seconds per run")
    parser.add_argument("--repeats", type=int, default=3, help="runs per case and variant")
    parser.add_argument("--batches", default="1,100,1000", help="records per batch, comma list")
    parser.add_argument("--modes", default="replicated", help="durability modes (fsync too)")
    parser.add_argument("--cases", default="", help="only these case names, comma list")
    parser.add_argument("--no-baseline", action="store_true", help="skip the 1-broker cases")
    parser.add_argument("--ab", default="", metavar="KIND=A,B", help="compare two variants")
    parser.add_argument(
        "--client-loop", default="auto", help="the load generator's loop (auto, uvloop, asyncio)"
    )
    parser.add_argument("--partitions", type=int, default=6, help="partitions of the topic")
    parser.add_argument(
        "--idle-partitions",
        default="0",
        help="measure each case beside an idle topic of these partition counts, comma list",
    )
    parser.add_argument(
        "--connections", type=int, default=24, help="concurrent producer connections"
    )
    parser.add_argument("--keep", action="store_true", help="keep the data dirs and logs")
    parser.add_argument(
        "--floor", action="store_true", help="also measure the bare-server floor (one process)"
    )
    parser.add_argument(
        "--coordinator",
        choices=("raft", "zookeeper"),
        default="raft",
        help="the built-in metadata quorum (default) or a ZooKeeper server",
    )
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
    if args.duration <= 0 or args.repeats < 1 or args.partitions < 1 or args.connections < 1:
        parser.error("--duration, --repeats, --partitions and --connections must be positive")
    if not all(n.strip().isdigit() for n in args.idle_partitions.split(",")):
        parser.error(f"--idle-partitions wants counts like 0,100,1000: {args.idle_partitions!r}")
    try:
        parse_ab(args.ab)
    except ValueError as exc:
        parser.error(str(exc))
    run(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
