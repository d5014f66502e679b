"""Removing replicas and logs in ``ReplicaManager``: a deleted topic's replicas and logs, the
replicas a controller's CloseReplica asks to stop or delete, and stray logs (a topic gone, a
partition no longer assigned here, or another incarnation of the topic, told apart by the
topic ID in ``partition.metadata``).

``ReplicaCleanup`` is a part of ``ReplicaManager``: it uses the manager's state, declared below,
and is not used on its own.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING

from replog.errors import InvalidConfigError, StorageError
from replog.isr import Partition
from replog.log.manager import LogManager
from replog.metadata.image import MetadataImage
from replog.metadata.types import AdminPayload, CloseReplica, PartitionState
from replog.topics import ZERO_TOPIC_ID, TopicPartition, topic_uuid

__all__ = ["ReplicaCleanup", "other_incarnation"]

_log = logging.getLogger("replog.broker.driver.replica_manager")


def other_incarnation(stored_id: str | None, topic_id: str) -> bool:
    """Whether a log with ``stored_id`` belongs to another topic incarnation than ``topic_id``
    (False when either is unknown: a log from before topic IDs, or no ID to compare with)."""
    if not stored_id or topic_uuid(topic_id) == ZERO_TOPIC_ID:
        return False
    return topic_uuid(stored_id) != topic_uuid(topic_id)


class ReplicaCleanup:
    """Replica and log removal of ``ReplicaManager`` (module docstring)."""

    if TYPE_CHECKING:  # the manager's state
        broker_id: int
        log_manager: LogManager
        partitions: dict[TopicPartition, Partition]
        image: MetadataImage

        def _touch(self, tp: TopicPartition) -> None: ...

        def _remove_replica(self, tp: TopicPartition, *, delete: bool) -> None: ...

    def _drop_topic(self, topic: str, *, delete: bool, topic_id: str = "") -> None:
        """Forget a deleted topic; with ``delete`` its logs go too (opened or not), except logs
        of another incarnation than ``topic_id`` (when given)."""
        for tp in [tp for tp in self.partitions if tp[0] == topic]:
            self._remove_replica(tp, delete=delete)
        if delete:
            for key in self.log_manager.partitions():
                if key.topic == topic:
                    self._delete_if_incarnation(key, topic_id)

    def _delete_if_incarnation(self, key: TopicPartition, topic_id: str) -> bool:
        """Delete the log of ``key`` unless it belongs to another topic incarnation than
        ``topic_id`` ("" or a log without an ID: any)."""
        try:
            if other_incarnation(self.log_manager.topic_id(key), topic_id):
                return False
            deleted = self.log_manager.delete_log(key)
        except StorageError:
            return False
        if deleted:
            self._touch(TopicPartition(key.topic, key.partition))
        return deleted

    def _delete_stray_logs(self, states: Mapping[TopicPartition, PartitionState]) -> None:
        """Delete the on-disk logs a full snapshot shows are not ours: topic gone, partition
        not assigned here, or another incarnation of the topic (Kafka's stray logs). Hosted
        replicas were brought in line already; this catches logs not opened since start."""
        for key in self.log_manager.partitions():
            tp = key
            if tp in self.partitions:
                continue
            state = states.get(tp)
            assignment = self.image.topics.get(key.topic)
            if assignment is not None and state is not None and self.broker_id in state.replicas:
                try:
                    stray = other_incarnation(self.log_manager.topic_id(key), assignment.topic_id)
                except StorageError:
                    continue
                if not stray:
                    continue
            _log.warning("broker %s: deleting stray log %s", self.broker_id, key)
            self._delete_if_incarnation(key, "")

    # ------------------------------------------------------------------ admin requests

    def on_admin_request(self, payload: AdminPayload) -> None:
        """A request the controller queued for this broker (the driver completes it after).
        CloseReplica with ``delete``: the replica goes unless the current metadata assigns it
        here again; a log of another topic incarnation than the request's stays. StartReplica
        needs nothing: metadata creates replicas."""
        if not isinstance(payload, CloseReplica):
            return
        tp = TopicPartition(payload.topic, payload.partition)
        assignment = self.image.topics.get(payload.topic)
        state = self.image.partitions.get(tp)
        if (
            assignment is not None
            and state is not None
            and self.broker_id in state.replicas
            and not other_incarnation(payload.topic_id, assignment.topic_id)
        ):
            return  # assigned here (again): keep it
        if not payload.delete:
            return
        try:
            key = TopicPartition(*tp)
        except InvalidConfigError:
            return
        if tp not in self.partitions:
            self._delete_if_incarnation(key, payload.topic_id)
            return
        try:  # hosted yet not assigned: the feed is behind the request
            stored_id = self.log_manager.topic_id(key)
        except StorageError:
            return
        if not other_incarnation(stored_id, payload.topic_id):
            self._remove_replica(tp, delete=True)
