"""`QuorumServer`: one voter of the built-in metadata quorum, on an asyncio event loop.

Theory of operation. The server owns one `RaftNode` (the metadata log ``__cluster_metadata-0``
under ``data_dir``, applied by a `MetadataMachine`) and the `QuorumFrontend` that serves
coordinator calls on it, and does their IO: one listening TCP port for voters, replog's
coordinator clients (``quorum/wire.py``) and brokers speaking Kafka's BrokerRegistration and
BrokerHeartbeat (``quorum/kafka_port.py``), an outgoing connection per other voter that carries
this node's Raft messages, the clock, and the fsync. Everything runs on the loop's thread, so the
node, the frontend and the machine need no locks.

After every input (a frame, a timer) the server *pumps*: the frontend proposes what is queued,
the log is fsynced if anything was appended (inline: one fsync covers every input handled since
the last -- group commit), then the node's released messages go to the voters and the
frontend's replies to the clients. A timer fires at the earliest deadline of the node and the
frontend.

**Fetch long poll** (a departure the transport adds to `RaftCore`, which has none): a
follower's Fetch that would get nothing -- it asks from the leader's log end, with the last
epoch, and the high watermark is already there -- is parked until the leader appends a record
(or a quarter of the fetch timeout passes), then handed to the core, which answers with the new
records at once. So a follower is told of a write within one round trip instead of after a
fetch backoff, and an idle quorum does not spin. Parking never delays what the core would count
(a fetch that could move the high watermark is handed over at once) and stays far inside the
fetch timeout and the check-quorum timeout.

**A dead leader is noticed by its connections**, not only by the fetch timeout: each link to
another voter watches its connection, reconnects at once when the peer closes it, and reports a
refused connection to the node (``RaftNode.leader_unreachable``, the core's E9). When a
leader's process dies the OS closes its sockets and its port refuses, so its followers start a
pre-vote round within a random part of the election timeout instead of after the whole fetch
timeout. A dropped connection to a live leader just reconnects (one refused attempt is the
grace), and the pre-vote round refuses a wrong report. A paused (SIGSTOP) leader, or one whose
host is gone or cut off, keeps its connections open or lets them time out: that is still the
fetch timeout's case.

A storage error stops the server (``failed``): a voter that cannot write its log must not go on.
"""

from __future__ import annotations

import asyncio
import base64
import collections
import contextlib
import itertools
import logging
import random
import socket
import uuid
from collections.abc import Callable, Mapping
from typing import Any, cast

import attrs

from replog.clock import SYSTEM_CLOCK, Clock
from replog.coord.contract import ADMIN_QUEUE_LIMIT
from replog.errors import InvalidConfigError, ProtocolError, invariant
from replog.log.fs import REAL_FS
from replog.protocol.framing import FrameReader
from replog.protocol.messages import DescribeQuorumRequest
from replog.protocol.schema import Message as KafkaMessage
from replog.quorum import kafka_port
from replog.quorum import wire as raft_wire
from replog.quorum.frontend import (
    QuorumFrontend,
    Reply,
    ReplyError,
    ReplyNotLeader,
    ReplyOk,
    ReplyUnknown,
)
from replog.quorum.machine import FEED_RETENTION_MAX, MetadataMachine
from replog.raft.config import RaftConfig
from replog.raft.entries import Entry
from replog.raft.messages import Message, RaftFetchRequest
from replog.raft.node import RaftNode
from replog.raft.ready import LeaderAndEpoch
from replog.raft.states import Leader

__all__ = ["VoterConfig", "QuorumServer", "new_cluster_id", "parse_voters"]

_log = logging.getLogger("replog.coord.raft")
_PEER_QUEUE_MAX = 1024
_RECONNECT_MS = 100
#: how long a stopping leader waits for its EndQuorumEpoch to reach the sockets
_RESIGN_DRAIN_MS = 500
_DRAIN_POLL_MS = 5
_READ_BYTES = 1 << 16
_NEVER = 1 << 62
_KAFKA = 2  # a connection's kind: Kafka requests (quorum/kafka_port.py)
#: how long the frontend may hold a Kafka request (they carry no timeout of their own)
_KAFKA_CALL_TIMEOUT_MS = 30_000
_NOBODY = (0, 0)  # the token of a request whose reply goes nowhere (client ids start at 1)


