"""Client settings for the tools that produce or consume, in Kafka's words.

Kafka's console tools take client settings three ways, and so do replog's: a Java properties
file (``--producer.config FILE`` / ``--consumer.config FILE``, or ``--command-config FILE`` as
the admin tools name it), repeated ``--producer-property k=v`` / ``--consumer-property k=v``
(later ones win over the file), and the tool's own options. Keys are Kafka's (``linger.ms``,
``compression.type``, ``auto.offset.reset``); ``producer_settings`` and ``consumer_settings``
turn them into replog's client settings. An unknown key, a value of the wrong kind or a security
setting replog's clients do not speak yet is a ``ValueError`` naming it.
"""

from __future__ import annotations

import argparse
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

__all__ = [
    "add_client_config_arguments",
    "add_command_config_argument",
    "admin_options",
    "admin_settings",
    "consumer_settings",
    "parse_properties",
    "producer_settings",
    "read_properties_file",
    "settings_from_args",
]


def _bool(text: str) -> bool:
    lowered = text.strip().lower()
    if lowered not in ("true", "false"):
        raise ValueError(f"{text!r} is not true or false")
    return lowered == "true"


def _acks(text: str) -> int:
    if text.strip().lower() == "all":
        return -1
    return int(text)


#: Kafka's producer key -> (replog's ProducerConfig field, parser)
_PRODUCER_KEYS: dict[str, tuple[str, Any]] = {
    "acks": ("acks", _acks),
    "linger.ms": ("linger_ms", int),
    "batch.size": ("batch_bytes_max", int),
    "buffer.memory": ("buffer_bytes_max", int),
    "retries": ("retries", int),
    "retry.backoff.ms": ("retry_backoff_ms", int),
    "retry.backoff.max.ms": ("retry_backoff_max_ms", int),
    "delivery.timeout.ms": ("delivery_timeout_ms", int),
    "request.timeout.ms": ("request_timeout_ms", int),
    "max.block.ms": ("metadata_wait_ms", int),
    "max.in.flight.requests.per.connection": ("in_flight_per_partition_max", int),
    "compression.type": ("compression", str),
    "client.id": ("client_id", str),
    "enable.idempotence": ("enable_idempotence", _bool),
}

#: Kafka's consumer key -> (the name ``Consumer`` takes, parser)
_CONSUMER_KEYS: dict[str, tuple[str, Any]] = {
    "group.id": ("group_id", str),
    "group.instance.id": ("group_instance_id", str),
    "client.id": ("client_id", str),
    "auto.offset.reset": ("auto_offset_reset", str),
    "enable.auto.commit": ("enable_auto_commit", _bool),
    "auto.commit.interval.ms": ("auto_commit_interval_ms", int),
    "session.timeout.ms": ("session_timeout_ms", int),
    "heartbeat.interval.ms": ("heartbeat_interval_ms", int),
    "max.poll.interval.ms": ("max_poll_interval_ms", int),
    "max.poll.records": ("max_poll_records", int),
    "fetch.max.wait.ms": ("fetch_max_wait_ms", int),
    "fetch.min.bytes": ("fetch_min_bytes", int),
    "fetch.max.bytes": ("fetch_max_bytes", int),
    "max.partition.fetch.bytes": ("max_partition_fetch_bytes", int),
    "request.timeout.ms": ("request_timeout_ms", int),
    "retry.backoff.ms": ("retry_backoff_ms", int),
    "metadata.max.age.ms": ("metadata_max_age_ms", int),
}

#: Kafka's admin client key -> (the name ``Admin`` takes, parser)
_ADMIN_KEYS: dict[str, tuple[str, Any]] = {
    "client.id": ("client_id", str),
    "request.timeout.ms": ("request_timeout_ms", int),
    "default.api.timeout.ms": ("request_timeout_ms", int),
}

#: keys every Kafka client accepts that change nothing here
_IGNORED = frozenset({"bootstrap.servers"})


def parse_properties(pairs: Iterable[str], what: str) -> dict[str, str]:
    """``k=v`` strings (``--producer-property``, ``--property``) as a dict; ``ValueError``
    for one without ``=``."""
    out: dict[str, str] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise ValueError(f"{what} {pair!r} is not KEY=VALUE")
        out[key.strip()] = value.strip()
    return out


