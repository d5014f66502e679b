"""Offset ranges for Spark reads: parse offset specs, pin ranges to the HW, split them for tasks.

This is the pure planning core of ``replog.spark``; it imports neither pyspark nor pyarrow, so it
is unit-tested without a JVM and runs in whichever Spark worker process asks for a plan.

Theory of operation, in three steps that mirror Spark's Kafka source:

1. ``parse_offsets`` turns a ``startingOffsets`` / ``endingOffsets`` value (``"earliest"``,
   ``"latest"``, or offset JSON such as ``{"topic": {"0": 23, "1": -2}}``) into an
   ``OffsetSpec``: explicit offsets plus a sentinel for the partitions the JSON leaves out.
   Sentinels are Kafka's: ``EARLIEST = -2`` (the log start offset), ``LATEST = -1`` (the HW).
2. ``resolve_ranges`` asks an ``OffsetSource`` (replog's admin client, or an in-memory fake) for
   the partitions of a subscription and their log start offsets and high watermarks, and returns
   one ``OffsetRange`` ``[from, until)`` per partition. Every range is **pinned**: ``latest`` means
   the HW seen at planning time, never "whatever is there when the task runs", so a retried task
   reads exactly the same records. Only records below the HW (committed) are ever planned.
3. ``plan_ranges`` splits the ranges into Spark tasks like Spark's ``KafkaOffsetRangeCalculator``:
   ``max_records_per_partition`` cuts every range into ``ceil(count / max)`` equal pieces, and
   ``min_partitions`` splits the large ranges in proportion to their size. When nothing needs
   splitting the mapping stays 1:1 and each range gets a consistent preferred executor.
"""

from __future__ import annotations

import heapq
import json
import math
import re
import zlib
from collections.abc import Collection, Iterable, Iterator, Mapping, Sequence
from fractions import Fraction
from typing import Any, Protocol

import attrs

from replog.errors import (
    ErrorCode,
    InvalidConfigError,
    InvalidOffsetError,
    InvalidTopicError,
    ReplogError,
    invariant,
)
from replog.topics import TopicPartition, validate_topic_name

__all__ = [
    "EARLIEST",
    "LATEST",
    "DataLossError",
    "DataLossWarning",
    "OffsetRange",
    "OffsetSource",
    "OffsetSpec",
    "OffsetSpecError",
    "ResolvedRanges",
    "TopicPartition",
    "offsets_to_json",
    "parse_offsets",
    "plan_ranges",
    "resolve_ranges",
]

EARLIEST = -2
"""Sentinel offset: the partition's log start offset (Kafka's ``-2``)."""
LATEST = -1
"""Sentinel offset: the partition's high watermark at planning time (Kafka's ``-1``)."""

_OFFSET_MAX = 2**63 - 1  # offsets are Kafka int64s
_PARTITION_KEY = re.compile(r"0|[1-9][0-9]*")


class OffsetSpecError(InvalidConfigError):
    """An offset spec, subscription or planning option is malformed or not allowed here."""


class DataLossError(ReplogError):
    """Planned offsets are below the log start offset: retention or deleteRecords removed them.

    Raised when ``fail_on_data_loss`` is true (the default, as in Spark); otherwise the range is
    clamped to the log start and a ``DataLossWarning`` is returned instead.
    """

    code = ErrorCode.OFFSET_OUT_OF_RANGE

    def __init__(self, topic: str, partition: int, offset: int, log_start_offset: int) -> None:
        super().__init__(
            f"{topic}-{partition}: offset {offset} is below the log start offset "
            f"{log_start_offset}; records [{offset}, {log_start_offset}) are gone "
            "(set fail_on_data_loss=False to skip them)"
        )
        self.topic = topic
        self.partition = partition
        self.offset = offset
        self.log_start_offset = log_start_offset


