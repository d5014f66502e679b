"""``replog topics``: create, delete, grow, describe and list topics, as Kafka's kafka-topics.

Exactly one action: ``--create`` (``--partitions`` and ``--replication-factor``, or an explicit
``--replica-assignment``; ``--config k=v[,k=v]`` repeatable), ``--delete``, ``--alter``
(``--partitions``: grow to that many; ``--config k=v[,k=v]`` sets topic configs and
``--delete-config k`` returns them to the broker default, through IncrementalAlterConfigs so
other keys keep their values), ``--describe`` (leader, replicas, ISR and offline replicas per
partition, filtered with one of ``--under-replicated-partitions``, ``--unavailable-partitions``,
``--under-min-isr-partitions``, ``--at-min-isr-partitions``) or ``--list``.
``--describe`` without ``--topic`` describes every topic, as kafka-topics does.
For every action but ``--create``, ``--topic`` is a regular expression matched against the whole
topic name (a plain name matches itself). ``--replica-assignment`` is Kafka's format: partitions
separated by commas, each a colon-separated broker list whose first broker is the preferred
leader (``1:2,2:3``: partition 0 on brokers 1 and 2, partition 1 on 2 and 3).

Exit status: 0 done, 1 the operation failed (the broker's error on stderr; also when ``--topic``
matches nothing, unless ``--if-exists``), 2 usage error.
"""

from __future__ import annotations

import argparse
import re
from collections.abc import Iterable, Sequence
from typing import Any

from replog.client import Admin, PartitionDescription, TopicDescription
from replog.errors import ReplogError
from replog.tools.client_config import add_command_config_argument, admin_options
from replog.tools.output import add_output_argument, fail, report

__all__ = [
    "COMMAND",
    "HELP",
    "add_arguments",
    "add_bootstrap_argument",
    "bootstrap_servers",
    "matching_topics",
    "parse_configs",
    "parse_replica_assignment",
    "run",
]

COMMAND = "topics"
HELP = "create, delete, alter, describe or list topics (as kafka-topics)"

_ACTIONS = ("create", "delete", "alter", "describe", "list")
#: --describe's partition filters (one at a time), as kafka-topics defines them
_REPORTS = {
    "under-replicated-partitions": "partitions whose ISR is smaller than their replica set",
    "unavailable-partitions": "partitions without a live leader",
    "under-min-isr-partitions": "partitions without a leader or with ISR < min.insync.replicas",
    "at-min-isr-partitions": "partitions whose ISR size equals min.insync.replicas",
}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Kafka's kafka-topics options (the subset replog serves) plus ``--output``."""
    add_bootstrap_argument(parser)
    actions = parser.add_mutually_exclusive_group(required=True)
    for action in _ACTIONS:
        actions.add_argument(f"--{action}", action="store_true", help=f"{action} topics")
    parser.add_argument("--topic", help="topic name (a regular expression except for --create)")
    parser.add_argument("--partitions", type=int, help="partition count (create, alter)")
    parser.add_argument("--replication-factor", type=int, help="replicas per partition (create)")
    parser.add_argument(
        "--config",
        action="append",
        default=[],
        metavar="KEY=VALUE[,KEY=VALUE]",
        help="topic config (create, alter)",
    )
    parser.add_argument(
        "--delete-config", action="append", default=[], metavar="KEY", help="to default (alter)"
    )
    parser.add_argument(
        "--replica-assignment", metavar="B:B,B:B", help="explicit placement (create)"
    )
    reports = parser.add_mutually_exclusive_group()
    for flag, text in _REPORTS.items():
        reports.add_argument(f"--{flag}", action="store_true", help=f"describe only {text}")
    parser.add_argument(
        "--if-exists", action="store_true", help="alter/delete/describe: no error if none match"
    )
    parser.add_argument(
        "--if-not-exists", action="store_true", help="create: no error if the topic exists"
    )
    parser.add_argument(
        "--timeout-ms", type=int, default=30_000, help="admin request timeout (default 30000)"
    )
    add_command_config_argument(parser)
    add_output_argument(parser)
    parser.set_defaults(usage_error=parser.error)


def add_bootstrap_argument(parser: argparse.ArgumentParser) -> None:
    """``--bootstrap-server HOST:PORT[,...]`` (required), as every cluster tool takes it."""
    parser.add_argument(
        "--bootstrap-server", required=True, type=bootstrap_servers, metavar="HOST:PORT[,...]"
    )


