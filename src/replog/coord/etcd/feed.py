"""The etcd backend's change feed: range reads of ``changes/``, push to subscribers by polling
(on the handle's background thread, woken by its own writes), and trimming. Writes append to the
feed in ``replog.coord.etcd.store``."""

from __future__ import annotations

import itertools
import logging
import threading
from collections.abc import Callable

import attrs

from replog.clock import monotonic_s
from replog.coord import codec, rules
from replog.coord.contract import MAX_CHANGES_PER_BATCH
from replog.coord.errors import CoordinatorUnavailableError, MustResyncError
from replog.coord.etcd.client import cmp_mod, op_put, op_range, prefix_end
from replog.coord.etcd.store import EtcdStore, last_int, mod_rev
from replog.errors import RequestTimeoutError
from replog.metadata.types import ChangeBatch, MetadataChange, Subscription

__all__ = ["EtcdFeed", "FeedSubscriber"]

_log = logging.getLogger(__name__)


@attrs.define
class FeedSubscriber:
    """One subscription: its callback and the seq it reads from next."""

    callback: Callable[[ChangeBatch], None]
    cursor: int
    closed: bool = False


class EtcdFeed:
    """The feed in ``store`` and this handle's subscriptions. ``push`` runs on the handle's
    background thread (its reads take ``bg_timeout_ms``); ``ensure_thread`` starts that thread
    and ``wake`` makes it poll now."""

    def __init__(
        self,
        store: EtcdStore,
        bg_timeout_ms: int,
        ensure_thread: Callable[[], None],
        wake: Callable[[], None],
    ) -> None:
        self._store = store
        self._bg_timeout_ms = bg_timeout_ms
        self._ensure_thread = ensure_thread
        self._wake = wake
        self._lock = threading.Lock()
        self._subs: dict[int, FeedSubscriber] = {}
        self._tokens = itertools.count(1)

    def changes_since(
        self, seq: int, timeout_ms: int | None, max_changes: int = MAX_CHANGES_PER_BATCH
    ) -> ChangeBatch:
        """``changes_since`` (a range read of ``changes/``)."""
        rules.check_feed_read(seq, max_changes)
        end = prefix_end(self._store.k("changes/"))
        trimmed, groups = self._store.read(
            [
                op_range(self._store.k("feed/trimmed")),
                op_range(self._store.k(f"changes/{seq:020d}"), range_end=end, limit=max_changes),
            ],
            timeout_ms,
        )
        if seq < last_int(trimmed):
            raise MustResyncError(seq, last_int(trimmed))
        changes: list[MetadataChange] = []
        for kv in groups:
            if len(changes) >= max_changes:
                break
            changes.extend(codec.loads(kv.value))
        return ChangeBatch(tuple(changes), changes[-1].seq + 1 if changes else seq)

    def subscribe(
        self, callback: Callable[[ChangeBatch], None], from_seq: int | None
    ) -> Subscription:
        """``subscribe``, served by polling from the subscriber's cursor."""
        if from_seq is None:
            (kvs,) = self._store.read([op_range(self._store.k("feed/seq"))], None)
            from_seq = last_int(kvs) + 1
        token = next(self._tokens)
        sub = FeedSubscriber(callback, from_seq)
        with self._lock:
            self._subs[token] = sub

        def cancel() -> None:
            with self._lock:
                sub.closed = True
                self._subs.pop(token, None)

        self._ensure_thread()
        self._wake()
        return Subscription(cancel)

    def trim(self, before_seq: int, timeout_ms: int | None) -> int:
        """``trim_history``: moves ``feed/trimmed`` and deletes the records below it in one
        txn."""
        key = self._store.k("feed/trimmed")
        budget = self._store.default_timeout_ms if timeout_ms is None else timeout_ms
        deadline = monotonic_s() + budget / 1000
        while True:
            last, _, (trimmed,) = self._store.seq_read([op_range(key)], timeout_ms)
            boundary = max(last_int(trimmed), min(before_seq, last + 1))
            ops = [
                op_put(key, str(boundary)),
                {
                    "request_delete_range": op_range(
                        self._store.k("changes/"),
                        range_end=self._store.k(f"changes/{boundary:020d}"),
                    )["request_range"]
                },
            ]
            if self._store.client.txn(
                [cmp_mod(key, mod_rev(trimmed))], ops, timeout_ms=timeout_ms
            ).succeeded:
                return boundary
            if monotonic_s() > deadline:
                raise RequestTimeoutError(
                    f"trimming the etcd feed kept conflicting for {budget} ms"
                )

    def close(self) -> None:
        """Drop every subscription (the handle is closed)."""
        with self._lock:
            self._subs.clear()

    def push(self) -> None:
        """Deliver new records to every subscriber (background thread): a batch from its
        cursor, or a ``resync_required`` batch if its records were trimmed."""
        with self._lock:
            subs = list(self._subs.values())
        for sub in subs:
            try:
                batch = self.changes_since(sub.cursor, self._bg_timeout_ms)
            except MustResyncError:
                (kvs,) = self._store.read(
                    [op_range(self._store.k("feed/seq"))], self._bg_timeout_ms
                )
                batch = ChangeBatch((), last_int(kvs) + 1, resync_required=True)
            except (CoordinatorUnavailableError, RequestTimeoutError):
                continue
            if not batch.changes and not batch.resync_required:
                continue
            sub.cursor = batch.next_seq
            if not sub.closed:
                try:
                    sub.callback(batch)
                except Exception:
                    _log.exception("etcd feed subscriber raised; continuing")
