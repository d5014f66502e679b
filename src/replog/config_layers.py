"""Effective configs from their layers, the way Kafka resolves them (KIP-226), and the changes
AlterConfigs and IncrementalAlterConfigs make.

A topic setting's value is the first of, most specific first:

1. the topic's own config (source DYNAMIC_TOPIC_CONFIG), a topic key such as ``retention.ms``;
2. this broker's dynamic config (DYNAMIC_BROKER_CONFIG), under the setting's *broker key*,
   Kafka's synonym of the topic key (``log.retention.ms``; ``BROKER_SYNONYMS``);
3. the cluster-wide dynamic default (DYNAMIC_DEFAULT_BROKER_CONFIG), a broker key too;
4. the broker's own config file (STATIC_BROKER_CONFIG): only settings it sets to something else
   than the built-in default count as set, as Kafka counts what ``server.properties`` names;
5. the built-in default (DEFAULT_CONFIG).

Dynamic broker configs accept the broker keys of the topic settings replog honours and the
replication quotas of KIP-73 (``leader.replication.throttled.rate``,
``follower.replication.throttled.rate``: bytes/s, a long >= 0; ``DYNAMIC_BROKER_KEYS``, checked
by ``check_broker_configs``); anything else is INVALID_CONFIG naming the key. The topic-only
keys (``leader/follower.replication.throttled.replicas``) have no broker layer: unset, they
are the empty list (DEFAULT_CONFIG). ``describe_topic`` / ``describe_broker`` give DescribeConfigs'
entries: value, source, read-only flag and synonyms (every layer that holds the setting, most
specific first, as Kafka lists them). ``apply_changes`` turns a resource's stored configs and a
request's changes into the new stored configs.

Pure: no IO (the controller, which is sans-IO, uses it).
"""

from __future__ import annotations

import enum
import re
from collections.abc import Collection, Iterable, Mapping

import attrs

from replog.errors import InvalidConfigError
from replog.metadata.types import ConfigChange, ConfigOperation
from replog.topic_config import (
    FLUSH_KEYS,
    LIST_KEYS,
    SUPPORTED_KEYS,
    THROTTLED_REPLICAS_KEYS,
    TopicSettings,
    config_type,
    parse_topic_configs,
    stored_topic_settings,
)

__all__ = [
    "BROKER_SYNONYMS",
    "DYNAMIC_BROKER_KEYS",
    "REPLICATION_RATE_KEYS",
    "UNTHROTTLED_RATE",
    "ConfigLayers",
    "ConfigSource",
    "EffectiveConfig",
    "Synonym",
    "apply_changes",
    "check_broker_configs",
    "describe_broker",
    "describe_topic",
    "replication_rate",
    "topic_settings",
]


class ConfigSource(enum.IntEnum):
    """Where a value comes from (Kafka's ConfigSource ids, as DescribeConfigs sends them)."""

    DYNAMIC_TOPIC = 1
    DYNAMIC_BROKER = 2
    DYNAMIC_DEFAULT_BROKER = 3
    STATIC_BROKER = 4
    DEFAULT = 5


BROKER_SYNONYMS: Mapping[str, str] = {
    "segment.bytes": "log.segment.bytes",
    "segment.ms": "log.roll.ms",
    "segment.jitter.ms": "log.roll.jitter.ms",
    "segment.index.bytes": "log.index.size.max.bytes",
    "index.interval.bytes": "log.index.interval.bytes",
    "retention.ms": "log.retention.ms",
    "retention.bytes": "log.retention.bytes",
    "max.message.bytes": "message.max.bytes",
    "file.delete.delay.ms": "log.segment.delete.delay.ms",
    "min.insync.replicas": "min.insync.replicas",
    "unclean.leader.election.enable": "unclean.leader.election.enable",
    "cleanup.policy": "log.cleanup.policy",
    "min.cleanable.dirty.ratio": "log.cleaner.min.cleanable.ratio",
    "min.compaction.lag.ms": "log.cleaner.min.compaction.lag.ms",
    "max.compaction.lag.ms": "log.cleaner.max.compaction.lag.ms",
    "delete.retention.ms": "log.cleaner.delete.retention.ms",
    "compression.type": "compression.type",
}
"""Topic key -> the broker key that sets its default (Kafka's primary synonym)."""

