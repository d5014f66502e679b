"""Every served API, request and response, at every served version: encode then decode gives the
same message back, and re-encoding gives the same bytes."""

from __future__ import annotations

import uuid
from typing import Any

import attrs
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from replog.protocol import APIS, EncodeError, Message, supported_api_versions
from replog.protocol.messages import (
    ApiVersionsResponse,
    DeleteTopicsRequest,
    EpochEndOffset,
    FetchPartition,
    FetchRequest,
    FetchResponse,
    FetchResponsePartition,
    FetchResponseTopic,
    FetchTopic,
    ListOffsetsPartitionResponse,
    ListOffsetsResponse,
    ListOffsetsTopicResponse,
    MetadataRequest,
    MetadataResponse,
    MetadataResponseTopic,
)
from replog.protocol.primitives import ZERO_UUID
from replog.protocol.schema import ArrayOf, FieldSpec, Scalar

from .strategies import all_versions, case_id, message_strategy

CASES = all_versions()


@pytest.mark.parametrize("case", CASES, ids=[case_id(c) for c in CASES])
@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_message_round_trips_at_every_served_version(
    case: tuple[type[Message], int], data: st.DataObject
) -> None:
    cls, version = case
    message = data.draw(message_strategy(cls, version))
    encoded = message.encode(version)
    decoded = cls.decode(encoded, version)
    assert decoded == message
    assert decoded.encode(version) == encoded


def test_served_versions_are_the_advertised_ones() -> None:
    advertised = {v.api_key: (v.min_version, v.max_version) for v in supported_api_versions()}
    assert advertised == {
        0: (3, 9),  # Produce
        1: (4, 12),  # Fetch
        2: (1, 7),  # ListOffsets
        3: (0, 12),  # Metadata
        8: (2, 8),  # OffsetCommit (v0-v1 removed in Kafka 4)
        9: (1, 8),  # OffsetFetch (v0 removed in Kafka 4)
        10: (0, 4),  # FindCoordinator
        11: (0, 9),  # JoinGroup
        12: (0, 4),  # Heartbeat
        13: (0, 5),  # LeaveGroup
        14: (0, 5),  # SyncGroup
        15: (0, 5),  # DescribeGroups
        16: (0, 4),  # ListGroups
        18: (0, 3),  # ApiVersions
        19: (2, 7),  # CreateTopics
        20: (1, 6),  # DeleteTopics
        22: (0, 5),  # InitProducerId
        21: (0, 2),  # DeleteRecords
        23: (2, 4),  # OffsetForLeaderEpoch
        32: (1, 4),  # DescribeConfigs
        33: (0, 2),  # AlterConfigs
        35: (1, 5),  # DescribeLogDirs
        37: (0, 3),  # CreatePartitions
        43: (0, 2),  # ElectLeaders
        44: (0, 1),  # IncrementalAlterConfigs
        45: (0, 1),  # AlterPartitionReassignments
        46: (0, 0),  # ListPartitionReassignments
        60: (0, 2),  # DescribeCluster
        42: (0, 2),  # DeleteGroups
        47: (0, 0),  # OffsetDelete
    }


#: APIs Kafka made flexible from their first version: they have no rigid version to serve
FLEXIBLE_FROM_THE_START = {"AlterPartitionReassignments", "ListPartitionReassignments",
                           "DescribeCluster"}  # fmt: skip
#: APIs Kafka never gave a flexible version (OffsetDelete: v0 only, "flexibleVersions": "none")
RIGID_ONLY = {"OffsetDelete"}


def test_every_api_has_a_rigid_and_a_flexible_version_where_kafka_has_both() -> None:
    for spec in APIS.values():
        info = spec.info
        if info.name in FLEXIBLE_FROM_THE_START:
            assert info.min_version == info.flexible_from == 0, info.name
        elif info.name in RIGID_ONLY:
            assert info.max_version < info.flexible_from, info.name
        else:
            assert info.min_version < info.flexible_from <= info.max_version, info.name


def _walk_specs(cls: type[Any]) -> list[FieldSpec]:
    specs = []
    for attribute in attrs.fields(cls):
        spec: FieldSpec = attribute.metadata["wire"]
        specs.append(spec)
        item = spec.type.item if isinstance(spec.type, ArrayOf) else spec.type
        if isinstance(item, type):
            specs.extend(_walk_specs(item))
    return specs


def test_tags_only_appear_in_flexible_versions() -> None:
    for spec in APIS.values():
        for cls in (spec.request, spec.response):
            for field_spec in _walk_specs(cls):
                if field_spec.tag is not None:
                    assert field_spec.versions.low >= spec.info.flexible_from


