"""Incremental fetch sessions (KIP-227), the leader's side: ``FetchSessionCache``.

A fetcher that keeps reading the same partitions need not list them all in every Fetch, nor
be told about the ones where nothing changed. Its first Fetch (``session_epoch`` 0) lists every
partition; the answer carries a ``session_id`` and the broker remembers the partitions, each
with what the fetcher last asked (its fetch offset, epochs, log start and size limit) and what
the broker last told it (HW, last stable offset, log start). Each later Fetch names the session
and its next epoch (1, 2, ... wrapping to 1 after the int32 maximum) and lists only the
partitions added or changed since, plus the ones to drop (``forgotten_topics_data``). The
broker answers only the partitions with something to say: records, an error, a diverging
epoch, a preferred read replica, or a HW, last stable offset or log start that moved since the
last answer. Partitions that were answered with records go to the back of the session's
order, so a response size limit shares the data out round robin.

An incremental fetch does not read every partition of the session: a partition whose last
answer had nothing new is *quiet*, and stays unread until the replica manager's change feed
(``replog.broker.driver.change_feed``) reports a change to it (an append, a HW move, a role
change, a truncation, retention), the fetcher lists it again, or ``refresh_ms`` has passed
since its last read -- a follower's read is what keeps its caught-up time current on the
leader, so a quiet partition of a follower is read again well inside ``replica_lag_ms_max``.
Partitions held back by the replication quota, and those of a follower not in their ISR (whose
read may expand it), never go quiet. Idle partitions thus cost nothing per fetch.

The rules of the request's session fields, Kafka's:

- ``session_id`` 0, epoch -1: no session (a full fetch, a full answer, ``session_id`` 0).
- epoch -1 with a ``session_id``: that session closes; the fetch is sessionless.
- epoch 0: a new session (closing the named one, if any), a full answer with its id -- or id 0
  when no slot is free (``fetch_session_cache_slots``; 0 turns sessions off).
- epoch > 0: an incremental fetch of that session. An unknown id (or one another replica
  opened) is ``FETCH_SESSION_ID_NOT_FOUND``, an epoch other than the expected one
  ``INVALID_FETCH_SESSION_EPOCH``; both are whole-response errors with no partitions, after
  which the fetcher starts over with epoch 0.

When every slot is taken, a new session may take the slot of the least recently used one that
has been idle for ``eviction_ms`` (Kafka's 120 s), or -- if the newcomer is a follower -- of the
least recently used consumer session: replication keeps its sessions.

Session ids come from a counter, scrambled by an odd multiplier (a bijection on the positive
int32 range), so that they are deterministic in the simulator. They are not secrets: as in
Kafka, a session is only an optimisation, and a fetcher can read only what its request is
authorized to read.
"""

from __future__ import annotations

from collections.abc import Iterable

import attrs

from replog.broker.driver.change_feed import ChangeFeed
from replog.broker.driver.convert import fetch_partitions
from replog.errors import ErrorCode
from replog.protocol import messages as m
from replog.topics import TopicPartition

__all__ = ["EVICTION_MS", "FetchContext", "FetchSessionCache", "next_session_epoch"]

#: A session idle this long may lose its slot to a new one (Kafka's
#: MIN_INCREMENTAL_FETCH_SESSION_EVICTION_MS).
EVICTION_MS = 120_000
_INT32_MAX = (1 << 31) - 1
_SCRAMBLE = 0x5BD1E995  # odd: n -> n * _SCRAMBLE mod 2**31 is a bijection


def next_session_epoch(epoch: int) -> int:
    """The session epoch after ``epoch`` (1, 2, ... wrapping to 1 after the int32 maximum)."""
    return 1 if epoch >= _INT32_MAX else epoch + 1


@attrs.define(eq=False, slots=True)
class _Cached:
    """One partition of a session: what the fetcher asked last, what it was told last."""

    fetch: m.FetchPartition
    high_watermark: int = -1
    last_stable_offset: int = -1
    log_start_offset: int = -1


