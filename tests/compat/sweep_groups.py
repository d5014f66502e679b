"""The consumer-group APIs' scenarios of the version sweep (``test_version_sweep``): a request
about a real group at every advertised version, built with kafka-python's protocol classes, sent
to the group's coordinator, and the answer checked for what it must say.

Every group a scenario uses hashes to the same ``__consumer_offsets`` partition as ``GROUP``
(``group_for``), so they all have the one coordinator the fixture found (``coordinator_port``).
A scenario that needs a member (SyncGroup, Heartbeat, LeaveGroup, DescribeGroups) joins one
first with JoinGroup v5, the way any client would.
"""

from __future__ import annotations

import itertools
import socket
import struct
import time
import warnings
from typing import Any

from replog.groups import partition_for
from replog.protocol.consumer_protocol import (
    ConsumerProtocolAssignment,
    ConsumerProtocolSubscription,
    TopicPartitions,
)

with warnings.catch_warnings():
    warnings.filterwarnings("ignore", ".*(read_text|open_text) is deprecated", DeprecationWarning)
    from kafka.protocol.admin.groups import (
        DeleteGroupsRequest,
        DeleteGroupsResponse,
        DescribeGroupsRequest,
        DescribeGroupsResponse,
        ListGroupsRequest,
        ListGroupsResponse,
    )
    from kafka.protocol.consumer.group import (
        HeartbeatRequest,
        HeartbeatResponse,
        JoinGroupRequest,
        JoinGroupResponse,
        LeaveGroupRequest,
        LeaveGroupResponse,
        OffsetCommitRequest,
        OffsetCommitResponse,
        OffsetDeleteRequest,
        OffsetDeleteResponse,
        OffsetFetchRequest,
        OffsetFetchResponse,
        SyncGroupRequest,
        SyncGroupResponse,
    )
    from kafka.protocol.metadata.find_coordinator import (
        FindCoordinatorRequest,
        FindCoordinatorResponse,
    )

GROUP = "sweep-group"
OFFSETS_PARTITIONS = 50
SESSION_MS = 10_000
NONE, MEMBER_ID_REQUIRED, COORDINATOR_NOT_AVAILABLE = 0, 79, 15
_cids = itertools.count(50_000)


def group_for(purpose: str, version: int) -> str:
    """A group of its own for one scenario and version, coordinated where ``GROUP`` is."""
    home = partition_for(GROUP, OFFSETS_PARTITIONS)
    for n in itertools.count():
        name = f"sweep-{purpose}-v{version}-{n}"
        if partition_for(name, OFFSETS_PARTITIONS) == home:
            return name
    raise AssertionError("unreachable")


def exchange(port: int, request: Any, response_class: Any, version: int, cid: int) -> Any:
    """Send ``request`` at ``version``; check and return kafka-python's decoding of the answer."""
    request.with_header(correlation_id=cid, client_id="version-sweep")
    frame = request.encode(version=version, header=True, framed=True)
    with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
        sock.sendall(frame)
        size = struct.unpack(">i", read_exactly(sock, 4))[0]
        payload = read_exactly(sock, size)
    response = response_class[version].decode(payload, header=True)
    assert response.header.correlation_id == cid
    assert bytes(response.encode(header=True)) == payload
    return response


def read_exactly(sock: socket.socket, size: int) -> bytes:
    data = b""
    while len(data) < size:
        chunk = sock.recv(size - len(data))
        if not chunk:
            raise ConnectionError(f"closed after {len(data)} of {size} bytes")
        data += chunk
    return data


def find_coordinator_port(any_port: int, brokers: dict[int, int]) -> int:
    """The port of ``GROUP``'s coordinator, once it serves the group (the first lookup creates
    ``__consumer_offsets``; its partitions then load)."""
    deadline = time.monotonic() + 30
    while True:
        answer = exchange(
            any_port,
            FindCoordinatorRequest(key=GROUP, key_type=0),
            FindCoordinatorResponse,
            3,
            next(_cids),
        )
        if answer.error_code == NONE:
            port = brokers[answer.node_id]
            assert answer.port == port
            fetched = exchange(port, _fetch_all(GROUP), OffsetFetchResponse, 8, next(_cids))
            if fetched.groups[0].error_code == NONE:
                return port
        assert answer.error_code in (NONE, COORDINATOR_NOT_AVAILABLE), answer
        assert time.monotonic() < deadline, "no coordinator for the sweep's group"
        time.sleep(0.1)


