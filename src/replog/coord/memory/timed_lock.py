"""The memory store's lock: one ``threading.Lock`` guards the whole store, and every call takes
it within the call's timeout (else ``RequestTimeoutError``, as a remote store's timeout)."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator

from replog.errors import RequestTimeoutError

__all__ = ["TimedLock"]


class TimedLock:
    """A ``threading.Lock`` whose acquire is bounded (``RequestTimeoutError``)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()

    def acquire(self, timeout_ms: int) -> None:
        """Take the lock within ``timeout_ms`` or raise ``RequestTimeoutError``."""
        if not self._lock.acquire(timeout=timeout_ms / 1000):
            raise RequestTimeoutError(f"coordinator busy for {timeout_ms} ms")

    def release(self) -> None:
        """Release the lock."""
        self._lock.release()

    @contextlib.contextmanager
    def held(self, timeout_ms: int) -> Iterator[None]:
        """Hold the lock for a ``with`` block."""
        self.acquire(timeout_ms)
        try:
            yield
        finally:
            self._lock.release()
