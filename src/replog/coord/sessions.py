"""Session-state bookkeeping shared by the backends: the registry of session listeners (per
broker id) that ``add_session_listener`` fills and a backend's session transitions notify."""

from __future__ import annotations

import itertools
import threading
from collections.abc import Callable

from replog.metadata.types import SessionEvent, SessionState, Subscription

__all__ = ["SessionListeners", "session_event"]

SessionCallback = Callable[[SessionEvent], None]


def session_event(broker_id: int, incarnation_epoch: int, state: SessionState) -> SessionEvent:
    """The event telling listeners that incarnation's session is now ``state``."""
    return SessionEvent(broker_id, incarnation_epoch, state)


class SessionListeners:
    """Session listeners by broker id (thread-safe; its own lock, never held while calling)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._by_broker: dict[int, dict[int, SessionCallback]] = {}
        self._tokens = itertools.count(1)

    def add(self, broker_id: int, callback: SessionCallback) -> Subscription:
        """Register ``callback`` for ``broker_id``'s sessions; the handle removes it."""
        with self._lock:
            token = next(self._tokens)
            self._by_broker.setdefault(broker_id, {})[token] = callback

        def cancel() -> None:
            with self._lock:
                self._by_broker.get(broker_id, {}).pop(token, None)

        return Subscription(cancel)

    def callbacks(self, broker_id: int) -> list[SessionCallback]:
        """The callbacks registered for ``broker_id`` now, in registration order."""
        with self._lock:
            return list(self._by_broker.get(broker_id, {}).values())

    def clear(self) -> None:
        """Drop every listener (the handle closed)."""
        with self._lock:
            self._by_broker.clear()
