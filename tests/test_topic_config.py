"""Per-topic configs: what is honoured, what is refused (never silently ignored), and how the
controller's election policy reads them."""

from __future__ import annotations

import pytest

from replog.election.controller import ControllerConfig, TopicPolicy
from replog.errors import InvalidConfigError
from replog.log import LogConfig
from replog.topic_config import parse_topic_configs


def test_honoured_settings_are_parsed() -> None:
    settings = parse_topic_configs(
        {
            "min.insync.replicas": "2",
            "unclean.leader.election.enable": "TRUE",
            "retention.ms": "60000",
            "segment.bytes": "1048576",
            "cleanup.policy": "delete",
        }
    )
    assert settings.min_insync_replicas == 2
    assert settings.unclean_leader_election is True
    log = settings.log_config(LogConfig(retention_bytes=5_000))
    assert (log.retention_ms, log.segment_bytes, log.retention_bytes) == (60_000, 1 << 20, 5_000)
    assert parse_topic_configs({}).log_config(LogConfig()) == LogConfig()


@pytest.mark.parametrize(
    ("configs", "message"),
    [
        ({"compression.type": "zstd"}, "unsupported topic config 'compression.type'"),
        ({"min.insync.replicas": "two"}, "min.insync.replicas must be an integer"),
        ({"min.insync.replicas": "0"}, "min.insync.replicas must be >= 1"),
        ({"unclean.leader.election.enable": "yes"}, "must be true or false"),
        ({"cleanup.policy": "purge"}, "cleanup.policy must be delete, compact or"),
        ({"min.cleanable.dirty.ratio": "1.5"}, "min.cleanable.dirty.ratio must be a number in"),
        ({"min.compaction.lag.ms": "9", "max.compaction.lag.ms": "8"}, "must be <= max.compaction"),
        ({"segment.bytes": "10"}, "segment.bytes must be >= 14"),
        ({"retention.ms": "-7"}, "retention.ms must be -1"),
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
