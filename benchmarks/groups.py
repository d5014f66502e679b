"""Group benchmarks: ``python -m benchmarks.groups [--case shard|cluster|all]``.

Prints one JSON line per case.

- ``shard``: how many requests per second one ``GroupCoordinatorShard`` handles once its groups
  are Stable, alternating a Heartbeat and an OffsetCommit per member (each commit's write
  reported written at once), with ``next_deadline_ms()`` asked after every input as a broker's
  event loop would. Cases vary the number of groups and members per group.
- ``cluster``: a live 3-broker replog cluster (``Cluster.local``) and a 6-partition
  topic. Three replog ``Consumer``s read all of it, in a group (``group_id``, subscribe, a
  commit at the end) and by manual assignment (two partitions each), interleaved over
  ``--repeats``; records/s are counted from when every member owns its partitions to the last
  record (the join is timed separately), and the JSON gives the median and range of each mode
  and of their ratio. Then the rebalance after a member dies: a member in a child process is
  SIGKILLed; the time from its session timeout expiring to the two survivors owning all six
  partitions is the rebalance time.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import signal
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

from replog import Admin, Cluster, Consumer, Producer
from replog.errors import ErrorCode
from replog.groups import Effects, GroupConfig, GroupCoordinatorShard
from replog.protocol.messages import (
    HeartbeatRequest,
    JoinGroupRequest,
    JoinGroupRequestProtocol,
    OffsetCommitRequest,
    OffsetCommitRequestPartition,
    OffsetCommitRequestTopic,
    SyncGroupRequest,
    SyncGroupRequestAssignment,
)


class _Owner:
    """Completes every write at once; counts nothing but time."""

    def __init__(self) -> None:
        suffixes = (str(n) for n in itertools.count())
        self.shard = GroupCoordinatorShard(
            0,
            config=GroupConfig(initial_rebalance_delay_ms=0),
            member_id_suffix=lambda: next(suffixes),
            now_ms=0,
        )
        self.ids = itertools.count()
        self.now_ms = 0

    def run(self, effects: Effects) -> None:
        for write in effects.writes:
            done = self.shard.on_write_complete(write.write_id, ErrorCode.NONE, now_ms=self.now_ms)
            self.run(done)
        self.shard.next_deadline_ms()


def _stable_groups(owner: _Owner, groups: int, members: int) -> None:
    protocols = [JoinGroupRequestProtocol(name="range", metadata=b"m")]
    for g in range(groups):
        for _ in range(members):
            request = JoinGroupRequest(
                group_id=f"group-{g}",
                session_timeout_ms=30_000,
                rebalance_timeout_ms=60_000,
                protocol_type="consumer",
                protocols=protocols,
            )
            owner.run(
                owner.shard.on_join_group(
                    next(owner.ids),
                    request,
                    api_version=3,
                    client_id="c",
                    client_host="h",
                    now_ms=owner.now_ms,
                )
            )
    owner.now_ms += 1
    owner.run(owner.shard.on_tick(owner.now_ms))
    for g in range(groups):
        group = owner.shard.group(f"group-{g}")
        assert group is not None
        for member_id in list(group.members):
            assignments = []
            if group.is_leader(member_id):
                assignments = [
                    SyncGroupRequestAssignment(member_id=m, assignment=b"a") for m in group.members
                ]
            request = SyncGroupRequest(
                group_id=group.group_id,
                generation_id=group.generation_id,
                member_id=member_id,
                assignments=assignments,
            )
            owner.run(
                owner.shard.on_sync_group(
                    next(owner.ids), request, api_version=3, now_ms=owner.now_ms
                )
            )


def measure(groups: int, members: int, rounds: int) -> float:
    """Requests per second for ``groups`` x ``members`` over ``rounds`` rounds."""
    owner = _Owner()
    _stable_groups(owner, groups, members)
    shard = owner.shard
    count = 0
    started = time.perf_counter()
    for round_ in range(rounds):
        owner.now_ms += 1_000
        for g in range(groups):
            group = shard.group(f"group-{g}")
            assert group is not None
            for member_id in list(group.members):
                heartbeat = HeartbeatRequest(
                    group_id=group.group_id, generation_id=group.generation_id, member_id=member_id
                )
                owner.run(shard.on_heartbeat(next(owner.ids), heartbeat, now_ms=owner.now_ms))
                partition = OffsetCommitRequestPartition(
                    partition_index=0, committed_offset=round_, committed_metadata=""
                )
                commit = OffsetCommitRequest(
                    group_id=group.group_id,
                    generation_id_or_member_epoch=group.generation_id,
                    member_id=member_id,
                    topics=[OffsetCommitRequestTopic(name="t", partitions=[partition])],
                )
                owner.run(shard.on_offset_commit(next(owner.ids), commit, now_ms=owner.now_ms))
                count += 2
        owner.run(shard.on_tick(owner.now_ms))
    return count / (time.perf_counter() - started)


# ---------------------------------------------------------------------------- live cluster

TOPIC = "bench-groups"
PARTITIONS = 6
MEMBERS = 3
SESSION_TIMEOUT_MS = 3_000
CONSUMER = {
    "auto_offset_reset": "earliest",
    "enable_auto_commit": False,
    "heartbeat_interval_ms": 500,
    "fetch_max_wait_ms": 100,
}


def _fill(bootstrap: str, records: int, value_bytes: int) -> None:
    with Admin(bootstrap) as admin:
        admin.create_topics(TOPIC, PARTITIONS, 3)
    producer = Producer(bootstrap, acks="all", linger_ms=5)
    value = b"v" * value_bytes
    for n in range(records):
        producer.send(TOPIC, value, partition=n % PARTITIONS)
    producer.flush()
    producer.close()


def _read_all(consumers: list[Consumer], records: int) -> float:
    """Poll every consumer on a thread of its own until they read ``records`` together;
    returns the seconds it took."""
    counts = [0] * len(consumers)
    lock = threading.Lock()
    finished = threading.Event()

    def run(index: int, consumer: Consumer) -> None:
        while not finished.is_set():
            got = consumer.poll(timeout_ms=100)
            with lock:
                counts[index] += len(got)
                if sum(counts) >= records:
                    finished.set()

    threads = [threading.Thread(target=run, args=(i, c)) for i, c in enumerate(consumers)]
    started = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=300)
    return time.perf_counter() - started


def _one_run(bootstrap: str, mode: str, run: int, records: int) -> dict[str, float]:
    """One mode's read of the whole topic. A group first settles (every member owns its two
    partitions; the join time), then every member seeks to the beginning, so both modes time
    the same reads."""
    joined = time.perf_counter()
    if mode == "group":
        consumers = [
            Consumer(bootstrap, group_id=f"bench-{run}", **CONSUMER) for _ in range(MEMBERS)
        ]
        for consumer in consumers:
            consumer.subscribe([TOPIC])
        share = PARTITIONS // MEMBERS
        _wait(
            lambda: all(len(c.assignment()) == share for c in consumers),
            60,
            lambda: [c.poll(timeout_ms=20) for c in consumers],
        )
        for consumer in consumers:
            consumer.seek_to_beginning(consumer.assignment())
    else:
        consumers = [Consumer(bootstrap, **CONSUMER) for _ in range(MEMBERS)]
        for index, consumer in enumerate(consumers):
            consumer.assign([(TOPIC, p) for p in range(PARTITIONS) if p % MEMBERS == index])
    join_s = time.perf_counter() - joined
    seconds = _read_all(consumers, records)
    if mode == "group":
        for consumer in consumers:
            consumer.commit()
    for consumer in consumers:
        consumer.close()
    return {"records_per_s": records / seconds, "join_s": join_s}


_MEMBER_SCRIPT = """
import sys, time
from replog import Consumer
consumer = Consumer(sys.argv[1], group_id=sys.argv[2], session_timeout_ms=int(sys.argv[3]),
                    auto_offset_reset="earliest", enable_auto_commit=False,
                    heartbeat_interval_ms=500)
