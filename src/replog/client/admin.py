"""Cluster administration: ``AsyncAdmin`` (asyncio) and ``Admin`` (synchronous facade).

Everything goes through the Kafka APIs replog serves. Topic operations (CreateTopics,
DeleteTopics, CreatePartitions, Metadata, ListOffsets) are sent to the controller the metadata
names (another broker after NOT_CONTROLLER); configs through DescribeConfigs /
IncrementalAlterConfigs, DeleteRecords to the partitions' leaders.

Partition methods (leader elections, reassignments, log dirs) come from ``partition_admin``;
they need nothing but the brokers -- ``coordinator_url``, which they once needed, is accepted
for old callers, ignored, and deprecated. Consumer-group methods (list, describe and delete
groups; list, alter and delete their offsets) come from ``group_admin``; ``read_replica`` (one
broker's copy of a partition, leader or follower) from ``replica_reads``.
"""

from __future__ import annotations

import asyncio
import contextlib
import warnings
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import attrs

from replog.client import admin_ops
from replog.client._sync import LoopThread
from replog.client.connection import ClusterClient, now_ms
from replog.client.errors import BrokerResponseError, error_for_code
from replog.client.group_admin import AsyncGroupAdmin, GroupAdmin
from replog.client.offsets import ask_leader
from replog.client.partition_admin import AsyncPartitionAdmin, PartitionAdmin, to_controller
from replog.client.replica_reads import AsyncReplicaReads, ReplicaReads
from replog.errors import ErrorCode, InvalidConfigError, RequestTimeoutError
from replog.protocol.messages import (
    EARLIEST_TIMESTAMP,
    LATEST_TIMESTAMP,
    CreatableReplicaAssignment,
    CreatableTopic,
    CreatableTopicConfig,
    CreatePartitionsRequest,
    CreatePartitionsResponse,
    CreatePartitionsTopic,
    CreateTopicsRequest,
    CreateTopicsResponse,
    DeleteTopicsRequest,
    DeleteTopicsResponse,
    DeleteTopicState,
    MetadataRequest,
    MetadataResponse,
)
from replog.protocol.schema import Message
from replog.topics import TopicPartitionLike

__all__ = [
    "Admin",
    "AsyncAdmin",
    "BrokerDescription",
    "ClusterDescription",
    "PartitionDescription",
    "TopicDescription",
]


@attrs.frozen(kw_only=True)
class PartitionDescription:
    """One partition: its leader (-1: none), leader epoch, replicas (assignment order), ISR."""

    partition: int
    leader: int
    leader_epoch: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    offline_replicas: tuple[int, ...] = ()


@attrs.frozen(kw_only=True)
class TopicDescription:
    """A topic and its partitions, by partition index."""

    name: str
    partitions: tuple[PartitionDescription, ...]


@attrs.frozen(kw_only=True)
class BrokerDescription:
    """One live broker as the Metadata response lists it (``rack`` None: not set)."""

    broker_id: int
    host: str
    port: int
    rack: str | None = None


@attrs.frozen(kw_only=True)
class ClusterDescription:
    """Kafka's DescribeCluster answer: the live brokers (by id), the controller (-1: none
    known) and the cluster id."""

    brokers: tuple[BrokerDescription, ...]
    controller_id: int
    cluster_id: str | None = None


_CONTROLLER_TRIES = 5


def delete_topics_request(names: list[str], timeout_ms: int, version: int) -> DeleteTopicsRequest:
    """DeleteTopics for ``names`` at ``version``: v6 names topics in ``topics`` (name or id),
    v1-v5 in ``topic_names``."""
    if version >= 6:
        return DeleteTopicsRequest(
            topics=[DeleteTopicState(name=name) for name in names], timeout_ms=timeout_ms
        )
    return DeleteTopicsRequest(topic_names=names, timeout_ms=timeout_ms)


def warn_coordinator_url(stacklevel: int) -> None:
    """The DeprecationWarning for passing ``coordinator_url`` to an admin client."""
    warnings.warn(
        "coordinator_url is deprecated and ignored: reassignment and leader election go "
        "through the Kafka API (AlterPartitionReassignments, ElectLeaders)",
        DeprecationWarning,
        stacklevel=stacklevel,
    )


