"""``replog get-offsets``: partition offsets by time, as Kafka's kafka-get-offsets.

``--topic`` is a regular expression matched against whole topic names (a plain name matches
itself; without it, every topic but the internal ones); ``--partitions 0,2`` keeps those
partitions. ``--time``: ``-1`` or ``latest`` (the default: the high watermark, where the next
record goes), ``-2`` or ``earliest`` (the log start), ``-3`` or ``max-timestamp`` (the record
with the largest timestamp), or a timestamp in ms (the first record at or after it; ``-1`` when
none is). One ``topic:partition:offset`` line per partition, sorted; ``--output json`` for
scripts. Exit status: 0 done, 1 no topic matches or the cluster failed, 2 usage error.
"""

from __future__ import annotations

import argparse
from typing import Any

from replog.client import Admin
from replog.errors import ReplogError
from replog.tools.client_config import add_command_config_argument, admin_options
from replog.tools.output import add_output_argument, fail, report
from replog.tools.topics import add_bootstrap_argument, matching_topics

__all__ = ["COMMAND", "HELP", "add_arguments", "parse_time", "run"]

COMMAND = "get-offsets"
HELP = "print partition offsets: latest, earliest, max timestamp or by time (as kafka-get-offsets)"

_NAMED_TIMES = {"latest": -1, "earliest": -2, "max-timestamp": -3}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Kafka's kafka-get-offsets options (the subset replog serves)."""
    add_bootstrap_argument(parser)
    parser.add_argument("--topic", help="topic name or regular expression (default: all)")
    parser.add_argument("--partitions", help="comma-separated partition ids (default: all)")
    parser.add_argument(
        "--time",
        default="-1",
        type=parse_time,
        help="-1/latest, -2/earliest, -3/max-timestamp, or ms",
    )
    add_command_config_argument(parser)
    add_output_argument(parser)
    parser.set_defaults(usage_error=parser.error)


def parse_time(text: str) -> int:
    """``--time``: a named time or a number; argparse's usage error otherwise."""
    named = _NAMED_TIMES.get(text.strip().lower())
    if named is not None:
        return named
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not -1/latest, -2/earliest, -3/max-timestamp or a timestamp in ms"
        ) from None
    if value < -3:
        raise argparse.ArgumentTypeError(f"{value} is not a time")
    return value


def _partition_ids(text: str | None) -> set[int] | None:
    if text is None:
        return None
    try:
        ids = {int(p) for p in text.split(",") if p.strip()}
    except ValueError:
        raise ValueError(f"--partitions {text!r} is not a comma-separated list of ids") from None
    if not ids or min(ids) < 0:
        raise ValueError(f"--partitions {text!r} names no valid partition")
    return ids


def run(args: argparse.Namespace) -> int:
    """Run ``replog get-offsets`` on parsed arguments; returns the exit status."""
    try:
        wanted = _partition_ids(args.partitions)
        settings = admin_options(args)
    except ValueError as exc:
        args.usage_error(str(exc))
    try:
        with Admin(args.bootstrap_server, **settings) as admin:
            if args.topic is None:
                names = [n for n in admin.list_topics() if not n.startswith("__")]
            else:
                names = matching_topics(admin, args.topic)
            if not names:
                return fail(COMMAND, f"no topic matches {args.topic!r}")
            described = admin.describe_topics(names)
            tps = sorted(
                (name, p.partition)
                for name in names
                for p in described[name].partitions
                if wanted is None or p.partition in wanted
            )
            if not tps:
                return fail(COMMAND, f"no partition {sorted(wanted or ())} in {names}")
            offsets = admin.list_offsets(tps, _timestamp(args.time))
    except (ReplogError, OSError) as exc:
        return fail(COMMAND, exc)
    rows: list[dict[str, Any]] = [
        {"topic": t, "partition": p, "offset": offsets[(t, p)]} for t, p in tps
    ]
    lines = [f"{row['topic']}:{row['partition']}:{row['offset']}" for row in rows]
    return report(args, {"offsets": rows}, lines)


def _timestamp(time: int) -> int | str:
    if time == -1:
        return "latest"
    if time == -2:
        return "earliest"
    return time
