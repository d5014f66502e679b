"""OffsetCommit, OffsetFetch, OffsetDelete and the expiry of offsets and empty groups."""

from __future__ import annotations

from replog.errors import ErrorCode
from replog.groups.config import GroupConfig
from replog.groups.group import GroupState
from replog.groups.records import GroupRecord, OffsetRecord, decode_record
from replog.groups.shard import GroupCoordinatorShard
from replog.protocol.consumer_protocol import subscribed_topics
from replog.protocol.messages import (
    OffsetDeleteRequest,
    OffsetDeleteRequestPartition,
    OffsetDeleteRequestTopic,
)

from .harness import Harness, counter_suffixes

DAY_MS = 24 * 3600 * 1000
RETENTION_MS = 7 * DAY_MS
CHECK_MS = 600_000


def _errors(h: Harness, request_id: int) -> list[int]:
    return [p.error_code for t in h.reply(request_id).topics for p in t.partitions]


def _delete(h: Harness, group_id: str, partitions: list[tuple[str, int]]) -> int:
    topics: dict[str, list[int]] = {}
    for topic, partition in partitions:
        topics.setdefault(topic, []).append(partition)
    request = OffsetDeleteRequest(
        group_id=group_id,
        topics=[
            OffsetDeleteRequestTopic(
                name=t, partitions=[OffsetDeleteRequestPartition(partition_index=p) for p in ps]
            )
            for t, ps in topics.items()
        ],
    )
    request_id = h.new_id()
    h.absorb(h.shard.on_offset_delete(request_id, request, now_ms=h.now_ms))
    return request_id


def test_a_simple_commit_creates_the_group_and_is_fetched_back() -> None:
    h = Harness()
    request_id = h.commit({("t", 0): 10, ("t", 1): 20}, group_id="simple", metadata="m")
    assert _errors(h, request_id) == [ErrorCode.NONE, ErrorCode.NONE]
    group = h.shard.group("simple")
    assert group is not None and group.state is GroupState.EMPTY and group.protocol_type is None
    assert h.fetch("simple") == {("t", 0): (10, 0), ("t", 1): (20, 0)}
    assert h.fetch("simple", [("t", 1), ("t", 9), ("u", 0)]) == {
        ("t", 1): (20, 0),
        ("t", 9): (-1, 0),
        ("u", 0): (-1, 0),
    }
    offset = h.shard.committed_offsets("simple")[("t", 0)]
    assert (offset.metadata, offset.commit_timestamp_ms, offset.leader_epoch) == ("m", h.now_ms, -1)


def test_a_commit_with_a_generation_to_a_missing_group_is_illegal_generation() -> None:
    h = Harness()
    request_id = h.commit({("t", 0): 1}, group_id="none", member_id="m", generation=3)
    assert _errors(h, request_id) == [ErrorCode.ILLEGAL_GENERATION]
    assert h.shard.group("none") is None


def test_only_members_of_the_generation_commit_to_an_active_group() -> None:
    h = Harness()
    members, generation = h.stable_group(2)
    cases = [
        ({"member_id": "", "generation": -1}, ErrorCode.UNKNOWN_MEMBER_ID),
        ({"member_id": "ghost", "generation": generation}, ErrorCode.UNKNOWN_MEMBER_ID),
        ({"member_id": members[0], "generation": generation - 1}, ErrorCode.ILLEGAL_GENERATION),
        ({"member_id": members[0], "generation": -1}, ErrorCode.ILLEGAL_GENERATION),
        ({"member_id": members[0], "generation": generation}, ErrorCode.NONE),
    ]
    for kwargs, expected in cases:
        assert _errors(h, h.commit({("t", 0): 5}, **kwargs)) == [expected], kwargs


def test_commits_while_completing_are_rebalance_in_progress_and_while_preparing_accepted() -> None:
    h = Harness()
    members, generation = h.stable_group(2)
    h.join(member_id=members[0])  # PreparingRebalance
    ok = h.commit({("t", 0): 5}, member_id=members[1], generation=generation)
    assert _errors(h, ok) == [ErrorCode.NONE]
    h.join(member_id=members[1])  # everyone rejoined: CompletingRebalance
    assert h.shard.group("g").state is GroupState.COMPLETING_REBALANCE
    refused = h.commit({("t", 0): 6}, member_id=members[1], generation=generation + 1)
    assert _errors(h, refused) == [ErrorCode.REBALANCE_IN_PROGRESS]


def test_too_long_metadata_fails_only_its_partition() -> None:
    h = Harness(GroupConfig(offset_metadata_length_max=4))
    request_id = h.commit({("t", 0): 1}, metadata="12345")
    assert _errors(h, request_id) == [ErrorCode.OFFSET_METADATA_TOO_LARGE]
    assert h.log == [] and h.shard.group("g") is None
    # Java counts UTF-16 code units: one emoji is two.
    assert _errors(h, h.commit({("t", 0): 1}, metadata="ab\U0001f600")) == [ErrorCode.NONE]
    assert _errors(h, h.commit({("t", 0): 1}, metadata="abc\U0001f600")) == [
        ErrorCode.OFFSET_METADATA_TOO_LARGE
    ]


