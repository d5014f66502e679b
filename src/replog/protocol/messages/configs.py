"""DescribeConfigs (key 32), AlterConfigs (key 33) and IncrementalAlterConfigs (key 44): the
configs of topics and brokers, read and changed.

Fields follow Kafka's DescribeConfigsRequest/Response.json, AlterConfigsRequest/Response.json and
IncrementalAlterConfigsRequest/Response.json.

- DescribeConfigs v1-4 (v4 is flexible; v1 added synonyms and ``config_source``, v3
  ``config_type`` and documentation); v0, whose entries carry ``is_default`` instead of a
  source, is not served.
- AlterConfigs v0-2 (v2 is flexible) replaces a resource's whole set of configs: a key left out
  goes back to its default.
- IncrementalAlterConfigs v0-1 (v1 is flexible) changes the keys it names, each with an
  operation (``OP_SET``, ``OP_DELETE``, ``OP_APPEND``, ``OP_SUBTRACT``).
"""

# `field(...)` is an attrs field specifier (schema.field wraps attrs.field); ruff cannot tell.
# ruff: noqa: RUF009

from __future__ import annotations

import attrs

from replog.protocol.schema import (
    BOOL,
    INT8,
    INT16,
    INT32,
    STRING,
    ApiInfo,
    Request,
    Response,
    array,
    field,
)

__all__ = [
    "ALTER_CONFIGS",
    "CONFIG_SOURCE_DEFAULT",
    "CONFIG_SOURCE_DYNAMIC_BROKER",
    "CONFIG_SOURCE_DYNAMIC_DEFAULT_BROKER",
    "CONFIG_SOURCE_STATIC_BROKER",
    "CONFIG_SOURCE_TOPIC",
    "DESCRIBE_CONFIGS",
    "INCREMENTAL_ALTER_CONFIGS",
    "OP_APPEND",
    "OP_DELETE",
    "OP_SET",
    "OP_SUBTRACT",
    "RESOURCE_BROKER",
    "RESOURCE_TOPIC",
    "AlterConfigsRequest",
    "AlterConfigsResource",
    "AlterConfigsResourceResponse",
    "AlterConfigsResponse",
    "AlterableConfig",
    "DescribeConfigsRequest",
    "DescribeConfigsResource",
    "DescribeConfigsResourceResult",
    "DescribeConfigsResponse",
    "DescribeConfigsResult",
    "DescribeConfigsSynonym",
    "IncrementalAlterConfigsRequest",
    "IncrementalAlterConfigsResource",
    "IncrementalAlterConfigsResponse",
    "IncrementalAlterableConfig",
]

DESCRIBE_CONFIGS = ApiInfo(32, "DescribeConfigs", min_version=1, max_version=4, flexible_from=4)
ALTER_CONFIGS = ApiInfo(33, "AlterConfigs", min_version=0, max_version=2, flexible_from=2)
INCREMENTAL_ALTER_CONFIGS = ApiInfo(
    44, "IncrementalAlterConfigs", min_version=0, max_version=1, flexible_from=1
)

RESOURCE_TOPIC = 2
RESOURCE_BROKER = 4
#: ``config_source`` values (Kafka's ConfigSource)
CONFIG_SOURCE_TOPIC = 1  # DYNAMIC_TOPIC_CONFIG: set on the topic
CONFIG_SOURCE_DYNAMIC_BROKER = 2  # DYNAMIC_BROKER_CONFIG: set on this broker at run time
CONFIG_SOURCE_DYNAMIC_DEFAULT_BROKER = 3  # DYNAMIC_DEFAULT_BROKER_CONFIG: the cluster default
CONFIG_SOURCE_STATIC_BROKER = 4  # STATIC_BROKER_CONFIG: the broker's config file
CONFIG_SOURCE_DEFAULT = 5  # DEFAULT_CONFIG
#: IncrementalAlterConfigs ``config_operation`` values (Kafka's AlterConfigOp.OpType)
OP_SET = 0
OP_DELETE = 1
OP_APPEND = 2
OP_SUBTRACT = 3


@attrs.frozen(kw_only=True)
class DescribeConfigsResource:
    """A resource to describe; ``configuration_keys`` None asks for every config."""

    resource_type: int = field(INT8, "0+")
    resource_name: str = field(STRING, "0+")
    configuration_keys: list[str] | None = field(array(STRING), "0+", nullable="0+")


@attrs.frozen(kw_only=True)
class DescribeConfigsRequest(Request):
    """Describe the configs of ``resources``."""

    API = DESCRIBE_CONFIGS

    resources: list[DescribeConfigsResource] = field(array(DescribeConfigsResource), "0+")
    include_synonyms: bool = field(BOOL, "1+")
    include_documentation: bool = field(BOOL, "3+")


