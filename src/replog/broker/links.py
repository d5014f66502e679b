"""``BrokerLink``: this broker's connection to another broker, for the requests its driver
sends (follower fetches and the ListOffsets they may need), one at a time.

The link connects on first use to the address the metadata gives, writes a request frame,
and waits for the answer, which its ``asyncio.Protocol`` hands over as soon as the frame is
complete (decoded from a view of the received bytes when the frame arrived whole: a follower's
fetch response is not copied before its records are appended), within ``timeout_s``. Any
failure (refused, reset, timed out, undecodable, an answer nobody asked for) closes the
connection and raises; the next request connects again.
"""

from __future__ import annotations

import asyncio
from typing import cast

from replog.broker.server import STREAM_LIMIT_BYTES
from replog.errors import ProtocolError
from replog.protocol import FrameReader, RequestHeader, decode_response, encode_request
from replog.protocol.schema import Message

__all__ = ["BrokerLink"]

CONNECT_TIMEOUT_S = 2.0


class _LinkProtocol(asyncio.Protocol):
    """The link's socket: the next complete frame to whoever waits for it."""

    def __init__(self, broker_id: int, frame_bytes_max: int) -> None:
        self._broker_id = broker_id
        self._frames = FrameReader(frame_bytes_max)
        self.transport: asyncio.Transport | None = None
        self.waiter: asyncio.Future[memoryview] | None = None
        self.error: Exception | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        """Keep the transport; a large request (ListOffsets is small, but) need not pause."""
        self.transport = cast(asyncio.Transport, transport)
        self.transport.set_write_buffer_limits(high=STREAM_LIMIT_BYTES)

    def data_received(self, data: bytes) -> None:
        """Complete frames go to the waiting request; one nobody waits for is an error."""
        try:
            for frame in self._frames.feed_views(data):
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

    def close(self) -> None:
        """Drop the connection (a request in progress fails)."""
        protocol, self._protocol = self._protocol, None
        if protocol is not None and protocol.transport is not None:
            protocol.transport.abort()