def test_a_commit_is_answered_and_visible_only_once_written() -> None:
    h = Harness(auto_write=False)
    request_id = h.commit({("t", 0): 42})
    assert h.reply(request_id) is None
    assert h.fetch("g", [("t", 0)]) == {("t", 0): (-1, 0)}
    unstable = h.fetch("g", [("t", 0)], require_stable=True)
    assert unstable == {("t", 0): (-1, ErrorCode.UNSTABLE_OFFSET_COMMIT)}
    h.complete_writes()
    assert _errors(h, request_id) == [ErrorCode.NONE]
    assert h.fetch("g", [("t", 0)], require_stable=True) == {("t", 0): (42, 0)}


def test_a_failed_commit_write_maps_the_error_and_changes_nothing() -> None:
    h = Harness(auto_write=False)
    h.commit({("t", 0): 1})
    h.complete_writes()
    failed = h.commit({("t", 0): 2})
    h.complete_writes(ErrorCode.MESSAGE_TOO_LARGE)
    assert _errors(h, failed) == [ErrorCode.INVALID_COMMIT_OFFSET_SIZE]
    assert h.fetch() == {("t", 0): (1, 0)}
    lost = h.commit({("t", 0): 3}, group_id="other")
    h.complete_writes(ErrorCode.NOT_ENOUGH_REPLICAS)
    assert _errors(h, lost) == [ErrorCode.COORDINATOR_NOT_AVAILABLE]
    assert h.shard.group("other") is None  # the simple group it created is forgotten


def test_a_commit_extends_the_member_session() -> None:
    h = Harness()
    members, generation = h.stable_group(1)
    for _ in range(3):
        h.advance(9_000)
        h.commit({("t", 0): 1}, member_id=members[0], generation=generation)
    assert h.shard.group("g").state is GroupState.STABLE


def test_offset_delete_outcomes() -> None:
    h = Harness()
    assert h.reply(_delete(h, "", [])).error_code == ErrorCode.INVALID_GROUP_ID
    assert h.reply(_delete(h, "none", [("t", 0)])).error_code == ErrorCode.GROUP_ID_NOT_FOUND
    h.commit({("t", 0): 1, ("t", 1): 2}, group_id="simple")
    response = h.reply(_delete(h, "simple", [("t", 0), ("t", 7)]))
    assert [p.error_code for p in response.topics[0].partitions] == [0, 0]
    assert h.fetch("simple") == {("t", 1): (2, 0)}
    members, generation = h.stable_group(1, group_id="consumers")
    h.commit({("t", 0): 1}, group_id="consumers", member_id=members[0], generation=generation)
    refused = h.reply(_delete(h, "consumers", [("t", 0)]))  # subscriptions unknown: all count
    assert refused.topics[0].partitions[0].error_code == ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC
    h.stable_group(1, group_id="connectors")
    group = h.shard.group("connectors")
    assert group is not None
    group.protocol_type = "connect"
    assert h.reply(_delete(h, "connectors", [])).error_code == ErrorCode.NON_EMPTY_GROUP


def test_offset_delete_with_a_subscription_reader_spares_only_consumed_topics() -> None:
    h = Harness()
    suffixes = counter_suffixes()
    h.shard = GroupCoordinatorShard(
        0,
        config=h.config,
        member_id_suffix=lambda: next(suffixes),
        subscription_reader=subscribed_topics,
        now_ms=h.now_ms,
    )
    members, generation = h.stable_group(1)  # subscribes to "t"
    h.commit({("t", 0): 1, ("old", 0): 1}, member_id=members[0], generation=generation)
    response = h.reply(_delete(h, "g", [("t", 0), ("old", 0)]))
    errors = {t.name: t.partitions[0].error_code for t in response.topics}
    assert errors == {"t": ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC, "old": ErrorCode.NONE}
    assert h.fetch() == {("t", 0): (1, 0)}


def test_offsets_of_an_empty_group_expire_a_retention_after_it_became_empty() -> None:
    h = Harness()
    members, generation = h.stable_group(1)
    h.commit({("t", 0): 1}, member_id=members[0], generation=generation)
    h.advance(3 * DAY_MS)  # long since committed; the member's session ended long ago...
    group = h.shard.group("g")
    assert group.state is GroupState.EMPTY
    became_empty = group.state_timestamp_ms
    assert became_empty is not None and became_empty < h.now_ms
    h.advance(became_empty + RETENTION_MS - h.now_ms - 1)
    assert h.fetch() == {("t", 0): (1, 0)}
    h.advance(CHECK_MS)
    assert h.fetch() == {}
    assert h.shard.group("g") is None  # no offsets left: the group went too
    records = [decode_record(*raw) for raw in h.log[-2:]]
    assert records == [OffsetRecord("g", "t", 0, None), GroupRecord("g", None)]


