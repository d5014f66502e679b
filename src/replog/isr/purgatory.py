"""Delayed operations: acks=all produces waiting for the HW (Kafka's produce purgatory).

A ``Purgatory`` holds operations keyed by deadline (``sortedcontainers``) and, optionally, by a
*watch key*: the offset whose arrival completes the operation. For produces the watch key is the
required offset, so an HW move pops exactly the produces it satisfies. Every queue is bounded; a
full queue refuses new operations rather than growing without limit. (Long-polling fetches wait
in the broker's request layer, ``replog.broker.driver.requests.fetch``, not here.)
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Generic, TypeVar

import attrs
from sortedcontainers import SortedList

from replog.errors import invariant

__all__ = ["DelayedProduce", "Purgatory"]

T = TypeVar("T")


@attrs.frozen
class DelayedProduce:
    """An acks=all produce waiting until the HW reaches ``required_offset`` (last offset + 1)."""

    request_id: int
    base_offset: int
    required_offset: int
    deadline_ms: int
    #: an idempotent producer's retry: the original batch's timestamp (-1 otherwise)
    log_append_time_ms: int = -1


class Purgatory(Generic[T]):
    """Pending operations by deadline (and optionally by watch key), bounded by ``capacity``."""

    def __init__(self, capacity: int, watch_key: Callable[[T], int] | None = None) -> None:
        invariant(capacity > 0, f"purgatory capacity {capacity} must be positive")
        self._capacity = capacity
        self._watch_key = watch_key
        self._seq = itertools.count()
        self._ops: dict[int, tuple[int, int, T]] = {}  # seq -> (deadline_ms, key, op)
        self._by_deadline: SortedList = SortedList()  # (deadline_ms, seq)
        self._by_key: SortedList = SortedList()  # (key, seq)

    def __len__(self) -> int:
        return len(self._ops)

    @property
    def is_full(self) -> bool:
        """True when ``add`` would be refused."""
        return len(self._ops) >= self._capacity

    def add(self, op: T, deadline_ms: int) -> bool:
        """Park ``op`` until ``deadline_ms``; False (nothing parked) when the queue is full."""
        if self.is_full:
            return False
        seq = next(self._seq)
        key = self._watch_key(op) if self._watch_key is not None else 0
        self._ops[seq] = (deadline_ms, key, op)
        self._by_deadline.add((deadline_ms, seq))
        self._by_key.add((key, seq))
        return True

    def next_deadline_ms(self) -> int | None:
        """The earliest deadline, so the driver knows when to call back; None when empty."""
        if not self._by_deadline:
            return None
        deadline_ms: int = self._by_deadline[0][0]
        return deadline_ms

    def pop_expired(self, now_ms: int) -> list[T]:
        """Remove and return every operation whose deadline is <= ``now_ms``, oldest first."""
        expired: list[T] = []
        while self._by_deadline and self._by_deadline[0][0] <= now_ms:
            _, seq = self._by_deadline[0]
            expired.append(self._remove(seq))
        return expired

    def pop_watched_through(self, key_max: int) -> list[T]:
        """Remove and return every operation whose watch key is <= ``key_max``."""
        invariant(self._watch_key is not None, "pop_watched_through needs a watch key")
        done: list[T] = []
        while self._by_key and self._by_key[0][0] <= key_max:
            _, seq = self._by_key[0]
            done.append(self._remove(seq))
        return done

    def pop_where(self, predicate: Callable[[T], bool]) -> list[T]:
        """Remove and return every operation for which ``predicate`` holds, by deadline."""
        chosen = [seq for _, seq in self._by_deadline if predicate(self._ops[seq][2])]
        return [self._remove(seq) for seq in chosen]

    def drain(self) -> list[T]:
        """Remove and return everything, by deadline."""
        return self.pop_where(lambda _op: True)

    def _remove(self, seq: int) -> T:
        deadline_ms, key, op = self._ops.pop(seq)
        self._by_deadline.remove((deadline_ms, seq))
        self._by_key.remove((key, seq))
        return op
