"""Removing replicas and logs in ``ReplicaManager``: a deleted topic's replicas and logs, the
replicas a controller's CloseReplica asks to stop or delete, and stray logs (a topic gone, a
partition no longer assigned here, or another incarnation of the topic, told apart by the
topic ID in ``partition.metadata``).

``ReplicaCleanup`` is a part ``ReplicaManager`` owns (``rm.cleanup``); it sees the manager
through ``ReplicaHost`` (``replog.broker.driver.replica_host``), the members it uses.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping

from replog.broker.driver.replica_host import ReplicaHost
from replog.errors import InvalidConfigError, StorageError
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

    def __init__(self, manager: ReplicaHost) -> None:
        self._rm = manager

    def drop_topic(self, topic: str, *, delete: bool, topic_id: str = "") -> None:
        """Forget a deleted topic; with ``delete`` its logs go too (opened or not), except logs
        of another incarnation than ``topic_id`` (when given)."""
        for tp in [tp for tp in self._rm.partitions if tp[0] == topic]:
            self._rm._remove_replica(tp, delete=delete)
        if delete:
            for key in self._rm.log_manager.partitions():
                if key.topic == topic:
                    self.delete_if_incarnation(key, topic_id)

    def delete_if_incarnation(self, key: TopicPartition, topic_id: str) -> bool:
        """Delete the log of ``key`` unless it belongs to another topic incarnation than
        ``topic_id`` ("" or a log without an ID: any)."""
        try:
            if other_incarnation(self._rm.log_manager.topic_id(key), topic_id):
                return False
            deleted = self._rm.log_manager.delete_log(key)
        except StorageError:
            return False
        if deleted:
            self._rm._touch(TopicPartition(key.topic, key.partition))
        return deleted

    def delete_stray_logs(self, states: Mapping[TopicPartition, PartitionState]) -> None:
        """Delete the on-disk logs a full snapshot shows are not ours: topic gone, partition
        not assigned here, or another incarnation of the topic (Kafka's stray logs). Hosted
        replicas were brought in line already; this catches logs not opened since start."""
        for key in self._rm.log_manager.partitions():
            if key in self._rm.partitions:
                continue
            state = states.get(key)
            assignment = self._rm.image.topics.get(key.topic)
            if (
                assignment is not None
                and state is not None
                and self._rm.broker_id in state.replicas
            ):
                try:
                    stray = other_incarnation(
                        self._rm.log_manager.topic_id(key), assignment.topic_id
                    )
                except StorageError:
                    continue
                if not stray:
                    continue
            _log.warning("broker %s: deleting stray log %s", self._rm.broker_id, key)
            self.delete_if_incarnation(key, "")

    # ------------------------------------------------------------------ admin requests

    def on_admin_request(self, payload: AdminPayload) -> None:
        """A request the controller queued for this broker (the driver completes it after).
        CloseReplica with ``delete``: the replica goes unless the current metadata assigns it
        here again; a log of another topic incarnation than the request's stays. StartReplica
        needs nothing: metadata creates replicas."""
        if not isinstance(payload, CloseReplica):
            return
        tp = TopicPartition(payload.topic, payload.partition)
        assignment = self._rm.image.topics.get(payload.topic)
        state = self._rm.image.partitions.get(tp)
        if (
            assignment is not None
            and state is not None
            and self._rm.broker_id in state.replicas
            and not other_incarnation(payload.topic_id, assignment.topic_id)
        ):
            return  # assigned here (again): keep it
        if not payload.delete:
            return
        try:
            key = TopicPartition(*tp)
        except InvalidConfigError:
            return
        if tp not in self._rm.partitions:
            self.delete_if_incarnation(key, payload.topic_id)
            return
        try:  # hosted yet not assigned: the feed is behind the request
            stored_id = self._rm.log_manager.topic_id(key)
        except StorageError:
            return
        if not other_incarnation(stored_id, payload.topic_id):
            self._rm._remove_replica(tp, delete=True)
