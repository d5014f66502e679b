"""The asyncio TCP server: one task per client connection, requests answered in order.

Per connection a reader splits the byte stream into frames (``FrameReader`` with the
configured ``frame_bytes_max``) and queues decoded requests in a queue bounded by
``inflight_requests_max`` (a client that pipelines more is simply not read: TCP backpressure).
A processor awaits each handler in turn and writes its response, so a connection's requests are
processed and answered in order. Record payloads of Fetch responses (``RecordsRef`` holes) go
out with ``loop.sendfile`` -- ``os.sendfile`` from the segment file where the transport allows,
a read-and-write fallback elsewhere -- never through a Python copy of the log; only slices up to
``SMALL_SLICE_BYTES`` (typically a follower's next batch) are copied with one ``pread``, which
costs far less than a sendfile's setup.

Anything malformed (bad frame size, unknown api key, undecodable body) costs that client its
connection and nothing else; nothing is ever unpickled from the network. Bytes after a request's
body are ignored, as Kafka ignores them (librdkafka sends some).

No request is left unanswered. A handler that raises gets the API's error response sent in its
place (``protocol.error_response``: the error code on every topic/partition of the request,
UNKNOWN_SERVER_ERROR unless the exception carries a code), and the exception is logged once with
the API and version; when there is no error response to give (acks=0 produce) or it cannot be
sent, or a response fails halfway through being written, the connection is closed, so the client
learns at once instead of at its request timeout.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import os
from collections.abc import Awaitable, Callable
from typing import Any

from replog.errors import ProtocolError
from replog.event_loop import supports_sendfile
from replog.log.log import FetchSlice
from replog.protocol import (
    FrameReader,
    RecordsRef,
    RequestHeader,
    UnsupportedVersionError,
    decode_request,
    encode_response_parts,
    error_response,
    unsupported_version_response,
)
from replog.protocol.schema import Message, Request

__all__ = ["CloseConnection", "Handler", "Response", "Server"]

_log = logging.getLogger(__name__)
#: a connection's stream buffer: reading pauses past twice this, and one read takes up to it.
#: asyncio's 64 KiB default pauses and resumes the socket several times per large frame (a
#: 1000-record produce, a replica fetch response); 1 MiB keeps it at one pause at most.
STREAM_LIMIT_BYTES = 1024 * 1024
#: record slices up to this size are copied with one pread rather than sent with sendfile
SMALL_SLICE_BYTES = 64 * 1024
#: where the loop has no sendfile (uvloop), larger slices are read and written in pieces this big
PREAD_CHUNK_BYTES = 1024 * 1024

#: what a handler returns: frame parts to write, or None for no response (acks=0)
Response = list[bytes | RecordsRef[Any]] | None
#: ``handler(conn_id, header, body)``: the answer to a connection's request
Handler = Callable[[int, RequestHeader, Message], Awaitable[Response]]


class CloseConnection(Exception):
    """Raised by a handler to drop the client's connection (e.g. acks=0 produce error)."""