@attrs.define(eq=False)
class _CachedSession:
    session_id: int
    replica_id: int
    epoch: int  # the epoch the next incremental fetch must carry
    last_used_ms: int
    #: the change feed's position when the session last looked at it
    seen_seq: int = 0
    partitions: dict[TopicPartition, _Cached] = attrs.Factory(dict)
    #: every partition is in one of these two. ``active``: read on every fetch, in fetch
    #: order (answered partitions move to the back); ``quiet``: unread until changed, each
    #: with the time of its last read, oldest first
    active: dict[TopicPartition, None] = attrs.Factory(dict)
    quiet: dict[TopicPartition, int] = attrs.Factory(dict)
    #: the partitions as a set, built again only when they change (long polls wait on it)
    _watched: frozenset[TopicPartition] | None = None

    def add(self, tp: TopicPartition, fetch: m.FetchPartition) -> None:
        """A partition listed by the fetcher: new, or with new fields; read on the next fetch."""
        known = self.partitions.get(tp)
        if known is None:
            self.partitions[tp] = _Cached(fetch)
            self._watched = None
        else:
            known.fetch = fetch
        self.quiet.pop(tp, None)
        self.active.setdefault(tp, None)

    def forget(self, tp: TopicPartition) -> None:
        if self.partitions.pop(tp, None) is not None:
            self._watched = None
        self.active.pop(tp, None)
        self.quiet.pop(tp, None)

    @property
    def watched(self) -> frozenset[TopicPartition]:
        if self._watched is None:
            self._watched = frozenset(self.partitions)
        return self._watched

    def wake(self, feed: ChangeFeed, now_ms: int, refresh_ms: int) -> None:
        """Make active the quiet partitions that changed since the last look, and those
        last read ``refresh_ms`` ago or more."""
        quiet, active = self.quiet, self.active
        if not quiet:
            self.seen_seq = feed.seq
            return
        changed = feed.since(self.seen_seq)
        self.seen_seq = feed.seq
        if changed is None:
            woken = list(quiet)
        elif len(changed) < len(quiet):
            woken = [tp for tp in changed if tp in quiet]
        else:
            woken = [tp for tp in quiet if tp in changed]
        for tp, read_ms in quiet.items():  # oldest first: stop at the first one not due
            if now_ms - read_ms < refresh_ms:
                break
            woken.append(tp)
        for tp in woken:
            if quiet.pop(tp, None) is not None:
                active[tp] = None

    @property
    def privileged(self) -> bool:
        return self.replica_id >= 0


@attrs.define(eq=False)
class FetchContext:
    """One Fetch resolved against the cache: the partitions to read, and how to answer.

    ``to_read`` is what the broker reads on each attempt (the request's own partitions, or
    the session's active ones for an incremental fetch). ``answer`` turns the partitions as
    read into the response's topics, leaving out the unchanged ones of an incremental fetch,
    remembering what was sent and which partitions went quiet."""

    _partitions: list[tuple[TopicPartition, m.FetchPartition]]
    session_id: int = 0
    _session: _CachedSession | None = None
    _incremental: bool = False

    @property
    def watched(self) -> frozenset[TopicPartition]:
        """Every partition of the fetch (of the session, for an incremental one): a change
        to any of them is a reason to read again."""
        if self._incremental and self._session is not None:
            return self._session.watched
        return frozenset(tp for tp, _ in self._partitions)

    def to_read(
        self, feed: ChangeFeed, now_ms: int, refresh_ms: int
    ) -> list[tuple[TopicPartition, m.FetchPartition]]:
        """The partitions to read now: the request's own, or the session's active ones after
        waking those that changed (see the module docstring)."""
        session = self._session
        if session is None or not self._incremental:
            return self._partitions
        session.wake(feed, now_ms, refresh_ms)
        cached = session.partitions
        return [(tp, cached[tp].fetch) for tp in session.active]

    def answer(
        self,
        read: Iterable[tuple[TopicPartition, m.FetchResponsePartition, int, bool]],
        now_ms: int,
    ) -> list[m.FetchResponseTopic]:
        """The response's topics for the partitions as read (in ``to_read`` order), each with
        the bytes of records it carries and whether it must stay active (held back by a quota,
        or a follower outside its ISR)."""
        session = self._session
        by_topic: dict[str, list[m.FetchResponsePartition]] = {}
        answered: list[TopicPartition] = []
        for tp, part, size, keep_active in read:
            if session is not None:
                cached = session.partitions.get(tp)
                if cached is None:  # forgotten by a later fetch of the session meanwhile
                    continue
                if not _remember(cached, part, size):
                    if not keep_active and tp in session.active:
                        del session.active[tp]
                        session.quiet[tp] = now_ms
                    if self._incremental:
                        continue
                if size:
                    answered.append(tp)
            by_topic.setdefault(tp.topic, []).append(part)
        if session is not None:
            for tp in answered:  # to the back: the next answer starts with the others
                if session.active.pop(tp, 0) is None:
                    session.active[tp] = None
        return [m.FetchResponseTopic(topic=t, partitions=ps) for t, ps in by_topic.items()]


