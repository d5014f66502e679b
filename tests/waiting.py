"""The one way tests wait: poll observable state until it holds, never sleep a fixed time.

``eventually(read, what=...)`` calls ``read()`` until its value passes ``done`` (truthiness by
default) and returns that value. Timeouts are generous, because the suite runs on loaded 2-core
machines with parallel workers: a wait that times out is a failure with a message naming what
never happened and the last value seen, never a duration asserted.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

T = TypeVar("T")

DEFAULT_TIMEOUT_S = 30.0
_FIRST_INTERVAL_S = 0.01
_MAX_INTERVAL_S = 0.2


class NeverHappened(AssertionError):
    """``eventually`` gave up: ``what`` did not hold within the timeout."""


def _truthy(value: Any) -> bool:
    return bool(value)


def _failure(what: str, timeout_s: float, value: Any, error: BaseException | None) -> NeverHappened:
    seen = f"last error {error!r}" if error is not None else f"last value {value!r}"
    return NeverHappened(f"{what}: not so after {timeout_s:g} s ({seen})")


def eventually(
    read: Callable[[], T],
    *,
    what: str,
    done: Callable[[T], bool] = _truthy,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    retry_on: tuple[type[BaseException], ...] = (),
) -> T:
    """Poll ``read()`` until ``done(value)``; return that value.

    An exception of a type in ``retry_on`` counts as "not yet" (a server still starting, say);
    any other exception fails at once. The poll interval starts short and backs off to 200 ms.
    """
    deadline = time.monotonic() + timeout_s
    interval = _FIRST_INTERVAL_S
    value: Any = None
    error: BaseException | None = None
    while True:
        try:
            value = read()
            error = None
            if done(value):
                return value
        except retry_on as exc:
            error = exc
        if time.monotonic() >= deadline:
            raise _failure(what, timeout_s, value, error) from error
        time.sleep(interval)
        interval = min(interval * 2, _MAX_INTERVAL_S)


async def eventually_async(
    read: Callable[[], Awaitable[T]],
    *,
    what: str,
    done: Callable[[T], bool] = _truthy,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    retry_on: tuple[type[BaseException], ...] = (),
) -> T:
    """``eventually`` for a coroutine ``read``, awaiting between polls instead of blocking."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s
    interval = _FIRST_INTERVAL_S
    value: Any = None
    error: BaseException | None = None
    while True:
        try:
            value = await read()
            error = None
            if done(value):
                return value
        except retry_on as exc:
            error = exc
        if loop.time() >= deadline:
            raise _failure(what, timeout_s, value, error) from error
        await asyncio.sleep(interval)
        interval = min(interval * 2, _MAX_INTERVAL_S)


def wait_for(read: Callable[[], T], done: Callable[[T], bool], timeout_s: float = 30.0) -> T:
    """``eventually`` in the positional form the CLI and admin tests use: ``read`` until
    ``done`` accepts its value."""
    return eventually(
        read, what=f"{getattr(read, '__name__', 'read')}() accepted", done=done, timeout_s=timeout_s
    )
