"""Request and response schemas of the Kafka APIs replog serves, and their registry.

``APIS`` maps each api key to an ``ApiSpec`` (the ``ApiInfo`` plus the request and response
classes). ``supported_api_versions()`` is what an ApiVersions response advertises.
"""

from __future__ import annotations

import attrs

from replog.protocol.messages.admin import (
    CREATE_PARTITIONS,
    CREATE_TOPICS,
    DELETE_TOPICS,
    CreatableReplicaAssignment,
    CreatableTopic,
    CreatableTopicConfig,
    CreatableTopicConfigs,
    CreatableTopicResult,
    CreatePartitionsAssignment,
    CreatePartitionsRequest,
    CreatePartitionsResponse,
    CreatePartitionsTopic,
    CreatePartitionsTopicResult,
    CreateTopicsRequest,
    CreateTopicsResponse,
    DeletableTopicResult,
    DeleteTopicsRequest,
    DeleteTopicsResponse,
    DeleteTopicState,
)
from replog.protocol.messages.cluster import (
    API_VERSIONS,
    METADATA,
    ApiVersion,
    ApiVersionsRequest,
    ApiVersionsResponse,
    FinalizedFeatureKey,
    MetadataRequest,
    MetadataRequestTopic,
    MetadataResponse,
    MetadataResponseBroker,
    MetadataResponsePartition,
    MetadataResponseTopic,
    SupportedFeatureKey,
)
from replog.protocol.messages.configs import (
    CONFIG_SOURCE_DEFAULT,
    CONFIG_SOURCE_STATIC_BROKER,
    CONFIG_SOURCE_TOPIC,
    DESCRIBE_CONFIGS,
    RESOURCE_BROKER,
    RESOURCE_TOPIC,
    DescribeConfigsRequest,
    DescribeConfigsResource,
    DescribeConfigsResourceResult,
    DescribeConfigsResponse,
    DescribeConfigsResult,
    DescribeConfigsSynonym,
)
from replog.protocol.messages.fetch import (
    FETCH,
    AbortedTransaction,
    EpochEndOffset,
    FetchPartition,
    FetchRequest,
    FetchResponse,
    FetchResponsePartition,
    FetchResponseTopic,
    FetchTopic,
    ForgottenTopic,
    LeaderIdAndEpoch,
    SnapshotId,
)
from replog.protocol.messages.offsets import (
    EARLIEST_TIMESTAMP,
    LATEST_TIMESTAMP,
    LIST_OFFSETS,
    MAX_TIMESTAMP,
    OFFSET_FOR_LEADER_EPOCH,
    EpochEndOffsetResult,
    ListOffsetsPartition,
    ListOffsetsPartitionResponse,
    ListOffsetsRequest,
    ListOffsetsResponse,
    ListOffsetsTopic,
    ListOffsetsTopicResponse,
    OffsetForLeaderEpochRequest,
    OffsetForLeaderEpochResponse,
    OffsetForLeaderPartition,
    OffsetForLeaderTopic,
    OffsetForLeaderTopicResult,
)
from replog.protocol.messages.produce import (
    PRODUCE,
    BatchIndexAndErrorMessage,
    PartitionProduceData,
    PartitionProduceResponse,
    ProduceRequest,
    ProduceResponse,
    TopicProduceData,
    TopicProduceResponse,
)
from replog.protocol.schema import ApiInfo, Request, Response

