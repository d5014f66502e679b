"""The admin client's requests for the admin APIs added with dynamic configs: a topic's or a
broker's configs described (DescribeConfigs; a broker's asked of that broker, since a Kafka
broker describes only itself) and changed (IncrementalAlterConfigs, so keys not named keep
their values) and records deleted (DeleteRecords, sent to each partition's leader).
``AsyncAdmin`` calls these; they take its ``ClusterClient`` and raise the error of the first
resource or partition that failed.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

import attrs

from replog.client.connection import ClusterClient
from replog.client.errors import BrokerResponseError, error_for_code
from replog.errors import ErrorCode
from replog.protocol.messages import (
    RESOURCE_BROKER,
    RESOURCE_TOPIC,
    DeleteRecordsPartition,
    DeleteRecordsRequest,
    DeleteRecordsResponse,
    DeleteRecordsTopic,
    DescribeConfigsRequest,
    DescribeConfigsResource,
    DescribeConfigsResponse,
    DescribeConfigsResult,
    IncrementalAlterableConfig,
    IncrementalAlterConfigsRequest,
    IncrementalAlterConfigsResource,
    IncrementalAlterConfigsResponse,
)
from replog.topics import TopicPartitionLike

__all__ = [
    "CONFIG_SOURCES",
    "ConfigEntry",
    "alter_broker_configs",
    "config_entries",
    "alter_topic_configs",
    "delete_records",
    "describe_broker_configs",
    "describe_topic_configs",
]

_SET, _DELETE = 0, 1  # IncrementalAlterConfigs operations

CONFIG_SOURCES = {
    1: "DYNAMIC_TOPIC_CONFIG",
    2: "DYNAMIC_BROKER_CONFIG",
    3: "DYNAMIC_DEFAULT_BROKER_CONFIG",
    4: "STATIC_BROKER_CONFIG",
    5: "DEFAULT_CONFIG",
    6: "DYNAMIC_BROKER_LOGGER_CONFIG",
}
"""Kafka's ConfigSource ids (DescribeConfigs v1+) by name."""


@attrs.frozen(kw_only=True)
class ConfigEntry:
    """One config of a topic or broker as DescribeConfigs gives it: its value (None: unset or
    sensitive), where that value comes from (``CONFIG_SOURCES``' names, "UNKNOWN" if the broker
    did not say), and whether it is read-only or sensitive."""

    name: str
    value: str | None
    source: str
    read_only: bool = False
    sensitive: bool = False

    @property
    def is_dynamic(self) -> bool:
        """Set on the topic, the broker or the cluster default (what kafka-configs shows)."""
        return self.source.startswith("DYNAMIC_")


async def config_entries(
    client: ClusterClient, entity_type: str, names: Sequence[str]
) -> dict[str, tuple[ConfigEntry, ...]]:
    """Every config entry of each topic (``entity_type`` "topics", one request) or broker
    ("brokers", each asked of that broker; the name "" is the cluster-wide default)."""
    unique = list(dict.fromkeys(names))
    if entity_type == "topics":
        results = await _describe_configs(client, None, RESOURCE_TOPIC, unique)
    elif entity_type == "brokers":
        results = [await _broker_configs(client, int(n) if n else None) for n in unique]
    else:
        raise ValueError(f"entity type must be topics or brokers, not {entity_type!r}")
    return {
        result.resource_name: tuple(
            ConfigEntry(
                name=c.name,
                value=c.value,
                source=CONFIG_SOURCES.get(c.config_source, "UNKNOWN"),
                read_only=c.read_only,
                sensitive=c.is_sensitive,
            )
            for c in result.configs
        )
        for result in results
    }


async def describe_topic_configs(
    client: ClusterClient, topics: Sequence[str]
) -> dict[str, dict[str, str]]:
    """Each topic's settings as they apply to it (asked of any broker), unset ones left out."""
    results = await _describe_configs(client, None, RESOURCE_TOPIC, topics)
    return {result.resource_name: _values(result) for result in results}


async def describe_broker_configs(
    client: ClusterClient, broker_ids: Iterable[int | None]
) -> dict[int | None, dict[str, str]]:
    """Each broker's settings as they apply to it, asked of that broker (a broker describes
    itself only); None is the cluster-wide dynamic default (resource name ""), asked of any
    broker, which lists only the keys it sets. Unset values (no rack) are left out."""
    return {b: _values(await _broker_configs(client, b)) for b in dict.fromkeys(broker_ids)}


async def _broker_configs(client: ClusterClient, broker_id: int | None) -> DescribeConfigsResult:
    """DescribeConfigs of one broker, asked of it (None: the cluster default, of any broker)."""
    if broker_id is None:
        (result,) = await _describe_configs(client, None, RESOURCE_BROKER, [""])
    else:
        await _known_broker(client, broker_id)
        (result,) = await _describe_configs(client, broker_id, RESOURCE_BROKER, [str(broker_id)])
    return result


