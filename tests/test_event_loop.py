"""``replog.event_loop``: the loop brokers and clients start on, chosen by REPLOG_EVENT_LOOP."""

from __future__ import annotations

import asyncio

import pytest
import uvloop

from replog.client._sync import LoopThread
from replog.errors import InvalidConfigError
from replog.event_loop import (
    EVENT_LOOP_ENV,
    event_loop_name,
    new_event_loop,
    run,
    supports_sendfile,
)


def test_uvloop_is_the_default_where_it_is_installed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(EVENT_LOOP_ENV, raising=False)
    assert event_loop_name() == "uvloop"
    loop = new_event_loop()
    try:
        assert isinstance(loop, uvloop.Loop)
        assert not supports_sendfile(loop)
    finally:
        loop.close()


def test_the_environment_can_ask_for_asyncios_own_loop(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(EVENT_LOOP_ENV, "asyncio")

    async def loop_type() -> type:
        return type(asyncio.get_running_loop())

    loop_class = run(loop_type())
    assert not issubclass(loop_class, uvloop.Loop)
    assert issubclass(loop_class, asyncio.BaseEventLoop)
    loop = new_event_loop()
    try:
        assert supports_sendfile(loop)
    finally:
        loop.close()


def test_an_unknown_choice_is_a_config_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(EVENT_LOOP_ENV, "trio")
    with pytest.raises(InvalidConfigError, match="trio"):
        new_event_loop()


def test_the_sync_clients_loop_thread_runs_on_the_chosen_loop(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(EVENT_LOOP_ENV, "uvloop")
    thread = LoopThread("test-loop")
    try:
        assert isinstance(thread.loop, uvloop.Loop)
    finally:
        thread.stop()