def parse_voters(text: str) -> dict[int, tuple[str, int]]:
    """``1@host:port,2@host:port,...`` as ``{id: (host, port)}`` (`InvalidConfigError`)."""
    voters: dict[int, tuple[str, int]] = {}
    for part in text.split(","):
        node, sep, address = part.strip().partition("@")
        host, colon, port = address.rpartition(":")
        if not sep or not colon or not node.isdigit() or not port.isdigit() or not host:
            raise InvalidConfigError(f"a voter is <id>@<host>:<port>, not {part!r}")
        if int(node) in voters:
            raise InvalidConfigError(f"voter {node} is listed twice in {text!r}")
        voters[int(node)] = (host, int(port))
    return voters


def new_cluster_id() -> str:
    """A fresh cluster id in Kafka's form (``kafka-storage random-uuid``): 16 random bytes,
    URL-safe base64 without padding."""
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).decode("ascii").rstrip("=")


def _voter_map(voters: Mapping[int, tuple[str, int]]) -> dict[int, tuple[str, int]]:
    return {int(v): (str(host), int(port)) for v, (host, port) in voters.items()}


@attrs.frozen(kw_only=True)
class VoterConfig:
    """One voter's settings. ``voters`` maps every voter id (this one included) to the address
    it listens on; the quorum's timeouts default to Kafka's ``controller.quorum.*``.
    ``snapshot_interval``: records applied between two snapshots of the state machine."""

    node_id: int
    voters: Mapping[int, tuple[str, int]] = attrs.field(converter=_voter_map)
    data_dir: str
    election_timeout_ms: int = 1_000
    fetch_timeout_ms: int = 2_000
    request_timeout_ms: int = 2_000
    snapshot_interval: int = 10_000
    feed_retention_max: int = FEED_RETENTION_MAX
    admin_queue_limit: int = ADMIN_QUEUE_LIMIT

    def __attrs_post_init__(self) -> None:
        if self.node_id not in self.voters:
            raise InvalidConfigError(f"node {self.node_id} is not among the voters")
        if self.snapshot_interval < 0:
            raise InvalidConfigError("snapshot_interval must be >= 0")

    @property
    def address(self) -> tuple[str, int]:
        """Where this voter listens."""
        return self.voters[self.node_id]

    def raft_config(self) -> RaftConfig:
        """The core's settings."""
        return RaftConfig(
            node_id=self.node_id,
            voters=frozenset(self.voters),
            election_timeout_ms=self.election_timeout_ms,
            fetch_timeout_ms=self.fetch_timeout_ms,
            request_timeout_ms=self.request_timeout_ms,
            election_backoff_max_ms=self.election_timeout_ms,
            fetch_backoff_ms=5,
        )


