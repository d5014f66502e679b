"""`QuorumChannel`: a client's calls to the built-in quorum, routed to its leader.

Theory of operation. The channel keeps one TCP connection per voter it has talked to (opened
on first use), each carrying many calls at once (``raft_wire`` client frames, matched by
correlation id; a reader thread per connection completes them). A call goes to the voter the
channel believes leads. The answer is the value, the error the operation raised, or:

- NOT_LEADER with the leader's address (or none): the request was **not executed**, so the
  channel retries there (or at the next voter, after a short pause when nobody knows a leader),
  until the call's deadline;
- UNKNOWN: the node could not tell whether a write committed (``CoordinatorUnavailableError``:
  the outcome is unknown, as the contract allows);
- a connection that fails: a call that never left is retried elsewhere; a read that left is
  retried too (reads change nothing); a *write* that left has an unknown outcome
  (``CoordinatorUnavailableError``), because the old leader may have committed it;
- no answer by the deadline (a paused or overloaded leader keeps its connection open):
  ``CoordinatorUnavailableError``, and the channel stops believing that voter leads, so the
  next call asks the other voters instead of waiting on it again (its connection stays open
  for the other calls still waiting on it).

No call blocks past its deadline: ``CoordinatorUnavailableError`` when no leader answered.
"""

from __future__ import annotations

import itertools
import socket
import threading
from collections.abc import Sequence
from typing import Any

from replog.clock import SYSTEM_CLOCK, Clock
from replog.coord.errors import CoordinatorClosedError, CoordinatorUnavailableError
from replog.errors import ProtocolError
from replog.protocol.framing import FrameReader
from replog.quorum import wire as raft_wire
from replog.quorum.voter_walk import ConnectionLost, TryElsewhere, call_until_served

__all__ = ["QuorumChannel", "parse_addresses"]

_CONNECT_TIMEOUT_MS_MAX = 1_000
_READ_BYTES = 1 << 16


def parse_addresses(text: str) -> list[tuple[str, int]]:
    """``host:port,host:port`` as a list of addresses (``ValueError`` if malformed)."""
    addresses = []
    for part in text.split(","):
        host, colon, port = part.strip().rpartition(":")
        if not colon or not host or not port.isdigit():
            raise ValueError(f"a quorum address is host:port, not {part!r}")
        addresses.append((host.strip("[]"), int(port)))
    if not addresses:
        raise ValueError("no quorum address")
    return addresses


class _Waiter:
    def __init__(self) -> None:
        self.done = threading.Event()
        self.reply: raft_wire.ReplyFrame | None = None
        self.lost: str | None = None


class _VoterConnection:
    """One connection to one voter, calls multiplexed by correlation id."""

    def __init__(self, address: tuple[str, int], sock: socket.socket) -> None:
        self.address = address
        self._sock = sock
        self._lock = threading.Lock()
        self._send_lock = threading.Lock()
        self._waiters: dict[int, _Waiter] = {}
        self._ids = itertools.count(1)
        self.closed = False
        self._reader = threading.Thread(
            target=self._read_loop, name=f"replog-quorum-{address[1]}", daemon=True
        )

    @classmethod
    def open(cls, address: tuple[str, int], timeout_ms: int) -> _VoterConnection:
        """Connect and say hello (``ConnectionLost`` if the voter cannot be reached)."""
        connect_s = max(min(timeout_ms, _CONNECT_TIMEOUT_MS_MAX), 1) / 1000
        try:
            sock = socket.create_connection(address, timeout=connect_s)
        except OSError as exc:
            raise ConnectionLost(False, f"cannot connect: {exc}") from exc
        try:
            sock.settimeout(None)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            sock.sendall(raft_wire.encode_hello(raft_wire.CLIENT, -1))
        except OSError as exc:
            sock.close()
            raise ConnectionLost(False, f"cannot say hello: {exc}") from exc
        connection = cls(address, sock)
        connection._reader.start()
        return connection

    def call(self, request: Any, timeout_ms: int) -> raft_wire.ReplyFrame:
        """Send one request and wait for its reply (``ConnectionLost``, or None on timeout)."""
        waiter = _Waiter()
        with self._lock:
            if self.closed:
                raise ConnectionLost(False, "connection closed")
            correlation_id = next(self._ids) & 0x7FFFFFFF
            self._waiters[correlation_id] = waiter
        data = raft_wire.encode_request(correlation_id, timeout_ms, request)
        try:
            with self._send_lock:
                self._sock.sendall(data)
        except OSError as exc:
            self._fail(f"send failed: {exc}")
            raise ConnectionLost(True, str(exc)) from exc
        if not waiter.done.wait(timeout_ms / 1000):
            with self._lock:
                self._waiters.pop(correlation_id, None)
            raise TimeoutError(f"no reply from {self.address} within {timeout_ms} ms")
        if waiter.reply is None:
            raise ConnectionLost(True, waiter.lost or "connection lost")
        return waiter.reply

    def _read_loop(self) -> None:
        frames = FrameReader()
        try:
            while True:
                data = self._sock.recv(_READ_BYTES)
                if not data:
                    self._fail("closed by the node")
                    return
                for body in frames.feed(data):
                    reply = raft_wire.decode_reply(body)
                    with self._lock:
                        waiter = self._waiters.pop(reply.correlation_id, None)
                    if waiter is not None:
                        waiter.reply = reply
                        waiter.done.set()
        except (OSError, ProtocolError) as exc:
            self._fail(str(exc))

    def _fail(self, why: str) -> None:
        with self._lock:
            self.closed = True
            waiters, self._waiters = self._waiters, {}
        for waiter in waiters.values():
            waiter.lost = why
            waiter.done.set()
        try:
            self._sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass

    def close(self) -> None:
        """Close the socket; calls in flight fail."""
        self._fail("closed by the client")
        self._sock.close()


