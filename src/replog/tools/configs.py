"""``replog configs``: describe and change topic and broker configs, as Kafka's kafka-configs.

The entity: ``--entity-type topics|brokers`` with ``--entity-name NAME`` (or
``--entity-default`` for the cluster-wide broker default), or Kafka's shortcuts ``--topic T``,
``--broker N``, ``--broker-defaults``. ``--describe`` prints the dynamic configs (set on the
topic, the broker or the cluster default) of the entity, or of every topic / broker without a
name; ``--all`` prints every config with its source. ``--alter`` takes ``--add-config
k=v,k2=[a,b]`` (Kafka's syntax: a value holding commas in square brackets),
``--add-config-file FILE`` (a properties file) and ``--delete-config k,k2`` (back to the
default), applied with IncrementalAlterConfigs so other keys keep their values; a key the
broker does not accept fails the whole change and changes nothing.

``users`` and ``clients`` (SCRAM credentials, quotas) are Kafka entity types replog does not
have yet: a clear error, exit 1. Exit status: 0 done, 1 the operation failed (an unknown topic,
broker or key; the broker's error on stderr), 2 usage error.
"""

from __future__ import annotations

import argparse
from typing import Any

from replog.client import Admin, ConfigEntry
from replog.errors import ReplogError
from replog.tools.client_config import (
    add_command_config_argument,
    admin_options,
    read_properties_file,
)
from replog.tools.output import add_output_argument, fail, report
from replog.tools.topics import add_bootstrap_argument

__all__ = ["COMMAND", "HELP", "add_arguments", "parse_add_config", "run"]

COMMAND = "configs"
HELP = "describe or alter topic and broker configs (as kafka-configs)"

_TYPES = ("topics", "brokers", "users", "clients")
_NOT_YET = {
    "users": "users (SCRAM credentials, user quotas)",
    "clients": "clients (client quotas)",
}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Kafka's kafka-configs options (the subset replog serves)."""
    add_bootstrap_argument(parser)
    actions = parser.add_mutually_exclusive_group(required=True)
    actions.add_argument("--describe", action="store_true", help="list configs")
    actions.add_argument("--alter", action="store_true", help="change configs")
    parser.add_argument("--entity-type", choices=_TYPES, help="topics or brokers")
    parser.add_argument("--entity-name", help="topic name or broker id")
    parser.add_argument(
        "--entity-default", action="store_true", help="the cluster-wide broker default"
    )
    parser.add_argument("--topic", help="as --entity-type topics --entity-name TOPIC")
    parser.add_argument("--broker", help="as --entity-type brokers --entity-name ID")
    parser.add_argument(
        "--broker-defaults", action="store_true", help="as --entity-type brokers --entity-default"
    )
    parser.add_argument("--all", action="store_true", help="describe: every config, not only set")
    parser.add_argument(
        "--add-config", action="append", default=[], metavar="K=V[,K=[A,B]]", help="alter: set"
    )
    parser.add_argument("--add-config-file", metavar="FILE", help="alter: set from a file")
    parser.add_argument(
        "--delete-config", action="append", default=[], metavar="K[,K]", help="alter: unset"
    )
    add_command_config_argument(parser)
    add_output_argument(parser)
    parser.set_defaults(usage_error=parser.error)


def parse_add_config(text: str) -> dict[str, str]:
    """``--add-config``: ``k=v`` pairs separated by commas, a value holding commas written in
    square brackets (``k=[a,b]`` is ``a,b``); ``ValueError`` when malformed."""
    pairs: dict[str, str] = {}
    rest = text.strip()
    while rest:
        key, sep, rest = rest.partition("=")
        if not sep or not key.strip():
            raise ValueError(f"--add-config {text!r}: {key!r} is not KEY=VALUE")
        if rest.startswith("["):
            value, close, rest = rest[1:].partition("]")
            if not close:
                raise ValueError(f"--add-config {text!r}: a '[' is not closed")
            rest = rest.removeprefix(",")
        else:
            value, _, rest = rest.partition(",")
        pairs[key.strip()] = value.strip()
    return pairs


def _entity(args: argparse.Namespace) -> tuple[str, str | None]:
    """(entity type, name or None for all; "" for the broker default) from either spelling."""
    error = args.usage_error
    shortcuts = [
        ("topics", args.topic),
        ("brokers", args.broker),
        ("brokers", "" if args.broker_defaults else None),
    ]
    chosen = [(kind, name) for kind, name in shortcuts if name is not None]
    if chosen:
        if args.entity_type or args.entity_name or args.entity_default or len(chosen) > 1:
            error("give the entity once: --topic, --broker, --broker-defaults or --entity-*")
        return chosen[0]
    if args.entity_type is None:
        error("--entity-type (or --topic / --broker / --broker-defaults) is required")
    if args.entity_default:
        if args.entity_type != "brokers" or args.entity_name is not None:
            error("--entity-default goes with --entity-type brokers and no --entity-name")
        return "brokers", ""
    return args.entity_type, args.entity_name


