"""Logs tied to topic incarnations in the ReplicaManager: ``partition.metadata`` at creation,
stray logs deleted when a snapshot shows they are not ours, and CloseReplica requests acted
on without ever deleting a later incarnation's log."""

from __future__ import annotations

import uuid

from replog.broker import BrokerConfig, ReplicaManager
from replog.clock import ManualClock
from replog.log import LogManager, encode_batch
from replog.log.manager import TopicPartition
from replog.metadata.types import (
    CloseReplica,
    MetadataSnapshot,
    PartitionState,
    TopicAssignment,
)
from tests.metadata_feed import load_snapshot

OLD, NEW = uuid.uuid4().hex, uuid.uuid4().hex


def _manager(path: str, broker_id: int = 1) -> ReplicaManager:
    config = BrokerConfig(broker_id=broker_id, log_dirs=(path,))
    logs = LogManager.open(list(config.log_dirs), clock=ManualClock())
    return ReplicaManager(broker_id, logs, config.partition_config(), broker_epoch=broker_id)


def _snapshot(topics: dict[str, tuple[str, tuple[int, ...]]]) -> MetadataSnapshot:
    """One-partition topics: name -> (topic id, replicas); broker 1 leads where it is one."""
    assignments = {
        name: TopicAssignment(topic=name, topic_id=tid, replicas=[replicas])
        for name, (tid, replicas) in topics.items()
    }
    states = {
        (name, 0): PartitionState(
            replicas=replicas, leader=replicas[0], leader_epoch=0, isr=replicas
        )
        for name, (_, replicas) in topics.items()
    }
    return MetadataSnapshot(
        seq=1, brokers={}, topics=assignments, partitions=states, controller=None,
        controller_epoch=0,
    )  # fmt: skip


def _with_records(path: str, topics: dict[str, tuple[str, tuple[int, ...]]]) -> None:
    """A first broker run: logs created for ``topics``, one record each, clean stop."""
    rm = _manager(path)
    load_snapshot(rm, _snapshot(topics), 0)
    for name in topics:
        _, result = rm.produce(name, 0, encode_batch([b"old"], base_timestamp=0), 1, 1)
        assert result is not None and result.base_offset == 0
    rm.log_manager.shutdown()


def test_new_logs_carry_the_topic_id(tmp_path: object) -> None:
    rm = _manager(str(tmp_path))
    load_snapshot(rm, _snapshot({"t": (OLD, (1,))}), 0)
    assert rm.log_manager.topic_id(TopicPartition("t", 0)) == OLD


def test_a_snapshot_deletes_the_logs_that_are_not_ours(tmp_path: object) -> None:
    """Topic gone, partition moved away, another incarnation: deleted. Ours: kept intact."""
    path = str(tmp_path)
    _with_records(path, {"gone": (OLD, (1,)), "moved": (OLD, (1,)), "again": (OLD, (1,)),
                         "kept": (OLD, (1,))})  # fmt: skip
    rm = _manager(path)
    load_snapshot(
        rm, _snapshot({"moved": (OLD, (2,)), "again": (NEW, (1,)), "kept": (OLD, (1,))}), 0
    )
    assert [tp.topic for tp in rm.log_manager.partitions()] == ["again", "kept"]
    again, kept = rm.log("again", 0), rm.log("kept", 0)
    assert again is not None and again.log_end_offset == 0  # a fresh log of the new topic
    assert rm.log_manager.topic_id(TopicPartition("again", 0)) == NEW
    assert kept is not None and kept.log_end_offset == 1


def test_close_replica_of_an_old_incarnation_keeps_the_new_log(tmp_path: object) -> None:
    rm = _manager(str(tmp_path))
    load_snapshot(rm, _snapshot({"t": (NEW, (1,))}), 0)
    rm.produce("t", 0, encode_batch([b"new"], base_timestamp=0), 1, 1)
    rm.cleanup.on_admin_request(CloseReplica(topic="t", partition=0, topic_id=OLD))
    log = rm.log("t", 0)
    assert log is not None and log.log_end_offset == 1
    # assigned here: even a request for this incarnation leaves it (it moved back)
    rm.cleanup.on_admin_request(CloseReplica(topic="t", partition=0, topic_id=NEW))
    assert rm.log("t", 0) is not None


def test_close_replica_deletes_a_log_no_longer_assigned_here(tmp_path: object) -> None:
    path = str(tmp_path)
    _with_records(path, {"t": (OLD, (1,)), "u": (OLD, (1,))})
    rm = _manager(path)
    # a broker that has not opened these logs yet, with metadata no longer naming them
    rm.cleanup.on_admin_request(CloseReplica(topic="t", partition=0, topic_id=OLD))
    rm.cleanup.on_admin_request(CloseReplica(topic="u", partition=0))  # no ID: an older request
    rm.cleanup.on_admin_request(CloseReplica(topic="v", partition=0, topic_id=OLD))  # nothing there
    assert rm.log_manager.partitions() == []
