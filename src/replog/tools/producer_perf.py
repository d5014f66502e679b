"""``replog producer-perf-test``: produce load and report it, as Kafka's kafka-producer-perf-test.

``--topic``, ``--num-records N`` records of ``--record-size`` bytes (random printable bytes,
made once) or of the lines of ``--payload-file`` (chosen at random per record), at most
``--throughput`` records/s (-1: as fast as possible). Client settings: ``--producer-props k=v
...`` and ``--producer.config FILE`` (Kafka's keys; ``replog.tools.client_config``). Every five
seconds a line as Kafka's tool prints it::

    40001 records sent, 8000.2 records/sec (0.76 MB/sec), 2.1 ms avg latency, 31.0 ms max latency.

and at the end the totals with the 50th, 95th, 99th and 99.9th latency percentiles
(``--output json`` prints the totals as one JSON document instead). Latency is from ``send``
to the acknowledgement. Exit status: 0 every record acknowledged, 1 a send failed or the
cluster could not be reached, 2 usage error.
"""

from __future__ import annotations

import argparse
import random
import string
import sys
import threading
from pathlib import Path
from typing import Any

from replog.client import Producer
from replog.clock import monotonic_s, sleep_s
from replog.errors import ReplogError
from replog.tools.client_config import parse_properties, producer_settings, read_properties_file
from replog.tools.output import EXIT_OK, add_output_argument, fail, print_json
from replog.tools.topics import bootstrap_servers

__all__ = ["COMMAND", "HELP", "LatencyStats", "add_arguments", "run"]

COMMAND = "producer-perf-test"
HELP = "produce a load and report throughput and latency (as kafka-producer-perf-test)"

_REPORT_S = 5.0
_MB = 1024 * 1024


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Kafka's kafka-producer-perf-test options (and ``--bootstrap-server``)."""
    parser.add_argument(
        "--bootstrap-server",
        type=bootstrap_servers,
        metavar="HOST:PORT[,...]",
        help="the cluster (or bootstrap.servers in --producer-props / --producer.config)",
    )
    parser.add_argument("--topic", required=True)
    parser.add_argument("--num-records", type=int, required=True)
    payload = parser.add_mutually_exclusive_group(required=True)
    payload.add_argument("--record-size", type=int, help="bytes per record")
    payload.add_argument("--payload-file", metavar="FILE", help="records from its lines")
    parser.add_argument("--throughput", type=float, required=True, help="records/s (-1: no cap)")
    parser.add_argument("--producer-props", nargs="+", default=[], metavar="KEY=VALUE")
    parser.add_argument("--producer.config", dest="producer_config", metavar="FILE")
    add_output_argument(parser)
    parser.set_defaults(usage_error=parser.error)


