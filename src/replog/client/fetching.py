"""Turning the records bytes of a Fetch answer into the records a consumer returns (pure).

A broker answers a Fetch with whole batches starting at the batch that *contains* the requested
offset, so the first batch may hold records below it: they are skipped. The last batch may be cut
short by the partition byte limit: ``iter_batches`` stops before a partial batch, and the
consumer fetches it whole next time. Control batches (transaction markers) return nothing but
move the position past them, as does a batch whose tail records were compacted away.
"""

from __future__ import annotations

import attrs

from replog.log.records import Buffer, decode_records, iter_batches

__all__ = ["ConsumerRecord", "FetchSlice", "slice_records"]


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
class FetchSlice:
    """What one partition's records bytes yield from ``fetch_offset``.

    ``next_offset`` is the new position; ``last_epoch`` the leader epoch of the batch the last
    consumed offset came from (-1 when nothing was consumed)."""

    records: list[ConsumerRecord]
    next_offset: int
    last_epoch: int


def slice_records(
    topic: str, partition: int, buf: Buffer, fetch_offset: int, records_max: int
) -> FetchSlice:
    """Records at offsets >= ``fetch_offset`` from the whole batches in ``buf``, at most
    ``records_max`` of them (see module doc)."""
    out: list[ConsumerRecord] = []
    next_offset = fetch_offset
    last_epoch = -1
    for position, header in iter_batches(buf):
        if header.next_offset <= next_offset:
            continue  # entirely below the position
        if len(out) >= records_max:
            break
        if header.is_control:
            next_offset, last_epoch = header.next_offset, header.partition_leader_epoch
            continue
        batch_done = True
        for record in decode_records(buf, position):
            if record.offset < next_offset:
                continue
            if len(out) >= records_max:
                batch_done = False
                break
            out.append(
                ConsumerRecord(
                    topic=topic,
                    partition=partition,
                    offset=record.offset,
                    timestamp=record.timestamp,
                    key=record.key,
                    value=record.value,
                    headers=record.headers,
                    leader_epoch=header.partition_leader_epoch,
                )
            )
            next_offset = record.offset + 1
            last_epoch = header.partition_leader_epoch
        if batch_done:
            next_offset = max(next_offset, header.next_offset)
            last_epoch = header.partition_leader_epoch
    return FetchSlice(out, next_offset, last_epoch)
