"""``Consumer``: the synchronous consumer, an ``AsyncConsumer`` on a background event loop.

Rebalance callbacks (``on_assign`` / ``on_revoke``) run on the application's thread, inside the
call that met the rebalance (a poll, usually; ``_sync.CallerThread``), so they may call the
consumer themselves (``commit`` in ``on_revoke``), as with Kafka's consumer.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import re
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any

from replog.client._sync import CallerThread, LoopThread
from replog.client.connection import now_ms
from replog.client.consumer import AsyncConsumer
from replog.client.consumer_config import ConsumerConfig
from replog.client.fetching import ColumnSlice, ConsumerRecord
from replog.client.group import OffsetAndMetadata
from replog.client.group_consumer import RebalanceCallback
from replog.client.offsets import OffsetAndTimestamp
from replog.topics import TopicPartitionLike

__all__ = ["Consumer"]


class Consumer:
    """The synchronous consumer (see the module docstring)."""

    def __init__(self, bootstrap: str | Sequence[str] | None = None, **config: Any) -> None:
        self._loop = LoopThread("replog-consumer")
        self._caller = CallerThread(self._loop)
        try:
            self._consumer = self._loop.run(AsyncConsumer.start(bootstrap, **config))
        except BaseException:
            self._loop.stop()
            raise

    def __enter__(self) -> Consumer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __iter__(self) -> Iterator[ConsumerRecord]:
        """Every record, polling for ever (or until ``consumer_timeout_ms`` passes without
        one), as ``AsyncConsumer.__aiter__``."""
        idle_ms = self.config.consumer_timeout_ms
        last_ms = now_ms()
        while True:
            records = self.poll(timeout_ms=min(1000, idle_ms) if idle_ms else 1000)
            yield from records
            if records:
                last_ms = now_ms()
            elif idle_ms is not None and now_ms() - last_ms >= idle_ms:
                return

    @property
    def config(self) -> ConsumerConfig:
        """The consumer's settings."""
        return self._consumer.config

    def _run(self, coro: Any) -> Any:
        return self._caller.run(coro)

    async def _call(self, fn: Any, *args: Any) -> Any:
        return fn(*args)

    def assign(self, partitions: Iterable[TopicPartitionLike]) -> None:
        """See ``AsyncConsumer.assign``."""
        self._run(self._call(self._consumer.assign, list(partitions)))

    def assignment(self) -> list[TopicPartitionLike]:
        """See ``AsyncConsumer.assignment``."""
        result: list[TopicPartitionLike] = self._run(self._call(self._consumer.assignment))
        return result

    def subscribe(
        self,
        topics: Iterable[str] | str | re.Pattern[str] | None = None,
        *,
        pattern: str | re.Pattern[str] | None = None,
        on_assign: Callable[[list[tuple[str, int]]], None] | None = None,
        on_revoke: Callable[[list[tuple[str, int]]], None] | None = None,
    ) -> None:
        """See ``AsyncConsumer.subscribe`` (callbacks run on this thread)."""
        names = list(topics) if isinstance(topics, (list, tuple, set, frozenset)) else topics
        self._run(
            self._call(
                lambda: self._consumer.subscribe(
                    names,
                    pattern=pattern,
                    on_assign=self._on_caller(on_assign),
                    on_revoke=self._on_caller(on_revoke),
                )
            )
        )

    def _on_caller(
        self, callback: Callable[[list[tuple[str, int]]], None] | None
    ) -> RebalanceCallback | None:
        if callback is None:
            return None
        caller = self._caller

        async def on_caller_thread(tps: list[tuple[str, int]]) -> None:
            await caller.call(callback, tps)

        return on_caller_thread

    def unsubscribe(self) -> None:
        """See ``AsyncConsumer.unsubscribe``."""
        self._run(self._consumer.unsubscribe())

    def subscription(self) -> frozenset[str]:
        """See ``AsyncConsumer.subscription``."""
        result: frozenset[str] = self._run(self._call(self._consumer.subscription))
        return result

    def commit(
        self,
        offsets: Mapping[TopicPartitionLike, int | OffsetAndMetadata] | None = None,
        *,
        asynchronous: bool = False,
        timeout_ms: int | None = None,
    ) -> concurrent.futures.Future[None] | None:
        """See ``AsyncConsumer.commit``; with ``asynchronous`` it returns at once with a future
        of the outcome (``commit_async``)."""
        if asynchronous:
            return self.commit_async(offsets)
        self._run(self._consumer.commit(offsets, timeout_ms=timeout_ms))
        return None

    def commit_async(
        self,
        offsets: Mapping[TopicPartitionLike, int | OffsetAndMetadata] | None = None,
        callback: Callable[[BaseException | None], None] | None = None,
    ) -> concurrent.futures.Future[None]:
        """Commit in the background (the positions as of now); ``callback(error)`` runs on the
        consumer's loop thread when it is done, and the returned future holds the outcome."""
        chosen = dict(offsets) if offsets is not None else None

        async def go() -> None:
            offsets_now = chosen if chosen is not None else self._consumer.consumed_offsets()
            error: BaseException | None = None
            try:
                await self._consumer.commit(offsets_now)
            except BaseException as exc:
                error = exc
                raise
            finally:
                if callback is not None:
                    callback(error)

        return self._loop.submit(go())

    def committed(
        self, partitions: Iterable[TopicPartitionLike], *, timeout_ms: int | None = None
    ) -> dict[TopicPartitionLike, int | None]:
        """See ``AsyncConsumer.committed``."""
        result: dict[TopicPartitionLike, int | None] = self._run(
            self._consumer.committed(list(partitions), timeout_ms=timeout_ms)
        )
        return result

    def pause(self, partitions: Iterable[TopicPartitionLike]) -> None:
        """See ``AsyncConsumer.pause``."""
        self._run(self._call(self._consumer.pause, list(partitions)))

    def resume(self, partitions: Iterable[TopicPartitionLike]) -> None:
        """See ``AsyncConsumer.resume``."""
        self._run(self._call(self._consumer.resume, list(partitions)))

    def paused(self) -> list[TopicPartitionLike]:
        """See ``AsyncConsumer.paused``."""
        result: list[TopicPartitionLike] = self._run(self._call(self._consumer.paused))
        return result

    def seek(self, tp: TopicPartitionLike, offset: int) -> None:
        """See ``AsyncConsumer.seek``."""
        self._run(self._call(self._consumer.seek, tp, offset))

    def seek_to_beginning(self, partitions: Iterable[TopicPartitionLike] | None = None) -> None:
        """See ``AsyncConsumer.seek_to_beginning``."""
        tps = None if partitions is None else list(partitions)
        self._run(self._call(self._consumer.seek_to_beginning, tps))

    def seek_to_end(self, partitions: Iterable[TopicPartitionLike] | None = None) -> None:
        """See ``AsyncConsumer.seek_to_end``."""
        tps = None if partitions is None else list(partitions)
        self._run(self._call(self._consumer.seek_to_end, tps))

    def position(self, tp: TopicPartitionLike) -> int:
        """See ``AsyncConsumer.position``."""
        result: int = self._run(self._consumer.position(tp))
        return result

    def offsets_for_times(
        self, timestamps: Mapping[TopicPartitionLike, int]
    ) -> dict[TopicPartitionLike, OffsetAndTimestamp | None]:
        """See ``AsyncConsumer.offsets_for_times``."""
        result: dict[TopicPartitionLike, OffsetAndTimestamp | None] = self._run(
            self._consumer.offsets_for_times(timestamps)
        )
        return result

    def poll(self, timeout_ms: int = 1000, max_records: int | None = None) -> list[ConsumerRecord]:
        """See ``AsyncConsumer.poll``."""
        result: list[ConsumerRecord] = self._run(self._consumer.poll(timeout_ms, max_records))
        return result

    def poll_columns(
        self, timeout_ms: int = 1000, max_records: int | None = None
    ) -> list[ColumnSlice]:
        """See ``AsyncConsumer.poll_columns``."""
        result: list[ColumnSlice] = self._run(self._consumer.poll_columns(timeout_ms, max_records))
        return result

    def close(self) -> None:
        """Leave the group, close connections and stop the loop thread. Idempotent."""
        try:
            with contextlib.suppress(RuntimeError):
                self._run(self._consumer.close())
        finally:
            self._loop.stop()
