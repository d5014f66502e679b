"""ApiVersions (key 18), Metadata (key 3) and DescribeCluster (key 60): how a client learns what
the broker speaks, where partitions live and which brokers make up the cluster.

Field order, version ranges, nullability and tags follow Kafka's ApiVersionsRequest/Response.json,
MetadataRequest/Response.json and DescribeClusterRequest/Response.json. Quirks worth knowing:

- ApiVersions responses always use response header v0 (no tagged fields), even at v3, so a client
  can read the answer to a version it does not know (see ``framing``).
- Metadata v0: an empty topic list means "all topics"; v1+: null means all, empty means none.
- DescribeCluster is flexible from v0; v1 adds ``endpoint_type``, v2 fenced brokers.
"""

# `field(...)` is an attrs field specifier (schema.field wraps attrs.field); ruff cannot tell.
# ruff: noqa: RUF009

from __future__ import annotations

import uuid

import attrs

from replog.protocol.primitives import ZERO_UUID
from replog.protocol.schema import (
    BOOL,
    INT8,
    INT16,
    INT32,
    INT64,
    STRING,
    UUID,
    ApiInfo,
    Request,
    Response,
    array,
    field,
)

__all__ = [
    "API_VERSIONS",
    "DESCRIBE_CLUSTER",
    "ENDPOINT_TYPE_BROKERS",
    "METADATA",
    "ApiVersion",
    "ApiVersionsRequest",
    "ApiVersionsResponse",
    "DescribeClusterBroker",
    "DescribeClusterRequest",
    "DescribeClusterResponse",
    "FinalizedFeatureKey",
    "MetadataRequest",
    "MetadataRequestTopic",
    "MetadataResponse",
    "MetadataResponseBroker",
    "MetadataResponsePartition",
    "MetadataResponseTopic",
    "SupportedFeatureKey",
]

API_VERSIONS = ApiInfo(18, "ApiVersions", min_version=0, max_version=3, flexible_from=3)
METADATA = ApiInfo(3, "Metadata", min_version=0, max_version=12, flexible_from=9)
DESCRIBE_CLUSTER = ApiInfo(60, "DescribeCluster", min_version=0, max_version=2, flexible_from=0)
ENDPOINT_TYPE_BROKERS = 1
"""DescribeCluster ``endpoint_type``: brokers (2 would be controllers, which replog has none of
apart from its brokers)."""

# The bitfield value meaning "authorized operations were not requested" (Integer.MIN_VALUE).
AUTHORIZED_OPERATIONS_OMITTED = -(2**31)


@attrs.frozen(kw_only=True)
class ApiVersionsRequest(Request):
    """What the client is; v0-v2 have an empty body."""

    API = API_VERSIONS

    client_software_name: str = field(STRING, "3+", ignorable=True)
    client_software_version: str = field(STRING, "3+", ignorable=True)


@attrs.frozen(kw_only=True)
class ApiVersion:
    """One API the broker serves and its inclusive version range."""

    api_key: int = field(INT16, "0+")
    min_version: int = field(INT16, "0+")
    max_version: int = field(INT16, "0+")


@attrs.frozen(kw_only=True)
class SupportedFeatureKey:
    """A feature flag the broker supports (KIP-584)."""

    name: str = field(STRING, "3+")
    min_version: int = field(INT16, "3+")
    max_version: int = field(INT16, "3+")


@attrs.frozen(kw_only=True)
class FinalizedFeatureKey:
    """A cluster-wide finalized feature level (KIP-584)."""

    name: str = field(STRING, "3+")
    max_version_level: int = field(INT16, "3+")
    min_version_level: int = field(INT16, "3+")


@attrs.frozen(kw_only=True)
class ApiVersionsResponse(Response):
    """The APIs and versions the broker serves."""

    API = API_VERSIONS

    error_code: int = field(INT16, "0+")
    api_keys: list[ApiVersion] = field(array(ApiVersion), "0+")
    throttle_time_ms: int = field(INT32, "1+", ignorable=True)
    supported_features: list[SupportedFeatureKey] = field(
        array(SupportedFeatureKey), "3+", tag=0, ignorable=True
    )
    finalized_features_epoch: int = field(INT64, "3+", tag=1, default=-1, ignorable=True)
    finalized_features: list[FinalizedFeatureKey] = field(
        array(FinalizedFeatureKey), "3+", tag=2, ignorable=True
    )
    zk_migration_ready: bool = field(BOOL, "3+", tag=3, ignorable=True)


