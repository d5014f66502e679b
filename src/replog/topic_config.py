"""Per-topic configs: the Kafka topic settings replog honours, parsed and validated in one place.

A topic's configs are given at creation (CreateTopics ``configs``, ``Admin.create_topics``)
and stored with the topic in the coordinator, so every broker and every controller reads the
same values. Honoured:

- ``min.insync.replicas``: the ISR size an ``acks=all`` produce needs (brokers) and the ELR
  rules (controller);
- ``unclean.leader.election.enable``: whether the controller may elect an out-of-sync replica;
- log settings, each overriding the broker's ``log`` table for this topic: ``segment.bytes``,
  ``segment.ms``, ``segment.jitter.ms``, ``segment.index.bytes``, ``index.interval.bytes``,
  ``retention.ms``, ``retention.bytes``, ``max.message.bytes``, ``file.delete.delay.ms``, and
  the log cleaner's ``cleanup.policy`` (``delete``, ``compact`` or ``compact,delete``),
  ``min.cleanable.dirty.ratio``, ``min.compaction.lag.ms``, ``max.compaction.lag.ms``,
  ``delete.retention.ms``;
- ``compression.type``: ``producer`` (batches stored as the producer sent them) or a codec
  (``uncompressed``, ``gzip``, ``snappy``, ``lz4``, ``zstd``) the leader recompresses incoming
  batches to;
- ``leader.replication.throttled.replicas`` / ``follower.replication.throttled.replicas``
  (KIP-73): the replicas whose replication the broker's replication quotas throttle, as
  leader or as follower: ``*`` (every replica of the topic) or a list
  ``partition:broker,...`` (``ThrottledReplicas``; ``replog.broker.driver.replication_throttle``).

Accepted and stored but not acted on: ``flush.messages`` and ``flush.ms`` (Kafka's forced
fsync after so many messages or milliseconds; non-negative integers). replog's log has no
per-topic flush policy: when data reaches the disk is decided by the broker's durability mode
and, as in Kafka's recommended setup, durability comes from replication. They are accepted so
that tools and clients that set them keep working.

Configs can change after creation (AlterConfigs / IncrementalAlterConfigs): the new set is
checked here and stored, and every broker and the controller apply it live. The broker-level
layers a topic setting falls back on (dynamic broker configs, the cluster-wide default, the
broker's own config) are ``replog.config_layers``.

Anything else is refused with ``InvalidConfigError`` (the broker answers INVALID_CONFIG), never
accepted and silently ignored. Pure: no IO (the controller, which is sans-IO, uses it).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping
from typing import Any

import attrs

from replog.errors import InvalidConfigError
from replog.log.config import LogConfig, normalize_cleanup_policy

__all__ = [
    "COMPRESSION_TYPES",
    "FLUSH_KEYS",
    "FOLLOWER_THROTTLED_REPLICAS",
    "LEADER_THROTTLED_REPLICAS",
    "LIST_KEYS",
    "SUPPORTED_KEYS",
    "THROTTLED_REPLICAS_KEYS",
    "ThrottledReplicas",
    "TopicSettings",
    "config_type",
    "parse_throttled_replicas",
    "parse_topic_configs",
    "stored_throttled_replicas",
    "stored_topic_settings",
]

_LOG_KEYS = {
    "segment.bytes": "segment_bytes",
    "segment.ms": "segment_ms",
    "segment.jitter.ms": "segment_jitter_ms",
    "segment.index.bytes": "segment_index_bytes",
    "index.interval.bytes": "index_interval_bytes",
    "retention.ms": "retention_ms",
    "retention.bytes": "retention_bytes",
    "max.message.bytes": "max_message_bytes",
    "file.delete.delay.ms": "file_delete_delay_ms",
    "min.compaction.lag.ms": "min_compaction_lag_ms",
    "max.compaction.lag.ms": "max_compaction_lag_ms",
    "delete.retention.ms": "delete_retention_ms",
}
#: log settings that are not integers: key -> LogConfig field
_TEXT_LOG_KEYS = {
    "cleanup.policy": "cleanup_policy",
    "min.cleanable.dirty.ratio": "min_cleanable_dirty_ratio",
}
#: accepted, validated and stored, not acted on (module doc)
FLUSH_KEYS = ("flush.messages", "flush.ms")
_OTHER_KEYS = ("min.insync.replicas", "unclean.leader.election.enable", "compression.type")
LEADER_THROTTLED_REPLICAS = "leader.replication.throttled.replicas"
FOLLOWER_THROTTLED_REPLICAS = "follower.replication.throttled.replicas"
#: the replication-quota keys (KIP-73): topic-only, no broker-level synonym
THROTTLED_REPLICAS_KEYS = (FOLLOWER_THROTTLED_REPLICAS, LEADER_THROTTLED_REPLICAS)
SUPPORTED_KEYS = tuple(
    sorted((*_LOG_KEYS, *_TEXT_LOG_KEYS, *_OTHER_KEYS, *FLUSH_KEYS, *THROTTLED_REPLICAS_KEYS))
)
#: ``compression.type`` values (Kafka's): ``producer`` keeps the producer's codec
COMPRESSION_TYPES = ("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer")
#: keys whose value is a comma-separated list (IncrementalAlterConfigs APPEND / SUBTRACT)
LIST_KEYS = frozenset({"cleanup.policy", *THROTTLED_REPLICAS_KEYS})
_REPLICA_ITEM = re.compile(r"([0-9]+):([0-9]+)", re.ASCII)


@attrs.frozen
class ThrottledReplicas:
    """A ``*.replication.throttled.replicas`` value: every replica of the topic (``*``) or
    the (partition, broker) pairs listed; empty (the default) throttles nothing."""

    every_replica: bool = False
    replicas: frozenset[tuple[int, int]] = frozenset()

    def covers(self, partition: int, broker_id: int) -> bool:
        """Whether the replica of ``partition`` on ``broker_id`` is throttled."""
        return self.every_replica or (partition, broker_id) in self.replicas

    @property
    def is_empty(self) -> bool:
        """True when it throttles nothing."""
        return not self.every_replica and not self.replicas


def parse_throttled_replicas(key: str, value: str) -> ThrottledReplicas:
    """Kafka's rule for a throttled-replicas list: the literal ``*``, or comma-separated
    ``partition:broker`` items (blanks around items and empty items are allowed, as Kafka
    allows them); anything else is ``InvalidConfigError`` naming ``key``."""
    text = value.strip()
    if text == "*":
        return ThrottledReplicas(every_replica=True)
    pairs = set()
    for item in text.split(","):
        item = item.strip()
        if not item:
            continue
        match = _REPLICA_ITEM.fullmatch(item)
        if match is None:
            raise InvalidConfigError(
                f"{key} must be the literal '*' or a list of replicas "
                f"partition:broker,partition:broker,..., got {value!r}"
            )
        pairs.add((int(match.group(1)), int(match.group(2))))
    return ThrottledReplicas(replicas=frozenset(pairs))


@functools.lru_cache(maxsize=1024)
def stored_throttled_replicas(configs: tuple[tuple[str, str], ...], key: str) -> ThrottledReplicas:
    """The ``key`` throttled replicas of a topic's stored configs, parsed once per distinct
    value (brokers ask on every follower fetch); a value that no longer parses throttles
    nothing, as ``stored_topic_settings`` keeps defaults."""
    for name, value in configs:
        if name == key:
            try:
                return parse_throttled_replicas(key, value)
            except InvalidConfigError:
                break
    return ThrottledReplicas()


@attrs.frozen(kw_only=True)
class TopicSettings:
    """What a topic's configs set; None / empty where the topic keeps the default."""

    min_insync_replicas: int | None = None
    unclean_leader_election: bool | None = None
    #: LogConfig field name -> value, for the settings the topic overrides
    log_overrides: Mapping[str, int | float | str] = attrs.field(factory=dict)
    #: one of ``COMPRESSION_TYPES``
    compression_type: str | None = None

    def log_config(self, base: LogConfig) -> LogConfig:
        """``base`` (the broker's log settings) with this topic's overrides."""
        overrides: dict[str, Any] = dict(self.log_overrides)  # each value checked when parsed
        return attrs.evolve(base, **overrides) if overrides else base