def _fetch_all(group: str) -> Any:
    return OffsetFetchRequest(
        groups=[OffsetFetchRequest.OffsetFetchRequestGroup(group_id=group, topics=None)],
        require_stable=True,
    )


# -- helpers: members, commits -------------------------------------------------------------------


def subscription(topic: str) -> bytes:
    return ConsumerProtocolSubscription(topics=[topic]).encode()


def assignment(topic: str) -> bytes:
    return ConsumerProtocolAssignment(
        assigned_partitions=[TopicPartitions(topic=topic, partitions=[0])]
    ).encode()


def join_request(group: str, member_id: str, topic: str) -> Any:
    return JoinGroupRequest(
        group_id=group,
        session_timeout_ms=SESSION_MS,
        rebalance_timeout_ms=SESSION_MS,
        member_id=member_id,
        protocol_type="consumer",
        protocols=[
            JoinGroupRequest.JoinGroupRequestProtocol(name="range", metadata=subscription(topic))
        ],
    )


def joined(port: int, group: str, topic: str) -> tuple[str, int]:
    """Join ``group`` as its only member (JoinGroup v5: the KIP-394 member id round trip);
    returns (member id, generation)."""
    first = exchange(port, join_request(group, "", topic), JoinGroupResponse, 5, next(_cids))
    assert first.error_code == MEMBER_ID_REQUIRED and first.member_id
    answer = exchange(
        port, join_request(group, first.member_id, topic), JoinGroupResponse, 5, next(_cids)
    )
    assert (answer.error_code, answer.leader) == (NONE, first.member_id)
    return answer.member_id, answer.generation_id


def synced(port: int, group: str, topic: str) -> tuple[str, int]:
    """A Stable ``group`` with one member owning ``topic``-0; returns (member id, generation)."""
    member_id, generation = joined(port, group, topic)
    request = sync_request(group, member_id, generation, topic)
    answer = exchange(port, request, SyncGroupResponse, 3, next(_cids))
    assert answer.error_code == NONE
    return member_id, generation


def sync_request(group: str, member_id: str, generation: int, topic: str) -> Any:
    return SyncGroupRequest(
        group_id=group,
        generation_id=generation,
        member_id=member_id,
        protocol_type="consumer",
        protocol_name="range",
        assignments=[
            SyncGroupRequest.SyncGroupRequestAssignment(
                member_id=member_id, assignment=assignment(topic)
            )
        ],
    )


def commit_request(group: str, topic: str, offset: int) -> Any:
    partition = OffsetCommitRequest.OffsetCommitRequestTopic.OffsetCommitRequestPartition(
        partition_index=0, committed_offset=offset, committed_metadata="sweep"
    )
    return OffsetCommitRequest(
        group_id=group,
        generation_id_or_member_epoch=-1,
        member_id="",
        topics=[OffsetCommitRequest.OffsetCommitRequestTopic(name=topic, partitions=[partition])],
    )


def committed(port: int, group: str, topic: str) -> int:
    """``group``'s committed offset of ``topic``-0 (-1: none), asked with OffsetFetch v8."""
    request = OffsetFetchRequest(
        groups=[
            OffsetFetchRequest.OffsetFetchRequestGroup(
                group_id=group,
                topics=[
                    OffsetFetchRequest.OffsetFetchRequestGroup.OffsetFetchRequestTopics(
                        name=topic, partition_indexes=[0]
                    )
                ],
            )
        ],
        require_stable=True,
    )
    answer = exchange(port, request, OffsetFetchResponse, 8, next(_cids))
    (found,) = answer.groups
    assert found.error_code == NONE
    offset: int = found.topics[0].partitions[0].committed_offset
    return offset


def commit(port: int, group: str, topic: str, offset: int) -> None:
    answer = exchange(
        port, commit_request(group, topic, offset), OffsetCommitResponse, 8, next(_cids)
    )
    assert [p.error_code for t in answer.topics for p in t.partitions] == [NONE]


# -- the scenarios: (ctx, version) -> request, (ctx, version, response) -> None ------------------
# ``ctx`` is test_version_sweep's Context: ``group_port``, ``topic`` (a topic with records),
# ``brokers`` (id -> port).


def find_coordinator(ctx: Any, version: int) -> Any:
    if version >= 4:
        return FindCoordinatorRequest(key_type=0, coordinator_keys=[GROUP, group_for("find", 4)])
    return FindCoordinatorRequest(key=GROUP, key_type=0)


