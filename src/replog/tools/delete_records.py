"""``replog delete-records``: delete records below offsets, as Kafka's kafka-delete-records.

``--offset-json-file FILE`` holds Kafka's document: ``{"partitions": [{"topic": "t",
"partition": 0, "offset": 3}], "version": 1}`` (offset -1: everything up to the high
watermark). Every partition is checked before anything is deleted: a malformed file, a
missing topic or partition is an error and nothing changes. Output as Kafka's tool:
``partition: t-0  low_watermark: 3`` per partition; ``--output json`` for scripts. Exit
status: 0 done, 1 the file names what does not exist or the cluster failed, 2 usage error.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from replog.client import Admin
from replog.errors import ReplogError
from replog.tools.client_config import add_command_config_argument, admin_options
from replog.tools.output import add_output_argument, fail, report
from replog.tools.topics import add_bootstrap_argument

__all__ = ["COMMAND", "HELP", "add_arguments", "parse_offsets", "run"]

COMMAND = "delete-records"
HELP = "delete the records below given offsets (as kafka-delete-records)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Kafka's kafka-delete-records options."""
    add_bootstrap_argument(parser)
    parser.add_argument(
        "--offset-json-file", required=True, metavar="FILE", help="the partitions and offsets"
    )
    add_command_config_argument(parser)
    add_output_argument(parser)
    parser.set_defaults(usage_error=parser.error)


def parse_offsets(text: str) -> dict[tuple[str, int], int]:
    """Kafka's offset JSON as {(topic, partition): offset}; ``ValueError`` saying what is wrong."""
    try:
        document = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"not JSON: {exc}") from None
    entries = document.get("partitions") if isinstance(document, dict) else None
    if not isinstance(entries, list) or not entries:
        raise ValueError('expected {"partitions": [{"topic", "partition", "offset"}, ...]}')
    offsets: dict[tuple[str, int], int] = {}
    for number, entry in enumerate(entries):
        if not isinstance(entry, dict):
            raise ValueError(f"partitions[{number}] is not an object")
        topic, partition, offset = entry.get("topic"), entry.get("partition"), entry.get("offset")
        if not isinstance(topic, str) or not topic:
            raise ValueError(f"partitions[{number}]: topic must be a name")
        if not isinstance(partition, int) or partition < 0:
            raise ValueError(f"partitions[{number}]: partition must be an id >= 0")
        if not isinstance(offset, int) or offset < -1:
            raise ValueError(f"partitions[{number}]: offset must be >= 0, or -1 for the end")
        if (topic, partition) in offsets:
            raise ValueError(f"partitions[{number}]: {topic}-{partition} is listed twice")
        offsets[(topic, partition)] = offset
    return offsets


def run(args: argparse.Namespace) -> int:
    """Run ``replog delete-records`` on parsed arguments; returns the exit status."""
    try:
        text = Path(args.offset_json_file).read_text(encoding="utf-8")
        offsets = parse_offsets(text)
        settings = admin_options(args)
    except OSError as exc:
        args.usage_error(f"cannot read {args.offset_json_file}: {exc.strerror or exc}")
    except ValueError as exc:
        args.usage_error(f"{args.offset_json_file}: {exc}")
    try:
        with Admin(args.bootstrap_server, **settings) as admin:
            problem = _missing(admin, offsets)
            if problem is not None:
                return fail(COMMAND, f"{problem}; nothing was deleted")
            low = admin.delete_records(offsets)
    except (ReplogError, OSError) as exc:
        return fail(COMMAND, exc)
    rows: list[dict[str, Any]] = [
        {"topic": t, "partition": p, "low_watermark": low[(t, p)]} for t, p in sorted(offsets)
    ]
    lines = ["Executing records delete operation", "Records delete operation completed:"]
    lines += [
        f"partition: {row['topic']}-{row['partition']}\tlow_watermark: {row['low_watermark']}"
        for row in rows
    ]
    return report(args, {"partitions": rows}, lines)


def _missing(admin: Admin, offsets: dict[tuple[str, int], int]) -> str | None:
    topics = sorted({t for t, _ in offsets})
    known = set(admin.list_topics())
    absent = [t for t in topics if t not in known]
    if absent:
        return f"topic {absent[0]!r} does not exist"
    described = admin.describe_topics(topics)
    for topic, partition in sorted(offsets):
        if partition not in {p.partition for p in described[topic].partitions}:
            return f"topic {topic!r} has no partition {partition}"
    return None
