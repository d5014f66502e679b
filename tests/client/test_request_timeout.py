"""A request that gets no answer in time fails its caller with ``RequestTimeoutError`` and
takes the connection down, leaving no failed future behind that nobody awaits (asyncio would
report "Future exception was never retrieved" for it)."""

from __future__ import annotations

import asyncio
import gc
from typing import Any

import pytest

from replog.client.connection import BrokerConnection
from replog.client.errors import RequestTimeoutError


async def _silent_broker(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """Reads requests, answers none."""
    while await reader.read(1 << 16):
        pass
    writer.close()


def test_a_timed_out_request_leaves_no_unretrieved_error() -> None:
    reported: list[dict[str, Any]] = []

    async def scenario() -> None:
        asyncio.get_running_loop().set_exception_handler(lambda _, ctx: reported.append(ctx))
        server = await asyncio.start_server(_silent_broker, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        with pytest.raises(RequestTimeoutError):
            await BrokerConnection.open("127.0.0.1", port, request_timeout_ms=100)
        server.close()
        await server.wait_closed()
        gc.collect()  # a dropped future with an error reports it when collected
        await asyncio.sleep(0)

    asyncio.run(scenario())
    assert [c["message"] for c in reported] == []