def check_find_coordinator(ctx: Any, version: int, response: Any) -> None:
    if version >= 4:
        found = [(c.key, c.error_code, c.port) for c in response.coordinators]
        assert found == [
            (GROUP, NONE, ctx.group_port),
            (group_for("find", 4), NONE, ctx.group_port),
        ]
        return
    assert (response.error_code, response.port) == (NONE, ctx.group_port)
    assert ctx.brokers[response.node_id] == ctx.group_port


def join_group(ctx: Any, version: int) -> Any:
    return join_request(group_for("join", version), "", ctx.topic)


def check_join_group(ctx: Any, version: int, response: Any) -> None:
    group = group_for("join", version)
    member_id = response.member_id
    assert member_id.startswith("version-sweep-")
    if version >= 4:  # KIP-394: the first join only hands out the member id
        assert (response.error_code, response.generation_id) == (MEMBER_ID_REQUIRED, -1)
        request = join_request(group, member_id, ctx.topic)
        response = exchange(ctx.group_port, request, JoinGroupResponse, version, next(_cids))
    assert (response.error_code, response.generation_id) == (NONE, 1)
    assert (response.leader, response.member_id) == (member_id, member_id)
    assert response.protocol_name == "range"
    assert [(m.member_id, bytes(m.metadata)) for m in response.members] == [
        (member_id, subscription(ctx.topic))
    ]


def sync_group(ctx: Any, version: int) -> Any:
    group = group_for("sync", version)
    member_id, generation = joined(ctx.group_port, group, ctx.topic)
    return sync_request(group, member_id, generation, ctx.topic)


def check_sync_group(ctx: Any, version: int, response: Any) -> None:
    assert response.error_code == NONE
    assert bytes(response.assignment) == assignment(ctx.topic)
    if version >= 5:
        assert (response.protocol_type, response.protocol_name) == ("consumer", "range")


def heartbeat(ctx: Any, version: int) -> Any:
    group = group_for("heartbeat", version)
    member_id, generation = synced(ctx.group_port, group, ctx.topic)
    return HeartbeatRequest(group_id=group, generation_id=generation, member_id=member_id)


def check_heartbeat(ctx: Any, version: int, response: Any) -> None:
    assert response.error_code == NONE


def leave_group(ctx: Any, version: int) -> Any:
    group = group_for("leave", version)
    member_id, _ = joined(ctx.group_port, group, ctx.topic)
    if version >= 3:
        member = LeaveGroupRequest.MemberIdentity(member_id=member_id)
        return LeaveGroupRequest(group_id=group, members=[member])
    return LeaveGroupRequest(group_id=group, member_id=member_id)


def check_leave_group(ctx: Any, version: int, response: Any) -> None:
    assert response.error_code == NONE
    if version >= 3:
        (member,) = response.members
        assert member.error_code == NONE and member.member_id.startswith("version-sweep-")
    described = exchange(
        ctx.group_port,
        DescribeGroupsRequest(groups=[group_for("leave", version)]),
        DescribeGroupsResponse,
        0,
        next(_cids),
    )
    assert (described.groups[0].group_state, described.groups[0].members) == ("Empty", [])


def offset_commit(ctx: Any, version: int) -> Any:
    return commit_request(group_for("commit", version), ctx.topic, 100 + version)


def check_offset_commit(ctx: Any, version: int, response: Any) -> None:
    assert [
        (t.name, p.partition_index, p.error_code) for t in response.topics for p in t.partitions
    ] == [(ctx.topic, 0, NONE)]
    assert committed(ctx.group_port, group_for("commit", version), ctx.topic) == 100 + version


def offset_fetch(ctx: Any, version: int) -> Any:
    group = group_for("fetch", version)
    commit(ctx.group_port, group, ctx.topic, 200 + version)
    if version >= 8:
        return OffsetFetchRequest(
            groups=[
                OffsetFetchRequest.OffsetFetchRequestGroup(
                    group_id=group,
                    topics=[
                        OffsetFetchRequest.OffsetFetchRequestGroup.OffsetFetchRequestTopics(
                            name=ctx.topic, partition_indexes=[0, 1]
                        )
                    ],
                )
            ]
        )
    topic = OffsetFetchRequest.OffsetFetchRequestTopic(name=ctx.topic, partition_indexes=[0, 1])
    return OffsetFetchRequest(group_id=group, topics=[topic])


