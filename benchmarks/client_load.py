"""Real-client load benchmark: librdkafka producers at a fixed rate, with a consumer group.

    python -m benchmarks.client_load [--repeats 3] [--duration 20] [--warmup 3]
        [--rate 300] [--producers 2] [--offsets-partitions 50] [--idle-partitions 0,1000]
        [--ab loop=asyncio,uvloop | --ab src=/tmp/base/src,. | --ab setting.NAME=A,B]

How the project is measured from outside: three ``replog broker`` processes on the built-in
metadata quorum (three ``replog controller`` voters), a topic of ``--partitions`` (6)
partitions, RF 3, ``min.insync.replicas`` 2; a confluent-kafka consumer with a ``group.id``
subscribed to it (so the brokers create ``__consumer_offsets``, ``--offsets-partitions``
partitions at RF 3, and the group commits offsets as it reads); and ``--producers``
confluent-kafka producers, each sending ``--rate`` 100-byte records a second, ``acks=all``,
``linger.ms`` 5 (librdkafka's default), paced by the clock (a late record is sent at once, so
the offered load stays fixed while the brokers keep up).

Each measurement gets a fresh cluster; the window starts once the consumer has its assignment
and ``--warmup`` seconds of load have passed. One JSON line per run: records acknowledged per
second, the delivery latency librdkafka measured for each record (``Message.latency()``,
produce call to delivery report) as p50/p99/max, delivery errors, the records the consumer
read, and the brokers' CPU (``broker_cpu_us_per_ack``, ``broker_cpu_util``, from /proc). Then
one summary line per variant (medians and ranges over the repeats, the ratio B/A with
``--ab``) and a targets line: p99 <= 50 ms (the lean-path issue's figure; reported, never
asserted). Runs are interleaved (A then B, then B then A, ...). ``--idle-partitions N,...``
repeats every variant beside a second topic of N partitions (RF 3) nothing writes to, and the
targets line gives the broker CPU per acknowledgement of each N against N = 0 (the issue asks
at most 1.10x at N = 1,000).
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import attrs

from benchmarks.replication import (
    _BROKER_SETTINGS,
    TARGET_IDLE_CPU_GROWTH,
    TOPIC,
    Variant,
    _cluster,
    _coordinator,
    _cpu_s,
    _environment,
    _percentile,
    _stats,
    parse_ab,
)

RECORD = b"x" * 100
TARGET_P99_MS = 50.0


@attrs.define
class _Tally:
    """Delivery reports inside the window (written by the producers' poll threads)."""

    measuring: bool = False
    latencies_ms: list[float] = attrs.Factory(list)
    errors: int = 0
    lock: threading.Lock = attrs.Factory(threading.Lock)

    def delivered(self, error: Any, message: Any) -> None:
        if not self.measuring:
            return
        with self.lock:
            if error is not None:
                self.errors += 1
            else:
                self.latencies_ms.append(message.latency() * 1000)


def _produce(bootstrap: str, rate: float, tally: _Tally, stop: threading.Event) -> None:
    """One producer at ``rate`` records a second until ``stop``."""
    from confluent_kafka import Producer

    producer = Producer(
        {"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5, "enable.idempotence": False}
    )
    interval_s = 1.0 / rate
    next_s = time.perf_counter()
    while not stop.is_set():
        producer.produce(TOPIC, RECORD, on_delivery=tally.delivered)
        producer.poll(0)
        next_s += interval_s
        pause = next_s - time.perf_counter()
        if pause > 0:
            producer.poll(pause)
    producer.flush(10)


def _consume(
    bootstrap: str, assigned: threading.Event, stop: threading.Event, read: list[int]
) -> None:
    """A group member on the topic: reads (and auto-commits) until ``stop``."""
    from confluent_kafka import Consumer

    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "bench-load", "auto.offset.reset": "latest"}
    )
    consumer.subscribe([TOPIC], on_assign=lambda c, parts: assigned.set())
    try:
        while not stop.is_set():
            message = consumer.poll(0.1)
            if message is not None and message.error() is None:
                read[0] += 1
    finally:
        consumer.close()


def run_one(variant: Variant, idle: int, args: argparse.Namespace, base: Path) -> dict[str, Any]:
    """One measurement under ``variant`` beside ``idle`` idle partitions, on its own cluster."""
    name = f"load-{variant.label.replace('/', '_').replace('=', '-')}-{time.monotonic_ns()}"
    groups = {"offsets_topic_partitions": args.offsets_partitions}
    settings = {**_BROKER_SETTINGS, "groups": groups, **variant.settings}
    with (
        _environment(variant.env),
        _coordinator(None, base, name) as url,
        _cluster(url, base, name, 3, "replicated", args.partitions, settings, idle) as (
            cluster,
            _,
        ),
    ):
        pids = [b.proc.pid for b in cluster.brokers.values() if b.proc is not None]
        tally, stop, assigned, read = _Tally(), threading.Event(), threading.Event(), [0]
        threads = [
            threading.Thread(target=_consume, args=(cluster.bootstrap, assigned, stop, read))
        ] + [
            threading.Thread(target=_produce, args=(cluster.bootstrap, args.rate, tally, stop))
            for _ in range(args.producers)
        ]
        for thread in threads:
            thread.start()
        try:
            if not assigned.wait(60):
                raise RuntimeError("the consumer got no assignment in 60 s")
            time.sleep(args.warmup)
            cpu_start, read_start = _cpu_s(pids), read[0]
            tally.measuring = True
            started_s = time.perf_counter()
            time.sleep(args.duration)
            tally.measuring = False
            elapsed_s = time.perf_counter() - started_s
            cpu_s = _cpu_s(pids) - cpu_start
            consumed = read[0] - read_start
        finally:
            stop.set()
            for thread in threads:
                thread.join(30)
    latencies = sorted(tally.latencies_ms)
    acked = len(latencies)
    return {
        "variant": variant.label,
        "idle_partitions": idle,
        "offered_per_s": args.rate * args.producers,
        "acked_per_s": round(acked / elapsed_s, 1),
        "p50_ms": round(_percentile(latencies, 50), 2),
        "p99_ms": round(_percentile(latencies, 99), 2),
        "max_ms": round(latencies[-1], 2) if latencies else None,
        "errors": tally.errors,
        "consumed_per_s": round(consumed / elapsed_s, 1),
        "broker_cpu_util": round(cpu_s / elapsed_s, 3),
        "broker_cpu_us_per_ack": round(cpu_s * 1e6 / acked, 1) if acked else None,
        "duration_s": round(elapsed_s, 2),
    }


