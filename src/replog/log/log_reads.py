"""Reading a partition log: the batches from an offset, bounded in bytes and by an offset
(the HW), across segments and over what compaction removed (``Log.read`` is the entry)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from replog.errors import CorruptRecordError, OffsetOutOfRangeError, StorageError
from replog.log.fs import FileSlice
from replog.log.log_values import EMPTY_SLICE_PIECES, FetchSlice
from replog.log.segment import LogSegment

if TYPE_CHECKING:
    from replog.log.log import Log

__all__ = ["read_log"]

# What a failed read raises: OSError from a segment file, StorageError from a checkpoint file.
_IO_ERRORS = (OSError, StorageError)


def read_log(
    log: Log, start_offset: int, max_bytes: int, max_offset: int | None, min_one_batch: bool
) -> FetchSlice:
    """See ``Log.read``."""
    log._check_online()
    end = log._next_offset
    if start_offset < log.log_start_offset or start_offset > end:
        raise OffsetOutOfRangeError(start_offset, log.log_start_offset, end)
    limit = end if max_offset is None else min(max_offset, end)
    if start_offset >= limit:
        return FetchSlice(EMPTY_SLICE_PIECES, start_offset)
    index = max(log.segments.bisect_right(start_offset) - 1, 0)
    read_from = start_offset
    while True:
        base = log.segments.keys()[index]
        segment: LogSegment = log.segments[base]
        following = log.segments.keys()[index + 1] if index + 1 < len(log.segments) else None
        segment_end = end if following is None else following
        try:
            piece = _read_segment(segment, read_from, limit, segment_end, max_bytes, min_one_batch)
        except _IO_ERRORS as exc:
            log._fail("read", exc)
        if piece is not None:
            break
        if following is None or following > log.clean_offset:
            # A consistent segment holds every offset below the next one's base.
            raise segment.missing_offset_error(segment_end) or CorruptRecordError(
                f"no batch of {segment!r} holds offset {read_from}",
                path=segment.path(".log"),
                first_offset=read_from,
                last_offset=segment_end - 1,
            )
        if following >= limit:  # the cleaner emptied the rest of what may be served
            return FetchSlice(EMPTY_SLICE_PIECES, start_offset)
        index, read_from = index + 1, following  # compacted away: go on in the next one
    if piece.size_bytes == 0:
        return FetchSlice(EMPTY_SLICE_PIECES, start_offset)
    return FetchSlice((piece,), start_offset)


def _read_segment(
    segment: LogSegment,
    start_offset: int,
    limit: int,
    segment_end: int,
    max_bytes: int,
    min_one_batch: bool,
) -> FileSlice | None:
    """`LogSegment.read` bounded by ``limit`` (exclusive); None if no batch of the segment
    reaches ``start_offset``."""
    max_position = segment.size_bytes
    if limit < segment_end:
        bound = segment.translate_offset(limit)
        if bound is not None:
            max_position = bound.position
    return segment.read(
        start_offset,
        max_bytes,
        max_position,
        min_one_batch=min_one_batch,
        end_offset=segment_end,
    )