@attrs.frozen(kw_only=True)
class MetadataRequestTopic:
    """A topic to describe (by name; v10+ also carry a topic id, zero unless v12 ids are used)."""

    topic_id: uuid.UUID = field(UUID, "10+", ignorable=True)
    name: str | None = field(STRING, "0+", nullable="10+")


@attrs.frozen(kw_only=True)
class MetadataRequest(Request):
    """Which topics to describe. ``topics=None`` (v1+) asks for all of them."""

    API = METADATA

    topics: list[MetadataRequestTopic] | None = field(
        array(MetadataRequestTopic), "0+", nullable="1+"
    )
    allow_auto_topic_creation: bool = field(BOOL, "4+", default=True)
    include_cluster_authorized_operations: bool = field(BOOL, "8-10")
    include_topic_authorized_operations: bool = field(BOOL, "8+")


@attrs.frozen(kw_only=True)
class MetadataResponseBroker:
    """One broker's address."""

    node_id: int = field(INT32, "0+")
    host: str = field(STRING, "0+")
    port: int = field(INT32, "0+")
    rack: str | None = field(STRING, "1+", nullable="1+", default=None, ignorable=True)


@attrs.frozen(kw_only=True)
class MetadataResponsePartition:
    """One partition's leader, replicas and ISR."""

    error_code: int = field(INT16, "0+")
    partition_index: int = field(INT32, "0+")
    leader_id: int = field(INT32, "0+")
    leader_epoch: int = field(INT32, "7+", default=-1, ignorable=True)
    replica_nodes: list[int] = field(array(INT32), "0+")
    isr_nodes: list[int] = field(array(INT32), "0+")
    offline_replicas: list[int] = field(array(INT32), "5+", ignorable=True)


@attrs.frozen(kw_only=True)
class MetadataResponseTopic:
    """One topic and its partitions."""

    error_code: int = field(INT16, "0+")
    name: str | None = field(STRING, "0+", nullable="12+")
    topic_id: uuid.UUID = field(UUID, "10+", default=ZERO_UUID, ignorable=True)
    is_internal: bool = field(BOOL, "1+", ignorable=True)
    partitions: list[MetadataResponsePartition] = field(array(MetadataResponsePartition), "0+")
    topic_authorized_operations: int = field(INT32, "8+", default=AUTHORIZED_OPERATIONS_OMITTED)


@attrs.frozen(kw_only=True)
class MetadataResponse(Response):
    """Brokers, controller and topic layout of the cluster."""

    API = METADATA

    throttle_time_ms: int = field(INT32, "3+", ignorable=True)
    brokers: list[MetadataResponseBroker] = field(array(MetadataResponseBroker), "0+")
    cluster_id: str | None = field(STRING, "2+", nullable="2+", default=None, ignorable=True)
    controller_id: int = field(INT32, "1+", default=-1, ignorable=True)
    topics: list[MetadataResponseTopic] = field(array(MetadataResponseTopic), "0+")
    cluster_authorized_operations: int = field(INT32, "8-10", default=AUTHORIZED_OPERATIONS_OMITTED)


@attrs.frozen(kw_only=True)
class DescribeClusterRequest(Request):
    """Describe the cluster's brokers (fenced ones too with ``include_fenced_brokers``)."""

    API = DESCRIBE_CLUSTER

    include_cluster_authorized_operations: bool = field(BOOL, "0+")
    endpoint_type: int = field(INT8, "1+", default=ENDPOINT_TYPE_BROKERS)
    include_fenced_brokers: bool = field(BOOL, "2+")


@attrs.frozen(kw_only=True)
class DescribeClusterBroker:
    """One broker's address (and, v2+, whether it is fenced)."""

    broker_id: int = field(INT32, "0+")
    host: str = field(STRING, "0+")
    port: int = field(INT32, "0+")
    rack: str | None = field(STRING, "0+", nullable="0+", default=None)
    is_fenced: bool = field(BOOL, "2+")


@attrs.frozen(kw_only=True)
class DescribeClusterResponse(Response):
    """The cluster id, the controller and the brokers."""

    API = DESCRIBE_CLUSTER

    throttle_time_ms: int = field(INT32, "0+")
    error_code: int = field(INT16, "0+")
    error_message: str | None = field(STRING, "0+", nullable="0+", default=None)
    endpoint_type: int = field(INT8, "1+", default=ENDPOINT_TYPE_BROKERS)
    cluster_id: str = field(STRING, "0+")
    controller_id: int = field(INT32, "0+", default=-1)
    brokers: list[DescribeClusterBroker] = field(array(DescribeClusterBroker), "0+")
    cluster_authorized_operations: int = field(INT32, "0+", default=AUTHORIZED_OPERATIONS_OMITTED)
