"""The driver's outbox: effects for the shell, and what waits for their results.

Every effect that produces a result (a coordinator call, a request to another broker, a group of
fsyncs) gets a token, and the shell hands the result back with it. A request to another broker
is answered as a typed input (the driver hands the answer to that broker's fetch session,
``answered_by``); for the others the driver keeps a continuation under the token. A continuation
is called at most once; results for a token nobody waits for (a shell answering after
``abandon``) are ignored.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Any

from replog.broker.driver.effects import (
    CoordCall,
    Effect,
    RunCheckpoints,
    RunCleaning,
    RunFlushes,
    SendToBroker,
)
from replog.coord.contract import Coordinator
from replog.log.checkpoint_round import CheckpointRound
from replog.log.cleaner import CleaningTask
from replog.log.log import PendingFlush
from replog.protocol.schema import Message
from replog.topics import TopicPartition

__all__ = ["Continuation", "Outbox"]

Continuation = Callable[[Any, BaseException | None], None]
"""Called with (result, None) or (None, error)."""


class Outbox:
    """Effects in order, and token -> continuation."""

    def __init__(self) -> None:
        self._effects: list[Effect] = []
        self._tokens = itertools.count(1)
        self._waiting: dict[int, Continuation] = {}
        self._sends: dict[int, int] = {}  # token -> the broker a request went to

    def emit(self, effect: Effect) -> None:
        """Queue an effect that needs no answer."""
        self._effects.append(effect)

    def take(self) -> list[Effect]:
        """Every queued effect, oldest first."""
        effects, self._effects = self._effects, []
        return effects

    def _token(self, then: Continuation) -> int:
        token = next(self._tokens)
        self._waiting[token] = then
        return token

    def call(self, what: str, call: Callable[[Coordinator], Any], then: Continuation) -> int:
        """A coordinator call; ``then(result, error)`` when the shell reports it."""
        token = self._token(then)
        self._effects.append(CoordCall(token, call, what))
        return token

    def send(self, broker_id: int, api_key: int, api_version: int, body: Message) -> int:
        """A request to another broker. Its answer is a typed input, not a continuation: the
        driver hands it to the fetch session of ``broker_id`` with the token
        (``answered_by``)."""
        token = next(self._tokens)
        self._sends[token] = broker_id
        self._effects.append(SendToBroker(token, broker_id, api_key, api_version, body))
        return token

    def answered_by(self, token: int) -> int | None:
        """The broker a ``send`` with ``token`` went to, once (None: nobody waits for it)."""
        return self._sends.pop(token, None)

    def flush(self, pending: list[tuple[TopicPartition, PendingFlush]], then: Continuation) -> int:
        """A group commit; ``then(failures, None)`` with [(tp, reason)] of the failed ones."""
        token = self._token(then)
        self._effects.append(RunFlushes(token, tuple(pending)))
        return token

    def clean(self, task: CleaningTask, then: Continuation) -> int:
        """A log cleaning's heavy pass; ``then(None, None)`` once it ran (its result is in
        ``task``)."""
        token = self._token(then)
        self._effects.append(RunCleaning(token, task))
        return token

    def checkpoint(self, round_: CheckpointRound, then: Continuation) -> int:
        """A round of offset checkpoints to write; ``then(failures, None)`` with what
        ``round_.write()`` returned."""
        token = self._token(then)
        self._effects.append(RunCheckpoints(token, round_))
        return token

    def done(self, token: int, result: Any, error: BaseException | None) -> None:
        """The shell's report for ``token``."""
        then = self._waiting.pop(token, None)
        if then is not None:
            then(result, error)

    def forget(self, token: int) -> None:
        """Nobody waits for ``token`` any more (a later report is ignored)."""
        self._waiting.pop(token, None)
        self._sends.pop(token, None)

    def abandon(self) -> None:
        """Drop every effect and continuation (the broker is halting)."""
        self._effects.clear()
        self._waiting.clear()
        self._sends.clear()

    @property
    def pending(self) -> int:
        """Tokens still waiting for a report."""
        return len(self._waiting) + len(self._sends)