def _check_offset(value: object, where: str, *, sentinels: Collection[int]) -> int:
    """Return ``value`` if it is an int offset >= 0 or one of ``sentinels``, else raise."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise OffsetSpecError(f"{where}: offset {value!r} is not an integer")
    if value < 0 and value not in sentinels:
        allowed = " or ".join(str(s) for s in sorted(sentinels))
        raise OffsetSpecError(
            f"{where}: offset {value} is negative"
            + (f" and not {allowed} (-2 = earliest, -1 = latest)" if sentinels else "")
        )
    if value > _OFFSET_MAX:
        raise OffsetSpecError(f"{where}: offset {value} does not fit in an int64")
    return value


@attrs.frozen
class OffsetRange:
    """Offsets ``[from_offset, until_offset)`` of one partition: one Spark task's worth of records.

    The same shape as Spark's ``kafka010.OffsetRange``. A range is *resolved* when both ends are
    real offsets; an unresolved range keeps a sentinel (``from_offset`` EARLIEST or LATEST,
    ``until_offset`` LATEST) for the reader to bind late, and is never split. ``preferred_location``
    is the executor host Spark should run the task on, if any.
    """

    topic: str
    partition: int
    from_offset: int
    until_offset: int
    preferred_location: str | None = None

    def __attrs_post_init__(self) -> None:
        where = f"{self.topic}-{self.partition}"
        if isinstance(self.partition, bool) or not isinstance(self.partition, int):
            raise InvalidOffsetError(f"{where}: partition must be an int")
        if self.partition < 0:
            raise InvalidOffsetError(f"{where}: partition is negative")
        for name, value, sentinels in (
            ("from_offset", self.from_offset, (EARLIEST, LATEST)),
            ("until_offset", self.until_offset, (LATEST,)),
        ):
            try:
                _check_offset(value, f"{where} {name}", sentinels=sentinels)
            except OffsetSpecError as error:
                raise InvalidOffsetError(str(error)) from None
        if self.is_resolved and self.from_offset > self.until_offset:
            raise InvalidOffsetError(
                f"{where}: from_offset {self.from_offset} is past until_offset {self.until_offset}"
            )

    @property
    def topic_partition(self) -> TopicPartition:
        """The partition this range reads."""
        return TopicPartition(self.topic, self.partition)

    @property
    def is_resolved(self) -> bool:
        """Whether both ends are real offsets (no EARLIEST/LATEST sentinel)."""
        return self.from_offset >= 0 and self.until_offset >= 0

    @property
    def count(self) -> int:
        """Number of offsets in the range (``until - from``); records, unless compacted.

        Raises ``InvalidOffsetError`` for an unresolved range, whose size is not known yet.
        """
        if not self.is_resolved:
            raise InvalidOffsetError(
                f"{self.topic}-{self.partition} [{self.from_offset}, {self.until_offset}) is "
                "unresolved; its count is known only once the sentinels are bound"
            )
        return self.until_offset - self.from_offset


@attrs.frozen
class OffsetSpec:
    """Parsed ``startingOffsets`` / ``endingOffsets``: explicit offsets, and the sentinel used
    for every partition they leave out (``default``, EARLIEST or LATEST)."""

    default: int
    offsets: Mapping[str, Mapping[int, int]] = attrs.field(factory=dict)

    def __attrs_post_init__(self) -> None:
        if self.default not in (EARLIEST, LATEST):
            raise OffsetSpecError(
                f"default must be EARLIEST (-2) or LATEST (-1), not {self.default}"
            )

    def offset_for(self, topic: str, partition: int) -> int:
        """The requested offset of one partition: explicit if given, else ``default``."""
        return self.offsets.get(topic, {}).get(partition, self.default)


def _no_duplicate_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """``json.loads`` hook: a key given twice is an error, not "the last one wins"."""
    result = dict(pairs)
    if len(result) != len(pairs):
        seen = [key for key, _ in pairs]
        raise OffsetSpecError(f"key {next(k for k in seen if seen.count(k) > 1)!r} is given twice")
    return result


def _parse_partition_key(key: object, where: str) -> int:
    """A partition id from a JSON key ("0", canonical decimal) or, in a mapping, an int."""
    if isinstance(key, str) and _PARTITION_KEY.fullmatch(key):
        return int(key)
    if isinstance(key, int) and not isinstance(key, bool) and key >= 0:
        return key
    raise OffsetSpecError(f'{where}: partition key {key!r} is not a partition id like "0"')


def _validate_offsets(raw: object, name: str) -> dict[str, dict[int, int]]:
    """Check the ``{"topic": {"partition": offset}}`` shape and every key and value in it."""
    if not isinstance(raw, Mapping):
        raise OffsetSpecError(f"{name}: expected a JSON object of topics, got {type(raw).__name__}")
    parsed: dict[str, dict[int, int]] = {}
    for topic, partitions in raw.items():
        try:
            validate_topic_name(topic)
        except InvalidTopicError as error:
            raise OffsetSpecError(f"{name}: {error}") from None
        if not isinstance(partitions, Mapping):
            raise OffsetSpecError(
                f"{name}: topic {topic!r} maps to {type(partitions).__name__}, "
                'not an object of {"partition": offset}'
            )
        parsed[topic] = {}
        for key, offset in partitions.items():
            partition = _parse_partition_key(key, f"{name}: topic {topic!r}")
            if partition in parsed[topic]:
                raise OffsetSpecError(f"{name}: {topic}-{partition} is given twice")
            where = f"{name}: {topic}-{partition}"
            parsed[topic][partition] = _check_offset(offset, where, sentinels=(EARLIEST, LATEST))
    return parsed


def parse_offsets(
    spec: str | Mapping[str, Mapping[Any, Any]] | OffsetSpec,
    *,
    default: int,
    topics: Collection[str] | None = None,
    name: str = "offsets",
) -> OffsetSpec:
    """Parse an offsets option the way Spark's Kafka source reads ``startingOffsets``.

    ``spec`` is ``"earliest"`` / ``"latest"`` (any case), offset JSON, or the same structure as a
    mapping (partition ids as string keys; ints are accepted too). Offsets are ints >= 0, or -2
    (earliest) / -1 (latest). ``default`` (EARLIEST or LATEST) applies to partitions the JSON
    leaves out. With ``topics``, naming any other topic is an error. ``name`` (e.g.
    ``"startingOffsets"``) prefixes error messages. Raises ``OffsetSpecError`` (a ValueError).
    """
    if default not in (EARLIEST, LATEST):
        raise OffsetSpecError(
            f"{name}: default must be EARLIEST (-2) or LATEST (-1), not {default}"
        )
    if isinstance(spec, OffsetSpec):
        result = OffsetSpec(spec.default, _validate_offsets(spec.offsets, name))
    elif isinstance(spec, str):
        word = spec.strip().lower()
        if word == "earliest":
            return OffsetSpec(EARLIEST)
        if word == "latest":
            return OffsetSpec(LATEST)
        try:
            raw = json.loads(spec, object_pairs_hook=_no_duplicate_keys)
        except json.JSONDecodeError as error:
            raise OffsetSpecError(
                f"{name}: {spec!r} is neither 'earliest', 'latest' nor offset JSON ({error})"
            ) from None
        except OffsetSpecError as error:
            raise OffsetSpecError(f"{name}: {error}") from None
        result = OffsetSpec(default, _validate_offsets(raw, name))
    else:
        result = OffsetSpec(default, _validate_offsets(spec, name))
    if topics is not None:
        unknown = sorted(set(result.offsets) - set(topics))
        if unknown:
            raise OffsetSpecError(
                f"{name}: topics {unknown} are not in the subscription {sorted(topics)}"
            )
    return result


def offsets_to_json(offsets: Mapping[str, Mapping[int, int]]) -> str:
    """Offset JSON in Spark's format, e.g. ``{"a":{"0":23,"1":-1}}``.

    Topics and partitions are sorted (partitions numerically) so equal maps give equal strings;
    ``parse_offsets(offsets_to_json(m), ...).offsets == m``. Invalid input raises like parsing.
    """
    checked = _validate_offsets(offsets, "offsets")
    ordered = {
        topic: {str(p): checked[topic][p] for p in sorted(checked[topic])}
        for topic in sorted(checked)
    }
    return json.dumps(ordered, separators=(",", ":"))


class OffsetSource(Protocol):
    """What the planner needs from a cluster; replog's admin client or an in-memory fake.

    Offsets are answered per partition in one call, so a networked source makes one request
    for all partitions. ``resolve_ranges`` asks for log start offsets before high watermarks,
    so a log start that only moves forward never overtakes the HW it is compared with.
    """

    def list_partitions(self, topics: Collection[str] | None = None) -> Mapping[str, Sequence[int]]:
        """Partition ids of each named topic that exists (of every topic when ``topics`` is
        None). Topics that do not exist are left out of the answer."""
        ...

    def log_start_offsets(
        self, partitions: Collection[TopicPartition]
    ) -> Mapping[TopicPartition, int]:
        """The earliest offset still in each partition's log."""
        ...

    def high_watermarks(
        self, partitions: Collection[TopicPartition]
    ) -> Mapping[TopicPartition, int]:
        """Each partition's high watermark: one past the last committed offset."""
        ...


