"""``StopSequence``: a broker's shutdown as driver states, so both shells (the asyncio
``replog.Broker`` and the simulator's broker) run the same one.

After ``BrokerDriver.begin_stop`` the shell calls ``step(now_ms)`` and does what the phase it
returns asks, then calls it again:

1. ``MOVING_LEADERSHIP``: a controlled shutdown is moving this broker's leaderships away (or
   waiting for ``controlled_shutdown_timeout_ms``); the broker still serves. Keep ticking the
   driver and carrying out its effects.
2. ``STOP_SERVING``: nothing is left to move. Stop serving clients (close the listener), then
   call ``step`` again at once.
3. ``HALTED``: the driver halted (parked requests failed, groups unloaded, fetch sessions and
   the controller role ended). Carry out its effects, then call again at once.
4. ``DRAINING``: a group commit's fsync or a log cleaning (aborted by the halt) still runs off
   the loop; no log may close under it. Carry out effects and call again when it may be done.
5. ``DOWN``: the logs are closed cleanly (checkpoints, the clean-shutdown marker) and the
   driver is OFFLINE; the effects left are the unregistration's coordinator calls, which the
   shell runs to the end (errors ignored: the session expires anyway) before tearing down.
"""

from __future__ import annotations

import enum
from typing import Protocol

__all__ = ["StopHost", "StopPhase", "StopSequence"]


class StopPhase(enum.Enum):
    """Where a stopping broker is; see the module docstring."""

    MOVING_LEADERSHIP = "moving leadership"
    STOP_SERVING = "stop serving"
    HALTED = "halted"
    DRAINING = "draining"
    DOWN = "down"


class StopHost(Protocol):
    """What the stop sequence uses of the driver."""

    @property
    def stop_ready(self) -> bool:
        """Nothing left to move (or the deadline passed)."""

    @property
    def flush_in_flight(self) -> bool:
        """A group commit runs off the loop."""

    @property
    def cleaning_in_flight(self) -> bool:
        """A log cleaning runs off the loop."""

    def halt(self) -> None:
        """End every activity."""

    def close_logs(self) -> None:
        """Flush, checkpoint and close the logs."""

    def unregister(self) -> None:
        """End the session cleanly."""


class StopSequence:
    """See the module docstring."""

    def __init__(self, driver: StopHost) -> None:
        self._driver = driver
        self.phase: StopPhase | None = None

    def begin(self) -> None:
        """The driver began stopping (``BrokerDriver.begin_stop``)."""
        self.phase = StopPhase.MOVING_LEADERSHIP

    def step(self) -> StopPhase:
        """Advance as far as the driver's state allows; the phase says what the shell does."""
        driver = self._driver
        if self.phase is None:
            raise RuntimeError("the broker is not stopping (begin_stop first)")
        if self.phase is StopPhase.MOVING_LEADERSHIP and driver.stop_ready:
            self.phase = StopPhase.STOP_SERVING
        elif self.phase is StopPhase.STOP_SERVING:
            driver.halt()
            self.phase = StopPhase.HALTED
        elif self.phase in (StopPhase.HALTED, StopPhase.DRAINING):
            if driver.flush_in_flight or driver.cleaning_in_flight:
                self.phase = StopPhase.DRAINING
            else:
                driver.close_logs()
                driver.unregister()
                self.phase = StopPhase.DOWN
        return self.phase
