"""What the Raft core knows about its metadata log without reading it: offsets and epochs.

Theory of operation. The core decides every change to the log (appends, truncations, the log
start moving up to a snapshot) and emits it for the driver to apply to the real ``Log``; it
applies the same change to this model at once, so its answers never wait for IO. The model
holds the log start and end offsets, the epoch table (the same `LeaderEpochCache` rules as the
log's ``leader-epoch-checkpoint``, kept in memory) and the latest snapshot id. The driver
checks after every applied change that the real log agrees (start, end, epoch entries).

Three questions are answered here, each a rule from KIP-101/279/595/630:

1. ``end_offset_for_epoch(e)``: the largest epoch <= ``e`` this log has and where it ends (the
   start of the next epoch, or the log end); (-1, -1) above the latest epoch. With an empty
   epoch table (a log that restarted at a fetched snapshot) the snapshot's epoch stands in.
2. ``validate_fetch(offset, epoch)`` (leader side, in this order):
   a. an empty log and a fetch from 0 is valid;
   b. a snapshot is needed if there is one at the log start and the fetch offset is below the
      log start, or equal to it with another last epoch, or the last epoch is older than the
      snapshot's;
   c. otherwise ``(E, end) = end_offset_for_epoch(epoch)``; the fetcher diverges when
      ``E != epoch`` or ``end < offset``, and is told ``(E, end)``;
   d. otherwise the fetch is valid.
3. ``truncation_offset(diverging)`` (follower side, KIP-279), for the leader's ``(E, End)``:
   a. if this log has no epoch at or below ``E``: ``min(End, LEO)``;
   b. if its largest epoch <= ``E`` is not ``E``: the end of that smaller epoch (the next
      fetch names it, and the leader answers again);
   c. otherwise ``min(own end of E, End, LEO)``.
"""

from __future__ import annotations

from collections.abc import Iterable

import attrs

from replog.errors import invariant
from replog.log.epoch_cache import EpochEntry, LeaderEpochCache
from replog.log.records import BatchHeader
from replog.raft.messages import OffsetAndEpoch, RaftSnapshotId

__all__ = ["FetchValidity", "LogModel"]

_UNDEFINED = (-1, -1)


@attrs.frozen
class FetchValidity:
    """The answer of `LogModel.validate_fetch`: valid, diverging at ``diverging``, or needing
    the snapshot ``snapshot_id``."""

    diverging: OffsetAndEpoch | None = None
    snapshot_id: RaftSnapshotId | None = None

    @property
    def valid(self) -> bool:
        """Neither diverging nor needing a snapshot."""
        return self.diverging is None and self.snapshot_id is None