@attrs.frozen
class DataLossWarning:
    """Requested offsets were already gone and were skipped (``fail_on_data_loss=False``)."""

    topic: str
    partition: int
    offset: int
    log_start_offset: int

    @property
    def message(self) -> str:
        """A sentence for logs."""
        return (
            f"{self.topic}-{self.partition}: offsets [{self.offset}, {self.log_start_offset}) "
            "are below the log start offset and were skipped"
        )


@attrs.frozen
class ResolvedRanges:
    """The result of ``resolve_ranges``: one pinned range per partition, sorted by
    (topic, partition), and a warning for each partition whose start was clamped."""

    ranges: tuple[OffsetRange, ...]
    warnings: tuple[DataLossWarning, ...] = ()


def _subscribed_partitions(
    source: OffsetSource,
    subscribe: str | Sequence[str] | None,
    subscribe_pattern: str | None,
    assign: str | Mapping[str, Sequence[int]] | None,
) -> tuple[set[str], list[TopicPartition]]:
    """The subscribed topics and their partitions, for exactly one of the three strategies."""
    strategies = {"subscribe": subscribe, "subscribePattern": subscribe_pattern, "assign": assign}
    given = [name for name, value in strategies.items() if value is not None]
    if len(given) != 1:
        raise OffsetSpecError(
            f"give exactly one of subscribe, subscribePattern, assign (got {given or 'none'})"
        )
    if subscribe is not None:
        # Spark's rule: comma-separated, trimmed, empty names ignored
        names = subscribe.split(",") if isinstance(subscribe, str) else list(subscribe)
        if not all(isinstance(t, str) for t in names):
            raise OffsetSpecError(f"subscribe: {subscribe!r} is not a list of topic names")
        topics = {t.strip() for t in names if t.strip()}
        if not topics:
            raise OffsetSpecError(f"subscribe: {subscribe!r} names no topic")
        for topic in topics:
            validate_topic_name(topic)
        known = source.list_partitions(sorted(topics))
        missing = sorted(topics - set(known))
        if missing:
            raise OffsetSpecError(f"subscribe: topics {missing} do not exist")
        return topics, [TopicPartition(t, p) for t in sorted(topics) for p in sorted(known[t])]
    if subscribe_pattern is not None:
        if not subscribe_pattern:
            raise OffsetSpecError("subscribePattern: the pattern is empty")
        try:
            pattern = re.compile(subscribe_pattern)
        except re.error as error:
            raise OffsetSpecError(f"subscribePattern: {subscribe_pattern!r}: {error}") from None
        known = source.list_partitions(None)
        topics = {t for t in known if pattern.fullmatch(t)}
        return topics, [TopicPartition(t, p) for t in sorted(topics) for p in sorted(known[t])]
    invariant(assign is not None, "exactly one strategy is set")
    return _assigned_partitions(source, assign)


