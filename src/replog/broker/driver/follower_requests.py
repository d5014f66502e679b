"""The fetch request of every partition a follower fetches from one leader: ``FollowerRequests``.

A follower's round used to build a request for every partition it follows on the leader, idle
ones included. A partition's next request (its LEO, last fetched epoch, log start, leader
epoch) only changes when something happens to it -- an append or truncation, a role or leader
change, retention -- and every such event is in the replica manager's change feed
(``replog.broker.driver.change_feed``). So a round rebuilds only the requests of the
partitions the feed names since the last round, plus those the last answer used up (a
partition's answer settles its outstanding request, whatever it said). A request that is not
rebuilt stays the partition's outstanding one, so its answer is matched when it comes. The
book also keeps which requests changed since the last one sent (``take_unsent``), so an
incremental fetch lists them without comparing every partition.

Everything is rebuilt when the feed cannot say what changed (``ChangeFeed.since`` is None),
after a failed round, and every ``refresh_ms`` as a safety net.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Protocol

import attrs

from replog.broker.driver.change_feed import ChangeFeed
from replog.isr import PartitionFetchRequest
from replog.topics import TopicPartition

__all__ = ["FollowerRequests"]


class RequestSource(Protocol):
    """What the book reads of the replica manager."""

    @property
    def changes(self) -> ChangeFeed:
        """Which partitions changed since a point."""

    def fetch_requests_for(
        self, leader_id: int
    ) -> list[tuple[TopicPartition, PartitionFetchRequest]]:
        """Every partition's next fetch from ``leader_id``."""

    def fetch_request_for(self, tp: TopicPartition, leader_id: int) -> PartitionFetchRequest | None:
        """One partition's next fetch from ``leader_id`` (None: not fetched from it)."""


@attrs.define(eq=False)
class FollowerRequests:
    """See the module docstring."""

    leader_id: int
    requests: dict[TopicPartition, PartitionFetchRequest] = attrs.Factory(dict)
    _seen_seq: int | None = None
    _built_all_ms: int = 0
    _stale: set[TopicPartition] = attrs.Factory(set)
    #: rebuilt since the last ``take_unsent`` (None: possibly all)
    _unsent: set[TopicPartition] | None = None

    def used_up(self, tps: Iterable[TopicPartition]) -> None:
        """These partitions' requests were answered (or must be built again): rebuild them."""
        self._stale.update(tps)

    def invalidate(self) -> None:
        """Rebuild every request next time, and send them all."""
        self._seen_seq = None
        self._unsent = None

    def take_unsent(self) -> set[TopicPartition] | None:
        """The partitions rebuilt since the last call (None: all may have changed); a partition
        among them missing from ``requests`` is no longer fetched."""
        unsent, self._unsent = self._unsent, set()
        return unsent

    def refresh(
        self, source: RequestSource, now_ms: int, refresh_ms: int
    ) -> list[TopicPartition] | None:
        """Bring ``requests`` up to date; the partitions whose request was rebuilt (a partition
        no longer fetched is left out of ``requests``), or None when all were."""
        feed = source.changes
        changed = None
        if self._seen_seq is not None and now_ms - self._built_all_ms < refresh_ms:
            changed = feed.since(self._seen_seq)
        self._seen_seq = feed.seq
        if changed is None:
            self.requests = dict(source.fetch_requests_for(self.leader_id))
            self._built_all_ms = now_ms
            self._stale.clear()
            self._unsent = None
            return None
        changed |= self._stale
        self._stale = set()
        if self._unsent is not None:
            self._unsent |= changed
        requests = self.requests
        for tp in changed:
            request = source.fetch_request_for(tp, self.leader_id)
            if request is None:
                requests.pop(tp, None)
            else:
                requests[tp] = request
        return list(changed)