async def _known_broker(client: ClusterClient, broker_id: int) -> None:
    """Refresh the metadata when it does not name ``broker_id``; BROKER_NOT_AVAILABLE if the
    fresh metadata does not either (the broker is not in the cluster, or not running)."""
    if broker_id in client.metadata.brokers:
        return
    await client.refresh_metadata([])
    if broker_id not in client.metadata.brokers:
        raise BrokerResponseError(
            ErrorCode.BROKER_NOT_AVAILABLE, f"broker {broker_id} is not in the cluster metadata"
        )


async def _describe_configs(
    client: ClusterClient, node_id: int | None, resource_type: int, names: Sequence[str]
) -> list[DescribeConfigsResult]:
    """DescribeConfigs for ``names`` of one resource type, sent to ``node_id`` (None: any
    broker); the error of the first resource that failed is raised."""
    request = DescribeConfigsRequest(
        resources=[
            DescribeConfigsResource(
                resource_type=resource_type, resource_name=name, configuration_keys=None
            )
            for name in names
        ]
    )
    if node_id is None:
        response = await client.send_any(request, DescribeConfigsResponse)
    else:
        response = await client.send(node_id, request, DescribeConfigsResponse)
    for result in response.results:
        if result.error_code != ErrorCode.NONE:
            raise error_for_code(result.error_code, result.error_message or "")
    return list(response.results)


def _values(result: DescribeConfigsResult) -> dict[str, str]:
    return {c.name: c.value for c in result.configs if c.value is not None}


async def alter_topic_configs(
    client: ClusterClient,
    topic: str,
    set_configs: Mapping[str, str],
    delete_configs: Iterable[str],
) -> None:
    """Set ``set_configs`` and remove ``delete_configs`` (back to the broker's default) on
    ``topic``; the other keys keep their values."""
    await _alter_configs(client, RESOURCE_TOPIC, topic, set_configs, delete_configs)


async def alter_broker_configs(
    client: ClusterClient,
    broker_id: int | None,
    set_configs: Mapping[str, str],
    delete_configs: Iterable[str],
) -> None:
    """Set ``set_configs`` and remove ``delete_configs`` in the dynamic configs of broker
    ``broker_id`` (None: the cluster-wide default every broker inherits)."""
    name = "" if broker_id is None else str(broker_id)
    await _alter_configs(client, RESOURCE_BROKER, name, set_configs, delete_configs)


async def _alter_configs(
    client: ClusterClient,
    resource_type: int,
    name: str,
    set_configs: Mapping[str, str],
    delete_configs: Iterable[str],
) -> None:
    configs = [
        IncrementalAlterableConfig(name=key, config_operation=_SET, value=value)
        for key, value in set_configs.items()
    ] + [
        IncrementalAlterableConfig(name=key, config_operation=_DELETE, value=None)
        for key in delete_configs
    ]
    request = IncrementalAlterConfigsRequest(
        resources=[
            IncrementalAlterConfigsResource(
                resource_type=resource_type, resource_name=name, configs=configs
            )
        ],
        validate_only=False,
    )
    response = await client.send_any(request, IncrementalAlterConfigsResponse)
    for result in response.responses:
        if result.error_code != ErrorCode.NONE:
            raise error_for_code(result.error_code, f"{name!r}: {result.error_message or ''}")


async def delete_records(
    client: ClusterClient, offsets: Mapping[TopicPartitionLike, int], timeout_ms: int
) -> dict[TopicPartitionLike, int]:
    """Delete the records of each partition below its offset (-1: the high watermark); the
    partitions' low watermarks once every replica has followed."""
    metadata = await client.refresh_metadata(sorted({tp[0] for tp in offsets}))
    by_leader: dict[int, dict[TopicPartitionLike, int]] = {}
    for tp, offset in offsets.items():
        leader = metadata.leader_for(tp[0], tp[1])
        if leader is None:
            raise BrokerResponseError(ErrorCode.LEADER_NOT_AVAILABLE, f"{tp[0]}-{tp[1]}")
        by_leader.setdefault(leader, {})[tp] = offset
    out: dict[TopicPartitionLike, int] = {}
    for leader, group in by_leader.items():
        topics: dict[str, list[DeleteRecordsPartition]] = {}
        for (topic, partition), offset in group.items():
            topics.setdefault(topic, []).append(
                DeleteRecordsPartition(partition_index=partition, offset=offset)
            )
        request = DeleteRecordsRequest(
            topics=[DeleteRecordsTopic(name=t, partitions=ps) for t, ps in topics.items()],
            timeout_ms=timeout_ms,
        )
        response = await client.send(
            leader, request, DeleteRecordsResponse, timeout_ms=timeout_ms + 5_000
        )
        keys = {(tp[0], tp[1]): tp for tp in group}
        for topic_result in response.topics:
            for part in topic_result.partitions:
                name = f"{topic_result.name}-{part.partition_index}"
                if part.error_code != ErrorCode.NONE:
                    raise error_for_code(part.error_code, name)
                out[keys[(topic_result.name, part.partition_index)]] = part.low_watermark
    return out
