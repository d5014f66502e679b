"""What the log's operations hand back: ``AppendInfo`` (what an append wrote), ``FetchSlice``
(what a read returns, as file pieces sendable without copying) and ``PendingFlush`` (a flush
whose fsyncs run off the caller's thread)."""

from __future__ import annotations

from typing import NamedTuple

import attrs

from replog.errors import StorageError
from replog.log.fs import FileSlice
from replog.log.segment import LogSegment

__all__ = ["EMPTY_SLICE_PIECES", "AppendInfo", "FetchSlice", "PendingFlush"]


class AppendInfo(NamedTuple):
    """What an append wrote: offsets [first_offset, last_offset], and sizes. A ``duplicate``
    wrote nothing: it repeats an idempotent producer's batch, which is at [first_offset,
    last_offset] with max timestamp ``max_timestamp`` (what the producer is answered)."""

    first_offset: int
    last_offset: int
    max_timestamp: int
    batch_count: int
    size_bytes: int
    duplicate: bool = False


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


EMPTY_SLICE_PIECES: tuple[FileSlice, ...] = ()


@attrs.define(eq=False)
class PendingFlush:
    """A flush split in two so the fsyncs can run on a worker thread (group commit): every
    batch appended before `Log.begin_flush` is durable once `run` returns."""

    target_offset: int
    segments: list[LogSegment]

    def run(self) -> None:
        """fsync the segments (thread-safe: touches only file descriptors). `StorageError` if
        one fails; the caller takes the log offline (`Log.mark_offline`)."""
        for segment in self.segments:
            try:
                segment.flush()
            except OSError as exc:
                raise StorageError(f"fsync of {segment!r} failed: {exc}", segment.dir_path) from exc
