"""Producer state of one partition: what idempotent producers last wrote, so a retried batch is
answered instead of appended twice, and a batch after a gap is refused (KIP-98).

Theory of operation. An idempotent producer stamps every batch with its producer id, its epoch
and the sequence number of the batch's first record (the last record's is ``first + count - 1``,
wrapping from 2**31-1 to 0). For each producer id the partition keeps a `ProducerEntry`: the
producer's epoch, the metadata of its last five batches (`BatchMetadata`: first/last sequence,
first/last offset, max timestamp) and the time it last wrote. The state is a function of the
log: the leader derives it while appending, a follower while appending what it fetched, and a
log that opens replays its batches over the latest snapshot (``producer_snapshot``).

The rules a leader applies to a producer's batch, before anything is written (`check_append`):

1. Same epoch, and the batch's (first, last) sequence equals one of the five retained batches:
   a **duplicate** (a retry whose first answer was lost). Nothing is written; the producer gets
   the offsets and timestamp of the original.
2. Older epoch than the partition's: ``InvalidProducerEpochError`` (a zombie producer).
3. Newer epoch: the batch must start at sequence 0, or it is ``OutOfOrderSequenceError``. A
   producer the partition has no state for (never written here, expired, or retention or the
   cleaner removed its batches) may start at any sequence, as in Kafka since KIP-360 (before
   it, Kafka answered UNKNOWN_PRODUCER_ID; clients since then expect the write to succeed).
4. Same epoch: the first sequence must follow the last one (``last + 1``, or 0 after 2**31-1);
   otherwise ``OutOfOrderSequenceError`` (a batch in between is missing).

Appends that do not come from a producer (a follower's, or a replay at open) are not checked:
they update the state in log order (`apply`), a new epoch clearing the retained batches.

The state here is pure (no IO, no clock): callers pass ``now_ms`` to `remove_expired`.
Transactions (control batches, ``currentTxnFirstOffset``) are not served by replog; control
batches are skipped and the snapshot writes their fields as "none".

For the log cleaner (compaction): the entry of a producer refers to its last batch; a cleaner
that keeps the last batch of every producer in ``active_producers`` (possibly emptied of
records, as Kafka's v2 format allows) keeps the state rebuildable from the log.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import NamedTuple

import attrs

from replog.errors import (
    InvalidProducerEpochError,
    OutOfOrderSequenceError,
    invariant,
)
from replog.log.records import NO_PRODUCER_ID, NO_SEQUENCE

__all__ = [
    "BATCHES_RETAINED",
    "PRODUCER_ID_EXPIRATION_MS_DEFAULT",
    "BatchMetadata",
    "ProducerAppend",
    "ProducerEntry",
    "ProducerState",
    "sequence_add",
]

BATCHES_RETAINED = 5
"""Batches kept per producer for duplicate detection (Kafka's NUM_BATCHES_TO_RETAIN; a producer
may have at most five requests in flight per partition)."""

PRODUCER_ID_EXPIRATION_MS_DEFAULT = 86_400_000
"""Kafka's ``producer.id.expiration.ms``: state of a producer idle this long is dropped."""

_INT32_MAX = 2**31 - 1


def sequence_add(sequence: int, delta: int) -> int:
    """``sequence + delta`` in Kafka's sequence space, which wraps from 2**31-1 to 0."""
    if sequence > _INT32_MAX - delta:
        return delta - (_INT32_MAX - sequence) - 1
    return sequence + delta


def _sequence_sub(sequence: int, delta: int) -> int:
    if sequence < delta:
        return _INT32_MAX - (delta - sequence) + 1
    return sequence - delta


def _follows(last_sequence: int, first_sequence: int) -> bool:
    return first_sequence == last_sequence + 1 or (
        first_sequence == 0 and last_sequence == _INT32_MAX
    )


class BatchMetadata(NamedTuple):
    """One retained batch of a producer: its last sequence and offset, the distance back to its
    first (``offset_delta``, the same for offsets and sequences) and its max timestamp."""

    last_sequence: int
    last_offset: int
    offset_delta: int
    timestamp: int

    @property
    def first_sequence(self) -> int:
        """The batch's first sequence."""
        return _sequence_sub(self.last_sequence, self.offset_delta)

    @property
    def first_offset(self) -> int:
        """The batch's first offset."""
        return self.last_offset - self.offset_delta


class ProducerAppend(NamedTuple):
    """The fields of one appended (or to be appended) batch that producer state looks at."""

    producer_id: int
    producer_epoch: int
    base_sequence: int
    base_offset: int
    last_offset: int
    max_timestamp: int

    @property
    def last_sequence(self) -> int:
        """The sequence of the batch's last record."""
        return sequence_add(self.base_sequence, self.last_offset - self.base_offset)

    def metadata(self) -> BatchMetadata:
        """What a producer entry retains of this batch."""
        delta = self.last_offset - self.base_offset
        return BatchMetadata(self.last_sequence, self.last_offset, delta, self.max_timestamp)


