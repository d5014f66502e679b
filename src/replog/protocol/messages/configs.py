"""DescribeConfigs (key 32): the effective configs of topics.

Fields follow Kafka's DescribeConfigsRequest/Response.json. Versions 1-4 are served (v4 is
flexible; v1 added synonyms and ``config_source``, v3 ``config_type`` and documentation); v0,
whose entries carry ``is_default`` instead of a source, is not.
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

DESCRIBE_CONFIGS = ApiInfo(32, "DescribeConfigs", min_version=1, max_version=4, flexible_from=4)

RESOURCE_TOPIC = 2
RESOURCE_BROKER = 4
#: ``config_source`` values (Kafka's ConfigSource)
CONFIG_SOURCE_TOPIC = 1  # DYNAMIC_TOPIC_CONFIG: set on the topic
CONFIG_SOURCE_STATIC_BROKER = 4  # STATIC_BROKER_CONFIG: the broker's config file
CONFIG_SOURCE_DEFAULT = 5  # DEFAULT_CONFIG


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
