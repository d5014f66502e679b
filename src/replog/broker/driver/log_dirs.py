"""What DescribeLogDirs reports about a broker's log dirs: per dir its path, whether it is
online (an offline dir answers KAFKA_STORAGE_ERROR and lists nothing), the space of its volume,
and each open log in it with its size and how far its end is behind its high watermark
(Kafka's ``offsetLag``: the HW minus the LEO, never below 0).
"""

from __future__ import annotations

import shutil
from collections.abc import Collection

import attrs

from replog.errors import ErrorCode
from replog.log.manager import LogManager

__all__ = ["LogDirReport", "LogDirPartition", "describe_log_dirs"]


@attrs.frozen
class LogDirPartition:
    """One partition's log in a dir."""

    topic: str
    partition: int
    size_bytes: int
    offset_lag: int


@attrs.frozen
class LogDirReport:
    """One log dir (``total_bytes`` / ``usable_bytes`` -1: unknown)."""

    path: str
    error: ErrorCode
    partitions: tuple[LogDirPartition, ...]
    total_bytes: int = -1
    usable_bytes: int = -1


def describe_log_dirs(
    log_manager: LogManager, wanted: Collection[tuple[str, int]] | None = None
) -> list[LogDirReport]:
    """Every log dir of ``log_manager`` with its open logs (only ``wanted`` ones if given)."""
    offline = log_manager.offline_dirs
    out = []
    for log_dir in log_manager.dirs:
        path = log_dir.path
        if path in offline:
            out.append(LogDirReport(path, ErrorCode.KAFKA_STORAGE_ERROR, ()))
            continue
        partitions = []
        for tp, log in sorted(log_manager.logs.items()):
            if log.dir_path.rsplit("/", 1)[0].rstrip("/") != path.rstrip("/") or log.is_offline:
                continue
            if wanted is not None and (tp.topic, tp.partition) not in wanted:
                continue
            lag = max(log.high_watermark - log.log_end_offset, 0)
            partitions.append(LogDirPartition(tp.topic, tp.partition, log.size_bytes, lag))
        try:
            usage = shutil.disk_usage(path)
            total, usable = usage.total, usage.free
        except OSError:
            total = usable = -1
        out.append(LogDirReport(path, ErrorCode.NONE, tuple(partitions), total, usable))
    return out
