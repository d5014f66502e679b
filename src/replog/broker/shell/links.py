"""``BrokerLink``: this broker's connection to another broker, for the requests its driver
sends (follower fetches and the ListOffsets they may need), one at a time.

The link connects on first use to the address the metadata gives, writes a request frame,
and waits for the answer, which its ``asyncio.Protocol`` hands over as soon as the frame is
complete (decoded from a view of the received bytes when the frame arrived whole: a follower's
fetch response is not copied before its records are appended), within ``timeout_s``. Any
failure (refused, reset, timed out, undecodable, an answer nobody asked for) closes the
connection and raises; the next request connects again.

Two ways to send. ``request`` is a coroutine (it connects first if needed). ``send_now``, on a
connection that is open and idle, writes the frame right away and hands the answer (or the
failure) to a callback called from the socket's own ``data_received``: no task, no trip through
the event loop on either side. That is the replication hot path: a follower's fetch answer is
applied, and its next fetch written, inside the callback that received the answer.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import cast

from replog.broker.shell.server import STREAM_LIMIT_BYTES
from replog.errors import ProtocolError
from replog.protocol import FrameReader, RequestHeader, decode_response, encode_request
from replog.protocol.schema import Message

__all__ = ["AnswerCallback", "BrokerLink"]

CONNECT_TIMEOUT_S = 2.0

AnswerCallback = Callable[[Message | None, BaseException | None], None]
"""``done(answer, error)``: exactly one of them is None."""
_FrameCallback = Callable[[memoryview | None, BaseException | None], None]


class _LinkProtocol(asyncio.Protocol):
    """The link's socket: the next complete frame to whoever waits for it."""

    def __init__(self, broker_id: int, frame_bytes_max: int) -> None:
        self._broker_id = broker_id
        self._frames = FrameReader(frame_bytes_max)
        self.transport: asyncio.Transport | None = None
        self.waiter: asyncio.Future[memoryview] | None = None
        #: the continuation of a request sent with ``BrokerLink.send_now``
        self.on_frame: _FrameCallback | None = None
        self.error: Exception | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        """Keep the transport; a large request (ListOffsets is small, but) need not pause."""
        self.transport = cast(asyncio.Transport, transport)
        self.transport.set_write_buffer_limits(high=STREAM_LIMIT_BYTES)

    def data_received(self, data: bytes) -> None:
        """Complete frames go to the waiting request; one nobody waits for is an error."""
        try:
            for frame in self._frames.feed_views(data):
                on_frame, self.on_frame = self.on_frame, None
                if on_frame is not None:
                    on_frame(frame, None)
                    continue
                waiter, self.waiter = self.waiter, None
                if waiter is None or waiter.done():
                    raise ProtocolError(f"broker {self._broker_id} sent an unrequested frame")
                waiter.set_result(frame)
        except ProtocolError as exc:
            self._fail(exc)
            if self.transport is not None:
                self.transport.abort()

    def connection_lost(self, exc: Exception | None) -> None:
        """Fail the waiting request."""
        self._fail(EOFError(f"broker {self._broker_id} closed the connection"))

    def _fail(self, error: Exception) -> None:
        if self.error is None:
            self.error = error
        waiter, self.waiter = self.waiter, None
        if waiter is not None and not waiter.done():
            waiter.set_exception(error)
        on_frame, self.on_frame = self.on_frame, None
        if on_frame is not None:
            on_frame(None, error)

    @property
    def idle(self) -> bool:
        """Open, unfailed, and no request waiting for its answer."""
        return (
            self.transport is not None
            and not self.transport.is_closing()
            and self.error is None
            and self.waiter is None
            and self.on_frame is None
        )


