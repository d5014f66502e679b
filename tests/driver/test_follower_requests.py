"""A follower's book of fetch requests (``FollowerRequests``): only partitions that changed or
were answered get a new request; everything is rebuilt when the change feed cannot tell, after
``invalidate`` and every refresh interval."""

from __future__ import annotations

import attrs

from replog.broker.driver.change_feed import ChangeFeed
from replog.broker.driver.follower_requests import FollowerRequests
from replog.isr import PartitionFetchRequest
from replog.topics import TopicPartition

TPS = [TopicPartition("t", p) for p in range(4)]
REFRESH_MS = 1_000


@attrs.define
class Source:
    """The replica manager as the book sees it: each build gets a new request id."""

    followed: set[TopicPartition] = attrs.Factory(lambda: set(TPS))
    changes: ChangeFeed = attrs.Factory(ChangeFeed)
    builds: list[TopicPartition] = attrs.Factory(list)
    next_id: int = 1

    def fetch_requests_for(
        self, leader_id: int
    ) -> list[tuple[TopicPartition, PartitionFetchRequest]]:
        return [(tp, r) for tp in sorted(self.followed) if (r := self.fetch_request_for(tp, 1))]

    def fetch_request_for(self, tp: TopicPartition, leader_id: int) -> PartitionFetchRequest | None:
        if tp not in self.followed:
            return None
        self.builds.append(tp)
        self.next_id += 1
        return PartitionFetchRequest(
            replica_id=2, fetch_offset=0, current_leader_epoch=0, request_id=self.next_id
        )


def test_only_changed_and_answered_partitions_are_rebuilt() -> None:
    source, book = Source(), FollowerRequests(1)
    assert book.refresh(source, 0, REFRESH_MS) is None  # the first round builds all
    assert list(book.requests) == TPS and book.take_unsent() is None
    first = dict(book.requests)
    source.builds.clear()

    assert book.refresh(source, 1, REFRESH_MS) == []  # nothing happened: nothing rebuilt
    assert book.requests == first and source.builds == [] and book.take_unsent() == set()

    source.changes.note(TPS[1])  # an append on partition 1
    book.used_up([TPS[3]])  # the last answer settled partition 3's request
    assert sorted(book.refresh(source, 2, REFRESH_MS) or []) == [TPS[1], TPS[3]]
    assert book.requests[TPS[0]] is first[TPS[0]]  # still the outstanding request
    assert book.requests[TPS[1]].request_id != first[TPS[1]].request_id
    assert book.take_unsent() == {TPS[1], TPS[3]}

    source.followed.discard(TPS[2])  # no longer followed on this leader (a role change)
    source.changes.note(TPS[2])
    assert book.refresh(source, 3, REFRESH_MS) == [TPS[2]]
    assert TPS[2] not in book.requests and book.take_unsent() == {TPS[2]}


def test_everything_is_rebuilt_when_the_feed_cannot_tell_or_on_refresh() -> None:
    source, book = Source(), FollowerRequests(1)
    book.refresh(source, 0, REFRESH_MS)
    source.changes.note_all()  # retention: any log start may have moved
    assert book.refresh(source, 1, REFRESH_MS) is None
    assert book.refresh(source, 2, REFRESH_MS) == []
    assert book.refresh(source, 1 + REFRESH_MS, REFRESH_MS) is None  # the safety net
    book.invalidate()  # a failed round
    assert book.refresh(source, 2 + REFRESH_MS, REFRESH_MS) is None
    assert book.take_unsent() is None