_TOPIC_KEY_OF = {broker: topic for topic, broker in BROKER_SYNONYMS.items()}
REPLICATION_RATE_KEYS = ("follower.replication.throttled.rate", "leader.replication.throttled.rate")
"""The replication quotas (KIP-73), bytes/s: broker-only dynamic keys."""
UNTHROTTLED_RATE = 2**63 - 1
"""Their default (Kafka's Long.MAX_VALUE): no throttle."""
DYNAMIC_BROKER_KEYS = tuple(sorted((*_TOPIC_KEY_OF, *REPLICATION_RATE_KEYS)))
"""The broker keys a dynamic broker config may set."""
_DYNAMIC = frozenset(DYNAMIC_BROKER_KEYS)
_LIST_DEFAULTS = {"cleanup.policy": "delete", "log.cleanup.policy": "delete"}
_LONG = re.compile(r"[+-]?[0-9]+", re.ASCII)


@attrs.frozen(kw_only=True)
class ConfigLayers:
    """The layers of one resource's settings (module docstring): the topic's configs (topic
    keys; empty for a broker), then broker keys: this broker's dynamic configs, the
    cluster-wide dynamic default, the static config's settings, the built-in defaults."""

    topic: Mapping[str, str] = attrs.field(factory=dict)
    broker: Mapping[str, str] = attrs.field(factory=dict)
    cluster: Mapping[str, str] = attrs.field(factory=dict)
    static: Mapping[str, str] = attrs.field(factory=dict)
    defaults: Mapping[str, str] = attrs.field(factory=dict)

    def broker_layers(
        self, *, per_broker: bool = True
    ) -> list[tuple[ConfigSource, Mapping[str, str]]]:
        """The broker-key layers, most specific first (``per_broker`` False: the cluster
        default resource, which shows its own layer only)."""
        if not per_broker:
            return [(ConfigSource.DYNAMIC_DEFAULT_BROKER, self.cluster)]
        return [
            (ConfigSource.DYNAMIC_BROKER, self.broker),
            (ConfigSource.DYNAMIC_DEFAULT_BROKER, self.cluster),
            (ConfigSource.STATIC_BROKER, self.static),
            (ConfigSource.DEFAULT, self.defaults),
        ]


@attrs.frozen
class Synonym:
    """One layer's value of a setting (DescribeConfigs' synonyms)."""

    name: str
    value: str | None
    source: ConfigSource


@attrs.frozen
class EffectiveConfig:
    """A setting as DescribeConfigs reports it."""

    name: str
    value: str | None
    source: ConfigSource
    config_type: int
    read_only: bool
    synonyms: tuple[Synonym, ...]


def _broker_synonyms(
    layers: ConfigLayers, broker_key: str, *, per_broker: bool = True
) -> list[Synonym]:
    return [
        Synonym(broker_key, layer[broker_key], source)
        for source, layer in layers.broker_layers(per_broker=per_broker)
        if broker_key in layer
    ]


def _effective(
    name: str, synonyms: list[Synonym], kind: int, *, read_only: bool
) -> EffectiveConfig:
    first = synonyms[0] if synonyms else None
    return EffectiveConfig(
        name=name,
        value=None if first is None else first.value,
        source=ConfigSource.DEFAULT if first is None else first.source,
        config_type=kind,
        read_only=read_only,
        synonyms=tuple(synonyms),
    )


def describe_topic(layers: ConfigLayers) -> list[EffectiveConfig]:
    """Every topic setting replog honours, as it applies to the topic, sorted by key."""
    out = []
    for key in SUPPORTED_KEYS:
        if key in THROTTLED_REPLICAS_KEYS:  # topic-only: the default is the empty list
            synonyms = [Synonym(key, "", ConfigSource.DEFAULT)]
        elif key in FLUSH_KEYS:  # stored, not acted on: Kafka's default, Long.MAX_VALUE
            synonyms = [Synonym(key, str(2**63 - 1), ConfigSource.DEFAULT)]
        else:
            synonyms = _broker_synonyms(layers, BROKER_SYNONYMS[key])
        if key in layers.topic:
            synonyms.insert(0, Synonym(key, layers.topic[key], ConfigSource.DYNAMIC_TOPIC))
        out.append(_effective(key, synonyms, config_type(key), read_only=False))
    return out


def describe_broker(
    layers: ConfigLayers,
    keys: Iterable[str],
    *,
    types: Mapping[str, int],
    per_broker: bool = True,
) -> list[EffectiveConfig]:
    """The broker settings ``keys`` as they apply (``per_broker`` False: the cluster default
    resource, which lists only the settings it sets). Keys outside ``DYNAMIC_BROKER_KEYS`` are
    read-only; ``types`` gives each key's ConfigType id (default STRING)."""
    out = []
    for key in sorted(keys):
        synonyms = _broker_synonyms(layers, key, per_broker=per_broker)
        if per_broker or synonyms:
            read_only = key not in _DYNAMIC
            out.append(_effective(key, synonyms, types.get(key, 2), read_only=read_only))
    return out


