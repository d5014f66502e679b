"""Turning the records bytes of a Fetch answer into the records a consumer returns (pure).

A broker answers a Fetch with whole batches starting at the batch that *contains* the requested
offset, so the first batch may hold records below it: they are skipped. The last batch may be cut
short by the partition byte limit: ``iter_batches`` stops before a partial batch, and the
consumer fetches it whole next time. Control batches (transaction markers) return nothing but
move the position past them, as does a batch whose tail records were compacted away.
"""

from __future__ import annotations

from itertools import repeat

import attrs

from replog.log.decoding import decode_columns
from replog.log.records import Buffer, RecordColumns, iter_batches

__all__ = [
    "ColumnSlice",
    "ConsumerRecord",
    "FetchColumns",
    "RecordSlice",
    "consumer_record",
    "slice_columns",
    "slice_records",
]


@attrs.frozen(kw_only=True)
class ConsumerRecord:
    """One record as ``poll`` returns it; ``leader_epoch`` is its batch's partition leader epoch."""

    topic: str
    partition: int
    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...] = ()
    leader_epoch: int = -1


@attrs.frozen
class RecordSlice:
    """What one partition's records bytes yield from ``fetch_offset``.

    ``next_offset`` is the new position; ``last_epoch`` the leader epoch of the batch the last
    consumed offset came from (-1 when nothing was consumed)."""

    records: list[ConsumerRecord]
    next_offset: int
    last_epoch: int


@attrs.frozen
class ColumnSlice:
    """Records of one batch of one partition, as columns (``RecordColumns``), in offset order;
    ``leader_epoch`` is the batch's partition leader epoch."""

    topic: str
    partition: int
    leader_epoch: int
    columns: RecordColumns

    def __len__(self) -> int:
        return len(self.columns.offsets)

    def records(self) -> list[ConsumerRecord]:
        """The same records as the ``ConsumerRecord``s ``poll`` returns."""
        c = self.columns
        return list(
            map(
                consumer_record,
                repeat(self.topic),
                repeat(self.partition),
                c.offsets,
                c.timestamps,
                c.keys,
                c.values,
                c.headers,
                repeat(self.leader_epoch),
            )
        )


def consumer_record(
    topic: str,
    partition: int,
    offset: int,
    timestamp: int,
    key: bytes | None,
    value: bytes | None,
    headers: tuple[tuple[str, bytes | None], ...],
    leader_epoch: int,
) -> ConsumerRecord:
    """A ``ConsumerRecord`` from positional columns (for ``map`` over zipped columns)."""
    return ConsumerRecord(
        topic=topic,
        partition=partition,
        offset=offset,
        timestamp=timestamp,
        key=key,
        value=value,
        headers=headers,
        leader_epoch=leader_epoch,
    )


@attrs.frozen
class FetchColumns:
    """``RecordSlice`` as columns: one ``ColumnSlice`` per batch that yielded records."""

    slices: list[ColumnSlice]
    next_offset: int
    last_epoch: int

    @property
    def count(self) -> int:
        """How many records the slices hold."""
        return sum(map(len, self.slices))


def slice_columns(
    topic: str, partition: int, buf: Buffer, fetch_offset: int, records_max: int
) -> FetchColumns:
    """``slice_records`` as columns: the same records, positions and epochs (see module doc)."""
    out: list[ColumnSlice] = []
    taken = 0
    next_offset = fetch_offset
    last_epoch = -1
    for position, header in iter_batches(buf):
        if header.next_offset <= next_offset:
            continue  # entirely below the position
        if taken >= records_max:
            break
        if header.is_control:
            next_offset, last_epoch = header.next_offset, header.partition_leader_epoch
            continue
        columns = decode_columns(buf, position)
        offsets = columns.offsets
        count = len(offsets)
        budget = records_max - taken
        batch_done = True
        if (
            count
            and offsets[-1] - offsets[0] == count - 1
            and offsets == list(range(offsets[0], offsets[0] + count))
        ):  # consecutive offsets (the usual case): pick the records by arithmetic
            first = max(0, next_offset - offsets[0])
            stop = min(count, first + budget)
            batch_done = stop == count
            picked = columns if first == 0 and batch_done else columns.slice(first, stop)
        else:  # gaps or disorder: the record-by-record rule of ``slice_records``
            indexes: list[int] = []
            last = next_offset
            for index, offset in enumerate(offsets):
                if offset < last:
                    continue
                if len(indexes) >= budget:
                    batch_done = False
                    break
                indexes.append(index)
                last = offset + 1
            picked = RecordColumns(
                [offsets[i] for i in indexes],
                [columns.timestamps[i] for i in indexes],
                [columns.keys[i] for i in indexes],
                [columns.values[i] for i in indexes],
                [columns.headers[i] for i in indexes],
            )
        if picked.offsets:
            out.append(ColumnSlice(topic, partition, header.partition_leader_epoch, picked))
            taken += len(picked.offsets)
            next_offset = picked.offsets[-1] + 1
            last_epoch = header.partition_leader_epoch
        if batch_done:
            next_offset = max(next_offset, header.next_offset)
            last_epoch = header.partition_leader_epoch
    return FetchColumns(out, next_offset, last_epoch)


def slice_records(
    topic: str, partition: int, buf: Buffer, fetch_offset: int, records_max: int
) -> RecordSlice:
    """Records at offsets >= ``fetch_offset`` from the whole batches in ``buf``, at most
    ``records_max`` of them (see module doc)."""
    sliced = slice_columns(topic, partition, buf, fetch_offset, records_max)
    out: list[ConsumerRecord] = []
    for column_slice in sliced.slices:
        out += column_slice.records()
    return RecordSlice(out, sliced.next_offset, sliced.last_epoch)
