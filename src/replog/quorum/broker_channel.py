"""`BrokerRpcChannel`: a broker's BrokerRegistration and BrokerHeartbeat requests to the active
controller of the built-in quorum, on Kafka's wire (``quorum/kafka_port.py`` answers them).

Theory of operation. The channel keeps idle Kafka-protocol connections per voter and takes one
for each call (a new one when all are busy), so a registration waiting for its commit does not
hold up another broker's heartbeat. A call goes to the voter believed to be the active
controller (the last that answered, else the hint ``leader_hint`` gives, else the next voter):

- ``NOT_CONTROLLER``: not executed; the call tries the next voter (pausing briefly after a
  round in which nobody led), until its deadline;
- a connection that cannot be made: the next voter, likewise;
- a connection that fails or goes quiet after the request left: a heartbeat (a read) is tried
  again; a registration's outcome is unknown (``CoordinatorUnavailableError``) -- it may have
  committed. A connection that timed out is closed, so a late answer never meets a later call.

Any other response, an error code included, is the call's answer; `registered_broker` and
`heartbeat_outcome` turn it into the coordination contract's value or error.
"""

from __future__ import annotations

import itertools
import socket
import threading
import uuid
from collections.abc import Callable, Sequence
from typing import cast

from replog.clock import SYSTEM_CLOCK, Clock
from replog.coord import rules
from replog.coord.errors import (
    BrokerIdInUseError,
    CoordinatorClosedError,
    CoordinatorUnavailableError,
    SessionExpiredError,
)
from replog.errors import ErrorCode, ProtocolError, invariant
from replog.metadata.types import BrokerInfo, SessionState
from replog.protocol.framing import FrameReader, RequestHeader, encode_request_header
from replog.protocol.messages import (
    BROKER_HEARTBEAT,
    BROKER_REGISTRATION,
    CONTROLLER_APIS,
    BrokerHeartbeatRequest,
    BrokerHeartbeatResponse,
    BrokerRegistrationListener,
    BrokerRegistrationRequest,
    BrokerRegistrationResponse,
)
from replog.protocol.messages.broker_lifecycle import SECURITY_PROTOCOL_PLAINTEXT
from replog.protocol.primitives import Reader, Writer
from replog.protocol.schema import Request, Response
from replog.quorum import wire as raft_wire
from replog.quorum.voter_walk import ConnectionLost, TryElsewhere, call_until_served

__all__ = [
    "CLIENT_ID",
    "BrokerRpcChannel",
    "heartbeat_outcome",
    "registered_broker",
    "registration_request",
]

CLIENT_ID = "replog-broker-lifecycle"
_CONNECT_TIMEOUT_MS_MAX = 1_000
_READ_BYTES = 1 << 16

Address = tuple[str, int]


class _KafkaConnection:
    """One Kafka-protocol connection, one call at a time (its taker holds it)."""

    def __init__(self, sock: socket.socket) -> None:
        self._sock = sock
        self._frames = FrameReader()
        self._ids = itertools.count(1)

    @classmethod
    def open(cls, address: Address, timeout_ms: int) -> _KafkaConnection:
        """Connect (``ConnectionLost`` if the voter cannot be reached)."""
        connect_s = max(min(timeout_ms, _CONNECT_TIMEOUT_MS_MAX), 1) / 1000
        try:
            sock = socket.create_connection(address, timeout=connect_s)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        except OSError as exc:
            raise ConnectionLost(False, f"cannot connect: {exc}") from exc
        return cls(sock)

    def call(self, request: Request, version: int, timeout_ms: int) -> Response:
        """Send ``request`` at ``version`` and read its response (``ConnectionLost``)."""
        info = request.API
        correlation_id = next(self._ids) & 0x7FFFFFFF
        header = RequestHeader(
            api_key=info.api_key,
            api_version=version,
            correlation_id=correlation_id,
            client_id=CLIENT_ID,
        )
        w = Writer()
        encode_request_header(w, header, 2 if info.is_flexible(version) else 1)
        request.encode_into(w, version)
        try:
            self._sock.settimeout(max(timeout_ms, 1) / 1000)
            self._sock.sendall(raft_wire.frame(w.to_bytes()))
        except OSError as exc:
            raise ConnectionLost(True, f"send failed: {exc}") from exc
        body = self._read_frame()
        r = Reader(body)
        if r.read_int32() != correlation_id:
            raise ConnectionLost(True, "a response to another request")
        if info.is_flexible(version):
            r.skip_tagged_fields()
        response: Response = CONTROLLER_APIS[info.api_key].response.decode_from(r, version)
        return response

    def _read_frame(self) -> bytes:
        while True:
            try:
                data = self._sock.recv(_READ_BYTES)
            except TimeoutError as exc:
                raise ConnectionLost(True, "no response in time") from exc
            except OSError as exc:
                raise ConnectionLost(True, f"receive failed: {exc}") from exc
            if not data:
                raise ConnectionLost(True, "closed by the node")
            frames = self._frames.feed(data)
            if frames:
                return bytes(frames[0])

    def close(self) -> None:
        """Close the socket."""
        try:
            self._sock.close()
        except OSError:
            pass