@attrs.define
class LogModel:
    """The core's picture of the metadata log (see the module docstring)."""

    start_offset: int
    end_offset: int
    epochs: LeaderEpochCache
    snapshot: RaftSnapshotId | None

    @classmethod
    def of(
        cls,
        start_offset: int,
        end_offset: int,
        entries: Iterable[EpochEntry],
        snapshot: RaftSnapshotId | None,
    ) -> LogModel:
        """A model of a log that starts at ``start_offset`` and ends at ``end_offset``."""
        invariant(0 <= start_offset <= end_offset, f"log [{start_offset}, {end_offset})")
        invariant(
            snapshot is None or snapshot.end_offset <= end_offset,
            f"snapshot {snapshot} past the log end {end_offset}",
        )
        return cls(start_offset, end_offset, LeaderEpochCache(None, list(entries)), snapshot)

    # ------------------------------------------------------------------------ questions

    @property
    def last_epoch(self) -> int:
        """The epoch of the newest record (0 for an empty log without a snapshot)."""
        latest = self.epochs.latest_epoch
        if latest is not None:
            return latest
        return self.snapshot.epoch if self.snapshot is not None else 0

    @property
    def end(self) -> OffsetAndEpoch:
        """This log's end as Raft compares logs: (last epoch, end offset)."""
        return OffsetAndEpoch(self.last_epoch, self.end_offset)

    def end_offset_for_epoch(self, epoch: int) -> tuple[int, int]:
        """Rule 1: (largest epoch <= ``epoch``, its end offset), or (-1, -1)."""
        if len(self.epochs):
            return self.epochs.end_offset_for(epoch, self.end_offset)
        snapshot = self.snapshot
        if snapshot is None or epoch < 0:
            return _UNDEFINED
        if epoch == snapshot.epoch:
            return (epoch, self.end_offset)
        if epoch > snapshot.epoch:
            return _UNDEFINED
        return (epoch, snapshot.end_offset)  # below every epoch it knows, as the cache answers

    def epoch_for_offset(self, offset: int) -> int:
        """The epoch of the record at ``offset`` (which must be in the log or be the last
        record of the snapshot)."""
        snapshot = self.snapshot
        if snapshot is not None and offset == snapshot.end_offset - 1:
            return snapshot.epoch
        invariant(
            self.start_offset <= offset < self.end_offset,
            f"offset {offset} outside [{self.start_offset}, {self.end_offset})",
        )
        epoch = self.epochs.epoch_for_offset(offset)
        if epoch is None:
            invariant(snapshot is not None, f"no epoch for offset {offset}")
            return snapshot.epoch if snapshot is not None else 0
        return epoch

    def validate_fetch(self, offset: int, epoch: int) -> FetchValidity:
        """Rule 2 (leader side), in order a-d."""
        if self.start_offset == 0 and offset == 0:
            return FetchValidity()
        snapshot = self.snapshot
        if (
            snapshot is not None
            and snapshot.end_offset == self.start_offset
            and (
                offset < self.start_offset
                or (offset == self.start_offset and epoch != snapshot.epoch)
                or epoch < snapshot.epoch
            )
        ):
            return FetchValidity(snapshot_id=snapshot)
        end_epoch, end = self.end_offset_for_epoch(epoch)
        if end_epoch != epoch or end < offset:
            return FetchValidity(diverging=OffsetAndEpoch(end_epoch, end))
        return FetchValidity()

    def truncation_offset(self, diverging: OffsetAndEpoch) -> int:
        """Rule 3 (follower side, KIP-279), branches a-c."""
        own_epoch, own_end = self.end_offset_for_epoch(diverging.epoch)
        if own_end < 0:
            return min(diverging.offset, self.end_offset)
        if own_epoch != diverging.epoch:
            return min(own_end, self.end_offset)
        return min(own_end, diverging.offset, self.end_offset)

    # ------------------------------------------------------------------------ changes

    def append(self, headers: Iterable[BatchHeader]) -> None:
        """Batches were appended at the end (offsets dense, epochs never going down)."""
        for header in headers:
            invariant(
                header.base_offset == self.end_offset,
                f"batch at {header.base_offset} appended at log end {self.end_offset}",
            )
            epoch = header.partition_leader_epoch
            invariant(epoch >= self.last_epoch, f"epoch {epoch} after {self.last_epoch}")
            if epoch != self.epochs.latest_epoch:
                self.epochs.assign(epoch, header.base_offset)
            self.end_offset = header.last_offset + 1

    def truncate_to(self, offset: int) -> None:
        """Everything at or after ``offset`` was removed."""
        invariant(self.start_offset <= offset <= self.end_offset, f"truncate to {offset}")
        self.end_offset = offset
        self.epochs.truncate_from_end(offset)

    def advance_start(self, snapshot: RaftSnapshotId) -> None:
        """A local snapshot at ``snapshot`` exists: the log before it is deleted."""
        invariant(
            self.start_offset <= snapshot.end_offset <= self.end_offset,
            f"snapshot {snapshot} outside the log [{self.start_offset}, {self.end_offset})",
        )
        self.snapshot = snapshot
        self.start_offset = snapshot.end_offset
        self.epochs.truncate_from_start(snapshot.end_offset)

    def reset_to_snapshot(self, snapshot: RaftSnapshotId) -> None:
        """A snapshot fetched from the leader replaced the whole log."""
        self.snapshot = snapshot
        self.start_offset = self.end_offset = snapshot.end_offset
        self.epochs.clear_and_flush()
