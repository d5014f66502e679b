"""``replog consumer-perf-test``: consume and report throughput, as kafka-consumer-perf-test.

Reads ``--messages N`` records of ``--topic`` from the earliest offset (``--from-latest``: the
latest), in ``--group`` (default ``perf-consumer-<random>``, as Kafka's tool), stopping early
when ``--timeout`` ms (default 10000) pass without a record. Client settings:
``--consumer.config FILE`` / ``--command-config FILE`` and ``--consumer-property k=v``. Prints
Kafka's header (``--hide-header`` leaves it out) and one line of totals::

    start.time, end.time, data.consumed.in.MB, MB.sec, data.consumed.in.nMsg, nMsg.sec,
    rebalance.time.ms, fetch.time.ms, fetch.MB.sec, fetch.nMsg.sec

(``--output json``: one JSON document). Fewer records than asked within the timeout is
reported on stderr and is exit status 1; 0 when all came; 2 usage error.
"""

from __future__ import annotations

import argparse
import random
import sys
from datetime import datetime
from typing import Any

from replog.client import Consumer
from replog.clock import monotonic_s, wall_ms
from replog.errors import ReplogError
from replog.tools.client_config import (
    add_client_config_arguments,
    consumer_settings,
    settings_from_args,
)
from replog.tools.output import EXIT_FAILED, EXIT_OK, add_output_argument, fail, print_json
from replog.tools.topics import add_bootstrap_argument

__all__ = ["COMMAND", "HELP", "HEADER", "add_arguments", "run"]

COMMAND = "consumer-perf-test"
HELP = "consume records and report throughput (as kafka-consumer-perf-test)"

HEADER = (
    "start.time, end.time, data.consumed.in.MB, MB.sec, data.consumed.in.nMsg, nMsg.sec, "
    "rebalance.time.ms, fetch.time.ms, fetch.MB.sec, fetch.nMsg.sec"
)
_MB = 1024 * 1024


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Kafka's kafka-consumer-perf-test options (the subset replog serves)."""
    add_bootstrap_argument(parser)
    parser.add_argument("--topic", required=True)
    parser.add_argument("--messages", type=int, required=True, help="records to read")
    parser.add_argument("--group", help="consumer group (default perf-consumer-<random>)")
    parser.add_argument("--timeout", type=int, default=10_000, help="ms without a record")
    parser.add_argument("--from-latest", action="store_true", help="start at the latest offset")
    parser.add_argument("--hide-header", action="store_true", help="no header line")
    add_client_config_arguments(parser, "consumer")
    add_output_argument(parser)
    parser.set_defaults(usage_error=parser.error)


def run(args: argparse.Namespace) -> int:
    """Run ``replog consumer-perf-test`` on parsed arguments; returns the exit status."""
    try:
        if args.messages < 1 or args.timeout < 1:
            raise ValueError("--messages and --timeout must be at least 1")
        settings = consumer_settings(settings_from_args(args, "consumer"))
    except ValueError as exc:
        args.usage_error(str(exc))
    settings["group_id"] = args.group or f"perf-consumer-{random.randrange(100_000)}"
    settings.setdefault("auto_offset_reset", "latest" if args.from_latest else "earliest")
    start_wall = wall_ms()
    started = monotonic_s()
    count = size = 0
    first_record_s: float | None = None
    try:
        with Consumer(args.bootstrap_server, **settings) as consumer:
            consumer.subscribe([args.topic])
            last = monotonic_s()
            while count < args.messages and (monotonic_s() - last) * 1000 < args.timeout:
                records = consumer.poll(timeout_ms=200, max_records=args.messages - count)
                if records:
                    last = monotonic_s()
                    if first_record_s is None:
                        first_record_s = last
                    count += len(records)
                    size += sum(len(r.value or b"") + len(r.key or b"") for r in records)
    except (ReplogError, OSError) as exc:
        return fail(COMMAND, exc)
    ended = monotonic_s()
    row = _row(start_wall, started, ended, first_record_s, count, size)
    if args.output == "json":
        print_json(row)
    else:
        if not args.hide_header:
            print(HEADER)
        print(", ".join(str(v) for v in row.values()))
    if count < args.messages:
        print(
            f"replog {COMMAND}: {count} of {args.messages} records came before "
            f"{args.timeout} ms passed without one",
            file=sys.stderr,
        )
        return EXIT_FAILED
    return EXIT_OK


def _row(
    start_wall: int,
    started: float,
    ended: float,
    first_record_s: float | None,
    count: int,
    size: int,
) -> dict[str, Any]:
    elapsed = max(ended - started, 1e-9)
    # Kafka counts the time to the first assignment as rebalancing and the rest as fetching.
    rebalance = (first_record_s if first_record_s is not None else ended) - started
    fetch = max(elapsed - rebalance, 1e-9)
    mb = size / _MB
    return {
        "start.time": _stamp(start_wall),
        "end.time": _stamp(start_wall + int(elapsed * 1000)),
        "data.consumed.in.MB": round(mb, 4),
        "MB.sec": round(mb / elapsed, 4),
        "data.consumed.in.nMsg": count,
        "nMsg.sec": round(count / elapsed, 4),
        "rebalance.time.ms": int(rebalance * 1000),
        "fetch.time.ms": int(fetch * 1000),
        "fetch.MB.sec": round(mb / fetch, 4),
        "fetch.nMsg.sec": round(count / fetch, 4),
    }


def _stamp(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000).strftime("%Y-%m-%d %H:%M:%S:%f")[:-3]
