"""Config layers: a topic setting's value and source (topic, dynamic broker, dynamic cluster
default, static broker config, default), the synonyms DescribeConfigs lists, the dynamic broker
keys accepted, and the changes AlterConfigs / IncrementalAlterConfigs make."""

from __future__ import annotations

import pytest

from replog.config_layers import (
    UNTHROTTLED_RATE,
    ConfigLayers,
    ConfigSource,
    Synonym,
    apply_changes,
    check_broker_configs,
    describe_broker,
    describe_topic,
    replication_rate,
    topic_settings,
)
from replog.errors import InvalidConfigError
from replog.log.config import LogConfig
from replog.metadata.types import ConfigChange, ConfigOperation

LAYERS = ConfigLayers(
    topic={"retention.ms": "1"},
    broker={"log.retention.ms": "2", "log.segment.bytes": "2048"},
    cluster={"log.retention.ms": "3", "log.segment.bytes": "3072", "compression.type": "lz4"},
    static={"min.insync.replicas": "2"},
    defaults={"log.retention.ms": "604800000", "min.insync.replicas": "1"},
)


def test_the_most_specific_layer_wins_and_names_its_source() -> None:
    entries = {e.name: e for e in describe_topic(LAYERS)}
    assert (entries["retention.ms"].value, entries["retention.ms"].source) == (
        "1",
        ConfigSource.DYNAMIC_TOPIC,
    )
    assert entries["retention.ms"].synonyms == (
        Synonym("retention.ms", "1", ConfigSource.DYNAMIC_TOPIC),
        Synonym("log.retention.ms", "2", ConfigSource.DYNAMIC_BROKER),
        Synonym("log.retention.ms", "3", ConfigSource.DYNAMIC_DEFAULT_BROKER),
        Synonym("log.retention.ms", "604800000", ConfigSource.DEFAULT),
    )
    assert (entries["segment.bytes"].value, entries["segment.bytes"].source) == (
        "2048",
        ConfigSource.DYNAMIC_BROKER,
    )
    assert entries["compression.type"].source is ConfigSource.DYNAMIC_DEFAULT_BROKER
    assert entries["min.insync.replicas"].source is ConfigSource.STATIC_BROKER
    assert entries["cleanup.policy"].source is ConfigSource.DEFAULT
    assert not any(e.read_only for e in entries.values())


def test_topic_settings_apply_every_explicit_layer() -> None:
    settings = topic_settings(LAYERS)
    log = settings.log_config(LogConfig())
    assert (log.retention_ms, log.segment_bytes) == (1, 2048)
    assert settings.compression_type == "lz4"
    assert settings.min_insync_replicas == 2
    assert topic_settings(ConfigLayers()).log_config(LogConfig()) == LogConfig()


def test_a_broker_resource_lists_its_keys_and_the_cluster_default_only_its_own() -> None:
    keys = ["log.retention.ms", "log.segment.bytes", "broker.id", "compression.type"]
    layers = ConfigLayers(
        broker=LAYERS.broker, cluster=LAYERS.cluster, static={"broker.id": "7"}, defaults={}
    )
    per_broker = {e.name: e for e in describe_broker(layers, keys, types={"broker.id": 3})}
    assert per_broker["log.retention.ms"].source is ConfigSource.DYNAMIC_BROKER
    assert per_broker["compression.type"].source is ConfigSource.DYNAMIC_DEFAULT_BROKER
    assert (per_broker["broker.id"].value, per_broker["broker.id"].read_only) == ("7", True)
    assert per_broker["broker.id"].config_type == 3
    assert not per_broker["log.retention.ms"].read_only
    cluster = describe_broker(layers, keys, types={}, per_broker=False)
    assert [(e.name, e.value, e.source) for e in cluster] == [
        ("compression.type", "lz4", ConfigSource.DYNAMIC_DEFAULT_BROKER),
        ("log.retention.ms", "3", ConfigSource.DYNAMIC_DEFAULT_BROKER),
        ("log.segment.bytes", "3072", ConfigSource.DYNAMIC_DEFAULT_BROKER),
    ]


