"""The contract suite's shared part: ``replay`` (the feed onto a snapshot), the fixtures and
the helpers every group of contract tests uses (``ContractBase``). See ``replog.coord.testing``."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import ClassVar

import attrs
import pytest

from replog.clock import monotonic_s, sleep_s
from replog.coord.contract import Coordinator, SessionFaults
from replog.metadata.types import (
    AdminRequestChanged,
    AdminRequestChangeReason,
    BrokerChanged,
    BrokerConfigsChanged,
    BrokerInfo,
    ControllerChanged,
    ControllerInfo,
    MetadataChange,
    MetadataSnapshot,
    PartitionChanged,
    TopicChanged,
    TopicChangeReason,
)

__all__ = ["EMPTY", "ContractBase", "CoordinatorFactory", "replay"]


CoordinatorFactory = Callable[[], Coordinator]


def replay(snapshot: MetadataSnapshot, changes: tuple[MetadataChange, ...]) -> MetadataSnapshot:
    """Apply feed records to a snapshot, as a follower would (records at or after
    ``snapshot.seq``; earlier ones are already in it). The suite checks that replaying the
    whole feed onto an empty image gives the store's own snapshot."""
    brokers = dict(snapshot.brokers)
    topics = dict(snapshot.topics)
    partitions = dict(snapshot.partitions)
    broker_configs = dict(snapshot.broker_configs)
    controller, epoch, seq = snapshot.controller, snapshot.controller_epoch, snapshot.seq
    for change in changes:
        if change.seq < snapshot.seq:
            continue
        seq = change.seq + 1
        match change:
            case BrokerChanged(broker=None, broker_id=broker_id):
                brokers.pop(broker_id, None)
            case BrokerChanged(broker=BrokerInfo() as broker):
                brokers[broker.broker_id] = broker
            case TopicChanged(reason=TopicChangeReason.DELETED, assignment=a):
                topics.pop(a.topic, None)
                for p in range(a.partition_count):
                    partitions.pop((a.topic, p), None)
            case TopicChanged(assignment=a):
                topics[a.topic] = a
            case PartitionChanged(topic=t, partition=p, state=s):
                partitions[(t, p)] = s
                old = topics[t]
                replicas = list(old.replicas)
                replicas[p] = s.replicas
                topics[t] = attrs.evolve(old, replicas=replicas)
            case ControllerChanged(controller=c):
                controller = c
                epoch = max(epoch, c.controller_epoch if c is not None else 0)
            case BrokerConfigsChanged(broker_id=broker_id, configs=configs):
                if configs:
                    broker_configs[broker_id] = configs
                else:
                    broker_configs.pop(broker_id, None)
            case _:
                pass
    return MetadataSnapshot(
        seq=seq,
        brokers=dict(sorted(brokers.items())),
        topics=dict(sorted(topics.items())),
        partitions=dict(sorted(partitions.items())),
        controller=controller,
        controller_epoch=epoch,
        broker_configs=dict(sorted(broker_configs.items())),
    )


EMPTY = MetadataSnapshot(
    seq=0, brokers={}, topics={}, partitions={}, controller=None, controller_epoch=0
)


class ContractBase:
    """Fixtures and helpers of the contract tests (settings a backend's suite may override)."""

    session_timeout_ms: ClassVar[int] = 6_000
    settle_timeout_s: ClassVar[float] = 5.0

    # ---- fixtures and helpers ----

    @pytest.fixture
    def coord(self, coordinator_factory: CoordinatorFactory) -> Iterator[Coordinator]:
        """A fresh store, closed after the test."""
        coordinator = coordinator_factory()
        try:
            yield coordinator
        finally:
            coordinator.close()

    def faults(self, coord: Coordinator) -> SessionFaults:
        """The backend's fault hooks, or skip the test."""
        if not isinstance(coord, SessionFaults):
            pytest.skip(f"{type(coord).__name__} does not implement SessionFaults")
        return coord

    def eventually(self, predicate: Callable[[], bool], what: str) -> None:
        """Wait (bounded) until ``predicate()`` holds; listeners may be asynchronous."""
        deadline = monotonic_s() + self.settle_timeout_s
        while not predicate():
            if monotonic_s() > deadline:
                pytest.fail(f"timed out waiting for: {what}")
            sleep_s(0.005)

    def register(self, coord: Coordinator, broker_id: int, rack: str | None = None) -> BrokerInfo:
        """Register ``broker_id`` at 127.0.0.1:9000+id."""
        return coord.register_broker(
            broker_id,
            "127.0.0.1",
            9000 + broker_id,
            rack=rack,
            session_timeout_ms=self.session_timeout_ms,
        )

    def cluster(self, coord: Coordinator, size: int = 3) -> tuple[list[BrokerInfo], ControllerInfo]:
        """Register brokers 1..size and elect broker 1 controller."""
        brokers = [self.register(coord, b) for b in range(1, size + 1)]
        controller = coord.elect_controller(1, brokers[0].incarnation_epoch)
        assert controller.controller_id == 1
        return brokers, controller

    def all_changes(self, coord: Coordinator) -> list[MetadataChange]:
        """The whole retained feed."""
        changes: list[MetadataChange] = []
        seq = 0
        while True:
            batch = coord.changes_since(seq, max_changes=7)
            changes.extend(batch.changes)
            if not batch.changes:
                return changes
            seq = batch.next_seq

    def completions(self, coord: Coordinator) -> list[AdminRequestChanged]:
        """The feed's AdminRequestChanged(COMPLETED) records."""
        return [
            c
            for c in self.all_changes(coord)
            if isinstance(c, AdminRequestChanged) and c.reason is AdminRequestChangeReason.COMPLETED
        ]
