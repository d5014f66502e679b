"""A scripted harness for `RaftCore` (etcd's interaction-test style): cores on an in-memory
log, messages held in a queue that the test delivers, drops or reorders explicitly, time that
moves only when the test says so.

`MemoryLog` carries out a `Ready`'s log operations on a list of batches and serves the core's
reads; it keeps nothing durable apart from what `Quorum.restart` keeps (everything: use the real
storage tests for crash behaviour). `Quorum.collect` takes every core's Ready after each step,
applies it and queues its messages; with ``auto_flush`` the log counts as fsynced at once.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterable

import attrs

from replog.log.epoch_cache import LeaderEpochCache
from replog.raft.config import RaftConfig
from replog.raft.core import RaftCore
from replog.raft.entries import decode_entries, whole_batches
from replog.raft.log_model import LogModel
from replog.raft.messages import Message, RaftSnapshotId
from replog.raft.ready import (
    AbortSnapshotDownload,
    AdvanceLogStart,
    AppendBatches,
    InstallSnapshot,
    Ready,
    TruncateTo,
    WriteSnapshotChunk,
)
from replog.raft.states import ElectionState


@attrs.define
class MemoryLog:
    """Batches in memory: ``(base_offset, last_offset, epoch, bytes)``."""

    batches: list[tuple[int, int, int, bytes]] = attrs.field(factory=list)
    start_offset: int = 0
    snapshot: RaftSnapshotId | None = None
    snapshots: dict[RaftSnapshotId, bytes] = attrs.field(factory=dict)
    partial: dict[RaftSnapshotId, bytearray] = attrs.field(factory=dict)
    election: ElectionState | None = None
    elections_written: list[ElectionState] = attrs.field(factory=list)

    @property
    def end_offset(self) -> int:
        return self.batches[-1][1] + 1 if self.batches else self.start_offset

    def model(self) -> LogModel:
        cache = LeaderEpochCache(None)
        for base, _, epoch, _ in self.batches:
            if epoch != cache.latest_epoch:
                cache.assign(epoch, base)
        cache.truncate_from_start(self.start_offset)
        return LogModel.of(self.start_offset, self.end_offset, cache.entries, self.snapshot)

    def entries(self) -> list[tuple[int, int, bytes, bytes | None]]:
        """(offset, epoch, value, control) of every record at or above the log start."""
        found = []
        for _, _, _, data in self.batches:
            for e in decode_entries(data):
                if e.offset >= self.start_offset:
                    found.append((e.offset, e.epoch, e.value, e.control))
        return found

    # ------------------------------------------------------------------ LogReader

    def read_records(self, start_offset: int, max_bytes: int) -> bytes:
        out = b""
        for _, last, _, data in self.batches:
            if last < start_offset:
                continue
            if out and len(out) + len(data) > max_bytes:
                break
            out += data
        return out

    def read_snapshot_chunk(
        self, snapshot_id: RaftSnapshotId, position: int, max_bytes: int
    ) -> tuple[bytes, int] | None:
        data = self.snapshots.get(snapshot_id)
        if data is None or position > len(data):
            return None
        return data[position : position + max_bytes], len(data)

    # ------------------------------------------------------------------ applying

    def apply(self, ready: Ready) -> None:
        for op in ready.log_ops:
            if isinstance(op, AppendBatches):
                position = 0
                for h in whole_batches(op.data):
                    assert h.base_offset == self.end_offset
                    chunk = op.data[position : position + h.size_bytes]
                    self.batches.append(
                        (h.base_offset, h.last_offset, h.partition_leader_epoch, chunk)
                    )
                    position += h.size_bytes
            elif isinstance(op, TruncateTo):
                assert all(b[0] >= op.offset or b[1] < op.offset for b in self.batches)
                self.batches = [b for b in self.batches if b[0] < op.offset]
            elif isinstance(op, AdvanceLogStart):
                self.snapshot = op.snapshot_id
                self.start_offset = op.snapshot_id.end_offset
                self.batches = [b for b in self.batches if b[1] >= self.start_offset]
            elif isinstance(op, WriteSnapshotChunk):
                if op.position == 0:
                    self.partial[op.snapshot_id] = bytearray()
                assert len(self.partial[op.snapshot_id]) == op.position
                self.partial[op.snapshot_id] += op.data
            elif isinstance(op, InstallSnapshot):
                self.snapshots[op.snapshot_id] = bytes(self.partial.pop(op.snapshot_id))
                self.snapshot = op.snapshot_id
                self.start_offset = op.snapshot_id.end_offset
                self.batches = []
            elif isinstance(op, AbortSnapshotDownload):
                self.partial.pop(op.snapshot_id, None)
        if ready.election is not None:
            self.election = ready.election
            self.elections_written.append(ready.election)


@attrs.define
class HNode:
    """One core with its log and everything it produced."""

    core: RaftCore
    log: MemoryLog
    auto_flush: bool = True
    readies: list[Ready] = attrs.field(factory=list)


@attrs.define
class Sent:
    """A message in flight."""

    src: int
    dst: int
    message: Message


class Quorum:
    """Cores wired through a queue the test controls (see the module docstring)."""

    def __init__(
        self,
        voters: Iterable[int] = (1, 2, 3),
        observers: Iterable[int] = (),
        *,
        seed: int = 0,
        **config: int,
    ) -> None:
        self.voters = frozenset(voters)
        self.now_ms = 0
        self.queue: list[Sent] = []
        self.settings = {
            "election_timeout_ms": 100,
            "fetch_timeout_ms": 200,
            "request_timeout_ms": 50,
            "fetch_backoff_ms": 10,
            "retry_backoff_ms": 5,
            "election_backoff_max_ms": 100,
            **config,
        }
        self.seed = seed
        self.nodes: dict[int, HNode] = {}
        for node_id in sorted(self.voters | frozenset(observers)):
            self.nodes[node_id] = self._start(node_id, MemoryLog())

    def config(self, node_id: int) -> RaftConfig:
        return RaftConfig(node_id=node_id, voters=self.voters, **self.settings)

    def _start(self, node_id: int, log: MemoryLog) -> HNode:
        rng = random.Random(f"{self.seed}-{node_id}-{len(log.elections_written)}")
        core = RaftCore.start(
            self.config(node_id), log.election, log.model(), log, rng.randrange, self.now_ms
        )
        node = HNode(core, log)
        self._collect_one(node_id, node)
        return node

    def restart(self, node_id: int) -> HNode:
        """A new core on the same (whole) log and election state; in-flight messages to and
        from the old one stay in the queue."""
        self.nodes[node_id] = self._start(node_id, self.nodes[node_id].log)
        return self.nodes[node_id]

    def core(self, node_id: int) -> RaftCore:
        return self.nodes[node_id].core

    # ------------------------------------------------------------------ stepping

    def collect(self) -> None:
        for node_id, node in self.nodes.items():
            self._collect_one(node_id, node)

    def _collect_one(self, node_id: int, node: HNode) -> None:
        while node.core.has_ready:
            ready = node.core.take_ready()
            node.readies.append(ready)
            node.log.apply(ready)
            for out in ready.messages:
                self.queue.append(Sent(node_id, out.dst, out.message))
            if node.auto_flush:
                node.core.on_flushed(node.log.end_offset, self.now_ms)

    def tick(self, advance_ms: int = 0, nodes: Iterable[int] | None = None) -> None:
        self.now_ms += advance_ms
        for node_id in sorted(self.nodes) if nodes is None else nodes:
            self.nodes[node_id].core.tick(self.now_ms)
        self.collect()

    def take(self, pred: Callable[[Sent], bool] = lambda s: True) -> list[Sent]:
        """Remove and return the queued messages matching ``pred``."""
        taken = [s for s in self.queue if pred(s)]
        self.queue = [s for s in self.queue if not pred(s)]
        return taken

    def deliver(self, pred: Callable[[Sent], bool] = lambda s: True, *, tick: bool = False) -> int:
        """Deliver the queued messages matching ``pred`` (in order), once each; messages they
        produce are queued, not delivered. With ``tick`` the receiver's timers run after each
        (as `RaftNode` does)."""
        count = 0
        for sent in self.take(pred):
            node = self.nodes.get(sent.dst)
            if node is None:
                continue
            node.core.on_message(sent.src, sent.message, self.now_ms)
            if tick:
                node.core.tick(self.now_ms)
            self._collect_one(sent.dst, node)
            count += 1
        return count

    def settle(
        self, rounds: int = 50, pred: Callable[[Sent], bool] = lambda s: True, tick: bool = False
    ) -> None:
        """Deliver until nothing matching ``pred`` is queued (time does not move)."""
        for _ in range(rounds):
            if not self.deliver(pred, tick=tick):
                return

    def run(self, duration_ms: int, step_ms: int = 5) -> None:
        """Move time forward, ticking every node and delivering everything each step."""
        for _ in range(duration_ms // step_ms):
            self.tick(step_ms)
            self.settle(tick=True)

    def leader(self) -> int | None:
        from replog.raft.states import Leader

        leaders = [i for i, n in self.nodes.items() if isinstance(n.core.state, Leader)]
        return max(leaders, key=lambda i: self.core(i).state.epoch) if leaders else None

    def propose(self, node_id: int, *values: bytes) -> None:
        result = self.core(node_id).propose(list(values), self.now_ms)
        assert result.error == 0, result
        self.collect()


def to(dst: int) -> Callable[[Sent], bool]:
    return lambda s: s.dst == dst


def of(kind: type) -> Callable[[Sent], bool]:
    return lambda s: isinstance(s.message, kind)


def values(log: MemoryLog) -> list[bytes]:
    """The data values in the log, in offset order."""
    return [v for _, _, v, control in log.entries() if control is None]
