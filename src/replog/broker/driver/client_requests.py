"""``ClientRequests``: the requests of client connections, from dispatch to response.

A connection has at most one request in the driver (the shell hands over the next one after
the response), so responses keep their order. ``on_request`` dispatches through the request
layer's table (``replog.broker.driver.requests``); an outcome that waits is parked here, indexed by
what ends the wait:

- ``AwaitProduces`` by (partition, produce request id): ``on_produce_results`` completes it
  (the partition's purgatory always ends a produce, by the HW or by its timeout);
- ``AwaitData`` by partition and by deadline: ``on_data_changed`` and ``on_tick`` read again
  (a wait that is not ``on_hw`` is not read again when only the partition's HW moved);
- ``AwaitAdmin`` through ``submit_admin`` (the driver's admin channel, which answers every
  submission: completed, refused or timed out);
- ``AwaitReply`` by its key: ``on_reply`` answers it (the group coordinator answers every
  request it parks, at the latest NOT_COORDINATOR when it unloads).

Continuations that raise are answered with the API's error response (``requests.failed``). A
closed connection drops its parked request.
"""

from __future__ import annotations

import functools
import itertools
from collections.abc import Callable, Iterable, Mapping
from typing import TypeVar

import attrs
from sortedcontainers import SortedList

from replog.broker.driver.effects import CloseClient, Respond
from replog.broker.driver.outbox import Outbox
from replog.broker.driver.requests import (
    AdminResult,
    AwaitAdmin,
    AwaitData,
    AwaitProduces,
    AwaitReply,
    Close,
    NoReply,
    Outcome,
    Reply,
    RequestContext,
    RequestServices,
    dispatch,
    failed,
)
from replog.errors import ErrorCode
from replog.isr import ProduceResult
from replog.metadata.types import AdminPayload
from replog.protocol import RequestHeader, encode_response_parts
from replog.protocol.schema import Message
from replog.topics import TopicPartition

__all__ = ["AdminSubmitter", "ClientRequests"]

AdminSubmitter = Callable[[AdminPayload, int, Callable[[AdminResult], None]], None]
"""``submit(payload, deadline_ms, then)``: queue for the controller; ``then`` gets the result."""


@attrs.define(eq=False)
class _Parked:
    conn_id: int
    ctx: RequestContext
    body: Message
    seq: int
    produce_waiting: set[tuple[TopicPartition, int]] = attrs.Factory(set)
    produce_results: dict[tuple[TopicPartition, int], ProduceResult] = attrs.Factory(dict)
    produce_finish: (
        Callable[[Mapping[tuple[TopicPartition, int], ProduceResult]], Outcome] | None
    ) = None
    data_tps: frozenset[TopicPartition] = frozenset()
    data_deadline_ms: int = 0
    data_retry: Callable[[int, bool], Outcome] | None = None
    data_on_hw: bool = True
    reply_key: int | None = None


K = TypeVar("K")

#: a long poll on more partitions than this is indexed by its set, not by each partition
_WIDE = 16


