"""The synchronous facades' engine: one asyncio event loop running in a background thread.

Each sync client (``Producer``, ``Consumer``, ``Admin``) owns one ``LoopThread`` and runs its
async twin on it; ``run()`` submits a coroutine and blocks for its result. ``stop()`` cancels what
is left, closes the loop and joins the thread, so a closed client leaves nothing running.

``CallerThread`` runs application callbacks (a consumer's ``on_assign`` / ``on_revoke``) on the
application's own thread while it is blocked in a call: the callback may then call the client
again (commit in ``on_revoke``), which a callback run on the loop's thread could not do without
blocking the loop it waits on.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import queue
import threading
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

from replog.event_loop import new_event_loop

__all__ = ["CallerThread", "LoopThread"]

T = TypeVar("T")


class LoopThread:
    """An event loop (``replog.event_loop``: uvloop when installed) in a daemon thread, started
    at construction."""

    def __init__(self, name: str) -> None:
        self._loop = new_event_loop()
        self._thread = threading.Thread(target=self._main, name=name, daemon=True)
        self._stopped = False
        self._thread.start()

    @property
    def loop(self) -> asyncio.AbstractEventLoop:
        """The loop (use only through ``submit``/``run`` from other threads)."""
        return self._loop

    def _main(self) -> None:
        asyncio.set_event_loop(self._loop)
        try:
            self._loop.run_forever()
        finally:
            pending = [t for t in asyncio.all_tasks(self._loop) if not t.done()]
            for task in pending:
                task.cancel()
            if pending:
                self._loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
            self._loop.run_until_complete(self._loop.shutdown_asyncgens())
            self._loop.close()

    def submit(self, coro: Coroutine[Any, Any, T]) -> concurrent.futures.Future[T]:
        """Schedule ``coro`` on the loop; the returned future completes with its outcome."""
        if self._stopped:
            coro.close()
            raise RuntimeError("the client's event loop is stopped")
        return asyncio.run_coroutine_threadsafe(coro, self._loop)

    def run(self, coro: Coroutine[Any, Any, T], timeout_s: float | None = None) -> T:
        """Run ``coro`` on the loop and block for its result (``TimeoutError`` after
        ``timeout_s``; the coroutine is then cancelled)."""
        future = self.submit(coro)
        try:
            return future.result(timeout_s)
        except concurrent.futures.TimeoutError:
            future.cancel()
            raise TimeoutError(f"operation did not finish in {timeout_s} s") from None

    def stop(self) -> None:
        """Stop the loop (cancelling leftover tasks) and join the thread; idempotent."""
        if self._stopped:
            return
        self._stopped = True
        self._loop.call_soon_threadsafe(self._loop.stop)
        if threading.current_thread() is not self._thread:
            self._thread.join()


class CallerThread:
    """Hands functions from the loop to the application thread blocked in ``run``."""

    def __init__(self, loop_thread: LoopThread) -> None:
        self._loop_thread = loop_thread
        self._inbox: queue.SimpleQueue[Any] = queue.SimpleQueue()

    async def call(self, fn: Callable[..., Any], *args: Any) -> Any:
        """Run ``fn(*args)`` on the thread blocked in ``run`` and return its result; with no
        such thread (a task the application is not waiting on), wait until there is one."""
        loop = asyncio.get_running_loop()
        done: asyncio.Future[Any] = loop.create_future()
        self._inbox.put((fn, args, done, loop))
        return await done

    def run(self, coro: Coroutine[Any, Any, T]) -> T:
        """``LoopThread.run``, running the functions ``call`` hands over meanwhile."""
        inbox = self._inbox
        future = self._loop_thread.submit(coro)
        future.add_done_callback(lambda _: inbox.put(None))
        while True:
            item = inbox.get()
            if item is None:
                if future.done():
                    return future.result()
                continue  # a wake-up left by an earlier call
            fn, args, done, loop = item
            try:
                result = fn(*args)
            except BaseException as exc:  # the callback's error goes to the waiting task
                loop.call_soon_threadsafe(_settle, done, None, exc)
            else:
                loop.call_soon_threadsafe(_settle, done, result, None)


def _settle(done: asyncio.Future[Any], result: Any, error: BaseException | None) -> None:
    if done.done():
        return
    if error is not None:
        done.set_exception(error)
    else:
        done.set_result(result)
