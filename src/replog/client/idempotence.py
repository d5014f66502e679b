"""The idempotent producer's bookkeeping (KIP-98, with KIP-360's recovery), without IO.

Theory of operation. The producer gets a producer id and epoch from a broker (InitProducerId)
and stamps every batch, when it is first sent, with them and the sequence of its first record;
the partition leader answers a retry of a batch it already wrote with the original offsets
instead of writing it again (``replog.log.producer_state``). A retry therefore reuses the
batch's sequence, and a partition's batches go out in sequence order: a batch being retried is
sent only when no other batch of its partition is in flight, and it waits in its queue ahead of
the batches with higher sequences (``RecordAccumulator.reenqueue``).

Per partition this module keeps the sequence space in use (producer id, epoch, next sequence)
and the batches stamped in it that are not yet acknowledged or failed (``unacked``). What an
error means for a stamped batch:

- OUT_OF_ORDER_SEQUENCE_NUMBER or UNKNOWN_PRODUCER_ID for the partition's *lowest* unacked
  batch: the leader has nothing from that sequence on (it would have answered a duplicate), so
  that batch and every later one of the partition were not written. The producer bumps its
  epoch (a new producer id once the epoch would pass 32767); when nothing of the partition is
  in flight any more, its unacked batches lose their stamps and are sent again from sequence 0
  in the new epoch. No acknowledged record is written twice, and none that was written is sent
  under a new identity.
- The same errors for a later batch: an earlier one is still unresolved; retry as is.
- Any other retriable error: retry with the same stamp. A batch that fails for good leaves the
  unacked set (if it was not written, the next batch's OUT_OF_ORDER answer starts the bump).

Other partitions move to a new epoch only once they have nothing unacked in the old one, so an
old-epoch retry never reaches a partition that has seen the new epoch (INVALID_PRODUCER_EPOCH).
"""

from __future__ import annotations

import attrs

from replog.client.accumulator import ProducerBatch
from replog.errors import ErrorCode
from replog.log.records import NO_PRODUCER_EPOCH, NO_PRODUCER_ID, NO_SEQUENCE
from replog.topics import TopicPartitionLike

__all__ = ["EPOCH_MAX", "IN_FLIGHT_MAX", "IdempotenceState"]

EPOCH_MAX = 32767
"""The largest producer epoch (int16); a bump past it needs a new producer id."""

IN_FLIGHT_MAX = 5
"""Requests in flight per partition an idempotent producer may have (the leader remembers the
last five batches of each producer)."""

_INT32_MAX = 2**31 - 1
_GAP_ERRORS = frozenset({ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER, ErrorCode.UNKNOWN_PRODUCER_ID})


@attrs.define
class _Sequences:
    """One partition's sequence space and its stamped, unresolved batches."""

    producer_id: int
    epoch: int
    next_sequence: int = 0
    unacked: dict[int, ProducerBatch] = attrs.field(factory=dict)
    #: an epoch bump must restart this partition's unacked batches from sequence 0
    reset_pending: bool = False


@attrs.define
class IdempotenceState:
    """The producer id and epoch, and every partition's sequences (see the module doc)."""

    producer_id: int = NO_PRODUCER_ID
    epoch: int = NO_PRODUCER_EPOCH
    _partitions: dict[TopicPartitionLike, _Sequences] = attrs.field(factory=dict)
    #: epoch bumps done (for tests and logs)
    bumps: int = 0

    @property
    def has_producer_id(self) -> bool:
        """Whether batches can be stamped (InitProducerId has answered)."""
        return self.producer_id != NO_PRODUCER_ID

    def set_producer_id(self, producer_id: int, epoch: int) -> None:
        """The broker's InitProducerId answer: a new identity, every partition restarts."""
        self.producer_id, self.epoch = producer_id, epoch

    def _current(self, seqs: _Sequences) -> bool:
        return (seqs.producer_id, seqs.epoch) == (self.producer_id, self.epoch)

    def may_send(self, batch: ProducerBatch, in_flight: int) -> bool:
        """Whether ``batch``, the head of its partition's queue, may be sent now with
        ``in_flight`` requests of that partition outstanding."""
        if in_flight == 0:
            return True
        if batch.attempts > 0 or batch.has_sequence:
            return False  # a retry goes alone, so nothing overtakes it
        seqs = self._partitions.get(batch.tp)
        return seqs is None or (self._current(seqs) and not seqs.reset_pending)

    def stamp(self, batch: ProducerBatch, in_flight: int) -> bool:
        """Stamp ``batch`` before it is sent (a retry keeps its stamp). False when it must
        wait: its partition still has old-epoch batches unresolved (or no producer id yet)."""
        if not self.has_producer_id:
            return False
        tp = batch.tp
        seqs = self._partitions.get(tp)
        if seqs is not None and seqs.reset_pending and in_flight == 0:
            for waiting in seqs.unacked.values():
                waiting.set_sequence(NO_PRODUCER_ID, NO_PRODUCER_EPOCH, NO_SEQUENCE)
            seqs.unacked.clear()
            seqs.reset_pending = False
        if batch.has_sequence:
            return True
        if seqs is None or (not self._current(seqs) and not seqs.unacked and in_flight == 0):
            seqs = self._partitions[tp] = _Sequences(self.producer_id, self.epoch)
        if not self._current(seqs) or seqs.reset_pending:
            return False
        batch.set_sequence(seqs.producer_id, seqs.epoch, seqs.next_sequence)
        seqs.unacked[seqs.next_sequence] = batch
        seqs.next_sequence = (seqs.next_sequence + len(batch.records)) % (_INT32_MAX + 1)
        return True

    def on_acked(self, batch: ProducerBatch) -> None:
        """The leader acknowledged ``batch``."""
        self._forget(batch)

    def on_failed(self, batch: ProducerBatch) -> None:
        """``batch`` failed for good (it is not sent again)."""
        self._forget(batch)

    def _forget(self, batch: ProducerBatch) -> None:
        seqs = self._partitions.get(batch.tp)
        if seqs is not None and seqs.unacked.get(batch.base_sequence) is batch:
            del seqs.unacked[batch.base_sequence]

    def on_error(self, batch: ProducerBatch, code: ErrorCode) -> bool:
        """A stamped batch got ``code``: returns whether it may be retried (then with the
        same stamp, or restamped after an epoch bump). OUT_OF_ORDER / UNKNOWN_PRODUCER_ID for
        the partition's lowest unacked batch bumps the epoch (module docstring)."""
        if code not in _GAP_ERRORS:
            return code.retriable
        seqs = self._partitions.get(batch.tp)
        if seqs is None or not batch.has_sequence or batch.base_sequence not in seqs.unacked:
            return False
        if batch.base_sequence == min(seqs.unacked) and not seqs.reset_pending:
            self._bump()
            seqs.reset_pending = True
        return True

    def _bump(self) -> None:
        """A new epoch (a new producer id when the epoch is exhausted: the producer asks)."""
        self.bumps += 1
        if self.epoch >= EPOCH_MAX:
            self.producer_id, self.epoch = NO_PRODUCER_ID, NO_PRODUCER_EPOCH
        else:
            self.epoch += 1
