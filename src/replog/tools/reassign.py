"""``replog reassign``: move partition replicas between brokers, as Kafka's
kafka-reassign-partitions.

Exactly one action:

- ``--generate``: propose a plan (nothing changes). With ``--topics-to-move-json-file F
  --broker-list 1,2,3``: the topics' partitions placed on those brokers. With
  ``--add-brokers 4,5``: a fair share of the replicas moved onto the new brokers, as few moves
  as that takes. With ``--remove-brokers 3``: every replica moved off broker 3. The last two
  plan every topic unless ``--topics-to-move-json-file`` names some. Plans keep replicas that
  may stay where they are, balance replica and preferred-leader counts, and spread each
  partition over racks when the brokers have racks (``--disable-rack-aware``: ignore them).
  Prints the current and the proposed assignment of the partitions the plan changes.
- ``--execute --reassignment-json-file F``: print the current assignment (save it to roll
  back), then start the reassignment (refused while one of F's partitions is being
  reassigned, unless ``--additional``: then the running ones get F's targets).
  ``--throttle BYTES_PER_S`` first sets Kafka's replication throttle (KIP-73): the broker
  configs ``leader/follower.replication.throttled.rate`` on every broker that holds or gets a
  replica of F's partitions, and the topic configs ``leader.replication.throttled.replicas``
  (the partitions' current replicas) and ``follower.replication.throttled.replicas`` (the
  replicas being added), so that catching-up replicas copy at most about that rate while
  in-sync ones are never slowed; a broker that refuses it fails the command before anything
  moves. Run again with ``--additional --throttle`` to change the rate of a running
  reassignment. ``--wait`` follows the reassignment until every partition is complete (a
  progress bar on a terminal, plain lines otherwise).
- ``--verify --reassignment-json-file F``: each partition complete, in progress or failed;
  once all are complete, removes the throttle configs (``--preserve-throttles``: keep them).
- ``--cancel --reassignment-json-file F``: cancel the running reassignments among F's
  partitions (their replicas go back to the original ones).

The JSON formats are Kafka's (``replog.tools.reassign_json``). Exit status: 0 done; 1 the
operation failed: a bad JSON file, an unknown topic or partition, a broker not in the cluster,
a broker error, a reassignment already running (``--execute`` without ``--additional``), a
partition whose reassignment failed (``--verify``), throttles refused, or ``--wait`` timing
out; 2 usage error.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from replog.client import Admin
from replog.errors import ErrorCode, ReplogError
from replog.tools.client_config import add_command_config_argument, admin_options
from replog.tools.output import EXIT_FAILED, EXIT_OK, add_output_argument, fail, print_json
from replog.tools.progress import ProgressReport, wait_until_done
from replog.tools.reassign_json import (
    parse_reassignment,
    parse_topics_to_move,
    reassignment_document,
)
from replog.tools.reassign_plan import (
    plan_add_brokers,
    plan_onto_brokers,
)
from replog.tools.topics import add_bootstrap_argument

__all__ = ["COMMAND", "HELP", "add_arguments", "broker_ids", "partition_states", "run"]

COMMAND = "reassign"
HELP = "generate, execute, verify or cancel partition reassignments (as kafka-reassign-partitions)"

_ACTIONS = ("generate", "execute", "verify", "cancel")
RATE_KEYS = ("leader.replication.throttled.rate", "follower.replication.throttled.rate")
LEADER_REPLICAS_KEY = "leader.replication.throttled.replicas"
FOLLOWER_REPLICAS_KEY = "follower.replication.throttled.replicas"

COMPLETE, IN_PROGRESS, FAILED = "complete", "in_progress", "failed"
Assignment = dict[tuple[str, int], list[int]]


class ToolError(ReplogError):
    """A failure the tool reports as is (exit status 1)."""


def broker_ids(text: str) -> list[int]:
    """A comma-separated broker id list (``1,2,3``), each once (a usage error otherwise)."""
    try:
        ids = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a list of broker ids") from None
    if not ids or any(i < 0 for i in ids):
        raise argparse.ArgumentTypeError(f"{text!r} is not a list of broker ids")
    if len(set(ids)) != len(ids):
        raise argparse.ArgumentTypeError(f"{text!r} names a broker twice")
    return ids


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value <= 0:
        raise argparse.ArgumentTypeError(f"{text!r} is not a positive integer")
    return value


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """kafka-reassign-partitions' options (the ones replog serves), the broker add/remove
    planners, ``--wait`` and ``--output``."""
    add_bootstrap_argument(parser)
    actions = parser.add_mutually_exclusive_group(required=True)
    for action in _ACTIONS:
        actions.add_argument(f"--{action}", action="store_true", help=f"{action} a reassignment")
    parser.add_argument("--topics-to-move-json-file", metavar="FILE", help="generate: topics")
    targets = parser.add_mutually_exclusive_group()
    targets.add_argument(
        "--broker-list", type=broker_ids, metavar="1,2,3", help="generate: onto these brokers"
    )
    targets.add_argument(
        "--add-brokers", type=broker_ids, metavar="4,5", help="generate: a fair share onto these"
    )
    targets.add_argument(
        "--remove-brokers", type=broker_ids, metavar="3", help="generate: everything off these"
    )
    parser.add_argument(
        "--disable-rack-aware", action="store_true", help="generate: ignore broker racks"
    )
    parser.add_argument(
        "--reassignment-json-file", metavar="FILE", help="execute/verify/cancel: the plan"
    )
    parser.add_argument(
        "--throttle",
        type=_positive,
        metavar="BYTES_PER_S",
        help="execute: throttle the replicas being added to this rate (removed by --verify)",
    )
    parser.add_argument(
        "--additional", action="store_true", help="execute: even while reassignments run"
    )
    parser.add_argument("--wait", action="store_true", help="execute: follow until complete")
    parser.add_argument(
        "--wait-timeout-ms", type=_positive, default=600_000, help="--wait's limit (600000)"
    )
    parser.add_argument(
        "--preserve-throttles", action="store_true", help="verify/cancel: keep throttle configs"
    )
    parser.add_argument(
        "--timeout-ms", type=_positive, default=30_000, help="admin request timeout (30000)"
    )
    add_command_config_argument(parser)
    add_output_argument(parser)
    parser.set_defaults(usage_error=parser.error)


def _check_usage(parser_error: Any, args: argparse.Namespace) -> None:
    """Reject option combinations that do not go together (exit status 2)."""
    planners = (args.broker_list, args.add_brokers, args.remove_brokers)
    if args.generate:
        if all(p is None for p in planners):
            parser_error("--generate needs --broker-list, --add-brokers or --remove-brokers")
        if args.broker_list is not None and not args.topics_to_move_json_file:
            parser_error("--broker-list needs --topics-to-move-json-file")
        if args.reassignment_json_file or args.throttle or args.wait or args.additional:
            parser_error("--reassignment-json-file, --throttle, --wait, --additional: --execute")
        return
    if not args.reassignment_json_file:
        parser_error(f"--{_action(args)} needs --reassignment-json-file")
    if args.topics_to_move_json_file or any(p is not None for p in planners):
        parser_error("the topics file and broker lists go with --generate")
    if args.disable_rack_aware:
        parser_error("--disable-rack-aware goes with --generate")
    if not args.execute and (args.throttle or args.wait or args.additional):
        parser_error("--throttle, --wait and --additional go with --execute")


def _action(args: argparse.Namespace) -> str:
    return next(a for a in _ACTIONS if getattr(args, a))


def _read(path: str) -> str:
    try:
        with open(path, encoding="utf-8") as file:
            return file.read()
    except OSError as exc:
        raise ToolError(f"cannot read {path}: {exc.strerror or exc}") from None


def run(args: argparse.Namespace) -> int:
    """Run ``replog reassign`` on parsed arguments; returns the exit status."""
    _check_usage(args.usage_error, args)
    try:
        options = admin_options(args)
    except ValueError as exc:
        args.usage_error(str(exc))
    try:
        with Admin(args.bootstrap_server, **options) as admin:
            if args.generate:
                return _generate(admin, args)
            targets = parse_reassignment(_read(args.reassignment_json_file))
            if args.execute:
                return _execute(admin, args, targets)
            if args.verify:
                return _verify(admin, args, targets)
            return _cancel(admin, args, targets)
    except (ReplogError, OSError) as exc:
        return fail(COMMAND, exc)


def _live_brokers(admin: Admin) -> dict[int, str | None]:
    return {b.broker_id: b.rack for b in admin.describe_cluster().brokers}


def _check_brokers(ids: Iterable[int], live: Mapping[int, str | None], what: str) -> None:
    missing = sorted(set(ids) - set(live))
    if missing:
        known = ",".join(str(b) for b in sorted(live))
        raise ToolError(f"{what}: brokers {missing} are not in the cluster (brokers: {known})")


def _assignment(admin: Admin, topics: Sequence[str]) -> Assignment:
    """The current replicas of every partition of ``topics`` (an unknown topic: ToolError)."""
    known = set(admin.list_topics())
    unknown = [t for t in topics if t not in known]
    if unknown:
        raise ToolError(f"unknown topics: {', '.join(unknown)}")
    described = admin.describe_topics(topics)
    return {
        (name, part.partition): list(part.replicas)
        for name in topics
        for part in described[name].partitions
    }


def _generate(admin: Admin, args: argparse.Namespace) -> int:
    live = _live_brokers(admin)
    if args.topics_to_move_json_file:
        topics = parse_topics_to_move(_read(args.topics_to_move_json_file))
    else:
        topics = admin.list_topics()
    current = _assignment(admin, topics)
    rack_aware = not args.disable_rack_aware  # a PlanError is reported as it is, exit 1
    if args.broker_list is not None:
        _check_brokers(args.broker_list, live, "--broker-list")
        allowed = {b: live[b] for b in args.broker_list}
        proposed = plan_onto_brokers(current, allowed, rack_aware=rack_aware)
    elif args.add_brokers is not None:
        _check_brokers(args.add_brokers, live, "--add-brokers")
        proposed = plan_add_brokers(current, live, set(args.add_brokers), rack_aware=rack_aware)
    else:
        _check_brokers(args.remove_brokers, live, "--remove-brokers")
        allowed = {b: r for b, r in live.items() if b not in args.remove_brokers}
        proposed = plan_onto_brokers(current, allowed, rack_aware=rack_aware)
    changed = {tp: list(r) for tp, r in proposed.items() if list(r) != current[tp]}
    before = reassignment_document({tp: current[tp] for tp in changed})
    after = reassignment_document(changed)
    if args.output == "json":
        print_json({"current": before, "proposed": after})
        return EXIT_OK
    print(f"Current partition replica assignment\n{_compact(before)}\n")
    print(f"Proposed partition reassignment configuration\n{_compact(after)}")
    return EXIT_OK


def _compact(document: dict[str, Any]) -> str:
    return json.dumps(document, separators=(",", ":"))


def _validated_current(admin: Admin, targets: Assignment, *, live: bool = False) -> Assignment:
    """The current replicas of ``targets``' partitions, after checking that the topics and
    partitions exist and (``live``: before a reassignment starts) that every target broker is
    in the cluster."""
    topics = sorted({t for t, _ in targets})
    current = _assignment(admin, topics)
    missing = [f"{t}-{p}" for t, p in sorted(targets) if (t, p) not in current]
    if missing:
        raise ToolError(f"unknown partitions: {', '.join(missing)}")
    if live:
        brokers = _live_brokers(admin)
        for (topic, partition), replicas in sorted(targets.items()):
            _check_brokers(replicas, brokers, f"{topic}-{partition}")
    return {tp: current[tp] for tp in sorted(targets)}


def _execute(admin: Admin, args: argparse.Namespace, targets: Assignment) -> int:
    current = _validated_current(admin, targets, live=True)
    running = admin.list_partition_reassignments(sorted(targets))
    if running and not args.additional:
        names = ",".join(f"{t}-{p}" for t, p in sorted((tp[0], tp[1]) for tp in running))
        raise ToolError(
            f"reassignments are already running for {names}: wait for them (--verify), cancel "
            "them (--cancel) or pass --additional to give them the new targets"
        )
    rollback = reassignment_document(current)
    if args.output == "text":
        print(f"Current partition replica assignment\n\n{_compact(rollback)}\n")
        print("Save this to use as the --reassignment-json-file option during rollback")
    if args.throttle:
        _set_throttles(admin, _originals(current, running), targets, args.throttle)
    admin.alter_partition_reassignments(targets)
    if args.output == "text":
        started = ",".join(f"{t}-{p}" for t, p in sorted(targets))
        print(f"Successfully started partition reassignments for {started}")
        if args.throttle:
            print(f"The inter-broker throughput limit was set to {args.throttle} B/s")
    document: dict[str, Any] = {"rollback": rollback, "started": _names(targets)}
    status = EXIT_OK
    if args.wait:
        states: dict[tuple[str, int], str] = {}
        report = wait_until_done(
            lambda: _progress(admin, targets, states),
            label="Reassignment",
            timeout_ms=args.wait_timeout_ms,
            out=sys.stdout if args.output == "text" else sys.stderr,
        )
        document["partitions"] = _states_json(targets, states)
        if report.done < report.total:
            status = fail(COMMAND, f"not complete after {args.wait_timeout_ms} ms")
    if args.output == "json":
        print_json(document)
    return status


def _originals(current: Assignment, running: Mapping[Any, Any]) -> Assignment:
    """The replicas each partition had before its running reassignment (``current`` less the
    replicas being added), the ones Kafka throttles as leaders."""
    out = dict(current)
    for tp, reassignment in running.items():
        key = (tp[0], tp[1])
        if key in out:
            out[key] = [b for b in out[key] if b not in reassignment.adding_replicas]
    return out


def _names(partitions: Iterable[tuple[str, int]]) -> list[dict[str, Any]]:
    return [{"topic": t, "partition": p} for t, p in sorted(partitions)]


def _states_json(
    targets: Assignment, states: Mapping[tuple[str, int], str]
) -> list[dict[str, Any]]:
    return [
        {"topic": t, "partition": p, "replicas": targets[(t, p)], "status": s}
        for (t, p), s in sorted(states.items())
    ]


def _progress(
    admin: Admin, targets: Assignment, states: dict[tuple[str, int], str]
) -> ProgressReport:
    states.update(partition_states(admin, targets))
    failed = [tp for tp, state in states.items() if state == FAILED]
    if failed:
        raise ToolError(f"reassignment failed for {', '.join(f'{t}-{p}' for t, p in failed)}")
    done = sum(state == COMPLETE for state in states.values())
    return ProgressReport(done=done, total=len(targets), detail="partitions complete")


def partition_states(admin: Admin, targets: Assignment) -> dict[tuple[str, int], str]:
    """Each target partition's state: ``in_progress`` while the controller lists a running
    reassignment, else ``complete`` when its replicas are the target's (order included: the
    first is the preferred leader), else ``failed``."""
    running = admin.list_partition_reassignments(sorted(targets))
    described = admin.describe_topics(sorted({t for t, _ in targets}))
    states: dict[tuple[str, int], str] = {}
    for tp, target in targets.items():
        if tp in running:
            states[tp] = IN_PROGRESS
            continue
        parts = described[tp[0]].partitions
        replicas = list(parts[tp[1]].replicas) if tp[1] < len(parts) else []
        states[tp] = COMPLETE if replicas == list(target) else FAILED
    return states


def _verify(admin: Admin, args: argparse.Namespace, targets: Assignment) -> int:
    _validated_current(admin, targets)
    states = partition_states(admin, targets)
    described = admin.describe_topics(sorted({t for t, _ in targets}))
    lines = ["Status of partition reassignment:"]
    for (topic, partition), state in sorted(states.items()):
        name = f"{topic}-{partition}"
        if state == COMPLETE:
            lines.append(f"Reassignment of partition {name} is complete.")
        elif state == IN_PROGRESS:
            lines.append(f"Reassignment of partition {name} is still in progress.")
        else:
            now = list(described[topic].partitions[partition].replicas)
            target = targets[(topic, partition)]
            lines.append(
                f"Reassignment of partition {name} failed: no reassignment is running and "
                f"its replicas are {now}, not {target}."
            )
    cleared: list[str] = []
    if all(s == COMPLETE for s in states.values()) and not args.preserve_throttles:
        cleared = _clear_throttles(admin, sorted({t for t, _ in targets}))
        if cleared:
            lines.append(f"Clearing the replication throttles on topics {', '.join(cleared)}.")
    if args.output == "json":
        print_json({"partitions": _states_json(targets, states), "throttles_cleared": cleared})
    else:
        print("\n".join(lines))
    return EXIT_FAILED if FAILED in states.values() else EXIT_OK


def _cancel(admin: Admin, args: argparse.Namespace, targets: Assignment) -> int:
    _validated_current(admin, targets)
    running = admin.list_partition_reassignments(sorted(targets))
    active = sorted((tp[0], tp[1]) for tp in running)
    if active:
        admin.alter_partition_reassignments(dict.fromkeys(active))
    cleared = (
        [] if args.preserve_throttles else _clear_throttles(admin, sorted({t for t, _ in targets}))
    )
    inactive = sorted(tp for tp in targets if tp not in set(active))
    if args.output == "json":
        print_json(
            {
                "cancelled": _names(active),
                "not_active": _names(inactive),
                "throttles_cleared": cleared,
            }
        )
        return EXIT_OK
    if active:
        names = ",".join(f"{t}-{p}" for t, p in active)
        print(f"Successfully cancelled partition reassignments for: {names}")
    if inactive:
        names = ",".join(f"{t}-{p}" for t, p in inactive)
        print(f"No reassignment is running for: {names}")
    return EXIT_OK


def _set_throttles(admin: Admin, current: Assignment, targets: Assignment, rate: int) -> None:
    """Kafka's replication throttle for this reassignment: the rate on every broker involved,
    the throttled replicas on each topic (leaders: the current replicas; followers: the ones
    being added). When a broker refuses it, what was set is removed again and the command
    fails before anything moves."""
    brokers = sorted({b for r in (*current.values(), *targets.values()) for b in r})
    done_brokers: list[int] = []
    done_topics: list[str] = []
    try:
        for broker in brokers:
            admin.alter_broker_configs(broker, dict.fromkeys(RATE_KEYS, str(rate)))
            done_brokers.append(broker)
        for topic in sorted({t for t, _ in targets}):
            admin.alter_configs(topic, _throttled_replicas(topic, current, targets))
            done_topics.append(topic)
    except ReplogError as exc:
        if exc.code != ErrorCode.INVALID_CONFIG:
            raise
        with contextlib.suppress(ReplogError):
            for broker in done_brokers:
                admin.alter_broker_configs(broker, delete_configs=RATE_KEYS)
            for topic in done_topics:
                admin.alter_configs(
                    topic, delete_configs=(LEADER_REPLICAS_KEY, FOLLOWER_REPLICAS_KEY)
                )
        raise ToolError(
            "a broker refused the replication throttle, so nothing was moved; run again "
            f"without --throttle. ({exc})"
        ) from None


def _throttled_replicas(topic: str, current: Assignment, targets: Assignment) -> dict[str, str]:
    """Kafka's ``partition:broker`` lists for ``topic``: leaders throttled on the current
    replicas, followers on the replicas being added."""
    leaders = [f"{p}:{b}" for (t, p), rs in sorted(current.items()) if t == topic for b in rs]
    followers = [
        f"{p}:{b}"
        for (t, p), rs in sorted(targets.items())
        if t == topic
        for b in rs
        if b not in current[(t, p)]
    ]
    return {LEADER_REPLICAS_KEY: ",".join(leaders), FOLLOWER_REPLICAS_KEY: ",".join(followers)}


def _clear_throttles(admin: Admin, topics: list[str]) -> list[str]:
    """Remove the throttle configs this tool sets from ``topics`` and their brokers; returns
    the topics that had them (none on brokers that never accepted a throttle)."""
    configs = admin.describe_configs(topics)
    throttled = [
        t
        for t in topics
        if configs[t].get(LEADER_REPLICAS_KEY) or configs[t].get(FOLLOWER_REPLICAS_KEY)
    ]
    if not throttled:
        return []
    for topic in throttled:
        admin.alter_configs(topic, delete_configs=(LEADER_REPLICAS_KEY, FOLLOWER_REPLICAS_KEY))
    for broker in sorted(_live_brokers(admin)):
        admin.alter_broker_configs(broker, delete_configs=RATE_KEYS)
    return throttled
