"""The broker's TCP server: an ``asyncio.Protocol`` per client connection, requests answered in
order, each response written at once.

Theory of operation. ``data_received`` splits the byte stream into frames
(``FrameReader.feed_views``: frames wholly inside a received chunk are views of it, only a frame
split across chunks is gathered in the connection's one buffer) and decodes each into a request,
appended to the connection's pending list. One chain answers a connection's requests in order:
it starts each handler coroutine right there, in the callback, and when the handler finishes
without waiting (a produce at acks=1, metadata, most requests) writes the response at once --
no queue, no task, no extra trip through the loop. Only a handler that must wait (acks=all, a
long-poll fetch) is finished in a task, and the chain goes on with the next request once that
response is out. A handler may instead return ``PARKED`` at once: its answer comes later from
whoever has it (the broker shell carrying out its driver's ``Respond`` effect) through
``Server.respond``, which writes it in that very call and goes on with the connection's next
requests -- no future, no task, no trip through the loop. So there is never more than one
request of a connection in progress, and the responses leave in request order.

Each response goes out with one ``transport.writelines`` (the header and body bytes, and the
record payloads of Fetch responses, ``RecordsRef`` holes, read with ``pread`` from the segment's
open handle). Only a large slice (over ``SMALL_SLICE_BYTES``) on a loop with a native sendfile
(asyncio's; uvloop has none) goes out with ``loop.sendfile`` instead, from a duplicate of the
segment's descriptor, never through a Python copy of the log.

Back-pressure: reading pauses while more than ``inflight_requests_max`` requests wait (a
client that pipelines more is simply not read: TCP back-pressure), and the chain stops
answering while the transport's write buffer is over its high-water mark (``pause_writing``),
until ``resume_writing``.

Anything malformed (bad frame size, unknown api key, undecodable body) costs that client its
connection and nothing else: the requests before it in the stream are still answered, in order,
then the connection closes and nothing after it is read, as in Kafka. Nothing is ever unpickled
from the network. Bytes after a request's body are ignored, as Kafka ignores them (librdkafka
sends some).

No request is left unanswered. A handler that raises gets the API's error response sent in its
place (``protocol.error_response``: the error code on every topic/partition of the request,
UNKNOWN_SERVER_ERROR unless the exception carries a code), and the exception is logged once with
the API and version; when there is no error response to give (acks=0 produce) or it cannot be
sent, or a response cannot be written out, the connection is closed, so the client learns at
once instead of at its request timeout.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import enum
import itertools
import logging
import os
import types
from collections.abc import Awaitable, Callable, Coroutine, Generator
from typing import Any, Final, cast

import attrs

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

__all__ = ["PARKED", "CloseConnection", "Handler", "Parked", "Response", "Server"]

_log = logging.getLogger(__name__)
#: a connection's write buffer high-water mark (``pause_writing`` past it); also the read size
#: of replog's other stream users (``BrokerLink``)
STREAM_LIMIT_BYTES = 1024 * 1024
#: record slices over this size go out with sendfile where the loop has it
SMALL_SLICE_BYTES = 64 * 1024

#: what a handler returns: frame parts to write, or None for no response (acks=0)
Response = list[bytes | RecordsRef[Any]] | None


class Parked(enum.Enum):
    """The type of ``PARKED``: a handler's answer comes later, through ``Server.respond``."""

    PARKED = "PARKED"


#: what a handler returns when its answer comes later through ``Server.respond`` (or
#: ``Server.close_client``): the connection answers nothing more until then
PARKED: Final = Parked.PARKED
#: ``handler(conn_id, header, body)``: the answer to a connection's request, or ``PARKED``
Handler = Callable[[int, RequestHeader, Message], Awaitable[Response | Parked]]


@attrs.frozen
class _Malformed:
    """A frame that could not be decoded: once every request before it is answered, the
    connection closes (as Kafka does), so pipelined requests before it keep their answers."""

    error: ProtocolError


