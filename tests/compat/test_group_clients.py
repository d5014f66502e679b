"""Consumer groups served by replog, driven by the standard consumers of five clients: replog's
own ``Consumer``, kafka-python, confluent-kafka (librdkafka), aiokafka and kafkajs.

Each member is a process of its own (``group_member.py``, ``tests/js/kafkajs_group_member.js``)
subscribing with a ``group.id`` and committing by hand, so a test can kill one with SIGKILL. For
every client:

- it subscribes and reads everything, commits and closes; a new member of the group resumes
  after the commit (reads only what came later);
- two members share the partitions; when one leaves (clean close), or dies (SIGKILL, noticed
  after its session timeout), the other takes all of them over and reads on;
- the broker coordinating the group is killed: the committed offsets are the same on the new
  coordinator, and the group goes on reading and committing.

Before replog served groups, none of this worked: kafka-python, aiokafka and replog's consumer
failed to find a coordinator, librdkafka's commit never returned, and kafkajs could not consume
at all (it only consumes in groups).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from replog import Admin, Cluster, Producer
from replog.groups import OFFSETS_TOPIC, partition_for

pytestmark = [pytest.mark.system, pytest.mark.timeout(240)]

HERE = Path(__file__).resolve().parent
JS_DIR = HERE.parent / "js"
CLIENTS = ["replog", "kafka-python", "confluent-kafka", "aiokafka", "kafkajs"]
WAIT_S = 60.0


@pytest.fixture(scope="module")
def cluster() -> Iterator[Cluster]:
    # Members use 4 s sessions (below Kafka's 6 s minimum) so a dead one is noticed quickly.
    groups = {"initial_rebalance_delay_ms": 0, "session_timeout_ms_min": 1_000}
    with Cluster.local(3, groups=groups) as c:
        yield c


class Member:
    """A member process and the events it printed (see ``group_member.py``)."""

    def __init__(self, client: str, cluster: Cluster, group: str, topic: str, mode: str) -> None:
        if client == "kafkajs":
            node = shutil.which("node")
            assert node is not None, "node is not installed (Node 20+ is a test dependency)"
            assert (JS_DIR / "node_modules" / "kafkajs").is_dir(), (
                "kafkajs is not installed: run `make system-deps` (npm ci --prefix tests/js)"
            )
            command = [node, str(JS_DIR / "kafkajs_group_member.js")]
        else:
            command = [sys.executable, str(HERE / "group_member.py"), client]
        command += [cluster.bootstrap, group, topic, mode]
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        self.client = client
        self.process = subprocess.Popen(
            command,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        self.events: list[dict[str, Any]] = []
        self.stderr: list[str] = []
        self._changed = threading.Condition()
        self._events_reader = threading.Thread(target=self._read_events, daemon=True)
        self._events_reader.start()
        threading.Thread(target=self._read_stderr, daemon=True).start()

    def _read_events(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            if line.startswith("{"):
                with self._changed:
                    self.events.append(json.loads(line))
                    self._changed.notify_all()
        with self._changed:
            self._changed.notify_all()

    def _read_stderr(self) -> None:
        assert self.process.stderr is not None
        for line in self.process.stderr:
            self.stderr.append(line)

    def wait_for(
        self,
        condition: Callable[[], bool],
        what: str,
        timeout_s: float = WAIT_S,
        other: Member | None = None,
    ) -> None:
        """Block until ``condition()`` holds (re-checked at every event); a failure shows this
        member's last events and stderr, and ``other``'s when the condition is about both."""
        deadline = time.monotonic() + timeout_s
        with self._changed:
            while not condition():
                left = deadline - time.monotonic()
                if left <= 0 or (self.process.poll() is not None and not condition()):
                    tail = "".join(self.stderr[-30:])
                    if other is not None:
                        tail += f"\nthe other member: last events {other.events[-5:]}\n"
                        tail += "".join(other.stderr[-30:])
                    raise AssertionError(
                        f"{self.client} member: {what} did not happen "
                        f"(exit {self.process.poll()}); last events {self.events[-5:]}\n{tail}"
                    )
                self._changed.wait(min(left, 0.5))

    @property
    def assigned(self) -> set[tuple[str, int]]:
        found = [e["assigned"] for e in self.events if "assigned" in e]
        return {(t, p) for t, p in found[-1]} if found else set()

    @property
    def values(self) -> list[str]:
        """The values read, each record once (a record redelivered after a rebalance that
        interrupted a commit is read again, as Kafka's at-least-once delivery allows)."""
        read = {(p, o): v for e in self.events if "records" in e for p, o, v in e["records"]}
        return list(read.values())

    @property
    def committed(self) -> dict[int, int]:
        found = [e["committed"] for e in self.events if "committed" in e]
        return {int(p): o for p, o in found[-1].items()} if found else {}

    def close(self) -> None:
        """Ask for a clean close; wait for the process to end."""
        assert self.process.stdin is not None
        self.process.stdin.write("close\n")
        self.process.stdin.flush()
        self.finish()

    def finish(self, timeout_s: float = WAIT_S) -> None:
        """Wait for a clean exit."""
        try:
            code = self.process.wait(timeout_s)
        except subprocess.TimeoutExpired:
            self.process.kill()
            raise
        # The process has exited; its last lines may still be on their way through the reader.
        self._events_reader.join(10)
        assert code == 0, f"{self.client} member exited {code}:\n{''.join(self.stderr[-30:])}"
        assert self.events and self.events[-1] == {"closed": True}

    def kill(self) -> None:
        """SIGKILL: no LeaveGroup, no commit; the coordinator notices at the session timeout."""
        self.process.send_signal(signal.SIGKILL)
        self.process.wait(10)

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait(10)


@pytest.fixture
def members() -> Iterator[list[Member]]:
    started: list[Member] = []
    yield started
    for member in started:
        member.stop()


def start_broker(cluster: Cluster, broker_id: int) -> None:
    """Start a broker and wait until it is ONLINE (until then its metadata has no brokers)."""
    broker = cluster.start(broker_id)
    deadline = time.monotonic() + WAIT_S
    while broker.state.value != "online":
        assert time.monotonic() < deadline, f"broker {broker_id} did not come online"
        time.sleep(0.05)


def make_topic(cluster: Cluster, name: str, partitions: int) -> None:
    with Admin(cluster.bootstrap) as admin:
        admin.create_topics(name, partitions, 3, {"min.insync.replicas": "2"})


def produce(cluster: Cluster, topic: str, partitions: int, first: int, count: int) -> list[str]:
    """Values ``v<first>`` .. spread over the partitions in turn; returns them."""
    values = [f"v{i}" for i in range(first, first + count)]
    with Producer(cluster.bootstrap, acks="all") as producer:
        futures = [
            producer.send(topic, value.encode(), partition=i % partitions)
            for i, value in enumerate(values)
        ]
        for future in futures:
            future.result(timeout=30)
    return values


def committed_offsets(cluster: Cluster, group: str) -> dict[int, int]:
    with Admin(cluster.bootstrap) as admin:
        found = admin.list_group_offsets(group)
    return {p: o.offset for (_, p), o in found.items()}


def names(client: str, what: str) -> tuple[str, str]:
    """A topic and a group of their own for one test."""
    return f"{client}-{what}", f"{client}-{what}-group"


@pytest.mark.parametrize("client", CLIENTS)
def test_a_member_reads_everything_and_a_new_member_resumes_after_the_commit(
    cluster: Cluster, members: list[Member], client: str
) -> None:
    topic, group = names(client, "resume")
    make_topic(cluster, topic, 3)
    first = produce(cluster, topic, 3, 0, 30)
    reader = Member(client, cluster, group, topic, "drain:30")
    members.append(reader)
    reader.finish()
    assert sorted(reader.values) == sorted(first)
    assert reader.assigned == {(topic, p) for p in range(3)}
    assert reader.committed == {0: 10, 1: 10, 2: 10}
    assert committed_offsets(cluster, group) == {0: 10, 1: 10, 2: 10}

    later = produce(cluster, topic, 3, 30, 15)
    resumed = Member(client, cluster, group, topic, "drain:15")
    members.append(resumed)
    resumed.finish()
    assert sorted(resumed.values) == sorted(later)  # nothing before the commit again
    assert committed_offsets(cluster, group) == {0: 15, 1: 15, 2: 15}


def share_then_lose_one(
    cluster: Cluster, members: list[Member], client: str, what: str, lose: Callable[[Member], None]
) -> None:
    """Two members split four partitions and read; one is lost (``lose``); the other takes
    every partition over and reads what comes next."""
    topic, group = names(client, what)
    everything = {(topic, p) for p in range(4)}
    make_topic(cluster, topic, 4)
    first = Member(client, cluster, group, topic, "member")
    members.append(first)
    first.wait_for(lambda: first.assigned == everything, "owning every partition")
    second = Member(client, cluster, group, topic, "member")
    members.append(second)

    def shared() -> bool:
        a, b = first.assigned, second.assigned
        return bool(a) and bool(b) and not a & b and a | b == everything

    second.wait_for(shared, "the two members sharing the partitions", other=first)
    first.wait_for(shared, "the two members sharing the partitions", other=second)
    before = produce(cluster, topic, 4, 0, 40)
    second.wait_for(lambda: set(first.values) | set(second.values) >= set(before), "reading all")
    assert second.values and first.values  # each read its own partitions

    lose(second)
    first.wait_for(lambda: first.assigned == everything, "taking every partition over")
    after = produce(cluster, topic, 4, 40, 40)
    first.wait_for(lambda: set(first.values) >= set(after), "reading on alone")
    first.close()


@pytest.mark.parametrize("client", CLIENTS)
def test_two_members_share_the_partitions_and_one_takes_over_when_the_other_leaves(
    cluster: Cluster, members: list[Member], client: str
) -> None:
    share_then_lose_one(cluster, members, client, "leave", lambda m: m.close())


@pytest.mark.parametrize("client", CLIENTS)
def test_two_members_share_the_partitions_and_one_takes_over_when_the_other_dies(
    cluster: Cluster, members: list[Member], client: str
) -> None:
    share_then_lose_one(cluster, members, client, "die", lambda m: m.kill())


@pytest.mark.parametrize("client", CLIENTS)
def test_the_group_survives_its_coordinators_failure_without_losing_a_commit(
    cluster: Cluster, members: list[Member], client: str
) -> None:
    topic, group = names(client, "failover")
    make_topic(cluster, topic, 3)
    member = Member(client, cluster, group, topic, "member")
    members.append(member)
    produce(cluster, topic, 3, 0, 30)
    member.wait_for(lambda: member.committed == {0: 10, 1: 10, 2: 10}, "committing 10 each")

    with Admin(cluster.bootstrap) as admin:
        layout = admin.describe_topics([OFFSETS_TOPIC])[OFFSETS_TOPIC]
    coordinator = layout.partitions[partition_for(group, len(layout.partitions))].leader
    cluster.kill(coordinator)
    try:
        # The new coordinator loaded every acknowledged commit.
        assert committed_offsets(cluster, group) == {0: 10, 1: 10, 2: 10}
        after = produce(cluster, topic, 3, 30, 30)
        # kafkajs crashes on the dead coordinator and restarts its consumer (with backoff):
        # recovering takes it up to about a minute on a loaded machine.
        member.wait_for(
            lambda: set(member.values) >= set(after), "reading after the failover", 2 * WAIT_S
        )
        member.wait_for(
            lambda: member.committed == {0: 20, 1: 20, 2: 20}, "committing again", 2 * WAIT_S
        )
        member.close()
        assert committed_offsets(cluster, group) == {0: 20, 1: 20, 2: 20}, member.events
    finally:
        start_broker(cluster, coordinator)


def test_every_clients_commits_survive_a_restart_of_the_whole_cluster(
    members: list[Member],
) -> None:
    """Each client's group commits; every broker crashes and starts again; the coordinators
    load the groups back from ``__consumer_offsets`` and a new member of each client resumes
    after its group's commit."""
    groups = {"initial_rebalance_delay_ms": 0, "session_timeout_ms_min": 1_000}
    with Cluster.local(3, groups=groups) as cluster:
        for client in CLIENTS:
            topic, group = names(client, "restart")
            make_topic(cluster, topic, 3)
            produce(cluster, topic, 3, 0, 30)
            reader = Member(client, cluster, group, topic, "drain:30")
            members.append(reader)
            reader.finish()
            assert reader.committed == {0: 10, 1: 10, 2: 10}

        for broker_id in sorted(cluster.brokers):
            cluster.kill(broker_id)
        for broker_id in sorted(cluster.brokers):
            start_broker(cluster, broker_id)

        for client in CLIENTS:
            topic, group = names(client, "restart")
            assert committed_offsets(cluster, group) == {0: 10, 1: 10, 2: 10}, client
            later = produce(cluster, topic, 3, 30, 15)
            resumed = Member(client, cluster, group, topic, "drain:15")
            members.append(resumed)
            resumed.finish()
            assert sorted(resumed.values) == sorted(later), client
            assert committed_offsets(cluster, group) == {0: 15, 1: 15, 2: 15}, client
