"""Configuration of one replicated partition: ISR timing, min ISR, durability and timeouts.

Values are checked when the config is built (``InvalidConfigError``), never at first use.
"""

from __future__ import annotations

import enum

import attrs

from replog.errors import InvalidConfigError

__all__ = ["Acks", "DurabilityMode", "PartitionConfig"]


class DurabilityMode(enum.Enum):
    """When an appended offset may count toward the high watermark.

    ``FSYNC`` (default): only once it is durable on that replica. The leader counts its flushed
    offset; a follower flushes before it sends the fetch whose offset reports its LEO.
    ``REPLICATED`` (Kafka's default): once it is appended (page cache). Survives any minority of
    crashed replicas, not a coordinated power loss.
    """

    FSYNC = "fsync"
    REPLICATED = "replicated"


class Acks(enum.IntEnum):
    """The produce ``acks`` values Kafka accepts; any other int is ``INVALID_REQUIRED_ACKS``."""

    ALL = -1
    NONE = 0
    LEADER = 1


def _positive(name: str, value: int, *, allow_zero: bool = False) -> None:
    if value < 0 or (value == 0 and not allow_zero):
        raise InvalidConfigError(f"{name} must be {'>= 0' if allow_zero else '> 0'}, got {value}")


@attrs.frozen
class PartitionConfig:
    """Per-partition replication settings (defaults are Kafka's, except durability)."""

    min_insync_replicas: int = 1
    replica_lag_ms_max: int = 30_000
    durability: DurabilityMode = DurabilityMode.FSYNC
    #: how long an acks=all produce waits for the HW before ``REQUEST_TIMED_OUT``
    request_timeout_ms: int = 30_000
    #: follower fetch settings (replica.fetch.*)
    fetch_bytes_max: int = 1_048_576
    fetch_min_bytes: int = 1
    fetch_wait_ms_max: int = 500
    #: bound on each delayed-operation queue; past it new operations are refused
    delayed_operations_max: int = 100_000

    def __attrs_post_init__(self) -> None:
        _positive("min_insync_replicas", self.min_insync_replicas)
        _positive("replica_lag_ms_max", self.replica_lag_ms_max)
        _positive("request_timeout_ms", self.request_timeout_ms, allow_zero=True)
        _positive("fetch_bytes_max", self.fetch_bytes_max)
        _positive("fetch_min_bytes", self.fetch_min_bytes, allow_zero=True)
        _positive("fetch_wait_ms_max", self.fetch_wait_ms_max, allow_zero=True)
        _positive("delayed_operations_max", self.delayed_operations_max)

    @property
    def isr_expiration_interval_ms(self) -> int:
        """How often the driver should call ``maybe_shrink_isr`` (half the lag bound)."""
        return max(1, self.replica_lag_ms_max // 2)
