"""The broker's TCP server (``replog.broker.shell.server.Server``) with stand-in handlers that fail:
no request is left unanswered. A handler that raises gets the API's error response sent in its
place and the connection keeps serving; when there is nothing to answer with (acks=0 produce)
or a response breaks halfway out, the connection closes at once. Before, the request's client
waited for its own timeout (aiokafka, kafkajs) on ListOffsets v1-v3, whose answer failed to
encode."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from replog.broker.shell.server import Response, Server
from replog.errors import ErrorCode, NotLeaderError
from replog.protocol import (
    FrameReader,
    RecordsRef,
    RequestHeader,
    decode_response,
    encode_request,
    encode_response_parts,
)
from replog.protocol import messages as m
from replog.protocol.schema import Message

pytestmark = pytest.mark.timeout(30)

#: how long a test waits for an answer the server must give at once
ANSWER_WAIT_S = 5.0

Handler = Callable[[int, RequestHeader, Message], Awaitable[Response]]


def list_offsets_request() -> m.ListOffsetsRequest:
    return m.ListOffsetsRequest(
        replica_id=-1,
        topics=[
            m.ListOffsetsTopic(
                name="t",
                partitions=[
                    m.ListOffsetsPartition(partition_index=p, timestamp=-1) for p in (0, 1)
                ],
            )
        ],
    )


class Connection:
    """A client socket to the server under test."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer
        self.frames = FrameReader()
        self.correlation_id = 0

    async def call(self, body: Message, version: int) -> tuple[int, Message]:
        """Send ``body`` at ``version``; (correlation id of the answer, answer body)."""
        self.correlation_id += 1
        header = RequestHeader(
            api_key=body.API.api_key,
            api_version=version,
            correlation_id=self.correlation_id,
            client_id="test",
        )
        self.writer.write(encode_request(header, body))
        while True:
            data = await asyncio.wait_for(self.reader.read(1 << 20), ANSWER_WAIT_S)
            if not data:
                raise ConnectionError("the server closed the connection")
            frames = self.frames.feed(data)
            if frames:
                return decode_response(frames[0], api_key=body.API.api_key, api_version=version)

    async def closed_by_server(self) -> bool:
        """Whether the server closes the connection (EOF) without answering."""
        data = await asyncio.wait_for(self.reader.read(1 << 20), ANSWER_WAIT_S)
        return data == b""


async def serve(handler: Handler, scenario: Callable[[Connection], Awaitable[Any]]) -> Any:
    server = Server(handler, frame_bytes_max=1 << 20, inflight_requests_max=8, connections_max=8)
    port = await server.start("127.0.0.1", 0)
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        return await scenario(Connection(reader, writer))
    finally:
        writer.close()
        await server.close()


def failing_once(error: Exception) -> Handler:
    """Raises ``error`` on the first request, answers ListOffsets properly after that."""
    calls = []

    async def handler(conn_id: int, header: RequestHeader, body: Message) -> Response:
        calls.append(header)
        if len(calls) == 1:
            raise error
        assert isinstance(body, m.ListOffsetsRequest)
        response = m.ListOffsetsResponse(
            topics=[
                m.ListOffsetsTopicResponse(
                    name="t", partitions=[m.ListOffsetsPartitionResponse(offset=7)]
                )
            ]
        )
        return encode_response_parts(header.correlation_id, header.api_version, response)

    return handler


