"""The consumer-group API schemas: every request and response at every version round-trips,
and agrees with kafka-python's codec (built from Kafka's JSON schemas) in both directions:
replog's bytes decode there to the same values and re-encode to the same bytes, and
kafka-python's bytes decode here to the same message."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from replog.protocol import EncodeError, Message, supported_api_versions
from replog.protocol.messages import (
    APIS,
    GROUP_APIS,
    DescribedGroup,
    DescribeGroupsResponse,
    FindCoordinatorRequest,
    JoinGroupRequest,
    JoinGroupResponse,
    LeaveGroupRequest,
    MemberIdentity,
    OffsetCommitRequest,
    OffsetCommitRequestPartition,
    OffsetCommitRequestTopic,
    OffsetFetchRequest,
)

from .kafka_python_bridge import (
    kafka_python_class,
    kafka_python_plain,
    replog_plain,
    to_kafka_python,
)
from .strategies import all_versions, case_id, message_strategy

CASES = all_versions(GROUP_APIS)


@pytest.mark.parametrize("case", CASES, ids=[case_id(c) for c in CASES])
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_group_message_round_trips_at_every_version(
    case: tuple[type[Message], int], data: st.DataObject
) -> None:
    cls, version = case
    message = data.draw(message_strategy(cls, version))
    encoded = message.encode(version)
    decoded = cls.decode(encoded, version)
    assert decoded == message
    assert decoded.encode(version) == encoded


@pytest.mark.parametrize("case", CASES, ids=[case_id(c) for c in CASES])
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_group_message_agrees_with_kafka_python_both_ways(
    case: tuple[type[Message], int], data: st.DataObject
) -> None:
    cls, version = case
    kp_cls = kafka_python_class(cls)
    message = data.draw(message_strategy(cls, version))
    ours = message.encode(version)

    theirs_decoded = kp_cls.decode(ours, version=version)
    assert kafka_python_plain(theirs_decoded, kp_cls._struct, version) == replog_plain(
        message, version
    )
    theirs_decoded._header = None  # decoded objects lack it, and encode(version=) reads it
    assert bytes(theirs_decoded.encode(version=version)) == ours

    theirs = bytes(to_kafka_python(message, version).encode(version=version))
    assert theirs == ours
    assert cls.decode(theirs, version) == message


def test_described_group_without_authorized_operations_agrees_with_kafka_python() -> None:
    """kafka-python reads INT32_MIN (bit 31 alone) as "no operations given" (None)."""
    response = DescribeGroupsResponse(groups=[DescribedGroup(group_id="g")])
    kp_cls = kafka_python_class(DescribeGroupsResponse)
    theirs = kp_cls.decode(response.encode(5), version=5)
    assert theirs.groups[0].authorized_operations is None
    assert kafka_python_plain(theirs, kp_cls._struct, 5) == replog_plain(response, 5)


def test_group_apis_are_served_and_advertised() -> None:
    advertised = {v.api_key: (v.min_version, v.max_version) for v in supported_api_versions()}
    assert sorted(GROUP_APIS) == [8, 9, 10, 11, 12, 13, 14, 15, 16, 42, 47]
    for key, spec in GROUP_APIS.items():
        assert APIS[key] is spec
        assert advertised[key] == (spec.info.min_version, spec.info.max_version)


def test_group_api_version_ranges_are_the_planned_ones() -> None:
    ranges = {k: (s.info.min_version, s.info.max_version) for k, s in GROUP_APIS.items()}
    assert ranges == {
        8: (2, 8),  # OffsetCommit (Kafka 4.0 removed v0-v1)
        9: (1, 8),  # OffsetFetch (Kafka 4.0 removed v0)
        10: (0, 4),  # FindCoordinator
        11: (0, 9),  # JoinGroup
        12: (0, 4),  # Heartbeat
        13: (0, 5),  # LeaveGroup
        14: (0, 5),  # SyncGroup
        15: (0, 5),  # DescribeGroups
        16: (0, 4),  # ListGroups
        42: (0, 2),  # DeleteGroups
        47: (0, 0),  # OffsetDelete
    }


def test_join_group_defaults_are_kafkas() -> None:
    request = JoinGroupRequest.decode(
        JoinGroupRequest(group_id="g", session_timeout_ms=10_000).encode(0), 0
    )
    assert request.rebalance_timeout_ms == -1
    assert request.group_instance_id is None
    assert JoinGroupResponse().generation_id == -1


def test_a_static_member_cannot_be_sent_before_join_group_v5() -> None:
    request = JoinGroupRequest(group_id="g", member_id="", group_instance_id="instance-1")
    assert JoinGroupRequest.decode(request.encode(5), 5).group_instance_id == "instance-1"
    with pytest.raises(EncodeError, match="group_instance_id"):
        request.encode(4)


def test_leave_group_carries_one_member_before_v3_and_a_batch_from_v3() -> None:
    single = LeaveGroupRequest(group_id="g", member_id="m-1")
    assert LeaveGroupRequest.decode(single.encode(2), 2).member_id == "m-1"
    batch = LeaveGroupRequest(group_id="g", members=[MemberIdentity(member_id="m-1")])
    assert LeaveGroupRequest.decode(batch.encode(3), 3).members[0].member_id == "m-1"
    with pytest.raises(EncodeError, match="members"):
        batch.encode(2)


def test_offset_commit_v1_is_not_served_and_v2_to_v4_carry_a_retention() -> None:
    partition = OffsetCommitRequestPartition(
        partition_index=0, committed_offset=5, commit_timestamp=1234, committed_metadata=None
    )
    request = OffsetCommitRequest(
        group_id="g", topics=[OffsetCommitRequestTopic(name="t", partitions=[partition])]
    )
    with pytest.raises(EncodeError, match="not supported"):  # Kafka 4.0 removed v0-v1
        request.encode(1)
    with pytest.raises(EncodeError, match="commit_timestamp"):  # the v1-only field
        request.encode(2)
    retained = OffsetCommitRequest(group_id="g", retention_time_ms=60_000)
    assert OffsetCommitRequest.decode(retained.encode(4), 4).retention_time_ms == 60_000
    with pytest.raises(EncodeError, match="retention_time_ms"):  # a request drops nothing
        retained.encode(5)


def test_offset_fetch_all_partitions_is_a_null_topic_list_from_v2() -> None:
    request = OffsetFetchRequest(group_id="g", topics=None)
    assert OffsetFetchRequest.decode(request.encode(2), 2).topics is None
    with pytest.raises(EncodeError):
        request.encode(1)


def test_find_coordinator_batches_keys_from_v4() -> None:
    request = FindCoordinatorRequest(coordinator_keys=["a", "b"])
    assert FindCoordinatorRequest.decode(request.encode(4), 4).coordinator_keys == ["a", "b"]
    with pytest.raises(EncodeError, match="coordinator_keys"):
        request.encode(3)