@pytest.mark.parametrize(
    ("configs", "message"),
    [
        ({"num.partitions": "3"}, "'num.partitions' cannot be set dynamically"),
        ({"retention.ms": "1"}, "'retention.ms' cannot be set dynamically"),  # a topic key
        ({"log.retention.ms": "soon"}, "log.retention.ms: retention.ms must be an integer"),
        ({"compression.type": "brotli"}, "compression.type: compression.type must be one of"),
        (
            {"log.roll.ms": "10", "log.roll.jitter.ms": "20"},
            r"log.roll.jitter.ms.*must be < segment.ms",
        ),
        ({"leader.replication.throttled.rate": "-1"}, r"leader\.replication.* must be >= 0"),
        ({"follower.replication.throttled.rate": "fast"}, r"follower\.replication.* integer"),
        ({"follower.replication.throttled.rate": "1_000"}, r"follower\.replication.* integer"),
        ({"leader.replication.throttled.rate": str(2**63)}, r"must be >= 0 and a long"),
    ],
)
def test_dynamic_broker_configs_replog_would_not_honour_are_refused(
    configs: dict[str, str], message: str
) -> None:
    with pytest.raises(InvalidConfigError, match=message):
        check_broker_configs(configs)


def test_dynamic_broker_configs_replog_honours_pass() -> None:
    check_broker_configs(
        {
            "log.retention.ms": "1000",
            "message.max.bytes": "2000",
            "min.insync.replicas": "2",
            "unclean.leader.election.enable": "true",
            "compression.type": "zstd",
            "log.cleanup.policy": "delete",
            "leader.replication.throttled.rate": "0",
            "follower.replication.throttled.rate": str(2**63 - 1),
        }
    )


def test_replication_rates_are_dynamic_broker_keys_unthrottled_by_default() -> None:
    layers = ConfigLayers(broker={"leader.replication.throttled.rate": "1000"})
    keys = ["leader.replication.throttled.rate", "follower.replication.throttled.rate"]
    entries = {e.name: e for e in describe_broker(layers, keys, types={})}
    assert entries["leader.replication.throttled.rate"].value == "1000"
    assert not entries["leader.replication.throttled.rate"].read_only
    assert not entries["follower.replication.throttled.rate"].read_only
    assert replication_rate(layers.broker, "leader.replication.throttled.rate") == 1000
    assert replication_rate({}, "follower.replication.throttled.rate") == UNTHROTTLED_RATE


def test_throttled_replicas_are_topic_only_keys_defaulting_to_the_empty_list() -> None:
    layers = ConfigLayers(topic={"leader.replication.throttled.replicas": "0:1"})
    entries = {e.name: e for e in describe_topic(layers)}
    leader = entries["leader.replication.throttled.replicas"]
    assert (leader.value, leader.source, leader.config_type) == (
        "0:1",
        ConfigSource.DYNAMIC_TOPIC,
        7,
    )
    follower = entries["follower.replication.throttled.replicas"]
    assert (follower.value, follower.source) == ("", ConfigSource.DEFAULT)
    append = [_change(ConfigOperation.APPEND, "leader.replication.throttled.replicas", "1:2")]
    assert apply_changes(layers.topic, append, replace=False) == {
        "leader.replication.throttled.replicas": "0:1,1:2"
    }


def _change(op: ConfigOperation, key: str, value: str | None = None) -> ConfigChange:
    return ConfigChange(operation=op, key=key, value=value)


def test_incremental_changes_set_delete_append_and_subtract() -> None:
    current = {"retention.ms": "1", "segment.bytes": "2048"}
    changes = [
        _change(ConfigOperation.SET, "retention.ms", "5"),
        _change(ConfigOperation.DELETE, "segment.bytes"),
        _change(ConfigOperation.DELETE, "never.set"),
        _change(ConfigOperation.APPEND, "cleanup.policy", "compact,delete"),
    ]
    assert apply_changes(current, changes, replace=False) == {
        "retention.ms": "5",
        "cleanup.policy": "delete,compact",  # appended to the default, no duplicate
    }
    subtract = [_change(ConfigOperation.SUBTRACT, "cleanup.policy", "delete")]
    assert apply_changes({"cleanup.policy": "delete,compact"}, subtract, replace=False) == {
        "cleanup.policy": "compact"
    }
    assert current == {"retention.ms": "1", "segment.bytes": "2048"}  # not changed in place


def test_replace_keeps_exactly_the_keys_set() -> None:
    changes = [
        _change(ConfigOperation.SET, "retention.ms", "5"),
        _change(ConfigOperation.SET, "segment.bytes", None),  # a null value: the default
    ]
    assert apply_changes({"min.insync.replicas": "2"}, changes, replace=True) == {
        "retention.ms": "5"
    }


def test_list_operations_on_a_scalar_key_are_refused_naming_it() -> None:
    with pytest.raises(InvalidConfigError, match=r"retention\.ms"):
        apply_changes({}, [_change(ConfigOperation.APPEND, "retention.ms", "1")], replace=False)
    with pytest.raises(InvalidConfigError, match=r"retention\.ms"):
        apply_changes({}, [_change(ConfigOperation.SET, "retention.ms", None)], replace=False)
