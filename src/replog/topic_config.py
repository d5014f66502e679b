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
  ``delete.retention.ms``.

Anything else is refused with ``InvalidConfigError`` (the broker answers INVALID_CONFIG), never
accepted and silently ignored. Pure: no IO (the controller, which is sans-IO, uses it).
"""

from __future__ import annotations

import enum
import functools
from collections.abc import Mapping
from typing import Any

import attrs

from replog.errors import InvalidConfigError
from replog.log.config import LogConfig, normalize_cleanup_policy

__all__ = [
    "SUPPORTED_KEYS",
    "ConfigSource",
    "EffectiveConfig",
    "TopicSettings",
    "effective_topic_configs",
    "parse_topic_configs",
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
#: log settings that are not integers: key -> (LogConfig field, parser)
_TEXT_LOG_KEYS = {
    "cleanup.policy": "cleanup_policy",
    "min.cleanable.dirty.ratio": "min_cleanable_dirty_ratio",
}
_OTHER_KEYS = ("min.insync.replicas", "unclean.leader.election.enable")
SUPPORTED_KEYS = tuple(sorted((*_LOG_KEYS, *_TEXT_LOG_KEYS, *_OTHER_KEYS)))


@attrs.frozen(kw_only=True)
class TopicSettings:
    """What a topic's configs set; None / empty where the topic keeps the default."""

    min_insync_replicas: int | None = None
    unclean_leader_election: bool | None = None
    #: LogConfig field name -> value, for the settings the topic overrides
    log_overrides: Mapping[str, int | float | str] = attrs.field(factory=dict)

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
        min_insync_replicas=min_isr, unclean_leader_election=unclean, log_overrides=log_overrides
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


#: Kafka's ConfigType of each key (DescribeConfigs v3+): 1 boolean, 3 int, 5 long, 6 double,
#: 7 list
CONFIG_TYPES = {
    "min.insync.replicas": 3,
    "unclean.leader.election.enable": 1,
    "cleanup.policy": 7,
    "min.cleanable.dirty.ratio": 6,
    "segment.bytes": 3,
    "segment.index.bytes": 3,
    "index.interval.bytes": 3,
    "max.message.bytes": 3,
}
_LONG = 5


class ConfigSource(enum.Enum):
    """Where an effective value comes from."""

    TOPIC = "topic"  # set on the topic
    BROKER = "broker"  # the broker's config (its log table, its default min ISR)
    DEFAULT = "default"  # built into replog


@attrs.frozen
class EffectiveConfig:
    """A topic setting as it applies: its value and where it comes from."""

    name: str
    value: str
    source: ConfigSource
    config_type: int


def effective_topic_configs(
    stored: Mapping[str, str],
    *,
    log_defaults: LogConfig,
    min_insync_replicas: int,
    unclean_leader_election: bool = False,
) -> list[EffectiveConfig]:
    """Every supported key with the value that applies to a topic whose stored configs are
    ``stored`` on a broker with these defaults, sorted by key."""
    defaults = {
        "min.insync.replicas": (str(min_insync_replicas), ConfigSource.BROKER),
        "unclean.leader.election.enable": (
            "true" if unclean_leader_election else "false",
            ConfigSource.DEFAULT,
        ),
        **{
            key: (str(getattr(log_defaults, field)), ConfigSource.BROKER)
            for key, field in (*_LOG_KEYS.items(), *_TEXT_LOG_KEYS.items())
        },
    }
    return [
        EffectiveConfig(
            name=key,
            value=stored[key] if key in stored else defaults[key][0],
            source=ConfigSource.TOPIC if key in stored else defaults[key][1],
            config_type=CONFIG_TYPES.get(key, _LONG),
        )
        for key in SUPPORTED_KEYS
    ]