class BrokerRpcChannel:
    """BrokerRegistration / BrokerHeartbeat calls routed to the active controller (see the
    module docstring). Thread-safe."""

    def __init__(
        self,
        addresses: Sequence[Address],
        *,
        leader_hint: Callable[[], Address | None] = lambda: None,
        clock: Clock = SYSTEM_CLOCK,
    ) -> None:
        if not addresses:
            raise ValueError("a broker channel needs at least one voter address")
        self._addresses = list(addresses)
        self._leader_hint = leader_hint
        self._clock = clock
        self._lock = threading.Lock()
        self._idle: dict[Address, list[_KafkaConnection]] = {}
        self._leader: Address | None = None
        self._next = 0
        self._closed = False
        self._pause = threading.Event()

    def call(
        self, request: Request, *, version: int, timeout_ms: int, idempotent: bool
    ) -> Response:
        """The active controller's response to ``request`` (see the module docstring)."""
        tries = declined = 0

        def try_once(remaining_ms: int) -> Response | TryElsewhere:
            nonlocal tries, declined
            address = self._target(use_hint=tries == 0)
            tries += 1
            try:
                response = self._call_on(address, request, version, remaining_ms)
            except ConnectionLost as exc:
                self._move_on(address)
                raise ConnectionLost(exc.sent, f"{address[0]}:{address[1]}: {exc}") from None
            except ProtocolError as exc:
                raise CoordinatorUnavailableError(f"bad response from {address}: {exc}") from None
            if getattr(response, "error_code", ErrorCode.NONE) != ErrorCode.NOT_CONTROLLER:
                with self._lock:
                    self._leader = address
                return response
            self._move_on(address)
            declined += 1
            return TryElsewhere(  # pause after a round in which nobody led
                f"{address[0]}:{address[1]} is not the active controller",
                pause=declined % len(self._addresses) == 0,
            )

        return call_until_served(
            try_once,
            clock=self._clock,
            timeout_ms=timeout_ms,
            idempotent=idempotent,
            server="active controller",
            pause_ms=self._pause_ms,
        )

    def register(self, request: BrokerRegistrationRequest, *, timeout_ms: int) -> BrokerInfo:
        """One BrokerRegistration: the stored registration (`registered_broker`)."""
        response = self.call(
            request,
            version=BROKER_REGISTRATION.max_version,
            timeout_ms=timeout_ms,
            idempotent=False,
        )
        invariant(isinstance(response, BrokerRegistrationResponse), f"answered {response!r}")
        return registered_broker(request, cast(BrokerRegistrationResponse, response))

    def heartbeat(
        self, broker_id: int, broker_epoch: int, *, timeout_ms: int, want_shut_down: bool = False
    ) -> SessionState:
        """One BrokerHeartbeat (no metadata offset; ``want_shut_down`` asks for a controlled
        shutdown): CONNECTED, or ``SessionExpiredError`` (`heartbeat_outcome`)."""
        request = BrokerHeartbeatRequest(
            broker_id=broker_id,
            broker_epoch=broker_epoch,
            current_metadata_offset=-1,
            want_shut_down=want_shut_down,
        )
        response = self.call(
            request, version=BROKER_HEARTBEAT.max_version, timeout_ms=timeout_ms, idempotent=True
        )
        invariant(isinstance(response, BrokerHeartbeatResponse), f"answered {response!r}")
        return heartbeat_outcome(request, cast(BrokerHeartbeatResponse, response))

    def _call_on(
        self, address: Address, request: Request, version: int, timeout_ms: int
    ) -> Response:
        with self._lock:
            if self._closed:
                raise CoordinatorClosedError("the broker channel is closed")
            idle = self._idle.get(address)
            connection = idle.pop() if idle else None
        if connection is None:
            connection = _KafkaConnection.open(address, timeout_ms)
        try:
            response = connection.call(request, version, timeout_ms)
        except BaseException:
            connection.close()
            raise
        with self._lock:
            if self._closed:
                connection.close()
            else:
                self._idle.setdefault(address, []).append(connection)
        return response

    def _target(self, *, use_hint: bool) -> Address:
        """The voter to try: the believed controller, else (on a call's first try) the hint,
        else the next voter."""
        with self._lock:
            if self._closed:
                raise CoordinatorClosedError("the broker channel is closed")
            if self._leader is None:
                hint = self._leader_hint() if use_hint else None
                if hint is not None and hint in self._addresses:
                    self._leader = hint
                else:
                    self._leader = self._addresses[self._next % len(self._addresses)]
                    self._next += 1
            return self._leader

    def _move_on(self, address: Address) -> None:
        """``address`` did not serve the call: try the next voter."""
        with self._lock:
            if self._leader == address:
                self._leader = None
                index = self._addresses.index(address) if address in self._addresses else 0
                self._next = index + 1

    def _pause_ms(self, delay_ms: int) -> None:
        self._pause.wait(max(0, delay_ms) / 1000)

    def close(self) -> None:
        """Close every idle connection; later calls raise ``CoordinatorClosedError``."""
        with self._lock:
            self._closed = True
            idle, self._idle = self._idle, {}
        self._pause.set()
        for connections in idle.values():
            for connection in connections:
                connection.close()