_METRICS = ("acked_per_s", "p50_ms", "p99_ms", "broker_cpu_us_per_ack", "broker_cpu_util")


def summarize(results: list[dict[str, Any]], variants: list[Variant], idle: int) -> dict[str, Any]:
    """Per variant: median and range of every metric; with two, the ratio B/A of the medians."""
    line: dict[str, Any] = {"summary": f"client-load-idle{idle}"}
    medians = {}
    for variant in variants:
        runs = [
            r for r in results if r["variant"] == variant.label and r["idle_partitions"] == idle
        ]
        stats = {
            k: _stats([r[k] for r in runs if r.get(k) is not None])
            for k in _METRICS
            if any(r.get(k) is not None for r in runs)
        }
        medians[variant.label] = {k: v["median"] for k, v in stats.items()}
        line[variant.label] = {"repeats": len(runs), **stats}
    if len(variants) == 2:
        a, b = (medians[v.label] for v in variants)
        line["ratio_b_over_a"] = {k: round(b[k] / a[k], 3) for k in _METRICS if a.get(k) and k in b}
    return line


def main(argv: Sequence[str] | None = None) -> int:
    """Command-line entry point."""
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.client_load",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--duration", type=float, default=20.0, help="measured seconds per run")
    parser.add_argument("--warmup", type=float, default=3.0, help="seconds of load before it")
    parser.add_argument("--repeats", type=int, default=3, help="runs per variant")
    parser.add_argument("--rate", type=float, default=300.0, help="records/s per producer")
    parser.add_argument("--producers", type=int, default=2, help="producers")
    parser.add_argument("--partitions", type=int, default=6, help="partitions of the topic")
    parser.add_argument(
        "--offsets-partitions", type=int, default=50, help="__consumer_offsets partitions"
    )
    parser.add_argument("--ab", default="", metavar="KIND=A,B", help="compare two variants")
    parser.add_argument(
        "--idle-partitions", default="0", help="beside an idle topic of these sizes, comma list"
    )
    parser.add_argument("--keep", action="store_true", help="keep the data dirs and logs")
    args = parser.parse_args(argv)
    if min(args.duration, args.rate, args.repeats, args.producers, args.partitions) <= 0:
        parser.error("--duration, --rate, --repeats, --producers, --partitions must be positive")
    try:
        variants = parse_ab(args.ab)
        idles = [int(n) for n in args.idle_partitions.split(",")]
    except ValueError as exc:
        parser.error(str(exc))
    base = Path(tempfile.mkdtemp(prefix="replog-load-"))
    results = []
    try:
        for round_ in range(args.repeats):
            for idle in idles:
                for variant in variants if round_ % 2 == 0 else variants[::-1]:
                    result = {"round": round_, **run_one(variant, idle, args, base)}
                    print(json.dumps(result), flush=True)
                    results.append(result)
    finally:
        if not args.keep:
            shutil.rmtree(base, ignore_errors=True)
    for idle in idles:
        print(json.dumps(summarize(results, variants, idle)), flush=True)
    print(json.dumps(targets(results, variants[-1].label, idles)), flush=True)
    return 0


def targets(results: list[dict[str, Any]], variant: str, idles: list[int]) -> dict[str, Any]:
    """The issue's figures for ``variant``'s medians (reported, never asserted)."""

    def median(idle: int, key: str) -> float | None:
        values = [
            r[key]
            for r in results
            if r["variant"] == variant and r["idle_partitions"] == idle and r[key] is not None
        ]
        return statistics.median(values) if values else None

    line: dict[str, Any] = {"targets": f"medians of {variant} (reported, not asserted)"}
    for idle in idles:
        p99 = median(idle, "p99_ms")
        met = None if p99 is None else p99 <= TARGET_P99_MS
        line[f"idle{idle}_p99_ms"] = {"value": p99, "target": f"<= {TARGET_P99_MS}", "met": met}
    base = median(0, "broker_cpu_us_per_ack") if 0 in idles else None
    for idle in idles:
        cpu = median(idle, "broker_cpu_us_per_ack")
        if idle and base and cpu is not None:
            ratio = round(cpu / base, 3)
            line[f"idle{idle}_cpu_per_ack_over_idle0"] = {
                "value": ratio,
                "target": f"<= {TARGET_IDLE_CPU_GROWTH}",
                "met": ratio <= TARGET_IDLE_CPU_GROWTH,
            }
    return line


if __name__ == "__main__":
    sys.exit(main())
