"""The administrative side of ``ReplicaManager``: the settings its replicas run with (topic
configs over dynamic broker configs over the broker's own, ``replog.config_layers``), applied
again when configs change, and DeleteRecords on a leader (log start moved, low watermark).

``ReplicaAdmin`` is a part ``ReplicaManager`` owns (``rm.admin``); it sees the manager through
``ReplicaHost`` (``replog.broker.driver.replica_host``), the members it uses.
"""

from __future__ import annotations

import attrs

from replog.broker.driver.replica_host import ReplicaHost
from replog.config_layers import ConfigLayers, topic_settings
from replog.errors import ErrorCode, StorageError
from replog.isr import Partition, PartitionConfig
from replog.log.log import Log
from replog.metadata.types import ALL_BROKERS
from replog.topic_config import TopicSettings
from replog.topics import TopicPartition

__all__ = ["ReplicaAdmin"]


def _as_log(replica: Partition) -> Log | None:
    log = replica.log
    return log if isinstance(log, Log) else None


class ReplicaAdmin:
    """Settings and DeleteRecords of ``ReplicaManager`` (module docstring)."""

    def __init__(self, manager: ReplicaHost) -> None:
        self._rm = manager

    # ------------------------------------------------------------------ settings

    def topic_settings(self, topic: str) -> TopicSettings:
        """The topic's settings: its stored configs over this broker's dynamic configs and the
        cluster-wide dynamic default (``replog.config_layers``); the rest is this broker's own
        config (the log manager's default ``LogConfig``, ``partition_config``)."""
        assignment = self._rm.image.topics.get(topic)
        layers = ConfigLayers(
            topic=dict(() if assignment is None else assignment.configs),
            broker=dict(self._rm.image.broker_configs.get(self._rm.broker_id, ())),
            cluster=dict(self._rm.image.broker_configs.get(ALL_BROKERS, ())),
        )
        return topic_settings(layers)

    def partition_config(self, settings: TopicSettings) -> PartitionConfig:
        config = self._rm.partition_config
        if settings.min_insync_replicas is not None:
            config = attrs.evolve(config, min_insync_replicas=settings.min_insync_replicas)
        return config

    def refresh_settings(self, topics: set[str] | None, now_ms: int) -> None:
        """Configs changed (of ``topics``; None: maybe all): hosted replicas take the new log
        settings (retention at its next pass, segment settings at the next roll) and min ISR
        at once; a leader whose HW the new min ISR lets move moves it."""
        for tp, replica in sorted(self._rm.partitions.items()):
            if topics is not None and tp[0] not in topics:
                continue
            settings = self.topic_settings(tp[0])
            log = _as_log(replica)
            if log is not None:
                log.config = settings.log_config(self._rm.log_manager.default_config)
            replica.config = self.partition_config(settings)
            if replica.is_leader and replica.maybe_increment_leader_hw(now_ms):
                self._rm._touch(tp)
            self._rm._collect(tp, replica)

    # ------------------------------------------------------------------ DeleteRecords

    def delete_records(
        self, topic: str, partition: int, offset: int, now_ms: int
    ) -> tuple[ErrorCode, int]:
        """Move the leader's log start up to ``offset`` (-1: the HW; past the HW:
        OFFSET_OUT_OF_RANGE) and write the log-start checkpoint; followers follow through
        their fetch answers. Returns (error, the leader's log start offset now)."""
        tp = TopicPartition(topic, partition)
        replica = self._rm.partitions.get(tp)
        log = None if replica is None else _as_log(replica)
        if replica is None or log is None:
            return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, -1
        if not replica.is_leader:
            return ErrorCode.NOT_LEADER_OR_FOLLOWER, -1
        target = log.high_watermark if offset == -1 else offset
        if not 0 <= target <= log.high_watermark:
            return ErrorCode.OFFSET_OUT_OF_RANGE, -1
        try:
            if log.maybe_increment_log_start_offset(target):
                self._rm.log_manager.checkpoint_log_start_offsets()
        except StorageError:
            return ErrorCode.KAFKA_STORAGE_ERROR, -1
        self._rm._touch(tp)
        return ErrorCode.NONE, log.log_start_offset

    def low_watermark(self, topic: str, partition: int) -> int:
        """The lowest log start offset among the leader and its live followers (Kafka's
        ``lowWatermarkIfLeader``); -1 when not the leader or a live follower's is unknown."""
        replica = self._rm.partitions.get(TopicPartition(topic, partition))
        log = None if replica is None else _as_log(replica)
        if replica is None or log is None or not replica.is_leader:
            return -1
        low = log.log_start_offset
        for broker_id in replica.assigned:
            state = replica.replica_state(broker_id)
            if (
                broker_id != self._rm.broker_id
                and broker_id in self._rm.image.brokers
                and state is not None
            ):
                low = min(low, state.log_start_offset)
        return low
