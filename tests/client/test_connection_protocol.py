"""``BrokerConnection`` on its ``asyncio.Protocol``: pipelined responses that arrive many to a
read, a byte at a time, or out of order reach their own requests; an answer nobody asked for, or
the broker going away, fails every outstanding request with ``ConnectionLostError``. The broker
here is a scripted socket that decides exactly how the response bytes are written."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

import pytest

from replog.client.connection import BrokerConnection
from replog.client.errors import ConnectionLostError
from replog.event_loop import run
from replog.protocol import FrameReader, RequestHeader, encode_response
from replog.protocol import messages as m
from replog.protocol.framing import decode_request

pytestmark = pytest.mark.timeout(30)

#: what the scripted broker does with the requests after the handshake: gets the decoded
#: (header, body) list of every request read so far and the writer
Script = Callable[[list[RequestHeader], asyncio.StreamWriter], Awaitable[None]]


def _metadata_answer(header: RequestHeader, node_id: int) -> bytes:
    body = m.MetadataResponse(
        brokers=[m.MetadataResponseBroker(node_id=node_id, host="h", port=node_id)]
    )
    return encode_response(header.correlation_id, header.api_version, body)


async def _scripted_broker(
    script: Script, expected: int, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
) -> None:
    """Answers ApiVersions, then hands ``expected`` further requests to ``script``."""
    frames = FrameReader()
    headers: list[RequestHeader] = []
    while True:
        data = await reader.read(1 << 16)
        if not data:
            break
        for frame in frames.feed(data):
            header, _ = decode_request(frame)
            if header.api_key == m.API_VERSIONS.api_key:
                versions = m.ApiVersionsResponse(
                    api_keys=[
                        m.ApiVersion(api_key=18, min_version=0, max_version=3),
                        m.ApiVersion(api_key=3, min_version=0, max_version=12),
                    ]
                )
                writer.write(encode_response(header.correlation_id, header.api_version, versions))
                continue
            headers.append(header)
            if len(headers) == expected:
                await script(headers, writer)
    writer.close()


def _with_broker(script: Script, expected: int, scenario: Callable[[int], Awaitable[None]]) -> None:
    async def main() -> None:
        server = await asyncio.start_server(
            lambda r, w: _scripted_broker(script, expected, r, w), "127.0.0.1", 0
        )
        try:
            await scenario(server.sockets[0].getsockname()[1])
        finally:
            server.close()

    run(main())


async def _metadata_calls(conn: BrokerConnection, n: int) -> list[int]:
    """``n`` pipelined Metadata requests; the node id each answer carried."""
    answers = await asyncio.gather(
        *(conn.request(m.MetadataRequest(topics=[]), m.MetadataResponse) for _ in range(n))
    )
    return [a.brokers[0].node_id for a in answers]


@pytest.mark.parametrize("how", ["one_write", "byte_by_byte", "reversed"])
def test_pipelined_responses_reach_their_own_requests(how: str) -> None:
    async def script(headers: list[RequestHeader], writer: asyncio.StreamWriter) -> None:
        # each answer carries its request's position as the node id
        answers = [_metadata_answer(h, n) for n, h in enumerate(headers, 1)]
        if how == "reversed":
            answers.reverse()
        stream = b"".join(answers)
        if how == "byte_by_byte":
            for i in range(len(stream)):
                writer.write(stream[i : i + 1])
                await writer.drain()
        else:
            writer.write(stream)

    async def scenario(port: int) -> None:
        conn = await BrokerConnection.open("127.0.0.1", port, in_flight_max=5)
        try:
            assert await _metadata_calls(conn, 5) == [1, 2, 3, 4, 5]
        finally:
            await conn.close()

    _with_broker(script, 5, scenario)


def test_an_answer_nobody_asked_for_fails_every_outstanding_request() -> None:
    async def script(headers: list[RequestHeader], writer: asyncio.StreamWriter) -> None:
        stray = RequestHeader(api_key=3, api_version=headers[0].api_version, correlation_id=999)
        writer.write(_metadata_answer(stray, 1))

    async def scenario(port: int) -> None:
        conn = await BrokerConnection.open("127.0.0.1", port)
        with pytest.raises(ConnectionLostError):
            await _metadata_calls(conn, 2)
        assert conn.closed
        await conn.close()

    _with_broker(script, 2, scenario)


def test_the_broker_going_away_fails_outstanding_requests() -> None:
    async def script(headers: list[RequestHeader], writer: asyncio.StreamWriter) -> None:
        writer.transport.abort()

    async def scenario(port: int) -> None:
        conn = await BrokerConnection.open("127.0.0.1", port)
        with pytest.raises(ConnectionLostError):
            await _metadata_calls(conn, 3)
        with pytest.raises(ConnectionLostError):
            await _metadata_calls(conn, 1)  # a closed connection refuses new requests
        await conn.close()

    _with_broker(script, 3, scenario)
