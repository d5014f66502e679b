"""Topic IDs (KIP-516) tie logs to one topic incarnation.

The black-box defect: delete topic ``t`` while a replica broker is down, restart that broker,
recreate ``t`` with it as the leader -- the new topic served the old records, because brokers
never acted on the close-replica requests queued for them and logs were not tied to a topic
identity. Checked end to end with kafka-python, plus the pieces: ``partition.metadata`` in
Kafka's format, Metadata v10+ topic IDs, stray-log deletion and the admin queue draining.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from typing import Any

import pytest
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition

from replog import Admin, Cluster
from replog.errors import MalformedCheckpointError
from replog.log import REAL_FS
from replog.log.partition_metadata import (
    decode_topic_id,
    encode_topic_id,
    read_partition_metadata,
    write_partition_metadata,
)
from tests.waiting import eventually

pytestmark = pytest.mark.system


def _wait(what: str, probe: Callable[[], Any], done: Callable[[Any], bool]) -> Any:
    return eventually(probe, what=what, done=done)


def _produce(bootstrap: str, topic: str, values: list[bytes]) -> None:
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all", enable_idempotence=False)
    try:
        for value in values:
            producer.send(topic, value, partition=0).get(timeout=15)
    finally:
        producer.close(timeout=10)


def _read(bootstrap: str, topic: str) -> list[bytes]:
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
    try:
        tp = TopicPartition(topic, 0)
        consumer.assign([tp])
        consumer.seek_to_beginning(tp)
        end = consumer.end_offsets([tp])[tp]
        got: list[bytes] = []
        deadline = time.monotonic() + 15
        while consumer.position(tp) < end and time.monotonic() < deadline:
            for records in consumer.poll(timeout_ms=200).values():
                got.extend(r.value for r in records)
        return got
    finally:
        consumer.close()


def test_partition_metadata_is_kafkas_format(tmp_path: Any) -> None:
    topic_id = uuid.uuid4().hex
    write_partition_metadata(REAL_FS, str(tmp_path), topic_id)
    text = (tmp_path / "partition.metadata").read_text()
    assert text == f"version: 0\ntopic_id: {encode_topic_id(topic_id)}\n"
    assert len(encode_topic_id(topic_id)) == 22 and decode_topic_id(encode_topic_id(topic_id))
    assert read_partition_metadata(REAL_FS, str(tmp_path)) == topic_id
    assert read_partition_metadata(REAL_FS, str(tmp_path / "nothing")) is None
    (tmp_path / "partition.metadata").write_text("version: 0\ntopic_id: not-base64!\n")
    with pytest.raises(MalformedCheckpointError):
        read_partition_metadata(REAL_FS, str(tmp_path))


def test_recreated_topic_never_serves_the_old_records() -> None:
    with Cluster.local(3, default_replication_factor=2) as cluster:
        with Admin(cluster.bootstrap) as admin:
            admin.create_topics("t", 1, 2, replica_assignment=[[1, 2]])
        _produce(cluster.bootstrap, "t", [b"old-1", b"old-2", b"old-3"])
        state = cluster.coordinator.get_partition_state("t", 0)
        assert state is not None and set(state.isr) == {1, 2}
        _wait(
            "both replicas hold the records",
            lambda: [cluster.brokers[b].local_log("t", 0) for b in (1, 2)],
            lambda logs: all(log is not None and log.log_end_offset == 3 for log in logs),
        )
        old_id = cluster.coordinator.get_topic("t").topic_id  # type: ignore[union-attr]
        cluster.stop(2)  # the replica broker is down while the topic is deleted
        with Admin(cluster.bootstrap) as admin:
            admin.delete_topics(["t"])
        _wait("the deletion", lambda: cluster.coordinator.get_topic("t"), lambda t: t is None)
        assert cluster.coordinator.pending_admin_requests(2)  # its CloseReplica waits for it
        cluster.start(2)
        _wait("broker 2 to drain its queue", lambda: cluster.coordinator.pending_admin_requests(2),
              lambda pending: pending == [])  # fmt: skip
        assert cluster.call(lambda: cluster.brokers[2].log_manager.partitions()) == []
        with Admin(cluster.bootstrap) as admin:
            admin.create_topics("t", 1, 2, replica_assignment=[[2, 3]])
        new_id = cluster.coordinator.get_topic("t").topic_id  # type: ignore[union-attr]
        assert new_id != old_id
        _wait("a leader", lambda: cluster.coordinator.get_partition_state("t", 0),
              lambda s: s is not None and s.leader == 2)  # fmt: skip
        assert _read(cluster.bootstrap, "t") == []
        _produce(cluster.bootstrap, "t", [b"new-1"])
        assert _read(cluster.bootstrap, "t") == [b"new-1"]
        kafka_admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap)
        try:
            (described,) = kafka_admin.describe_topics(["t"])
        finally:
            kafka_admin.close()
        assert uuid.UUID(str(described["topic_id"])) == uuid.UUID(new_id)


def test_a_log_of_a_deleted_topic_is_not_served_by_its_successor() -> None:
    """The broker was down and its queue lost the CloseReplica: at start-up it finds its log
    of ``s`` belongs to the deleted incarnation (``partition.metadata``) and deletes it before
    serving the recreated ``s`` it now leads."""
    with Cluster.local(2, default_replication_factor=2) as cluster:
        with Admin(cluster.bootstrap) as admin:
            admin.create_topics("s", 1, 2, replica_assignment=[[1, 2]])
        _produce(cluster.bootstrap, "s", [b"x"])
        _wait(
            "the follower's copy",
            lambda: cluster.brokers[2].local_log("s", 0),
            lambda log: log is not None and log.log_end_offset == 1,
        )
        cluster.stop(2)
        with Admin(cluster.bootstrap) as admin:
            admin.delete_topics(["s"])
            _wait("the deletion", lambda: cluster.coordinator.get_topic("s"), lambda t: t is None)
            for request in cluster.coordinator.pending_admin_requests(2):  # lost, say
                cluster.coordinator.complete_admin_request(request.request_id)
        cluster.start(2)
        with Admin(cluster.bootstrap) as admin:
            admin.create_topics("s", 1, 2, replica_assignment=[[2, 1]])
        _wait(
            "broker 2 leads the new s",
            lambda: cluster.coordinator.get_partition_state("s", 0),
            lambda state: state is not None and state.leader == 2,
        )
        log = cluster.brokers[2].local_log("s", 0)
        assert log is not None and log.log_end_offset == 0
        assert _read(cluster.bootstrap, "s") == []