consumer.subscribe([sys.argv[4]])
while True:
    consumer.poll(timeout_ms=100)
    if consumer.assignment():
        print("assigned", flush=True)
"""


def _wait(predicate: Callable[[], bool], timeout_s: float, poll: Callable[[], Any]) -> float:
    deadline = time.perf_counter() + timeout_s
    while time.perf_counter() < deadline:
        poll()
        if predicate():
            return time.perf_counter()
    raise TimeoutError("condition not reached")


def _rebalance_after_death(bootstrap: str, run: int) -> float:
    """Seconds from the dead member's session timeout expiring to all partitions owned."""
    group = f"bench-death-{run}"
    config = {**CONSUMER, "session_timeout_ms": SESSION_TIMEOUT_MS}
    survivors = [Consumer(bootstrap, group_id=group, **config) for _ in range(MEMBERS - 1)]
    for consumer in survivors:
        consumer.subscribe([TOPIC])
    child = subprocess.Popen(
        [sys.executable, "-c", _MEMBER_SCRIPT, bootstrap, group, str(SESSION_TIMEOUT_MS), TOPIC],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:

        def poll_all() -> None:
            for consumer in survivors:
                consumer.poll(timeout_ms=20)

        def owned() -> int:
            return sum(len(c.assignment()) for c in survivors)

        assert child.stdout is not None
        child.stdout.readline()  # the child owns partitions
        _wait(lambda: owned() == PARTITIONS - PARTITIONS // MEMBERS, 60, poll_all)
        os.kill(child.pid, signal.SIGKILL)
        killed = time.perf_counter()
        child.wait()
        owned_at = _wait(lambda: owned() == PARTITIONS, 60, poll_all)
        return owned_at - killed - SESSION_TIMEOUT_MS / 1000
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
        for consumer in survivors:
            consumer.close()


def _summary(values: list[float]) -> dict[str, float]:
    return {
        "median": round(statistics.median(values), 3),
        "min": round(min(values), 3),
        "max": round(max(values), 3),
    }


def cluster_case(repeats: int, records: int, value_bytes: int) -> dict[str, Any]:
    """The issue's case (see the module docstring)."""
    with Cluster.local(
        3, groups={"initial_rebalance_delay_ms": 0, "session_timeout_ms_min": 1_000}
    ) as cluster:
        bootstrap = cluster.bootstrap
        _fill(bootstrap, records, value_bytes)
        rates: dict[str, list[float]] = {"group": [], "manual": []}
        joins: list[float] = []
        ratios = []
        for run in range(repeats):
            order = ("group", "manual") if run % 2 == 0 else ("manual", "group")
            got = {mode: _one_run(bootstrap, mode, run, records) for mode in order}
            for mode in order:
                rates[mode].append(got[mode]["records_per_s"])
            joins.append(got["group"]["join_s"])
            ratios.append(got["group"]["records_per_s"] / got["manual"]["records_per_s"])
        rebalance = [_rebalance_after_death(bootstrap, run) for run in range(repeats)]
    return {
        "case": "3 consumers, 6 partitions, live 3-broker cluster",
        "records": records,
        "value_bytes": value_bytes,
        "repeats": repeats,
        "group_records_per_s": _summary(rates["group"]),
        "manual_records_per_s": _summary(rates["manual"]),
        "group_over_manual": _summary(ratios),
        "group_join_s": _summary(joins),
        "session_timeout_ms": SESSION_TIMEOUT_MS,
        "rebalance_after_death_s": _summary(rebalance),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--case", choices=("shard", "cluster", "all"), default="all")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--records", type=int, default=60_000)
    parser.add_argument("--value-bytes", type=int, default=100)
    args = parser.parse_args()
    if args.case in ("shard", "all"):
        for groups, members in [(10, 10), (100, 10), (10, 100), (1, 1000)]:
            rate = measure(groups, members, args.rounds)
            case = {"case": "heartbeat+commit", "groups": groups, "members_per_group": members}
            print(json.dumps({**case, "requests_per_s": round(rate)}), flush=True)
    if args.case in ("cluster", "all"):
        print(json.dumps(cluster_case(args.repeats, args.records, args.value_bytes)), flush=True)


if __name__ == "__main__":
    main()