def parse_topic_configs(
    configs: Mapping[str, str | None] | tuple[tuple[str, str], ...],
) -> TopicSettings:
    """Parse and validate; ``InvalidConfigError`` naming the bad key for anything unknown,
    malformed or out of range. A None value (Kafka's "use the default") is skipped."""
    pairs = configs.items() if isinstance(configs, Mapping) else configs
    min_isr: int | None = None
    unclean: bool | None = None
    compression: str | None = None
    log_overrides: dict[str, int | float | str] = {}
    for key, value in pairs:
        if value is None:
            continue
        if key == "min.insync.replicas":
            min_isr = _int(key, value)
            if min_isr < 1:
                raise InvalidConfigError(f"{key} must be >= 1, got {value!r}")
        elif key == "unclean.leader.election.enable":
            if value.strip().lower() not in ("true", "false"):
                raise InvalidConfigError(f"{key} must be true or false, got {value!r}")
            unclean = value.strip().lower() == "true"
        elif key == "compression.type":
            compression = value.strip().lower()
            if compression not in COMPRESSION_TYPES:
                raise InvalidConfigError(
                    f"{key} must be one of {', '.join(COMPRESSION_TYPES)}, got {value!r}"
                )
        elif key in FLUSH_KEYS:
            if _int(key, value) < 0:
                raise InvalidConfigError(f"{key} must be >= 0, got {value!r}")
        elif key in THROTTLED_REPLICAS_KEYS:
            parse_throttled_replicas(key, value)  # the brokers read it (stored_throttled_...)
        elif key == "cleanup.policy":
            log_overrides["cleanup_policy"] = normalize_cleanup_policy(value)
        elif key == "min.cleanable.dirty.ratio":
            log_overrides["min_cleanable_dirty_ratio"] = _float(key, value)
        elif key in _LOG_KEYS:
            log_overrides[_LOG_KEYS[key]] = _int(key, value)
        else:
            raise InvalidConfigError(
                f"unsupported topic config {key!r}; supported: {', '.join(SUPPORTED_KEYS)}"
            )
    if log_overrides:
        try:
            checked: dict[str, Any] = log_overrides
            LogConfig(**checked)  # the same range checks as the broker's own log settings
        except InvalidConfigError as exc:
            name = {v: k for k, v in (*_LOG_KEYS.items(), *_TEXT_LOG_KEYS.items())}
            message = str(exc)
            for field, key in name.items():
                message = message.replace(field, key)
            raise InvalidConfigError(message) from None
    return TopicSettings(
        min_insync_replicas=min_isr,
        unclean_leader_election=unclean,
        log_overrides=log_overrides,
        compression_type=compression,
    )


