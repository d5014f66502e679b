"""``replog log-dirs``: each broker's log dirs and the replicas in them, as kafka-log-dirs.

``--describe`` asks every broker (or ``--broker-list 1,2``) with DescribeLogDirs about its log
dirs, keeping the partitions of ``--topic-list a,b`` (default: every topic). Output as Kafka's
tool: two progress lines, then one JSON document: ``{"version": 1, "brokers": [{"broker": 1,
"logDirs": [{"logDir": path, "error": null or the error's name, "partitions": [{"partition":
"t-0", "size": bytes, "offsetLag": n, "isFuture": false}]}]}]}`` (replog moves no replica
between dirs, so no future logs). ``--output json`` prints the document alone. Exit status: 0
done, 1 a broker is not in the cluster or the cluster failed, 2 usage error.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from replog.client import Admin, LogDirDescription
from replog.errors import ErrorCode, ReplogError
from replog.tools.client_config import add_command_config_argument, admin_options
from replog.tools.output import add_output_argument, fail, report
from replog.tools.topics import add_bootstrap_argument

__all__ = ["COMMAND", "HELP", "add_arguments", "run"]

COMMAND = "log-dirs"
HELP = "describe the brokers' log dirs and replica sizes (as kafka-log-dirs)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Kafka's kafka-log-dirs options."""
    add_bootstrap_argument(parser)
    parser.add_argument("--describe", action="store_true", required=True, help="describe")
    parser.add_argument("--broker-list", help="comma-separated broker ids (default: all)")
    parser.add_argument("--topic-list", help="comma-separated topics (default: all)")
    add_command_config_argument(parser)
    add_output_argument(parser)
    parser.set_defaults(usage_error=parser.error)


def _ids(text: str | None, args: argparse.Namespace) -> list[int] | None:
    if text is None:
        return None
    try:
        return [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        args.usage_error(f"--broker-list {text!r} is not a comma-separated list of broker ids")
        raise  # unreachable: usage_error exits


def run(args: argparse.Namespace) -> int:
    """Run ``replog log-dirs`` on parsed arguments; returns the exit status."""
    brokers = _ids(args.broker_list, args)
    topics = None if args.topic_list is None else [t for t in args.topic_list.split(",") if t]
    try:
        settings = admin_options(args)
    except ValueError as exc:
        args.usage_error(str(exc))
    try:
        with Admin(args.bootstrap_server, **settings) as admin:
            live = sorted(b.broker_id for b in admin.describe_cluster().brokers)
            wanted = live if brokers is None else brokers
            missing = sorted(set(wanted) - set(live))
            if missing:
                return fail(COMMAND, f"brokers {missing} are not in the cluster (live: {live})")
            dirs = admin.describe_log_dirs(wanted)
    except (ReplogError, OSError) as exc:
        return fail(COMMAND, exc)
    document = {
        "version": 1,
        "brokers": [
            {"broker": broker, "logDirs": [_dir(d, topics) for d in dirs.get(broker, ())]}
            for broker in wanted
        ],
    }
    lines = [
        "Querying brokers for log directories information",
        f"Received log directory information from brokers {','.join(map(str, wanted))}",
        json.dumps(document),
    ]
    return report(args, document, lines)


def _dir(log_dir: LogDirDescription, topics: list[str] | None) -> dict[str, Any]:
    return {
        "logDir": log_dir.path,
        "error": None if log_dir.error == ErrorCode.NONE else ErrorCode(log_dir.error).name,
        "partitions": [
            {
                "partition": f"{r.topic}-{r.partition}",
                "size": r.size_bytes,
                "offsetLag": r.offset_lag,
                "isFuture": False,
            }
            for r in log_dir.replicas
            if topics is None or r.topic in topics
        ],
    }