def _changes(args: argparse.Namespace) -> tuple[dict[str, str], list[str]]:
    adds: dict[str, str] = {}
    if args.add_config_file is not None:
        adds.update(read_properties_file(args.add_config_file))
    for text in args.add_config:
        adds.update(parse_add_config(text))
    deletes = [k.strip() for text in args.delete_config for k in text.split(",") if k.strip()]
    clash = sorted(set(adds) & set(deletes))
    if clash:
        raise ValueError(f"{clash[0]!r} is both added and deleted")
    return adds, deletes


def run(args: argparse.Namespace) -> int:
    """Run ``replog configs`` on parsed arguments; returns the exit status."""
    kind, name = _entity(args)
    try:
        adds, deletes = _changes(args)
        settings = admin_options(args)
    except ValueError as exc:
        args.usage_error(str(exc))
    if args.alter:
        if name is None:
            args.usage_error("--alter needs an entity name (or --entity-default)")
        if not adds and not deletes:
            args.usage_error("--alter needs --add-config, --add-config-file or --delete-config")
    elif adds or deletes:
        args.usage_error("--add-config and --delete-config go with --alter")
    if kind in _NOT_YET:
        return fail(COMMAND, f"replog has no {_NOT_YET[kind]} yet")
    try:
        with Admin(args.bootstrap_server, **settings) as admin:
            if args.alter:
                assert name is not None
                return _alter(admin, args, kind, name, adds, deletes)
            return _describe(admin, args, kind, name)
    except (ReplogError, OSError) as exc:
        return fail(COMMAND, exc)


def _alter(
    admin: Admin,
    args: argparse.Namespace,
    kind: str,
    name: str,
    adds: dict[str, str],
    deletes: list[str],
) -> int:
    if kind == "topics":
        if name not in admin.list_topics():
            return fail(COMMAND, f"topic {name!r} does not exist")
        admin.alter_configs(name, adds, deletes)
        text = f"Completed updating config for topic {name}."
    else:
        broker = _broker_id(name)
        admin.alter_broker_configs(broker, adds, deletes)
        text = (
            "Completed updating default config for brokers in the cluster."
            if broker is None
            else f"Completed updating config for broker {broker}."
        )
    return report(args, {"altered": {"type": kind, "name": name}}, text)


def _describe(admin: Admin, args: argparse.Namespace, kind: str, name: str | None) -> int:
    if name is None:
        names = (
            list(admin.list_topics())
            if kind == "topics"
            else [str(i) for i in sorted(b.broker_id for b in admin.describe_cluster().brokers)]
        )
    else:
        if kind == "brokers":
            _broker_id(name)
        elif name not in admin.list_topics():
            return fail(COMMAND, f"topic {name!r} does not exist")
        names = [name]
    entries = admin.config_entries(kind, names)
    lines: list[str] = []
    document: list[dict[str, Any]] = []
    for entity in names:
        shown = [e for e in entries[entity] if args.all or e.is_dynamic]
        lines.append(_heading(kind, entity, args.all))
        lines.extend(f"  {_entry_text(e)}" for e in shown)
        document.append({"name": entity, "configs": [_entry_json(e) for e in shown]})
    return report(args, {"type": kind, "entities": document}, "\n".join(lines))


def _broker_id(name: str) -> int | None:
    if name == "":
        return None
    try:
        return int(name)
    except ValueError:
        raise ReplogError(f"broker {name!r} is not a broker id") from None


def _heading(kind: str, name: str, every: bool) -> str:
    what = "All" if every else "Dynamic"
    if kind == "brokers" and name == "":
        return "Default configs for brokers in the cluster are:"
    noun = "topic" if kind == "topics" else "broker"
    return f"{what} configs for {noun} {name} are:"


def _entry_text(entry: ConfigEntry) -> str:
    value = "null" if entry.value is None else entry.value
    synonyms = f"{entry.source}:{entry.name}={value}"
    return f"{entry.name}={value} sensitive={str(entry.sensitive).lower()} synonyms={{{synonyms}}}"


def _entry_json(entry: ConfigEntry) -> dict[str, Any]:
    return {
        "name": entry.name,
        "value": entry.value,
        "source": entry.source,
        "read_only": entry.read_only,
        "sensitive": entry.sensitive,
    }