def check_offset_fetch(ctx: Any, version: int, response: Any) -> None:
    topics = response.groups[0].topics if version >= 8 else response.topics
    if version >= 8:
        assert (response.groups[0].group_id, response.groups[0].error_code) == (
            group_for("fetch", version),
            NONE,
        )
    elif version >= 2:
        assert response.error_code == NONE
    answers = [
        (t.name, p.partition_index, p.committed_offset, p.error_code)
        for t in topics
        for p in t.partitions
    ]
    assert answers == [(ctx.topic, 0, 200 + version, NONE), (ctx.topic, 1, -1, NONE)]
    metadata = {p.partition_index: p.metadata for t in topics for p in t.partitions}
    assert metadata[0] == "sweep"


def offset_delete(ctx: Any, version: int) -> Any:
    group = group_for("delete-offsets", version)
    commit(ctx.group_port, group, ctx.topic, 7)
    partition = OffsetDeleteRequest.OffsetDeleteRequestTopic.OffsetDeleteRequestPartition(
        partition_index=0
    )
    topic = OffsetDeleteRequest.OffsetDeleteRequestTopic(name=ctx.topic, partitions=[partition])
    return OffsetDeleteRequest(group_id=group, topics=[topic])


def check_offset_delete(ctx: Any, version: int, response: Any) -> None:
    assert response.error_code == NONE
    assert [
        (t.name, p.partition_index, p.error_code) for t in response.topics for p in t.partitions
    ] == [(ctx.topic, 0, NONE)]
    assert committed(ctx.group_port, group_for("delete-offsets", version), ctx.topic) == -1


def list_groups(ctx: Any, version: int) -> Any:
    group = group_for("list", version)
    synced(ctx.group_port, group, ctx.topic)
    if version >= 4:
        return ListGroupsRequest(states_filter=["Stable"])
    return ListGroupsRequest()


def check_list_groups(ctx: Any, version: int, response: Any) -> None:
    assert response.error_code == NONE
    listed = {g.group_id: g for g in response.groups}
    group = listed[group_for("list", version)]
    assert group.protocol_type == "consumer"
    if version >= 4:
        assert {g.group_state for g in response.groups} == {"Stable"}


def describe_groups(ctx: Any, version: int) -> Any:
    group = group_for("describe", version)
    synced(ctx.group_port, group, ctx.topic)
    return DescribeGroupsRequest(
        groups=[group, group_for("describe-unknown", version)],
        include_authorized_operations=version >= 3,
    )


def check_describe_groups(ctx: Any, version: int, response: Any) -> None:
    stable, unknown = response.groups
    assert (stable.error_code, stable.group_state, stable.protocol_type, stable.protocol_data) == (
        NONE,
        "Stable",
        "consumer",
        "range",
    )
    (member,) = stable.members
    assert member.client_id == "version-sweep"
    assert bytes(member.member_metadata) == subscription(ctx.topic)
    assert bytes(member.member_assignment) == assignment(ctx.topic)
    assert (unknown.error_code, unknown.group_state) == (NONE, "Dead")


def delete_groups(ctx: Any, version: int) -> Any:
    group = group_for("delete", version)
    commit(ctx.group_port, group, ctx.topic, 9)
    return DeleteGroupsRequest(groups_names=[group])


def check_delete_groups(ctx: Any, version: int, response: Any) -> None:
    assert [(r.group_id, r.error_code) for r in response.results] == [
        (group_for("delete", version), NONE)
    ]
    assert committed(ctx.group_port, group_for("delete", version), ctx.topic) == -1


#: api key -> (request builder, kafka-python response class, check)
GROUP_SCENARIOS: dict[int, tuple[Any, Any, Any]] = {
    8: (offset_commit, OffsetCommitResponse, check_offset_commit),
    9: (offset_fetch, OffsetFetchResponse, check_offset_fetch),
    10: (find_coordinator, FindCoordinatorResponse, check_find_coordinator),
    11: (join_group, JoinGroupResponse, check_join_group),
    12: (heartbeat, HeartbeatResponse, check_heartbeat),
    13: (leave_group, LeaveGroupResponse, check_leave_group),
    14: (sync_group, SyncGroupResponse, check_sync_group),
    15: (describe_groups, DescribeGroupsResponse, check_describe_groups),
    16: (list_groups, ListGroupsResponse, check_list_groups),
    42: (delete_groups, DeleteGroupsResponse, check_delete_groups),
    47: (offset_delete, OffsetDeleteResponse, check_offset_delete),
}
