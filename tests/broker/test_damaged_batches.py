"""A damaged batch below the recovery point is never served, and the cluster repairs it: the
leader that finds it reports it, the controller moves leadership to a healthy
replica, and the damaged replica truncates to before the damage and fetches the rest again.
Checked end to end with kafka-python reading every record back intact."""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from typing import Any

import pytest
from kafka import KafkaConsumer, KafkaProducer, TopicPartition

from replog import Admin, Cluster
from replog.metadata.types import AdminRequestChanged, DamagedReplica
from tests.waiting import eventually

pytestmark = pytest.mark.system

RECORDS = [b"value-%03d" % i for i in range(40)]


def _wait(what: str, probe: Callable[[], Any], done: Callable[[Any], bool]) -> Any:
    return eventually(probe, what=what, done=done)


def _flip_a_byte_in_the_middle(log_dir: str) -> None:
    segments = sorted(n for n in os.listdir(log_dir) if n.endswith(".log"))
    path = os.path.join(log_dir, segments[0])
    size = os.path.getsize(path)
    with open(path, "r+b") as f:
        f.seek(size // 2)
        byte = f.read(1)
        f.seek(size // 2)
        f.write(bytes([byte[0] ^ 0x10]))


def test_a_damaged_leader_hands_over_and_repairs_itself() -> None:
    with Cluster.local(3) as cluster:
        with Admin(cluster.bootstrap) as admin:
            admin.create_topics("d", 1, 3, {"min.insync.replicas": "2"},
                                replica_assignment=[[1, 2, 3]])  # fmt: skip
        producer = KafkaProducer(
            bootstrap_servers=cluster.bootstrap, acks="all", enable_idempotence=False,
            linger_ms=0, batch_size=64,
        )  # fmt: skip
        for value in RECORDS:
            producer.send("d", value, partition=0).get(timeout=15)
        producer.close()
        _wait(
            "every replica holds the records",
            lambda: [cluster.brokers[b].local_log("d", 0) for b in (1, 2, 3)],
            lambda logs: all(lg is not None and lg.log_end_offset == 40 for lg in logs),
        )
        log = cluster.brokers[1].local_log("d", 0)
        assert log is not None
        partition_dir = log.dir_path
        cluster.stop(1)  # clean: its logs reopen without recovery, below the recovery point
        _flip_a_byte_in_the_middle(partition_dir)
        cluster.start(1)
        _wait("broker 1 back in the ISR", lambda: cluster.coordinator.get_partition_state("d", 0),
              lambda s: 1 in s.isr)  # fmt: skip
        with Admin(cluster.bootstrap) as admin:
            admin.elect_preferred_leaders([("d", 0)])
        _wait("broker 1 leads again", lambda: cluster.coordinator.get_partition_state("d", 0),
              lambda s: s.leader == 1)  # fmt: skip

        consumer = KafkaConsumer(bootstrap_servers=cluster.bootstrap, enable_auto_commit=False,
                                 retry_backoff_ms=100, metadata_max_age_ms=500)  # fmt: skip
        try:
            tp = TopicPartition("d", 0)
            consumer.assign([tp])
            consumer.seek_to_beginning(tp)
            got: list[bytes] = []
            deadline = time.monotonic() + 30
            while len(got) < len(RECORDS) and time.monotonic() < deadline:
                for records in consumer.poll(timeout_ms=200).values():
                    got.extend(r.value for r in records)
        finally:
            consumer.close()
        assert got == RECORDS  # never a damaged batch, nothing skipped

        state = cluster.coordinator.get_partition_state("d", 0)
        assert state is not None and state.leader != 1
        reports = [
            c.request.payload
            for c in cluster.coordinator.changes_since(0).changes
            if isinstance(c, AdminRequestChanged) and isinstance(c.request.payload, DamagedReplica)
        ]
        assert reports and reports[0].broker_id == 1
        # broker 1 truncated below the damage and fetched it again from the new leader
        repaired = _wait(
            "broker 1 repaired and back in the ISR",
            lambda: (cluster.brokers[1].local_log("d", 0),
                     cluster.coordinator.get_partition_state("d", 0)),
            lambda pair: pair[0] is not None and pair[0].log_end_offset == 40 and 1 in pair[1].isr,
        )  # fmt: skip
        assert [r for b in repaired[0].batches() for r in _values(b)] == RECORDS


def _values(batch: bytes) -> list[bytes]:
    from replog.log import decode_records

    return [r.value or b"" for r in decode_records(batch)]
