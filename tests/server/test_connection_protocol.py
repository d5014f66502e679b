"""The broker server's connection layer (``replog.broker.shell.server``, an ``asyncio.Protocol``):
frames split across reads or packed many to a read, in-order answers with handlers that finish at
once and handlers that wait, back-pressure on reading past ``inflight_requests_max`` and on
writing while the transport is over its high-water mark, oversized frames, and Fetch record
slices read from a real log on both event loops.

The framing and back-pressure tests feed ``data_received`` directly, through a stand-in
transport that records what the connection writes and whether it paused reading, so the chunk
boundaries are exactly the ones under test (TCP over loopback may merge or split them)."""

from __future__ import annotations

import asyncio
import struct
from pathlib import Path
from typing import Any

import pytest

from replog.broker.shell.server import PARKED, Parked, Response, Server, _Connection
from replog.event_loop import run
from replog.log import Log, LogConfig, encode_batch
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

INFLIGHT_MAX = 4


class RecordingTransport(asyncio.Transport):
    """What the connection under test does to its transport."""

    def __init__(self) -> None:
        super().__init__()
        self.written = bytearray()
        self.writes = 0
        self.reading = True
        self.aborted = False

    def write(self, data: Any) -> None:
        self.written += data
        self.writes += 1

    def writelines(self, list_of_data: Any) -> None:
        for data in list_of_data:
            self.written += data
        self.writes += 1

    def pause_reading(self) -> None:
        self.reading = False

    def resume_reading(self) -> None:
        self.reading = True

    def is_closing(self) -> bool:
        return self.aborted

    def abort(self) -> None:
        self.aborted = True

    def set_write_buffer_limits(self, high: int | None = None, low: int | None = None) -> None:
        pass

    def answered_ids(self) -> list[int]:
        """Correlation ids of the complete response frames written so far."""
        return [struct.unpack(">i", f)[0] for f in FrameReader().feed(bytes(self.written))]


def request_frame(correlation_id: int) -> bytes:
    header = RequestHeader(api_key=18, api_version=0, correlation_id=correlation_id, client_id="t")
    return encode_request(header, m.ApiVersionsRequest())


async def answer_with_id(conn_id: int, header: RequestHeader, body: Message) -> Response:
    """A response frame holding only the correlation id; finishes without waiting."""
    return [struct.pack(">ii", 4, header.correlation_id)]


def connect(server: Server) -> tuple[_Connection, RecordingTransport]:
    conn = _Connection(server, 1)
    transport = RecordingTransport()
    conn.connection_made(transport)
    return conn, transport


def make_server(handler: Any, inflight_max: int = INFLIGHT_MAX) -> Server:
    return Server(
        handler, frame_bytes_max=1 << 20, inflight_requests_max=inflight_max, connections_max=4
    )


def test_frames_split_across_reads_are_answered_once_each_in_order() -> None:
    async def scenario() -> None:
        conn, transport = connect(make_server(answer_with_id))
        stream = b"".join(request_frame(i) for i in (1, 2, 3))
        for n in range(len(stream)):
            conn.data_received(stream[n : n + 1])
        assert transport.answered_ids() == [1, 2, 3]
        assert transport.writes == 3  # one write per response
        assert not transport.aborted

    run(scenario())


def test_many_frames_in_one_read_are_answered_in_order_without_a_task() -> None:
    async def scenario() -> None:
        conn, transport = connect(make_server(answer_with_id, inflight_max=100))
        conn.data_received(b"".join(request_frame(i) for i in range(1, 51)))
        # Handlers that finish at once are answered inside the callback: no task was needed.
        assert transport.answered_ids() == list(range(1, 51))
        assert conn.task is None

    run(scenario())


def test_waiting_and_immediate_handlers_keep_request_order() -> None:
    async def handler(conn_id: int, header: RequestHeader, body: Message) -> Response:
        if header.correlation_id % 3 == 0:
            await asyncio.sleep(0)  # this one waits; the ones behind it must wait for it
        return [struct.pack(">ii", 4, header.correlation_id)]

    async def scenario() -> None:
        conn, transport = connect(make_server(handler, inflight_max=100))
        conn.data_received(b"".join(request_frame(i) for i in range(1, 31)))
        assert transport.answered_ids() == [1, 2]
        for _ in range(100):
            if len(transport.answered_ids()) == 30:
                break
            await asyncio.sleep(0)
        assert transport.answered_ids() == list(range(1, 31))

    run(scenario())