def test_fields_absent_from_a_version_decode_to_their_defaults() -> None:
    request = FetchRequest(
        replica_id=3,
        max_wait_ms=500,
        min_bytes=1,
        topics=[FetchTopic(topic="t", partitions=[FetchPartition(partition=0, fetch_offset=5)])],
    )
    decoded = FetchRequest.decode(request.encode(4), 4)
    assert decoded.session_epoch == -1
    assert decoded.topics[0].partitions[0].current_leader_epoch == -1
    assert decoded.topics[0].partitions[0].log_start_offset == -1
    assert decoded == request


def test_ignorable_response_fields_are_dropped_in_versions_without_them() -> None:
    topic = MetadataResponseTopic(name="t", topic_id=uuid.uuid4(), is_internal=True)
    response = MetadataResponse(controller_id=2, topics=[topic])
    decoded = MetadataResponse.decode(response.encode(0), 0)
    assert decoded.controller_id == -1
    assert decoded.topics[0].topic_id == ZERO_UUID and not decoded.topics[0].is_internal


def test_a_request_refuses_even_an_ignorable_field_its_version_lacks() -> None:
    # DeleteTopics v6 names topics in ``topics``; ``topic_names`` (v0-5) is ignorable in Kafka's
    # schema, and dropping it silently sent an empty deletion.
    request = DeleteTopicsRequest(topic_names=["a"], timeout_ms=1000)
    assert DeleteTopicsRequest.decode(request.encode(5), 5) == request
    with pytest.raises(EncodeError, match=r"topic_names is not in version 6.*request"):
        request.encode(6)
    with pytest.raises(EncodeError, match="rack_id"):
        FetchRequest(rack_id="rack-a", topics=[]).encode(10)


def test_non_ignorable_field_set_in_a_version_without_it_is_an_encode_error() -> None:
    partition = FetchPartition(partition=0, fetch_offset=5, last_fetched_epoch=7)
    request = FetchRequest(topics=[FetchTopic(topic="t", partitions=[partition])])
    assert FetchRequest.decode(request.encode(12), 12) == request
    with pytest.raises(EncodeError, match="last_fetched_epoch"):
        request.encode(11)
    with pytest.raises(EncodeError, match="allow_auto_topic_creation"):
        MetadataRequest(topics=None, allow_auto_topic_creation=False).encode(3)


def test_a_response_refuses_a_non_ignorable_field_its_version_lacks() -> None:
    # ListOffsets v1-v3 have no leader epoch, and Kafka's schema does not let it be dropped:
    # the broker must leave it out for those versions (as Kafka's handler does).
    part = ListOffsetsPartitionResponse(partition_index=0, offset=5, leader_epoch=3)
    response = ListOffsetsResponse(topics=[ListOffsetsTopicResponse(name="t", partitions=[part])])
    assert ListOffsetsResponse.decode(response.encode(4), 4) == response
    with pytest.raises(EncodeError, match="leader_epoch"):
        response.encode(3)


def test_diverging_epoch_round_trips_as_a_tagged_field_at_v12() -> None:
    partition = FetchResponsePartition(
        partition_index=2,
        high_watermark=10,
        diverging_epoch=EpochEndOffset(epoch=4, end_offset=17),
        records=b"",
    )
    response = FetchResponse(responses=[FetchResponseTopic(topic="t", partitions=[partition])])
    decoded = FetchResponse.decode(response.encode(12), 12)
    assert decoded.responses[0].partitions[0].diverging_epoch == EpochEndOffset(
        epoch=4, end_offset=17
    )
    assert decoded.responses[0].partitions[0].current_leader is None


def test_decoded_records_are_zero_copy_views_of_the_frame() -> None:
    partition = FetchResponsePartition(partition_index=0, records=b"batch-bytes")
    response = FetchResponse(responses=[FetchResponseTopic(topic="t", partitions=[partition])])
    records = FetchResponse.decode(response.encode(11), 11).responses[0].partitions[0].records
    assert isinstance(records, memoryview)
    assert bytes(records) == b"batch-bytes"


def test_api_versions_v3_response_keeps_tagged_feature_fields() -> None:
    from replog.protocol.messages import SupportedFeatureKey

    response = ApiVersionsResponse(
        api_keys=supported_api_versions(),
        supported_features=[SupportedFeatureKey(name="metadata.version", max_version=20)],
        finalized_features_epoch=9,
        zk_migration_ready=True,
    )
    assert ApiVersionsResponse.decode(response.encode(3), 3) == response


def test_schema_scalar_defaults_are_kafkas() -> None:
    request = FetchRequest()
    assert request.max_bytes == 0x7FFFFFFF
    assert request.replica_id == -1
    assert FetchResponsePartition().preferred_read_replica == -1
    assert Scalar.RECORDS.value == "records"
