"""``LogCleaning``: when the broker runs a log cleaning, and swapping its result in.

Every ``log_cleaner_backoff_ms`` while no cleaning runs (at once after one that did
something), the log manager picks the dirtiest compacted log and plans a cleaning; its heavy
pass runs off the loop (``RunCleaning``; the shell reports with ``on_cleaning_done``) and its
result is swapped in under ``exclusive`` (it deletes segments). With
``log_cleaner_io_bytes_per_second_max`` the next one waits until the bytes moved fit the rate.
A log truncated, cut by retention or closed while its cleaning runs aborts it
(``Log.cleaning_generation``); the cleaning's output is then discarded. No cleaning starts
while the broker stops.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Protocol

from replog.broker.driver.ports import DriverCore
from replog.errors import StorageError
from replog.log.cleaner import CleaningTask
from replog.log.log_cleaner import CleaningResult

__all__ = ["CleaningHost", "LogCleaning"]

_log = logging.getLogger("replog.broker.driver")


class CleaningHost(DriverCore, Protocol):
    """What the log cleaning schedule uses of the driver."""

    def exclusive(self, action: Callable[[], None]) -> None:
        """Run ``action`` when no group commit is in flight."""


class LogCleaning:
    """See the module docstring."""

    def __init__(self, driver: CleaningHost) -> None:
        self._driver = driver
        self._task: CleaningTask | None = None
        self._next_ms = 0

    @property
    def in_flight(self) -> bool:
        """A cleaning's heavy pass runs off the loop."""
        return self._task is not None

    def maybe_start(self, now_ms: int, *, stopping: bool) -> None:
        """Plan and start a cleaning if one is due."""
        driver = self._driver
        config = driver.config
        if not config.log_cleaner_enable or self._task is not None:
            return
        if now_ms < self._next_ms or stopping:
            return
        task = driver.log_manager.begin_cleaning(config.log_cleaner_dedupe_buffer_bytes)
        if task is None:
            self._next_ms = now_ms + config.log_cleaner_backoff_ms
            return
        self._task = task
        driver.outbox.clean(
            task, lambda _r, _e: driver.exclusive(lambda: self._cleaned(task, now_ms))
        )

    def abort(self, *, forget: bool = False) -> None:
        """Abort the running cleaning (it reports soon; ``forget``: a crash, it reports to
        nobody)."""
        if self._task is not None:
            self._task.abort()
            if forget:
                self._task = None

    def _cleaned(self, task: CleaningTask, started_ms: int) -> None:
        """Swap a finished cleaning in (``exclusive``: it deletes segments)."""
        driver = self._driver
        config = driver.config
        self._task = None
        try:
            result = driver.log_manager.complete_cleaning(task)
        except StorageError as exc:
            _log.error("broker %s: log cleaning swap failed: %s", driver.broker_id, exc)
            result = CleaningResult.FAILED
        wait_ms = 0
        rate = config.log_cleaner_io_bytes_per_second_max
        outcome = task.outcome
        if rate is not None and outcome is not None:
            stats = outcome.stats
            moved = stats.map_bytes_read + stats.bytes_read + stats.bytes_written
            wait_ms = moved * 1000 // rate - (driver.now_ms - started_ms)
        if result is not CleaningResult.SWAPPED:
            wait_ms = max(wait_ms, config.log_cleaner_backoff_ms)
        self._next_ms = driver.now_ms + max(wait_ms, 0)