class _PeerLink:
    """This node's connection to one other voter: sends its Raft messages, reconnecting as
    needed. Messages queued while it is down are dropped (Raft resends what matters).

    The peer never writes on this connection, so reading it shows only its end: when the
    peer closes it (its process died and the OS closed its sockets, or it stopped), the link
    reconnects at once (after the usual pause if that connection lived under it: a peer that
    keeps closing is not hammered), and a refused connection is reported to ``on_refused`` --
    the peer's port is closed, so its process is gone -- as is every refused retry after it. A
    dropped connection to a live peer just reconnects; a paused or cut-off peer is never
    refused."""

    def __init__(
        self,
        local_id: int,
        peer_id: int,
        address: tuple[str, int],
        on_refused: Callable[[int], None],
        clock: Clock,
    ) -> None:
        self._clock = clock
        self._local_id = local_id
        self._peer_id = peer_id
        self._address = address
        self._on_refused = on_refused
        self._queue: collections.deque[bytes] = collections.deque(maxlen=_PEER_QUEUE_MAX)
        self._wakeup = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self.dropped = 0

    def start(self) -> None:
        """Begin connecting."""
        self._task = asyncio.ensure_future(self._run())

    def send(self, data: bytes) -> None:
        """Queue one framed message."""
        if len(self._queue) == self._queue.maxlen:
            self.dropped += 1
        self._queue.append(data)
        self._wakeup.set()

    async def drain(self, timeout_ms: int, clock: Clock) -> bool:
        """Wait until every queued message was handed to the socket (or ``timeout_ms``
        passed); whether the queue emptied."""
        deadline_ms = clock.monotonic_ms() + timeout_ms
        while self._queue and clock.monotonic_ms() < deadline_ms:
            await asyncio.sleep(_DRAIN_POLL_MS / 1000)
        return not self._queue

    async def close(self) -> None:
        """Stop the link."""
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._task

    def _drop_queue(self) -> None:
        self.dropped += len(self._queue)
        self._queue.clear()

    async def _run(self) -> None:
        while True:
            try:
                reader, writer = await asyncio.open_connection(*self._address)
            except ConnectionRefusedError:
                self._drop_queue()
                self._on_refused(self._peer_id)
            except OSError:
                self._drop_queue()
            else:
                connected_ms = self._clock.monotonic_ms()
                await self._serve(reader, writer)
                if self._clock.monotonic_ms() - connected_ms >= _RECONNECT_MS:
                    continue  # it ended: again at once (a refusal now means the peer is gone)
            await asyncio.sleep(_RECONNECT_MS / 1000)  # and a peer that keeps closing waits

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """Write queued messages until the connection fails or the peer closes it."""
        closed = asyncio.Event()

        async def watch() -> None:
            with contextlib.suppress(OSError, ConnectionError):
                await reader.read(1)  # the peer sends nothing: this returns at its end
            closed.set()
            self._wakeup.set()

        watcher = asyncio.ensure_future(watch())
        try:
            writer.write(raft_wire.encode_hello(raft_wire.PEER, self._local_id))
            while not closed.is_set():
                while self._queue:
                    writer.write(self._queue.popleft())
                await writer.drain()
                if not self._queue and not closed.is_set():
                    self._wakeup.clear()
                    await self._wakeup.wait()
        except (OSError, ConnectionError):
            pass
        finally:
            self._drop_queue()
            watcher.cancel()
            writer.close()


@attrs.define
class _KafkaClient:
    """A Kafka-protocol connection: its writer, its requests held by the frontend (by
    ticket), and the order its replies must go out in."""

    writer: asyncio.StreamWriter
    order: kafka_port.ReplyOrder = attrs.field(factory=kafka_port.ReplyOrder)
    calls: dict[int, kafka_port.KafkaCall] = attrs.field(factory=dict)