@functools.lru_cache(maxsize=1024)
def stored_topic_settings(configs: tuple[tuple[str, str], ...]) -> TopicSettings:
    """The settings of a topic's stored configs (``TopicAssignment.configs``), parsed once per
    distinct value: the controller asks on every election decision. They were validated when
    the topic was created; a value that no longer parses (a newer replog's key, say) keeps
    every default rather than stopping elections or leaving replicas unserved."""
    if not configs:
        return TopicSettings()
    try:
        return parse_topic_configs(configs)
    except InvalidConfigError:
        return TopicSettings()


def _int(key: str, value: str) -> int:
    try:
        return int(value.strip())
    except ValueError:
        raise InvalidConfigError(f"{key} must be an integer, got {value!r}") from None


def _float(key: str, value: str) -> float:
    try:
        return float(value.strip())
    except ValueError:
        raise InvalidConfigError(f"{key} must be a number, got {value!r}") from None


#: Kafka's ConfigType of each key (DescribeConfigs v3+): 1 boolean, 2 string, 3 int, 5 long,
#: 6 double, 7 list
CONFIG_TYPES = {
    "min.insync.replicas": 3,
    "unclean.leader.election.enable": 1,
    "cleanup.policy": 7,
    "compression.type": 2,
    "min.cleanable.dirty.ratio": 6,
    "segment.bytes": 3,
    "segment.index.bytes": 3,
    "index.interval.bytes": 3,
    "max.message.bytes": 3,
    LEADER_THROTTLED_REPLICAS: 7,
    FOLLOWER_THROTTLED_REPLICAS: 7,
}
_LONG = 5


def config_type(key: str) -> int:
    """Kafka's ConfigType id of a topic config key (DescribeConfigs v3+)."""
    return CONFIG_TYPES.get(key, _LONG)
