"""``replog consumer-groups``: list, describe, delete consumer groups and reset or delete their
committed offsets, as Kafka's kafka-consumer-groups.

Exactly one action:

- ``--list``: every group's id (``--output json`` adds its state and protocol type);
- ``--describe`` (``--group G``, repeatable, or ``--all-groups``): per partition the committed
  offset, the log end offset, the lag and the member consuming it (consumer id, host, client
  id); ``--members`` lists the members instead, ``--state`` the group's coordinator (id),
  assignment strategy, state and member count;
- ``--reset-offsets`` (``--group G``; ``--topic t[:p1,p2]`` repeatable, or ``--all-topics``: the
  topics the group has offsets for) with one rule: ``--to-earliest``, ``--to-latest``,
  ``--to-current`` (the committed offset; the log end where the group has none, as Kafka),
  ``--to-offset N``, ``--shift-by N``, ``--to-datetime YYYY-MM-DDTHH:mm:SS[.sss][zone]`` or
  ``--by-duration PnDTnHnMnS``; or ``--from-file FILE``, a plan in Kafka's CSV (``topic,
  partition,offset`` lines, or ``group,topic,partition,offset``: see ``offset_reset``) that
  names the partitions itself (no ``--topic``), its offsets clamped into [log start, log end].
  It prints the plan and changes nothing (``--dry-run``, the default) unless ``--execute``;
  ``--export`` prints the plan as that CSV instead of the table, to edit and feed back with
  ``--from-file``. Like Kafka, it refuses (dry run included) while the group has active
  members: their commits would overwrite the reset;
- ``--delete`` (``--group G`` or ``--all-groups``): delete groups (they must be empty);
- ``--delete-offsets --group G --topic T[:p1,p2]``: forget the group's committed offsets there.

Exit status: 0 done; 1 the operation failed, the reason on stderr (a group that does not exist,
a group with active members for ``--reset-offsets``, a ``--from-file`` that cannot be read, a
malformed line in it or one naming a topic or partition that does not exist: nothing is reset
then, a broker error); 2 usage error (options that do not go together, a malformed option).
"""

from __future__ import annotations

import argparse
from collections.abc import Iterable, Sequence
from typing import Any

from replog.client import Admin
from replog.client.group_admin import GroupDescription
from replog.clock import wall_ms
from replog.errors import ReplogError, unreachable
from replog.tools.client_config import add_command_config_argument, admin_options
from replog.tools.offset_reset import (
    RULES,
    ResetRule,
    format_reset_plan,
    parse_datetime_ms,
    parse_duration_ms,
    parse_reset_plan,
    parse_topic_partitions,
    plan_reset,
)
from replog.tools.output import EXIT_OK, add_output_argument, fail, print_json, report
from replog.tools.topics import add_bootstrap_argument
from replog.topics import TopicPartitionLike

__all__ = ["COMMAND", "HELP", "add_arguments", "run"]

COMMAND = "consumer-groups"
HELP = "list, describe, delete groups; reset or delete their offsets (as kafka-consumer-groups)"

_ACTIONS = ("list", "describe", "reset-offsets", "delete", "delete-offsets")
_INACTIVE = ("Empty", "Dead")
_NONE = "-"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Kafka's kafka-consumer-groups options (the subset replog serves) plus ``--output``."""
    add_bootstrap_argument(parser)
    actions = parser.add_mutually_exclusive_group(required=True)
    for action in _ACTIONS:
        actions.add_argument(f"--{action}", action="store_true", help=f"{action} (see above)")
    parser.add_argument("--group", action="append", default=[], help="group id (repeatable)")
    parser.add_argument("--all-groups", action="store_true", help="every group (describe, delete)")
    views = parser.add_mutually_exclusive_group()
    views.add_argument("--members", action="store_true", help="describe: the members")
    views.add_argument("--state", action="store_true", help="describe: the group's state")
    parser.add_argument(
        "--topic", action="append", default=[], metavar="TOPIC[:P,P]", help="reset/delete-offsets"
    )
    parser.add_argument("--all-topics", action="store_true", help="reset: every topic with offsets")
    rules = parser.add_mutually_exclusive_group()
    rules.add_argument("--to-earliest", action="store_true", help="reset to the log start")
    rules.add_argument("--to-latest", action="store_true", help="reset to the log end")
    rules.add_argument(
        "--to-current",
        action="store_true",
        help="reset to the committed offset (the log end where there is none)",
    )
    rules.add_argument("--to-offset", type=int, metavar="N", help="reset to offset N")
    rules.add_argument("--shift-by", type=int, metavar="N", help="move the committed offset by N")
    rules.add_argument("--to-datetime", metavar="ISO", help="reset to the first record since")
    rules.add_argument("--by-duration", metavar="PnDTnHnMnS", help="reset to now minus this")
    rules.add_argument(
        "--from-file",
        metavar="FILE",
        help="reset to a CSV plan (topic,partition,offset lines), as --export writes",
    )
    run_mode = parser.add_mutually_exclusive_group()
    run_mode.add_argument("--dry-run", action="store_true", help="reset: show only (default)")
    run_mode.add_argument("--execute", action="store_true", help="reset: commit the new offsets")
    parser.add_argument(
        "--export", action="store_true", help="reset: print the plan as CSV (for --from-file)"
    )
    parser.add_argument(
        "--timeout-ms", type=int, default=30_000, help="admin request timeout (default 30000)"
    )
    add_command_config_argument(parser)
    add_output_argument(parser)
    parser.set_defaults(usage_error=parser.error)


