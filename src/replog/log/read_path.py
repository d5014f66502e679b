"""The read path of a log: the batches from an offset, bounded in bytes and by an offset (the
HW), across segments and over what compaction removed, as a `FetchSlice` of file pieces
(``Log.read`` checks the range and the log's state, then reads here).

A read starts in the segment holding the offset and serves from the first batch that reaches
it. A segment with no such batch is damaged or short (a consistent segment holds every offset
below the next one's base) -- unless the offsets are below the clean offset, where the cleaner
may have removed the segment's last batches: then the read goes on in the next segment, and
ends empty if that one starts at or past the bound. A segment's own reads never serve a damaged
batch (`LogSegment.read`).
"""

from __future__ import annotations

import attrs

from replog.errors import CorruptRecordError, StorageError, unreachable
from replog.log.fs import FileSlice
from replog.log.segment import LogSegment
from replog.log.segment_list import SegmentList

__all__ = ["FetchSlice", "SegmentReadError", "read_slice"]


@attrs.frozen
class FetchSlice:
    """The bytes a read returns, as file pieces that can be sent without copying."""

    pieces: tuple[FileSlice, ...]
    start_offset: int

    @property
    def size_bytes(self) -> int:
        """Total bytes across the pieces."""
        return sum(piece.size_bytes for piece in self.pieces)

    def to_bytes(self) -> bytes:
        """Materialise the slice (tests and in-process readers; the broker uses sendfile)."""
        return b"".join(piece.read() for piece in self.pieces)


_NO_PIECES: tuple[FileSlice, ...] = ()


class SegmentReadError(Exception):
    """A segment's file could not be read; ``cause`` is the `OSError` (or `StorageError`) the
    reader takes the log offline with."""

    def __init__(self, cause: OSError | StorageError) -> None:
        super().__init__(str(cause))
        self.cause = cause


def read_slice(
    segments: SegmentList,
    start_offset: int,
    max_bytes: int,
    *,
    limit_offset: int,
    log_end_offset: int,
    clean_offset: int,
    min_one_batch: bool,
) -> FetchSlice:
    """Batches from the one holding ``start_offset`` (in [log start, ``log_end_offset``]),
    at most ``max_bytes`` (the first batch whole when ``min_one_batch``), never reaching
    ``limit_offset`` (exclusive). `CorruptRecordError` for a read that starts at a damaged or
    missing batch; `SegmentReadError` when a file read fails."""
    if start_offset >= limit_offset:
        return FetchSlice(_NO_PIECES, start_offset)
    read_from = start_offset
    for segment, following in segments.walk_from(start_offset):
        segment_end = log_end_offset if following is None else following
        try:
            piece = _read_segment(
                segment, read_from, limit_offset, segment_end, max_bytes, min_one_batch
            )
        except (OSError, StorageError) as exc:
            raise SegmentReadError(exc) from exc
        if piece is not None:
            if piece.size_bytes == 0:
                return FetchSlice(_NO_PIECES, start_offset)
            return FetchSlice((piece,), start_offset)
        if following is None or following > clean_offset:
            raise segment.missing_offset_error(segment_end) or CorruptRecordError(
                f"no batch of {segment!r} holds offset {read_from}",
                path=segment.path(".log"),
                first_offset=read_from,
                last_offset=segment_end - 1,
            )
        if following >= limit_offset:  # the cleaner emptied the rest of what may be served
            return FetchSlice(_NO_PIECES, start_offset)
        read_from = following  # compacted away: go on in the next one
    unreachable(f"a read from {start_offset} passed the active segment of {segments!r}")


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
