"""``error_response``: for any request of any served API at any served version, the answer a
broker gives when handling it failed encodes at that version and carries the error code on every
topic, partition or resource the request named (Kafka's ``getErrorResponse``)."""

from __future__ import annotations

from typing import Any

import attrs
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from replog.errors import ErrorCode, InvalidConfigError, NotLeaderError, StorageError
from replog.protocol import APIS, EncodeError, error_response
from replog.protocol import messages as m
from replog.protocol.error_responses import error_code_for
from replog.protocol.schema import Request

from .strategies import message_strategy

CASES = [
    (spec.request, version)
    for spec in APIS.values()
    for version in range(spec.info.min_version, spec.info.max_version + 1)
]


def error_codes(value: Any, version: int) -> list[int]:
    """Every ``error_code`` a decoded message carries at ``version``, depth first."""
    if isinstance(value, list):
        return [code for item in value for code in error_codes(item, version)]
    if not attrs.has(type(value)):
        return []
    codes = []
    for attribute in attrs.fields(type(value)):
        if version not in attribute.metadata["wire"].versions:
            continue
        item = getattr(value, attribute.name)
        if attribute.name == "error_code":
            codes.append(item)
        else:
            codes += error_codes(item, version)
    return codes


def named_items(request: Any, version: int) -> int:
    """How many topics/partitions/resources/groups the error response must report on (a
    top-level code counts as one)."""
    if isinstance(request, m.OffsetCommitRequest):
        return sum(len(t.partitions) for t in request.topics)
    if isinstance(request, m.OffsetFetchRequest):
        if version >= 8:
            return len(request.groups)
        partitions = sum(len(t.partition_indexes) for t in request.topics or ())
        return partitions + int(version >= 2)
    if isinstance(request, m.FindCoordinatorRequest):
        return len(request.coordinator_keys) if version >= 4 else 1
    if isinstance(request, m.DescribeGroupsRequest):
        return len(request.groups)
    if isinstance(request, m.DeleteGroupsRequest):
        return len(request.groups_names)
    group_wide = (
        m.JoinGroupRequest,
        m.SyncGroupRequest,
        m.HeartbeatRequest,
        m.LeaveGroupRequest,
        m.ListGroupsRequest,
        m.OffsetDeleteRequest,
    )
    if isinstance(request, group_wide):
        return 1
    if isinstance(request, m.ProduceRequest):
        return sum(len(t.partition_data) for t in request.topic_data)
    if isinstance(request, m.FetchRequest | m.ListOffsetsRequest | m.OffsetForLeaderEpochRequest):
        return sum(len(t.partitions) for t in request.topics)
    if isinstance(request, m.MetadataRequest):
        return len(request.topics or ())
    if isinstance(request, m.DeleteTopicsRequest):
        return len(request.topic_names) + len(request.topics)
    if isinstance(request, m.DescribeConfigsRequest):
        return len(request.resources)
    if isinstance(request, m.ApiVersionsRequest | m.InitProducerIdRequest):
        return 0
    if isinstance(request, m.AlterConfigsRequest | m.IncrementalAlterConfigsRequest):
        return len(request.resources)
    if isinstance(request, m.DeleteRecordsRequest | m.AlterPartitionReassignmentsRequest):
        return sum(len(t.partitions) for t in request.topics)
    if isinstance(request, m.ElectLeadersRequest):
        return sum(len(t.partitions) for t in request.topic_partitions or ())
    if isinstance(
        request,
        m.DescribeLogDirsRequest | m.ListPartitionReassignmentsRequest | m.DescribeClusterRequest,
    ):
        return 0
    return len(request.topics)  # CreateTopics, CreatePartitions


def top_level_codes(request: Any, version: int) -> int:
    """How many top-level error codes the error response carries at ``version``."""
    if isinstance(request, m.FetchRequest):
        return int(version >= 7)
    if isinstance(request, m.DescribeLogDirsRequest):
        return int(version >= 3)
    if isinstance(request, m.ElectLeadersRequest):
        return int(version >= 1)
    top_level = (
        m.ApiVersionsRequest,
        m.InitProducerIdRequest,
        m.AlterPartitionReassignmentsRequest,
        m.ListPartitionReassignmentsRequest,
        m.DescribeClusterRequest,
    )
    return int(isinstance(request, top_level))


@pytest.mark.parametrize("case", CASES, ids=[f"{c[0].__name__}-v{c[1]}" for c in CASES])
@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_the_error_response_reports_the_code_on_everything_the_request_named(
    case: tuple[type[Request], int], data: st.DataObject
) -> None:
    cls, version = case
    request = data.draw(message_strategy(cls, version))
    if isinstance(request, m.ProduceRequest) and request.acks == 0:
        assert error_response(request, RuntimeError("boom")) is None
        return
    response = error_response(request, RuntimeError("boom"), version=version)
    assert response is not None and response.API == request.API
    decoded = type(response).decode(response.encode(version), version)
    codes = error_codes(decoded, version)
    assert set(codes) <= {ErrorCode.UNKNOWN_SERVER_ERROR}
    assert len(codes) == named_items(request, version) + top_level_codes(request, version)


def test_list_offsets_error_response_at_v3_names_each_partition() -> None:
    request = m.ListOffsetsRequest(
        replica_id=-1,
        topics=[
            m.ListOffsetsTopic(
                name="t",
                partitions=[
                    m.ListOffsetsPartition(partition_index=0, timestamp=-1),
                    m.ListOffsetsPartition(partition_index=4, timestamp=-2),
                ],
            )
        ],
    )
    response = error_response(request, EncodeError("leader_epoch is not in version 3"))
    assert isinstance(response, m.ListOffsetsResponse)
    decoded = m.ListOffsetsResponse.decode(response.encode(3), 3)
    (topic,) = decoded.topics
    assert topic.name == "t"
    assert [(p.partition_index, p.error_code, p.offset) for p in topic.partitions] == [
        (0, ErrorCode.UNKNOWN_SERVER_ERROR, -1),
        (4, ErrorCode.UNKNOWN_SERVER_ERROR, -1),
    ]


def test_codes_and_messages_follow_kafkas_api_error() -> None:
    assert error_code_for(RuntimeError("internal detail")) == (
        ErrorCode.UNKNOWN_SERVER_ERROR,
        None,
    )
    assert error_code_for(InvalidConfigError("bad value")) == (
        ErrorCode.INVALID_CONFIG,
        "bad value",
    )
    assert error_code_for(StorageError("disk gone"))[0] == ErrorCode.KAFKA_STORAGE_ERROR
    request = m.CreateTopicsRequest(topics=[m.CreatableTopic(name="a")])
    error = NotLeaderError("moved")
    response = error_response(request, error)
    assert isinstance(response, m.CreateTopicsResponse)
    assert [(t.name, t.error_code, t.error_message) for t in response.topics] == [
        ("a", ErrorCode.NOT_LEADER_OR_FOLLOWER, str(error))
    ]