def bootstrap_servers(text: str) -> list[str]:
    """``--bootstrap-server``'s comma-separated ``host:port`` list (a usage error otherwise)."""
    servers = [entry.strip() for entry in text.split(",") if entry.strip()]
    for entry in servers or [text]:
        host, sep, port = entry.rpartition(":")
        if not sep or not host or not port.isdigit() or not 0 < int(port) <= 65535:
            raise argparse.ArgumentTypeError(f"{entry!r} is not host:port")
    return servers


def parse_replica_assignment(text: str) -> list[list[int]]:
    """Kafka's ``--replica-assignment`` text as one broker list per partition; raises
    ``ValueError`` on a malformed list, a duplicate broker or partitions of unequal size."""
    partitions: list[list[int]] = []
    for number, part in enumerate(text.split(",")):
        brokers = [int(b.strip()) for b in part.split(":")]
        if len(set(brokers)) != len(brokers):
            raise ValueError(f"partition {number} names a broker twice: {part!r}")
        partitions.append(brokers)
    if len({len(p) for p in partitions}) != 1:
        raise ValueError(f"partitions of unequal replication factor in {text!r}")
    return partitions


def parse_configs(options: Iterable[str]) -> dict[str, str]:
    """``--config`` values: ``k=v`` pairs separated by commas; a comma-separated piece without
    ``=`` continues the previous value (``cleanup.policy=compact,delete`` is one pair)."""
    pairs: list[str] = []
    for option in options:
        for index, piece in enumerate(option.split(",")):
            if index > 0 and "=" not in piece:
                pairs[-1] += "," + piece
            else:
                pairs.append(piece)
    configs: dict[str, str] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise ValueError(f"--config {pair!r} is not KEY=VALUE")
        configs[key.strip()] = value.strip()
    return configs


def _check_usage(parser_error: Any, args: argparse.Namespace) -> None:
    """Reject combinations kafka-topics rejects (via ``parser_error``, exit status 2)."""
    if not (args.list or args.describe) and not args.topic:
        parser_error(f"--{_action(args)} needs --topic")
    if args.create:
        if args.replica_assignment is None and (
            args.partitions is None or args.replication_factor is None
        ):
            parser_error(
                "--create needs --partitions and --replication-factor, or --replica-assignment"
            )
        if args.replica_assignment is not None and (
            args.partitions is not None or args.replication_factor is not None
        ):
            parser_error("--replica-assignment replaces --partitions and --replication-factor")
    elif args.replica_assignment or args.replication_factor is not None:
        parser_error("--replica-assignment and --replication-factor go with --create")
    elif args.config and not args.alter:
        parser_error("--config goes with --create or --alter")
    if args.delete_config and not args.alter:
        parser_error("--delete-config goes with --alter")
    if args.alter and args.partitions is None and not args.config and not args.delete_config:
        parser_error("--alter needs --partitions, --config or --delete-config")
    if _report_filter(args) is not None and not args.describe:
        parser_error("the partition filters go with --describe")


def _action(args: argparse.Namespace) -> str:
    return next(a for a in _ACTIONS if getattr(args, a))


def run(args: argparse.Namespace) -> int:
    """Run ``replog topics`` on parsed arguments; returns the exit status."""
    usage_error = args.usage_error
    _check_usage(usage_error, args)
    try:
        configs = parse_configs(args.config)
        assignment = (
            parse_replica_assignment(args.replica_assignment) if args.replica_assignment else None
        )
    except ValueError as exc:
        usage_error(str(exc))
    try:
        options = admin_options(args)
    except ValueError as exc:
        args.usage_error(str(exc))
    try:
        with Admin(args.bootstrap_server, **options) as admin:
            if args.create:
                return _create(admin, args, configs, assignment)
            if args.list:
                return _list(admin, args)
            names = matching_topics(admin, ".*" if args.topic is None else args.topic)
            if not names and not args.if_exists and args.topic is not None:
                return fail(COMMAND, f"no topic matches {args.topic!r}")
            if args.delete:
                return _delete(admin, args, names)
            if args.alter:
                return _alter(admin, args, names, configs)
            return _describe(admin, args, names)
    except (ReplogError, OSError) as exc:
        return fail(COMMAND, exc)


def matching_topics(admin: Admin, pattern: str) -> list[str]:
    """The topics whose whole name matches ``pattern`` (a plain name, or a regular expression;
    one that does not compile is taken literally)."""
    try:
        regex = re.compile(pattern)
    except re.error:
        regex = re.compile(re.escape(pattern))
    return [name for name in admin.list_topics() if name == pattern or regex.fullmatch(name)]