#: a decoded request, the encoded answer to one that needs no handler (unsupported version), or
#: the malformed frame that ends the connection
_Pending = tuple[RequestHeader, Message] | bytes | _Malformed


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
        self.handler = handler
        self.on_connection_closed = on_connection_closed
        self._conn_ids = itertools.count(1)
        self.frame_bytes_max = frame_bytes_max
        self.inflight_requests_max = inflight_requests_max
        self._connections_max = connections_max
        self._server: asyncio.Server | None = None
        self.connections: set[_Connection] = set()
        self._by_id: dict[int, _Connection] = {}
        self.peer_hosts: dict[int, str] = {}
        self.port = 0

    def peer_host(self, conn_id: int) -> str:
        """The address of connection ``conn_id``'s client as Kafka shows it (``/127.0.0.1``),
        "" once closed or when the socket has no address."""
        return self.peer_hosts.get(conn_id, "")

    async def start(self, host: str, port: int, *, serving: bool = True) -> int:
        """Bind (and, with ``serving``, start accepting); returns the bound port. Without
        ``serving``, connections wait in the listen backlog until ``start_serving``."""
        loop = asyncio.get_running_loop()
        self._server = await loop.create_server(
            self._new_connection, host, port, start_serving=serving
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
        return len(self.connections)

    async def close(self) -> None:
        """Stop accepting and drop every connection."""
        if self._server is not None:
            self._server.close()
        connections = list(self.connections)
        for conn in connections:
            conn.abort()
        tasks = [c.task for c in connections if c.task is not None]
        await asyncio.gather(*tasks, return_exceptions=True)
        # connection_lost runs on the next loop iteration; let it report every connection.
        await asyncio.sleep(0)
        server, self._server = self._server, None
        if server is not None:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(server.wait_closed(), 1.0)

    def _new_connection(self) -> _Connection:
        return _Connection(self, next(self._conn_ids))

    def admit(self, conn: _Connection) -> bool:
        """Count ``conn`` in, unless ``connections_max`` are open already."""
        if len(self.connections) >= self._connections_max:
            return False
        self.connections.add(conn)
        self._by_id[conn.conn_id] = conn
        return True

    def forget(self, conn: _Connection) -> None:
        """``conn`` closed."""
        self.connections.discard(conn)
        self._by_id.pop(conn.conn_id, None)
        self.peer_hosts.pop(conn.conn_id, None)

    def respond(self, conn_id: int, parts: Response) -> None:
        """Answer connection ``conn_id``'s parked request with ``parts`` (None: no answer)
        now, in this call, and go on with its next requests; nothing if it closed."""
        conn = self._by_id.get(conn_id)
        if conn is not None:
            conn.deliver(parts)

    def close_client(self, conn_id: int) -> None:
        """Drop connection ``conn_id`` (its parked request has no answer to give)."""
        conn = self._by_id.get(conn_id)
        if conn is not None:
            conn.abort()

    async def answer(self, conn_id: int, header: RequestHeader, body: Message) -> Response | Parked:
        """The handler's response (or ``PARKED``), or the API's error response if the handler
        raised; ``CloseConnection`` when there is nothing to answer with."""
        try:
            return await self.handler(conn_id, header, body)
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
            return error_parts(header, body, exc)


class _Connection(asyncio.Protocol):
    """One client connection (see the module docstring)."""

    def __init__(self, server: Server, conn_id: int) -> None:
        self._server = server
        self.conn_id = conn_id
        self._frames = FrameReader(server.frame_bytes_max)
        self._pending: collections.deque[_Pending] = collections.deque()
        self._transport: asyncio.Transport | None = None
        #: the task finishing a handler that had to wait (None: the chain is idle or running
        #: synchronously inside a callback)
        self.task: asyncio.Task[None] | None = None
        self._answering = False
        #: the request in progress waits for ``Server.respond``
        self._parked = False
        self._reading_paused = False
        self._writing_paused = False
        self._admitted = False
        self._closed = False
        #: a malformed frame was queued: nothing more is read from this connection
        self._malformed = False

    # ------------------------------------------------------------------ transport callbacks

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        """Count the connection in, or drop it at once past ``connections_max``."""
        self._transport = cast(asyncio.Transport, transport)
        if not self._server.admit(self):
            self._closed = True
            self._transport.abort()
            return
        self._admitted = True
        self._transport.set_write_buffer_limits(high=STREAM_LIMIT_BYTES)
        peer = transport.get_extra_info("peername")
        if isinstance(peer, tuple) and peer:
            self._server.peer_hosts[self.conn_id] = f"/{peer[0]}"

    def data_received(self, data: bytes) -> None:
        """Decode every complete frame, queue it, and run the chain."""
        if self._closed or self._malformed:
            return
        try:
            for frame in self._frames.feed_views(data):
                self._pending.append(self._decode(frame))
        except ProtocolError as exc:
            # Nothing after a malformed frame is read; what came before it is still answered.
            self._malformed = True
            self._pending.append(_Malformed(exc))
        if len(self._pending) > self._server.inflight_requests_max and not self._reading_paused:
            self._reading_paused = True
            self._transport_or_fail().pause_reading()
        self._advance()

    def eof_received(self) -> bool:
        """The client is gone: close (requests still pending have no one to answer to)."""
        return False

    def connection_lost(self, exc: Exception | None) -> None:
        """Forget the connection: cancel the request in progress, drop the pending ones."""
        self._closed = True
        self._pending.clear()
        if self.task is not None:
            self.task.cancel()
        if self._admitted:
            self._admitted = False
            self._server.forget(self)
            if self._server.on_connection_closed is not None:
                self._server.on_connection_closed(self.conn_id)

    def pause_writing(self) -> None:
        """The write buffer is over its high-water mark: answer nothing more until it drains."""
        self._writing_paused = True

    def resume_writing(self) -> None:
        """The write buffer drained: go on answering."""
        self._writing_paused = False
        self._advance()

    def _close_after_writes(self) -> None:
        """Close once the answers already written are flushed (``connection_lost`` follows)."""
        self._closed = True
        self._pending.clear()
        if self._transport is not None:
            self._transport.close()

    def abort(self) -> None:
        """Drop the connection now (``connection_lost`` follows)."""
        self._closed = True
        self._pending.clear()
        if self._transport is not None:
            self._transport.abort()

    # ------------------------------------------------------------------ the chain

    def _decode(self, frame: memoryview) -> _Pending:
        try:
            return decode_request(frame, frame_bytes_max=self._server.frame_bytes_max)
        except UnsupportedVersionError as exc:
            answer = unsupported_version_response(exc)
            if answer is None:
                raise
            return answer

    def _transport_or_fail(self) -> asyncio.Transport:
        transport = self._transport
        if transport is None:
            raise ConnectionError("no transport")
        return transport

    def _advance(self) -> None:
        """Answer pending requests in order for as long as each handler finishes at once;
        hand the first one that must wait to a task, which calls back here when done."""
        if self._answering or self.task is not None or self._parked:
            return  # re-entered from a write callback, or a request is in progress
        self._answering = True
        try:
            while (
                self._pending
                and self.task is None
                and not self._closed
                and not self._writing_paused
            ):
                item = self._pending.popleft()
                if isinstance(item, bytes):
                    self._write([item])
                    continue
                if isinstance(item, _Malformed):
                    _log.info("closing a connection after a protocol error: %s", item.error)
                    self._close_after_writes()
                    return
                header, body = item
                coro = self._server.answer(self.conn_id, header, body)
                try:
                    waiting_on = coro.send(None)
                except StopIteration as done:
                    if done.value is PARKED:
                        self._parked = True
                        return
                    self._respond(done.value)
                    continue
                except CloseConnection:
                    self.abort()
                    return
                except Exception:
                    _log.exception("request processing failed; dropping the connection")
                    self.abort()
                    return
                loop = asyncio.get_running_loop()
                self.task = loop.create_task(self._finish(coro, waiting_on))
                return
        finally:
            self._answering = False
        self._maybe_resume_reading()

    def _maybe_resume_reading(self) -> None:
        if (
            self._reading_paused
            and not self._closed
            and len(self._pending) <= self._server.inflight_requests_max
        ):
            self._reading_paused = False
            self._transport_or_fail().resume_reading()

    def deliver(self, parts: Response) -> None:
        """The answer to the parked request: write it now and go on with the chain."""
        if not self._parked or self._closed:
            return
        self._parked = False
        self._respond(parts)
        self._advance()

    async def _finish(self, coro: Coroutine[Any, Any, Response | Parked], waiting_on: Any) -> None:
        """Run the rest of a handler that had to wait, answer it, and go on with the chain."""
        try:
            parts = await _resume(coro, waiting_on)
            if self._closed:
                return
            if parts is PARKED:
                self._parked = True
                return
            if parts is not None and _needs_sendfile(parts):
                await self._send_with_sendfile(parts)
            else:
                self._respond(parts)
        except CloseConnection:
            self.abort()
            return
        except (ConnectionError, asyncio.CancelledError):
            self.abort()
            raise
        except Exception:
            _log.exception("answering a request failed; closing the connection")
            self.abort()
            return
        finally:
            self.task = None
        self._advance()

    def _respond(self, parts: Response) -> None:
        """Write a response now (``parts`` None: no response)."""
        if parts is None:
            return
        if _needs_sendfile(parts):
            # A large slice on a loop with sendfile: finish it in a task like a waiting handler.
            self.task = asyncio.get_running_loop().create_task(self._sendfile_then_go_on(parts))
            return
        try:
            chunks = _materialize(parts)
        except Exception:
            _log.exception("writing a response failed; closing the connection")
            self.abort()
            return
        self._write(chunks)

    async def _sendfile_then_go_on(self, parts: list[bytes | RecordsRef[Any]]) -> None:
        try:
            await self._send_with_sendfile(parts)
        except (ConnectionError, asyncio.CancelledError):
            self.abort()
            raise
        except Exception:
            _log.exception("writing a response failed; closing the connection")
            self.abort()
            return
        finally:
            self.task = None
        self._advance()

    def _write(self, chunks: list[bytes]) -> None:
        transport = self._transport
        if transport is None or transport.is_closing():
            return
        if len(chunks) == 1:
            transport.write(chunks[0])
        else:
            transport.writelines(chunks)

    async def _send_with_sendfile(self, parts: list[bytes | RecordsRef[Any]]) -> None:
        """Write ``parts``, the large record slices with ``loop.sendfile``."""
        loop = asyncio.get_running_loop()
        transport = self._transport_or_fail()
        chunks: list[bytes] = []
        for part in parts:
            source = _slice_of(part)
            if source is None or source.size_bytes <= SMALL_SLICE_BYTES:
                chunks.extend(_materialize([part]))
                continue
            self._write(chunks)
            chunks = []
            for piece in source.pieces:
                # A duplicate of the segment's own descriptor, never the path: the log cleaner
                # may have swapped another file in under that name since the slice was taken (a
                # closed segment's descriptor is -1: os.dup fails and the client is dropped).
                # sendfile moves the shared file offset, which the log never uses (pread).
                try:
                    fd = os.dup(piece.handle.fileno())
                except OSError as exc:
                    raise ConnectionError("segment closed under a fetch; dropping client") from exc
                with os.fdopen(fd, "rb") as f:
                    sent = await loop.sendfile(transport, f, piece.position, piece.size_bytes)
                if sent != piece.size_bytes:
                    raise ConnectionError("segment shorter than the fetch slice; dropping client")
        self._write(chunks)


@types.coroutine
def _resume(
    coro: Coroutine[Any, Any, Response | Parked], waiting_on: Any
) -> Generator[Any, Any, Response | Parked]:
    """Go on with ``coro``, which was started outside a task and yielded ``waiting_on`` (the
    future it waits for): hand that to the task running this, then pass the task's wake-ups
    (values, exceptions, cancellation) through to ``coro`` until it returns."""
    while True:
        try:
            yield waiting_on
        except BaseException as exc:  # thrown in by the task: cancellation, a failed await
            try:
                waiting_on = coro.throw(exc)
            except StopIteration as done:
                result: Response | Parked = done.value
                return result
            continue
        try:
            waiting_on = coro.send(None)
        except StopIteration as done:
            result = done.value
            return result


def _slice_of(part: bytes | RecordsRef[Any]) -> FetchSlice | None:
    if isinstance(part, bytes):
        return None
    source = part.source
    if not isinstance(source, FetchSlice):
        raise ProtocolError("a records hole without a FetchSlice source")
    return source


def _needs_sendfile(parts: list[bytes | RecordsRef[Any]]) -> bool:
    """Whether ``parts`` hold a slice worth a sendfile on this loop."""
    if len(parts) == 1 and isinstance(parts[0], bytes):
        return False  # a response without records holes (every produce answer)
    large = any(
        not isinstance(part, bytes)
        and isinstance(part.source, FetchSlice)
        and part.source.size_bytes > SMALL_SLICE_BYTES
        for part in parts
    )
    return large and supports_sendfile(asyncio.get_running_loop())


def _materialize(parts: list[bytes | RecordsRef[Any]]) -> list[bytes]:
    """The bytes of a response frame: bytes parts as they are, record holes read with one
    ``pread`` per file piece from the segment's open handle."""
    chunks: list[bytes] = []
    for part in parts:
        if isinstance(part, bytes):
            chunks.append(part)
            continue
        source = _slice_of(part)
        if source is None:
            continue
        for piece in source.pieces:
            data = piece.handle.pread(piece.position, piece.size_bytes)
            if len(data) != piece.size_bytes:
                raise ConnectionError("segment shorter than the fetch slice; dropping client")
            chunks.append(data)
    return chunks


def error_parts(header: RequestHeader, body: Message, error: Exception) -> Response:
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
