"""`ProducerStateManager`: a log's producer state (``producer_state``) kept in step with its
segments, through snapshot files (``producer_snapshot``) and replays of the log.

Theory of operation. The state must always equal what the log's batches imply, so every change
of the log has a counterpart here (`Log` calls them):

- **open** (`load`): snapshots that name no segment are strays and go (the newest one past the
  last segment's base stays: the clean-shutdown snapshot). After an unclean shutdown nothing
  above the recovery point is trusted, so snapshots above it go too. The newest snapshot left
  is read (a corrupt one is deleted and the next older tried, down to none: the state starts
  empty at the first segment), producers past ``producer.id.expiration.ms`` are skipped, and
  the batches from the snapshot's offset to the log end are replayed, each checked first (a
  damaged one fails the load with ``CorruptRecordError``: see `read_producer_batches`). A
  snapshot of the result is written when it covers more than the newest file.
- **append**: the leader checks a producer's batches first (``ProducerState.check_append``);
  every appended batch, a leader's or a follower's, is applied after the write.
- **roll**: a snapshot at the new segment's base offset (the state of everything before it).
- **retention**: the snapshot named by a deleted segment goes with it.
- **truncation**: snapshots above the new end go; the state reloads from the newest snapshot at
  or below it and replays up to it (nothing to do if no producer had state). A full truncation
  clears everything.
- **close**: a snapshot at the log end (a clean shutdown then replays nothing at open).
- **expiration** (`remove_expired`): the broker's periodic duty.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator

import attrs

from replog.errors import CorruptProducerSnapshotError
from replog.log.fs import FileSystem
from replog.log.producer_snapshot import ProducerSnapshots
from replog.log.producer_state import ProducerAppend, ProducerState
from replog.log.records import HEADER_STRUCT, NO_PRODUCER_ID, RECORD_BATCH_OVERHEAD
from replog.log.segment import BatchPosition, LogSegment
from replog.log.segment_list import SegmentList

__all__ = ["ProducerStateManager", "read_producer_batches"]

_log = logging.getLogger(__name__)
_CONTROL_BIT = 0x20


def read_producer_batches(segments: SegmentList, start: int, end: int) -> Iterator[ProducerAppend]:
    """The batches of ``segments`` from offset ``start`` (batches that begin below it are
    skipped) up to ``end``, by their headers. Control batches come with no producer id.

    Each batch is checked before its header is believed (`LogSegment.check_batch`: the walk
    recovery does -- CRC, dense offsets, leader epochs -- done once per segment and kept for
    reads), and a segment's batches must reach the next segment (`LogSegment.check_complete`):
    below the recovery point a batch may be damaged, and a header read from it (a flipped base
    offset) would not fit the state. Damage raises `CorruptRecordError`."""
    if not segments or start >= end:
        return
    for segment in segments.from_offset(start):
        if segment.base_offset >= end:
            return
        segment_end = end if segment.next_base_offset is None else segment.next_base_offset
        for found in segment.batches_from(start):
            segment.check_batch(found, segment_end)
            if found.base_offset >= end:
                return
            if found.base_offset < start:
                continue
            yield _producer_batch(segment, found)
        segment.check_complete(min(segment_end, end))


def _producer_batch(segment: LogSegment, found: BatchPosition) -> ProducerAppend:
    """The producer fields of the (checked) batch ``found``."""
    header = segment.log_file.pread(found.position, RECORD_BATCH_OVERHEAD)
    fields = HEADER_STRUCT.unpack_from(header)
    attributes, max_timestamp = fields[5], fields[8]
    producer_id, producer_epoch, base_sequence = fields[9], fields[10], fields[11]
    if attributes & _CONTROL_BIT:
        producer_id = NO_PRODUCER_ID
    return ProducerAppend(
        producer_id,
        producer_epoch,
        base_sequence,
        found.base_offset,
        found.last_offset,
        max_timestamp,
    )


@attrs.define
class ProducerStateManager:
    """The producer state and snapshot files of one log (see the module docstring)."""

    snapshots: ProducerSnapshots
    state: ProducerState
    expiration_ms: int
    #: what the last load or reload did, for logs and tests
    loaded_from: int | None = None
    replayed_batches: int = 0
    dropped_snapshots: list[str] = attrs.field(factory=list)

    @classmethod
    def load(
        cls,
        fs: FileSystem,
        dir_path: str,
        segments: SegmentList,
        *,
        log_end_offset: int,
        trusted_offset: int,
        now_ms: int,
        expiration_ms: int,
    ) -> ProducerStateManager:
        """Rebuild the state of a log that opens (``trusted_offset``: the log end after a
        clean shutdown, the recovery point otherwise)."""
        manager = cls(ProducerSnapshots.scan(fs, dir_path), ProducerState(), expiration_ms)
        manager._remove_strays(segments, log_end_offset)
        manager.snapshots.delete_above(min(trusted_offset, log_end_offset))
        manager._reload(segments, log_end_offset, now_ms)
        manager.take_snapshot()
        return manager

    def _remove_strays(self, segments: SegmentList, log_end_offset: int) -> None:
        bases = set(segments)
        newest = max(bases, default=0)
        self.snapshots.delete_above(log_end_offset)
        strays = [o for o in self.snapshots.offsets if o not in bases]
        keep = strays[-1] if strays and strays[-1] > newest else None
        self.snapshots.delete_where(o for o in strays if o != keep)

    def _reload(self, segments: SegmentList, end_offset: int, now_ms: int) -> None:
        """The state at ``end_offset``: the newest readable snapshot at or below it, then a
        replay of the batches from there."""
        first_base = segments.first_base if segments else end_offset
        while True:
            offset = self.snapshots.latest_at_or_below(end_offset)
            if offset is None or offset < first_base:
                self.state.reset(min(first_base, end_offset))
                self.loaded_from = None
                break
            try:
                entries = self.snapshots.read(offset)
            except CorruptProducerSnapshotError as exc:
                self.dropped_snapshots.append(exc.path)
                self.snapshots.drop_corrupt(offset, exc)
                continue
            live = [e for e in entries if now_ms - e.last_timestamp < self.expiration_ms]
            self.state.reset(offset, live)
            self.loaded_from = offset
            break
        start = self.state.map_end_offset
        self.replayed_batches = 0
        for batch in read_producer_batches(segments, start, end_offset):
            self.state.apply(batch)
            self.replayed_batches += 1
        self.state.advance_to(end_offset)

    # -- the log's changes ------------------------------------------------------------------

    def take_snapshot(self) -> None:
        """Write a snapshot at the state's end offset if it covers more than the newest one
        (Kafka's lastMapOffset > lastSnapOffset)."""
        offset = self.state.map_end_offset
        if offset > (self.snapshots.latest or 0):
            self.snapshots.write(offset, self.state.entries())

    def on_append(self, batches: list[ProducerAppend]) -> None:
        """``batches`` were written (a leader's, checked first, or a follower's), in order."""
        state = self.state
        for batch in batches:
            state.apply(batch)

    def on_roll(self, new_base_offset: int) -> None:
        """A new segment starts at ``new_base_offset`` (the log end): snapshot there."""
        self.state.advance_to(new_base_offset)
        self.take_snapshot()

    def on_close(self, log_end_offset: int) -> None:
        """The log closes cleanly at ``log_end_offset``: snapshot there, so the next open
        replays nothing."""
        self.state.advance_to(log_end_offset)
        self.take_snapshot()

    def on_segments_deleted(self, base_offsets: list[int]) -> None:
        """Retention deleted the segments at ``base_offsets``: their snapshots go too."""
        self.snapshots.delete_where(base_offsets)

    def truncate_to(self, segments: SegmentList, offset: int, now_ms: int) -> None:
        """The log now ends at ``offset`` (``segments`` already cut there)."""
        self.snapshots.delete_above(offset)
        if not self.state.producers:
            self.state.reset(offset)
            return
        self._reload(segments, offset, now_ms)

    def truncate_fully(self, offset: int) -> None:
        """The log was emptied and restarts at ``offset``."""
        self.snapshots.delete_all()
        self.state.reset(offset)

    def remove_expired(self, now_ms: int) -> list[int]:
        """Drop producers idle for ``expiration_ms`` (by their last batch's timestamp)."""
        expired = self.state.remove_expired(now_ms, self.expiration_ms)
        if expired:
            _log.debug("%s: expired producer ids %s", self.snapshots.dir_path, expired)
        return expired
