"""The idempotent producer's bookkeeping (``replog.client.idempotence``), without IO: stamps,
retries with the same stamp, and the epoch bump after a gap."""

from __future__ import annotations

from typing import Any

from replog.client.accumulator import PendingRecord, ProducerBatch
from replog.client.idempotence import EPOCH_MAX, IdempotenceState
from replog.errors import ErrorCode

TP = ("t", 0)


def batch(records: int) -> ProducerBatch:
    future: Any = None  # never resolved here
    pending = [PendingRecord(None, b"v", (), 0, future) for _ in range(records)]
    return ProducerBatch("t", 0, 0, records=pending)


def stamp(state: IdempotenceState, b: ProducerBatch, in_flight: int = 0) -> tuple[int, int, int]:
    assert state.stamp(b, in_flight)
    return (b.producer_id, b.producer_epoch, b.base_sequence)


def test_batches_are_stamped_in_sequence_and_a_retry_keeps_its_stamp() -> None:
    state = IdempotenceState()
    first = batch(3)
    assert not state.stamp(first, 0)  # no producer id yet
    state.set_producer_id(40, 0)
    assert stamp(state, first) == (40, 0, 0)
    second = batch(2)
    assert stamp(state, second, in_flight=1) == (40, 0, 3)
    assert state.on_error(first, ErrorCode.NOT_LEADER_OR_FOLLOWER)  # retriable: same stamp
    first.attempts = 1
    assert not state.may_send(first, in_flight=1)  # a retry goes alone
    assert state.may_send(first, in_flight=0)
    assert stamp(state, first) == (40, 0, 0)
    state.on_acked(first)
    state.on_acked(second)
    assert stamp(state, batch(1)) == (40, 0, 5)
    assert not state.on_error(batch(1), ErrorCode.MESSAGE_TOO_LARGE)  # not retriable


def test_a_gap_at_the_lowest_unacked_batch_bumps_the_epoch_and_restarts_at_zero() -> None:
    state = IdempotenceState()
    state.set_producer_id(40, 3)
    lost, later = batch(2), batch(1)
    stamp(state, lost)
    stamp(state, later, in_flight=1)
    assert state.on_error(later, ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER)  # not the lowest
    assert (state.epoch, state.bumps) == (3, 0)
    assert state.on_error(lost, ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER)
    assert (state.epoch, state.bumps) == (4, 1)
    assert not state.stamp(batch(1), in_flight=1)  # old-epoch batches still in flight
    # Nothing in flight: the unacked batches lose their stamps and go again from 0.
    assert stamp(state, lost, in_flight=0) == (40, 4, 0)
    assert stamp(state, later, in_flight=1) == (40, 4, 2)


def test_a_bump_past_the_last_epoch_asks_for_a_new_producer_id() -> None:
    state = IdempotenceState()
    state.set_producer_id(40, EPOCH_MAX)
    lost = batch(1)
    stamp(state, lost)
    assert state.on_error(lost, ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER)
    assert not state.has_producer_id and not state.stamp(lost, 0)
    state.set_producer_id(41, 0)
    assert stamp(state, lost) == (41, 0, 0)
