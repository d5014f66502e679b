"""``FetchSessions``: the follower side of replication, one fetch session per leader broker.

For every broker this one follows partitions on, one Fetch (v12: replica id, current leader
epoch, last fetched epoch) for all those partitions is in flight at a time. In FSYNC mode the
local logs are flushed (group commit) before a request that reports their LEO goes out. An
answer is applied through ``ReplicaManager.on_fetch_response`` (the ``Partition`` machine does
the divergence and truncation rules); an answer that may truncate a log waits until no fsync is
running (``BrokerDriver.exclusive``). A session that made progress fetches again at once, else
after ``replica_fetch_backoff_ms``.

Each leader session is also an incremental fetch session (KIP-227,
``replog.broker.driver.incremental_fetch``): after the first round, a request lists only the
partitions whose fetch offset or epochs changed, and the leader answers only the partitions
with news, so partitions where nothing happens cost no encoding, decoding or applying. A
partition missing from an answer is simply not applied: its request stays outstanding. A round
builds again only the requests of partitions that changed since the last one
(``replog.broker.driver.follower_requests``), so idle partitions cost no work at all.

A Fetch answer carries no leader log end offset, so for partitions that answer
OFFSET_OUT_OF_RANGE the session asks the leader with ListOffsets, as a replica (earliest = its
log start, latest = its LEO), before applying -- as Kafka's follower does
(``fetchLatestOffsetFromLeader``).

Replication quota (KIP-73, ``replog.broker.driver.replication_throttle``): a partition in this
broker's follower-throttled set is left out of the request while the follower quota is
exceeded and this replica is not in the ISR (a session left with nothing to ask backs off);
the bytes received for the partitions of that set are recorded against the quota.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Protocol

import attrs

from replog.broker.driver.convert import (
    follower_fetch_request,
    follower_fetch_responses,
    list_offsets_found,
    may_truncate,
    out_of_range_partitions,
    replica_list_offsets_request,
    wire_fetch_partition,
)
from replog.broker.driver.effects import ResetLink
from replog.broker.driver.follower_requests import FollowerRequests
from replog.broker.driver.incremental_fetch import IncrementalFetch
from replog.broker.driver.ports import DriverCore
from replog.broker.driver.replication_throttle import ReplicationThrottle
from replog.errors import unreachable
from replog.isr import FollowerAction, PartitionFetchRequest
from replog.protocol import messages as m
from replog.protocol.schema import Message
from replog.topics import TopicPartition

__all__ = ["FETCH_VERSION", "LIST_OFFSETS_VERSION", "FetchSessions"]

FETCH_VERSION = 12
LIST_OFFSETS_VERSION = 7


class FetchHost(DriverCore, Protocol):
    """What the fetch sessions use of the driver (see ``replog.broker.driver.ports``)."""

    @property
    def replication_throttle(self) -> ReplicationThrottle:
        """The replication quotas."""

    def after_input(self) -> None:
        """Run the driver's end-of-input step (completions, outputs)."""

    def exclusive(self, action: Callable[[], None]) -> None:
        """Run ``action`` when no group commit is in flight."""

    def flush_then(self, then: Callable[[int], None]) -> None:
        """Run ``then`` once the appends so far are flushed."""


@attrs.define(eq=False)
class _LeaderSession:
    """One leader's session and the request it has in flight (``token``): the Fetch of
    ``asked``, or, for the partitions it answered out of range, a ListOffsets at ``listing``
    (earliest, then latest), the fetch answer held meanwhile in ``fetched``."""

    leader_id: int
    next_at_ms: int
    token: int | None = None
    waiting_flush: bool = False
    asked: dict[TopicPartition, PartitionFetchRequest] = attrs.Factory(dict)
    fetched: m.FetchResponse | None = None
    listing: int | None = None  # the ListOffsets timestamp asked, None while fetching
    out_of_range: list[TopicPartition] = attrs.Factory(list)
    found: dict[int, dict[TopicPartition, int]] = attrs.Factory(dict)
    #: the incremental fetch session (KIP-227) with this leader
    incremental: IncrementalFetch = attrs.Factory(IncrementalFetch)
    #: each partition's next request, rebuilt only where something changed
    book: FollowerRequests = attrs.Factory(
        lambda self: FollowerRequests(self.leader_id), takes_self=True
    )


