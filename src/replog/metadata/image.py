"""``MetadataImage``: a ``MetadataSnapshot`` that follows the change feed.

A snapshot is the store's image at one feed seq; applying the feed records from that seq on
gives the image at a later seq. ``MetadataImage`` does that application outside any store, the
way every backend's ``snapshot()`` would show it: a broker keeps one beside its replica manager
so it can write the image it acts on to disk (``replog.broker.image_cache``) and, after a
restart, bring that cached image up to date from the feed instead of reading a full snapshot.

The rules mirror the stores' (``metadata.records`` says what each write appends):

- ``BrokerChanged`` with a broker sets it; without one (UNREGISTERED, EXPIRED) removes the
  registration unless a newer incarnation replaced it;
- ``TopicChanged`` sets the topic (CREATED, PARTITIONS_ADDED, CONFIGS_ALTERED) or removes it
  and every partition state of it (DELETED);
- ``PartitionChanged`` sets the partition state; a topic's replica lists are those of its
  partition states, as the stores build them (a reassignment moves both);
- ``ControllerChanged`` sets the controller (None: none active); the controller epoch is the
  highest any controller had;
- ``BrokerConfigsChanged`` sets a broker's dynamic configs (empty: removes the entry);
- ``AdminRequestChanged`` is not part of the image.

Pure: no IO, no clock (like ``replog.isr``).
"""

from __future__ import annotations

from collections.abc import Iterable

import attrs

from replog.metadata.types import (
    AdminRequestChanged,
    BrokerChanged,
    BrokerConfigsChanged,
    BrokerInfo,
    ControllerChanged,
    ControllerInfo,
    MetadataChange,
    MetadataSnapshot,
    PartitionChanged,
    PartitionState,
    TopicAssignment,
    TopicChanged,
    TopicChangeReason,
    TopicConfigs,
)

__all__ = ["MetadataImage"]


@attrs.define
class MetadataImage:
    """The metadata image at feed seq ``seq``: every record below it applied."""

    seq: int
    brokers: dict[int, BrokerInfo]
    topics: dict[str, TopicAssignment]
    partitions: dict[tuple[str, int], PartitionState]
    controller: ControllerInfo | None
    controller_epoch: int
    broker_configs: dict[int, TopicConfigs]
    cluster_id: str | None

    @classmethod
    def from_snapshot(cls, snapshot: MetadataSnapshot) -> MetadataImage:
        """An image to advance from ``snapshot`` (its maps are copied)."""
        return cls(
            seq=snapshot.seq,
            brokers=dict(snapshot.brokers),
            topics=dict(snapshot.topics),
            partitions=dict(snapshot.partitions),
            controller=snapshot.controller,
            controller_epoch=snapshot.controller_epoch,
            broker_configs=dict(snapshot.broker_configs),
            cluster_id=snapshot.cluster_id,
        )

    def apply(self, changes: Iterable[MetadataChange], next_seq: int) -> None:
        """Apply one feed batch (its records in order) and move the cursor to ``next_seq``."""
        for change in changes:
            self._apply_one(change)
        self.seq = max(self.seq, next_seq)

    def _apply_one(self, change: MetadataChange) -> None:
        if isinstance(change, PartitionChanged):
            self.partitions[(change.topic, change.partition)] = change.state
        elif isinstance(change, BrokerChanged):
            if change.broker is not None:
                self.brokers[change.broker_id] = change.broker
                return
            current = self.brokers.get(change.broker_id)
            if current is not None and current.incarnation_epoch <= change.incarnation_epoch:
                del self.brokers[change.broker_id]
        elif isinstance(change, TopicChanged):
            assignment = change.assignment
            if change.reason is not TopicChangeReason.DELETED:
                self.topics[assignment.topic] = assignment
                return
            current_topic = self.topics.get(assignment.topic)
            if current_topic is None or current_topic.topic_id != assignment.topic_id:
                return
            del self.topics[assignment.topic]
            for partition in range(current_topic.partition_count):
                self.partitions.pop((assignment.topic, partition), None)
        elif isinstance(change, ControllerChanged):
            self.controller = change.controller
            if change.controller is not None:
                epoch = change.controller.controller_epoch
                self.controller_epoch = max(self.controller_epoch, epoch)
        elif isinstance(change, BrokerConfigsChanged):
            if change.configs:
                self.broker_configs[change.broker_id] = change.configs
            else:
                self.broker_configs.pop(change.broker_id, None)
        elif isinstance(change, AdminRequestChanged):
            pass  # admin queues are not part of the image

    def snapshot(self) -> MetadataSnapshot:
        """The image as a ``MetadataSnapshot`` at ``seq`` (maps sorted, as the stores give
        them; each topic's replica lists taken from its partition states)."""
        topics = {}
        for name, assignment in sorted(self.topics.items()):
            replicas = [
                self.partitions[(name, p)].replicas
                if (name, p) in self.partitions
                else assignment.replicas[p]
                for p in range(assignment.partition_count)
            ]
            topics[name] = attrs.evolve(assignment, replicas=replicas)
        return MetadataSnapshot(
            seq=self.seq,
            brokers=dict(sorted(self.brokers.items())),
            topics=topics,
            partitions=dict(sorted(self.partitions.items())),
            controller=self.controller,
            controller_epoch=self.controller_epoch,
            broker_configs=dict(sorted(self.broker_configs.items())),
            cluster_id=self.cluster_id,
        )
