"""The leaf values of the coordination types (``replog.metadata.types`` re-exports them): topic
configs as the store keeps them and their limits, session and leader-recovery states, ISR
members, listener subscriptions, and the converters the attrs classes use."""

from __future__ import annotations

import enum
import json
from collections.abc import Callable, Iterable, Mapping
from typing import NamedTuple

import attrs

__all__ = [
    "TOPIC_CONFIGS_BYTES_MAX",
    "NEW_PARTITIONS_MAX",
    "TOPIC_CONFIGS_MAX",
    "TOPIC_CONFIG_KEY_CHARS_MAX",
    "TOPIC_CONFIG_VALUE_CHARS_MAX",
    "IsrMember",
    "LeaderRecoveryState",
    "SessionState",
    "Subscription",
    "TopicConfigs",
    "int_tuple",
    "isr_members",
    "replica_lists",
    "topic_configs",
]


def int_tuple(values: Iterable[int]) -> tuple[int, ...]:
    return tuple(map(int, values))


def replica_lists(values: Iterable[Iterable[int]]) -> tuple[tuple[int, ...], ...]:
    return tuple(int_tuple(v) for v in values)


#: the most partitions one admin request may create (CreateTopics over all its topics, or one
#: CreatePartitions topic's growth), as in Kafka: checked before anything is placed, so a huge
#: count from the wire is refused instead of allocated
NEW_PARTITIONS_MAX = 10_000

#: limits on what a topic's configs may hold in the store (checked by ``topic_configs``)
TOPIC_CONFIGS_MAX = 64
TOPIC_CONFIG_KEY_CHARS_MAX = 255
TOPIC_CONFIG_VALUE_CHARS_MAX = 4096
#: their stored (JSON) size, so a topic write stays far below ZooKeeper's 1 MB and etcd's
#: 1.5 MiB request limits (configs are written twice: topic record and feed record)
TOPIC_CONFIGS_BYTES_MAX = 64 * 1024

TopicConfigs = tuple[tuple[str, str], ...]


def topic_configs(values: Mapping[str, str] | Iterable[tuple[str, str]] | None) -> TopicConfigs:
    """Per-topic settings as the store keeps them: (key, value) string pairs sorted by key.
    ``ValueError`` for a non-string, a duplicate, an over-long key or value, or too many."""
    if values is None:
        return ()
    pairs = list(values.items()) if isinstance(values, Mapping) else list(values)
    if len(pairs) > TOPIC_CONFIGS_MAX:
        raise ValueError(f"a topic may have at most {TOPIC_CONFIGS_MAX} configs, got {len(pairs)}")
    seen: set[str] = set()
    for pair in pairs:
        if len(pair) != 2 or not all(isinstance(x, str) for x in pair):
            raise ValueError(f"topic configs are (str, str) pairs, got {pair!r}")
        key, value = pair
        if not key or len(key) > TOPIC_CONFIG_KEY_CHARS_MAX or key in seen:
            raise ValueError(f"bad or duplicate topic config key {key[:80]!r}")
        if len(value) > TOPIC_CONFIG_VALUE_CHARS_MAX:
            raise ValueError(f"topic config {key!r} is longer than {TOPIC_CONFIG_VALUE_CHARS_MAX}")
        seen.add(key)
    encoded = len(json.dumps(dict(pairs), separators=(",", ":")))  # as stored: \u-escaped
    if encoded > TOPIC_CONFIGS_BYTES_MAX:
        raise ValueError(
            f"a topic's configs take {encoded} bytes stored; at most {TOPIC_CONFIGS_BYTES_MAX}"
        )
    return tuple(sorted((k, v) for k, v in pairs))


class SessionState(enum.Enum):
    """Liveness of one broker's session with the store.

    CONNECTED: the session is live and the store reachable. SUSPENDED: the store is unreachable
    but the session may still be alive (ZooKeeper SUSPENDED, etcd keepalives failing within the
    lease TTL, missed heartbeat replies); it returns to CONNECTED or becomes LOST. LOST: the
    session is over (expired, or closed by ``unregister_broker``); its registration and any
    controller role are gone, and only a new registration (a new incarnation) comes back.
    While SUSPENDED or LOST a broker acts on nothing that needs current metadata: as leader it
    completes no acks=all produce.
    """

    CONNECTED = "connected"
    SUSPENDED = "suspended"
    LOST = "lost"


class LeaderRecoveryState(enum.IntEnum):
    """KIP-704: RECOVERING after an unclean election until the new leader has recovered its log.

    The values are Kafka's wire numbers. A partition never goes RECOVERED -> RECOVERING except
    through an unclean election (``replog.election`` decides; the store only keeps it)."""

    RECOVERED = 0
    RECOVERING = 1


class IsrMember(NamedTuple):
    """A proposed ISR member: the broker and the broker epoch the leader saw it fetch with
    (KIP-903; -1 when unknown). A plain ``(broker_id, broker_epoch)`` pair, also in the store."""

    broker_id: int
    broker_epoch: int = -1


def isr_members(values: Iterable[IsrMember | tuple[int, int] | int]) -> tuple[IsrMember, ...]:
    """ISR members from members, ``(broker_id, broker_epoch)`` pairs or bare broker ids."""
    members = []
    for value in values:
        if isinstance(value, int):
            members.append(IsrMember(value))
        else:
            broker_id, broker_epoch = value
            members.append(IsrMember(int(broker_id), int(broker_epoch)))
    return tuple(members)


@attrs.define
class Subscription:
    """Handle of a feed or session listener; ``close()`` stops delivery (idempotent). A batch
    already being delivered may still arrive once after ``close()`` returns."""

    _cancel: Callable[[], None]
    closed: bool = False

    def close(self) -> None:
        """Stop delivery to this listener."""
        if not self.closed:
            self.closed = True
            self._cancel()
