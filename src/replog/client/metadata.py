"""The client's view of the cluster: brokers, and each partition's leader, epoch, replicas, ISR.

Pure data, no IO: ``ClusterClient`` (``connection.py``) fills it from Metadata responses. A
partition's entry never goes back in leader epoch: a response from a broker that has not yet
heard of a newer leader keeps the newer entry (Kafka's ``Metadata.updateLatestMetadata`` rule),
so a consumer cannot be sent back to a fenced leader.

The cache is marked stale, and refreshed before its next use, when a broker answers
NOT_LEADER_OR_FOLLOWER, FENCED_LEADER_EPOCH, UNKNOWN_LEADER_EPOCH, LEADER_NOT_AVAILABLE,
UNKNOWN_TOPIC_OR_PARTITION, or a connection is lost; and, like Kafka's ``metadata.max.age.ms``,
when it is older than ``max_age_ms``.
"""

from __future__ import annotations

import attrs

from replog.errors import ErrorCode
from replog.protocol.messages import MetadataResponse, MetadataResponsePartition

__all__ = ["REFRESH_CODES", "BrokerAddress", "MetadataCache", "PartitionMetadata"]

REFRESH_CODES = frozenset(
    {
        ErrorCode.NOT_LEADER_OR_FOLLOWER,
        ErrorCode.FENCED_LEADER_EPOCH,
        ErrorCode.UNKNOWN_LEADER_EPOCH,
        ErrorCode.LEADER_NOT_AVAILABLE,
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        ErrorCode.NETWORK_EXCEPTION,
        ErrorCode.KAFKA_STORAGE_ERROR,
    }
)
"""Partition error codes after which the client's leader information is probably wrong."""


@attrs.frozen
class BrokerAddress:
    """Where one broker listens."""

    node_id: int
    host: str
    port: int


@attrs.frozen
class PartitionMetadata:
    """One partition as the Metadata response described it (``leader_id`` -1: no leader)."""

    topic: str
    partition: int
    leader_id: int
    leader_epoch: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    offline_replicas: tuple[int, ...] = ()
    error_code: int = 0


@attrs.define
class MetadataCache:
    """Brokers and partitions, as of the last Metadata response applied (see module doc)."""

    brokers: dict[int, BrokerAddress] = attrs.field(factory=dict)
    partitions: dict[tuple[str, int], PartitionMetadata] = attrs.field(factory=dict)
    topics: dict[str, int] = attrs.field(factory=dict)
    """topic name -> partition count, for topics the cluster reported without error."""
    topic_errors: dict[str, int] = attrs.field(factory=dict)
    controller_id: int = -1
    cluster_id: str | None = None
    updated_ms: int | None = None
    stale: bool = True

    def update(self, response: MetadataResponse, now_ms: int, *, all_topics: bool) -> None:
        """Apply a Metadata response. ``all_topics``: the request asked for every topic, so
        topics missing from it are gone; otherwise only the listed topics are replaced."""
        self.brokers = {
            b.node_id: BrokerAddress(b.node_id, b.host, b.port) for b in response.brokers
        }
        self.controller_id = response.controller_id
        self.cluster_id = response.cluster_id
        if all_topics:
            gone = set(self.topics) - {t.name for t in response.topics if t.name}
            for name in gone:
                self._forget(name)
        for topic in response.topics:
            if topic.name is None:
                continue
            if topic.error_code != ErrorCode.NONE:
                self.topic_errors[topic.name] = topic.error_code
                self._forget(topic.name)
                continue
            self.topic_errors.pop(topic.name, None)
            self._apply_topic(topic.name, topic.partitions)
        self.updated_ms = now_ms
        self.stale = False

    def _apply_topic(self, name: str, partitions: list[MetadataResponsePartition]) -> None:
        old_count = self.topics.get(name, 0)
        count = len(partitions)
        for p in partitions:
            new = PartitionMetadata(
                topic=name,
                partition=p.partition_index,
                leader_id=p.leader_id,
                leader_epoch=p.leader_epoch,
                replicas=tuple(p.replica_nodes),
                isr=tuple(p.isr_nodes),
                offline_replicas=tuple(p.offline_replicas),
                error_code=p.error_code,
            )
            key = (name, new.partition)
            old = self.partitions.get(key)
            if old is not None and 0 <= new.leader_epoch < old.leader_epoch:
                continue  # an older view than ours: keep the newer leader (module doc)
            self.partitions[key] = new
        for index in range(count, old_count):
            self.partitions.pop((name, index), None)
        self.topics[name] = count

    def _forget(self, name: str) -> None:
        count = self.topics.pop(name, 0)
        for index in range(count):
            self.partitions.pop((name, index), None)

    def leader_for(self, topic: str, partition: int) -> int | None:
        """The leader's node id, or None when unknown, leaderless or its address is unknown."""
        info = self.partitions.get((topic, partition))
        if info is None or info.leader_id < 0 or info.leader_id not in self.brokers:
            return None
        return info.leader_id

    def leader_epoch_for(self, topic: str, partition: int) -> int:
        """The partition's current leader epoch as far as we know (-1: unknown)."""
        info = self.partitions.get((topic, partition))
        return -1 if info is None else info.leader_epoch

    def partition_count(self, topic: str) -> int | None:
        """The topic's number of partitions, or None when the topic is unknown."""
        return self.topics.get(topic)

    def mark_stale(self) -> None:
        """Force a refresh before the next use."""
        self.stale = True

    def on_partition_error(self, code: int) -> bool:
        """Mark stale if ``code`` says our leader information is wrong; returns whether it did."""
        if code in REFRESH_CODES:
            self.stale = True
            return True
        return False

    def needs_refresh(self, now_ms: int, max_age_ms: int) -> bool:
        """Stale, never loaded, or older than ``max_age_ms``."""
        return self.stale or self.updated_ms is None or now_ms - self.updated_ms >= max_age_ms
