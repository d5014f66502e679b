"""`LogConfig`: the per-log settings of the storage engine, validated when built.

Names follow Kafka's topic configs with units last (``segment.bytes`` -> ``segment_bytes``);
defaults are Kafka's (its topic configs' and its broker's defaults) unless noted.

``cleanup_policy`` is Kafka's ``cleanup.policy``: ``delete`` (retention deletes old segments),
``compact`` (the log cleaner keeps the latest record of every key; retention only drops segments
below the log start offset) or ``compact,delete`` (both). The compaction settings are Kafka's
``min.cleanable.dirty.ratio``, ``min.compaction.lag.ms``, ``max.compaction.lag.ms`` and
``delete.retention.ms`` (see `replog.log.cleaner`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import attrs

from replog.errors import InvalidConfigError

__all__ = ["CLEANUP_POLICIES", "LogConfig", "normalize_cleanup_policy"]

_INT32_MAX = 2**31 - 1
_INT64_MAX = 2**63 - 1
CLEANUP_POLICIES = ("delete", "compact", "compact,delete")
"""The values ``cleanup_policy`` takes, normalized (`normalize_cleanup_policy`)."""


def normalize_cleanup_policy(value: str) -> str:
    """Kafka's ``cleanup.policy`` list (``delete``, ``compact``, both in either order, spaces
    allowed) as one of `CLEANUP_POLICIES`; `InvalidConfigError` for anything else."""
    if not isinstance(value, str):
        raise InvalidConfigError(f"cleanup_policy must be a string, got {value!r}")
    parts = {part.strip().lower() for part in value.split(",")}
    if not parts or not parts <= {"delete", "compact"} or "" in parts:
        raise InvalidConfigError(
            f"cleanup.policy must be delete, compact or compact,delete, got {value!r}"
        )
    return ",".join(sorted(parts))


_Validator = Callable[[Any, "attrs.Attribute[int]", int], None]


def _at_least(minimum: int) -> _Validator:
    def check(instance: object, attribute: attrs.Attribute[int], value: int) -> None:
        if not isinstance(value, int) or isinstance(value, bool):
            raise InvalidConfigError(f"{attribute.name} must be an int, got {value!r}")
        if value < minimum:
            raise InvalidConfigError(f"{attribute.name} must be >= {minimum}, got {value}")

    return check


def _unlimited_or_at_least(minimum: int) -> _Validator:
    def check(instance: object, attribute: attrs.Attribute[int], value: int) -> None:
        if not isinstance(value, int) or isinstance(value, bool):
            raise InvalidConfigError(f"{attribute.name} must be an int, got {value!r}")
        if value != -1 and value < minimum:
            raise InvalidConfigError(
                f"{attribute.name} must be -1 (unlimited) or >= {minimum}, got {value}"
            )

    return check


def _ratio(instance: object, attribute: attrs.Attribute[float], value: float) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value <= 1:
        raise InvalidConfigError(f"{attribute.name} must be a number in [0, 1], got {value!r}")


@attrs.frozen(kw_only=True)
class LogConfig:
    """Settings of one partition log.

    ``flush_interval_batches`` and ``flush_interval_ms`` are Kafka's ``flush.messages`` and
    ``flush.ms``; replog's durability mode (in the replication layer) decides who calls
    ``Log.flush``, so both default to "never on the write path" as in Kafka.
    """

    segment_bytes: int = attrs.field(default=1024 * 1024 * 1024, validator=_at_least(14))
    segment_index_bytes: int = attrs.field(default=10 * 1024 * 1024, validator=_at_least(4))
    index_interval_bytes: int = attrs.field(default=4096, validator=_at_least(0))
    segment_ms: int = attrs.field(default=7 * 24 * 3600 * 1000, validator=_at_least(1))
    segment_jitter_ms: int = attrs.field(default=0, validator=_at_least(0))
    retention_ms: int = attrs.field(
        default=7 * 24 * 3600 * 1000, validator=_unlimited_or_at_least(0)
    )
    retention_bytes: int = attrs.field(default=-1, validator=_unlimited_or_at_least(0))
    max_message_bytes: int = attrs.field(default=1048588, validator=_at_least(0))
    file_delete_delay_ms: int = attrs.field(default=60000, validator=_at_least(0))
    #: Kafka's broker-wide ``producer.id.expiration.ms``: an idempotent producer's state is
    #: dropped once its last batch is this old (one day)
    producer_id_expiration_ms: int = attrs.field(default=86_400_000, validator=_at_least(1))
    cleanup_policy: str = attrs.field(default="delete", converter=normalize_cleanup_policy)
    min_cleanable_dirty_ratio: float = attrs.field(default=0.5, validator=_ratio)
    min_compaction_lag_ms: int = attrs.field(default=0, validator=_at_least(0))
    max_compaction_lag_ms: int = attrs.field(default=_INT64_MAX, validator=_at_least(1))
    delete_retention_ms: int = attrs.field(default=24 * 3600 * 1000, validator=_at_least(0))

    @property
    def compact(self) -> bool:
        """Whether the log cleaner compacts this log (``cleanup.policy`` holds ``compact``)."""
        return "compact" in self.cleanup_policy

    @property
    def delete(self) -> bool:
        """Whether retention by time and size applies (``cleanup.policy`` holds ``delete``)."""
        return "delete" in self.cleanup_policy

    def __attrs_post_init__(self) -> None:
        if self.segment_bytes > _INT32_MAX:
            # Index positions are int32: a segment larger than 2 GiB cannot be indexed.
            raise InvalidConfigError(
                f"segment_bytes must be <= {_INT32_MAX} (index positions are int32), "
                f"got {self.segment_bytes}"
            )
        if self.segment_index_bytes > _INT32_MAX:
            raise InvalidConfigError(
                f"segment_index_bytes must be <= {_INT32_MAX}, got {self.segment_index_bytes}"
            )
        if self.min_compaction_lag_ms > self.max_compaction_lag_ms:
            raise InvalidConfigError(
                f"min_compaction_lag_ms ({self.min_compaction_lag_ms}) must be <= "
                f"max_compaction_lag_ms ({self.max_compaction_lag_ms})"
            )
        if self.segment_jitter_ms >= self.segment_ms:
            raise InvalidConfigError(
                f"segment_jitter_ms ({self.segment_jitter_ms}) must be < segment_ms "
                f"({self.segment_ms})"
            )
