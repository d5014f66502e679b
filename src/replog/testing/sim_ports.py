"""The port through which the simulator's parts see the simulation.

Each part (``SimBroker``, the clients, the consumers, the group clients, the nemesis) declares,
as a ``Protocol`` in its own module, exactly the members of ``Simulation`` it uses, and is
typed against that, never against ``Simulation``: what a part may touch is written down where
it is used, and no part imports the simulation (the simulation imports them). ``SimCore`` is
what the parts share: the time of the current event, the seed's options and generator,
scheduling, tracing and reporting a violation. A part that needs only a few collaborators is
handed those instead (``clients.Rpc``: the network, the brokers and the scheduler).
"""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Protocol

from replog.testing.options import SimOptions

__all__ = ["SimCore"]


class SimCore(Protocol):
    """The members of ``Simulation`` the parts share."""

    @property
    def now_ms(self) -> int:
        """The simulated time of the current event."""

    @property
    def opts(self) -> SimOptions:
        """What the seed drew."""

    @property
    def rng(self) -> random.Random:
        """The seed's generator: every delay and fault."""

    def after(self, delay_ms: int, action: Callable[[], None]) -> None:
        """Run ``action`` ``delay_ms`` from now."""

    def jitter(self, interval_ms: int) -> int:
        """``interval_ms`` +- 25 %, seeded."""

    def trace(self, message: str) -> None:
        """Print a step when ``--verbose``."""

    def violation(self, message: str) -> None:
        """Record a violation (and stop the run, unless its kind is a known bug)."""
