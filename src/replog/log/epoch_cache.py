"""The leader-epoch cache: which leader epoch started at which offset of this log.

The cache is a list of `EpochEntry` kept strictly increasing in *both* fields: a later epoch
always starts at a later offset. ``assign`` enforces that by dropping, from the tail, every entry
the new one contradicts. Followers use ``end_offset_for`` answers to find where their log diverges
from the leader's (KIP-101, KIP-279), so the rules here follow Kafka's LeaderEpochFileCache
exactly; the tests replay worked examples of each rule.

Durability: every change (``assign``, both truncations, ``clear_and_flush``) rewrites the
``leader-epoch-checkpoint`` synchronously before the in-memory state changes. Kafka flushes
truncations asynchronously and repairs stale entries at load time; writing synchronously is
simpler and strictly safer (the file never holds entries the log has dropped). If the write
fails, the `StorageError` propagates and the cache is left as it was.

Storage: two parallel lists (epochs, start offsets), so ``latest_*`` is O(1), lookups are
``bisect`` over either list, and ``assign`` pops from the tail. Caches hold a handful of entries;
the lists are copied on change so that a failed checkpoint write changes nothing.
"""

from __future__ import annotations

import bisect
import threading
from collections.abc import Iterable, Sequence
from typing import Protocol

import attrs

from replog.epochs import UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
from replog.errors import invariant

__all__ = ["EpochCheckpoint", "EpochEntry", "LeaderEpochCache"]

_INT32_MAX = 2**31 - 1
_INT64_MAX = 2**63 - 1


def _check_epoch(_instance: object, _attribute: object, value: int) -> None:
    if not 0 <= value <= _INT32_MAX:
        raise ValueError(f"leader epoch must be in [0, {_INT32_MAX}], got {value}")


def _check_offset(_instance: object, _attribute: object, value: int) -> None:
    if not 0 <= value <= _INT64_MAX:
        raise ValueError(f"start offset must be in [0, {_INT64_MAX}], got {value}")


@attrs.frozen
class EpochEntry:
    """Leader epoch ``epoch`` wrote its first record at ``start_offset`` (int32, int64; >= 0)."""

    epoch: int = attrs.field(validator=_check_epoch)
    start_offset: int = attrs.field(validator=_check_offset)


class EpochCheckpoint(Protocol):
    """Where a cache keeps its entries (``replog.log.checkpoints.LeaderEpochCheckpointFile``:
    the ``leader-epoch-checkpoint`` file)."""

    def read(self) -> list[EpochEntry]:
        """The entries stored."""

    def write(self, entries: Iterable[EpochEntry]) -> None:
        """Replace the stored entries (durably)."""


