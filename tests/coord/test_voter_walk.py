"""The retry walk both quorum channels share (`replog.quorum.voter_walk`), on a manual clock."""

from __future__ import annotations

import pytest

from replog.clock import ManualClock
from replog.coord.errors import CoordinatorUnavailableError
from replog.quorum.voter_walk import PAUSE_MS, ConnectionLost, TryElsewhere, call_until_served


class Script:
    """Answers tries from a list (an exception is raised); records each try's remaining time
    and each pause, which advances the clock."""

    def __init__(self, clock: ManualClock, answers: list[object], try_ms: int = 0) -> None:
        self.clock, self.answers, self.try_ms = clock, list(answers), try_ms
        self.remaining: list[int] = []
        self.pauses: list[int] = []

    def try_once(self, remaining_ms: int) -> object:
        self.remaining.append(remaining_ms)
        self.clock.advance(self.try_ms)
        answer = self.answers.pop(0) if self.answers else TryElsewhere("nobody", pause=True)
        if isinstance(answer, BaseException):
            raise answer
        return answer

    def pause(self, delay_ms: int) -> None:
        self.pauses.append(delay_ms)
        self.clock.advance(delay_ms)

    def call(self, *, timeout_ms: int = 1_000, idempotent: bool = True) -> object:
        return call_until_served(
            self.try_once,
            clock=self.clock,
            timeout_ms=timeout_ms,
            idempotent=idempotent,
            server="quorum leader",
            pause_ms=self.pause,
        )


def test_the_first_served_answer_is_the_value_and_declines_pause_only_when_asked() -> None:
    script = Script(
        ManualClock(), [TryElsewhere("a", pause=False), TryElsewhere("b", pause=True), "value"]
    )
    assert script.call() == "value"
    assert script.pauses == [PAUSE_MS]
    assert script.remaining == [1_000, 1_000, 1_000 - PAUSE_MS]


def test_a_lost_read_is_tried_again_after_a_pause() -> None:
    script = Script(ManualClock(), [ConnectionLost(True, "reset"), None])
    assert script.call(idempotent=True) is None  # None is a value, not a decline
    assert script.pauses == [PAUSE_MS]


def test_a_write_lost_after_it_left_has_an_unknown_outcome() -> None:
    script = Script(ManualClock(), [ConnectionLost(True, "reset"), "never asked"])
    with pytest.raises(CoordinatorUnavailableError, match="outcome unknown: reset"):
        script.call(idempotent=False)
    assert len(script.remaining) == 1


def test_a_write_that_never_left_is_tried_elsewhere() -> None:
    script = Script(ManualClock(), [ConnectionLost(False, "refused"), "done"])
    assert script.call(idempotent=False) == "done"


def test_the_deadline_ends_the_walk_with_the_last_reason() -> None:
    script = Script(ManualClock(), [], try_ms=100)
    expected = "no quorum leader within 1000 ms: nobody"
    with pytest.raises(CoordinatorUnavailableError, match=expected):
        script.call(timeout_ms=1_000)
    assert all(r > 0 for r in script.remaining)
    assert script.remaining == sorted(script.remaining, reverse=True)
    assert script.pauses[-1] <= PAUSE_MS


def test_other_errors_end_the_call_at_once() -> None:
    script = Script(ManualClock(), [KeyError("no such key"), "never asked"])
    with pytest.raises(KeyError):
        script.call()
    assert len(script.remaining) == 1