def test_a_handler_that_raises_is_answered_with_the_apis_error_response(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async def scenario(conn: Connection) -> None:
        correlation_id, answer = await conn.call(list_offsets_request(), 3)
        assert correlation_id == 1
        assert isinstance(answer, m.ListOffsetsResponse)
        assert [
            (t.name, p.partition_index, p.error_code, p.offset)
            for t in answer.topics
            for p in t.partitions
        ] == [
            ("t", 0, ErrorCode.UNKNOWN_SERVER_ERROR, -1),
            ("t", 1, ErrorCode.UNKNOWN_SERVER_ERROR, -1),
        ]
        # The connection goes on serving.
        correlation_id, answer = await conn.call(list_offsets_request(), 3)
        assert correlation_id == 2
        assert isinstance(answer, m.ListOffsetsResponse)
        assert answer.topics[0].partitions[0].offset == 7

    with caplog.at_level(logging.ERROR, logger="replog.broker.shell.server"):
        asyncio.run(serve(failing_once(RuntimeError("handler bug")), scenario))
    errors = [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert len(errors) == 1
    assert "ListOffsets v3" in errors[0].getMessage()
    assert errors[0].exc_info is not None and "handler bug" in str(errors[0].exc_info[1])


def test_a_response_that_cannot_be_encoded_is_answered_with_an_error() -> None:
    """The original defect: a leader epoch set in a ListOffsets v3 answer (no such field)."""

    async def handler(conn_id: int, header: RequestHeader, body: Message) -> Response:
        part = m.ListOffsetsPartitionResponse(partition_index=0, offset=5, leader_epoch=2)
        response = m.ListOffsetsResponse(
            topics=[m.ListOffsetsTopicResponse(name="t", partitions=[part])]
        )
        return encode_response_parts(header.correlation_id, header.api_version, response)

    async def scenario(conn: Connection) -> Message:
        return (await conn.call(list_offsets_request(), 3))[1]

    answer = asyncio.run(serve(handler, scenario))
    assert isinstance(answer, m.ListOffsetsResponse)
    assert {p.error_code for p in answer.topics[0].partitions} == {ErrorCode.UNKNOWN_SERVER_ERROR}


def test_an_error_with_a_code_is_answered_with_that_code_and_its_message() -> None:
    error = NotLeaderError("moved away")

    async def scenario(conn: Connection) -> Message:
        request = m.CreateTopicsRequest(topics=[m.CreatableTopic(name="a")], timeout_ms=100)
        return (await conn.call(request, 7))[1]

    answer = asyncio.run(serve(failing_once(error), scenario))
    assert isinstance(answer, m.CreateTopicsResponse)
    assert [(t.name, t.error_code, t.error_message) for t in answer.topics] == [
        ("a", ErrorCode.NOT_LEADER_OR_FOLLOWER, str(error))
    ]


def test_an_acks_0_produce_that_fails_closes_the_connection() -> None:
    async def scenario(conn: Connection) -> bool:
        request = m.ProduceRequest(
            acks=0,
            timeout_ms=100,
            topic_data=[
                m.TopicProduceData(
                    name="t", partition_data=[m.PartitionProduceData(index=0, records=b"x")]
                )
            ],
        )
        header = RequestHeader(api_key=0, api_version=9, correlation_id=1, client_id="test")
        conn.writer.write(encode_request(header, request))
        return await conn.closed_by_server()

    assert asyncio.run(serve(failing_once(RuntimeError("append failed")), scenario))


def test_a_response_that_breaks_while_being_written_closes_the_connection() -> None:
    async def handler(conn_id: int, header: RequestHeader, body: Message) -> Response:
        # A records hole whose source is not a log slice: the response cannot be written.
        part = m.FetchResponsePartition(
            partition_index=0, records=RecordsRef(size_bytes=10, source="not a slice")
        )
        response = m.FetchResponse(responses=[m.FetchResponseTopic(topic="t", partitions=[part])])
        return encode_response_parts(header.correlation_id, header.api_version, response)

    async def scenario(conn: Connection) -> bool:
        request = m.FetchRequest(
            max_wait_ms=0,
            topics=[m.FetchTopic(topic="t", partitions=[m.FetchPartition(partition=0)])],
        )
        header = RequestHeader(api_key=1, api_version=12, correlation_id=1, client_id="test")
        conn.writer.write(encode_request(header, request))
        received = b""
        while True:
            data = await asyncio.wait_for(conn.reader.read(1 << 20), ANSWER_WAIT_S)
            if not data:
                # Closed at once, without a complete answer (a response goes out in one write,
                # so nothing of it is sent when it cannot be assembled).
                return not conn.frames.feed(received)
            received += data

    assert asyncio.run(serve(handler, scenario))


def _answering(conn_id: int, header: RequestHeader, body: Message) -> Awaitable[Response]:
    async def answer() -> Response:
        response = m.ListOffsetsResponse(topics=[m.ListOffsetsTopicResponse(name="t")])
        return encode_response_parts(header.correlation_id, header.api_version, response)

    return answer()


def _frame(payload: bytes) -> bytes:
    return len(payload).to_bytes(4, "big") + payload


def _valid(correlation_id: int) -> bytes:
    header = RequestHeader(api_key=2, api_version=3, correlation_id=correlation_id)
    return encode_request(header, list_offsets_request())


MALFORMED = {
    "unknown api key": _frame((999).to_bytes(2, "big") + bytes(6) + b"\xff\xff"),
    "truncated body": _valid(9)[:-3][4:],
    "short header": _frame(b"\x00\x02"),
    "bad client id length": _frame(b"\x00\x02\x00\x03\x00\x00\x00\x09\x7f\xff"),
}


@pytest.mark.parametrize("kind", sorted(MALFORMED))
def test_requests_pipelined_before_a_malformed_frame_are_answered_then_the_connection_closes(
    kind: str,
) -> None:
    """Kafka answers the requests before a malformed one, then closes; before, the connection
    was dropped at once and the earlier answers were lost."""
    bad = MALFORMED[kind]
    if kind == "truncated body":
        bad = _frame(bad)

    async def scenario(conn: Connection) -> tuple[list[int], bool]:
        conn.writer.write(_valid(1) + _valid(2) + bad + _valid(3))
        ids: list[int] = []
        while True:
            data = await asyncio.wait_for(conn.reader.read(1 << 20), ANSWER_WAIT_S)
            if not data:
                return ids, True
            for frame in conn.frames.feed(data):
                ids.append(decode_response(frame, api_key=2, api_version=3)[0])

    ids, closed = asyncio.run(serve(_answering, scenario))
    assert (ids, closed) == ([1, 2], True)