class AsyncAdmin(AsyncPartitionAdmin, AsyncGroupAdmin, AsyncReplicaReads):
    """Asyncio admin client (see module doc). Create with ``await AsyncAdmin.start(...)``."""

    def __init__(self, client: ClusterClient, request_timeout_ms: int) -> None:
        self._client = client
        self.request_timeout_ms = request_timeout_ms

    @classmethod
    async def start(
        cls,
        bootstrap: str | Sequence[str],
        *,
        coordinator_url: str | None = None,
        request_timeout_ms: int = 30_000,
        client_id: str = "replog-admin",
    ) -> AsyncAdmin:
        """An admin client for the cluster at ``bootstrap``. ``coordinator_url`` is deprecated
        and ignored: every admin API goes through the brokers."""
        if coordinator_url is not None:
            warn_coordinator_url(stacklevel=3)
        client = ClusterClient.from_bootstrap(
            bootstrap, client_id=client_id, request_timeout_ms=request_timeout_ms + 5_000
        )
        return cls(client, request_timeout_ms)

    async def __aenter__(self) -> AsyncAdmin:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def _to_controller(
        self, request: Message | Callable[[int], Message], response_type: type[Any]
    ) -> Any:
        return await to_controller(self._client, request, response_type)

    async def create_topics(
        self,
        name: str,
        partitions: int,
        replication_factor: int,
        config: Mapping[str, str] | None = None,
        *,
        wait: bool = True,
        replica_assignment: Sequence[Sequence[int]] | None = None,
    ) -> None:
        """Create one topic (``config``: topic overrides such as min.insync.replicas); with
        ``wait``, return only once every partition has a leader in the metadata.
        ``replica_assignment`` places the replicas yourself (``[[1, 2], [2, 3]]``: partition 0
        on brokers 1 and 2, 1 on 2 and 3; the first is the preferred leader); it must agree
        with ``partitions`` and ``replication_factor``."""
        assignments = [
            CreatableReplicaAssignment(partition_index=p, broker_ids=list(brokers))
            for p, brokers in enumerate(replica_assignment or ())
        ]
        if assignments and (
            len(assignments) != partitions
            or any(len(a.broker_ids) != replication_factor for a in assignments)
        ):
            raise InvalidConfigError(
                f"{name}: replica_assignment {replica_assignment} does not match "
                f"{partitions} partitions of {replication_factor} replicas"
            )
        topic = CreatableTopic(
            name=name,
            num_partitions=-1 if assignments else partitions,
            replication_factor=-1 if assignments else replication_factor,
            assignments=assignments,
            configs=[CreatableTopicConfig(name=k, value=v) for k, v in (config or {}).items()],
        )
        request = CreateTopicsRequest(topics=[topic], timeout_ms=self.request_timeout_ms)
        for _ in range(_CONTROLLER_TRIES):
            response: CreateTopicsResponse = await self._to_controller(
                request, CreateTopicsResponse
            )
            codes = [(t.error_code, t.error_message or "") for t in response.topics]
            if any(c == ErrorCode.NOT_CONTROLLER for c, _ in codes):
                self._client.metadata.mark_stale()
                continue
            for code, message in codes:
                if code != ErrorCode.NONE:
                    raise error_for_code(code, f"{name}: {message}")
            break
        if wait:
            await self._wait_for_leaders(name, partitions)

    async def _wait_for_leaders(self, name: str, partitions: int) -> None:
        deadline = now_ms() + self.request_timeout_ms
        while True:
            metadata = await self._client.refresh_metadata([name])
            if metadata.partition_count(name) == partitions and all(
                metadata.leader_for(name, p) is not None for p in range(partitions)
            ):
                return
            if now_ms() >= deadline:
                raise RequestTimeoutError(f"topic {name} has no leader for every partition")
            await asyncio.sleep(0.05)

    async def delete_topics(self, names: Iterable[str]) -> None:
        """Delete topics; raises on the first error (UNKNOWN_TOPIC_OR_PARTITION included)."""
        topics, timeout_ms = list(names), self.request_timeout_ms
        response: DeleteTopicsResponse = await self._to_controller(
            lambda version: delete_topics_request(topics, timeout_ms, version),
            DeleteTopicsResponse,
        )
        for result in response.responses:
            if result.error_code != ErrorCode.NONE:
                raise error_for_code(result.error_code, f"{result.name}: {result.error_message}")
        self._client.metadata.mark_stale()

    async def create_partitions(self, name: str, count: int) -> None:
        """Grow ``name`` to ``count`` partitions (the broker places the new ones)."""
        request = CreatePartitionsRequest(
            topics=[CreatePartitionsTopic(name=name, count=count)],
            timeout_ms=self.request_timeout_ms,
            validate_only=False,
        )
        response: CreatePartitionsResponse = await self._to_controller(
            request, CreatePartitionsResponse
        )
        for result in response.results:
            if result.error_code != ErrorCode.NONE:
                raise error_for_code(result.error_code, f"{name}: {result.error_message}")
        self._client.metadata.mark_stale()

    async def list_topics(self) -> list[str]:
        """Every topic name, sorted."""
        metadata = await self._client.refresh_metadata()
        return sorted(metadata.topics)

    async def describe_topics(
        self, names: Iterable[str] | None = None
    ) -> dict[str, TopicDescription]:
        """Leader, epoch, replicas and ISR of every partition of ``names`` (default: all);
        an unknown topic raises ``BrokerResponseError``."""
        wanted = None if names is None else list(names)
        metadata = await self._client.refresh_metadata(wanted)
        out: dict[str, TopicDescription] = {}
        for name in wanted if wanted is not None else sorted(metadata.topics):
            count = metadata.partition_count(name)
            if count is None:
                code = metadata.topic_errors.get(name, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
                raise BrokerResponseError(code, f"topic {name!r}")
            parts = []
            for index in range(count):
                info = metadata.partitions[(name, index)]
                parts.append(
                    PartitionDescription(
                        partition=index,
                        leader=info.leader_id,
                        leader_epoch=info.leader_epoch,
                        replicas=info.replicas,
                        isr=info.isr,
                        offline_replicas=info.offline_replicas,
                    )
                )
            out[name] = TopicDescription(name=name, partitions=tuple(parts))
        return out

    async def describe_cluster(self) -> ClusterDescription:
        """The live brokers (id, host, port, rack), the controller id and the cluster id, from
        a Metadata request for no topics (what Kafka's ``Admin.describeCluster`` reports)."""
        request = MetadataRequest(topics=[], allow_auto_topic_creation=False)
        response: MetadataResponse = await self._client.send_any(request, MetadataResponse)
        brokers = sorted(
            (
                BrokerDescription(broker_id=b.node_id, host=b.host, port=b.port, rack=b.rack)
                for b in response.brokers
            ),
            key=lambda b: b.broker_id,
        )
        return ClusterDescription(
            brokers=tuple(brokers),
            controller_id=response.controller_id,
            cluster_id=response.cluster_id,
        )

    async def describe_configs(self, topics: Iterable[str]) -> dict[str, dict[str, str]]:
        """Every supported config of each topic with the value that applies to it (the topic's
        own setting, else the broker's default). An unknown topic raises the error for
        UNKNOWN_TOPIC_OR_PARTITION (``RetriableBrokerResponseError``). Brokers' own configs:
        ``describe_broker_configs``."""
        return await admin_ops.describe_topic_configs(self._client, list(topics))

    async def describe_broker_configs(
        self, broker_ids: Iterable[int | None]
    ) -> dict[int | None, dict[str, str]]:
        """Every broker config of each broker (by id) with the value that applies to it (its
        dynamic config, else the cluster-wide default, its config file, the built-in default),
        as Kafka's ``describeConfigs`` of a BROKER resource gives it; each broker is asked about
        itself. ``None`` is the cluster-wide dynamic default (what ``alter_broker_configs(None,
        ...)`` sets): only the keys it sets. Unset values (no rack) are left out; a broker the
        metadata does not list raises the error for BROKER_NOT_AVAILABLE."""
        return await admin_ops.describe_broker_configs(self._client, list(broker_ids))

    async def config_entries(
        self, entity_type: str, names: Iterable[str]
    ) -> dict[str, tuple[admin_ops.ConfigEntry, ...]]:
        """Each topic's (``entity_type`` "topics") or broker's ("brokers"; "" the cluster-wide
        default) config entries with their sources (``admin_ops.ConfigEntry``): what
        kafka-configs needs to tell a dynamic setting from a default."""
        return await admin_ops.config_entries(self._client, entity_type, list(names))

    async def list_offsets(
        self, partitions: Iterable[TopicPartitionLike], timestamp: int | str = "latest"
    ) -> dict[TopicPartitionLike, int]:
        """Per partition: "latest" (the high watermark), "earliest" (log start), or the first
        offset with a timestamp >= ``timestamp`` (ms; -1 when none)."""
        if timestamp == "latest":
            ts = LATEST_TIMESTAMP
        elif timestamp == "earliest":
            ts = EARLIEST_TIMESTAMP
        elif isinstance(timestamp, int):
            ts = timestamp
        else:
            raise InvalidConfigError(f"timestamp must be 'latest', 'earliest' or ms: {timestamp}")
        tps = list(partitions)
        metadata = await self._client.refresh_metadata(sorted({t for t, _ in tps}))
        groups: dict[int, list[TopicPartitionLike]] = {}
        for tp in tps:
            leader = metadata.leader_for(*tp)
            if leader is None:
                raise BrokerResponseError(ErrorCode.LEADER_NOT_AVAILABLE, f"{tp[0]}-{tp[1]}")
            groups.setdefault(leader, []).append(tp)
        out: dict[TopicPartitionLike, int] = {}
        for leader, group in groups.items():
            answers = await ask_leader(self._client, leader, {tp: (ts, -1) for tp in group})
            for tp, part in answers.items():
                if part.error_code != ErrorCode.NONE:
                    raise error_for_code(part.error_code, f"{tp[0]}-{tp[1]}")
                out[tp] = part.offset
        return out

    async def alter_configs(
        self,
        topic: str,
        set_configs: Mapping[str, str] | None = None,
        delete_configs: Iterable[str] = (),
    ) -> None:
        """Change ``topic``'s configs (IncrementalAlterConfigs): set ``set_configs``, return
        ``delete_configs`` to the broker's default, keep the rest. Brokers apply the change
        live; a key replog does not honour raises the error for INVALID_CONFIG."""
        await admin_ops.alter_topic_configs(
            self._client, topic, set_configs or {}, list(delete_configs)
        )

    async def alter_broker_configs(
        self,
        broker_id: int | None,
        set_configs: Mapping[str, str] | None = None,
        delete_configs: Iterable[str] = (),
    ) -> None:
        """Change the dynamic configs of broker ``broker_id`` (None: the cluster-wide default)
        with IncrementalAlterConfigs; a key the brokers do not accept dynamically raises the
        error for INVALID_CONFIG."""
        await admin_ops.alter_broker_configs(
            self._client, broker_id, set_configs or {}, list(delete_configs)
        )

    async def delete_records(
        self, offsets: Mapping[TopicPartitionLike, int]
    ) -> dict[TopicPartitionLike, int]:
        """Delete each partition's records below its offset (-1: all up to the high
        watermark); returns each partition's new low watermark (earliest offset)."""
        return await admin_ops.delete_records(self._client, offsets, self.request_timeout_ms)

    async def close(self) -> None:
        """Close connections."""
        await self._client.close()


class Admin(PartitionAdmin["AsyncAdmin"], GroupAdmin["AsyncAdmin"], ReplicaReads["AsyncAdmin"]):
    """The synchronous admin client: an ``AsyncAdmin`` on a background event loop."""

    def __init__(self, bootstrap: str | Sequence[str], **options: Any) -> None:
        if options.pop("coordinator_url", None) is not None:
            warn_coordinator_url(stacklevel=3)
        self._loop = LoopThread("replog-admin")
        try:
            self._admin = self._loop.run(AsyncAdmin.start(bootstrap, **options))
        except BaseException:
            self._loop.stop()
            raise

    def __enter__(self) -> Admin:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def create_topics(
        self,
        name: str,
        partitions: int,
        replication_factor: int,
        config: Mapping[str, str] | None = None,
        *,
        wait: bool = True,
        replica_assignment: Sequence[Sequence[int]] | None = None,
    ) -> None:
        """See ``AsyncAdmin.create_topics``."""
        self._loop.run(
            self._admin.create_topics(
                name,
                partitions,
                replication_factor,
                config,
                wait=wait,
                replica_assignment=replica_assignment,
            )
        )

    def delete_topics(self, names: Iterable[str]) -> None:
        """See ``AsyncAdmin.delete_topics``."""
        self._loop.run(self._admin.delete_topics(list(names)))

    def create_partitions(self, name: str, count: int) -> None:
        """See ``AsyncAdmin.create_partitions``."""
        self._loop.run(self._admin.create_partitions(name, count))

    def list_topics(self) -> list[str]:
        """See ``AsyncAdmin.list_topics``."""
        return self._loop.run(self._admin.list_topics())

    def describe_topics(self, names: Iterable[str] | None = None) -> dict[str, TopicDescription]:
        """See ``AsyncAdmin.describe_topics``."""
        return self._loop.run(self._admin.describe_topics(None if names is None else list(names)))

    def describe_cluster(self) -> ClusterDescription:
        """See ``AsyncAdmin.describe_cluster``."""
        return self._loop.run(self._admin.describe_cluster())

    def describe_configs(self, topics: Iterable[str]) -> dict[str, dict[str, str]]:
        """See ``AsyncAdmin.describe_configs``."""
        return self._loop.run(self._admin.describe_configs(list(topics)))

    def describe_broker_configs(
        self, broker_ids: Iterable[int | None]
    ) -> dict[int | None, dict[str, str]]:
        """See ``AsyncAdmin.describe_broker_configs``."""
        return self._loop.run(self._admin.describe_broker_configs(list(broker_ids)))

    def config_entries(
        self, entity_type: str, names: Iterable[str]
    ) -> dict[str, tuple[admin_ops.ConfigEntry, ...]]:
        """See ``AsyncAdmin.config_entries``."""
        return self._loop.run(self._admin.config_entries(entity_type, list(names)))

    def list_offsets(
        self, partitions: Iterable[TopicPartitionLike], timestamp: int | str = "latest"
    ) -> dict[TopicPartitionLike, int]:
        """See ``AsyncAdmin.list_offsets``."""
        return self._loop.run(self._admin.list_offsets(list(partitions), timestamp))

    def alter_configs(
        self,
        topic: str,
        set_configs: Mapping[str, str] | None = None,
        delete_configs: Iterable[str] = (),
    ) -> None:
        """See ``AsyncAdmin.alter_configs``."""
        self._loop.run(self._admin.alter_configs(topic, set_configs, list(delete_configs)))

    def alter_broker_configs(
        self,
        broker_id: int | None,
        set_configs: Mapping[str, str] | None = None,
        delete_configs: Iterable[str] = (),
    ) -> None:
        """See ``AsyncAdmin.alter_broker_configs``."""
        self._loop.run(
            self._admin.alter_broker_configs(broker_id, set_configs, list(delete_configs))
        )

    def delete_records(
        self, offsets: Mapping[TopicPartitionLike, int]
    ) -> dict[TopicPartitionLike, int]:
        """See ``AsyncAdmin.delete_records``."""
        return self._loop.run(self._admin.delete_records(dict(offsets)))

    def close(self) -> None:
        """Close connections and stop the loop thread. Idempotent."""
        try:
            with contextlib.suppress(RuntimeError):
                self._loop.run(self._admin.close())
        finally:
            self._loop.stop()