class QuorumChannel:
    """Calls routed to the quorum leader (see the module docstring). Thread-safe."""

    def __init__(self, addresses: Sequence[tuple[str, int]], *, clock: Clock = SYSTEM_CLOCK):
        if not addresses:
            raise ValueError("a quorum channel needs at least one voter address")
        self._addresses = list(addresses)
        self._clock = clock
        self._lock = threading.Lock()
        self._connections: dict[tuple[str, int], _VoterConnection] = {}
        self._leader: tuple[str, int] | None = None
        self._next = 0
        self._closed = False
        self._pause = threading.Event()

    def call(self, request: Any, *, timeout_ms: int, idempotent: bool) -> Any:
        """The value of ``request``, or the error it raised (see the module docstring);
        ``idempotent`` (a read) may be retried after it was sent."""
        redirects = 0

        def try_once(remaining_ms: int) -> Any:
            nonlocal redirects
            address = self._target()
            try:
                reply = self._connection(address, remaining_ms).call(request, remaining_ms)
            except ConnectionLost as exc:
                self._forget(address)
                raise ConnectionLost(exc.sent, f"{address[0]}:{address[1]}: {exc}") from None
            except TimeoutError as exc:
                # a voter that keeps its connection but answers nothing (paused, overloaded, a
                # vanished host) is no longer believed to lead: the next call asks another (its
                # connection stays, for the other calls still waiting on it)
                self._distrust(address)
                raise CoordinatorUnavailableError(str(exc)) from None
            if reply.status == raft_wire.Status.OK:
                return reply.body
            if reply.status == raft_wire.Status.ERROR:
                raise reply.body
            if reply.status == raft_wire.Status.UNKNOWN:
                raise CoordinatorUnavailableError(f"outcome unknown: {reply.body}")
            self._redirect(address, reply.body)
            redirects += 1
            return TryElsewhere(  # pause when no leader is known, or after a stale hint
                f"{address[0]}:{address[1]} does not lead",
                pause=reply.body is None or redirects > 1,
            )

        return call_until_served(
            try_once,
            clock=self._clock,
            timeout_ms=timeout_ms,
            idempotent=idempotent,
            server="quorum leader",
            pause_ms=self._pause_ms,
        )

    @property
    def leader(self) -> tuple[str, int] | None:
        """The voter this channel currently takes for the leader (the one that answered the
        last call, or a redirect's hint); None until a call found one."""
        with self._lock:
            return self._leader

    def _target(self) -> tuple[str, int]:
        with self._lock:
            if self._closed:
                raise CoordinatorClosedError("the quorum channel is closed")
            if self._leader is None:
                self._leader = self._addresses[self._next % len(self._addresses)]
                self._next += 1
            return self._leader

    def _connection(self, address: tuple[str, int], timeout_ms: int) -> _VoterConnection:
        with self._lock:
            connection = self._connections.get(address)
            if connection is not None and not connection.closed:
                return connection
        fresh = _VoterConnection.open(address, timeout_ms)
        with self._lock:
            if self._closed:
                fresh.close()
                raise CoordinatorClosedError("the quorum channel is closed")
            old = self._connections.get(address)
            if old is not None and not old.closed:
                fresh.close()
                return old
            self._connections[address] = fresh
            return fresh

    def _forget(self, address: tuple[str, int]) -> None:
        """``address`` failed: drop its connection and stop believing it leads."""
        with self._lock:
            connection = self._connections.pop(address, None)
            if self._leader == address:
                self._leader = None
        if connection is not None:
            connection.close()

    def _distrust(self, address: tuple[str, int]) -> None:
        """Stop believing ``address`` leads (without closing its connection)."""
        with self._lock:
            if self._leader == address:
                self._leader = None

    def _redirect(self, address: tuple[str, int], leader: str | None) -> None:
        with self._lock:
            if leader is None:
                if self._leader == address:
                    self._leader = None
                return
            try:
                self._leader = parse_addresses(leader)[0]
            except ValueError:
                self._leader = None

    def _pause_ms(self, delay_ms: int) -> None:
        self._pause.wait(max(0, delay_ms) / 1000)

    def close(self) -> None:
        """Close every connection; calls in flight fail, later ones raise
        ``CoordinatorClosedError``."""
        with self._lock:
            self._closed = True
            connections, self._connections = list(self._connections.values()), {}
        self._pause.set()
        for connection in connections:
            connection.close()
