"""Options of the ``replog`` DataFrame source and sink, with Spark's Kafka names (no pyspark).

``SourceOptions.parse`` reads a case-insensitive option map the way Spark's
``KafkaSourceProvider`` does: exactly one of ``subscribe`` / ``subscribePattern`` / ``assign``,
``startingOffsets`` / ``endingOffsets`` (``earliest``, ``latest`` or offset JSON),
``minPartitions``, ``maxRecordsPerPartition``, ``maxOffsetsPerTrigger``, ``failOnDataLoss``,
``includeHeaders`` and, for the sink, ``topic``. The cluster is named by ``replog.bootstrap``
(or ``kafka.bootstrap.servers``, so a Kafka job switches by changing only the format); it must be
reachable over TCP from every Spark worker process. ``replog.consumer.<field>`` options go to the
readers' ``Consumer`` and ``replog.producer.<field>`` options to the sink's ``Producer``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs

from replog.spark.ranges import OffsetSpecError

__all__ = ["SourceOptions"]

_SCHEMA = (
    "key binary, value binary, topic string, partition int, offset long, "
    "timestamp timestamp, timestampType int"
)
_HEADERS = "headers array<struct<key: string, value: binary>>"
_CONSUMER_INTS = {
    "fetch_max_wait_ms",
    "fetch_min_bytes",
    "fetch_bytes_max",
    "partition_fetch_bytes_max",
    "request_timeout_ms",
    "retry_backoff_ms",
}
_PRODUCER_INTS = {
    "linger_ms",
    "batch_bytes_max",
    "buffer_bytes_max",
    "retries",
    "retry_backoff_ms",
    "request_timeout_ms",
    "metadata_wait_ms",
    "in_flight_per_partition_max",
}


def _get(options: Mapping[str, str], name: str) -> str | None:
    """Case-insensitive lookup (Spark hands over a case-insensitive dict; plain dicts work too)."""
    lowered = name.lower()
    for key, value in options.items():
        if key.lower() == lowered:
            return None if value is None else str(value)
    return None


def _positive(options: Mapping[str, str], name: str) -> int | None:
    raw = _get(options, name)
    if raw is None:
        return None
    try:
        value = int(raw)
    except ValueError:
        raise OffsetSpecError(f"{name} must be a positive integer, not {raw!r}") from None
    if value < 1:
        raise OffsetSpecError(f"{name} must be a positive integer, not {raw!r}")
    return value


def _flag(options: Mapping[str, str], name: str, default: bool) -> bool:
    raw = _get(options, name)
    if raw is None:
        return default
    word = raw.strip().lower()
    if word not in ("true", "false"):
        raise OffsetSpecError(f"{name} must be true or false, not {raw!r}")
    return word == "true"


def _prefixed(options: Mapping[str, str], prefix: str, ints: set[str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in options.items():
        if key.lower().startswith(prefix):
            field = key[len(prefix) :]
            out[field] = int(value) if field in ints else value
    return out


@attrs.frozen(kw_only=True)
class SourceOptions:
    """Parsed source/sink options (see module doc); picklable plain values only."""

    bootstrap: str
    subscribe: str | None = None
    subscribe_pattern: str | None = None
    assign: str | None = None
    starting_offsets: str | None = None
    ending_offsets: str | None = None
    min_partitions: int | None = None
    max_records_per_partition: int | None = None
    max_offsets_per_trigger: int | None = None
    fail_on_data_loss: bool = True
    include_headers: bool = False
    topic: str | None = None
    consumer_config: Mapping[str, Any] = attrs.field(factory=dict)
    producer_config: Mapping[str, Any] = attrs.field(factory=dict)

    @classmethod
    def parse(cls, options: Mapping[str, str], *, for_read: bool = True) -> SourceOptions:
        """Validate ``options``; ``for_read=False`` (the sink) needs no subscription."""
        bootstrap = _get(options, "replog.bootstrap") or _get(options, "kafka.bootstrap.servers")
        if not bootstrap:
            raise OffsetSpecError(
                "option replog.bootstrap (host:port,...) is required: Spark workers reach "
                "the cluster over TCP"
            )
        strategies = {
            name: _get(options, name) for name in ("subscribe", "subscribePattern", "assign")
        }
        given = [name for name, value in strategies.items() if value is not None]
        if for_read and len(given) != 1:
            raise OffsetSpecError(
                "exactly one of subscribe, subscribePattern or assign is required "
                f"(got {', '.join(given) or 'none'})"
            )
        return cls(
            bootstrap=bootstrap,
            subscribe=strategies["subscribe"],
            subscribe_pattern=strategies["subscribePattern"],
            assign=strategies["assign"],
            starting_offsets=_get(options, "startingOffsets"),
            ending_offsets=_get(options, "endingOffsets"),
            min_partitions=_positive(options, "minPartitions"),
            max_records_per_partition=_positive(options, "maxRecordsPerPartition"),
            max_offsets_per_trigger=_positive(options, "maxOffsetsPerTrigger"),
            fail_on_data_loss=_flag(options, "failOnDataLoss", True),
            include_headers=_flag(options, "includeHeaders", False),
            topic=_get(options, "topic"),
            consumer_config=_prefixed(options, "replog.consumer.", _CONSUMER_INTS),
            producer_config=_prefixed(options, "replog.producer.", _PRODUCER_INTS),
        )

    @property
    def schema_ddl(self) -> str:
        """Spark's Kafka source schema (plus ``headers`` with ``includeHeaders``)."""
        return f"{_SCHEMA}, {_HEADERS}" if self.include_headers else _SCHEMA
