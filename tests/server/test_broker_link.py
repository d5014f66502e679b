"""``BrokerLink.send_now``, the follower's hot path to its leader: on an open, idle link it
writes at once and hands the answer to its callback from the socket's ``data_received``; a link
that is not ready refuses (the caller uses the ``request`` coroutine); a reset, a timeout or an
undecodable answer reaches the callback as an error and closes the connection. Against the
broker's real server on loopback, on both event loops."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from replog.broker.shell.links import BrokerLink
from replog.broker.shell.server import Response, Server
from replog.event_loop import run
from replog.protocol import RequestHeader, encode_response_parts
from replog.protocol import messages as m
from replog.protocol.schema import Message

pytestmark = pytest.mark.timeout(30)

KEY, VERSION = m.LIST_OFFSETS.api_key, 7
REQUEST = m.ListOffsetsRequest(replica_id=2, isolation_level=0, topics=[])
TIMEOUT_S = 5.0

ServerHandler = Callable[[int, RequestHeader, Message], Awaitable[Response]]


async def _answer(conn_id: int, header: RequestHeader, body: Message) -> Response:
    del conn_id, body
    answer = m.ListOffsetsResponse(throttle_time_ms=header.correlation_id, topics=[])
    return encode_response_parts(header.correlation_id, header.api_version, answer)


async def _with_server(handler: ServerHandler, body: Callable[[int], Awaitable[None]]) -> None:
    server = Server(handler, frame_bytes_max=1 << 20, inflight_requests_max=4, connections_max=8)
    port = await server.start("127.0.0.1", 0)
    try:
        await body(port)
    finally:
        await server.close()


class _Answers:
    """What ``send_now`` hands its callback, and a future set by the first call."""

    def __init__(self) -> None:
        self.calls: list[tuple[Message | None, BaseException | None]] = []
        self.arrived: asyncio.Future[None] = asyncio.get_running_loop().create_future()

    def __call__(self, answer: Message | None, error: BaseException | None) -> None:
        self.calls.append((answer, error))
        if not self.arrived.done():
            self.arrived.set_result(None)


@pytest.mark.parametrize("loop", ["asyncio", "uvloop"])
def test_send_now_on_an_open_link_answers_through_the_callback(loop: str) -> None:
    async def body(port: int) -> None:
        link = BrokerLink(1, "replica-2", 1 << 20)
        answers = _Answers()
        assert not link.send_now(KEY, VERSION, REQUEST, TIMEOUT_S, answers)  # not connected
        first = await link.request(("127.0.0.1", port), KEY, VERSION, REQUEST, TIMEOUT_S)
        assert isinstance(first, m.ListOffsetsResponse) and first.throttle_time_ms == 1
        for correlation_id in (2, 3):
            answers = _Answers()
            assert link.send_now(KEY, VERSION, REQUEST, TIMEOUT_S, answers)
            assert not link.send_now(KEY, VERSION, REQUEST, TIMEOUT_S, _Answers())  # busy
            await asyncio.wait_for(answers.arrived, TIMEOUT_S)
            ((answer, error),) = answers.calls
            assert error is None and isinstance(answer, m.ListOffsetsResponse)
            assert answer.throttle_time_ms == correlation_id
        link.close()

    run(_with_server(_answer, body), choice=loop)


@pytest.mark.parametrize("loop", ["asyncio", "uvloop"])
def test_a_reset_link_fails_the_request_in_progress(loop: str) -> None:
    stalled: asyncio.Event | None = None

    async def stall(conn_id: int, header: RequestHeader, body: Message) -> Response:
        if header.correlation_id == 1:
            return await _answer(conn_id, header, body)
        assert stalled is not None
        await stalled.wait()
        return None

    async def body(port: int) -> None:
        nonlocal stalled
        stalled = asyncio.Event()
        link = BrokerLink(1, "replica-2", 1 << 20)
        await link.request(("127.0.0.1", port), KEY, VERSION, REQUEST, TIMEOUT_S)
        answers = _Answers()
        assert link.send_now(KEY, VERSION, REQUEST, TIMEOUT_S, answers)
        link.close()
        await asyncio.wait_for(answers.arrived, TIMEOUT_S)
        ((answer, error),) = answers.calls
        assert answer is None and isinstance(error, EOFError)
        stalled.set()

    run(_with_server(stall, body), choice=loop)


def test_no_answer_in_time_fails_the_request_and_closes_the_link() -> None:
    async def silent(conn_id: int, header: RequestHeader, body: Message) -> Response:
        if header.correlation_id != 2:  # the second request (the one under test) stalls
            return await _answer(conn_id, header, body)
        await asyncio.sleep(30)
        return None

    async def body(port: int) -> None:
        link = BrokerLink(1, "replica-2", 1 << 20)
        await link.request(("127.0.0.1", port), KEY, VERSION, REQUEST, TIMEOUT_S)
        answers = _Answers()
        assert link.send_now(KEY, VERSION, REQUEST, 0.05, answers)
        await asyncio.wait_for(answers.arrived, TIMEOUT_S)
        await asyncio.sleep(0.01)  # the reset reaches the protocol: nothing reported twice
        ((answer, error),) = answers.calls
        assert answer is None and isinstance(error, TimeoutError)
        assert not link.send_now(KEY, VERSION, REQUEST, TIMEOUT_S, _Answers())  # closed
        again = await link.request(("127.0.0.1", port), KEY, VERSION, REQUEST, TIMEOUT_S)
        assert isinstance(again, m.ListOffsetsResponse)  # the next request connects again

    run(_with_server(silent, body))


def test_an_undecodable_answer_fails_the_request_and_closes_the_link() -> None:
    async def wrong_api(conn_id: int, header: RequestHeader, body: Message) -> Response:
        if header.correlation_id == 1:
            return await _answer(conn_id, header, body)
        return [b"\x00\x00\x00\x01"]  # a frame too short for any ListOffsets answer

    async def body(port: int) -> None:
        link = BrokerLink(1, "replica-2", 1 << 20)
        await link.request(("127.0.0.1", port), KEY, VERSION, REQUEST, TIMEOUT_S)
        answers: Any = _Answers()
        assert link.send_now(KEY, VERSION, REQUEST, TIMEOUT_S, answers)
        await asyncio.wait_for(answers.arrived, TIMEOUT_S)
        ((answer, error),) = answers.calls
        assert answer is None and error is not None
        assert not link.send_now(KEY, VERSION, REQUEST, TIMEOUT_S, _Answers())

    run(_with_server(wrong_api, body))
