"""One consumer-group member of a Kafka client library, as a process of its own (the group tests
kill members with SIGKILL, which only a process can take).

Usage: python group_member.py <client> <bootstrap> <group> <topic> <mode>

``client`` is replog, kafka-python, confluent-kafka or aiokafka; ``mode`` is ``drain:N`` (read
until N records have come, commit, close cleanly, exit) or ``member`` (read and commit after
every batch until a line "close" arrives on stdin, then close cleanly). Every consumer reads from
the earliest offset when the group has none, commits by hand, and uses a 4 s session timeout
(500 ms heartbeats). A commit that the client refuses because a rebalance is under way (kafka-python
and aiokafka raise RebalanceInProgressError when a SyncGroup is still in flight, as against a Kafka
broker) is retried after the next poll, as the clients' documentation says; records redelivered
after such a rebalance count once. Prints JSON lines on stdout:

    {"assigned": [[topic, partition], ...]}            whenever the assignment changes
    {"records": [[partition, offset, value], ...]}     each batch read
    {"committed": {"<partition>": offset, ...}}        after each commit (the next offsets)
    {"closed": true}                                   after a clean close
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import sys
import threading
import warnings
from collections.abc import Callable
from typing import Any

SESSION_MS = 4_000
HEARTBEAT_MS = 500
POLL_INTERVAL_MS = 10_000


def emit(**event: Any) -> None:
    sys.stdout.write(json.dumps(event) + "\n")
    sys.stdout.flush()


class Stop:
    """When to stop: N records read (drain), or "close" on stdin (member)."""

    def __init__(self, mode: str) -> None:
        self.want = int(mode.split(":")[1]) if mode.startswith("drain:") else None
        self.seen = 0
        self._closing = threading.Event()
        if self.want is None:
            threading.Thread(target=self._read_stdin, daemon=True).start()

    def _read_stdin(self) -> None:
        for line in sys.stdin:
            if line.strip() == "close":
                break
        self._closing.set()

    def done(self) -> bool:
        if self.want is not None:
            return self.seen >= self.want
        return self._closing.is_set()


class Tracker:
    """Reports assignment changes, batches and commits."""

    def __init__(self) -> None:
        self.assigned: list[tuple[str, int]] | None = None
        self.next_offsets: dict[int, int] = {}
        self.read: set[tuple[int, int]] = set()

    def assignment(self, tps: list[tuple[str, int]]) -> None:
        tps = sorted(tps)
        if tps != self.assigned:
            self.assigned = tps
            emit(assigned=tps)

    def batch(self, rows: list[tuple[int, int, str]]) -> int:
        """Report a batch; returns how many of its records were not read before."""
        if rows:
            emit(records=rows)
        new = 0
        for partition, offset, _ in rows:
            self.next_offsets[partition] = offset + 1
            if (partition, offset) not in self.read:
                self.read.add((partition, offset))
                new += 1
        return new

    def committed(self) -> None:
        emit(committed={str(p): o for p, o in sorted(self.next_offsets.items())})


def run_replog(bootstrap: str, group: str, topic: str, stop: Stop, track: Tracker) -> None:
    from replog import Consumer

    consumer = Consumer(
        bootstrap_servers=bootstrap,
        group_id=group,
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        session_timeout_ms=SESSION_MS,
        heartbeat_interval_ms=HEARTBEAT_MS,
        max_poll_interval_ms=POLL_INTERVAL_MS,
        client_id="replog-member",
    )
    consumer.subscribe([topic])
    while not stop.done():
        records = consumer.poll(timeout_ms=200)
        track.assignment(consumer.assignment())
        stop.seen += track.batch(
            [(r.partition, r.offset, (r.value or b"").decode()) for r in records]
        )
        if records:
            consumer.commit()
            track.committed()
    consumer.close()


def run_kafka_python(bootstrap: str, group: str, topic: str, stop: Stop, track: Tracker) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        import kafka
        import kafka.errors

    consumer = kafka.KafkaConsumer(
        bootstrap_servers=bootstrap,
        group_id=group,
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        session_timeout_ms=SESSION_MS,
        heartbeat_interval_ms=HEARTBEAT_MS,
        max_poll_interval_ms=POLL_INTERVAL_MS,
        request_timeout_ms=SESSION_MS + 10_000,
    )
    # Topic metadata first, so the first generation's assignment already covers the topic:
    # kafka-python 3.0.12 at times leaves a follow-up generation's assignment unapplied.
    while not consumer.partitions_for_topic(topic):
        pass
    consumer.subscribe([topic])
    uncommitted = False
    while not stop.done() or uncommitted:
        batches = consumer.poll(timeout_ms=200)
        track.assignment([(tp.topic, tp.partition) for tp in consumer.assignment()])
        rows = [
            (r.partition, r.offset, r.value.decode())
            for records in batches.values()
            for r in records
        ]
        stop.seen += track.batch(rows)
        if rows or uncommitted:
            try:
                consumer.commit()
            except (kafka.errors.RebalanceInProgressError, kafka.errors.CommitFailedError):
                uncommitted = True  # retried after the next poll completes the rebalance
                continue
            uncommitted = False
            track.committed()
    consumer.close()


def run_confluent(bootstrap: str, group: str, topic: str, stop: Stop, track: Tracker) -> None:
    import confluent_kafka

    consumer = confluent_kafka.Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "session.timeout.ms": SESSION_MS,
            "heartbeat.interval.ms": HEARTBEAT_MS,
            "max.poll.interval.ms": POLL_INTERVAL_MS,
        }
    )
    consumer.subscribe([topic])
    while not stop.done():
        messages = consumer.consume(num_messages=500, timeout=0.2)
        track.assignment([(tp.topic, tp.partition) for tp in consumer.assignment()])
        rows = []
        for message in messages:
            if message.error() is not None:
                raise RuntimeError(f"consume: {message.error()}")
            rows.append((message.partition(), message.offset(), message.value().decode()))
        stop.seen += track.batch(rows)
        if rows:
            consumer.commit(asynchronous=False)
            track.committed()
    consumer.close()


def run_aiokafka(bootstrap: str, group: str, topic: str, stop: Stop, track: Tracker) -> None:
    from aiokafka import AIOKafkaConsumer
    from aiokafka.errors import CommitFailedError, RebalanceInProgressError

    async def main() -> None:
        consumer = AIOKafkaConsumer(
            topic,
            bootstrap_servers=bootstrap,
            group_id=group,
            auto_offset_reset="earliest",
            enable_auto_commit=False,
            session_timeout_ms=SESSION_MS,
            heartbeat_interval_ms=HEARTBEAT_MS,
            max_poll_interval_ms=POLL_INTERVAL_MS,
        )
        await consumer.start()
        try:
            uncommitted = False
            while not stop.done() or uncommitted:
                batches = await consumer.getmany(timeout_ms=200)
                track.assignment([(tp.topic, tp.partition) for tp in consumer.assignment()])
                rows = [
                    (r.partition, r.offset, r.value.decode())
                    for records in batches.values()
                    for r in records
                ]
                stop.seen += track.batch(rows)
                if rows or uncommitted:
                    try:
                        await consumer.commit()
                    except (RebalanceInProgressError, CommitFailedError):
                        uncommitted = True  # retried after the next poll
                        continue
                    uncommitted = False
                    track.committed()
        finally:
            await consumer.stop()

    asyncio.run(main())


CLIENTS: dict[str, Callable[[str, str, str, Stop, Tracker], None]] = {
    "replog": run_replog,
    "kafka-python": run_kafka_python,
    "confluent-kafka": run_confluent,
    "aiokafka": run_aiokafka,
}


def main() -> None:
    client, bootstrap, group, topic, mode = sys.argv[1:6]
    log_file = os.environ.get("GROUP_MEMBER_LOG")  # for debugging a client: its own log
    if log_file:
        logging.basicConfig(
            filename=f"{log_file}.{os.getpid()}",
            level=logging.DEBUG,
            format="%(relativeCreated)d %(threadName)s %(name)s %(message)s",
        )
    else:  # the client's warnings go to stderr, which a failing test prints
        logging.basicConfig(
            level=logging.WARNING, format="%(relativeCreated)d %(name)s %(message)s"
        )
    CLIENTS[client](bootstrap, group, topic, Stop(mode), Tracker())
    emit(closed=True)


if __name__ == "__main__":
    main()
