"""A broker's settings under Kafka's broker keys, for DescribeConfigs and the config layers
(``replog.config_layers``): what its ``BrokerConfig`` sets (the STATIC_BROKER_CONFIG layer),
the built-in defaults (DEFAULT_CONFIG), and each key's Kafka ConfigType.

Kafka counts a static setting as set when ``server.properties`` names it; a ``BrokerConfig``
does not remember which fields its file named, so a setting counts as set when it differs from
the built-in default (``broker.id`` and ``log.dirs``, which every broker must set, always do).
Keys outside ``replog.config_layers.DYNAMIC_BROKER_KEYS`` are read-only, as in Kafka.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping

from replog.broker.config import BrokerConfig
from replog.config_layers import UNTHROTTLED_RATE, ConfigLayers
from replog.metadata.types import ALL_BROKERS, TopicConfigs

__all__ = ["BROKER_CONFIG_TYPES", "BROKER_KEYS", "broker_layers", "broker_values"]

_BOOLEAN, _STRING, _INT, _LONG, _DOUBLE, _LIST = 1, 2, 3, 5, 6, 7


def _text(value: object) -> str | None:
    if value is None:
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


_VALUES: dict[str, tuple[int, Callable[[BrokerConfig], object]]] = {
    # read-only: they take effect at start-up only
    "broker.id": (_INT, lambda c: c.broker_id),
    "broker.rack": (_STRING, lambda c: c.rack),
    "log.dirs": (_STRING, lambda c: ",".join(c.log_dirs)),
    "num.partitions": (_INT, lambda c: c.default_partition_count),
    "default.replication.factor": (_INT, lambda c: c.default_replication_factor),
    "auto.create.topics.enable": (_BOOLEAN, lambda c: c.auto_create_topics_enable),
    "log.retention.check.interval.ms": (_LONG, lambda c: c.retention_check_interval_ms),
    "replica.lag.time.max.ms": (_LONG, lambda c: c.replica_lag_ms_max),
    "replica.fetch.max.bytes": (_INT, lambda c: c.replica_fetch_bytes_max),
    "replica.fetch.min.bytes": (_INT, lambda c: c.replica_fetch_min_bytes),
    "replica.fetch.wait.max.ms": (_INT, lambda c: c.replica_fetch_wait_ms_max),
    "auto.leader.rebalance.enable": (_BOOLEAN, lambda c: c.auto_leader_rebalance_enable),
    "leader.imbalance.per.broker.percentage": (
        _INT,
        lambda c: c.leader_imbalance_per_broker_percentage,
    ),
    "leader.imbalance.check.interval.seconds": (
        _LONG,
        lambda c: c.leader_imbalance_check_interval_ms // 1000,
    ),
    "replication.quota.window.num": (_INT, lambda c: c.replication_quota_window_count),
    "replication.quota.window.size.seconds": (
        _INT,
        lambda c: c.replication_quota_window_ms // 1000,
    ),
    # dynamic: the replication quotas (KIP-73; replog.broker.driver.replication_throttle)
    "leader.replication.throttled.rate": (_LONG, lambda c: UNTHROTTLED_RATE),
    "follower.replication.throttled.rate": (_LONG, lambda c: UNTHROTTLED_RATE),
    # dynamic: the broker-level defaults of topic settings (config_layers.BROKER_SYNONYMS)
    "log.segment.bytes": (_INT, lambda c: c.log.segment_bytes),
    "log.roll.ms": (_LONG, lambda c: c.log.segment_ms),
    "log.roll.jitter.ms": (_LONG, lambda c: c.log.segment_jitter_ms),
    "log.index.size.max.bytes": (_INT, lambda c: c.log.segment_index_bytes),
    "log.index.interval.bytes": (_INT, lambda c: c.log.index_interval_bytes),
    "log.retention.ms": (_LONG, lambda c: c.log.retention_ms),
    "log.retention.bytes": (_LONG, lambda c: c.log.retention_bytes),
    "message.max.bytes": (_INT, lambda c: c.log.max_message_bytes),
    "log.segment.delete.delay.ms": (_LONG, lambda c: c.log.file_delete_delay_ms),
    "min.insync.replicas": (_INT, lambda c: c.default_min_insync_replicas),
    "unclean.leader.election.enable": (_BOOLEAN, lambda c: c.unclean_leader_election_enable),
    "log.cleanup.policy": (_LIST, lambda c: c.log.cleanup_policy),
    "log.cleaner.min.cleanable.ratio": (_DOUBLE, lambda c: c.log.min_cleanable_dirty_ratio),
    "log.cleaner.min.compaction.lag.ms": (_LONG, lambda c: c.log.min_compaction_lag_ms),
    "log.cleaner.max.compaction.lag.ms": (_LONG, lambda c: c.log.max_compaction_lag_ms),
    "log.cleaner.delete.retention.ms": (_LONG, lambda c: c.log.delete_retention_ms),
    "compression.type": (_STRING, lambda c: "producer"),
}

BROKER_KEYS = tuple(sorted(_VALUES))
"""The keys DescribeConfigs lists for a broker."""
BROKER_CONFIG_TYPES: Mapping[str, int] = {key: kind for key, (kind, _) in _VALUES.items()}
_ALWAYS_SET = frozenset({"broker.id", "log.dirs"})


def broker_values(config: BrokerConfig) -> dict[str, str]:
    """Every ``BROKER_KEYS`` value of ``config`` (unset ones, such as no rack, left out)."""
    out = {}
    for key, (_, read) in _VALUES.items():
        value = _text(read(config))
        if value is not None:
            out[key] = value
    return out


@functools.lru_cache(maxsize=1)
def _defaults() -> dict[str, str]:
    return broker_values(BrokerConfig(broker_id=0, log_dirs=("-",)))


def broker_layers(
    config: BrokerConfig,
    broker_configs: Mapping[int, TopicConfigs],
    topic_configs: Mapping[str, str] | None = None,
) -> ConfigLayers:
    """The layers of this broker's settings (or, given ``topic_configs``, of a topic's) with
    the dynamic configs ``broker_configs`` (by broker id, ``ALL_BROKERS`` the cluster's)."""
    defaults = _defaults()
    static = {
        key: value
        for key, value in broker_values(config).items()
        if key in _ALWAYS_SET or defaults.get(key) != value
    }
    return ConfigLayers(
        topic=dict(topic_configs or {}),
        broker=dict(broker_configs.get(config.broker_id, ())),
        cluster=dict(broker_configs.get(ALL_BROKERS, ())),
        static=static,
        defaults={k: v for k, v in defaults.items() if k not in _ALWAYS_SET},
    )
