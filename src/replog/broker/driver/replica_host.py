"""``ReplicaHost``: what the replica manager's parts (``ReplicaAdmin``, ``ReplicaCleanup``) use
of it -- who this broker is, its logs, its hosted replicas, the metadata image it reads, and the
three steps a part may ask of it."""

from __future__ import annotations

from typing import Protocol

from replog.isr import Partition, PartitionConfig
from replog.log.manager import LogManager
from replog.metadata.image import MetadataImage
from replog.topics import TopicPartition

__all__ = ["ReplicaHost"]


class ReplicaHost(Protocol):
    """The members of ``ReplicaManager`` its parts use."""

    @property
    def broker_id(self) -> int:
        """This broker's id."""

    @property
    def log_manager(self) -> LogManager:
        """The broker's logs."""

    @property
    def partition_config(self) -> PartitionConfig:
        """The broker's own partition settings."""

    @property
    def partitions(self) -> dict[TopicPartition, Partition]:
        """The hosted replicas."""

    @property
    def image(self) -> MetadataImage:
        """The metadata image the manager reads."""

    def _touch(self, tp: TopicPartition) -> None:
        """The partition's data or role changed (long polls wake)."""

    def _collect(self, tp: TopicPartition, replica: Partition) -> None:
        """Take the replica's outputs (completions, ISR changes)."""

    def _remove_replica(self, tp: TopicPartition, *, delete: bool) -> None:
        """Stop serving the replica (``delete``: its log goes too)."""
