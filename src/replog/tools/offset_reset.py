"""The arithmetic of ``replog consumer-groups --reset-offsets``, kept apart from the IO.

Parsing of the options (``--topic t[:p1,p2]``, ``--to-datetime``, ``--by-duration``) and
``plan_reset``, which turns a reset rule plus the offsets the cluster reported (committed,
earliest, latest, by time) into each partition's new committed offset, as kafka-consumer-groups
computes it: explicit and shifted offsets are clamped into [earliest, latest]; a time with no
record at or after it resets to the latest offset; shifting needs a committed offset.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Iterable, Mapping

import attrs

from replog.topics import TopicPartitionLike

__all__ = [
    "ResetRule",
    "parse_datetime_ms",
    "parse_duration_ms",
    "parse_topic_partitions",
    "plan_reset",
]

#: the reset rules, by kafka-consumer-groups option (without the leading dashes)
RULES = ("to-earliest", "to-latest", "to-offset", "shift-by", "to-datetime", "by-duration")

_DURATION = re.compile(
    r"P(?:(?P<days>\d+(?:\.\d+)?)D)?"
    r"(?:T(?:(?P<hours>\d+(?:\.\d+)?)H)?(?:(?P<minutes>\d+(?:\.\d+)?)M)?"
    r"(?:(?P<seconds>\d+(?:\.\d+)?)S)?)?",
    re.IGNORECASE,
)


@attrs.frozen
class ResetRule:
    """One reset rule: ``kind`` is one of ``RULES``; ``value`` the offset (``to-offset``), the
    shift (``shift-by``) or the time in ms since the epoch (``to-datetime``, ``by-duration``
    once resolved against now); unused otherwise."""

    kind: str
    value: int = 0

    @property
    def by_time(self) -> bool:
        """Whether the rule resets to the first offset at or after a time."""
        return self.kind in ("to-datetime", "by-duration")


def parse_topic_partitions(spec: str) -> tuple[str, tuple[int, ...] | None]:
    """``--topic``'s ``topic`` or ``topic:p1,p2`` form: the topic and its partitions (None:
    all of them). Raises ``ValueError`` on a malformed list."""
    topic, sep, parts = spec.partition(":")
    if not topic:
        raise ValueError(f"--topic {spec!r} names no topic")
    if not sep:
        return topic, None
    try:
        partitions = tuple(sorted({int(p) for p in parts.split(",") if p.strip()}))
    except ValueError:
        raise ValueError(f"--topic {spec!r}: partitions must be integers") from None
    if not partitions or min(partitions) < 0:
        raise ValueError(f"--topic {spec!r}: no valid partition list")
    return topic, partitions


def parse_datetime_ms(text: str) -> int:
    """``--to-datetime``: an ISO 8601 date-time (``2024-01-31T12:00:00.000``, optionally with an
    offset or ``Z``) as ms since the epoch; without an offset it is local time, as in Kafka."""
    try:
        moment = dt.datetime.fromisoformat(text)
    except ValueError:
        raise ValueError(f"--to-datetime {text!r} is not YYYY-MM-DDTHH:mm:SS[.sss][zone]") from None
    if moment.tzinfo is None:
        moment = moment.astimezone()  # local time, as Kafka reads a date without a zone
    return int(moment.timestamp() * 1000)


def parse_duration_ms(text: str) -> int:
    """``--by-duration``: an ISO 8601 duration ``PnDTnHnMnS`` (any part may be left out) in
    ms."""
    match = _DURATION.fullmatch(text.strip())
    if match is None or text.strip().upper() in ("P", "PT") or text.strip().upper().endswith("T"):
        raise ValueError(f"--by-duration {text!r} is not an ISO 8601 duration PnDTnHnMnS")
    parts = {k: float(v) for k, v in match.groupdict().items() if v is not None}
    seconds = (
        parts.get("days", 0.0) * 86_400
        + parts.get("hours", 0.0) * 3_600
        + parts.get("minutes", 0.0) * 60
        + parts.get("seconds", 0.0)
    )
    return int(seconds * 1000)


def plan_reset(
    rule: ResetRule,
    partitions: Iterable[TopicPartitionLike],
    *,
    committed: Mapping[TopicPartitionLike, int],
    earliest: Mapping[TopicPartitionLike, int],
    latest: Mapping[TopicPartitionLike, int],
    at_time: Mapping[TopicPartitionLike, int] | None = None,
) -> dict[TopicPartitionLike, int]:
    """Each partition's new committed offset under ``rule``. ``at_time`` holds the first
    offset at or after the rule's time (-1: none, which resets to the latest offset). Raises
    ``ValueError`` when shifting a partition that has no committed offset."""
    plan: dict[TopicPartitionLike, int] = {}
    for tp in partitions:
        low, high = earliest[tp], latest[tp]
        if rule.kind == "to-earliest":
            offset = low
        elif rule.kind == "to-latest":
            offset = high
        elif rule.kind == "to-offset":
            offset = rule.value
        elif rule.kind == "shift-by":
            if tp not in committed:
                raise ValueError(
                    f"cannot shift {tp[0]}-{tp[1]}: the group has no committed offset for it"
                )
            offset = committed[tp] + rule.value
        elif rule.by_time:
            found = -1 if at_time is None else at_time.get(tp, -1)
            offset = high if found < 0 else found
        else:
            raise ValueError(f"unknown reset rule {rule.kind!r}")
        plan[tp] = min(max(offset, low), high)
    return plan
