"""DescribeConfigs (key 32): the configs of topics and brokers as they apply, each with its
source (DYNAMIC_TOPIC_CONFIG, DYNAMIC_BROKER_CONFIG, DYNAMIC_DEFAULT_BROKER_CONFIG,
STATIC_BROKER_CONFIG, DEFAULT_CONFIG), read-only flag and, when asked, synonyms, resolved by
``replog.config_layers`` as Kafka resolves them.

A broker resource is this broker (its id; other ids are INVALID_REQUEST, as in Kafka: a client
asks each broker about itself) or "" (the cluster-wide dynamic default, which lists only what
it sets).
"""

from __future__ import annotations

from replog.broker.driver.dynamic_config import BROKER_CONFIG_TYPES, BROKER_KEYS, broker_layers
from replog.broker.driver.requests.base import (
    Handler,
    Outcome,
    Reply,
    RequestContext,
    RequestServices,
)
from replog.config_layers import EffectiveConfig, describe_broker, describe_topic
from replog.errors import ErrorCode
from replog.protocol import messages as m
from replog.protocol.schema import Message

__all__ = ["HANDLERS", "handle_describe_configs"]


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
    config = services.config
    if resource.resource_type == m.RESOURCE_TOPIC:
        assignment = services.topics.get(name)
        if assignment is None:
            return _failed(
                resource, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"unknown topic {name!r}"
            )
        layers = broker_layers(config, services.broker_configs, assignment.config_map)
        entries = describe_topic(layers)
    elif resource.resource_type == m.RESOURCE_BROKER:
        if name not in ("", str(services.broker_id)):
            message = f"broker {services.broker_id} describes itself or '', not {name!r}"
            return _failed(resource, ErrorCode.INVALID_REQUEST, message)
        layers = broker_layers(config, services.broker_configs)
        entries = describe_broker(
            layers, BROKER_KEYS, types=BROKER_CONFIG_TYPES, per_broker=bool(name)
        )
    else:
        message = f"replog describes topic and broker configs, not type {resource.resource_type}"
        return _failed(resource, ErrorCode.INVALID_REQUEST, message)
    wanted = None if not resource.configuration_keys else set(resource.configuration_keys)
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
    return m.DescribeConfigsResourceResult(
        name=entry.name,
        value=entry.value,
        read_only=entry.read_only,
        config_source=int(entry.source),
        is_sensitive=False,
        synonyms=[
            m.DescribeConfigsSynonym(name=s.name, value=s.value, source=int(s.source))
            for s in entry.synonyms
        ]
        if synonyms
        else [],
        config_type=entry.config_type,
    )


HANDLERS: dict[type[Message], Handler] = {m.DescribeConfigsRequest: handle_describe_configs}
