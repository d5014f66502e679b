"""Metadata for a ``ReplicaManager`` driven without a broker: the tests stand in for the
metadata channel, the one applier, so each batch goes to the manager's image once, then to
the manager as ``(image, delta)``."""

from __future__ import annotations

from collections.abc import Iterable

from replog.broker.driver.replica_manager import ReplicaManager
from replog.metadata.image import MetadataImage
from replog.metadata.types import MetadataChange, MetadataSnapshot, PartitionChanged, PartitionState


def load_snapshot(rm: ReplicaManager, snapshot: MetadataSnapshot, now_ms: int) -> None:
    """Load ``snapshot`` whole, as the channel does at registration or after a gap."""
    rm.apply_image(MetadataImage.from_snapshot(snapshot), now_ms)


def feed(rm: ReplicaManager, changes: Iterable[MetadataChange], now_ms: int) -> None:
    """Apply one feed batch of ``changes``."""
    image = rm.image
    rm.apply_delta(image, image.apply(changes, image.seq + 1), now_ms)


def set_state(
    rm: ReplicaManager, topic: str, partition: int, state: PartitionState, now_ms: int
) -> None:
    """A feed batch of one PartitionChanged record."""
    seq = rm.image.seq
    feed(rm, [PartitionChanged(seq=seq, topic=topic, partition=partition, state=state)], now_ms)