async def park_even_ids(conn_id: int, header: RequestHeader, body: Message) -> Response | Parked:
    """Even correlation ids are parked (answered later with ``Server.respond``), odd ones are
    answered at once."""
    if header.correlation_id % 2 == 0:
        return PARKED
    return [struct.pack(">ii", 4, header.correlation_id)]


def test_a_parked_answer_is_written_in_the_respond_call_and_the_chain_goes_on() -> None:
    async def scenario() -> None:
        server = make_server(park_even_ids, inflight_max=100)
        conn, transport = connect(server)
        conn.data_received(b"".join(request_frame(i) for i in range(1, 8)))
        # 2 is parked: 3..7 wait behind it, answered or not, so the order holds.
        assert transport.answered_ids() == [1]
        assert conn.task is None  # a parked request holds no task
        server.respond(conn.conn_id, [struct.pack(">ii", 4, 2)])
        # Written in that very call, with the immediate answers behind it, up to the next park.
        assert transport.answered_ids() == [1, 2, 3]
        server.respond(conn.conn_id, [struct.pack(">ii", 4, 4)])
        server.respond(conn.conn_id, [struct.pack(">ii", 4, 6)])
        assert transport.answered_ids() == [1, 2, 3, 4, 5, 6, 7]
        assert not transport.aborted

    run(scenario())


def test_an_answer_for_a_connection_with_nothing_parked_is_ignored() -> None:
    async def scenario() -> None:
        server = make_server(park_even_ids, inflight_max=100)
        conn, transport = connect(server)
        conn.data_received(request_frame(1))
        server.respond(conn.conn_id, [struct.pack(">ii", 4, 99)])  # nothing parked
        server.respond(12345, [struct.pack(">ii", 4, 98)])  # no such connection
        assert transport.answered_ids() == [1]

    run(scenario())


def test_a_parked_request_answered_with_nothing_lets_the_next_ones_through() -> None:
    async def scenario() -> None:
        server = make_server(park_even_ids, inflight_max=100)
        conn, transport = connect(server)
        conn.data_received(b"".join(request_frame(i) for i in (2, 3)))
        assert transport.answered_ids() == []
        server.respond(conn.conn_id, None)  # acks=0: no answer to write
        assert transport.answered_ids() == [3]

    run(scenario())


def test_close_client_drops_a_parked_connection() -> None:
    async def scenario() -> None:
        server = make_server(park_even_ids, inflight_max=100)
        conn, transport = connect(server)
        conn.data_received(b"".join(request_frame(i) for i in (2, 3)))
        server.close_client(conn.conn_id)
        assert transport.aborted
        server.respond(conn.conn_id, [struct.pack(">ii", 4, 2)])
        assert transport.answered_ids() == []

    run(scenario())


def test_a_handler_that_waits_and_then_parks_is_answered_by_respond() -> None:
    async def handler(conn_id: int, header: RequestHeader, body: Message) -> Response | Parked:
        await asyncio.sleep(0)
        return await park_even_ids(conn_id, header, body)

    async def scenario() -> None:
        server = make_server(handler, inflight_max=100)
        conn, transport = connect(server)
        conn.data_received(b"".join(request_frame(i) for i in (1, 2, 3)))
        for _ in range(20):
            await asyncio.sleep(0)
        assert transport.answered_ids() == [1]
        server.respond(conn.conn_id, [struct.pack(">ii", 4, 2)])
        for _ in range(20):
            await asyncio.sleep(0)
        assert transport.answered_ids() == [1, 2, 3]

    run(scenario())