def read_properties_file(path: str) -> dict[str, str]:
    """A Java properties file of ``key=value`` (or ``key: value``) lines; ``#`` and ``!``
    start comments. ``ValueError`` if it cannot be read or a line has no separator."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise ValueError(f"cannot read {path}: {exc.strerror or exc}") from exc
    out: dict[str, str] = {}
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line[0] in "#!":
            continue
        cut = min((i for i in (line.find("="), line.find(":")) if i > 0), default=-1)
        if cut < 0:
            raise ValueError(f"{path} line {number}: {raw!r} is not key=value")
        out[line[:cut].strip()] = line[cut + 1 :].strip()
    return out


def add_client_config_arguments(parser: argparse.ArgumentParser, role: str) -> None:
    """``--<role>.config FILE``, ``--command-config FILE`` and ``--<role>-property k=v``."""
    parser.add_argument(
        f"--{role}.config",
        dest="client_config",
        metavar="FILE",
        help=f"{role} settings, a Java properties file (Kafka's keys)",
    )
    parser.add_argument(
        "--command-config",
        dest="command_config",
        metavar="FILE",
        help=f"as --{role}.config (the name Kafka's admin tools use)",
    )
    parser.add_argument(
        f"--{role}-property",
        dest="client_properties",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help=f"one {role} setting (repeatable; wins over the files)",
    )


def settings_from_args(args: argparse.Namespace, role: str) -> dict[str, str]:
    """The Kafka-named settings of ``args``: the files, then ``--<role>-property``."""
    merged: dict[str, str] = {}
    for path in (args.command_config, args.client_config):
        if path is not None:
            merged.update(read_properties_file(path))
    merged.update(parse_properties(args.client_properties, f"--{role}-property"))
    return merged


def producer_settings(kafka: Mapping[str, str]) -> dict[str, Any]:
    """replog ``Producer`` keyword arguments from Kafka-named settings."""
    return _translate(kafka, _PRODUCER_KEYS, "producer")


def add_command_config_argument(parser: argparse.ArgumentParser) -> None:
    """``--command-config FILE``: the admin client's settings in Kafka's keys."""
    parser.add_argument(
        "--command-config", metavar="FILE", help="admin client settings (Kafka's keys)"
    )


def admin_options(args: argparse.Namespace) -> dict[str, Any]:
    """``Admin`` keyword arguments for a tool: ``--command-config``'s settings, with the tool's
    own ``--timeout-ms`` (when it has one) as the request timeout; ``ValueError`` for a bad
    file."""
    options = admin_settings(args.command_config)
    timeout_ms = getattr(args, "timeout_ms", None)
    if timeout_ms is not None:
        options["request_timeout_ms"] = timeout_ms
    return options


def admin_settings(command_config: str | None) -> dict[str, Any]:
    """replog ``Admin`` keyword arguments from a ``--command-config`` file (None: none)."""
    if command_config is None:
        return {}
    return _translate(read_properties_file(command_config), _ADMIN_KEYS, "admin")


def consumer_settings(kafka: Mapping[str, str]) -> dict[str, Any]:
    """replog ``Consumer`` keyword arguments from Kafka-named settings."""
    return _translate(kafka, _CONSUMER_KEYS, "consumer")


def _translate(
    kafka: Mapping[str, str], keys: dict[str, tuple[str, Any]], role: str
) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in kafka.items():
        if key in _IGNORED:
            continue
        if key == "security.protocol" and value.upper() == "PLAINTEXT":
            continue
        if key.startswith(("security.", "sasl.", "ssl.")):
            raise ValueError(f"{key}={value}: replog's clients speak PLAINTEXT only so far")
        known = keys.get(key)
        if known is None:
            raise ValueError(f"unknown {role} setting {key!r}")
        name, parse = known
        try:
            out[name] = parse(value)
        except ValueError as exc:
            raise ValueError(f"{role} setting {key}={value!r}: {exc}") from None
    return out