@attrs.define(init=False)
class LeaderEpochCache:
    """Epoch -> start offset for one partition's log, persisted to a checkpoint on every change.

    ``entries`` seed the cache without writing anything (entries that contradict each other are
    resolved by the ``assign`` rules, as Kafka does when it loads the file). ``checkpoint=None``
    keeps the cache in memory only. Use `LeaderEpochCache.load` to read an existing checkpoint.
    """

    _checkpoint: EpochCheckpoint | None
    _epochs: list[int]
    _start_offsets: list[int]
    _lock: threading.RLock

    def __init__(
        self, checkpoint: EpochCheckpoint | None, entries: Sequence[EpochEntry] = ()
    ) -> None:
        epochs: list[int] = []
        start_offsets: list[int] = []
        for entry in entries:
            _assign_into(epochs, start_offsets, entry.epoch, entry.start_offset)
        self.__attrs_init__(checkpoint, epochs, start_offsets, threading.RLock())

    @classmethod
    def load(cls, checkpoint: EpochCheckpoint) -> LeaderEpochCache:
        """Build the cache from the checkpoint file (missing file: empty cache)."""
        return cls(checkpoint, checkpoint.read())

    # ----------------------------------------------------------------- reads

    @property
    def entries(self) -> list[EpochEntry]:
        """A copy of the entries, ascending."""
        with self._lock:
            return [
                EpochEntry(e, o) for e, o in zip(self._epochs, self._start_offsets, strict=True)
            ]

    @property
    def latest_epoch(self) -> int | None:
        """The highest epoch in the cache, or None when empty."""
        epochs = self._epochs
        return epochs[-1] if epochs else None

    @property
    def latest_entry(self) -> EpochEntry | None:
        """The entry of the highest epoch, or None when empty."""
        with self._lock:
            if not self._epochs:
                return None
            return EpochEntry(self._epochs[-1], self._start_offsets[-1])

    @property
    def earliest_entry(self) -> EpochEntry | None:
        """The entry of the lowest epoch, or None when empty."""
        with self._lock:
            if not self._epochs:
                return None
            return EpochEntry(self._epochs[0], self._start_offsets[0])

    def __len__(self) -> int:
        return len(self._epochs)

    def end_offset_for(self, epoch: int, log_end_offset: int) -> tuple[int, int]:
        """Answer OffsetsForLeaderEpoch: ``(e, end)`` where ``e`` is the largest cached epoch
        <= ``epoch`` and ``end`` is the start offset of the first epoch above ``epoch`` (the log
        end offset when ``epoch`` is the latest). ``(-1, -1)`` when ``epoch`` is undefined
        (negative) or above every cached epoch; ``(epoch, first start)`` when it is below all.
        """
        undefined = (UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET)
        if epoch < 0:
            # Kafka checks only == -1; other negatives come from a broken peer, same answer.
            return undefined
        with self._lock:
            epochs = self._epochs
            if epochs and epoch == epochs[-1]:
                return (epoch, log_end_offset)
            higher = bisect.bisect_right(epochs, epoch)
            if higher == len(epochs):
                return undefined
            higher_start = self._start_offsets[higher]
            if higher == 0:
                return (epoch, higher_start)
            return (epochs[higher - 1], higher_start)

    def epoch_for_offset(self, offset: int) -> int | None:
        """The epoch that wrote ``offset``: the entry with the largest start offset <= it."""
        with self._lock:
            index = bisect.bisect_right(self._start_offsets, offset) - 1
            return self._epochs[index] if index >= 0 else None

    # ----------------------------------------------------------------- changes

    def assign(self, epoch: int, start_offset: int) -> bool:
        """Record that ``epoch`` starts at ``start_offset``; returns whether the cache changed.

        Nothing changes when ``epoch`` is already the latest and starts at or before
        ``start_offset``. Otherwise every tail entry with epoch >= ``epoch`` or start offset >=
        ``start_offset`` is dropped first, keeping both fields strictly increasing, and the
        checkpoint is written before returning. ValueError for negative arguments.
        """
        EpochEntry(epoch, start_offset)  # validates the range
        with self._lock:
            epochs, start_offsets = self._epochs[:], self._start_offsets[:]
            if not _assign_into(epochs, start_offsets, epoch, start_offset):
                return False
            self._commit(epochs, start_offsets)
            return True

    def truncate_from_end(self, end_offset: int) -> None:
        """Drop every entry starting at or after ``end_offset`` (the log was cut there)."""
        _check_offset(None, None, end_offset)
        with self._lock:
            if not self._start_offsets or self._start_offsets[-1] < end_offset:
                return
            keep = bisect.bisect_left(self._start_offsets, end_offset)
            self._commit(self._epochs[:keep], self._start_offsets[:keep])

    def truncate_from_start(self, start_offset: int) -> None:
        """The log now starts at ``start_offset``: drop entries starting at or before it and
        re-insert the last dropped epoch as starting at ``start_offset``."""
        _check_offset(None, None, start_offset)
        with self._lock:
            if not self._start_offsets or self._start_offsets[0] >= start_offset:
                return
            dropped = bisect.bisect_right(self._start_offsets, start_offset)
            epochs = [self._epochs[dropped - 1], *self._epochs[dropped:]]
            start_offsets = [start_offset, *self._start_offsets[dropped:]]
            self._commit(epochs, start_offsets)

    def clear_and_flush(self) -> None:
        """Forget every entry and write an empty checkpoint."""
        with self._lock:
            self._commit([], [])

    def _commit(self, epochs: list[int], start_offsets: list[int]) -> None:
        """Write the checkpoint for the new state, then adopt it (a failed write changes
        nothing in memory)."""
        _check_strictly_increasing(epochs, start_offsets)
        if self._checkpoint is not None:
            self._checkpoint.write(
                [EpochEntry(e, o) for e, o in zip(epochs, start_offsets, strict=True)]
            )
        self._epochs = epochs
        self._start_offsets = start_offsets


def _assign_into(epochs: list[int], start_offsets: list[int], epoch: int, start: int) -> bool:
    """Apply the assign rule to the two lists in place; returns whether they changed."""
    if epochs and epoch == epochs[-1] and start >= start_offsets[-1]:
        return False
    while epochs and (epochs[-1] >= epoch or start_offsets[-1] >= start):
        epochs.pop()
        start_offsets.pop()
    epochs.append(epoch)
    start_offsets.append(start)
    return True


def _check_strictly_increasing(epochs: Iterable[int], start_offsets: Iterable[int]) -> None:
    previous: tuple[int, int] | None = None
    for pair in zip(epochs, start_offsets, strict=True):
        invariant(
            previous is None or (previous[0] < pair[0] and previous[1] < pair[1]),
            f"epoch cache entries not strictly increasing: {previous} then {pair}",
        )
        previous = pair
