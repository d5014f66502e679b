"""The feed subscriptions of `RaftCoordinator` (``quorum/client.py``): a thread each,
long-polling the quorum leader (``Watch``) from its cursor, so a subscription survives leader
changes without a gap. History that is gone is pushed as a ``resync_required`` batch, after
which the subscription follows on from the feed head.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any

from replog.coord.contract import MAX_CHANGES_PER_BATCH
from replog.coord.errors import (
    CoordinatorClosedError,
    CoordinatorUnavailableError,
    MustResyncError,
)
from replog.metadata.types import ChangeBatch, Subscription
from replog.quorum import commands as rc

__all__ = ["WATCH_WAIT_MS", "FeedSubscription"]

_log = logging.getLogger(__name__)

WATCH_WAIT_MS = 1_000
"""How long the leader holds a ``Watch`` with nothing new before answering empty."""


class FeedSubscription:
    """One ``subscribe``: a thread long-polling the leader from its cursor through ``read``
    (the handle's read; ``closed`` says when the handle closed)."""

    def __init__(
        self,
        read: Callable[[Any, int | None], Any],
        closed: Callable[[], bool],
        timeout_ms: int,
        callback: Callable[[ChangeBatch], None],
        cursor: int | None,
    ) -> None:
        self._read = read
        self._closed = closed
        self._timeout_ms = timeout_ms
        self._callback = callback
        self._cursor = cursor
        self._resync = False
        self._deliver_lock = threading.Lock()
        self.handle = Subscription(self._cancel)
        self._stopped = threading.Event()
        self._thread = threading.Thread(target=self._run, name="replog-quorum-feed", daemon=True)

    def start(self) -> None:
        """Begin polling."""
        self._thread.start()

    def close(self) -> None:
        """Stop (the handle closed)."""
        self.handle.close()

    def _cancel(self) -> None:
        with self._deliver_lock:
            self._stopped.set()

    def _deliver(self, batch: ChangeBatch) -> None:
        with self._deliver_lock:
            if self._stopped.is_set():
                return
            try:
                self._callback(batch)
            except Exception:  # a broken listener must not stop the feed
                _log.exception("feed subscriber raised; continuing")

    def _run(self) -> None:
        while not self._stopped.is_set() and not self._closed():
            try:
                if self._cursor is None:
                    self._cursor = self._read(rc.FeedHead(), None)
                    if self._resync:
                        self._resync = False
                        self._deliver(ChangeBatch((), self._cursor, resync_required=True))
                    continue
                watch = rc.Watch(self._cursor, MAX_CHANGES_PER_BATCH, WATCH_WAIT_MS)
                batch: ChangeBatch = self._read(watch, WATCH_WAIT_MS + self._timeout_ms)
            except MustResyncError:
                self._cursor = None  # from the head, once it is read
                self._resync = True
                continue
            except (CoordinatorUnavailableError, CoordinatorClosedError):
                self._stopped.wait(0.05)
                continue
            if batch.changes:
                self._deliver(batch)
            self._cursor = batch.next_seq
