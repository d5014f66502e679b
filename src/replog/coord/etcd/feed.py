"""The etcd backend's change feed: range reads of ``changes/``, push to subscribers by polling
(on the handle's background thread, woken by its own writes), and trimming. Writes append to the
feed in ``replog.coord.etcd.store``.

``EtcdFeedMixin`` is a part of ``EtcdCoordinator``, not used on its own."""

from __future__ import annotations

import itertools
import logging
from collections.abc import Callable

import attrs

from replog.clock import monotonic_s
from replog.coord import codec, rules
from replog.coord.contract import MAX_CHANGES_PER_BATCH
from replog.coord.errors import CoordinatorUnavailableError, MustResyncError
from replog.coord.etcd.client import cmp_mod, op_put, op_range, prefix_end
from replog.coord.etcd.store import EtcdTxnBase, last_int, mod_rev
from replog.errors import RequestTimeoutError
from replog.metadata.types import ChangeBatch, MetadataChange, Subscription

__all__ = ["EtcdFeedMixin", "FeedSubscriber"]

_log = logging.getLogger(__name__)


@attrs.define
class FeedSubscriber:
    callback: Callable[[ChangeBatch], None]
    cursor: int
    closed: bool = False


class EtcdFeedMixin(EtcdTxnBase):
    """The change-feed part of ``EtcdCoordinator``."""

    _subs: dict[int, FeedSubscriber]
    _tokens: itertools.count[int]

    def changes_since(
        self,
        seq: int,
        *,
        max_changes: int = MAX_CHANGES_PER_BATCH,
        timeout_ms: int | None = None,
    ) -> ChangeBatch:
        """See ``Coordinator.changes_since`` (a range read of ``changes/``)."""
        rules.check_feed_read(seq, max_changes)
        end = prefix_end(self._k("changes/"))
        trimmed, groups = self._read(
            [
                op_range(self._k("feed/trimmed")),
                op_range(self._k(f"changes/{seq:020d}"), range_end=end, limit=max_changes),
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
        self, callback: Callable[[ChangeBatch], None], *, from_seq: int | None = None
    ) -> Subscription:
        """See ``Coordinator.subscribe`` (served by polling; module docstring)."""
        if from_seq is None:
            (kvs,) = self._read([op_range(self._k("feed/seq"))], None)
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
        self._wake.set()
        return Subscription(cancel)

    def trim_history(self, before_seq: int, *, timeout_ms: int | None = None) -> int:
        """See ``Coordinator.trim_history``."""
        key = self._k("feed/trimmed")
        budget = self._default_timeout_ms if timeout_ms is None else timeout_ms
        deadline = monotonic_s() + budget / 1000
        while True:
            last, _, (trimmed,) = self._seq_read([op_range(key)], timeout_ms)
            boundary = max(last_int(trimmed), min(before_seq, last + 1))
            ops = [
                op_put(key, str(boundary)),
                {
                    "request_delete_range": op_range(
                        self._k("changes/"), range_end=self._k(f"changes/{boundary:020d}")
                    )["request_range"]
                },
            ]
            if self._client.txn(
                [cmp_mod(key, mod_rev(trimmed))], ops, timeout_ms=timeout_ms
            ).succeeded:
                return boundary
            if monotonic_s() > deadline:
                raise RequestTimeoutError(
                    f"trimming the etcd feed kept conflicting for {budget} ms"
                )

    def _push_feed(self) -> None:
        with self._lock:
            subs = list(self._subs.values())
        for sub in subs:
            try:
                batch = self.changes_since(sub.cursor, timeout_ms=self._bg_timeout_ms)
            except MustResyncError:
                (kvs,) = self._read([op_range(self._k("feed/seq"))], self._bg_timeout_ms)
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
