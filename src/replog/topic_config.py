"""Per-topic configs: the Kafka topic settings replog honours, parsed and validated in one place.

A topic's configs are given at creation (CreateTopics ``configs``, ``Admin.create_topics``)
and stored with the topic in the coordinator, so every broker and every controller reads the
same values. Honoured:

- ``min.insync.replicas``: the ISR size an ``acks=all`` produce needs (brokers) and the ELR
  rules (controller);
- ``unclean.leader.election.enable``: whether the controller may elect an out-of-sync replica;
- log settings, each overriding the broker's ``log`` table for this topic: ``segment.bytes``,
  ``segment.ms``, ``segment.jitter.ms``, ``segment.index.bytes``, ``index.interval.bytes``,
  ``retention.ms``, ``retention.bytes``, ``max.message.bytes``, ``file.delete.delay.ms``;
- ``cleanup.policy``: ``delete`` only (replog does not compact).

Anything else is refused with ``InvalidConfigError`` (the broker answers INVALID_CONFIG), never
accepted and silently ignored. Pure: no IO (the controller, which is sans-IO, uses it).
"""

from __future__ import annotations

import enum
import functools
from collections.abc import Mapping

import attrs

from replog.errors import InvalidConfigError
from replog.log.config import LogConfig

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
}
_OTHER_KEYS = ("min.insync.replicas", "unclean.leader.election.enable", "cleanup.policy")
SUPPORTED_KEYS = tuple(sorted((*_LOG_KEYS, *_OTHER_KEYS)))


@attrs.frozen(kw_only=True)
class TopicSettings:
    """What a topic's configs set; None / empty where the topic keeps the default."""

    min_insync_replicas: int | None = None
    unclean_leader_election: bool | None = None
    #: LogConfig field name -> value, for the settings the topic overrides
    log_overrides: Mapping[str, int] = attrs.field(factory=dict)

    def log_config(self, base: LogConfig) -> LogConfig:
        """``base`` (the broker's log settings) with this topic's overrides."""
        return attrs.evolve(base, **self.log_overrides) if self.log_overrides else base


def parse_topic_configs(
    configs: Mapping[str, str | None] | tuple[tuple[str, str], ...],
) -> TopicSettings:
    """Parse and validate; ``InvalidConfigError`` naming the bad key for anything unknown,
    malformed or out of range. A None value (Kafka's "use the default") is skipped."""
    pairs = configs.items() if isinstance(configs, Mapping) else configs
    min_isr: int | None = None
    unclean: bool | None = None
    log_overrides: dict[str, int] = {}
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
            if value.strip().lower() != "delete":
                raise InvalidConfigError(
                    f"cleanup.policy {value!r} is not supported: replog only deletes old segments"
                )
        elif key in _LOG_KEYS:
            log_overrides[_LOG_KEYS[key]] = _int(key, value)
        else:
            raise InvalidConfigError(
                f"unsupported topic config {key!r}; supported: {', '.join(SUPPORTED_KEYS)}"
            )
    if log_overrides:
        try:
            LogConfig(**log_overrides)  # the same range checks as the broker's own log settings
        except InvalidConfigError as exc:
            name = {v: k for k, v in _LOG_KEYS.items()}
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


#: Kafka's ConfigType of each key (DescribeConfigs v3+): 1 boolean, 3 int, 5 long, 7 list
CONFIG_TYPES = {
    "min.insync.replicas": 3,
    "unclean.leader.election.enable": 1,
    "cleanup.policy": 7,
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
        "cleanup.policy": ("delete", ConfigSource.DEFAULT),
        **{
            key: (str(getattr(log_defaults, field)), ConfigSource.BROKER)
            for key, field in _LOG_KEYS.items()
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
