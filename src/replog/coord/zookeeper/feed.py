"""The ZooKeeper backend's change feed: reading ``/replog/changes/c-<seq>`` nodes, pushing
them to subscribers, and trimming. Writes append to the feed in ``replog.coord.zookeeper.znode_io``.

Subscribers are woken by a data watch on the feed head (``/replog/head``) and by every
reconnect of the main client; the handle's worker thread then reads from each subscriber's
cursor (``pump``)."""

from __future__ import annotations

import itertools
import threading
from collections.abc import Callable
from typing import Any

import attrs

from replog.clock import monotonic_s
from replog.coord import codec
from replog.coord.contract import MAX_CHANGES_PER_BATCH
from replog.coord.errors import CoordinatorUnavailableError, MustResyncError
from replog.coord.zookeeper.znode_io import CHANGES, HEAD, ZkIo, change_path, kazoo_errors
from replog.metadata.types import ChangeBatch, MetadataChange, Subscription

__all__ = ["ZkFeed"]


@attrs.define(eq=False)
class _FeedSub:
    callback: Callable[[ChangeBatch], None]
    cursor: int


class ZkFeed:
    """The feed of one handle: ``io`` and the ``main`` client read it; ``schedule`` runs a
    function on the handle's worker thread."""

    def __init__(
        self,
        io: ZkIo,
        main: Any,
        schedule: Callable[[Callable[[], None]], None],
        default_timeout_ms: int,
    ) -> None:
        self._io = io
        self._main = main
        self._schedule = schedule
        self._default_timeout_ms = default_timeout_ms
        self._lock = threading.Lock()
        self._subs: dict[int, _FeedSub] = {}
        self._tokens = itertools.count(1)
        self._watching = False
        self.closed = False

    def bounds(self, deadline: float) -> tuple[int, int, Any]:
        """(trimmed_before, head, stat of the changes node)."""
        trimmed = self._io.get(self._main, CHANGES, deadline)
        head = self._io.get(self._main, HEAD, deadline)
        if trimmed is None or head is None:
            raise CoordinatorUnavailableError("the ZooKeeper feed layout is missing")
        return int(trimmed[0] or b"0"), int(head[0] or b"1"), trimmed[1]

    def read(self, seq: int, max_changes: int, deadline: float) -> ChangeBatch:
        """``changes_since``: the feed nodes from ``seq`` on."""
        trimmed, head, _ = self.bounds(deadline)
        if seq < trimmed:
            raise MustResyncError(seq, trimmed)
        first = max(seq, 1)
        seqs = list(range(first, min(head, first + max_changes)))
        nodes = self._io.gets(self._main, [change_path(s) for s in seqs], deadline)
        changes: list[MetadataChange] = []
        for node in nodes:
            if node is None:
                trimmed, _, _ = self.bounds(deadline)
                raise MustResyncError(seq, trimmed)
            changes += codec.loads(node[0])
            if len(changes) >= max_changes:
                break
        return ChangeBatch(tuple(changes), changes[-1].seq + 1 if changes else seq)

    def pump(self) -> None:
        """Push new feed records to every subscriber (worker thread)."""
        if self.closed:
            return
        deadline = monotonic_s() + self._default_timeout_ms / 1000
        for token, sub in list(self._subs.items()):
            while token in self._subs:
                try:
                    with kazoo_errors():
                        batch = self.read(sub.cursor, MAX_CHANGES_PER_BATCH, deadline)
                except MustResyncError:
                    with kazoo_errors():
                        _, head, _ = self.bounds(deadline)
                    sub.cursor = head
                    sub.callback(ChangeBatch((), head, resync_required=True))
                    break
                if not batch.changes:
                    break
                sub.cursor = batch.next_seq
                sub.callback(batch)

    def on_connected(self) -> None:
        """The main client (re)connected: catch subscribers up."""
        if self._subs:
            self._schedule(self.pump)

    def _on_head(self, data: bytes | None, stat: Any, event: Any = None) -> bool:
        if self.closed:
            return False
        self._schedule(self.pump)
        return True

    def subscribe(
        self, callback: Callable[[ChangeBatch], None], from_seq: int | None, deadline: float
    ) -> Subscription:
        """``subscribe``: a data watch on the feed head wakes the worker, which reads from
        each subscriber's cursor."""
        with kazoo_errors():
            cursor = self.bounds(deadline)[1] if from_seq is None else from_seq
        token = next(self._tokens)
        self._subs[token] = _FeedSub(callback, cursor)
        with self._lock:
            start_watch, self._watching = not self._watching, True
        if start_watch:
            self._main.DataWatch(self._io.p(HEAD), self._on_head)
        self._schedule(self.pump)

        def cancel() -> None:
            self._subs.pop(token, None)

        return Subscription(cancel)

    def close(self) -> None:
        """Stop pushing."""
        self.closed = True
        self._subs.clear()

    def trim(self, before_seq: int, deadline: float) -> int:
        """``trim_history`` (this backend trims only when asked)."""
        io, c = self._io, self._main
        while True:
            trimmed, head, stat = self.bounds(deadline)
            new = max(trimmed, min(before_seq, head))
            if new == trimmed:
                return trimmed
            try:
                io.wait(
                    c.set_async(io.p(CHANGES), str(new).encode(), version=stat.version),
                    deadline,
                )
            except Exception as e:  # BadVersion: someone else trimmed; re-read
                if type(e).__name__ != "BadVersionError":
                    raise
                continue
            io.delete_many(c, [change_path(s) for s in range(max(trimmed, 1), new)], deadline)
            return new
