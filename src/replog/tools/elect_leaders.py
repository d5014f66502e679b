"""``replog elect-leaders``: preferred or unclean leader elections, as Kafka's
kafka-leader-election.

``--election-type preferred`` moves each partition's leadership back to its first replica (it
must be in the ISR); ``unclean`` elects any live replica of a leaderless partition, even one
outside the ISR, and may lose records. The partitions: ``--all-topic-partitions`` (every
partition that needs such an election), ``--topic T`` with ``--partition P`` (one partition;
without ``--partition``, all of T's), or ``--path-to-json-file F``, Kafka's document::

    {"partitions": [{"topic": "orders", "partition": 0}, {"topic": "orders", "partition": 1}]}

Each partition is reported as elected, not needed (ELECTION_NOT_NEEDED: already led as asked)
or failed with the broker's error. Exit status: 0 when no partition failed, 1 when one did (or
the file, a topic or the request failed), 2 usage error.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from replog.client import Admin, ElectionResult
from replog.errors import ErrorCode, ReplogError
from replog.tools.client_config import add_command_config_argument, admin_options
from replog.tools.output import EXIT_FAILED, EXIT_OK, add_output_argument, fail, print_json
from replog.tools.topics import add_bootstrap_argument

__all__ = ["COMMAND", "HELP", "add_arguments", "parse_partitions_file", "run"]

COMMAND = "elect-leaders"
HELP = "elect preferred or unclean partition leaders (as kafka-leader-election)"

ELECTED, NOT_NEEDED, FAILED = "elected", "not_needed", "failed"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """kafka-leader-election's options plus ``--output``."""
    add_bootstrap_argument(parser)
    parser.add_argument("--election-type", required=True, choices=("preferred", "unclean"))
    which = parser.add_mutually_exclusive_group(required=True)
    which.add_argument(
        "--all-topic-partitions", action="store_true", help="every partition that needs it"
    )
    which.add_argument("--topic", help="one topic (with --partition: one partition of it)")
    which.add_argument("--path-to-json-file", metavar="FILE", help="Kafka's partitions document")
    parser.add_argument("--partition", type=int, help="the partition of --topic")
    parser.add_argument(
        "--timeout-ms", type=int, default=30_000, help="admin request timeout (default 30000)"
    )
    add_command_config_argument(parser)
    add_output_argument(parser)
    parser.set_defaults(usage_error=parser.error)


def parse_partitions_file(text: str) -> list[tuple[str, int]]:
    """The partitions of Kafka's election document; ``ValueError`` names what is wrong (not
    JSON, no ``partitions`` list, a bad entry, a partition listed twice)."""
    try:
        document = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"the partitions file is not valid JSON: {exc}") from None
    entries = document.get("partitions") if isinstance(document, dict) else None
    if not isinstance(entries, list) or not entries:
        raise ValueError('the partitions file needs "partitions": a non-empty list')
    partitions: list[tuple[str, int]] = []
    for entry in entries:
        topic = entry.get("topic") if isinstance(entry, dict) else None
        partition = entry.get("partition") if isinstance(entry, dict) else None
        if (
            not isinstance(topic, str)
            or not topic
            or not isinstance(partition, int)
            or isinstance(partition, bool)
            or partition < 0
        ):
            raise ValueError(f'every entry needs "topic" and "partition" >= 0: {entry!r}')
        if (topic, partition) in partitions:
            raise ValueError(f"the partitions file lists {topic}-{partition} twice")
        partitions.append((topic, partition))
    return partitions


def run(args: argparse.Namespace) -> int:
    """Run ``replog elect-leaders`` on parsed arguments; returns the exit status."""
    if args.partition is not None and args.topic is None:
        args.usage_error("--partition goes with --topic")
    if args.partition is not None and args.partition < 0:
        args.usage_error("--partition must be >= 0")
    try:
        options = admin_options(args)
    except ValueError as exc:
        args.usage_error(str(exc))
    try:
        with Admin(args.bootstrap_server, **options) as admin:
            partitions = _partitions(admin, args)
            results = admin.elect_leaders_results(partitions, args.election_type)
    except (ReplogError, OSError, ValueError) as exc:
        return fail(COMMAND, exc)
    return _report(args, {(tp[0], tp[1]): r for tp, r in results.items()})


def _partitions(admin: Admin, args: argparse.Namespace) -> list[tuple[str, int]] | None:
    if args.all_topic_partitions:
        return None
    if args.path_to_json_file:
        try:
            with open(args.path_to_json_file, encoding="utf-8") as file:
                return parse_partitions_file(file.read())
        except OSError as exc:
            raise ValueError(f"cannot read {args.path_to_json_file}: {exc.strerror}") from None
    if args.topic not in admin.list_topics():
        raise ValueError(f"unknown topic {args.topic!r}")
    if args.partition is not None:
        return [(args.topic, args.partition)]
    topic = admin.describe_topics([args.topic])[args.topic]
    return [(args.topic, p.partition) for p in topic.partitions]


def _status(result: ElectionResult) -> str:
    if result.error == ErrorCode.NONE:
        return ELECTED
    if result.error == ErrorCode.ELECTION_NOT_NEEDED:
        return NOT_NEEDED
    return FAILED


def _report(args: argparse.Namespace, results: dict[tuple[str, int], ElectionResult]) -> int:
    statuses = {tp: _status(r) for tp, r in sorted(results.items())}
    failed = any(s == FAILED for s in statuses.values())
    if args.output == "json":
        print_json(
            {
                "election_type": args.election_type,
                "partitions": [_entry(tp, statuses[tp], results[tp]) for tp in statuses],
            }
        )
        return EXIT_FAILED if failed else EXIT_OK
    kind = args.election_type.upper()
    elected = [f"{t}-{p}" for (t, p), s in statuses.items() if s == ELECTED]
    not_needed = [f"{t}-{p}" for (t, p), s in statuses.items() if s == NOT_NEEDED]
    if elected:
        print(
            f"Successfully completed leader election ({kind}) for partitions {', '.join(elected)}"
        )
    if not_needed:
        print(f"Valid replica already elected for partitions {', '.join(not_needed)}")
    if not results:
        print(f"No partition needed a leader election ({kind}).")
    for (topic, partition), status in statuses.items():
        if status == FAILED:
            result = results[(topic, partition)]
            print(
                f"Error completing leader election ({kind}) for partition {topic}-{partition}: "
                f"{result.error.name}: {result.message or ''}".rstrip(": "),
                file=sys.stderr,
            )
    return EXIT_FAILED if failed else EXIT_OK


def _entry(tp: tuple[str, int], status: str, result: ElectionResult) -> dict[str, Any]:
    entry: dict[str, Any] = {"topic": tp[0], "partition": tp[1], "status": status}
    if status == FAILED:
        entry["error"] = result.error.name
        entry["message"] = result.message
    return entry
