"""`RaftNode`: real storage on a fault-injecting filesystem under the core; persist before send,
restarts, snapshots and the state machine."""

from __future__ import annotations

import random
from pathlib import Path

import attrs

from replog.log.fault_fs import FaultInjectingFileSystem
from replog.raft.config import RaftConfig
from replog.raft.kv import KvOp, KvStateMachine
from replog.raft.messages import Outbound, RaftFetchRequest, VoteRequest
from replog.raft.node import RaftNode
from replog.raft.ready import LeaderAndEpoch
from replog.raft.states import Follower, Leader, Resigned, Voted
from replog.raft.storage import metadata_log_config

VOTERS = frozenset({1, 2, 3})


@attrs.define
class Cluster:
    """RaftNodes wired directly; fsyncs happen only when the test calls `flush`."""

    root: Path
    snapshot_interval: int = 0
    now_ms: int = 0
    nodes: dict[int, RaftNode] = attrs.field(factory=dict)
    machines: dict[int, KvStateMachine] = attrs.field(factory=dict)
    disks: dict[int, FaultInjectingFileSystem] = attrs.field(factory=dict)
    inbox: list[tuple[int, Outbound]] = attrs.field(factory=list)

    def open(self, node_id: int) -> RaftNode:
        config = RaftConfig(
            node_id=node_id,
            voters=VOTERS,
            election_timeout_ms=100,
            fetch_timeout_ms=200,
            request_timeout_ms=50,
            fetch_backoff_ms=5,
        )
        machine = KvStateMachine()
        fs = self.disks.setdefault(node_id, FaultInjectingFileSystem(str(self.root), seed=node_id))
        node = RaftNode.open(
            config,
            str(self.root / f"n{node_id}"),
            fs,
            machine,
            random.Random(node_id).randrange,
            self.now_ms,
            log_config=metadata_log_config(512, 128),
            snapshot_interval=self.snapshot_interval,
        )
        self.nodes[node_id], self.machines[node_id] = node, machine
        return node

    def pump(self, *, flush: frozenset[int] = VOTERS) -> None:
        """Flush the nodes in ``flush`` and exchange messages until quiet."""
        for _ in range(200):
            for node_id, node in self.nodes.items():
                if node_id in flush and node.needs_flush:
                    node.flush(self.now_ms)
                self.inbox += [(node_id, out) for out in node.take_messages()]
            if not self.inbox:
                return
            batch, self.inbox = self.inbox, []
            for src, out in batch:
                if out.dst in self.nodes:
                    self.nodes[out.dst].on_message(src, out.message, self.now_ms)

    def run(self, duration_ms: int) -> None:
        for _ in range(duration_ms // 5):
            self.now_ms += 5
            for node in self.nodes.values():
                node.tick(self.now_ms)
            self.pump()

    def leader(self) -> int:
        (leader,) = [i for i, n in self.nodes.items() if isinstance(n.core.state, Leader)]
        return leader

    def write(self, key: str, value: int) -> None:
        result = self.nodes[self.leader()].propose(
            [KvOp("write", key, value).encode()], self.now_ms
        )
        assert result.error == 0


def cluster(tmp_path: Path, **kwargs: int) -> Cluster:
    c = Cluster(tmp_path, **kwargs)
    for node_id in sorted(VOTERS):
        c.open(node_id)
    c.run(600)
    return c


def test_three_nodes_elect_and_replicate_a_register(tmp_path: Path) -> None:
    c = cluster(tmp_path)
    c.write("x", 1)
    c.write("x", 2)
    c.run(50)
    for node_id, node in c.nodes.items():
        assert c.machines[node_id].values == {"x": 2}
        assert node.applied_offset == node.core.high_watermark


def test_messages_wait_for_the_fsync_they_depend_on(tmp_path: Path) -> None:
    c = cluster(tmp_path)
    leader = c.leader()
    follower_id = next(i for i in sorted(VOTERS) if i != leader)
    follower = c.nodes[follower_id]
    end = follower.core.log.end_offset
    c.write("x", 1)
    c.now_ms += 10
    for node in c.nodes.values():
        node.tick(c.now_ms)
    c.pump(flush=frozenset({leader}))  # the follower appended the record, unflushed
    assert follower.core.log.end_offset == end + 1
    assert follower.needs_flush  # its next fetch reports the new offset, so it waits
    assert follower.take_messages() == []
    follower.flush(c.now_ms)
    fetches = [o for o in follower.take_messages() if isinstance(o.message, RaftFetchRequest)]
    assert fetches and fetches[-1].message.fetch_offset == follower.core.log.end_offset


def test_a_vote_survives_a_power_loss(tmp_path: Path) -> None:
    c = Cluster(tmp_path)
    node = c.open(2)
    node.on_message(1, VoteRequest(1, 1, 0, 0, False), 0)
    (answer,) = node.take_messages()  # released at once: the quorum-state is durable
    assert answer.message.vote_granted
    node.abandon()
    c.disks[2].crash()
    node = c.open(2)
    assert node.core.state == Voted(1, 1)
    node.on_message(3, VoteRequest(1, 3, 0, 0, False), 1)
    (answer,) = node.take_messages()
    assert not answer.message.vote_granted


def test_a_leader_that_loses_power_comes_back_resigned_without_its_unflushed_records(
    tmp_path: Path,
) -> None:
    c = cluster(tmp_path)
    leader_id = c.leader()
    leader = c.nodes[leader_id]
    end = leader.core.log.end_offset
    c.write("x", 1)  # appended, never fsynced, never sent
    leader.abandon()
    c.disks[leader_id].crash(tear=False)
    restarted = c.open(leader_id)
    assert isinstance(restarted.core.state, Resigned)
    assert restarted.core.log.end_offset == end
    c.run(800)
    assert isinstance(c.nodes[c.leader()].core.state, Leader)


def test_snapshots_bound_the_log_and_restore_the_state_machine(tmp_path: Path) -> None:
    c = cluster(tmp_path, snapshot_interval=5)
    for value in range(12):
        c.write("k", value)
        c.run(10)
    node_id = next(i for i in sorted(VOTERS) if i != c.leader())
    node = c.nodes[node_id]
    assert node.core.log.start_offset > 0
    assert node.storage.snapshots.latest() is not None
    applied = node.applied_offset
    node.close()
    restarted = c.open(node_id)
    assert restarted.applied_offset >= node.core.log.start_offset
    assert c.machines[node_id].values == {"k": 11} or restarted.applied_offset < applied
    c.run(100)
    assert c.machines[node_id].values == {"k": 11}
    assert isinstance(restarted.core.state, Follower)


def test_the_owner_hears_of_every_leader_change(tmp_path: Path) -> None:
    seen: list[object] = []
    c = Cluster(tmp_path)
    node = c.open(1)
    node.on_leader = seen.append
    for node_id in (2, 3):
        c.open(node_id)
    c.run(600)
    leader = c.leader()
    assert seen and seen[-1] == LeaderAndEpoch(c.nodes[1].core.state.epoch, leader)