class FetchSessions:
    """See the module docstring."""

    def __init__(self, driver: FetchHost) -> None:
        self._driver = driver
        self._sessions: dict[int, _LeaderSession] = {}

    @property
    def leaders(self) -> list[int]:
        """Brokers this broker fetches from."""
        return sorted(self._sessions)

    def reconcile(self, now_ms: int) -> None:
        """One session per broker this one follows partitions on; others end."""
        driver = self._driver
        rm = driver.rm_or_none
        wanted = set() if rm is None else rm.follower_leaders() - {driver.broker_id}
        for leader_id in set(self._sessions) - wanted:
            session = self._sessions.pop(leader_id)
            if session.token is not None:
                driver.outbox.forget(session.token)
            driver.outbox.emit(ResetLink(leader_id))
        for leader_id in sorted(wanted - set(self._sessions)):
            self._sessions[leader_id] = _LeaderSession(leader_id, now_ms)

    def on_tick(self, now_ms: int) -> None:
        """Start the rounds that are due."""
        for session in list(self._sessions.values()):
            if session.token is None and not session.waiting_flush and session.next_at_ms <= now_ms:
                self._round(session, now_ms)

    def stop(self) -> None:
        """End every session (the broker is halting)."""
        for leader_id, session in sorted(self._sessions.items()):
            if session.token is not None:
                self._driver.outbox.forget(session.token)
            self._driver.outbox.emit(ResetLink(leader_id))
        self._sessions.clear()

    # ------------------------------------------------------------------ one round

    def _live(self, session: _LeaderSession) -> bool:
        return self._sessions.get(session.leader_id) is session

    def _backoff(self, session: _LeaderSession, now_ms: int) -> None:
        session.token = None
        session.next_at_ms = now_ms + self._driver.config.replica_fetch_backoff_ms

    def _round(self, session: _LeaderSession, now_ms: int) -> None:
        driver = self._driver
        rm = driver.rm
        book = session.book
        rebuilt = book.refresh(rm, now_ms, self._refresh_ms)
        requests = book.requests
        if not requests or session.leader_id not in rm.image.brokers:
            self._backoff(session, now_ms)
            return
        flush = [
            tp
            for tp in (requests if rebuilt is None else rebuilt)
            if (r := requests.get(tp)) is not None and r.requires_flush
        ]
        if flush:
            session.waiting_flush = True
            book.used_up(flush)  # built again after the flush, with the LEO it made durable

            def flushed(now: int) -> None:
                session.waiting_flush = False
                if self._live(session):
                    book.refresh(rm, now, self._refresh_ms)
                    self._send(session, now)

            driver.flush_then(flushed)
            return
        self._send(session, now_ms)

    @property
    def _refresh_ms(self) -> int:
        return max(self._driver.config.replica_lag_ms_max // 4, 1)

    def _unthrottled(
        self, requests: list[tuple[TopicPartition, PartitionFetchRequest]], now_ms: int
    ) -> list[tuple[TopicPartition, PartitionFetchRequest]]:
        """``requests`` without the partitions the follower quota holds back."""
        rm = self._driver.rm
        throttle = self._driver.replication_throttle
        kept = []
        for tp, request in requests:
            state = rm.image.partitions.get(tp)
            in_sync = state is not None and self._driver.broker_id in state.isr
            assignment = rm.image.topics.get(tp[0])
            if not throttle.follower_holds(assignment, tp[1], in_sync=in_sync, now_ms=now_ms):
                kept.append((tp, request))
        return kept

    def _send(self, session: _LeaderSession, now_ms: int) -> None:
        """Fetch from the session's leader with the book's requests: only the changed ones
        when the leader holds a session, all of them otherwise (and while the follower quota
        holds some back, which leaves those out)."""
        driver = self._driver
        book, incremental = session.book, session.incremental
        asked = book.requests
        unsent = book.take_unsent()
        throttle = driver.replication_throttle
        throttle.sync_rates(driver.rm.image.broker_configs)
        if throttle.follower.is_exceeded(now_ms):
            asked = dict(self._unthrottled(list(asked.items()), now_ms))
            book.invalidate()  # the partitions held back are listed again once let through
            unsent = None
        if not asked:
            self._backoff(session, now_ms)
            return
        config = driver.config
        full = follower_fetch_request(
            driver.broker_id,
            list(asked.items()) if unsent is None or not incremental.is_open else [],
            max_wait_ms=config.replica_fetch_wait_ms_max,
            min_bytes=config.replica_fetch_min_bytes,
            max_bytes=config.replica_fetch_bytes_max,
        )
        if unsent is None or not incremental.is_open:
            body = incremental.request(full)
        else:
            updated = [(tp, wire_fetch_partition(tp[1], asked[tp])) for tp in unsent if tp in asked]
            removed = [tp for tp in unsent if tp not in asked]
            body = incremental.request_changes(full, updated, removed)
        # a copy: the answer may be applied after the next round rebuilt some requests (an
        # apply that waits for an fsync), and must then match none of the new ones
        session.asked, session.fetched, session.listing = dict(asked), None, None
        session.token = driver.outbox.send(session.leader_id, m.FETCH.api_key, FETCH_VERSION, body)

    def on_answer(
        self, leader_id: int, token: int, response: Message | None, error: BaseException | None
    ) -> None:
        """``leader_id`` answered the request ``token`` (or could not be reached: ``error``);
        an answer to a request the session no longer waits for is ignored."""
        session = self._sessions.get(leader_id)
        if session is None or session.token != token:
            return
        if error is not None or response is None:
            self._failed(session)
        elif session.listing is None:
            self._on_fetch_answer(session, response)
        else:
            self._on_offsets_answer(session, response)

    def _failed(self, session: _LeaderSession) -> None:
        session.incremental.reset()
        session.book.invalidate()
        self._driver.outbox.emit(ResetLink(session.leader_id))
        self._backoff(session, self._driver.now_ms)

    def _on_fetch_answer(self, session: _LeaderSession, response: Message) -> None:
        if not isinstance(response, m.FetchResponse):
            self._failed(session)
            return
        if not session.incremental.on_response(response):
            # A session error (the leader restarted or evicted the session, or a copy of the
            # request came first) is a failed round: the link is reset, so no request of the
            # old session stays parked on the leader to be read later with stale offsets.
            self._failed(session)
            return
        out_of_range = out_of_range_partitions(response)
        if out_of_range:
            session.fetched, session.out_of_range, session.found = response, out_of_range, {}
            self._ask_offsets(session, m.EARLIEST_TIMESTAMP)
        else:
            self._apply(session, session.asked, response, {})

    def _ask_offsets(self, session: _LeaderSession, timestamp: int) -> None:
        """ListOffsets at ``timestamp`` as a replica, for the partitions answered out of range
        (earliest, then latest; then the held fetch answer is applied)."""
        driver = self._driver
        tps = session.out_of_range
        epochs = {
            tp: replica.leader_epoch
            for tp in tps
            if (replica := driver.rm.partition(*tp)) is not None
        }
        body = replica_list_offsets_request(driver.broker_id, tps, epochs, timestamp)
        session.listing = timestamp
        session.token = driver.outbox.send(
            session.leader_id, m.LIST_OFFSETS.api_key, LIST_OFFSETS_VERSION, body
        )

    def _on_offsets_answer(self, session: _LeaderSession, answer: Message) -> None:
        if not isinstance(answer, m.ListOffsetsResponse) or session.fetched is None:
            self._failed(session)
            return
        found, asked_at = session.found, session.listing
        if asked_at is None:  # on_answer routes only ListOffsets answers here
            unreachable("a ListOffsets answer while fetching")
        found[asked_at] = list_offsets_found(answer)
        if asked_at == m.EARLIEST_TIMESTAMP:
            self._ask_offsets(session, m.LATEST_TIMESTAMP)
            return
        earliest, latest = found[m.EARLIEST_TIMESTAMP], found[m.LATEST_TIMESTAMP]
        offsets = {
            tp: (earliest[tp], latest[tp])
            for tp in session.out_of_range
            if tp in earliest and tp in latest
        }
        self._apply(session, session.asked, session.fetched, offsets)

    def _apply(
        self,
        session: _LeaderSession,
        asked: dict[TopicPartition, PartitionFetchRequest],
        response: m.FetchResponse,
        leader_offsets: Mapping[TopicPartition, tuple[int, int]],
    ) -> None:
        driver = self._driver
        session.token, session.fetched, session.listing = None, None, None

        def apply_now() -> None:
            if not self._live(session):
                return
            now_ms = driver.now_ms
            progressed = True
            throttle = driver.replication_throttle
            answered = []
            for tp, answer in follower_fetch_responses(
                driver.broker_id, asked, response, leader_offsets
            ):
                answered.append(tp)
                if answer.size_bytes and throttle.follower_covers(
                    driver.rm.image.topics.get(tp[0]), tp[1]
                ):
                    throttle.follower.record(answer.size_bytes, now_ms)
                outcome = driver.rm.on_fetch_response(tp, answer, now_ms)
                if outcome.action is FollowerAction.FAILED:
                    progressed = False
            session.book.used_up(answered)  # their outstanding requests are settled
            driver.after_input()
            session.next_at_ms = (
                now_ms if progressed else now_ms + driver.config.replica_fetch_backoff_ms
            )
            self.on_tick(now_ms)

        if may_truncate(response, leader_offsets):
            driver.exclusive(apply_now)  # waits for a running fsync: no truncation under it
        else:
            apply_now()