@attrs.frozen(kw_only=True)
class DescribeConfigsSynonym:
    """Another source of the same setting (e.g. the broker default under a topic override)."""

    name: str = field(STRING, "1+")
    value: str | None = field(STRING, "1+", nullable="1+")
    source: int = field(INT8, "1+")


@attrs.frozen(kw_only=True)
class DescribeConfigsResourceResult:
    """One config: its effective value and where it comes from."""

    name: str = field(STRING, "0+")
    value: str | None = field(STRING, "0+", nullable="0+")
    read_only: bool = field(BOOL, "0+")
    config_source: int = field(INT8, "1+", default=-1, ignorable=True)
    is_sensitive: bool = field(BOOL, "0+")
    synonyms: list[DescribeConfigsSynonym] = field(
        array(DescribeConfigsSynonym), "1+", ignorable=True
    )
    config_type: int = field(INT8, "3+", default=0, ignorable=True)
    documentation: str | None = field(STRING, "3+", nullable="0+", ignorable=True)


@attrs.frozen(kw_only=True)
class DescribeConfigsResult:
    """The configs of one resource, or its error."""

    error_code: int = field(INT16, "0+")
    error_message: str | None = field(STRING, "0+", nullable="0+")
    resource_type: int = field(INT8, "0+")
    resource_name: str = field(STRING, "0+")
    configs: list[DescribeConfigsResourceResult] = field(array(DescribeConfigsResourceResult), "0+")


@attrs.frozen(kw_only=True)
class DescribeConfigsResponse(Response):
    """One result per requested resource."""

    API = DESCRIBE_CONFIGS

    throttle_time_ms: int = field(INT32, "0+", default=0)
    results: list[DescribeConfigsResult] = field(array(DescribeConfigsResult), "0+")


@attrs.frozen(kw_only=True)
class AlterableConfig:
    """One config of an AlterConfigs resource (null value: the default)."""

    name: str = field(STRING, "0+")
    value: str | None = field(STRING, "0+", nullable="0+")


@attrs.frozen(kw_only=True)
class AlterConfigsResource:
    """The whole new set of configs of one resource."""

    resource_type: int = field(INT8, "0+")
    resource_name: str = field(STRING, "0+")
    configs: list[AlterableConfig] = field(array(AlterableConfig), "0+")


@attrs.frozen(kw_only=True)
class AlterConfigsRequest(Request):
    """Replace the configs of ``resources``; ``validate_only`` checks without changing."""

    API = ALTER_CONFIGS

    resources: list[AlterConfigsResource] = field(array(AlterConfigsResource), "0+")
    validate_only: bool = field(BOOL, "0+")


@attrs.frozen(kw_only=True)
class AlterConfigsResourceResponse:
    """The outcome for one resource (AlterConfigs and IncrementalAlterConfigs alike)."""

    error_code: int = field(INT16, "0+")
    error_message: str | None = field(STRING, "0+", nullable="0+")
    resource_type: int = field(INT8, "0+")
    resource_name: str = field(STRING, "0+")


@attrs.frozen(kw_only=True)
class AlterConfigsResponse(Response):
    """One result per requested resource."""

    API = ALTER_CONFIGS

    throttle_time_ms: int = field(INT32, "0+")
    responses: list[AlterConfigsResourceResponse] = field(array(AlterConfigsResourceResponse), "0+")


@attrs.frozen(kw_only=True)
class IncrementalAlterableConfig:
    """One change: ``config_operation`` (``OP_*``) applied to ``name`` with ``value``."""

    name: str = field(STRING, "0+")
    config_operation: int = field(INT8, "0+")
    value: str | None = field(STRING, "0+", nullable="0+")


@attrs.frozen(kw_only=True)
class IncrementalAlterConfigsResource:
    """The changes to the configs of one resource."""

    resource_type: int = field(INT8, "0+")
    resource_name: str = field(STRING, "0+")
    configs: list[IncrementalAlterableConfig] = field(array(IncrementalAlterableConfig), "0+")


@attrs.frozen(kw_only=True)
class IncrementalAlterConfigsRequest(Request):
    """Change the named configs of ``resources``; ``validate_only`` checks without changing."""

    API = INCREMENTAL_ALTER_CONFIGS

    resources: list[IncrementalAlterConfigsResource] = field(
        array(IncrementalAlterConfigsResource), "0+"
    )
    validate_only: bool = field(BOOL, "0+")


@attrs.frozen(kw_only=True)
class IncrementalAlterConfigsResponse(Response):
    """One result per requested resource."""

    API = INCREMENTAL_ALTER_CONFIGS

    throttle_time_ms: int = field(INT32, "0+")
    responses: list[AlterConfigsResourceResponse] = field(array(AlterConfigsResourceResponse), "0+")