def topic_settings(layers: ConfigLayers) -> TopicSettings:
    """A topic's settings with every explicit layer applied (the built-in defaults are the
    ``TopicSettings`` fields left None and the ``LogConfig`` defaults)."""
    merged: dict[str, str] = {}
    for source, layer in reversed(layers.broker_layers()):
        if source is not ConfigSource.DEFAULT:
            merged.update(
                (_TOPIC_KEY_OF[key], value) for key, value in layer.items() if key in _TOPIC_KEY_OF
            )
    merged.update((k, v) for k, v in layers.topic.items() if k in BROKER_SYNONYMS)
    return stored_topic_settings(tuple(sorted(merged.items())))


def check_broker_configs(configs: Mapping[str, str]) -> None:
    """``InvalidConfigError`` naming the key unless ``configs`` are dynamic broker configs
    replog honours, each valid (the same checks as the topic setting they stand for)."""
    as_topic: dict[str, str] = {}
    for key, value in configs.items():
        if key in REPLICATION_RATE_KEYS:
            _check_rate(key, value)
            continue
        topic_key = _TOPIC_KEY_OF.get(key)
        if topic_key is None:
            raise InvalidConfigError(
                f"broker config {key!r} cannot be set dynamically; "
                f"supported: {', '.join(DYNAMIC_BROKER_KEYS)}"
            )
        try:
            parse_topic_configs({topic_key: value})
        except InvalidConfigError as exc:
            raise InvalidConfigError(f"{key}: {exc}") from None
        as_topic[topic_key] = value
    try:
        parse_topic_configs(as_topic)
    except InvalidConfigError as exc:
        raise InvalidConfigError(f"broker configs {sorted(configs)}: {exc}") from None


def _check_rate(key: str, value: str) -> None:
    """A Java long (optional sign, ASCII digits) >= 0."""
    if _LONG.fullmatch(value.strip()) is None:
        raise InvalidConfigError(f"{key} must be an integer (bytes/s), got {value!r}")
    if not 0 <= int(value.strip()) <= UNTHROTTLED_RATE:
        raise InvalidConfigError(f"{key} must be >= 0 and a long (bytes/s), got {value!r}")


def replication_rate(layers: Mapping[str, str], key: str) -> int:
    """A replication quota (``REPLICATION_RATE_KEYS``) from a broker's dynamic configs;
    ``UNTHROTTLED_RATE`` when unset (or, which the checks prevent, not a valid rate)."""
    value = layers.get(key)
    if value is None:
        return UNTHROTTLED_RATE
    try:
        _check_rate(key, value)
    except InvalidConfigError:
        return UNTHROTTLED_RATE
    return int(value.strip())


def apply_changes(
    current: Mapping[str, str],
    changes: Iterable[ConfigChange],
    *,
    replace: bool,
    list_keys: Collection[str] = LIST_KEYS | {"log.cleanup.policy"},
) -> dict[str, str]:
    """The stored configs after ``changes`` (in order). ``replace`` (AlterConfigs): the result
    is exactly the keys SET with a value. Otherwise SET / DELETE a key, APPEND / SUBTRACT a
    list key's comma-separated items (starting from its default when unset).
    ``InvalidConfigError`` naming the key for an operation the key does not take."""
    result: dict[str, str] = {} if replace else dict(current)
    for change in changes:
        operation, key, value = change.operation, change.key, change.value
        if operation is ConfigOperation.SET:
            if value is None:
                if not replace:
                    raise InvalidConfigError(f"{key}: SET needs a value")
                continue
            result[key] = value
        elif operation is ConfigOperation.DELETE:
            result.pop(key, None)
        elif operation in (ConfigOperation.APPEND, ConfigOperation.SUBTRACT):
            if key not in list_keys:
                raise InvalidConfigError(f"{key}: APPEND and SUBTRACT apply to list configs only")
            items = _items(result.get(key, _LIST_DEFAULTS.get(key, "")))
            given = _items(value or "")
            if operation is ConfigOperation.APPEND:
                items += [item for item in given if item not in items]
            else:
                items = [item for item in items if item not in given]
            result[key] = ",".join(items)
    return result


def _items(value: str) -> list[str]:
    return [item.strip() for item in value.split(",") if item.strip()]