# ---------------------------------------------------------------------------- the contract's calls


def registration_request(
    broker_id: int,
    host: str,
    port: int,
    rack: str | None,
    *,
    session_timeout_ms: int,
    clean_shutdown: bool,
    fenced: bool,
) -> BrokerRegistrationRequest:
    """``register_broker``'s arguments as a BrokerRegistration (a fresh incarnation id; one
    PLAINTEXT listener; replog's tagged session timeout and flags). ``ValueError`` for a port
    a listener cannot carry (Kafka's is a uint16)."""
    if not 0 <= port <= 0xFFFF:
        raise ValueError(f"a listener's port is 0-65535, not {port}")
    listener = BrokerRegistrationListener(
        name="PLAINTEXT", host=host, port=port, security_protocol=SECURITY_PROTOCOL_PLAINTEXT
    )
    return BrokerRegistrationRequest(
        broker_id=broker_id,
        cluster_id="",
        incarnation_id=uuid.uuid4(),
        listeners=[listener],
        features=[],
        rack=rack,
        session_timeout_ms=session_timeout_ms,
        unclean_shutdown=not clean_shutdown,
        fenced=fenced,
    )


def registered_broker(
    request: BrokerRegistrationRequest, response: BrokerRegistrationResponse
) -> BrokerInfo:
    """The registration the controller stored (the contract's value), or the error it
    refused with."""
    code = _code(response.error_code)
    if code is ErrorCode.NONE:
        listener = request.listeners[0]
        return rules.registration(
            request.broker_id,
            response.broker_epoch,
            listener.host,
            listener.port,
            request.rack,
            clean_shutdown=not request.unclean_shutdown,
            fenced=request.fenced,
        )
    if code is ErrorCode.DUPLICATE_BROKER_REGISTRATION:
        raise BrokerIdInUseError(request.broker_id, response.holder_broker_epoch)
    raise _unavailable("BrokerRegistration", code)


def heartbeat_outcome(
    request: BrokerHeartbeatRequest, response: BrokerHeartbeatResponse
) -> SessionState:
    """CONNECTED, or ``SessionExpiredError`` when the controller no longer holds the
    registration of that epoch."""
    code = _code(response.error_code)
    if code is ErrorCode.NONE:
        return SessionState.CONNECTED
    if code in (ErrorCode.STALE_BROKER_EPOCH, ErrorCode.BROKER_ID_NOT_REGISTERED):
        current = None if response.current_broker_epoch < 0 else response.current_broker_epoch
        raise SessionExpiredError(request.broker_id, request.broker_epoch, current)
    raise _unavailable("BrokerHeartbeat", code)


def _code(value: int) -> ErrorCode:
    try:
        return ErrorCode(value)
    except ValueError:
        return ErrorCode.UNKNOWN_SERVER_ERROR


def _unavailable(api: str, code: ErrorCode) -> CoordinatorUnavailableError:
    return CoordinatorUnavailableError(f"{api} answered {code.name}")
