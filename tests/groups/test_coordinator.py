"""The broker-level router: partitions hosted, loading and not, requests at every version in
and responses shaped for that version out (each encodes at it), FindCoordinator."""

from __future__ import annotations

import itertools

from replog.errors import ErrorCode
from replog.groups.config import GroupConfig
from replog.groups.coordinator import GroupCoordinator
from replog.groups.effects import Effects
from replog.groups.loading import ShardLoader
from replog.groups.partitioning import partition_for
from replog.groups.wire import Endpoint, find_coordinator
from replog.protocol.messages import (
    COORDINATOR_KEY_TRANSACTION,
    DeleteGroupsRequest,
    DescribeGroupsRequest,
    FindCoordinatorRequest,
    HeartbeatRequest,
    JoinGroupRequest,
    JoinGroupRequestProtocol,
    LeaveGroupRequest,
    ListGroupsRequest,
    OffsetCommitRequest,
    OffsetCommitRequestPartition,
    OffsetCommitRequestTopic,
    OffsetFetchRequest,
    OffsetFetchRequestGroup,
    OffsetFetchRequestTopic,
    OffsetFetchRequestTopics,
    SyncGroupRequest,
)
from replog.protocol.schema import Message

# With two partitions: "a", "c" live in partition 1; "b", "d" in partition 0.
CONFIG = GroupConfig(offsets_topic_partitions=2)


class Broker:
    """A test owner: one GroupCoordinator, writes completed on demand."""

    def __init__(self) -> None:
        suffixes = (str(n) for n in itertools.count(1))
        self.coordinator = GroupCoordinator(config=CONFIG, member_id_suffix=lambda: next(suffixes))
        self.ids = itertools.count()
        self.now_ms = 0
        self.pending: list = []
        self.replies: dict[int, Message] = {}

    def absorb(self, effects: Effects) -> None:
        for reply in effects.replies:
            assert reply.request_id not in self.replies
            self.replies[reply.request_id] = reply.response
        self.pending.extend(effects.writes)

    def send(self, request: Message, version: int) -> int:
        """Encode ``request`` at ``version``, decode it as the broker would, handle it."""
        decoded = type(request).decode(request.encode(version), version)
        request_id = next(self.ids)
        self.absorb(
            self.coordinator.handle(
                request_id, version, decoded, client_id="app", client_host="/h", now_ms=self.now_ms
            )
        )
        return request_id

    def answer(self, request_id: int, version: int) -> Message:
        """The reply, checked to encode at ``version``."""
        response = self.replies[request_id]
        assert type(response).decode(response.encode(version), version) == response
        return response

    def complete_writes(self, error: ErrorCode = ErrorCode.NONE) -> None:
        while self.pending:
            write = self.pending.pop(0)
            self.absorb(
                self.coordinator.on_write_complete(
                    write.partition, write.write_id, error, now_ms=self.now_ms
                )
            )


def _join(group_id: str, member_id: str = "") -> JoinGroupRequest:
    return JoinGroupRequest(
        group_id=group_id,
        session_timeout_ms=10_000,
        rebalance_timeout_ms=20_000,
        member_id=member_id,
        protocol_type="consumer",
        protocols=[JoinGroupRequestProtocol(name="range", metadata=b"m")],
    )


def _commit(group_id: str, offset: int) -> OffsetCommitRequest:
    partition = OffsetCommitRequestPartition(
        partition_index=0, committed_offset=offset, committed_metadata=""
    )
    return OffsetCommitRequest(
        group_id=group_id, topics=[OffsetCommitRequestTopic(name="t", partitions=[partition])]
    )


def test_group_ids_map_to_the_partitions_the_tests_assume() -> None:
    assert [partition_for(g, 2) for g in "abcd"] == [1, 0, 1, 0]


def test_groups_of_partitions_not_hosted_are_not_coordinator() -> None:
    broker = Broker()
    broker.coordinator.load(1, [], now_ms=0)
    assert broker.answer(broker.send(_join("b"), 5), 5).error_code == ErrorCode.NOT_COORDINATOR
    assert broker.answer(broker.send(_join("a"), 5), 5).error_code == ErrorCode.MEMBER_ID_REQUIRED
    commit = broker.answer(broker.send(_commit("b", 1), 8), 8)
    assert commit.topics[0].partitions[0].error_code == ErrorCode.NOT_COORDINATOR


def test_while_loading_requests_wait_with_kafkas_codes() -> None:
    broker = Broker()
    broker.coordinator.begin_loading(0)
    join = broker.answer(broker.send(_join("b"), 5), 5)
    assert join.error_code == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
    heartbeat = HeartbeatRequest(group_id="b", generation_id=1, member_id="m")
    assert broker.answer(broker.send(heartbeat, 3), 3).error_code == ErrorCode.NONE
    sync = SyncGroupRequest(group_id="b", generation_id=1, member_id="m")
    assert broker.answer(broker.send(sync, 3), 3).error_code == ErrorCode.REBALANCE_IN_PROGRESS
    listed = broker.answer(broker.send(ListGroupsRequest(), 3), 3)
    assert listed.error_code == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
    loader = ShardLoader()
    broker.coordinator.finish_loading(0, loader, now_ms=0)
    assert broker.answer(broker.send(_join("b"), 5), 5).error_code == ErrorCode.MEMBER_ID_REQUIRED


def test_join_group_protocol_name_is_empty_before_v7_and_null_from_v7() -> None:
    broker = Broker()
    broker.coordinator.load(0, [], now_ms=0)
    assert broker.answer(broker.send(_join("b"), 6), 6).protocol_name == ""
    assert broker.answer(broker.send(_join("b"), 7), 7).protocol_name is None