class QuorumServer:
    """One voter (see the module docstring). Start with ``await QuorumServer.start(...)`` on
    the loop that will run it."""

    def __init__(
        self, config: VoterConfig, node: RaftNode, frontend: QuorumFrontend, clock: Clock
    ) -> None:
        self.config = config
        self.node = node
        self.frontend = frontend
        self._clock = clock
        self._loop = asyncio.get_running_loop()
        self._server: asyncio.base_events.Server | None = None
        self._links = {
            v: _PeerLink(config.node_id, v, address, self._on_peer_refused, clock)
            for v, address in config.voters.items()
            if v != config.node_id
        }
        self._clients: dict[int, asyncio.StreamWriter] = {}
        self._kafka: dict[int, _KafkaClient] = {}
        self._connections: set[asyncio.StreamWriter] = set()
        self._client_ids = itertools.count(1)
        self._parked: dict[int, tuple[RaftFetchRequest, int]] = {}
        self._parked_end = -1
        self._pump_scheduled = False
        self._timer: asyncio.TimerHandle | None = None
        self._timer_at_ms = _NEVER
        self.stopped = asyncio.Event()
        self.failed: BaseException | None = None
        self.port = 0

    @classmethod
    async def start(
        cls,
        config: VoterConfig,
        *,
        sock: socket.socket | None = None,
        clock: Clock = SYSTEM_CLOCK,
    ) -> QuorumServer:
        """Open the node's storage, listen (on ``sock`` if given, else the voter's address)
        and start talking to the other voters."""
        machine = MetadataMachine(
            feed_retention_max=config.feed_retention_max,
            admin_queue_limit=config.admin_queue_limit,
        )
        frontend = QuorumFrontend(machine, new_cluster_id=new_cluster_id)
        holder: list[QuorumServer] = []

        def on_apply(entry: Entry, result: object) -> None:
            frontend.on_apply(entry, result)

        def on_leader(known: LeaderAndEpoch) -> None:
            frontend.on_leader(known)
            if holder:
                holder[0]._on_leader(known)

        node = RaftNode.open(
            config.raft_config(),
            config.data_dir,
            REAL_FS,
            machine,
            random.Random().randrange,
            clock.monotonic_ms(),
            clock=clock,
            snapshot_interval=config.snapshot_interval,
            on_apply=on_apply,
            on_leader=on_leader,
        )
        frontend.attach(node)
        server = cls(config, node, frontend, clock)
        holder.append(server)
        try:
            if sock is not None:
                server._server = await asyncio.start_server(server._serve_connection, sock=sock)
            else:
                host, port = config.address
                server._server = await asyncio.start_server(server._serve_connection, host, port)
        except BaseException:
            node.close()
            raise
        server.port = server._server.sockets[0].getsockname()[1]
        for link in server._links.values():
            link.start()
        server._schedule_pump()
        _log.info("quorum node %s serving on port %s", config.node_id, server.port)
        return server

    # ------------------------------------------------------------------ status

    def status(self) -> dict[str, Any]:
        """Role, epoch, leader, offsets (for tools and tests)."""
        core = self.node.core
        return {
            "node_id": self.config.node_id,
            "state": type(core.state).__name__,
            "epoch": core.state.epoch,
            "leader_id": core.state.leader_id,
            "high_watermark": core.high_watermark,
            "applied_offset": self.node.applied_offset,
            "log_end_offset": core.log.end_offset,
            "log_start_offset": core.log.start_offset,
            "kafka_connections": len(self._kafka),
        }

    def _quorum_view(self) -> kafka_port.QuorumView | None:
        """DescribeQuorum's view from this node's core (None unless it leads); the core's
        times (monotonic) turned into wall clock ms."""
        core = self.node.core
        progress = core.voter_progress()
        if progress is None:
            return None
        mono, wall = self._clock.monotonic_ms(), self._clock.wall_ms()

        def wall_of(ms: int) -> int:
            return -1 if ms < 0 else wall - (mono - ms)

        own = kafka_port.VoterView(self.config.node_id, core.log.end_offset, wall, wall)
        others = [
            kafka_port.VoterView(
                v, p.end_offset, wall_of(p.last_fetch_ms), wall_of(p.last_caught_up_ms)
            )
            for v, p in sorted(progress.items())
        ]
        return kafka_port.QuorumView(
            self.config.node_id, core.state.epoch, core.high_watermark, (own, *others)
        )

    @property
    def is_leader(self) -> bool:
        """Whether this node leads its epoch."""
        return isinstance(self.node.core.state, Leader)

    # ------------------------------------------------------------------ connections

    async def _serve_connection(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        self._connections.add(writer)
        frames = FrameReader()
        kind, peer_id, client_id = -1, -1, -1
        try:
            while not self.stopped.is_set():
                data = await reader.read(_READ_BYTES)
                if not data:
                    return
                for body in frames.feed(data):
                    if kind < 0 and kafka_port.is_kafka_first_frame(body):
                        kind, client_id = _KAFKA, next(self._client_ids)
                        self._kafka[client_id] = _KafkaClient(writer)
                    if kind < 0:
                        kind, peer_id = raft_wire.decode_hello(body)
                        if kind == raft_wire.CLIENT:
                            client_id = next(self._client_ids)
                            self._clients[client_id] = writer
                    elif kind == _KAFKA:
                        self._on_kafka_request(client_id, kafka_port.decode_call(body))
                    elif kind == raft_wire.PEER:
                        self._on_peer_message(peer_id, raft_wire.decode_message(body))
                    else:
                        self._on_client_request(client_id, raft_wire.decode_request(body))
        except ProtocolError as exc:
            _log.warning("quorum node %s: dropping a connection: %s", self.config.node_id, exc)
        except (OSError, ConnectionError):
            pass
        finally:
            self._clients.pop(client_id, None)
            self._kafka.pop(client_id, None)
            self._connections.discard(writer)
            writer.close()

    def _on_peer_message(self, src: int, message: Message) -> None:
        if src not in self._links:
            raise ProtocolError(f"node {src} is not a voter")
        if self.stopped.is_set():
            return
        now_ms = self._clock.monotonic_ms()
        if isinstance(message, RaftFetchRequest) and self._may_park(message):
            self._parked[src] = (message, now_ms + self.config.fetch_timeout_ms // 4)
            self._parked_end = self.node.core.log.end_offset
        else:
            self._guard(lambda: self.node.on_message(src, message, now_ms))
        self._schedule_pump()

    def _on_peer_refused(self, peer_id: int) -> None:
        """A connection to ``peer_id`` was refused: its process is gone. A follower of it
        elects soon (the core's E9, which starts with a pre-vote round: a wrong report
        disrupts nothing)."""
        if self.stopped.is_set():
            return
        now_ms = self._clock.monotonic_ms()
        self._guard(lambda: self.node.leader_unreachable(peer_id, now_ms))
        self._schedule_pump()

    def _on_client_request(self, client_id: int, request: raft_wire.RequestFrame) -> None:
        if self.stopped.is_set():
            return
        now_ms = self._clock.monotonic_ms()
        deadline_ms = now_ms + max(0, request.timeout_ms)
        token = (client_id, request.correlation_id)
        self.frontend.on_request(token, request.request, deadline_ms, now_ms)
        self._schedule_pump()

    def _on_kafka_request(self, client_id: int, call: kafka_port.KafkaCall) -> None:
        """A BrokerRegistration / BrokerHeartbeat (served by the frontend as a RegisterBroker /
        Heartbeat) or an ApiVersions (answered here)."""
        client = self._kafka[client_id]
        ticket = client.order.expect()
        if self.stopped.is_set():
            return
        if isinstance(call.body, DescribeQuorumRequest):
            answer = kafka_port.describe_quorum(call.body, self._quorum_view())
            self._write_kafka(client_id, ticket, kafka_port.encode_answer(call, answer))
            return
        planned = kafka_port.plan(call, self.frontend.machine)
        if isinstance(planned, KafkaMessage):
            self._write_kafka(client_id, ticket, kafka_port.encode_answer(call, planned))
            return
        client.calls[ticket] = call
        self._submit_kafka((client_id, ticket), planned)

    def _submit_kafka(self, token: tuple[int, int], request: Any) -> None:
        now_ms = self._clock.monotonic_ms()
        self.frontend.on_request(token, request, now_ms + _KAFKA_CALL_TIMEOUT_MS, now_ms)
        self._schedule_pump()

    def _write_kafka(self, client_id: int, ticket: int, data: bytes) -> None:
        client = self._kafka.get(client_id)
        if client is None:
            return
        try:
            for frame in client.order.complete(ticket, data):
                client.writer.write(frame)
        except (OSError, RuntimeError):
            self._kafka.pop(client_id, None)

    # ------------------------------------------------------------------ fetch long poll

    def _may_park(self, request: RaftFetchRequest) -> bool:
        core = self.node.core
        state = core.state
        return (
            isinstance(state, Leader)
            and request.epoch == state.epoch
            and request.fetch_offset == core.log.end_offset
            and request.last_fetched_epoch == core.log.last_epoch
            and core.high_watermark >= core.log.end_offset
        )

    def _release_parked(self, now_ms: int, *, everything: bool = False) -> None:
        if not self._parked:
            return
        moved = self.node.core.log.end_offset != self._parked_end
        for src, (request, release_ms) in list(self._parked.items()):
            if everything or moved or release_ms <= now_ms:
                del self._parked[src]
                self._deliver_fetch(src, request, now_ms)

    def _deliver_fetch(self, src: int, request: RaftFetchRequest, now_ms: int) -> None:
        self._guard(lambda: self.node.on_message(src, request, now_ms))

    def _on_leader(self, known: LeaderAndEpoch) -> None:
        del known
        if self._parked:
            self._loop.call_soon(self._release_all)

    def _release_all(self) -> None:
        self._release_parked(self._clock.monotonic_ms(), everything=True)
        self._schedule_pump()

    # ------------------------------------------------------------------ the pump

    def _schedule_pump(self) -> None:
        if not self._pump_scheduled and not self.stopped.is_set():
            self._pump_scheduled = True
            self._loop.call_soon(self._pump)

    def _guard(self, action: Any) -> None:
        """Run a node action; a failure (storage) stops the server."""
        if self.failed is not None:
            return
        try:
            action()
        except Exception as exc:
            self._fail(exc)

    def _pump(self) -> None:
        self._pump_scheduled = False
        if self.stopped.is_set():
            return
        self._guard(self._pump_once)
        if self.failed is not None:
            return
        for out in self.node.take_messages():
            link = self._links.get(out.dst)
            if link is not None:
                link.send(raft_wire.encode_message(out.message))
        for token, reply in self.frontend.take_replies():
            self._send_reply(token, reply)
        self._arm_timer()

    def _pump_once(self) -> None:
        node, frontend = self.node, self.frontend
        now_ms = self._clock.monotonic_ms()
        if node.next_deadline_ms() <= now_ms:
            node.tick(now_ms)
        for _ in range(16):
            frontend.pump(now_ms)
            self._release_parked(now_ms)
            if node.needs_flush:
                node.flush(now_ms)
            if not frontend.has_queued and not node.needs_flush:
                break
        frontend.pump(now_ms)

    def _arm_timer(self) -> None:
        deadlines = [self.node.next_deadline_ms(), self.frontend.next_deadline_ms()]
        deadlines += [release_ms for _, release_ms in self._parked.values()]
        at_ms = min(deadlines)
        if self._timer is not None and at_ms == self._timer_at_ms:
            return
        if self._timer is not None:
            self._timer.cancel()
        delay_s = max(0, at_ms - self._clock.monotonic_ms()) / 1000
        self._timer_at_ms = at_ms
        self._timer = self._loop.call_later(min(delay_s, 3600.0), self._on_timer)

    def _on_timer(self) -> None:
        self._timer = None
        self._timer_at_ms = _NEVER
        self._schedule_pump()

    def _send_reply(self, token: object, reply: Reply) -> None:
        invariant(isinstance(token, tuple) and len(token) == 2, f"bad reply token {token!r}")
        client_id, correlation_id = cast(tuple[int, int], token)
        kafka = self._kafka.get(client_id)
        if kafka is not None:
            call = kafka.calls.pop(correlation_id)
            machine = self.frontend.machine
            response = kafka_port.answer(call, reply, machine)
            self._write_kafka(client_id, correlation_id, kafka_port.encode_answer(call, response))
            command = kafka_port.follow_up(call, reply, machine)
            if command is not None:  # answered to nobody: the next heartbeat sees its effect
                self._submit_kafka(_NOBODY, command)
            return
        writer = self._clients.get(client_id)
        if writer is None:
            return
        if isinstance(reply, ReplyOk):
            data = raft_wire.encode_reply(correlation_id, raft_wire.Status.OK, reply.value)
        elif isinstance(reply, ReplyError):
            data = raft_wire.encode_reply(correlation_id, raft_wire.Status.ERROR, reply.error)
        elif isinstance(reply, ReplyNotLeader):
            address = self.config.voters.get(reply.leader_id)
            leader = None if address is None else f"{address[0]}:{address[1]}"
            data = raft_wire.encode_reply(correlation_id, raft_wire.Status.NOT_LEADER, leader)
        else:
            invariant(isinstance(reply, ReplyUnknown), f"unknown reply {reply!r}")
            data = raft_wire.encode_reply(correlation_id, raft_wire.Status.UNKNOWN, reply.reason)
        try:
            writer.write(data)
        except (OSError, RuntimeError):
            self._clients.pop(client_id, None)

    # ------------------------------------------------------------------ stopping

    def _fail(self, exc: BaseException) -> None:
        _log.error("quorum node %s failed, stopping: %r", self.config.node_id, exc)
        self.failed = exc
        self._loop.create_task(self._shutdown(flush=False))

    async def stop(self) -> None:
        """Stop serving and close the log cleanly. A leader resigns first (E8): its
        EndQuorumEpoch lets the others elect a successor at once instead of after their fetch
        timeout."""
        if (
            not self.stopped.is_set()
            and self.failed is None
            and self.node.resign(self._clock.monotonic_ms())
        ):
            _log.info("quorum node %s resigns before stopping", self.config.node_id)
            self._pump()
            for link in self._links.values():
                await link.drain(_RESIGN_DRAIN_MS, self._clock)
        await self._shutdown(flush=True)

    async def crash(self) -> None:
        """Stop at once without a final flush, as a killed process would (tests)."""
        await self._shutdown(flush=False)

    async def _shutdown(self, *, flush: bool) -> None:
        if self.stopped.is_set():
            return
        self.stopped.set()
        if self._timer is not None:
            self._timer.cancel()
        if self._server is not None:
            self._server.close()
        for writer in list(self._connections):
            writer.close()
        for link in self._links.values():
            await link.close()
        if flush:
            self.node.close()
        else:
            self.node.abandon()
        _log.info("quorum node %s stopped", self.config.node_id)
