"""The admin client's requests for the admin APIs added with dynamic configs: a topic's or a
broker's configs changed (IncrementalAlterConfigs, so keys not named keep their values) and records
deleted (DeleteRecords, sent to each partition's leader). ``AsyncAdmin`` calls these; they
take its ``ClusterClient`` and raise the error of the first resource or partition that failed.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

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
    IncrementalAlterableConfig,
    IncrementalAlterConfigsRequest,
    IncrementalAlterConfigsResource,
    IncrementalAlterConfigsResponse,
)
from replog.topics import TopicPartitionLike

__all__ = ["alter_broker_configs", "alter_topic_configs", "delete_records"]

_SET, _DELETE = 0, 1  # IncrementalAlterConfigs operations


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
