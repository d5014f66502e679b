"""DescribeConfigs (key 32): a topic's configs as they apply -- the topic's own (source TOPIC)
over this broker's defaults (STATIC_BROKER for its config file's settings, DEFAULT for built-in
ones), from ``replog.topic_config``."""

from __future__ import annotations

from replog.broker.requests.base import (
    Handler,
    Outcome,
    Reply,
    RequestContext,
    RequestServices,
)
from replog.errors import ErrorCode
from replog.protocol import messages as m
from replog.protocol.schema import Message
from replog.topic_config import ConfigSource, EffectiveConfig, effective_topic_configs

__all__ = ["HANDLERS", "handle_describe_configs"]

_WIRE_CONFIG_SOURCE = {
    ConfigSource.TOPIC: m.CONFIG_SOURCE_TOPIC,
    ConfigSource.BROKER: m.CONFIG_SOURCE_STATIC_BROKER,
    ConfigSource.DEFAULT: m.CONFIG_SOURCE_DEFAULT,
}


def handle_describe_configs(
    ctx: RequestContext, body: m.DescribeConfigsRequest, services: RequestServices
) -> Outcome:
    """See the module docstring; other resource types are INVALID_REQUEST."""
    return Reply(
        m.DescribeConfigsResponse(
            results=[_describe(services, body, resource) for resource in body.resources]
        )
    )


def _failed(
    resource: m.DescribeConfigsResource, code: ErrorCode, message: str
) -> m.DescribeConfigsResult:
    return m.DescribeConfigsResult(
        error_code=int(code),
        error_message=message,
        resource_type=resource.resource_type,
        resource_name=resource.resource_name,
    )


def _describe(
    services: RequestServices, body: m.DescribeConfigsRequest, resource: m.DescribeConfigsResource
) -> m.DescribeConfigsResult:
    name = resource.resource_name
    if resource.resource_type != m.RESOURCE_TOPIC:
        return _failed(resource, ErrorCode.INVALID_REQUEST, "replog describes topic configs only")
    assignment = services.topics.get(name)
    if assignment is None:
        return _failed(resource, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"unknown topic {name!r}")
    wanted = None if resource.configuration_keys is None else set(resource.configuration_keys)
    config = services.config
    entries = effective_topic_configs(
        assignment.config_map,
        log_defaults=config.log,
        min_insync_replicas=config.default_min_insync_replicas,
        unclean_leader_election=config.unclean_leader_election_enable,
    )
    return m.DescribeConfigsResult(
        error_code=0,
        resource_type=resource.resource_type,
        resource_name=name,
        configs=[
            _entry(entry, body.include_synonyms)
            for entry in entries
            if wanted is None or entry.name in wanted
        ],
    )


def _entry(entry: EffectiveConfig, synonyms: bool) -> m.DescribeConfigsResourceResult:
    source = _WIRE_CONFIG_SOURCE[entry.source]
    return m.DescribeConfigsResourceResult(
        name=entry.name,
        value=entry.value,
        read_only=False,
        config_source=source,
        is_sensitive=False,
        synonyms=(
            [m.DescribeConfigsSynonym(name=entry.name, value=entry.value, source=source)]
            if synonyms
            else []
        ),
        config_type=entry.config_type,
    )


HANDLERS: dict[type[Message], Handler] = {m.DescribeConfigsRequest: handle_describe_configs}