class Server:
    """Listens on ``host:port`` and serves every connection with ``handler``."""

    def __init__(
        self,
        handler: Handler,
        *,
        frame_bytes_max: int,
        inflight_requests_max: int,
        connections_max: int,
        on_connection_closed: Callable[[int], None] | None = None,
    ) -> None:
        self._handler = handler
        self._on_connection_closed = on_connection_closed
        self._conn_ids = itertools.count(1)
        self._frame_bytes_max = frame_bytes_max
        self._inflight_requests_max = inflight_requests_max
        self._connections_max = connections_max
        self._server: asyncio.Server | None = None
        self._connections: set[asyncio.Task[None]] = set()
        self._writers: set[asyncio.StreamWriter] = set()
        self.port = 0

    async def start(self, host: str, port: int, *, serving: bool = True) -> int:
        """Bind (and, with ``serving``, start accepting); returns the bound port. Without
        ``serving``, connections wait in the listen backlog until ``start_serving``."""
        self._server = await asyncio.start_server(
            self._on_connect, host, port, start_serving=serving, limit=STREAM_LIMIT_BYTES
        )
        self.port = int(self._server.sockets[0].getsockname()[1])
        return self.port

    async def start_serving(self) -> None:
        """Start accepting connections on the bound socket."""
        if self._server is None:
            raise RuntimeError("the server is not bound")
        await self._server.start_serving()

    @property
    def connection_count(self) -> int:
        """Open client connections."""
        return len(self._connections)

    async def close(self) -> None:
        """Stop accepting and drop every connection."""
        if self._server is not None:
            self._server.close()
        for writer in list(self._writers):
            writer.transport.abort()
        tasks = list(self._connections)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        server, self._server = self._server, None
        if server is not None:
            # Every connection task has ended, so this returns at once (3.12+ waits for them).
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(server.wait_closed(), 1.0)

    async def _on_connect(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if len(self._connections) >= self._connections_max:
            writer.transport.abort()
            return
        task = asyncio.current_task()
        assert task is not None
        self._connections.add(task)
        self._writers.add(writer)
        conn_id = next(self._conn_ids)
        try:
            await self._serve(conn_id, reader, writer)
        except (ConnectionError, asyncio.IncompleteReadError, asyncio.CancelledError):
            pass  # a closed or cancelled connection ends quietly
        except Exception:
            _log.exception("connection failed; dropping it")
        finally:
            self._connections.discard(task)
            self._writers.discard(writer)
            writer.transport.abort()
            if self._on_connection_closed is not None:
                self._on_connection_closed(conn_id)

    async def _serve(
        self, conn_id: int, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        queue: asyncio.Queue[tuple[RequestHeader, Message] | bytes | None] = asyncio.Queue(
            self._inflight_requests_max
        )
        processor = asyncio.create_task(self._process(conn_id, queue, writer))
        serving = asyncio.current_task()

        def on_processor_end(task: asyncio.Task[None]) -> None:
            # It ended by itself only after closing the connection: stop reading (a read or a
            # put into a full queue would otherwise wait for nothing).
            if not task.cancelled() and serving is not None:
                serving.cancel()

        processor.add_done_callback(on_processor_end)
        frames = FrameReader(self._frame_bytes_max)
        try:
            while not processor.done():
                data = await reader.read(STREAM_LIMIT_BYTES)
                if not data:
                    break
                for frame in frames.feed(data):
                    try:
                        await queue.put(
                            decode_request(frame, frame_bytes_max=self._frame_bytes_max)
                        )
                    except UnsupportedVersionError as exc:
                        answer = unsupported_version_response(exc)
                        if answer is None:
                            raise
                        await queue.put(answer)
        except ProtocolError as exc:
            _log.info("closing a connection after a protocol error: %s", exc)
        finally:
            # The client is gone (EOF, protocol error) or the server is closing: requests still
            # queued or in progress have no one to answer to.
            processor.cancel()
            try:
                await processor
            except (asyncio.CancelledError, ConnectionError):
                pass
            except Exception:
                _log.exception("request processing failed; dropping the connection")

    async def _process(
        self,
        conn_id: int,
        queue: asyncio.Queue[tuple[RequestHeader, Message] | bytes | None],
        writer: asyncio.StreamWriter,
    ) -> None:
        """Answer queued requests in order. Whatever goes wrong ends in an answer or in closing
        the connection (which also ends the reader): never in a client left waiting."""
        try:
            while True:
                item = await queue.get()
                if item is None:
                    return
                if isinstance(item, bytes):
                    writer.write(item)
                    await writer.drain()
                    continue
                header, body = item
                try:
                    parts = await self._answer(conn_id, header, body)
                except CloseConnection:
                    writer.transport.abort()
                    return
                if parts is not None:
                    await write_parts(writer, parts)
        except (ConnectionError, asyncio.CancelledError):
            writer.transport.abort()
            raise
        except Exception:
            _log.exception("writing a response failed; closing the connection")
            writer.transport.abort()

    async def _answer(self, conn_id: int, header: RequestHeader, body: Message) -> Response:
        """The handler's response, or the API's error response if the handler raised;
        ``CloseConnection`` when there is nothing to answer with."""
        try:
            return await self._handler(conn_id, header, body)
        except CloseConnection:
            raise
        except Exception as exc:
            name, version = body.API.name, header.api_version
            _log.exception(
                "%s v%d (correlation id %d, client %r) failed; answering with an error",
                name,
                version,
                header.correlation_id,
                header.client_id,
            )
            return _error_parts(header, body, exc)


def _error_parts(header: RequestHeader, body: Message, error: Exception) -> Response:
    """The encoded error response to ``body``; ``CloseConnection`` if it has none."""
    if not isinstance(body, Request):
        raise CloseConnection(f"{type(body).__name__} is not a request")
    try:
        response = error_response(body, error, version=header.api_version)
        if response is None:
            raise CloseConnection(f"{body.API.name} has no error response")
        return encode_response_parts(header.correlation_id, header.api_version, response)
    except CloseConnection:
        raise
    except Exception as exc:
        _log.exception("%s v%d: no error response either", body.API.name, header.api_version)
        raise CloseConnection("no error response") from exc


async def write_parts(writer: asyncio.StreamWriter, parts: list[bytes | RecordsRef[Any]]) -> None:
    """Write a response frame: bytes chunks as they are, record holes with sendfile."""
    loop = asyncio.get_running_loop()
    for part in parts:
        if isinstance(part, bytes):
            writer.write(part)
            continue
        source = part.source
        if not isinstance(source, FetchSlice):
            raise ProtocolError("a records hole without a FetchSlice source")
        if source.size_bytes <= SMALL_SLICE_BYTES or not supports_sendfile(loop):
            # A small slice (a follower's next batch or two): one pread on the segment's open
            # handle is far cheaper than opening the file and setting up a sendfile, which
            # also waits for the transport's buffer to empty first. uvloop has no sendfile:
            # there every slice goes this way, in reads of at most PREAD_CHUNK_BYTES.
            for piece in source.pieces:
                position, left = piece.position, piece.size_bytes
                while left > 0:
                    size = min(left, PREAD_CHUNK_BYTES)
                    data = piece.handle.pread(position, size)
                    if len(data) != size:
                        raise ConnectionError("segment shorter than the fetch slice")
                    writer.write(data)
                    position, left = position + size, left - size
                    if left > 0:
                        await writer.drain()
            continue
        await writer.drain()
        for piece in source.pieces:
            # A duplicate of the segment's own descriptor, never the path: the log cleaner may
            # have swapped another file in under that name since the slice was taken (a closed
            # segment's descriptor is -1: os.dup fails and the client is dropped). sendfile
            # moves the shared file offset, which the log never uses (pread, O_APPEND).
            try:
                fd = os.dup(piece.handle.fileno())
            except OSError as exc:
                raise ConnectionError("segment closed under a fetch; dropping client") from exc
            with os.fdopen(fd, "rb") as f:
                sent = await loop.sendfile(writer.transport, f, piece.position, piece.size_bytes)
            if sent != piece.size_bytes:
                raise ConnectionError("segment shorter than the fetch slice; dropping client")
    await writer.drain()