__all__ = [
    "API_VERSIONS",
    "APIS",
    "CREATE_PARTITIONS",
    "CREATE_TOPICS",
    "DELETE_TOPICS",
    "EARLIEST_TIMESTAMP",
    "FETCH",
    "LATEST_TIMESTAMP",
    "LIST_OFFSETS",
    "MAX_TIMESTAMP",
    "METADATA",
    "OFFSET_FOR_LEADER_EPOCH",
    "PRODUCE",
    "AbortedTransaction",
    "ApiSpec",
    "ApiVersion",
    "ApiVersionsRequest",
    "ApiVersionsResponse",
    "BatchIndexAndErrorMessage",
    "CreatableReplicaAssignment",
    "CreatableTopic",
    "CreatableTopicConfig",
    "CreatableTopicConfigs",
    "CreatableTopicResult",
    "CreatePartitionsAssignment",
    "CreatePartitionsRequest",
    "CreatePartitionsResponse",
    "CreatePartitionsTopic",
    "CreatePartitionsTopicResult",
    "CreateTopicsRequest",
    "CreateTopicsResponse",
    "DeletableTopicResult",
    "DeleteTopicState",
    "DeleteTopicsRequest",
    "DeleteTopicsResponse",
    "EpochEndOffset",
    "EpochEndOffsetResult",
    "FetchPartition",
    "FetchRequest",
    "FetchResponse",
    "FetchResponsePartition",
    "FetchResponseTopic",
    "FetchTopic",
    "FinalizedFeatureKey",
    "ForgottenTopic",
    "LeaderIdAndEpoch",
    "ListOffsetsPartition",
    "ListOffsetsPartitionResponse",
    "ListOffsetsRequest",
    "ListOffsetsResponse",
    "ListOffsetsTopic",
    "ListOffsetsTopicResponse",
    "MetadataRequest",
    "MetadataRequestTopic",
    "MetadataResponse",
    "MetadataResponseBroker",
    "MetadataResponsePartition",
    "MetadataResponseTopic",
    "OffsetForLeaderEpochRequest",
    "OffsetForLeaderEpochResponse",
    "OffsetForLeaderPartition",
    "OffsetForLeaderTopic",
    "OffsetForLeaderTopicResult",
    "PartitionProduceData",
    "PartitionProduceResponse",
    "ProduceRequest",
    "ProduceResponse",
    "SnapshotId",
    "SupportedFeatureKey",
    "TopicProduceData",
    "TopicProduceResponse",
    "supported_api_versions",
    "CONFIG_SOURCE_DEFAULT",
    "CONFIG_SOURCE_STATIC_BROKER",
    "CONFIG_SOURCE_TOPIC",
    "DESCRIBE_CONFIGS",
    "RESOURCE_BROKER",
    "RESOURCE_TOPIC",
    "DescribeConfigsRequest",
    "DescribeConfigsResource",
    "DescribeConfigsResourceResult",
    "DescribeConfigsResponse",
    "DescribeConfigsResult",
    "DescribeConfigsSynonym",
]


@attrs.frozen
class ApiSpec:
    """One served API: its ``ApiInfo`` and its request and response body classes."""

    info: ApiInfo
    request: type[Request]
    response: type[Response]


APIS: dict[int, ApiSpec] = {
    spec.info.api_key: spec
    for spec in (
        ApiSpec(PRODUCE, ProduceRequest, ProduceResponse),
        ApiSpec(FETCH, FetchRequest, FetchResponse),
        ApiSpec(LIST_OFFSETS, ListOffsetsRequest, ListOffsetsResponse),
        ApiSpec(METADATA, MetadataRequest, MetadataResponse),
        ApiSpec(API_VERSIONS, ApiVersionsRequest, ApiVersionsResponse),
        ApiSpec(CREATE_TOPICS, CreateTopicsRequest, CreateTopicsResponse),
        ApiSpec(DELETE_TOPICS, DeleteTopicsRequest, DeleteTopicsResponse),
        ApiSpec(OFFSET_FOR_LEADER_EPOCH, OffsetForLeaderEpochRequest, OffsetForLeaderEpochResponse),
        ApiSpec(CREATE_PARTITIONS, CreatePartitionsRequest, CreatePartitionsResponse),
        ApiSpec(DESCRIBE_CONFIGS, DescribeConfigsRequest, DescribeConfigsResponse),
    )
}


def supported_api_versions() -> list[ApiVersion]:
    """The ``api_keys`` list of an ApiVersions response: every served API, by key."""
    return [
        ApiVersion(
            api_key=key, min_version=spec.info.min_version, max_version=spec.info.max_version
        )
        for key, spec in sorted(APIS.items())
    ]