def _create(
    admin: Admin,
    args: argparse.Namespace,
    configs: dict[str, str],
    assignment: list[list[int]] | None,
) -> int:
    if args.if_not_exists and args.topic in admin.list_topics():
        return report(args, {"created": []}, f"Topic {args.topic} already exists.")
    partitions = len(assignment) if assignment else args.partitions
    rf = len(assignment[0]) if assignment else args.replication_factor
    admin.create_topics(args.topic, partitions, rf, configs, replica_assignment=assignment)
    return report(args, {"created": [args.topic]}, f"Created topic {args.topic}.")


def _delete(admin: Admin, args: argparse.Namespace, names: list[str]) -> int:
    if names:
        admin.delete_topics(names)
    lines = "\n".join(f"Deleted topic {name}." for name in names)
    return report(args, {"deleted": names}, lines)


def _alter(
    admin: Admin, args: argparse.Namespace, names: list[str], configs: dict[str, str]
) -> int:
    lines: list[str] = []
    for name in names:
        if configs or args.delete_config:
            admin.alter_configs(name, configs, args.delete_config)
            lines.append(f"Updated config for topic {name}.")
        if args.partitions is not None:
            admin.create_partitions(name, args.partitions)
            lines.append(f"Topic {name} now has {args.partitions} partitions.")
    document: dict[str, Any] = {"altered": names, "partitions": args.partitions}
    document.update(configs=configs, deleted_configs=list(args.delete_config))
    return report(args, document, "\n".join(lines))


def _list(admin: Admin, args: argparse.Namespace) -> int:
    names = admin.list_topics()
    if args.topic:
        names = matching_topics(admin, args.topic)
    return report(args, {"topics": names}, "\n".join(names))


def _report_filter(args: argparse.Namespace) -> str | None:
    return next((r for r in _REPORTS if getattr(args, r.replace("-", "_"))), None)


def _selected(report: str | None, part: PartitionDescription, live: set[int], min_isr: int) -> bool:
    """Whether ``part`` passes the ``report`` filter (kafka-topics' definitions)."""
    has_leader = part.leader in live
    if report == "under-replicated-partitions":
        return len(part.isr) < len(part.replicas)
    if report == "unavailable-partitions":
        return not has_leader
    if report == "under-min-isr-partitions":
        return not has_leader or len(part.isr) < min_isr
    if report == "at-min-isr-partitions":
        return len(part.isr) == min_isr
    return True


def _describe(admin: Admin, args: argparse.Namespace, names: list[str]) -> int:
    topics = admin.describe_topics(names)
    live = {b.broker_id for b in admin.describe_cluster().brokers}
    which = _report_filter(args)
    min_isr = dict.fromkeys(names, 1)
    if which in ("under-min-isr-partitions", "at-min-isr-partitions"):
        configs = admin.describe_configs(names)
        min_isr = {n: int(configs[n].get("min.insync.replicas", "1")) for n in names}
    document: list[dict[str, Any]] = []
    lines: list[str] = []
    for name in names:
        topic = topics[name]
        parts = [p for p in topic.partitions if _selected(which, p, live, min_isr[name])]
        if which is None:
            lines.append(_topic_line(topic))
        lines.extend(_partition_line(name, p) for p in parts)
        if parts or which is None:
            document.append({"name": name, "partitions": [_partition_json(p) for p in parts]})
    return report(args, {"topics": document}, "\n".join(lines))


def _topic_line(topic: TopicDescription) -> str:
    rf = len(topic.partitions[0].replicas) if topic.partitions else 0
    return f"Topic: {topic.name}\tPartitionCount: {len(topic.partitions)}\tReplicationFactor: {rf}"


def _partition_line(name: str, part: PartitionDescription) -> str:
    line = (
        f"\tTopic: {name}\tPartition: {part.partition}\tLeader: {_leader(part.leader)}"
        f"\tReplicas: {_ids(part.replicas)}\tIsr: {_ids(part.isr)}"
    )
    if part.offline_replicas:
        line += f"\tOffline: {_ids(part.offline_replicas)}"
    return line


def _partition_json(part: PartitionDescription) -> dict[str, Any]:
    return {
        "partition": part.partition,
        "leader": part.leader,
        "leader_epoch": part.leader_epoch,
        "replicas": list(part.replicas),
        "isr": list(part.isr),
        "offline_replicas": list(part.offline_replicas),
    }


def _leader(broker_id: int) -> str:
    return "none" if broker_id < 0 else str(broker_id)


def _ids(ids: Sequence[int]) -> str:
    return ",".join(str(i) for i in ids)