class ClientRequests:
    """See the module docstring."""

    def __init__(
        self, outbox: Outbox, services: RequestServices, submit_admin: AdminSubmitter
    ) -> None:
        self._outbox = outbox
        self._services = services
        self._submit_admin = submit_admin
        self._seq = itertools.count()
        self._by_conn: dict[int, _Parked] = {}
        self._produce: dict[tuple[TopicPartition, int], _Parked] = {}
        #: parked long polls by each partition they wait on; a poll on many partitions (a
        #: fetch session's) by its whole set instead, which the session's polls share, so
        #: parking and waking cost nothing per idle partition
        self._data: dict[TopicPartition, set[_Parked]] = {}
        self._wide: dict[frozenset[TopicPartition], set[_Parked]] = {}
        self._deadlines: SortedList = SortedList()  # (deadline_ms, seq) of data waits
        self._waiting_data: dict[int, _Parked] = {}  # seq -> a parked long poll
        self._replies: dict[int, _Parked] = {}  # AwaitReply key -> its request

    @property
    def parked(self) -> int:
        """Requests waiting for something."""
        return len(self._by_conn)

    # ------------------------------------------------------------------ inputs

    def on_request(
        self,
        conn_id: int,
        header: RequestHeader,
        body: Message,
        now_ms: int,
        *,
        client_host: str = "",
    ) -> None:
        """A decoded request of connection ``conn_id`` (its only one in the driver), from a
        client at ``client_host``."""
        ctx = RequestContext(header, now_ms, client_host)
        parked = _Parked(conn_id, ctx, body, next(self._seq))
        self._by_conn[conn_id] = parked
        self._settle(parked, dispatch(parked.ctx, body, self._services), now_ms)

    def on_connection_closed(self, conn_id: int) -> None:
        """The client went away: its parked request needs no answer."""
        parked = self._by_conn.pop(conn_id, None)
        if parked is not None:
            self._unpark(parked)

    def on_produce_results(
        self, results: Iterable[tuple[TopicPartition, ProduceResult]], now_ms: int
    ) -> None:
        """acks=all produces completed (by the HW or by timeout)."""
        for tp, result in results:
            parked = self._produce.pop((tp, result.request_id), None)
            if parked is None:
                continue
            key = (tp, result.request_id)
            parked.produce_waiting.discard(key)
            parked.produce_results[key] = result
            if not parked.produce_waiting and parked.produce_finish is not None:
                finish, parked.produce_finish = parked.produce_finish, None
                self._continue(parked, functools.partial(finish, parked.produce_results), now_ms)

    def on_data_changed(
        self,
        tps: set[TopicPartition] | None,
        now_ms: int,
        *,
        hw_only: Iterable[TopicPartition] = (),
    ) -> None:
        """These partitions' data or role changed (None: maybe all), and those of ``hw_only``
        their HW alone: read the parked long polls on them again (on ``hw_only`` partitions,
        only those that wait ``on_hw``)."""
        if tps is None:
            woken = {p for waiters in self._data.values() for p in waiters}
            woken.update(p for waiters in self._wide.values() for p in waiters)
        else:
            woken = {p for tp in tps for p in self._data.get(tp, ())}
            woken.update(p for tp in hw_only for p in self._data.get(tp, ()) if p.data_on_hw)
            hw = set(hw_only)
            for watched, waiters in self._wide.items():
                if not watched.isdisjoint(tps):
                    woken.update(waiters)
                elif hw and not watched.isdisjoint(hw):
                    woken.update(p for p in waiters if p.data_on_hw)
        for parked in sorted(woken, key=lambda p: p.seq):
            self._retry_data(parked, now_ms, final=False)

    def on_reply(self, key: int, message: Message) -> None:
        """The answer to the request waiting under ``key`` (ignored if it went away)."""
        parked = self._replies.pop(key, None)
        if parked is not None:
            parked.reply_key = None
            self._settle(parked, Reply(message), parked.ctx.now_ms)

    def on_tick(self, now_ms: int) -> None:
        """Answer the long polls whose wait is over."""
        while self._deadlines and self._deadlines[0][0] <= now_ms:
            _, seq = self._deadlines[0]
            parked = self._waiting_data.get(seq)
            if parked is None:
                self._deadlines.pop(0)
                continue
            self._retry_data(parked, now_ms, final=True)

    # ------------------------------------------------------------------ outcomes

    def _settle(self, parked: _Parked, outcome: Outcome, now_ms: int) -> None:
        if self._by_conn.get(parked.conn_id) is not parked:
            return  # the connection closed meanwhile
        if isinstance(outcome, Reply):
            self._respond(parked, outcome.message)
        elif isinstance(outcome, NoReply):
            self._finish(parked)
            self._outbox.emit(Respond(parked.conn_id, None))
        elif isinstance(outcome, Close):
            self._finish(parked)
            self._outbox.emit(CloseClient(parked.conn_id, outcome.reason))
        elif isinstance(outcome, AwaitProduces):
            parked.produce_waiting = set(outcome.waiting)
            parked.produce_finish = outcome.finish
            for key in outcome.waiting:
                self._produce[key] = parked
        elif isinstance(outcome, AwaitData):
            parked.data_tps = outcome.tps
            parked.data_deadline_ms = outcome.deadline_ms
            parked.data_retry = outcome.retry
            parked.data_on_hw = outcome.on_hw
            if len(outcome.tps) > _WIDE:
                self._wide.setdefault(outcome.tps, set()).add(parked)
            else:
                for tp in outcome.tps:
                    self._data.setdefault(tp, set()).add(parked)
            self._deadlines.add((outcome.deadline_ms, parked.seq))
            self._waiting_data[parked.seq] = parked
        elif isinstance(outcome, AwaitReply):
            parked.reply_key = outcome.key
            self._replies[outcome.key] = parked
        else:
            self._await_admin(parked, outcome, now_ms)

    def _respond(self, parked: _Parked, message: Message) -> None:
        header = parked.ctx.header
        try:
            parts = encode_response_parts(header.correlation_id, header.api_version, message)
        except Exception as exc:
            outcome = failed(parked.ctx, parked.body, exc)
            if isinstance(outcome, Reply) and outcome.message is not message:
                self._respond(parked, outcome.message)
            else:
                self._finish(parked)
                self._outbox.emit(CloseClient(parked.conn_id, f"cannot encode: {exc}"))
            return
        self._finish(parked)
        self._outbox.emit(Respond(parked.conn_id, parts))

    def _continue(self, parked: _Parked, step: Callable[[], Outcome], now_ms: int) -> None:
        try:
            outcome = step()
        except Exception as exc:
            outcome = failed(parked.ctx, parked.body, exc)
        self._settle(parked, outcome, now_ms)

    def _retry_data(self, parked: _Parked, now_ms: int, *, final: bool) -> None:
        retry = parked.data_retry
        if retry is None or self._by_conn.get(parked.conn_id) is not parked:
            return
        self._unpark_data(parked)
        self._continue(parked, lambda: retry(now_ms, final), now_ms)

    def _await_admin(self, parked: _Parked, outcome: AwaitAdmin, now_ms: int) -> None:
        results: list[AdminResult | None] = [None] * len(outcome.payloads)
        deadline_ms = now_ms + max(outcome.timeout_ms, 1)

        def arrived(index: int, result: AdminResult) -> None:
            results[index] = result
            if all(r is not None for r in results):
                final = [r for r in results if r is not None]
                self._continue(parked, lambda: outcome.finish(final), now_ms)

        for index, payload in enumerate(outcome.payloads):
            self._submit_admin(payload, deadline_ms, functools.partial(arrived, index))

    # ------------------------------------------------------------------ bookkeeping

    def _finish(self, parked: _Parked) -> None:
        if self._by_conn.get(parked.conn_id) is parked:
            del self._by_conn[parked.conn_id]
        self._unpark(parked)

    def _unpark(self, parked: _Parked) -> None:
        for key in parked.produce_waiting:
            if self._produce.get(key) is parked:
                del self._produce[key]
        parked.produce_waiting.clear()
        if parked.reply_key is not None:
            self._replies.pop(parked.reply_key, None)
            parked.reply_key = None
        self._unpark_data(parked)

    def _unpark_data(self, parked: _Parked) -> None:
        tps = parked.data_tps
        if len(tps) > _WIDE:
            _discard(self._wide, tps, parked)
        else:
            for tp in tps:
                _discard(self._data, tp, parked)
        if parked.data_retry is not None:
            self._deadlines.discard((parked.data_deadline_ms, parked.seq))
            self._waiting_data.pop(parked.seq, None)
        parked.data_tps, parked.data_retry = frozenset(), None

    def fail_all(self, reason: str) -> list[int]:
        """Halting: every parked request's connection is closed (returns them)."""
        conns = sorted(self._by_conn)
        for conn_id in conns:
            self.on_connection_closed(conn_id)
        return conns


def _discard(index: dict[K, set[_Parked]], key: K, parked: _Parked) -> None:
    waiters = index.get(key)
    if waiters is not None:
        waiters.discard(parked)
        if not waiters:
            del index[key]


def admin_timeout() -> AdminResult:
    """What a request gets when the controller did not complete it in time."""
    return AdminResult(ErrorCode.REQUEST_TIMED_OUT, "the controller did not complete the request")
