"""`Canvass`: the role of a voter that has no leader to follow (Unattached, Voted,
Prospective, Candidate, Resigned) -- its election timer (E1, E5, E8) and the voters it asks
until each answers: for pre-votes (E3), votes (E5), or, once resigned, to acknowledge the
resignation (E8).

The core makes one on entering such a state and throws it away on the next change of state.
The timer runs ``election_timeout_ms`` plus a random part of it (so that voters do not all
stand at once); a lost election shortens it to a random binary-exponential backoff. The
request goes to every voter still awaited at once, then again once per request timeout.
"""

from __future__ import annotations

from collections.abc import Callable

import attrs

from replog.raft.config import RaftConfig
from replog.raft.messages import Message
from replog.raft.pending_ready import PendingReady

__all__ = ["Canvass"]


@attrs.define(eq=False)
class Canvass:
    """One voter's wait for a leader (see the module docstring)."""

    config: RaftConfig
    _ready: PendingReady
    _rng: Callable[[int], int]
    #: when the election timer fires
    deadline_ms: int
    #: the voters asked that have not answered yet
    awaiting: set[int]
    #: when the request goes to them again
    next_send_ms: int
    #: the election rounds this candidacy lost so far (E5's backoff grows with them)
    retries: int = 1

    @classmethod
    def start(
        cls,
        config: RaftConfig,
        ready: PendingReady,
        rng: Callable[[int], int],
        *,
        asking: bool,
        now_ms: int,
    ) -> Canvass:
        """The role of a voter entering its state at ``now_ms`` (``asking``: a Prospective,
        Candidate or Resigned node, which asks every other voter)."""
        base_ms = config.election_timeout_ms
        deadline_ms = now_ms + base_ms + rng(base_ms)
        awaiting = set(config.voters) - {config.node_id} if asking else set()
        return cls(config, ready, rng, deadline_ms, awaiting, now_ms)

    def timed_out(self, now_ms: int) -> bool:
        """The election timer fired."""
        return now_ms >= self.deadline_ms

    def next_deadline_ms(self) -> int:
        """When the timer fires, or the request is due again."""
        if self.awaiting:
            return min(self.deadline_ms, self.next_send_ms)
        return self.deadline_ms

    def resend(self, now_ms: int, build: Callable[[], Message]) -> None:
        """Send ``build()`` to every voter still awaited, once per request timeout."""
        if not self.awaiting or now_ms < self.next_send_ms:
            return
        message = build()
        for voter in sorted(self.awaiting):
            self._ready.send(voter, message)
        self.next_send_ms = now_ms + self.config.request_timeout_ms

    def answered(self, voter: int) -> None:
        """``voter`` answered: ask it no more."""
        self.awaiting.discard(voter)

    def back_off(self, retries: int, now_ms: int) -> None:
        """E5: the election after ``retries`` rounds was lost: stop asking, and stand again
        after a binary-exponential backoff (Kafka's formula), at most
        ``election_backoff_max_ms``."""
        spread = 2 << min(20, max(retries, 1) - 1)
        backoff_ms = self.config.retry_backoff_ms * self._rng(spread)
        backoff_ms = min(backoff_ms, self.config.election_backoff_max_ms)
        self.deadline_ms = min(self.deadline_ms, now_ms + backoff_ms)
        self.awaiting = set()
