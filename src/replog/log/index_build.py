"""Opening a segment's indexes with every entry checked, and building them from its ``.log``.

Indexes are caches of the ``.log``, rebuilt from it. `open_checked_indexes` maps both files and
runs Kafka's sanity check plus replog's check of every entry (`OffsetIndex.find_bad_entries`,
`TimeIndex.find_bad_entries`); it answers with the indexes or with why they cannot be used.
`index_batches` runs a `BatchWalk` over the ``.log`` and adds the entries `LogSegment.append`
would have made for the same batches (an offset entry, and the running max timestamp, each
time more than ``index_interval_bytes`` passed since the last entry).
"""

from __future__ import annotations

from typing import NamedTuple

from replog.errors import CorruptIndexError
from replog.log.batch_walk import BatchWalk
from replog.log.epoch_cache import LeaderEpochCache
from replog.log.fs import FileSystem
from replog.log.offset_index import OffsetIndex
from replog.log.records import NO_TIMESTAMP
from replog.log.time_index import TimeIndex

__all__ = ["IndexedBatches", "index_batches", "open_checked_indexes"]


def open_checked_indexes(
    fs: FileSystem,
    paths: tuple[str, str],
    base_offset: int,
    max_index_size_bytes: int,
    *,
    log_size_bytes: int,
    end_offset: int | None,
) -> tuple[OffsetIndex, TimeIndex] | str:
    """Map the offset and time index at ``paths`` and check them; returns both, or (having
    closed them) why they cannot be used. ``end_offset`` is the next segment's base, if any."""
    opened: list[OffsetIndex | TimeIndex] = []
    try:
        offset_index = OffsetIndex.open(fs, paths[0], base_offset, max_index_size_bytes)
        opened.append(offset_index)
        time_index = TimeIndex.open(fs, paths[1], base_offset, max_index_size_bytes)
        opened.append(time_index)
    except CorruptIndexError as exc:
        reason = str(exc)
    else:
        found = offset_index.find_bad_entries(log_size_bytes, end_offset)
        reason = f"{offset_index.path}: {found}"
        if found is None:
            found = time_index.find_bad_entries(end_offset)
            if found is None:
                return offset_index, time_index
            reason = f"{time_index.path}: {found}"
    for index in opened:
        index.delete()
    return reason


class IndexedBatches(NamedTuple):
    """What `index_batches` found: the max timestamp (and the last offset of its batch) over
    the valid batches, and the position of the last offset-index entry (0 if none)."""

    max_timestamp: int
    offset_of_max_timestamp: int
    last_entry_position: int


def index_batches(
    walk: BatchWalk,
    offset_index: OffsetIndex,
    time_index: TimeIndex,
    index_interval_bytes: int,
    epoch_cache: LeaderEpochCache | None,
) -> IndexedBatches:
    """Run ``walk`` to its end, indexing every valid batch into the (empty) indexes and
    assigning each new leader epoch to ``epoch_cache``. An index too small for the segment
    (``segment_index_bytes`` shrank since it was written) stays sparser instead of failing."""
    last_entry = 0
    max_timestamp, offset_of_max = NO_TIMESTAMP, -1
    latest_epoch = epoch_cache.latest_epoch if epoch_cache is not None else None
    for batch in walk:
        position = batch.position
        if batch.max_timestamp > max_timestamp:
            max_timestamp, offset_of_max = batch.max_timestamp, batch.last_offset
        if (
            position - last_entry > index_interval_bytes
            and not offset_index.is_full
            and not time_index.is_full
        ):
            offset_index.append(batch.last_offset, position)
            time_index.maybe_append(max_timestamp, offset_of_max)
            last_entry = position
        epoch = batch.leader_epoch
        if (
            epoch_cache is not None
            and epoch >= 0
            and (latest_epoch is None or epoch > latest_epoch)
        ):
            epoch_cache.assign(epoch, batch.base_offset)
            latest_epoch = epoch
    return IndexedBatches(max_timestamp, offset_of_max, last_entry)