def _remember(cached: _Cached, part: m.FetchResponsePartition, size: int) -> bool:
    """Note what ``part`` tells the fetcher; return whether an incremental answer must carry
    it (something new: records, an error, a moved offset)."""
    moved = (
        cached.high_watermark != part.high_watermark
        or cached.last_stable_offset != part.last_stable_offset
        or cached.log_start_offset != part.log_start_offset
    )
    cached.high_watermark = part.high_watermark
    cached.last_stable_offset = part.last_stable_offset
    cached.log_start_offset = part.log_start_offset
    return (
        moved
        or part.error_code != 0
        or size > 0
        or (part.diverging_epoch is not None and part.diverging_epoch.epoch >= 0)
        or part.preferred_read_replica >= 0
    )


class FetchSessionCache:
    """See the module docstring. ``slots``: how many sessions the broker keeps."""

    def __init__(self, slots: int, *, eviction_ms: int = EVICTION_MS) -> None:
        if slots < 0:
            raise ValueError(f"fetch session slots must be >= 0, got {slots}")
        self._slots = slots
        self._eviction_ms = eviction_ms
        self._sessions: dict[int, _CachedSession] = {}
        self._minted = 0

    def __len__(self) -> int:
        return len(self._sessions)

    def fetchers(self) -> list[int]:
        """The replica id (-1: a consumer) of every session, for tests and metrics."""
        return [session.replica_id for session in self._sessions.values()]

    def partitions_of(self, session_id: int) -> list[TopicPartition]:
        """The partitions a session holds: the active ones in fetch order, then the quiet
        ones (for tests and metrics)."""
        session = self._sessions.get(session_id)
        return [] if session is None else [*session.active, *session.quiet]

    def context(
        self, body: m.FetchRequest, now_ms: int, feed: ChangeFeed
    ) -> FetchContext | ErrorCode:
        """Resolve ``body`` against the cache: a context, or the session error to answer.
        ``feed``: the hosted partitions' changes (a new session starts looking from now)."""
        epoch, session_id = body.session_epoch, body.session_id
        if epoch > 0:
            return self._incremental(body, now_ms)
        if session_id != 0:
            self._sessions.pop(session_id, None)  # epoch -1 closes it, epoch 0 replaces it
        partitions = fetch_partitions(body)
        if epoch < 0:
            return FetchContext(partitions)
        session = self._open(body.replica_id, now_ms)
        if session is None:
            return FetchContext(partitions)
        session.seen_seq = feed.seq
        for tp, fetch in partitions:
            session.add(tp, fetch)
        return FetchContext(partitions, session.session_id, session)

    def _incremental(self, body: m.FetchRequest, now_ms: int) -> FetchContext | ErrorCode:
        session = self._sessions.get(body.session_id)
        if session is None or session.replica_id != body.replica_id:
            return ErrorCode.FETCH_SESSION_ID_NOT_FOUND
        if body.session_epoch != session.epoch:
            return ErrorCode.INVALID_FETCH_SESSION_EPOCH
        session.epoch = next_session_epoch(session.epoch)
        session.last_used_ms = now_ms
        for forgotten in body.forgotten_topics_data:
            for partition in forgotten.partitions:
                session.forget(TopicPartition(forgotten.topic, partition))
        for tp, fetch in fetch_partitions(body):
            session.add(tp, fetch)
        return FetchContext([], session.session_id, session, incremental=True)

    def _open(self, replica_id: int, now_ms: int) -> _CachedSession | None:
        if len(self._sessions) >= self._slots and not self._evict_for(replica_id, now_ms):
            return None
        session_id = self._mint()
        session = _CachedSession(session_id, replica_id, 1, now_ms)
        self._sessions[session_id] = session
        return session

    def _evict_for(self, replica_id: int, now_ms: int) -> bool:
        """Free a slot for a new session of ``replica_id`` if the rules allow; whether one was."""
        if not self._sessions:
            return False
        by_age = sorted(self._sessions.values(), key=lambda s: s.last_used_ms)
        stale = by_age[0]
        if now_ms - stale.last_used_ms >= self._eviction_ms:
            del self._sessions[stale.session_id]
            return True
        if replica_id >= 0:
            for session in by_age:
                if not session.privileged:
                    del self._sessions[session.session_id]
                    return True
        return False

    def _mint(self) -> int:
        while True:
            self._minted = self._minted % _INT32_MAX + 1
            session_id = (self._minted * _SCRAMBLE) & _INT32_MAX
            if session_id != 0 and session_id not in self._sessions:
                return session_id
