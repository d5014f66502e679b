"""replog cluster demo: three brokers, a leader killed mid-produce, and no acknowledged record lost.

Run with ``make demo``. Everything below is replog's public API (``import replog``):

1. ``replog.Cluster.local(3)`` starts three brokers in this process on the in-memory coordinator.
2. ``replog.Admin`` creates a topic with 3 partitions, replication factor 3, min ISR 2.
3. ``replog.Producer`` (acks=all) sends records under a progress bar; midway the leader of
   partition 0 is killed (a crash: no controlled shutdown, nothing flushed by it).
4. ``Admin.describe_topics`` shows the new leader and ISR the controller chose.
5. ``replog.Consumer`` (manual assignment) reads every partition back from offset 0.

The demo exits 0 only if every acknowledged record was read back.
"""

from __future__ import annotations

import sys
import time

import replog

TOPIC = "orders"
PARTITIONS = 3
RECORDS = 3_000
CHUNK = 100  # records sent between progress-bar updates
KILLED_PARTITION = 0


def progress(done: int, total: int, note: str = "") -> None:
    """A text progress bar on stderr (no dependency)."""
    width = 40
    filled = width * done // total
    bar = "#" * filled + "." * (width - filled)
    sys.stderr.write(f"\rproducing [{bar}] {done}/{total} {note:<30}")
    if done == total:
        sys.stderr.write("\n")
    sys.stderr.flush()


def say(message: str) -> None:
    """Print a line on stdout below the progress bar (which stays on stderr)."""
    sys.stderr.write("\n")
    sys.stderr.flush()
    print(message, flush=True)


def describe(admin: replog.Admin, partition: int) -> tuple[int, tuple[int, ...]]:
    """(leader, ISR) of one partition of TOPIC."""
    info = admin.describe_topics([TOPIC])[TOPIC].partitions[partition]
    return info.leader, info.isr


def wait_for_new_leader(admin: replog.Admin, old_leader: int, timeout_s: float = 20) -> None:
    """Poll the metadata until the partition has a leader other than the killed broker."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        leader, isr = describe(admin, KILLED_PARTITION)
        if leader not in (-1, old_leader) and old_leader not in isr:
            return
        time.sleep(0.1)


def produce(cluster: replog.Cluster, admin: replog.Admin) -> set[bytes]:
    """Send RECORDS records with acks=all, killing one leader halfway; returns the values the
    cluster acknowledged."""
    acked: set[bytes] = set()
    with replog.Producer(cluster.bootstrap, acks="all") as p:
        for start in range(0, RECORDS, CHUNK):
            if start == RECORDS // 2:
                leader, isr = describe(admin, KILLED_PARTITION)
                say(f"partition {KILLED_PARTITION}: leader {leader}, ISR {list(isr)}")
                print(f"killing broker {leader} (the leader of partition {KILLED_PARTITION})")
                cluster.kill(leader)
                progress(start, RECORDS, f"(broker {leader} killed)")
                wait_for_new_leader(admin, leader)
                leader, isr = describe(admin, KILLED_PARTITION)
                say(f"partition {KILLED_PARTITION}: new leader {leader}, ISR {list(isr)}")
            values = [b"order-%06d" % i for i in range(start, start + CHUNK)]
            futures = [(v, p.send(TOPIC, v, key=v)) for v in values]
            for value, future in futures:
                try:
                    future.result(timeout=60)
                except Exception as exc:  # not acknowledged: it does not count
                    say(f"not acknowledged: {value!r}: {exc}")
                else:
                    acked.add(value)
            progress(start + CHUNK, RECORDS)
    return acked


def consume(cluster: replog.Cluster, admin: replog.Admin) -> list[bytes]:
    """Read every partition of TOPIC from offset 0 up to its high watermark."""
    tps = [(TOPIC, p) for p in range(PARTITIONS)]
    ends = admin.list_offsets(tps)  # "latest": the high watermark of each partition
    values: list[bytes] = []
    with replog.Consumer(cluster.bootstrap, auto_reset="earliest") as consumer:
        consumer.assign(tps)
        deadline = time.monotonic() + 30
        while any(consumer.position(tp) < ends[tp] for tp in tps):
            if time.monotonic() > deadline:
                break
            values.extend(r.value or b"" for r in consumer.poll(timeout_ms=500))
    return values


def main() -> int:
    print("starting 3 brokers (in-memory coordinator)")
    with replog.Cluster.local(3) as cluster, replog.Admin(cluster.bootstrap) as admin:
        admin.create_topics(TOPIC, PARTITIONS, 3, {"min.insync.replicas": "2"})
        print(f"created topic {TOPIC!r}: {PARTITIONS} partitions, replication factor 3, min ISR 2")
        for info in admin.describe_topics([TOPIC])[TOPIC].partitions:
            print(f"  partition {info.partition}: leader {info.leader}, ISR {list(info.isr)}")

        acked = produce(cluster, admin)
        values = consume(cluster, admin)

    read_back = set(values)
    missing = acked - read_back
    print(f"acknowledged: {len(acked)} records")
    print(f"read back:    {len(read_back)} records ({len(values) - len(read_back)} duplicates)")
    if missing or read_back != acked:
        print(f"FAILED: {len(missing)} acknowledged records were not read back", file=sys.stderr)
        return 1
    print("OK: every acknowledged record was read back")
    return 0


if __name__ == "__main__":
    sys.exit(main())