def _action(args: argparse.Namespace) -> str:
    return next(a for a in _ACTIONS if getattr(args, a.replace("-", "_")))


def _rule(args: argparse.Namespace) -> ResetRule | None:
    """The reset rule named on the command line (None: none); ``ValueError`` if malformed."""
    if args.to_earliest:
        return ResetRule("to-earliest")
    if args.to_latest:
        return ResetRule("to-latest")
    if args.to_current:
        return ResetRule("to-current")
    if args.from_file is not None:
        return ResetRule("from-file")
    if args.to_offset is not None:
        return ResetRule("to-offset", args.to_offset)
    if args.shift_by is not None:
        return ResetRule("shift-by", args.shift_by)
    if args.to_datetime is not None:
        return ResetRule("to-datetime", parse_datetime_ms(args.to_datetime))
    if args.by_duration is not None:
        return ResetRule("by-duration", wall_ms() - parse_duration_ms(args.by_duration))
    return None


def _check_usage(parser_error: Any, args: argparse.Namespace) -> ResetRule | None:
    """Reject combinations kafka-consumer-groups rejects (exit status 2); the reset rule."""
    action = _action(args)
    if action != "list" and not args.group and not args.all_groups:
        parser_error(f"--{action} needs --group or --all-groups")
    if args.all_groups and (args.group or action in ("reset-offsets", "delete-offsets")):
        parser_error("--all-groups goes with --describe or --delete, without --group")
    if (args.members or args.state) and action != "describe":
        parser_error("--members and --state go with --describe")
    if action == "delete-offsets" and (len(args.group) != 1 or not args.topic):
        parser_error("--delete-offsets needs one --group and --topic")
    if action not in ("reset-offsets", "delete-offsets") and (args.topic or args.all_topics):
        parser_error("--topic and --all-topics go with --reset-offsets or --delete-offsets")
    try:
        rule = _rule(args)
        for spec in args.topic:
            parse_topic_partitions(spec)
    except ValueError as exc:
        parser_error(str(exc))
    if action == "reset-offsets":
        if len(args.group) != 1:
            parser_error("--reset-offsets needs exactly one --group")
        if rule is None:
            parser_error("--reset-offsets needs one of " + ", ".join(f"--{r}" for r in RULES))
        if rule is not None and rule.kind == "from-file":
            if args.topic or args.all_topics:
                parser_error("--from-file names its partitions: no --topic or --all-topics")
        elif bool(args.topic) == bool(args.all_topics):
            parser_error("--reset-offsets needs --topic or --all-topics (one of them)")
        if args.export and args.output == "json":
            parser_error("--export prints CSV: it does not go with --output json")
    elif rule is not None or args.execute or args.dry_run or args.export:
        parser_error("the reset rules, --dry-run, --execute and --export go with --reset-offsets")
    return rule


def run(args: argparse.Namespace) -> int:
    """Run ``replog consumer-groups`` on parsed arguments; returns the exit status."""
    rule = _check_usage(args.usage_error, args)
    try:
        options = admin_options(args)
    except ValueError as exc:
        args.usage_error(str(exc))
    try:
        with Admin(args.bootstrap_server, **options) as admin:
            if args.list:
                return _list(admin, args)
            groups = args.group or [g.group_id for g in admin.list_groups()]
            if args.describe:
                return _describe(admin, args, groups)
            if args.delete:
                return _delete(admin, args, groups)
            if args.delete_offsets:
                return _delete_offsets(admin, args, groups[0])
            if rule is None:
                unreachable("_check_usage returns a rule for --reset-offsets")
            return _reset(admin, args, groups[0], rule)
    except (ReplogError, OSError, ValueError) as exc:
        return fail(COMMAND, exc)