def _assigned_partitions(
    source: OffsetSource, assign: object
) -> tuple[set[str], list[TopicPartition]]:
    """Partitions named by ``assign``: JSON ``{"topic": [0, 1]}`` or the same mapping."""
    raw = assign
    if isinstance(assign, str):
        try:
            raw = json.loads(assign, object_pairs_hook=_no_duplicate_keys)
        except json.JSONDecodeError as error:
            raise OffsetSpecError(f"assign: {assign!r} is not JSON ({error})") from None
        except OffsetSpecError as error:
            raise OffsetSpecError(f"assign: {error}") from None
    if not isinstance(raw, Mapping) or not raw:
        raise OffsetSpecError(f'assign: expected {{"topic": [0, 1]}}, got {assign!r}')
    wanted: list[TopicPartition] = []
    for topic, partitions in raw.items():
        validate_topic_name(topic)
        if isinstance(partitions, str | bytes) or not isinstance(partitions, Sequence):
            raise OffsetSpecError(f"assign: topic {topic!r} needs a list of partition ids")
        for p in partitions:
            if isinstance(p, bool) or not isinstance(p, int) or p < 0:
                raise OffsetSpecError(f"assign: {p!r} in topic {topic!r} is not a partition id")
            wanted.append(TopicPartition(topic, p))
    known = source.list_partitions(sorted(raw))
    unknown = sorted(tp for tp in set(wanted) if tp.partition not in known.get(tp.topic, ()))
    if unknown:
        listed = ", ".join(f"{t}-{p}" for t, p in unknown)
        raise OffsetSpecError(f"assign: partitions {listed} do not exist")
    return set(raw), sorted(set(wanted))


