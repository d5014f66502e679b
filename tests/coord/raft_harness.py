"""A deterministic harness for the quorum's request layer: real `RaftNode`s (on files under a
temp dir) with a `MetadataMachine` and a `QuorumFrontend` each, one `ManualClock`, and a
network the test drives: messages are delivered at once unless a node is cut off, time moves
only in `run`/`run_until`."""

from __future__ import annotations

import random
from collections.abc import Callable
from pathlib import Path

import attrs

from replog.clock import ManualClock
from replog.log.fs import REAL_FS
from replog.quorum.frontend import QuorumFrontend, Reply, Request
from replog.quorum.machine import MetadataMachine
from replog.raft.config import RaftConfig
from replog.raft.node import RaftNode
from replog.raft.states import Leader

CLIENT_TIMEOUT_MS = 5_000


@attrs.define
class Member:
    node_id: int
    raft: RaftNode
    frontend: QuorumFrontend
    replies: dict[object, Reply] = attrs.field(factory=dict)


class Quorum:
    """``n`` voters (ids 1..n); see the module docstring."""

    def __init__(
        self, root: Path, n: int, *, snapshot_interval: int = 0, cluster_ids: bool = False
    ) -> None:
        self.root = root
        self.cluster_ids = cluster_ids  # leaders name a new store (InitCluster)
        self.clock = ManualClock(1_000)
        self.voters = frozenset(range(1, n + 1))
        self.snapshot_interval = snapshot_interval
        self.cut: set[int] = set()
        self.members: dict[int, Member] = {}
        for node_id in sorted(self.voters):
            self.start(node_id)

    @property
    def now_ms(self) -> int:
        return self.clock.now_ms

    def start(self, node_id: int) -> Member:
        machine = MetadataMachine()
        drawn = iter(range(1_000))
        frontend = QuorumFrontend(
            machine,
            new_cluster_id=(lambda: f"id-{node_id}-{next(drawn)}") if self.cluster_ids else None,
        )
        config = RaftConfig(
            node_id=node_id,
            voters=self.voters,
            election_timeout_ms=100,
            fetch_timeout_ms=300,
            request_timeout_ms=200,
            fetch_backoff_ms=5,
            election_backoff_max_ms=100,
        )
        raft = RaftNode.open(
            config,
            str(self.root / f"node-{node_id}"),
            REAL_FS,
            machine,
            random.Random(node_id).randrange,
            self.now_ms,
            clock=self.clock,
            snapshot_interval=self.snapshot_interval,
            on_apply=frontend.on_apply,
            on_leader=frontend.on_leader,
        )
        frontend.attach(raft)
        member = self.members[node_id] = Member(node_id, raft, frontend)
        return member

    def stop(self, node_id: int) -> None:
        self.members.pop(node_id).raft.close()

    def close(self) -> None:
        for node_id in list(self.members):
            self.stop(node_id)

    # ------------------------------------------------------------------ driving

    def request(self, node_id: int, token: object, request: Request) -> None:
        member = self.members[node_id]
        deadline_ms = self.now_ms + CLIENT_TIMEOUT_MS
        member.frontend.on_request(token, request, deadline_ms, self.now_ms)
        self.settle()

    def settle(self) -> None:
        """Pump, flush and deliver until nothing moves (time stands still)."""
        for _ in range(1_000):
            moved = False
            for member in list(self.members.values()):
                raft, now_ms = member.raft, self.now_ms
                if raft.next_deadline_ms() <= now_ms:
                    raft.tick(now_ms)
                member.frontend.pump(now_ms)
                if raft.needs_flush:
                    raft.flush(now_ms)
                    member.frontend.pump(now_ms)
                for token, reply in member.frontend.take_replies():
                    member.replies[token] = reply
                for out in raft.take_messages():
                    moved = True
                    target = self.members.get(out.dst)
                    if target is None or {member.node_id, out.dst} & self.cut:
                        continue
                    target.raft.on_message(member.node_id, out.message, now_ms)
            if not moved:
                return
        raise AssertionError("the quorum never settled")

    def run(self, ms: int) -> None:
        """Let ``ms`` pass, one millisecond at a time."""
        for _ in range(ms):
            self.clock.advance(1)
            self.settle()

    def run_until(self, done: Callable[[], bool], ms_max: int = 10_000) -> None:
        for _ in range(ms_max):
            if done():
                return
            self.clock.advance(1)
            self.settle()
        raise AssertionError(f"not done within {ms_max} ms")

    def leader(self) -> int | None:
        best: tuple[int, int] | None = None
        for node_id, member in self.members.items():
            state = member.raft.core.state
            leading = node_id not in self.cut and isinstance(state, Leader)
            if leading and (best is None or state.epoch > best[0]):
                best = (state.epoch, node_id)
        return None if best is None else best[1]

    def ready_leader(self) -> int:
        """Wait for a leader that has committed its epoch."""

        def ready() -> bool:
            leader = self.leader()
            return leader is not None and self.members[leader].raft.core.high_watermark > 0

        self.run_until(ready)
        leader = self.leader()
        assert leader is not None
        return leader
