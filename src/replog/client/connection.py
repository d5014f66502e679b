"""Client-side networking: one asyncio connection per broker, and the cluster view over them.

``BrokerConnection`` speaks the Kafka wire protocol (``replog.protocol``) to one broker:

- at open it sends ApiVersions (v3; on UNSUPPORTED_VERSION it retries with the highest version
  the broker listed, KIP-511) and, per API, uses the highest version both sides support;
- requests are pipelined: each gets a correlation id and a future, and the connection's
  ``asyncio.Protocol`` matches response frames to them as bytes arrive (frames wholly inside a
  received chunk are decoded from views of it, without a copy; no reader task, no stream
  buffer). At most ``in_flight_max`` requests are outstanding; more wait for a slot;
- a request that outlives its timeout raises ``RequestTimeoutError`` and closes the connection
  (as Kafka's NetworkClient does), so a late answer cannot be matched to the wrong request;
- when the connection breaks, every outstanding request fails with ``ConnectionLostError``.

``ClusterClient`` keeps one connection per node id, reopened on demand with exponential backoff
(``reconnect_backoff_ms`` doubling up to ``reconnect_backoff_max_ms``), and the
``MetadataCache``, refreshed from any reachable broker (known brokers first, then the bootstrap
list) when stale. A lost connection marks the metadata stale.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Sequence
from typing import Any, TypeVar, cast

import attrs

from replog.client.errors import ClientClosedError, ConnectionLostError
from replog.client.metadata import MetadataCache
from replog.clock import monotonic_ms
from replog.errors import ErrorCode, InvalidConfigError, ProtocolError, RequestTimeoutError
from replog.protocol import FrameReader, RequestHeader, decode_response, encode_request
from replog.protocol.messages import (
    ALL_APIS,
    API_VERSIONS,
    ApiVersion,
    ApiVersionsRequest,
    ApiVersionsResponse,
    MetadataRequest,
    MetadataRequestTopic,
    MetadataResponse,
)
from replog.protocol.schema import ApiInfo, Message

__all__ = [
    "BrokerConnection",
    "ClusterClient",
    "negotiate_versions",
    "parse_bootstrap",
]

R = TypeVar("R", bound=Message)

#: the write buffer's high-water mark: asyncio's 64 KiB default pauses often on big produces
_READ_CHUNK_BYTES = 1024 * 1024
#: how long ``close`` waits for the socket to finish closing
_CLOSE_WAIT_S = 1.0
_CLIENT_SOFTWARE_VERSION = "0.1.0"


def now_ms() -> int:
    """Monotonic milliseconds (the clients' clock for linger, backoff and metadata age)."""
    return monotonic_ms()


def parse_bootstrap(bootstrap: str | Sequence[str]) -> list[tuple[str, int]]:
    """ "host:port,host:port" (or a list of "host:port") -> [(host, port)];
    ``InvalidConfigError`` for an empty list or a malformed entry."""
    entries = bootstrap.split(",") if isinstance(bootstrap, str) else list(bootstrap)
    parsed: list[tuple[str, int]] = []
    for raw in entries:
        entry = raw.strip()
        if not entry:
            continue
        host, sep, port = entry.rpartition(":")
        if not sep or not host or not port.isdigit():
            raise InvalidConfigError(f"bootstrap entry {entry!r} is not host:port")
        parsed.append((host.strip("[]"), int(port)))
    if not parsed:
        raise InvalidConfigError("the bootstrap list is empty")
    return parsed


def negotiate_versions(broker_versions: Sequence[ApiVersion]) -> dict[int, int]:
    """Per api key, the highest version both the broker and replog's codec support. APIs with
    no common version are left out (using one raises ``ProtocolError``)."""
    chosen: dict[int, int] = {}
    for theirs in broker_versions:
        spec = ALL_APIS.get(theirs.api_key)  # a broker's or a voter's
        if spec is None:
            continue
        high = min(spec.info.max_version, theirs.max_version)
        if high >= max(spec.info.min_version, theirs.min_version):
            chosen[theirs.api_key] = high
    return chosen


@attrs.define(eq=False)
class BrokerConnection:
    """A pipelined connection to one broker (see module doc); open with ``open()``."""

    host: str
    port: int
    client_id: str
    request_timeout_ms: int
    _protocol: _ClientProtocol
    _slots: asyncio.Semaphore
    versions: dict[int, int] = attrs.field(factory=dict)
    _pending: dict[int, tuple[int, int, asyncio.Future[Message]]] = attrs.field(factory=dict)
    _next_correlation_id: int = 0
    _closed_error: Exception | None = None

    @classmethod
    async def open(
        cls,
        host: str,
        port: int,
        *,
        client_id: str = "replog",
        connect_timeout_ms: int = 10_000,
        request_timeout_ms: int = 30_000,
        in_flight_max: int = 5,
    ) -> BrokerConnection:
        """Connect and negotiate API versions; ``ConnectionLostError`` if unreachable."""
        protocol = _ClientProtocol(f"{host}:{port}")
        try:
            await asyncio.wait_for(
                asyncio.get_running_loop().create_connection(lambda: protocol, host, port),
                connect_timeout_ms / 1000,
            )
        except (OSError, TimeoutError) as exc:
            raise ConnectionLostError(f"cannot connect to {host}:{port}: {exc}") from exc
        conn = cls(
            host, port, client_id, request_timeout_ms, protocol, asyncio.Semaphore(in_flight_max)
        )
        protocol.attach(conn._on_frame, conn._fail)
        try:
            await conn._negotiate()
        except BaseException:
            await conn.close()
            raise
        return conn

    @property
    def closed(self) -> bool:
        """Whether the connection is no longer usable."""
        return self._closed_error is not None

    async def _negotiate(self) -> None:
        request = ApiVersionsRequest(
            client_software_name="replog-python", client_software_version=_CLIENT_SOFTWARE_VERSION
        )
        response = await self._send(request, API_VERSIONS.max_version, self.request_timeout_ms)
        if (
            isinstance(response, ApiVersionsResponse)
            and response.error_code == ErrorCode.UNSUPPORTED_VERSION
        ):
            listed = [v for v in response.api_keys if v.api_key == API_VERSIONS.api_key]
            version = min(API_VERSIONS.max_version, listed[0].max_version) if listed else 0
            response = await self._send(ApiVersionsRequest(), version, self.request_timeout_ms)
        if not isinstance(response, ApiVersionsResponse) or response.error_code != 0:
            raise ProtocolError(f"ApiVersions failed against {self.host}:{self.port}")
        self.versions = negotiate_versions(response.api_keys)

    async def request(
        self, message: Message, response_type: type[R], *, timeout_ms: int | None = None
    ) -> R:
        """Send ``message`` at the negotiated version and await its ``response_type`` body."""
        version = self._version_for(message)
        response = await self._send(message, version, timeout_ms or self.request_timeout_ms)
        if not isinstance(response, response_type):
            raise ProtocolError(f"unexpected response type {type(response).__name__}")
        return response

    async def send_no_response(self, message: Message) -> None:
        """Send a request the broker does not answer (Produce with acks=0)."""
        version = self._version_for(message)
        self._check_open()
        self._protocol.write(self._frame(message, version))
        await self._drain()

    def version_for(self, api: ApiInfo) -> int:
        """The negotiated version of ``api``; ``ProtocolError`` if the broker shares none."""
        version = self.versions.get(api.api_key)
        if version is None:
            raise ProtocolError(
                f"{self.host}:{self.port} shares no version of {api.name} with replog"
            )
        return version

    def _version_for(self, message: Message) -> int:
        return self.version_for(message.API)

    def _frame(self, message: Message, version: int) -> bytes:
        self._next_correlation_id = (self._next_correlation_id + 1) & 0x7FFFFFFF
        header = RequestHeader(
            api_key=message.API.api_key,
            api_version=version,
            correlation_id=self._next_correlation_id,
            client_id=self.client_id,
        )
        return encode_request(header, message)

    def _check_open(self) -> None:
        if self._closed_error is not None:
            raise ConnectionLostError(f"connection to {self.host}:{self.port} is closed") from (
                self._closed_error
            )

    async def _drain(self) -> None:
        """Wait while the socket's write buffer is over its high-water mark (rarely)."""
        if self._protocol.writing_paused:
            await self._protocol.drain()
            self._check_open()

    async def _send(self, message: Message, version: int, timeout_ms: int) -> Message:
        async with self._slots:
            self._check_open()
            frame = self._frame(message, version)
            loop = asyncio.get_running_loop()
            future: asyncio.Future[Message] = loop.create_future()
            self._pending[self._next_correlation_id] = (message.API.api_key, version, future)
            timer = loop.call_later(
                timeout_ms / 1000, self._time_out, future, message.API.name, timeout_ms
            )
            try:
                self._protocol.write(frame)
                await self._drain()
                return await future
            finally:
                timer.cancel()

    def _time_out(self, future: asyncio.Future[Message], api_name: str, timeout_ms: int) -> None:
        """A request outlived its timeout: it fails, and so does the connection (a late answer
        must not be matched to another request)."""
        if future.done():
            return
        error = RequestTimeoutError(
            f"{api_name} to {self.host}:{self.port}: no answer in {timeout_ms} ms"
        )
        future.set_exception(error)
        self._fail(ConnectionLostError(str(error)))

    def _on_frame(self, frame: memoryview) -> None:
        if len(frame) < 4:
            raise ProtocolError("response frame shorter than its correlation id")
        correlation_id = int.from_bytes(frame[:4], "big", signed=True)
        entry = self._pending.pop(correlation_id, None)
        if entry is None:
            raise ProtocolError(f"response with unknown correlation id {correlation_id}")
        api_key, version, future = entry
        try:
            _, body = decode_response(frame, api_key=api_key, api_version=version)
        except ProtocolError as exc:
            if not future.done():
                future.set_exception(exc)
            raise
        if not future.done():
            future.set_result(body)

    def _fail(self, error: Exception) -> None:
        if self._closed_error is None:
            self._closed_error = error
        pending, self._pending = self._pending, {}
        for _, _, future in pending.values():
            if not future.done():
                future.set_exception(ConnectionLostError(str(error)))
        self._protocol.close()

    async def close(self) -> None:
        """Close the socket and fail outstanding requests; idempotent."""
        self._fail(ClientClosedError(f"connection to {self.host}:{self.port} closed"))
        with contextlib.suppress(Exception):
            await asyncio.wait_for(asyncio.shield(self._protocol.closed), _CLOSE_WAIT_S)


class _ClientProtocol(asyncio.Protocol):
    """A ``BrokerConnection``'s socket: response frames to ``on_frame`` as they arrive, a lost
    connection or a malformed frame to ``on_fail``, and the transport's write flow control."""

    def __init__(self, peer: str) -> None:
        self._peer = peer
        self._frames = FrameReader()
        self._transport: asyncio.Transport | None = None
        self._on_frame: Callable[[memoryview], None] | None = None
        self._on_fail: Callable[[Exception], None] | None = None
        self._drain_waiter: asyncio.Future[None] | None = None
        self.writing_paused = False
        self.closed: asyncio.Future[None] = asyncio.get_running_loop().create_future()

    def attach(
        self, on_frame: Callable[[memoryview], None], on_fail: Callable[[Exception], None]
    ) -> None:
        """Route frames and failures to the connection (set once, right after connecting)."""
        self._on_frame, self._on_fail = on_frame, on_fail

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        """Keep the transport; let its write buffer hold a large request without pausing."""
        self._transport = cast(asyncio.Transport, transport)
        self._transport.set_write_buffer_limits(high=_READ_CHUNK_BYTES)

    def data_received(self, data: bytes) -> None:
        """Hand every complete response frame to the connection; a bad one fails it."""
        try:
            for frame in self._frames.feed_views(data):
                if self._on_frame is not None:
                    self._on_frame(frame)
        except ProtocolError as exc:
            self._fail(ConnectionLostError(f"{self._peer}: {exc}"))

    def connection_lost(self, exc: Exception | None) -> None:
        """Fail the connection; wake a writer waiting for the buffer to drain."""
        self._fail(ConnectionLostError(f"{self._peer} closed the connection"))
        waiter, self._drain_waiter = self._drain_waiter, None
        if waiter is not None and not waiter.done():
            waiter.set_result(None)
        if not self.closed.done():
            self.closed.set_result(None)

    def pause_writing(self) -> None:
        """The write buffer is over its high-water mark."""
        self.writing_paused = True

    def resume_writing(self) -> None:
        """The write buffer drained."""
        self.writing_paused = False
        waiter, self._drain_waiter = self._drain_waiter, None
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    async def drain(self) -> None:
        """Return once writing is no longer paused (or the connection is gone)."""
        while self.writing_paused and not self.closed.done():
            if self._drain_waiter is None:
                self._drain_waiter = asyncio.get_running_loop().create_future()
            await asyncio.shield(self._drain_waiter)

    def write(self, frame: bytes) -> None:
        """Send ``frame``."""
        if self._transport is None:
            raise ConnectionLostError(f"{self._peer}: not connected")
        self._transport.write(frame)

    def close(self) -> None:
        """Close the socket (``connection_lost`` follows)."""
        if self._transport is not None:
            self._transport.close()

    def _fail(self, error: Exception) -> None:
        if self._on_fail is not None:
            self._on_fail(error)
        elif self._transport is not None:
            self._transport.abort()


@attrs.define
class _NodeState:
    """Reconnect bookkeeping for one node."""

    lock: asyncio.Lock = attrs.field(factory=asyncio.Lock)
    connection: BrokerConnection | None = None
    failures: int = 0
    retry_at_ms: int = 0


@attrs.define(eq=False)
class ClusterClient:
    """Connections to every broker plus the metadata cache (see module doc)."""

    bootstrap: list[tuple[str, int]]
    client_id: str = "replog"
    request_timeout_ms: int = 30_000
    connect_timeout_ms: int = 10_000
    reconnect_backoff_ms: int = 50
    reconnect_backoff_max_ms: int = 1_000
    metadata_max_age_ms: int = 300_000
    in_flight_max: int = 5
    #: ask brokers to create a missing topic named in a Metadata request (Kafka's producer
    #: does, its consumer and admin do not; the broker decides by auto.create.topics.enable)
    allow_auto_topic_creation: bool = False
    metadata: MetadataCache = attrs.field(factory=MetadataCache)
    _nodes: dict[int, _NodeState] = attrs.field(factory=dict)
    _bootstrap_nodes: dict[tuple[str, int], _NodeState] = attrs.field(factory=dict)
    _metadata_lock: asyncio.Lock = attrs.field(factory=asyncio.Lock)
    _closed: bool = False

    @classmethod
    def from_bootstrap(cls, bootstrap: str | Sequence[str], **options: Any) -> ClusterClient:
        """A client for the brokers named by ``bootstrap`` ("host:port,...")."""
        return cls(parse_bootstrap(bootstrap), **options)

    def backoff_ms(self, failures: int) -> int:
        """Wait before reconnect attempt number ``failures + 1``: doubling, capped."""
        if failures <= 0:
            return 0
        return int(
            min(self.reconnect_backoff_max_ms, self.reconnect_backoff_ms * 2 ** (failures - 1))
        )

    async def _connect(self, state: _NodeState, host: str, port: int) -> BrokerConnection:
        async with state.lock:
            if state.connection is not None and not state.connection.closed:
                return state.connection
            if self._closed:
                raise ClientClosedError("client is closed")
            wait_ms = state.retry_at_ms - now_ms()
            if wait_ms > 0:
                await asyncio.sleep(wait_ms / 1000)
            try:
                state.connection = await BrokerConnection.open(
                    host,
                    port,
                    client_id=self.client_id,
                    connect_timeout_ms=self.connect_timeout_ms,
                    request_timeout_ms=self.request_timeout_ms,
                    in_flight_max=self.in_flight_max,
                )
            except ConnectionLostError:
                state.failures += 1
                state.retry_at_ms = now_ms() + self.backoff_ms(state.failures)
                self.metadata.mark_stale()
                raise
            state.failures = 0
            return state.connection

    async def connection(self, node_id: int) -> BrokerConnection:
        """The open connection to ``node_id`` (opened now if needed, after any backoff)."""
        address = self.metadata.brokers.get(node_id)
        if address is None:
            raise ConnectionLostError(f"no known address for broker {node_id}")
        state = self._nodes.setdefault(node_id, _NodeState())
        return await self._connect(state, address.host, address.port)

    async def api_version(self, node_id: int, api: ApiInfo) -> int:
        """The version of ``api`` the connection to ``node_id`` negotiated (opening it if
        needed), for requests whose fields depend on it; ``ProtocolError`` if none."""
        conn = await self.connection(node_id)
        return conn.version_for(api)

    async def send(
        self,
        node_id: int,
        message: Message,
        response_type: type[R],
        *,
        timeout_ms: int | None = None,
    ) -> R:
        """Send to one broker; a lost connection marks the metadata stale and re-raises."""
        conn = await self.connection(node_id)
        try:
            return await conn.request(message, response_type, timeout_ms=timeout_ms)
        except (ConnectionLostError, RequestTimeoutError):
            self.metadata.mark_stale()
            raise

    async def send_no_response(self, node_id: int, message: Message) -> None:
        """Send without awaiting an answer (acks=0)."""
        conn = await self.connection(node_id)
        try:
            await conn.send_no_response(message)
        except ConnectionLostError:
            self.metadata.mark_stale()
            raise

    async def send_any(
        self, message: Message, response_type: type[R], *, timeout_ms: int | None = None
    ) -> R:
        """Send to any reachable broker: known brokers first, then the bootstrap list."""
        errors: list[str] = []
        for node_id in list(self.metadata.brokers):
            try:
                return await self.send(node_id, message, response_type, timeout_ms=timeout_ms)
            except (ConnectionLostError, RequestTimeoutError) as exc:
                errors.append(str(exc))
        for host, port in self.bootstrap:
            state = self._bootstrap_nodes.setdefault((host, port), _NodeState())
            try:
                conn = await self._connect(state, host, port)
                return await conn.request(message, response_type, timeout_ms=timeout_ms)
            except (ConnectionLostError, RequestTimeoutError) as exc:
                errors.append(str(exc))
        raise ConnectionLostError("no broker reachable: " + "; ".join(errors))

    async def controller(self) -> int:
        """The controller's node id as the metadata reports it, else any known broker."""
        await self.refresh_metadata_if_needed()
        if self.metadata.controller_id in self.metadata.brokers:
            return self.metadata.controller_id
        if not self.metadata.brokers:
            raise ConnectionLostError("no brokers known")
        return min(self.metadata.brokers)

    async def refresh_metadata(self, topics: Sequence[str] | None = None) -> MetadataCache:
        """Fetch metadata (every topic when ``topics`` is None) and apply it; listed topics
        that do not exist are created if ``allow_auto_topic_creation`` and the broker allow it."""
        async with self._metadata_lock:
            request = MetadataRequest(
                topics=None if topics is None else [MetadataRequestTopic(name=t) for t in topics],
                allow_auto_topic_creation=self.allow_auto_topic_creation,
            )
            response = await self.send_any(request, MetadataResponse)
            self.metadata.update(response, now_ms(), all_topics=topics is None)
            return self.metadata

    async def refresh_metadata_if_needed(self) -> MetadataCache:
        """Refresh all-topic metadata when stale or older than ``metadata_max_age_ms``."""
        if self.metadata.needs_refresh(now_ms(), self.metadata_max_age_ms):
            await self.refresh_metadata()
        return self.metadata

    async def close(self) -> None:
        """Close every connection; the client accepts no further requests."""
        self._closed = True
        states = [*self._nodes.values(), *self._bootstrap_nodes.values()]
        for state in states:
            if state.connection is not None:
                await state.connection.close()
                state.connection = None
