"""``BrokerLink``: this broker's connection to another broker, for the requests its driver
sends (follower fetches and the ListOffsets they may need), one at a time.

The link connects on first use to the address the metadata gives, writes a request frame,
and reads frames until the answer with the request's correlation id arrives, within
``timeout_s``. Any failure (refused, reset, timed out, undecodable) closes the connection and
raises; the next request connects again.
"""

from __future__ import annotations

import asyncio

from replog.broker.server import STREAM_LIMIT_BYTES
from replog.errors import ProtocolError
from replog.protocol import FrameReader, RequestHeader, decode_response, encode_request
from replog.protocol.schema import Message

__all__ = ["BrokerLink"]

CONNECT_TIMEOUT_S = 2.0


class BrokerLink:
    """A connection to broker ``broker_id`` (see the module docstring)."""

    def __init__(self, broker_id: int, client_id: str, frame_bytes_max: int) -> None:
        self.broker_id = broker_id
        self._client_id = client_id
        self._frame_bytes_max = frame_bytes_max
        self._reader: asyncio.StreamReader | None = None
        self._writer: asyncio.StreamWriter | None = None
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

    async def _exchange(
        self,
        address: tuple[str, int],
        api_key: int,
        api_version: int,
        body: Message,
        timeout_s: float,
    ) -> Message:
        if self._writer is None:
            async with asyncio.timeout(CONNECT_TIMEOUT_S):
                self._reader, self._writer = await asyncio.open_connection(
                    *address, limit=STREAM_LIMIT_BYTES
                )
        reader, writer = self._reader, self._writer
        if reader is None:
            raise ConnectionError(f"no connection to broker {self.broker_id}")
        self._correlation_id += 1
        header = RequestHeader(
            api_key=api_key,
            api_version=api_version,
            correlation_id=self._correlation_id,
            client_id=self._client_id,
        )
        writer.write(encode_request(header, body))
        await writer.drain()
        frames = FrameReader(self._frame_bytes_max)
        async with asyncio.timeout(timeout_s):
            while True:
                data = await reader.read(STREAM_LIMIT_BYTES)
                if not data:
                    raise EOFError(f"broker {self.broker_id} closed the connection")
                got = frames.feed(data)
                if got:
                    cid, answer = decode_response(got[0], api_key=api_key, api_version=api_version)
                    if cid != self._correlation_id:
                        raise ProtocolError(f"unexpected response correlation id {cid}")
                    return answer

    def close(self) -> None:
        """Drop the connection (a request in progress fails)."""
        writer, self._writer, self._reader = self._writer, None, None
        if writer is not None:
            writer.transport.abort()
