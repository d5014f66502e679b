"""The slice of the storage engine the replication core needs: ``ReplicaLog``.

``replog.log.Log`` satisfies this protocol structurally; tests may use any other object that
does. Keeping the surface this small is what lets the same machine run on real segment files,
on a fault-injecting filesystem, or inside a deterministic simulator.
"""

from __future__ import annotations

from typing import Protocol

import attrs

__all__ = ["BytesSlice", "LogSlice", "ReplicaLog"]


class LogSlice(Protocol):
    """Record batches to send: the log's own zero-copy ``FetchSlice`` or ``BytesSlice``."""

    @property
    def size_bytes(self) -> int:
        """Total bytes in the slice."""
        ...

    def to_bytes(self) -> bytes:
        """Materialise the slice (followers append these bytes as-is)."""
        ...


@attrs.frozen
class BytesSlice:
    """A ``LogSlice`` over bytes already in memory (what a follower receives off the wire)."""

    data: bytes = b""

    @property
    def size_bytes(self) -> int:
        """Length of ``data``."""
        return len(self.data)

    def to_bytes(self) -> bytes:
        """The bytes themselves."""
        return self.data


class ReplicaLog(Protocol):
    """What ``Partition`` calls on its local log (a subset of ``replog.log.Log``)."""

    @property
    def log_start_offset(self) -> int:
        """First offset still readable."""
        ...

    @property
    def log_end_offset(self) -> int:
        """Next offset to be written (LEO)."""
        ...

    @property
    def high_watermark(self) -> int:
        """Offsets below this are committed."""
        ...

    @property
    def recovery_point(self) -> int:
        """Offsets below this are fsynced (the flushed offset)."""
        ...

    def assign_epoch_start_offset(self, epoch: int, start_offset: int) -> None:
        """Record that ``epoch`` starts at ``start_offset`` (a new leader, even without
        writes: KAFKA-7415); flushed before returning."""
        ...

    def append_as_leader(self, batch: bytes, leader_epoch: int) -> object:
        """Assign offsets from the LEO, stamp ``leader_epoch`` and append."""
        ...

    def append_as_follower(self, batches: bytes) -> object:
        """Append batches with the offsets and epochs the leader gave them."""
        ...

    def read(
        self,
        start_offset: int,
        max_bytes: int,
        *,
        max_offset: int | None = None,
        min_one_batch: bool = True,
    ) -> LogSlice:
        """Batches from ``start_offset``, at most ``max_bytes`` (one batch at least)."""
        ...

    def update_high_watermark(self, hw: int) -> int:
        """Set the HW, clamped to [log start, LEO]; may go backwards (followers)."""
        ...

    def maybe_increment_high_watermark(self, hw: int) -> bool:
        """Raise the HW to ``hw`` if that is an increase; return whether it moved."""
        ...

    def truncate_to(self, offset: int) -> bool:
        """Drop every offset >= ``offset`` (and epoch entries from there on)."""
        ...

    def truncate_fully_and_start_at(self, offset: int) -> None:
        """Delete everything and restart the (empty) log at ``offset``."""
        ...

    def maybe_increment_log_start_offset(self, offset: int) -> bool:
        """Advance the log start offset (never past the HW); return whether it moved."""
        ...

    def end_offset_for_epoch(self, epoch: int) -> tuple[int, int]:
        """OffsetsForLeaderEpoch: (largest epoch <= ``epoch``, its end offset), or (-1, -1)."""
        ...

    def latest_epoch(self) -> int | None:
        """Epoch of the newest epoch-cache entry; None when the cache is empty."""
        ...
