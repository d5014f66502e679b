"""A small asyncio TCP fault proxy: forward ``listen_port -> target``, ``cut()`` every link
(drop open connections and refuse new ones), ``heal()`` to forward again.

It runs its own event loop on a daemon thread, so a synchronous test drives it with plain calls::

    with FaultProxy("127.0.0.1", target_port) as proxy:
        connect_to(proxy.port)
        proxy.cut()    # open connections reset, new ones closed at once
        proxy.heal()   # forwarding again
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from concurrent.futures import Future

__all__ = ["FaultProxy"]

_CHUNK_BYTES = 256 * 1024


class FaultProxy:
    """Forwards TCP from ``127.0.0.1:port`` to ``target_host:target_port``; see module doc."""

    def __init__(self, target_host: str, target_port: int, *, listen_port: int = 0) -> None:
        self.target = (target_host, target_port)
        self._listen_port = listen_port
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._server: asyncio.Server | None = None
        self._links: set[asyncio.StreamWriter] = set()
        self.cut_off = False
        self.connections = 0
        self.port = 0

    def __enter__(self) -> FaultProxy:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _call(self, coro_or_fn: object) -> object:
        async def run() -> object:
            if asyncio.iscoroutine(coro_or_fn):
                return await coro_or_fn
            return coro_or_fn() if callable(coro_or_fn) else None

        future: Future[object] = asyncio.run_coroutine_threadsafe(run(), self._loop)
        return future.result(10)

    def start(self) -> None:
        """Listen (on ``listen_port``, or any free port) and forward."""
        self._thread.start()

        async def listen() -> int:
            self._server = await asyncio.start_server(
                self._on_client, "127.0.0.1", self._listen_port
            )
            port: int = self._server.sockets[0].getsockname()[1]
            return port

        self.port = int(self._call(listen()))  # type: ignore[call-overload]

    def cut(self) -> None:
        """Reset every open link and refuse new ones until ``heal``."""

        def do() -> None:
            self.cut_off = True
            for writer in list(self._links):
                _abort(writer)
            self._links.clear()

        self._call(do)

    def heal(self) -> None:
        """Forward again (links cut before stay closed; peers reconnect)."""

        def do() -> None:
            self.cut_off = False

        self._call(do)

    def close(self) -> None:
        """Stop listening, drop every link, end the loop thread. Idempotent."""
        if not self._thread.is_alive():
            return

        async def shutdown() -> None:
            for writer in list(self._links):
                _abort(writer)
            if self._server is not None:
                self._server.close()
                await self._server.wait_closed()

        with contextlib.suppress(Exception):
            self._call(shutdown())
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)
        self._loop.close()

    async def _on_client(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if self.cut_off:
            _abort(writer)
            return
        try:
            up_reader, up_writer = await asyncio.open_connection(*self.target)
        except OSError:
            _abort(writer)
            return
        self.connections += 1
        self._links.update((writer, up_writer))
        await asyncio.gather(
            self._pipe(reader, up_writer), self._pipe(up_reader, writer), return_exceptions=True
        )
        for w in (writer, up_writer):
            self._links.discard(w)
            _abort(w)

    async def _pipe(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while not self.cut_off:
                data = await reader.read(_CHUNK_BYTES)
                if not data or self.cut_off:
                    break
                writer.write(data)
                await writer.drain()
        finally:
            _abort(writer)


def _abort(writer: asyncio.StreamWriter) -> None:
    """Close at once (RST, no graceful FIN wait): a cut cable, not a polite goodbye."""
    with contextlib.suppress(Exception):
        writer.transport.abort()