def test_simple_group_offsets_expire_a_retention_after_their_commit() -> None:
    h = Harness()
    h.commit({("t", 0): 1})
    h.advance(DAY_MS)
    h.commit({("t", 1): 1})
    h.advance(RETENTION_MS - DAY_MS)
    assert h.fetch() == {("t", 1): (1, 0)}
    h.advance(DAY_MS)
    assert h.fetch() == {} and h.shard.group("g") is None


def test_an_explicit_retention_expires_at_its_own_time() -> None:
    h = Harness()
    h.commit({("t", 0): 1}, retention_ms=CHECK_MS)
    h.advance(CHECK_MS)
    assert h.fetch() == {}


def _long_lived_member(h: Harness) -> tuple[str, int]:
    """One member with a 30-minute session, Stable."""
    member, request_id = h.join_with_id(session_ms=1_800_000)
    h.advance(3_000)
    generation = h.reply(request_id).generation_id
    h.sync(member, generation, assignments={member: b""})
    return member, generation


def _keep_alive(h: Harness, member: str, generation: int, ms: int) -> None:
    for _ in range(ms // 1_500_000 + 1):
        h.heartbeat(member, generation)
        h.advance(min(ms, 1_500_000))
        ms -= min(ms, 1_500_000)


def test_a_stable_consumer_group_keeps_offsets_when_subscriptions_are_unknown() -> None:
    h = Harness()
    member, generation = _long_lived_member(h)
    h.commit({("old", 0): 1}, member_id=member, generation=generation)
    _keep_alive(h, member, generation, RETENTION_MS + 2 * CHECK_MS)
    assert h.shard.group("g").state is GroupState.STABLE
    assert h.fetch() == {("old", 0): (1, 0)}


def test_a_stable_consumer_group_loses_offsets_of_topics_it_no_longer_reads() -> None:
    h = Harness()
    suffixes = counter_suffixes()
    h.shard = GroupCoordinatorShard(
        0,
        config=h.config,
        member_id_suffix=lambda: next(suffixes),
        subscription_reader=subscribed_topics,
        now_ms=h.now_ms,
    )
    member, generation = _long_lived_member(h)  # subscribes to "t"
    h.commit({("old", 0): 1, ("t", 0): 1}, member_id=member, generation=generation)
    _keep_alive(h, member, generation, RETENTION_MS + 2 * CHECK_MS)
    assert h.fetch() == {("t", 0): (1, 0)}


def test_offsets_in_flight_never_expire() -> None:
    h = Harness(auto_write=False)
    h.commit({("t", 0): 1})
    h.complete_writes()
    h.advance(RETENTION_MS - CHECK_MS)
    h.commit({("t", 0): 2})  # in flight across the retention checks below
    h.advance(2 * CHECK_MS)
    in_flight = [decode_record(*r) for w in h.pending for r in w.records]
    assert [r.value is not None for r in in_flight] == [True]  # no tombstones were written
    h.complete_writes()
    assert h.fetch() == {("t", 0): (2, 0)}


def test_deleted_topic_partitions_lose_their_offsets_in_every_group() -> None:
    h = Harness()
    h.commit({("gone", 0): 1, ("kept", 0): 2}, group_id="a")
    h.commit({("gone", 0): 3, ("gone", 1): 4}, group_id="b")
    h.absorb(h.shard.on_partitions_deleted([("gone", 0), ("gone", 1)], now_ms=h.now_ms))
    assert h.fetch("a") == {("kept", 0): (2, 0)}
    assert h.fetch("b") == {}
    assert h.reload().committed_offsets("b") == {}


def test_a_retention_of_int64_max_is_clamped_and_the_shard_keeps_working() -> None:
    """OffsetCommit v2-v4 with retention_time_ms = 2^63-1: the expiry stays inside int64 (the
    offset never expires) and later commits are written as usual. Before, now + retention did
    not fit the record's int64 and the commit raised EncodeError inside the shard."""
    h = Harness()
    first = h.commit({("t", 0): 1}, retention_ms=2**63 - 1)
    assert _errors(h, first) == [ErrorCode.NONE]
    offset = h.shard.committed_offsets("g")[("t", 0)]
    assert offset.expire_timestamp_ms == 2**63 - 1
    second = h.commit({("t", 0): 2})
    assert _errors(h, second) == [ErrorCode.NONE]
    h.advance(CHECK_MS)
    assert h.fetch() == {("t", 0): (2, 0)}
