"""Which segments retention deletes: a pure decision over a log's segments.

Three rules, in Kafka's order, each taking whole segments from the oldest on and stopping at
the first that does not qualify: the segment lies wholly below the log start offset (moved by
DeleteRecords or by a leader); the log is larger than ``retention_bytes`` (delete while what is
left stays at or above it); the segment's largest timestamp is older than ``retention_ms``
(wall time now minus the max record timestamp, or the last append's wall time when no record
has a timestamp). No rule deletes a segment that reaches past the high watermark, nor the active
segment while it is empty. The size and time rules apply only when ``cleanup.policy`` holds
``delete``; a compacted-only log loses segments to the log start alone (Kafka's rule).
`Log.delete_old_segments` does the deleting.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from replog.log.config import LogConfig
from replog.log.segment import LogSegment

__all__ = ["retention_cut"]

_Rule = Callable[[LogSegment, "int | None"], bool]


def retention_cut(
    segments: Sequence[LogSegment],
    *,
    log_end_offset: int,
    high_watermark: int,
    log_start_offset: int,
    config: LogConfig,
    now_ms: int,
) -> int:
    """How many of the oldest ``segments`` (in base-offset order) retention deletes."""
    count = _extend(
        segments,
        0,
        log_end_offset,
        high_watermark,
        lambda segment, next_base: next_base is not None and next_base <= log_start_offset,
    )
    if not config.delete:
        return count
    if config.retention_bytes >= 0:
        excess = sum(s.size_bytes for s in segments[count:]) - config.retention_bytes

        def over_size(segment: LogSegment, next_base: int | None) -> bool:
            nonlocal excess
            if excess - segment.size_bytes < 0:
                return False
            excess -= segment.size_bytes
            return True

        if excess >= 0:
            count = _extend(segments, count, log_end_offset, high_watermark, over_size)
    if config.retention_ms >= 0:
        retention_ms = config.retention_ms
        count = _extend(
            segments,
            count,
            log_end_offset,
            high_watermark,
            lambda segment, next_base: now_ms - segment.largest_timestamp() > retention_ms,
        )
    return count


def _extend(
    segments: Sequence[LogSegment],
    count: int,
    log_end_offset: int,
    high_watermark: int,
    rule: _Rule,
) -> int:
    """``count`` grown over the following segments while ``rule`` holds for each."""
    while count < len(segments):
        segment = segments[count]
        next_base = segments[count + 1].base_offset if count + 1 < len(segments) else None
        upper = log_end_offset if next_base is None else next_base
        if upper > high_watermark:
            break
        if next_base is None and segment.size_bytes == 0:
            break
        if not rule(segment, next_base):
            break
        count += 1
    return count