def _list(admin: Admin, args: argparse.Namespace) -> int:
    listed = admin.list_groups()
    document = {
        "groups": [
            {"group": g.group_id, "state": g.state, "protocol_type": g.protocol_type}
            for g in listed
        ]
    }
    return report(args, document, "\n".join(g.group_id for g in listed))


# ---------------------------------------------------------------------- describe


def _describe(admin: Admin, args: argparse.Namespace, groups: list[str]) -> int:
    described = admin.describe_groups(groups)
    documents: list[dict[str, Any]] = []
    lines: list[str] = []
    missing: list[str] = []
    for group_id in groups:
        group = described[group_id]
        committed = {
            (t, int(p)): o.offset for (t, p), o in admin.list_group_offsets(group_id).items()
        }
        if group.state == "Dead" and not committed:
            missing.append(group_id)
            continue
        if args.state:
            document, text = _state_view(group)
        elif args.members:
            document, text = _members_view(group)
        else:
            document, text = _offsets_view(admin, group, committed)
        documents.append(document)
        lines.extend(text)
    if args.output == "json":
        print_json({"groups": documents, "missing": missing})
    elif lines:
        print("\n".join(lines))
    if missing:
        return fail(COMMAND, "consumer group(s) " + ", ".join(map(repr, missing)) + " do not exist")
    return EXIT_OK


def _offsets_view(
    admin: Admin, group: GroupDescription, committed: dict[TopicPartitionLike, int]
) -> tuple[dict[str, Any], list[str]]:
    """Per partition: committed offset, log end offset, lag and the member consuming it."""
    owners = {tp: m for m in group.members for tp in m.assignment}
    partitions = sorted(set(owners) | set(committed))
    ends = admin.list_offsets(partitions, "latest") if partitions else {}
    rows: list[dict[str, Any]] = []
    for tp in partitions:
        member = owners.get(tp)
        current = committed.get(tp)
        end = ends.get(tp)
        rows.append(
            {
                "topic": tp[0],
                "partition": tp[1],
                "current_offset": current,
                "log_end_offset": end,
                "lag": None if current is None or end is None else max(end - current, 0),
                "consumer_id": None if member is None else member.member_id,
                "host": None if member is None else member.client_host,
                "client_id": None if member is None else member.client_id,
            }
        )
    header = ["GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG"]
    header += ["CONSUMER-ID", "HOST", "CLIENT-ID"]
    keys = ["topic", "partition", "current_offset", "log_end_offset", "lag", "consumer_id"]
    keys += ["host", "client_id"]
    table = [[group.group_id, *(_cell(row[k]) for k in keys)] for row in rows]
    text = _table(header, table)
    if not group.members:
        text.insert(0, f"Consumer group '{group.group_id}' has no active members.")
    document = {"group": group.group_id, "state": group.state, "partitions": rows}
    return document, text


def _members_view(group: GroupDescription) -> tuple[dict[str, Any], list[str]]:
    members = [
        {
            "consumer_id": m.member_id,
            "group_instance_id": m.group_instance_id,
            "host": m.client_host,
            "client_id": m.client_id,
            "assignment": [{"topic": t, "partition": p} for t, p in m.assignment],
        }
        for m in group.members
    ]
    header = ["GROUP", "CONSUMER-ID", "HOST", "CLIENT-ID", "#PARTITIONS", "ASSIGNMENT"]
    table = [
        [
            group.group_id,
            m.member_id,
            m.client_host,
            m.client_id,
            str(len(m.assignment)),
            ",".join(f"{t}-{p}" for t, p in m.assignment) or _NONE,
        ]
        for m in group.members
    ]
    text = _table(header, table) if members else []
    if not members:
        text = [f"Consumer group '{group.group_id}' has no active members."]
    return {"group": group.group_id, "members": members}, text


def _state_view(group: GroupDescription) -> tuple[dict[str, Any], list[str]]:
    document = {
        "group": group.group_id,
        "state": group.state,
        "protocol_type": group.protocol_type,
        "assignment_strategy": group.protocol,
        "members": len(group.members),
        "coordinator": group.coordinator_id,
    }
    header = ["GROUP", "COORDINATOR (ID)", "ASSIGNMENT-STRATEGY", "STATE", "#MEMBERS"]
    row = [group.group_id, f"({group.coordinator_id})", group.protocol or _NONE, group.state]
    row.append(str(len(group.members)))
    return document, _table(header, [row])


# ---------------------------------------------------------------------- changes


