"""Kafka's configuration names for replog's clients.

replog's settings use replog's words (units last: ``fetch_bytes_max``); code written for Kafka
clients uses Kafka's (``fetch_max_bytes``, ``auto_offset_reset``, ``bootstrap_servers``), in
snake_case (kafka-python, aiokafka) or with dots (the Java client, librdkafka). ``consumer_options``
accepts both: dots become underscores, Kafka's names become replog's where they differ, and a
setting given under both names is refused (``InvalidConfigError``) rather than one silently
winning. Settings replog names as Kafka does (``group_id``, ``enable_auto_commit``,
``session_timeout_ms``, ...) pass through.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from replog.errors import InvalidConfigError

__all__ = ["CONSUMER_ALIASES", "consumer_options"]

CONSUMER_ALIASES = {
    "auto_offset_reset": "auto_reset",
    "fetch_max_bytes": "fetch_bytes_max",
    "max_partition_fetch_bytes": "partition_fetch_bytes_max",
}
"""Kafka's consumer setting -> replog's ``ConsumerConfig`` field, where they differ."""


def consumer_options(
    bootstrap: str | Sequence[str] | None, options: Mapping[str, Any]
) -> tuple[str | Sequence[str], dict[str, Any]]:
    """(bootstrap, ``ConsumerConfig`` keyword arguments) from what the caller gave, under
    either name (``bootstrap_servers`` stands for the bootstrap argument)."""
    out: dict[str, Any] = {}
    for raw, value in options.items():
        name = raw.replace(".", "_")
        name = CONSUMER_ALIASES.get(name, name)
        if name in out:
            raise InvalidConfigError(f"{raw!r} is given twice (under Kafka's and replog's name)")
        out[name] = value
    servers = out.pop("bootstrap_servers", None)
    if bootstrap is not None and servers is not None:
        raise InvalidConfigError("give the bootstrap servers once (bootstrap or bootstrap_servers)")
    chosen = bootstrap if bootstrap is not None else servers
    if chosen is None:
        raise InvalidConfigError("no bootstrap servers given (bootstrap / bootstrap_servers)")
    return chosen, out