def test_reading_pauses_past_the_inflight_limit_and_resumes_when_answered() -> None:
    release = asyncio.Event()

    async def handler(conn_id: int, header: RequestHeader, body: Message) -> Response:
        await release.wait()
        return [struct.pack(">ii", 4, header.correlation_id)]

    async def scenario() -> None:
        conn, transport = connect(make_server(handler))
        conn.data_received(b"".join(request_frame(i) for i in range(1, INFLIGHT_MAX + 1)))
        assert transport.reading  # one in progress, INFLIGHT_MAX - 1 waiting: within the limit
        conn.data_received(request_frame(INFLIGHT_MAX + 1) + request_frame(INFLIGHT_MAX + 2))
        assert not transport.reading
        release.set()
        for _ in range(100):
            if len(transport.answered_ids()) == INFLIGHT_MAX + 2:
                break
            await asyncio.sleep(0)
        assert transport.answered_ids() == list(range(1, INFLIGHT_MAX + 3))
        assert transport.reading

    run(scenario())


def test_answers_wait_while_the_transport_asks_to_pause_writing() -> None:
    async def scenario() -> None:
        conn, transport = connect(make_server(answer_with_id))
        conn.pause_writing()
        conn.data_received(request_frame(1) + request_frame(2))
        assert transport.answered_ids() == []
        conn.resume_writing()
        assert transport.answered_ids() == [1, 2]

    run(scenario())


def test_an_oversized_frame_closes_only_that_connection() -> None:
    async def scenario() -> None:
        server = make_server(answer_with_id)
        port = await server.start("127.0.0.1", 0)
        try:
            bad_reader, bad_writer = await asyncio.open_connection("127.0.0.1", port)
            good_reader, good_writer = await asyncio.open_connection("127.0.0.1", port)
            bad_writer.write(struct.pack(">i", (1 << 20) + 1) + b"x" * 100)
            assert await asyncio.wait_for(bad_reader.read(100), 5) == b""  # closed, no answer
            good_writer.write(request_frame(7))
            assert await asyncio.wait_for(good_reader.readexactly(8), 5) == struct.pack(">ii", 4, 7)
            bad_writer.close()
            good_writer.close()
        finally:
            await server.close()

    run(scenario())


@pytest.mark.parametrize("loop", ["asyncio", "uvloop"])
@pytest.mark.parametrize("batch_count", [1, 21])
def test_fetch_slices_are_sent_whole_on_either_loop(
    tmp_path: Path, loop: str, batch_count: int
) -> None:
    log = Log.open(str(tmp_path / "t-0"), LogConfig())
    try:
        for n in range(batch_count):
            batch = encode_batch([b"r%06d" % n * 20] * 100, base_timestamp=n)
            log.append_as_leader(batch, leader_epoch=0)
        fetch_slice = log.read(0, 10 << 20)
        expected = fetch_slice.to_bytes()
        # 1 batch: under SMALL_SLICE_BYTES (pread); 21 batches: over it (sendfile on asyncio)
        size_bytes = fetch_slice.size_bytes

        async def handler(conn_id: int, header: RequestHeader, body: Message) -> Response:
            part = m.FetchResponsePartition(
                partition_index=0,
                high_watermark=log.log_end_offset,
                records=RecordsRef(size_bytes=size_bytes, source=fetch_slice),
            )
            response = m.FetchResponse(
                responses=[m.FetchResponseTopic(topic="t", partitions=[part])]
            )
            return encode_response_parts(header.correlation_id, header.api_version, response)

        async def scenario() -> bytes:
            server = make_server(handler)
            port = await server.start("127.0.0.1", 0)
            try:
                reader, writer = await asyncio.open_connection("127.0.0.1", port)
                header = RequestHeader(api_key=1, api_version=12, correlation_id=5, client_id="t")
                request = m.FetchRequest(
                    max_wait_ms=0,
                    topics=[m.FetchTopic(topic="t", partitions=[m.FetchPartition(partition=0)])],
                )
                writer.write(encode_request(header, request))
                size = struct.unpack(">i", await asyncio.wait_for(reader.readexactly(4), 5))[0]
                frame = await asyncio.wait_for(reader.readexactly(size), 5)
                writer.close()
            finally:
                await server.close()
            cid, body = decode_response(frame, api_key=1, api_version=12)
            assert cid == 5
            assert isinstance(body, m.FetchResponse)
            records = body.responses[0].partitions[0].records
            assert records is not None
            return bytes(records)

        assert run(scenario(), choice=loop) == expected
    finally:
        log.close()