def _delete(admin: Admin, args: argparse.Namespace, groups: list[str]) -> int:
    if groups:
        admin.delete_groups(groups)
    names = ", ".join(f"'{g}'" for g in groups)
    text = f"Deletion of requested consumer groups ({names}) was successful." if groups else ""
    return report(args, {"deleted": groups}, text)


def _partitions(admin: Admin, specs: Iterable[str]) -> list[TopicPartitionLike]:
    """The partitions ``--topic`` names (every partition of a topic named alone)."""
    out: list[TopicPartitionLike] = []
    parsed = [parse_topic_partitions(spec) for spec in specs]
    described = admin.describe_topics(sorted({t for t, _ in parsed}))
    for topic, partitions in parsed:
        count = len(described[topic].partitions)
        for p in partitions if partitions is not None else range(count):
            if p >= count:
                raise ValueError(f"topic {topic!r} has no partition {p}")
            out.append((topic, p))
    return sorted(set(out))


def _delete_offsets(admin: Admin, args: argparse.Namespace, group_id: str) -> int:
    partitions = _partitions(admin, args.topic)
    admin.delete_group_offsets(group_id, partitions)
    rows = [{"topic": t, "partition": p, "status": "Successful"} for t, p in partitions]
    table = [[t, str(p), "Successful"] for t, p in partitions]
    text = _table(["TOPIC", "PARTITION", "STATUS"], table)
    return report(args, {"group": group_id, "partitions": rows}, text)


def _read_plan(admin: Admin, path: str, group_id: str) -> dict[TopicPartitionLike, int]:
    """The ``--from-file`` plan of ``group_id``, every partition checked to exist; raises
    ``ValueError`` (naming the file) on a file that cannot be read or a line that is wrong."""
    try:
        with open(path, encoding="utf-8") as file:
            text = file.read()
    except (OSError, UnicodeDecodeError) as exc:
        raise ValueError(f"--from-file {path}: cannot read it: {exc}") from None
    try:
        requested = parse_reset_plan(text, group_id)
    except ValueError as exc:
        raise ValueError(f"--from-file {path}: {exc}") from None
    counts = {name: len(d.partitions) for name, d in admin.describe_topics().items()}
    for topic, partition in sorted(requested):
        if topic not in counts:
            raise ValueError(f"--from-file {path}: topic {topic!r} does not exist")
        if partition >= counts[topic]:
            raise ValueError(f"--from-file {path}: topic {topic!r} has no partition {partition}")
    return requested


def _reset(admin: Admin, args: argparse.Namespace, group_id: str, rule: ResetRule) -> int:
    group = admin.describe_groups([group_id])[group_id]
    if group.state not in _INACTIVE:
        return fail(
            COMMAND,
            f"offsets can only be reset while group '{group_id}' is inactive (no members), "
            f"but its state is {group.state} with {len(group.members)} member(s)",
        )
    committed = {(t, int(p)): o.offset for (t, p), o in admin.list_group_offsets(group_id).items()}
    requested = None
    if rule.kind == "from-file":
        requested = _read_plan(admin, args.from_file, group_id)
        partitions = sorted(requested)
    elif args.all_topics:
        partitions = sorted(committed)
    else:
        partitions = _partitions(admin, args.topic)
    at_time = admin.list_offsets(partitions, rule.value) if rule.by_time and partitions else None
    plan = plan_reset(
        rule,
        partitions,
        committed=committed,
        earliest=admin.list_offsets(partitions, "earliest") if partitions else {},
        latest=admin.list_offsets(partitions, "latest") if partitions else {},
        at_time=at_time,
        requested=requested,
    )
    if args.execute and plan:
        admin.alter_group_offsets(group_id, plan)
    if args.export:
        print(format_reset_plan(plan), end="")
        return EXIT_OK
    rows = [
        {"topic": t, "partition": p, "new_offset": offset, "previous_offset": committed.get((t, p))}
        for (t, p), offset in sorted(plan.items())
    ]
    table = [[group_id, t, str(p), str(o)] for (t, p), o in sorted(plan.items())]
    text = _table(["GROUP", "TOPIC", "PARTITION", "NEW-OFFSET"], table)
    document = {"group": group_id, "executed": bool(args.execute), "partitions": rows}
    return report(args, document, text)


# ---------------------------------------------------------------------- output


def _cell(value: object) -> str:
    return _NONE if value is None or value == "" else str(value)


def _table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    """Left-aligned columns, Kafka's layout: a header row, then one line per row."""
    widths = [max(len(cell) for cell in column) for column in zip(header, *rows, strict=False)]
    return [
        " ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip()
        for row in (header, *rows)
    ]
