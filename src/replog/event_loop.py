"""The event loop replog's brokers and clients run on: uvloop when installed, asyncio's own else.

uvloop (libuv under asyncio's API) roughly halves the per-request cost of the socket calls and
callbacks a broker makes for each small request. It is a dependency on Linux; everywhere else,
and whenever it is not importable, asyncio's loop is used. ``REPLOG_EVENT_LOOP`` chooses:

- ``auto`` (the default, also when unset or empty): uvloop if importable, else asyncio;
- ``uvloop``: uvloop, ``InvalidConfigError`` if it is not installed;
- ``asyncio``: asyncio's own loop even where uvloop is installed (A/B measurements, debugging).

Every place that starts a loop for a broker or a client (``python -m replog.broker``, the sync
clients' loop thread, ``Cluster.local``'s thread, the ``replog`` command line) goes through
``new_event_loop`` or ``run`` here, so the switch covers them all. Code running on the loop must
not assume asyncio's loop: uvloop has no ``loop.sendfile`` for TCP transports (see
``supports_sendfile``). The deterministic simulator has its own scheduler and never uses this.
"""

from __future__ import annotations

import asyncio
import importlib
import os
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

from replog.errors import InvalidConfigError

__all__ = [
    "EVENT_LOOP_ENV",
    "event_loop_name",
    "new_event_loop",
    "run",
    "supports_sendfile",
]

T = TypeVar("T")

#: the environment variable that chooses the loop (see the module docstring)
EVENT_LOOP_ENV = "REPLOG_EVENT_LOOP"
_CHOICES = ("auto", "uvloop", "asyncio")


def _uvloop_factory() -> Callable[[], asyncio.AbstractEventLoop] | None:
    try:
        module = importlib.import_module("uvloop")
    except ImportError:
        return None
    factory: Callable[[], asyncio.AbstractEventLoop] = module.new_event_loop
    return factory


def event_loop_name(choice: str | None = None) -> str:
    """``"uvloop"`` or ``"asyncio"``: the loop ``choice`` (default: the environment's) selects."""
    wanted = (choice if choice is not None else os.environ.get(EVENT_LOOP_ENV, "")) or "auto"
    wanted = wanted.strip().lower()
    if wanted not in _CHOICES:
        raise InvalidConfigError(f"{EVENT_LOOP_ENV}={wanted!r}: expected one of {_CHOICES}")
    if wanted == "asyncio":
        return "asyncio"
    if _uvloop_factory() is not None:
        return "uvloop"
    if wanted == "uvloop":
        raise InvalidConfigError(f"{EVENT_LOOP_ENV}=uvloop but uvloop is not installed")
    return "asyncio"


def new_event_loop(choice: str | None = None) -> asyncio.AbstractEventLoop:
    """A new loop of the kind ``event_loop_name(choice)`` names (not set as current)."""
    if event_loop_name(choice) == "uvloop":
        factory = _uvloop_factory()
        if factory is not None:
            return factory()
    return asyncio.new_event_loop()


def run(main: Coroutine[Any, Any, T], *, choice: str | None = None) -> T:
    """``asyncio.run(main)`` on the chosen loop."""
    with asyncio.Runner(loop_factory=lambda: new_event_loop(choice)) as runner:
        return runner.run(main)


def supports_sendfile(loop: asyncio.AbstractEventLoop) -> bool:
    """Whether ``loop.sendfile`` can send a file on a TCP transport without a Python copy
    (asyncio's own loops can; uvloop has no sendfile at all)."""
    return isinstance(loop, asyncio.BaseEventLoop)