@attrs.frozen
class ProducerEntry:
    """What the partition knows of one producer: its epoch, its last (up to five) batches,
    oldest first, and the max timestamp of its last batch (what expiration compares with)."""

    producer_id: int
    producer_epoch: int
    batches: tuple[BatchMetadata, ...]
    last_timestamp: int
    coordinator_epoch: int = -1

    @property
    def last_sequence(self) -> int:
        """The last sequence written (``NO_SEQUENCE`` when no batch is retained)."""
        return self.batches[-1].last_sequence if self.batches else NO_SEQUENCE

    @property
    def last_offset(self) -> int:
        """The offset of the producer's last record (-1 when no batch is retained)."""
        return self.batches[-1].last_offset if self.batches else -1

    def find_duplicate(self, batch: ProducerAppend) -> BatchMetadata | None:
        """The retained batch ``batch`` repeats (same epoch, same sequence range), or None."""
        if batch.producer_epoch != self.producer_epoch:
            return None
        first, last = batch.base_sequence, batch.last_sequence
        for retained in self.batches:
            if retained.first_sequence == first and retained.last_sequence == last:
                return retained
        return None

    def with_batch(self, batch: ProducerAppend) -> ProducerEntry:
        """This entry after ``batch`` (a new epoch forgets the batches of the old one)."""
        kept = self.batches if batch.producer_epoch == self.producer_epoch else ()
        batches = (*kept, batch.metadata())[-BATCHES_RETAINED:]
        return ProducerEntry(
            self.producer_id,
            batch.producer_epoch,
            batches,
            batch.max_timestamp,
            self.coordinator_epoch,
        )

    @classmethod
    def first(cls, batch: ProducerAppend) -> ProducerEntry:
        """The entry of a producer whose first batch here is ``batch``."""
        return cls(
            batch.producer_id, batch.producer_epoch, (batch.metadata(),), batch.max_timestamp
        )


def _check_one(entry: ProducerEntry | None, batch: ProducerAppend) -> None:
    """Rules 2-4 of the module docstring for one batch (not a duplicate); raises if refused."""
    pid, epoch, first = batch.producer_id, batch.producer_epoch, batch.base_sequence
    where = f"producer {pid} epoch {epoch} at offset {batch.base_offset}"
    if entry is not None and epoch < entry.producer_epoch:
        raise InvalidProducerEpochError(
            f"{where}: epoch is older than the last seen epoch {entry.producer_epoch}", pid, epoch
        )
    if entry is None:
        return  # any sequence starts a producer the partition has no state for (KIP-360)
    if epoch != entry.producer_epoch:
        if first != 0:
            raise OutOfOrderSequenceError(
                f"{where}: a new epoch (was {entry.producer_epoch}) starts at sequence {first}, "
                "not 0",
                pid,
                epoch,
            )
        return
    last = entry.last_sequence
    if not _follows(last, first):
        raise OutOfOrderSequenceError(
            f"{where}: sequence {first} does not follow the last sequence {last}", pid, epoch
        )


@attrs.define
class ProducerState:
    """The producer entries of one partition, and the log offset they reflect.

    ``map_end_offset`` is the offset after the last batch applied: every batch below it is in
    the state, none at or above it."""

    producers: dict[int, ProducerEntry] = attrs.field(factory=dict)
    map_end_offset: int = 0

    @property
    def active_producers(self) -> Mapping[int, ProducerEntry]:
        """Every producer with state here, by producer id (read-only view)."""
        return self.producers

    def last_entry(self, producer_id: int) -> ProducerEntry | None:
        """The entry of ``producer_id``, or None."""
        return self.producers.get(producer_id)

    def check_append(self, batches: Sequence[ProducerAppend]) -> BatchMetadata | None:
        """Check a producer's batches (one request, in order) against the state: the retained
        batch the request repeats (rule 1: nothing may be written), None when all may be
        appended, or raise ``InvalidProducerEpochError`` / ``OutOfOrderSequenceError``.
        Changes nothing: `apply` each batch once written."""
        pending: dict[int, ProducerEntry] = {}
        for batch in batches:
            if batch.producer_id == NO_PRODUCER_ID:
                continue
            committed = self.producers.get(batch.producer_id)
            if committed is not None:
                duplicate = committed.find_duplicate(batch)
                if duplicate is not None:
                    return duplicate
            entry = pending.get(batch.producer_id, committed)
            _check_one(entry, batch)
            pending[batch.producer_id] = (
                ProducerEntry.first(batch) if entry is None else entry.with_batch(batch)
            )
        return None

    def apply(self, batch: ProducerAppend) -> None:
        """Record a batch written to the log (by any origin), in log order; no checks."""
        invariant(
            batch.base_offset >= self.map_end_offset,
            f"producer state at {self.map_end_offset} given a batch at {batch.base_offset}",
        )
        if batch.producer_id != NO_PRODUCER_ID:
            entry = self.producers.get(batch.producer_id)
            self.producers[batch.producer_id] = (
                ProducerEntry.first(batch) if entry is None else entry.with_batch(batch)
            )
        self.map_end_offset = batch.last_offset + 1

    def apply_all(self, batches: Iterable[ProducerAppend]) -> None:
        """`apply` each batch in order."""
        for batch in batches:
            self.apply(batch)

    def advance_to(self, offset: int) -> None:
        """The log has no producer batch below ``offset`` that is not applied (an append of
        batches without producer ids, or a log start moved forward)."""
        self.map_end_offset = max(self.map_end_offset, offset)

    def remove_expired(self, now_ms: int, expiration_ms: int) -> list[int]:
        """Drop producers whose last batch's timestamp is ``expiration_ms`` or more before
        ``now_ms`` (``producer.id.expiration.ms``); returns their ids."""
        expired = [
            pid
            for pid, entry in self.producers.items()
            if now_ms - entry.last_timestamp >= expiration_ms
        ]
        for pid in expired:
            del self.producers[pid]
        return expired

    def reset(self, offset: int, entries: Iterable[ProducerEntry] = ()) -> None:
        """Replace the state: ``entries`` as of log offset ``offset`` (a snapshot, or nothing)."""
        self.producers = {entry.producer_id: entry for entry in entries}
        self.map_end_offset = offset

    def entries(self) -> Iterator[ProducerEntry]:
        """Every entry, by producer id (what a snapshot holds)."""
        for pid in sorted(self.producers):
            yield self.producers[pid]