def _check_spec_partitions(
    spec: OffsetSpec, partitions: Collection[TopicPartition], name: str
) -> None:
    """Every partition the spec names explicitly must be one the subscription reads."""
    named = {TopicPartition(t, p) for t, offsets in spec.offsets.items() for p in offsets}
    unknown = sorted(named - set(partitions))
    if unknown:
        listed = ", ".join(f"{t}-{p}" for t, p in unknown)
        raise OffsetSpecError(f"{name}: partitions {listed} are not in the subscription")


def resolve_ranges(
    source: OffsetSource,
    *,
    subscribe: str | Sequence[str] | None = None,
    subscribe_pattern: str | None = None,
    assign: str | Mapping[str, Sequence[int]] | None = None,
    starting: str | Mapping[str, Mapping[Any, Any]] | OffsetSpec = "earliest",
    ending: str | Mapping[str, Mapping[Any, Any]] | OffsetSpec = "latest",
    fail_on_data_loss: bool = True,
) -> ResolvedRanges:
    """Resolve a batch read into one range per partition, pinned to the HW at planning time.

    Exactly one of ``subscribe`` (names, or a comma-separated string), ``subscribe_pattern`` (a
    regex matching whole topic names) or ``assign`` (``{"topic": [0, 1]}``, JSON or mapping).
    Batch rules, as in Spark: a start may not be latest, an end may not be earliest. ``latest``
    binds to the HW; an explicit end past the HW is an error (those records are not committed).
    A start below the log start raises ``DataLossError``, or with ``fail_on_data_loss=False`` is
    clamped to the log start with a ``DataLossWarning`` in the result. Start > end is an error.
    """
    topics, partitions = _subscribed_partitions(source, subscribe, subscribe_pattern, assign)
    start_spec = parse_offsets(starting, default=EARLIEST, topics=topics, name="startingOffsets")
    end_spec = parse_offsets(ending, default=LATEST, topics=topics, name="endingOffsets")
    for spec, name, banned, word in (
        (start_spec, "startingOffsets", LATEST, "latest"),
        (end_spec, "endingOffsets", EARLIEST, "earliest"),
    ):
        _check_spec_partitions(spec, partitions, name)
        if spec.default == banned and not spec.offsets:
            raise OffsetSpecError(f"{name}: {word} is not allowed in a batch query")
        for tp in partitions:
            if spec.offset_for(*tp) == banned:
                raise OffsetSpecError(
                    f"{name}: {tp.topic}-{tp.partition} is {word} ({banned}), "
                    "which is not allowed in a batch query"
                )
    log_starts = source.log_start_offsets(partitions)
    hws = source.high_watermarks(partitions)
    ranges: list[OffsetRange] = []
    warnings: list[DataLossWarning] = []
    for tp in partitions:
        invariant(tp in log_starts and tp in hws, f"offset source did not answer for {tp}")
        pinned, warning = _pin_range(
            tp,
            start_spec.offset_for(*tp),
            end_spec.offset_for(*tp),
            log_starts[tp],
            hws[tp],
            fail_on_data_loss=fail_on_data_loss,
        )
        ranges.append(pinned)
        if warning is not None:
            warnings.append(warning)
    return ResolvedRanges(tuple(ranges), tuple(warnings))


