"""``MetadataImage``: a ``MetadataSnapshot`` that follows the change feed.

A snapshot is the store's image at one feed seq; applying the feed records from that seq on
gives the image at a later seq. ``MetadataImage`` does that application outside any store, the
way every backend's ``snapshot()`` would show it. A broker keeps exactly one: its metadata
channel applies each feed batch to it once and hands the image with the batch's
``MetadataDelta`` (what ``apply`` returns) to every part that acts on metadata (the replica
manager, the handlers, the group host), and writes it to disk now and then
(``replog.broker.driver.image_cache``) so that after a restart it can bring that cached image up to
date from the feed instead of reading a full snapshot.

The rules mirror the stores' (``metadata.records`` says what each write appends):

- ``BrokerChanged`` with a broker sets it; without one (UNREGISTERED, EXPIRED) removes the
  registration unless a newer incarnation replaced it;
- ``TopicChanged`` sets the topic (CREATED, PARTITIONS_ADDED, CONFIGS_ALTERED) or removes it
  and every partition state of it (DELETED);
- ``PartitionChanged`` sets the partition state, unless the state held has a higher partition
  epoch (a stale record: the stores only ever raise it); a topic's replica lists are those of its
  partition states, as the stores build them (a reassignment moves both);
- ``ControllerChanged`` sets the controller (None: none active); the controller epoch is the
  highest any controller had;
- ``BrokerConfigsChanged`` sets a broker's dynamic configs (empty: removes the entry);
- ``AdminRequestChanged`` is not part of the image.

Pure: no IO, no clock (like ``replog.isr``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import attrs

from replog.metadata.delta import EMPTY_DELTA, MetadataDelta
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
from replog.topics import TopicPartition

__all__ = ["MetadataImage"]


@attrs.define
class _DeltaBuilder:
    """What a batch changed so far (see ``MetadataDelta``)."""

    deleted: list[TopicAssignment] = attrs.Factory(list)
    topics: set[str] = attrs.Factory(set)
    reconfigured: set[str] = attrs.Factory(set)
    partitions: dict[TopicPartition, None] = attrs.Factory(dict)
    brokers: set[int] = attrs.Factory(set)
    broker_configs: set[int] = attrs.Factory(set)
    controller: bool = False
    admin_requests: list[AdminRequestChanged] = attrs.Factory(list)

    def build(self, partitions: Mapping[TopicPartition, PartitionState]) -> MetadataDelta:
        if not (self.deleted or self.topics or self.partitions or self.brokers) and not (
            self.broker_configs or self.controller or self.admin_requests
        ):
            return EMPTY_DELTA
        return MetadataDelta(
            topics_deleted=tuple(self.deleted),
            topics_changed=frozenset(self.topics),
            topics_reconfigured=frozenset(self.reconfigured),
            # a partition of a topic deleted later in the batch has no state to act on
            partitions_changed=tuple(tp for tp in self.partitions if tp in partitions),
            brokers_changed=frozenset(self.brokers),
            broker_configs_changed=frozenset(self.broker_configs),
            controller_changed=self.controller,
            admin_requests=tuple(self.admin_requests),
        )


@attrs.define
class MetadataImage:
    """The metadata image at feed seq ``seq``: every record below it applied."""

    seq: int
    brokers: dict[int, BrokerInfo]
    topics: dict[str, TopicAssignment]
    partitions: dict[TopicPartition, PartitionState]
    controller: ControllerInfo | None
    controller_epoch: int
    broker_configs: dict[int, TopicConfigs]
    cluster_id: str | None
    #: feed batches applied to this image (a broker applies each batch once)
    batches_applied: int = 0

    @classmethod
    def empty(cls) -> MetadataImage:
        """The image before any snapshot: nothing known, the cursor at 0."""
        return cls(
            seq=0, brokers={}, topics={}, partitions={}, controller=None, controller_epoch=0,
            broker_configs={}, cluster_id=None,
        )  # fmt: skip

    @classmethod
    def from_snapshot(cls, snapshot: MetadataSnapshot) -> MetadataImage:
        """An image to advance from ``snapshot`` (its maps are copied)."""
        return cls(
            seq=snapshot.seq,
            brokers=dict(snapshot.brokers),
            topics=dict(snapshot.topics),
            partitions={TopicPartition(*tp): s for tp, s in snapshot.partitions.items()},
            controller=snapshot.controller,
            controller_epoch=snapshot.controller_epoch,
            broker_configs=dict(snapshot.broker_configs),
            cluster_id=snapshot.cluster_id,
        )

    def apply(self, changes: Iterable[MetadataChange], next_seq: int) -> MetadataDelta:
        """Apply one feed batch (its records in order), move the cursor to ``next_seq``, and
        say what changed."""
        delta = _DeltaBuilder()
        for change in changes:
            self._apply_one(change, delta)
        self.seq = max(self.seq, next_seq)
        self.batches_applied += 1
        return delta.build(self.partitions)

    def _apply_one(self, change: MetadataChange, delta: _DeltaBuilder) -> None:
        if isinstance(change, PartitionChanged):
            tp = TopicPartition(change.topic, change.partition)
            held = self.partitions.get(tp)
            if held is not None and held.partition_epoch > change.state.partition_epoch:
                return  # older than the state held (a feed replayed over a later snapshot)
            self.partitions[tp] = change.state
            delta.partitions[tp] = None
        elif isinstance(change, BrokerChanged):
            delta.brokers.add(change.broker_id)
            if change.broker is not None:
                self.brokers[change.broker_id] = change.broker
                return
            current = self.brokers.get(change.broker_id)
            if current is not None and current.incarnation_epoch <= change.incarnation_epoch:
                del self.brokers[change.broker_id]
        elif isinstance(change, TopicChanged):
            self._apply_topic(change, delta)
        elif isinstance(change, ControllerChanged):
            delta.controller = True
            self.controller = change.controller
            if change.controller is not None:
                epoch = change.controller.controller_epoch
                self.controller_epoch = max(self.controller_epoch, epoch)
        elif isinstance(change, BrokerConfigsChanged):
            delta.broker_configs.add(change.broker_id)
            if change.configs:
                self.broker_configs[change.broker_id] = change.configs
            else:
                self.broker_configs.pop(change.broker_id, None)
        elif isinstance(change, AdminRequestChanged):
            delta.admin_requests.append(change)  # admin queues are not part of the image

    def _apply_topic(self, change: TopicChanged, delta: _DeltaBuilder) -> None:
        assignment = change.assignment
        name = assignment.topic
        current = self.topics.get(name)
        if change.reason is not TopicChangeReason.DELETED:
            self.topics[name] = assignment
            delta.topics.add(name)
            if current is not None and current.configs != assignment.configs:
                delta.reconfigured.add(name)
            return
        if current is None or current.topic_id != assignment.topic_id:
            return
        del self.topics[name]
        delta.topics.discard(name)
        delta.reconfigured.discard(name)
        delta.deleted.append(current)
        for partition in range(current.partition_count):
            self.partitions.pop(TopicPartition(name, partition), None)

    def snapshot(self) -> MetadataSnapshot:
        """The image as a ``MetadataSnapshot`` at ``seq`` (maps sorted, as the stores give
        them; each topic's replica lists taken from its partition states)."""
        topics = {}
        for name, assignment in sorted(self.topics.items()):
            replicas = [
                state.replicas
                if (state := self.partitions.get(TopicPartition(name, p))) is not None
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