def test_leave_group_before_v3_carries_the_members_error_at_the_top() -> None:
    broker = Broker()
    broker.coordinator.load(0, [], now_ms=0)
    broker.send(_commit("b", 1), 2)
    broker.complete_writes()
    response = broker.answer(broker.send(LeaveGroupRequest(group_id="b", member_id="m"), 2), 2)
    assert response.error_code == ErrorCode.UNKNOWN_MEMBER_ID and response.members == []


def test_offset_fetch_answers_each_version_in_its_shape() -> None:
    broker = Broker()
    broker.coordinator.load(0, [], now_ms=0)
    broker.send(_commit("b", 5), 8)
    broker.complete_writes()
    batched = OffsetFetchRequest(
        groups=[
            OffsetFetchRequestGroup(group_id="b", topics=None),
            OffsetFetchRequestGroup(
                group_id="a", topics=[OffsetFetchRequestTopics(name="t", partition_indexes=[0])]
            ),
        ]
    )
    groups = broker.answer(broker.send(batched, 8), 8).groups
    assert [(g.group_id, g.error_code) for g in groups] == [
        ("b", ErrorCode.NONE),
        ("a", ErrorCode.NOT_COORDINATOR),
    ]
    assert groups[0].topics[0].partitions[0].committed_offset == 5
    single = OffsetFetchRequest(
        group_id="a", topics=[OffsetFetchRequestTopic(name="t", partition_indexes=[0, 1])]
    )
    v3 = broker.answer(broker.send(single, 3), 3)
    assert (v3.error_code, v3.topics) == (ErrorCode.NOT_COORDINATOR, [])
    v1 = broker.answer(broker.send(single, 1), 1)
    assert [p.error_code for p in v1.topics[0].partitions] == [ErrorCode.NOT_COORDINATOR] * 2
    hosted = OffsetFetchRequest(
        group_id="b", topics=[OffsetFetchRequestTopic(name="t", partition_indexes=[0])]
    )
    assert broker.answer(broker.send(hosted, 1), 1).topics[0].partitions[0].committed_offset == 5


def test_delete_groups_across_partitions_answers_once_every_part_is_written() -> None:
    broker = Broker()
    broker.coordinator.load(0, [], now_ms=0)
    broker.coordinator.load(1, [], now_ms=0)
    for group_id in ("a", "b"):
        broker.send(_commit(group_id, 1), 8)
    broker.complete_writes()
    request_id = broker.send(DeleteGroupsRequest(groups_names=["a", "b", "zzz", "b"]), 2)
    assert request_id not in broker.replies and len(broker.pending) == 2
    broker.complete_writes()
    results = broker.answer(request_id, 2).results
    assert [(r.group_id, r.error_code) for r in results] == [
        ("a", ErrorCode.NONE),
        ("b", ErrorCode.NONE),
        ("zzz", ErrorCode.GROUP_ID_NOT_FOUND),
        ("b", ErrorCode.NONE),  # named twice, deleted once (as Kafka answers)
    ]


def test_describe_groups_reports_unavailable_partitions_per_group() -> None:
    broker = Broker()
    broker.coordinator.load(0, [], now_ms=0)
    response = broker.answer(broker.send(DescribeGroupsRequest(groups=["a", "b"]), 5), 5)
    assert [(g.group_id, g.error_code, g.group_state) for g in response.groups] == [
        ("a", ErrorCode.NOT_COORDINATOR, ""),
        ("b", ErrorCode.NONE, "Dead"),
    ]


def test_describe_groups_reports_every_group_operation_allowed_when_asked() -> None:
    broker = Broker()
    broker.coordinator.load(0, [], now_ms=0)
    asked = DescribeGroupsRequest(groups=["b"], include_authorized_operations=True)
    assert broker.answer(broker.send(asked, 3), 3).groups[0].authorized_operations == 328
    unasked = DescribeGroupsRequest(groups=["b"])
    assert broker.answer(broker.send(unasked, 3), 3).groups[0].authorized_operations == -(2**31)


def test_unloading_a_partition_answers_its_waiting_requests_and_ignores_late_writes() -> None:
    broker = Broker()
    broker.coordinator.load(0, [], now_ms=0)
    request_id = broker.send(_commit("b", 1), 8)
    broker.absorb(broker.coordinator.unload(0))
    answer = broker.answer(request_id, 8)
    assert answer.topics[0].partitions[0].error_code == ErrorCode.NOT_COORDINATOR
    broker.complete_writes()  # the owner reports a write of the unloaded shard: ignored
    assert broker.coordinator.hosted_partitions() == []


def test_find_coordinator_maps_groups_to_their_partition_leader() -> None:
    leaders = {0: Endpoint(7, "broker-7", 9092)}
    b = FindCoordinatorRequest(key="b")

    def lookup(partition: int) -> Endpoint | None:
        return leaders.get(partition)

    v3 = find_coordinator(b, 3, partition_count=2, coordinator_of=lookup)
    assert (v3.error_code, v3.node_id, v3.host, v3.port) == (0, 7, "broker-7", 9092)
    batch = FindCoordinatorRequest(coordinator_keys=["b", "a"])
    v4 = find_coordinator(batch, 4, partition_count=2, coordinator_of=lookup)
    assert [(c.key, c.error_code, c.node_id) for c in v4.coordinators] == [
        ("b", ErrorCode.NONE, 7),
        ("a", ErrorCode.COORDINATOR_NOT_AVAILABLE, -1),
    ]
    txn = FindCoordinatorRequest(key="b", key_type=COORDINATOR_KEY_TRANSACTION)
    answer = find_coordinator(txn, 1, partition_count=2, coordinator_of=lookup)
    assert answer.error_code == ErrorCode.INVALID_REQUEST
    for version, response in [(3, v3), (4, v4), (1, answer)]:
        assert type(response).decode(response.encode(version), version) == response
