"""The built-in quorum inside one process: `QuorumThread` runs one voter on its own event-loop
thread, `LocalQuorum` a whole quorum of them on free loopback ports (tests, benchmarks, and
single-process use next to ``Cluster.local``)::

    with LocalQuorum.start(3, "/tmp/quorum") as quorum:
        with Cluster.local(3, coordinator=quorum.url) as cluster:
            ...

Each voter keeps its own data directory (``<base_dir>/node-<id>``), so `stop_node` and
`start_node` behave like stopping and restarting a ``replog controller`` process, and
`kill_node` like a crash (nothing flushed at the end; what was fsynced survives).
"""

from __future__ import annotations

import asyncio
import os
import socket
import threading
from collections.abc import Callable, Coroutine
from types import TracebackType
from typing import Any, TypeVar

from replog.clock import SYSTEM_CLOCK, Clock
from replog.errors import RequestTimeoutError
from replog.quorum.server import QuorumServer, VoterConfig

__all__ = ["LocalQuorum", "QuorumThread"]

T = TypeVar("T")
_CALL_TIMEOUT_S = 30.0


def _listening_socket(host: str, port: int) -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
        sock.listen(128)
    except OSError:
        sock.close()
        raise
    return sock


class QuorumThread:
    """One `QuorumServer` on a private event loop in a daemon thread."""

    def __init__(self, loop: asyncio.AbstractEventLoop, thread: threading.Thread) -> None:
        self._loop = loop
        self._thread = thread
        self.server: QuorumServer | None = None

    @classmethod
    def start(
        cls,
        config: VoterConfig,
        *,
        sock: socket.socket | None = None,
        clock: Clock = SYSTEM_CLOCK,
    ) -> QuorumThread:
        """Start the loop thread and the server on it (on ``sock`` if given)."""
        loop = asyncio.new_event_loop()
        thread = threading.Thread(
            target=loop.run_forever, name=f"replog-quorum-node-{config.node_id}", daemon=True
        )
        thread.start()
        runner = cls(loop, thread)
        try:
            runner.server = runner.run(QuorumServer.start(config, sock=sock, clock=clock))
        except BaseException:
            runner._end_loop()
            raise
        return runner

    def run(self, coro: Coroutine[Any, Any, T], timeout_s: float = _CALL_TIMEOUT_S) -> T:
        """Run ``coro`` on the voter's loop and wait for it."""
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result(timeout_s)

    def call(self, fn: Callable[[QuorumServer], T]) -> T:
        """Run ``fn(server)`` on the voter's loop thread (inspect it safely)."""
        server = self.server
        if server is None:
            raise RuntimeError("the quorum node is not running")

        async def go() -> T:
            return fn(server)

        return self.run(go())

    @property
    def running(self) -> bool:
        """Whether the server runs (it stops on a storage failure too)."""
        server = self.server
        return server is not None and not server.stopped.is_set()

    def stop(self, *, flush: bool = True) -> None:
        """Stop the server (``flush=False``: as a crash would) and end the loop thread."""
        server = self.server
        if server is not None:
            try:
                self.run(server.stop() if flush else server.crash())
            finally:
                self.server = None
        self._end_loop()

    def _end_loop(self) -> None:
        if not self._loop.is_closed():
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(10)
            self._loop.close()


class LocalQuorum:
    """``voters`` quorum nodes in this process (see the module docstring)."""

    def __init__(self, base_dir: str, configs: dict[int, VoterConfig]) -> None:
        self.base_dir = base_dir
        self.configs = configs
        self.nodes: dict[int, QuorumThread] = {}

    @classmethod
    def start(
        cls, voters: int, base_dir: str, *, host: str = "127.0.0.1", **settings: Any
    ) -> LocalQuorum:
        """Start voters 1..``voters`` on free ports of ``host``; ``settings`` are
        `VoterConfig` fields (timeouts, snapshot interval)."""
        if voters < 1:
            raise ValueError("a quorum has at least one voter")
        sockets = {i: _listening_socket(host, 0) for i in range(1, voters + 1)}
        addresses = {i: (host, s.getsockname()[1]) for i, s in sockets.items()}
        configs = {
            i: VoterConfig(
                node_id=i,
                voters=addresses,
                data_dir=os.path.join(base_dir, f"node-{i}"),
                **settings,
            )
            for i in addresses
        }
        quorum = cls(base_dir, configs)
        try:
            for i, sock in sockets.items():
                quorum.nodes[i] = QuorumThread.start(configs[i], sock=sock)
        except BaseException:
            for sock in sockets.values():
                sock.close()
            quorum.close()
            raise
        return quorum

    @property
    def url(self) -> str:
        """``raft://host:port,...`` of every voter."""
        voters = ",".join(f"{c.address[0]}:{c.address[1]}" for c in self.configs.values())
        return f"raft://{voters}"

    def start_node(self, node_id: int) -> None:
        """Start a stopped voter again on its port and data directory."""
        if node_id in self.nodes:
            raise RuntimeError(f"quorum node {node_id} is running")
        config = self.configs[node_id]
        sock = _listening_socket(*config.address)
        try:
            self.nodes[node_id] = QuorumThread.start(config, sock=sock)
        except BaseException:
            sock.close()
            raise

    def stop_node(self, node_id: int) -> None:
        """Stop one voter cleanly."""
        self.nodes.pop(node_id).stop()

    def kill_node(self, node_id: int) -> None:
        """Stop one voter as a crash would (no final flush)."""
        self.nodes.pop(node_id).stop(flush=False)

    def leader_id(self) -> int | None:
        """The running voter that leads the highest epoch, if any."""
        best: tuple[int, int] | None = None
        for node_id, node in self.nodes.items():
            status = node.call(lambda s: s.status())
            if status["state"] == "Leader" and (best is None or status["epoch"] > best[0]):
                best = (status["epoch"], node_id)
        return None if best is None else best[1]

    def wait_for_leader(self, timeout_ms: int = 10_000, clock: Clock = SYSTEM_CLOCK) -> int:
        """The leader's id once one is elected and has committed its epoch."""
        deadline_ms = clock.monotonic_ms() + timeout_ms
        while clock.monotonic_ms() < deadline_ms:
            leader = self.leader_id()
            if leader is not None:
                status = self.nodes[leader].call(lambda s: s.status())
                if status["high_watermark"] > 0:
                    return leader
            threading.Event().wait(0.01)
        raise RequestTimeoutError(f"no quorum leader within {timeout_ms} ms")

    def close(self) -> None:
        """Stop every voter."""
        for node_id in list(self.nodes):
            try:
                self.stop_node(node_id)
            except Exception:
                self.nodes.pop(node_id, None)

    def __enter__(self) -> LocalQuorum:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()