def _pin_range(
    tp: TopicPartition,
    start: int,
    end: int,
    log_start_offset: int,
    hw: int,
    *,
    fail_on_data_loss: bool,
) -> tuple[OffsetRange, DataLossWarning | None]:
    """Bind the sentinels of one partition to its log start / HW and apply the loss rules."""
    where = f"{tp.topic}-{tp.partition}"
    invariant(
        0 <= log_start_offset <= hw,
        f"{where}: offset source gave log start {log_start_offset} past HW {hw}",
    )
    if start >= 0 and end >= 0 and start > end:
        raise OffsetSpecError(f"{where}: starting offset {start} is past ending offset {end}")
    start = log_start_offset if start == EARLIEST else start
    if end == LATEST:
        end = hw
    elif end > hw:
        raise OffsetSpecError(
            f"endingOffsets: {where} is {end}, past the high watermark {hw}; "
            "only committed records can be read"
        )
    warning = None
    lowest = min(start, end)
    if lowest < log_start_offset:
        if fail_on_data_loss:
            raise DataLossError(tp.topic, tp.partition, lowest, log_start_offset)
        warning = DataLossWarning(tp.topic, tp.partition, lowest, log_start_offset)
        start, end = max(start, log_start_offset), max(end, log_start_offset)
    if start > end:
        raise OffsetSpecError(
            f"{where}: starting offset {start} is past ending offset {end} (the high watermark)"
        )
    return OffsetRange(tp.topic, tp.partition, start, end), warning


def plan_ranges(
    ranges: Iterable[OffsetRange],
    *,
    min_partitions: int | None = None,
    max_records_per_partition: int | None = None,
    executors: Iterable[str] = (),
) -> list[OffsetRange]:
    """Split ranges into Spark tasks the way Spark's ``KafkaOffsetRangeCalculator`` does.

    - Empty resolved ranges are dropped; unresolved ranges (sentinels) are kept whole.
    - If ``min_partitions`` is unset or already met, and no range exceeds
      ``max_records_per_partition``, the plan stays 1:1 and each range gets the preferred
      executor ``sorted(executors)[crc32(b"<topic>-<partition>") % n]`` (Spark's PreferConsistent,
      with CRC-32 instead of the JVM's ``hashCode`` so every process and run agrees). Without
      executors a range keeps the location it came with.
    - Otherwise: each resolved range is cut into ``ceil(count / max_records_per_partition)`` equal
      pieces; then, if there are still fewer pieces than ``min_partitions``, Spark's proportional
      split runs over them (see ``_split_for_min_partitions``). Split plans carry no locations.

    The result is deterministic: the same input gives the same pieces, in input order.
    """
    _check_positive("min_partitions", min_partitions)
    _check_positive("max_records_per_partition", max_records_per_partition)
    kept = [r for r in ranges if not (r.is_resolved and r.count == 0)]
    over_max = max_records_per_partition is not None and any(
        r.is_resolved and r.count > max_records_per_partition for r in kept
    )
    if not over_max and (min_partitions is None or len(kept) >= min_partitions):
        hosts = sorted(set(executors))
        if not hosts:
            return kept
        return [attrs.evolve(r, preferred_location=_consistent_host(r, hosts)) for r in kept]
    pieces = [attrs.evolve(r, preferred_location=None) for r in kept]
    if max_records_per_partition is not None:
        max_records = max_records_per_partition
        pieces = [
            piece
            for r in pieces
            for piece in _divide(r, _ceil_div(r.count, max_records) if r.is_resolved else 1)
        ]
    if min_partitions is not None and len(pieces) < min_partitions:
        pieces = _split_for_min_partitions(pieces, min_partitions)
    return pieces


def _check_positive(name: str, value: int | None) -> None:
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise OffsetSpecError(f"{name} must be a positive integer, not {value!r}")


