"""One clock for the whole library: monotonic milliseconds for timeouts and ages of things this
process started, wall milliseconds for what is compared with record timestamps (segment ages,
time retention, time lookups).

Every component that needs time takes a ``Clock``; nothing else reads ``time``. Production code
uses ``SYSTEM_CLOCK``; tests and the deterministic simulator use a ``ManualClock``, whose wall
time is its monotonic time plus a fixed offset, so both move together and never go back.

A ``ManualClock`` is also callable (``clock()`` is its monotonic time), so it can stand where a
plain ``Callable[[], int]`` millisecond source is expected.
"""

from __future__ import annotations

import time
from typing import Protocol, runtime_checkable

__all__ = [
    "SYSTEM_CLOCK",
    "Clock",
    "ManualClock",
    "SystemClock",
    "monotonic_ms",
    "monotonic_s",
    "sleep_s",
    "wall_ms",
]


@runtime_checkable
class Clock(Protocol):
    """A source of time in milliseconds."""

    def monotonic_ms(self) -> int:
        """Milliseconds on a clock that never goes back (not related to the calendar)."""
        ...

    def wall_ms(self) -> int:
        """Milliseconds since the Unix epoch (what record timestamps are compared with)."""
        ...


class SystemClock:
    """The process's clocks: ``time.monotonic_ns`` and ``time.time_ns``."""

    def monotonic_ms(self) -> int:
        """See ``Clock.monotonic_ms``."""
        return time.monotonic_ns() // 1_000_000

    def wall_ms(self) -> int:
        """See ``Clock.wall_ms``."""
        return time.time_ns() // 1_000_000

    def __repr__(self) -> str:
        return "SystemClock()"


SYSTEM_CLOCK = SystemClock()
"""The clock of real runs."""


def monotonic_ms() -> int:
    """``SYSTEM_CLOCK.monotonic_ms()``, as a plain function (a default ``clock_ms``)."""
    return SYSTEM_CLOCK.monotonic_ms()


def wall_ms() -> int:
    """``SYSTEM_CLOCK.wall_ms()``, as a plain function."""
    return SYSTEM_CLOCK.wall_ms()


def monotonic_s() -> float:
    """The system's monotonic time in (fractional) seconds: for deadlines of the blocking
    calls of threads that talk to external services (ZooKeeper, etcd, Spark executors), whose
    timeouts are given in seconds. Pure machines never use it; they receive ``now_ms``."""
    return time.monotonic()


def sleep_s(seconds: float) -> None:
    """Block the calling thread for ``seconds`` of real time (retry back-off of the blocking
    coordination clients; never in the broker's event loop or a pure machine)."""
    time.sleep(seconds)


class ManualClock:
    """A clock that moves only when told (tests, the simulator). ``wall_ms`` is
    ``now_ms + wall_offset_ms``; the default offset is a fixed, realistic epoch time so that
    record timestamps built from it look like real ones."""

    DEFAULT_WALL_OFFSET_MS = 1_700_000_000_000

    def __init__(self, now_ms: int = 0, *, wall_offset_ms: int = DEFAULT_WALL_OFFSET_MS) -> None:
        if now_ms < 0:
            raise ValueError(f"a clock starts at 0 or later, not {now_ms}")
        self.now_ms = now_ms
        self.wall_offset_ms = wall_offset_ms

    def __call__(self) -> int:
        return self.now_ms

    def monotonic_ms(self) -> int:
        """See ``Clock.monotonic_ms``."""
        return self.now_ms

    def wall_ms(self) -> int:
        """See ``Clock.wall_ms``."""
        return self.now_ms + self.wall_offset_ms

    def set(self, now_ms: int) -> None:
        """Move to ``now_ms``; time never goes back."""
        if now_ms < self.now_ms:
            raise ValueError(f"clock cannot go back from {self.now_ms} to {now_ms}")
        self.now_ms = now_ms

    def advance(self, delta_ms: int) -> int:
        """Move forward by ``delta_ms`` and return the new time."""
        self.set(self.now_ms + delta_ms)
        return self.now_ms

    def __repr__(self) -> str:
        return f"ManualClock(now_ms={self.now_ms})"