class BrokerLink:
    """A connection to broker ``broker_id`` (see the module docstring)."""

    def __init__(self, broker_id: int, client_id: str, frame_bytes_max: int) -> None:
        self.broker_id = broker_id
        self._client_id = client_id
        self._frame_bytes_max = frame_bytes_max
        self._protocol: _LinkProtocol | None = None
        self._correlation_id = 0
        self._lock = asyncio.Lock()

    async def request(
        self,
        address: tuple[str, int],
        api_key: int,
        api_version: int,
        body: Message,
        timeout_s: float,
    ) -> Message:
        """Send ``body`` and return the answer's body; raises on any failure."""
        async with self._lock:
            try:
                return await self._exchange(address, api_key, api_version, body, timeout_s)
            except BaseException:
                self.close()
                raise

    async def _connect(self, address: tuple[str, int]) -> _LinkProtocol:
        protocol = self._protocol
        if protocol is None or protocol.error is not None:
            protocol = _LinkProtocol(self.broker_id, self._frame_bytes_max)
            loop = asyncio.get_running_loop()
            async with asyncio.timeout(CONNECT_TIMEOUT_S):
                await loop.create_connection(lambda: protocol, *address)
            self._protocol = protocol
        return protocol

    async def _exchange(
        self,
        address: tuple[str, int],
        api_key: int,
        api_version: int,
        body: Message,
        timeout_s: float,
    ) -> Message:
        protocol = await self._connect(address)
        transport = protocol.transport
        if transport is None or protocol.error is not None:
            raise ConnectionError(f"no connection to broker {self.broker_id}")
        if protocol.on_frame is not None:
            raise ConnectionError(f"a request to broker {self.broker_id} is in progress")
        self._correlation_id += 1
        header = RequestHeader(
            api_key=api_key,
            api_version=api_version,
            correlation_id=self._correlation_id,
            client_id=self._client_id,
        )
        waiter: asyncio.Future[memoryview] = asyncio.get_running_loop().create_future()
        protocol.waiter = waiter
        transport.write(encode_request(header, body))
        async with asyncio.timeout(timeout_s):
            frame = await waiter
        cid, answer = decode_response(frame, api_key=api_key, api_version=api_version)
        if cid != self._correlation_id:
            raise ProtocolError(f"unexpected response correlation id {cid}")
        return answer

    def send_now(
        self, api_key: int, api_version: int, body: Message, timeout_s: float, done: AnswerCallback
    ) -> bool:
        """Write ``body`` now if the connection is open and idle, and call ``done`` with the
        answer from the socket callback that completes it (or with the failure: reset,
        timed out, undecodable; the connection is then closed). False, with nothing sent, when
        the link is not ready: use ``request``."""
        protocol = self._protocol
        if protocol is None or self._lock.locked() or not protocol.idle:
            return False
        transport = protocol.transport
        if transport is None:
            return False
        self._correlation_id += 1
        correlation_id = self._correlation_id
        header = RequestHeader(
            api_key=api_key,
            api_version=api_version,
            correlation_id=correlation_id,
            client_id=self._client_id,
        )

        def expired() -> None:
            protocol.on_frame = None
            self.close()
            done(None, TimeoutError(f"broker {self.broker_id} did not answer in {timeout_s} s"))

        timer = asyncio.get_running_loop().call_later(timeout_s, expired)

        def arrived(frame: memoryview | None, error: BaseException | None) -> None:
            timer.cancel()
            answer: Message | None = None
            if frame is not None:
                try:
                    cid, answer = decode_response(frame, api_key=api_key, api_version=api_version)
                    if cid != correlation_id:
                        raise ProtocolError(f"unexpected response correlation id {cid}")
                except Exception as exc:  # an undecodable answer costs the connection
                    answer, error = None, exc
            if error is not None and self._protocol is protocol:
                self.close()
            done(answer, error)

        protocol.on_frame = arrived
        transport.write(encode_request(header, body))
        return True

    def close(self) -> None:
        """Drop the connection (a request in progress fails)."""
        protocol, self._protocol = self._protocol, None
        if protocol is not None and protocol.transport is not None:
            protocol.transport.abort()
