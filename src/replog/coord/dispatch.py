"""Ordered callback delivery for coordinator listeners, shared by backends.

A backend enqueues callbacks while it holds its own lock (so the queue order is the order of
the store's writes) and calls ``run()`` after releasing it. ``run()`` makes the calling thread
the single deliverer until the queue is empty; a thread that finds a deliverer already at work
returns at once, and the deliverer picks its callbacks up. So callbacks run one at a time, in
enqueue order, never under the store lock, and a callback may call the coordinator again (its
own writes are delivered after it returns, not re-entrantly).

A callback that raises is logged and skipped: one broken listener must not stop the others or
the writer that happened to deliver.
"""

from __future__ import annotations

import collections
import logging
import threading
from collections.abc import Callable

__all__ = ["Dispatcher"]

_log = logging.getLogger(__name__)


class Dispatcher:
    """A FIFO of callbacks run by whichever caller of ``run()`` gets there first."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._queue: collections.deque[Callable[[], None]] = collections.deque()
        self._running = False

    def enqueue(self, fn: Callable[[], None]) -> None:
        """Queue ``fn``; it runs on some thread's next ``run()``."""
        with self._lock:
            self._queue.append(fn)

    def run(self) -> None:
        """Run queued callbacks until none is left, unless another thread is already doing it."""
        with self._lock:
            if self._running:
                return
            self._running = True
        try:
            while True:
                with self._lock:
                    if not self._queue:
                        self._running = False
                        return
                    fn = self._queue.popleft()
                try:
                    fn()
                except Exception:
                    _log.exception("coordinator listener raised; continuing with the next")
        except BaseException:
            with self._lock:
                self._running = False
            raise
