"""Per-topic configs: what is honoured, what is refused (never silently ignored), and how the
controller's election policy reads them."""

from __future__ import annotations

import pytest

from replog.election.controller import ControllerConfig, TopicPolicy
from replog.errors import InvalidConfigError
from replog.log import LogConfig
from replog.topic_config import (
    SUPPORTED_KEYS,
    parse_throttled_replicas,
    parse_topic_configs,
    stored_throttled_replicas,
)


def test_honoured_settings_are_parsed() -> None:
    settings = parse_topic_configs(
        {
            "min.insync.replicas": "2",
            "unclean.leader.election.enable": "TRUE",
            "retention.ms": "60000",
            "segment.bytes": "1048576",
            "cleanup.policy": "delete",
            "compression.type": "ZSTD",
        }
    )
    assert settings.min_insync_replicas == 2
    assert settings.compression_type == "zstd"
    assert settings.unclean_leader_election is True
    log = settings.log_config(LogConfig(retention_bytes=5_000))
    assert (log.retention_ms, log.segment_bytes, log.retention_bytes) == (60_000, 1 << 20, 5_000)
    assert parse_topic_configs({}).log_config(LogConfig()) == LogConfig()


@pytest.mark.parametrize(
    ("configs", "message"),
    [
        ({"message.format.version": "3.0"}, "unsupported topic config 'message.format.version'"),
        ({"compression.type": "brotli"}, "compression.type must be one of"),
        ({"min.insync.replicas": "two"}, "min.insync.replicas must be an integer"),
        ({"min.insync.replicas": "0"}, "min.insync.replicas must be >= 1"),
        ({"unclean.leader.election.enable": "yes"}, "must be true or false"),
        ({"cleanup.policy": "purge"}, "cleanup.policy must be delete, compact or"),
        ({"min.cleanable.dirty.ratio": "1.5"}, "min.cleanable.dirty.ratio must be a number in"),
        ({"min.compaction.lag.ms": "9", "max.compaction.lag.ms": "8"}, "must be <= max.compaction"),
        ({"segment.bytes": "10"}, "segment.bytes must be >= 14"),
        ({"retention.ms": "-7"}, "retention.ms must be -1"),
        ({"flush.ms": "-1"}, "flush.ms must be >= 0"),
        ({"flush.messages": "often"}, "flush.messages must be an integer"),
    ],
)
def test_anything_replog_would_not_honour_is_refused(configs: dict[str, str], message: str) -> None:
    with pytest.raises(InvalidConfigError, match=message):
        parse_topic_configs(configs)


def test_stored_configs_override_the_controller_defaults() -> None:
    config = ControllerConfig(
        default_topic_policy=TopicPolicy(min_insync_replicas=1, unclean_leader_election=False),
        topic_policies={"named": TopicPolicy(min_insync_replicas=3)},
    )
    assert config.policy_for("plain").min_isr == 1
    assert config.policy_for("named").min_isr == 3
    policy = config.policy_for(
        "plain", (("min.insync.replicas", "2"), ("unclean.leader.election.enable", "true"))
    )
    assert (policy.min_isr, policy.unclean_allowed) == (2, True)
    assert config.policy_for("named", (("min.insync.replicas", "2"),)).min_isr == 2
    # A stored value that no longer parses keeps the defaults instead of stopping elections.
    assert config.policy_for("plain", (("min.insync.replicas", "x"),)).min_isr == 1


def test_compaction_settings_are_parsed() -> None:
    settings = parse_topic_configs(
        {
            "cleanup.policy": "delete, Compact",
            "min.cleanable.dirty.ratio": "0.25",
            "min.compaction.lag.ms": "100",
            "max.compaction.lag.ms": "60000",
            "delete.retention.ms": "500",
        }
    )
    log = settings.log_config(LogConfig())
    assert log.cleanup_policy == "compact,delete" and log.compact and log.delete
    assert (log.min_cleanable_dirty_ratio, log.delete_retention_ms) == (0.25, 500)
    assert (log.min_compaction_lag_ms, log.max_compaction_lag_ms) == (100, 60_000)
    compact_only = parse_topic_configs({"cleanup.policy": "compact"}).log_config(LogConfig())
    assert compact_only.compact and not compact_only.delete
    assert LogConfig().cleanup_policy == "delete" and not LogConfig().compact


def test_throttled_replicas_are_a_star_or_partition_broker_pairs() -> None:
    key = "leader.replication.throttled.replicas"
    every = parse_throttled_replicas(key, " * ")
    assert every.covers(0, 1) and every.covers(7, 99)
    listed = parse_throttled_replicas(key, "0:1, 0:2,,1:3 ")  # Kafka allows blanks and empties
    assert listed.replicas == {(0, 1), (0, 2), (1, 3)}
    assert listed.covers(0, 2) and not listed.covers(1, 2) and not listed.covers(0, 3)
    assert parse_throttled_replicas(key, "").is_empty
    settings = {key: "*", "follower.replication.throttled.replicas": "0:3"}
    parse_topic_configs(settings)  # both keys are honoured topic configs


@pytest.mark.parametrize(
    "value", ["0-1", "0:1,2", "a:1", "*,0:1", "0:1:2", "-1:2", "0:-2", "0 : 1", "**", "٣:1"]
)
def test_a_malformed_throttled_replicas_list_is_refused(value: str) -> None:
    key = "follower.replication.throttled.replicas"
    with pytest.raises(InvalidConfigError, match=r"follower\.replication\.throttled\.replicas"):
        parse_topic_configs({key: value})


def test_stored_throttled_replicas_are_read_by_key() -> None:
    stored = (
        ("follower.replication.throttled.replicas", "0:3"),
        ("leader.replication.throttled.replicas", "0:1,0:2"),
        ("retention.ms", "5"),
    )
    leaders = stored_throttled_replicas(stored, "leader.replication.throttled.replicas")
    assert leaders.replicas == {(0, 1), (0, 2)}
    followers = stored_throttled_replicas(stored, "follower.replication.throttled.replicas")
    assert followers.replicas == {(0, 3)}
    assert stored_throttled_replicas((), "leader.replication.throttled.replicas").is_empty


def test_kafkas_flush_settings_are_accepted_and_change_no_log_setting() -> None:
    settings = parse_topic_configs({"flush.ms": "1000", "flush.messages": "9223372036854775807"})
    assert settings.log_overrides == {}
    assert {"flush.ms", "flush.messages"} <= set(SUPPORTED_KEYS)
