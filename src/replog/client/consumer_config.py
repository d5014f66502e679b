"""``ConsumerConfig``: the consumer's settings, checked when built.

replog's names (units last) where they differ from Kafka's, Kafka's otherwise; ``kafka_names``
maps Kafka's names onto these. The group settings (``group_id`` and the rest) have Kafka's
defaults and matter only with a ``group_id``.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Literal

import attrs

from replog.client.assignors import assignor_for
from replog.client.membership import MembershipConfig
from replog.errors import InvalidConfigError

__all__ = ["ConsumerConfig", "ResetPolicy"]

ResetPolicy = Literal["earliest", "latest", "none"]


def _names(value: str | Iterable[Any]) -> tuple[str, ...]:
    """Assignor names from "range,roundrobin", a list of names, or assignor classes."""
    items = value.split(",") if isinstance(value, str) else list(value)
    return tuple(str(getattr(i, "name", i)).strip() for i in items if str(i).strip())


@attrs.frozen(kw_only=True)
class ConsumerConfig:
    """Consumer settings (Kafka's names in snake_case, units last)."""

    auto_reset: ResetPolicy = "latest"
    fetch_max_wait_ms: int = 500
    fetch_min_bytes: int = 1
    fetch_bytes_max: int = 50 * 1024 * 1024
    partition_fetch_bytes_max: int = 1024 * 1024
    request_timeout_ms: int = 30_000
    retry_backoff_ms: int = 100
    client_id: str = "replog-consumer"
    metadata_max_age_ms: int = 300_000
    #: poll's default record limit (Kafka's max.poll.records)
    max_poll_records: int = 500
    #: iteration ends after this long without a record (None: never)
    consumer_timeout_ms: int | None = None
    #: consumer groups (Kafka's names and defaults): without ``group_id`` no group is used
    group_id: str | None = None
    group_instance_id: str | None = None
    enable_auto_commit: bool = True
    auto_commit_interval_ms: int = 5_000
    session_timeout_ms: int = 45_000
    heartbeat_interval_ms: int = 3_000
    max_poll_interval_ms: int = 300_000
    partition_assignment_strategy: tuple[str, ...] = attrs.field(
        default=("range", "roundrobin"), converter=_names
    )

    def __attrs_post_init__(self) -> None:
        if self.auto_reset not in ("earliest", "latest", "none"):
            raise InvalidConfigError(f"auto_reset must be earliest/latest/none: {self.auto_reset}")
        if self.fetch_max_wait_ms < 0 or self.partition_fetch_bytes_max < 1:
            raise InvalidConfigError("fetch_max_wait_ms >= 0 and partition_fetch_bytes_max >= 1")
        if self.group_id == "":
            raise InvalidConfigError("group_id must not be empty (None: no group)")
        if self.max_poll_records < 1 or self.auto_commit_interval_ms < 1:
            raise InvalidConfigError("max_poll_records and auto_commit_interval_ms must be >= 1")
        for name in self.partition_assignment_strategy:
            assignor_for(name)

    def membership(self) -> MembershipConfig:
        """The group protocol's settings."""
        return MembershipConfig(
            session_timeout_ms=self.session_timeout_ms,
            rebalance_timeout_ms=self.max_poll_interval_ms,
            heartbeat_interval_ms=self.heartbeat_interval_ms,
            group_instance_id=self.group_instance_id,
            assignors=tuple(assignor_for(n) for n in self.partition_assignment_strategy),
        )