def _ceil_div(numerator: int, denominator: int) -> int:
    return -(-numerator // denominator)


def _consistent_host(r: OffsetRange, hosts: Sequence[str]) -> str:
    """The executor that always reads this partition, so its cached reader stays warm.

    Spark uses ``floorMod(TopicPartition.hashCode, n)``; Python's ``hash()`` of a str changes
    with every process (PYTHONHASHSEED), so replog uses CRC-32 of ``"<topic>-<partition>"``.
    """
    return hosts[zlib.crc32(f"{r.topic}-{r.partition}".encode()) % len(hosts)]


def _divide(r: OffsetRange, parts: int) -> Iterator[OffsetRange]:
    """Cut a resolved range into ``parts`` contiguous pieces of near-equal size.

    Spark's arithmetic: piece i gets ``remaining // (parts - i)``, so the later pieces absorb the
    rounding. Unresolved ranges, and ``parts <= 1``, give the range back whole.
    """
    if not r.is_resolved or parts <= 1:
        yield r
        return
    parts = min(parts, r.count)  # more parts than records would only add empty pieces
    remaining = r.count
    start = r.from_offset
    for part in range(parts):
        size = remaining // (parts - part)
        remaining -= size
        end = start + size
        if end > start:
            yield OffsetRange(r.topic, r.partition, start, end)
        start = end
    invariant(start == r.until_offset, f"pieces of {r} end at {start}")


def _java_round(value: float) -> int:
    """``Math.round`` for a non-negative double: nearest, ties up (Python's round() ties to even,
    which gives 4 for 4.5 where Spark gets 5)."""
    whole = math.floor(value)
    return whole + 1 if value - whole >= 0.5 else whole


def _part_count(size: int, total: int, min_partitions: int) -> int:
    """Spark's ``getPartCount``: ``max(round(size / total * min_partitions), 1)`` in doubles."""
    return max(_java_round(float(size) / float(total) * min_partitions), 1)


def _split_for_min_partitions(pieces: list[OffsetRange], min_partitions: int) -> list[OffsetRange]:
    """Spark's minPartitions split (SPARK-36576), then a top-up so the minimum really holds.

    1. A range whose share ``round(count / total * min_partitions)`` is at most 1 stays whole
       ("unsplit"); so does every unresolved range.
    2. The others split ``round(count / split_total * (min_partitions - #unsplit))`` ways, where
       ``split_total`` is their combined count.
    3. Spark stops here and may fall short of ``min_partitions`` ("approximately"). replog then
       gives one more part at a time to the range whose pieces are largest, until there are
       ``min_partitions`` pieces or every piece is one record. When Spark's plan already meets
       the minimum, the result is exactly Spark's.

    Unlike Spark, "unsplit" is decided per range rather than per topic-partition, so two ranges
    of one partition (e.g. pieces from ``max_records_per_partition``) are judged separately.
    """
    counts = [p.count if p.is_resolved else 0 for p in pieces]
    total = sum(counts)
    if total == 0:
        return pieces
    parts = [1] * len(pieces)
    splittable = [
        i
        for i, p in enumerate(pieces)
        if p.is_resolved and _part_count(counts[i], total, min_partitions) > 1
    ]
    split_total = sum(counts[i] for i in splittable)
    unsplit_count = len(pieces) - len(splittable)
    split_min = max(min_partitions - unsplit_count, 1)
    for i in splittable:
        parts[i] = min(_part_count(counts[i], split_total, split_min), counts[i])
    _top_up(parts, counts, min_partitions)
    return [piece for i, p in enumerate(pieces) for piece in _divide(p, parts[i])]


def _top_up(parts: list[int], counts: Sequence[int], min_partitions: int) -> None:
    """Add parts, largest piece first (ties: earliest range), until the sum reaches the min."""
    heap = [(-Fraction(counts[i], parts[i]), i) for i in range(len(parts)) if parts[i] < counts[i]]
    heapq.heapify(heap)
    missing = min_partitions - sum(parts)
    while missing > 0 and heap:
        _, i = heapq.heappop(heap)
        parts[i] += 1
        missing -= 1
        if parts[i] < counts[i]:
            heapq.heappush(heap, (-Fraction(counts[i], parts[i]), i))
