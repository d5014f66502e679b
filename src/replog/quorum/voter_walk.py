"""`call_until_served`: the retry walk over the quorum's voters that both client channels share.

`QuorumChannel` (replog's calls, routed to the Raft leader) and `BrokerRpcChannel` (Kafka's
BrokerRegistration and BrokerHeartbeat, routed to the active controller) differ in how a voter
says "not me" (NOT_LEADER with a hint, NOT_CONTROLLER) and in which voter they try next; the
walk around those choices is the same, and lives here:

- each try gets what is left of the call's deadline; past it, `CoordinatorUnavailableError`
  naming the last reason a try failed;
- a try whose connection failed (`ConnectionLost`) is tried again elsewhere after a short pause
  -- unless the request may have reached the voter (``sent``) and is not ``idempotent``: a write
  that left may have committed, so its outcome is unknown (`CoordinatorUnavailableError`);
- a try the voter declined (`TryElsewhere`) is tried again, pausing first when it asks to.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

import attrs

from replog.clock import Clock
from replog.coord.errors import CoordinatorUnavailableError

__all__ = ["PAUSE_MS", "ConnectionLost", "TryElsewhere", "call_until_served"]

PAUSE_MS = 25
"""The pause between tries when no voter serves (nobody leads yet, or a connection failed)."""

T = TypeVar("T")


class ConnectionLost(Exception):
    """A connection failed; ``sent``: the request may have reached the voter."""

    def __init__(self, sent: bool, why: str) -> None:
        super().__init__(why)
        self.sent = sent


@attrs.frozen
class TryElsewhere:
    """A voter declined the call without executing it (``why`` for the final error);
    ``pause``: wait before the next try (nobody is known to serve)."""

    why: str
    pause: bool


def call_until_served(
    try_once: Callable[[int], T | TryElsewhere],
    *,
    clock: Clock,
    timeout_ms: int,
    idempotent: bool,
    server: str,
    pause_ms: Callable[[int], None],
) -> T:
    """``try_once(remaining_ms)``'s first answer that is not a `TryElsewhere`, trying again as
    the module docstring says. ``server`` names whom the call looks for ("quorum leader",
    "active controller") in the errors; ``pause_ms`` waits (a closed channel cuts it short)."""
    deadline_ms = clock.monotonic_ms() + timeout_ms
    last = "no voter answered"
    while True:
        remaining_ms = deadline_ms - clock.monotonic_ms()
        if remaining_ms <= 0:
            raise CoordinatorUnavailableError(f"no {server} within {timeout_ms} ms: {last}")
        try:
            outcome = try_once(remaining_ms)
        except ConnectionLost as exc:
            if exc.sent and not idempotent:
                raise CoordinatorUnavailableError(
                    f"connection to the {server} lost, outcome unknown: {exc}"
                ) from None
            last = str(exc)
            pause_ms(min(PAUSE_MS, remaining_ms))
            continue
        if not isinstance(outcome, TryElsewhere):
            return outcome
        last = outcome.why
        if outcome.pause:
            pause_ms(min(PAUSE_MS, remaining_ms))
