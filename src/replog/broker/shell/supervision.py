"""What the broker shell does when its own work raises: never leave the broker half alive.

A step of the shell (a coordinator call's completion applying metadata, a fetch answer, a
group commit's fsync report, a tick) changes driver state that later steps rely on: a busy
flag, a token, a cursor. One that raises partway leaves it unknown, and the asyncio task that
ran it simply ends -- a feed never read again, a flush token never cleared -- while the
listener keeps accepting clients whose requests then wait for good. So every step runs under
one of two policies:

- **fatal** (``supervised``): a step whose skipping would let state diverge (metadata
  application, write outcomes, fetch answers). Its failure is logged at CRITICAL with the
  traceback and handed to ``on_death``, which stops the broker (``Broker`` closes its
  listener so clients fail over, and marks itself failed so the process exits non-zero).
- **retried** (``Retries``): a periodic step that the next period redoes from scratch (the
  tick). A failure is logged with its traceback and the loop goes on; ``failures_max`` in a
  row are a fault that does not heal, and become fatal.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import TypeVar

__all__ = ["OnDeath", "Retries", "run_fatal", "supervised"]

_log = logging.getLogger(__name__)

T = TypeVar("T")

OnDeath = Callable[[str, BaseException], None]
"""Told (what died, why) once a fatal step raised: stop the broker."""


async def supervised(name: str, work: Awaitable[T], on_death: OnDeath) -> T | None:
    """Await ``work``; if it raises (cancellation aside), log CRITICAL with the traceback and
    call ``on_death(name, exc)``. Returns ``work``'s result, None after a death."""
    try:
        return await work
    except asyncio.CancelledError:
        raise
    except Exception as exc:
        _died(name, exc, on_death)
        return None


def run_fatal(name: str, step: Callable[[], None], on_death: OnDeath) -> None:
    """``supervised`` for a step run from a callback (a socket's, a listener's)."""
    try:
        step()
    except Exception as exc:
        _died(name, exc, on_death)


def _died(name: str, exc: Exception, on_death: OnDeath) -> None:
    _log.critical("%s failed; the broker stops", name, exc_info=exc)
    on_death(name, exc)


class Retries:
    """Failures of a periodic step: ``failed`` logs one and says whether the step may go on
    (False once ``failures_max`` came in a row); ``succeeded`` resets the count."""

    def __init__(self, name: str, failures_max: int) -> None:
        self.name = name
        self.failures_max = failures_max
        self.in_a_row = 0

    def succeeded(self) -> None:
        """The step ran through."""
        self.in_a_row = 0

    def failed(self, exc: Exception) -> bool:
        """The step raised ``exc``: log it; False when the failures no longer heal."""
        self.in_a_row += 1
        _log.error(
            "%s failed (%d in a row of at most %d); going on",
            self.name, self.in_a_row, self.failures_max, exc_info=exc,
        )  # fmt: skip
        return self.in_a_row < self.failures_max