class LatencyStats:
    """Acknowledgement latencies: a window for the periodic line, all of them for the end."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.latencies_ms: list[float] = []
        self.bytes = 0
        self._window: list[float] = []
        self._window_bytes = 0
        self._window_start = monotonic_s()
        self.errors: list[BaseException] = []

    def record(self, latency_ms: float, size: int) -> None:
        with self._lock:
            self.latencies_ms.append(latency_ms)
            self._window.append(latency_ms)
            self.bytes += size
            self._window_bytes += size

    def window_line(self) -> str | None:
        """The periodic line (None: nothing acknowledged in the window), and a new window."""
        with self._lock:
            window, size = self._window, self._window_bytes
            elapsed = max(monotonic_s() - self._window_start, 1e-9)
            self._window, self._window_bytes, self._window_start = [], 0, monotonic_s()
        if not window:
            return None
        return (
            f"{len(window)} records sent, {len(window) / elapsed:.1f} records/sec "
            f"({size / _MB / elapsed:.2f} MB/sec), {sum(window) / len(window):.1f} ms avg "
            f"latency, {max(window):.1f} ms max latency."
        )

    def totals(self, elapsed_s: float) -> dict[str, Any]:
        with self._lock:
            ordered = sorted(self.latencies_ms)
        count = len(ordered)
        elapsed_s = max(elapsed_s, 1e-9)

        def pct(p: float) -> float:
            return ordered[min(count - 1, int(p * count))] if count else 0.0

        return {
            "records": count,
            "records_per_sec": round(count / elapsed_s, 1),
            "mb_per_sec": round(self.bytes / _MB / elapsed_s, 2),
            "avg_latency_ms": round(sum(ordered) / count, 2) if count else 0.0,
            "max_latency_ms": round(ordered[-1], 1) if count else 0.0,
            "p50_ms": round(pct(0.50), 1),
            "p95_ms": round(pct(0.95), 1),
            "p99_ms": round(pct(0.99), 1),
            "p999_ms": round(pct(0.999), 1),
        }


def _payloads(args: argparse.Namespace) -> list[bytes]:
    if args.record_size is not None:
        if args.record_size < 0:
            raise ValueError("--record-size must be >= 0")
        rng = random.Random(0)
        return ["".join(rng.choices(string.ascii_letters, k=args.record_size)).encode("ascii")]
    try:
        lines = Path(args.payload_file).read_text(encoding="utf-8").splitlines()
    except OSError as exc:
        raise ValueError(f"cannot read {args.payload_file}: {exc.strerror or exc}") from None
    payloads = [line.encode("utf-8") for line in lines if line]
    if not payloads:
        raise ValueError(f"{args.payload_file} has no non-empty line")
    return payloads


def _settings(args: argparse.Namespace) -> tuple[list[str], dict[str, Any]]:
    kafka: dict[str, str] = {}
    if args.producer_config is not None:
        kafka.update(read_properties_file(args.producer_config))
    kafka.update(parse_properties(args.producer_props, "--producer-props"))
    servers = kafka.pop("bootstrap.servers", None)
    bootstrap = args.bootstrap_server or (bootstrap_servers(servers) if servers else None)
    if not bootstrap:
        raise ValueError("give --bootstrap-server or bootstrap.servers in --producer-props")
    return bootstrap, producer_settings(kafka)


def run(args: argparse.Namespace) -> int:
    """Run ``replog producer-perf-test`` on parsed arguments; returns the exit status."""
    try:
        if args.num_records < 1:
            raise ValueError("--num-records must be at least 1")
        payloads = _payloads(args)
        bootstrap, settings = _settings(args)
    except (ValueError, argparse.ArgumentTypeError) as exc:
        args.usage_error(str(exc))
    stats = LatencyStats()
    try:
        with Producer(bootstrap, **settings) as producer:
            started = monotonic_s()
            _send_all(producer, args, payloads, stats)
            producer.flush()
            elapsed = monotonic_s() - started
    except (ReplogError, OSError) as exc:
        return fail(COMMAND, exc)
    totals = stats.totals(elapsed)
    if stats.errors:
        error = stats.errors[0]
        return fail(COMMAND, f"{len(stats.errors)} sends failed, the first: {error}")
    if args.output == "json":
        print_json(totals)
    else:
        print(
            f"{totals['records']} records sent, {totals['records_per_sec']} records/sec "
            f"({totals['mb_per_sec']:.2f} MB/sec), {totals['avg_latency_ms']:.2f} ms avg latency, "
            f"{totals['max_latency_ms']:.2f} ms max latency, {totals['p50_ms']:.0f} ms 50th, "
            f"{totals['p95_ms']:.0f} ms 95th, {totals['p99_ms']:.0f} ms 99th, "
            f"{totals['p999_ms']:.0f} ms 99.9th."
        )
    return EXIT_OK


def _send_all(
    producer: Producer, args: argparse.Namespace, payloads: list[bytes], stats: LatencyStats
) -> None:
    rng = random.Random(1)
    started = monotonic_s()
    next_report = started + _REPORT_S
    for n in range(args.num_records):
        value = payloads[0] if len(payloads) == 1 else rng.choice(payloads)
        sent = monotonic_s()
        future = producer.send(args.topic, value)

        def done(f: Any, sent: float = sent, size: int = len(value)) -> None:
            exc = f.exception()
            if exc is not None:
                stats.errors.append(exc)
            else:
                stats.record((monotonic_s() - sent) * 1000, size)

        future.add_done_callback(done)
        now = monotonic_s()
        if args.throughput > 0:
            ahead_s = (n + 1) / args.throughput - (now - started)
            if ahead_s > 0:
                sleep_s(ahead_s)
        if now >= next_report:
            next_report = now + _REPORT_S
            line = stats.window_line()
            if line is not None and args.output != "json":
                print(line, file=sys.stdout, flush=True)
