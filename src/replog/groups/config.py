"""The group coordinator's settings, with Kafka's names and defaults.

| field                                | Kafka setting                           | default        |
|--------------------------------------|-----------------------------------------|----------------|
| ``session_timeout_ms_min``           | group.min.session.timeout.ms            | 6 000          |
| ``session_timeout_ms_max``           | group.max.session.timeout.ms            | 1 800 000      |
| ``group_size_max``                   | group.max.size                          | 2**31 - 1      |
| ``initial_rebalance_delay_ms``       | group.initial.rebalance.delay.ms        | 3 000          |
| ``new_member_join_timeout_ms``       | (GroupCoordinator.NewMemberJoinTimeout) | 300 000        |
| ``offsets_retention_ms``             | offsets.retention.minutes               | 7 days         |
| ``offsets_retention_check_interval_ms`` | offsets.retention.check.interval.ms  | 600 000        |
| ``offset_metadata_length_max``       | offset.metadata.max.bytes               | 4 096          |
| ``offsets_topic_partitions``         | offsets.topic.num.partitions            | 50             |

``offset_metadata_length_max`` counts what Kafka counts despite the setting's name: the commit
metadata's Java ``String.length()``, i.e. UTF-16 code units.
"""

from __future__ import annotations

import attrs

from replog.errors import InvalidConfigError
from replog.groups.partitioning import OFFSETS_TOPIC_PARTITIONS_DEFAULT

__all__ = ["GroupConfig"]

_MINUTE_MS = 60_000


@attrs.frozen(kw_only=True)
class GroupConfig:
    """Settings of the group coordinator (see the module table)."""

    session_timeout_ms_min: int = 6_000
    session_timeout_ms_max: int = 30 * _MINUTE_MS
    group_size_max: int = 2**31 - 1
    initial_rebalance_delay_ms: int = 3_000
    new_member_join_timeout_ms: int = 5 * _MINUTE_MS
    offsets_retention_ms: int = 7 * 24 * 60 * _MINUTE_MS
    offsets_retention_check_interval_ms: int = 10 * _MINUTE_MS
    offset_metadata_length_max: int = 4096
    offsets_topic_partitions: int = OFFSETS_TOPIC_PARTITIONS_DEFAULT

    def __attrs_post_init__(self) -> None:
        if not 0 < self.session_timeout_ms_min <= self.session_timeout_ms_max:
            raise InvalidConfigError(
                f"session timeouts need 0 < min ({self.session_timeout_ms_min}) "
                f"<= max ({self.session_timeout_ms_max})"
            )
        for name in (
            "group_size_max",
            "new_member_join_timeout_ms",
            "offsets_retention_ms",
            "offsets_retention_check_interval_ms",
            "offsets_topic_partitions",
        ):
            if getattr(self, name) < 1:
                raise InvalidConfigError(f"{name} must be at least 1, not {getattr(self, name)}")
        if self.initial_rebalance_delay_ms < 0 or self.offset_metadata_length_max < 0:
            raise InvalidConfigError("initial_rebalance_delay_ms and metadata length are >= 0")
