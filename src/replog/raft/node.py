"""`RaftNode`: the driver that joins the pure `RaftCore`, its `RaftStorage` and the owner's
`StateMachine`, without sockets, threads or clocks (one driver for every shell).

Theory of operation. Every input (``on_message``, ``tick``, ``propose``, ``resign``,
``leader_unreachable``) goes to the core, followed by a ``tick``; then `_process` carries out
each `Ready` (``ready.py``): log operations and the quorum-state land on disk at once, the
log's fsync is left to the shell (`needs_flush` / `flush`), and the Ready's messages wait in
an outbox until the fsync that covers every log operation taken before them has run
(`take_messages`). A shell may fsync at once (tests and ``replog.quorum``'s server, once per
pump), after a simulated disk delay (the simulator) or on a worker thread.

Committed records (below the high watermark) are applied in offset order to the state machine;
control records advance the applied offset without reaching it. Every ``snapshot_interval``
applied records the node writes a local snapshot of the state machine and tells the core, which
moves the log start up to it. A snapshot installed from the leader replaces the state machine's
state. ``on_apply`` / ``on_snapshot`` let an observer (the simulator's checker, the owner's
request tracking) see both, ``on_leader`` every change of the leader this node knows;
``counters`` counts log operations by kind and leader changes.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from typing import Protocol

import attrs

from replog.clock import SYSTEM_CLOCK, Clock
from replog.log.config import LogConfig
from replog.log.fs import FileSystem
from replog.raft.config import RaftConfig
from replog.raft.core import RaftCore, Rng
from replog.raft.entries import Entry, decode_entries
from replog.raft.messages import Message, Outbound, RaftSnapshotId
from replog.raft.ready import LeaderAndEpoch, ProposeResult
from replog.raft.storage import RaftStorage

__all__ = ["RaftNode", "StateMachine"]


class StateMachine(Protocol):
    """What the owner plugs in: applies committed data records, saves and loads its state."""

    def apply(self, entry: Entry) -> object:
        """Apply one committed data record (in offset order); the result goes to ``on_apply``."""
        ...

    def snapshot(self) -> list[bytes]:
        """The whole state as records (written into a snapshot file)."""
        ...

    def restore(self, records: Sequence[bytes]) -> None:
        """Replace the whole state with the one ``records`` (from `snapshot`) describe."""
        ...


ApplyListener = Callable[[Entry, object], None]
LeaderListener = Callable[[LeaderAndEpoch], None]
SnapshotListener = Callable[[RaftSnapshotId, list[bytes], str], None]


@attrs.define(eq=False)
class RaftNode:
    """One quorum node with its storage and state machine. Open with `RaftNode.open`."""

    core: RaftCore
    storage: RaftStorage
    machine: StateMachine
    applied_offset: int
    snapshot_interval: int
    on_apply: ApplyListener | None = None
    on_snapshot: SnapshotListener | None = None
    on_leader: LeaderListener | None = None
    counters: Counter[str] = attrs.field(factory=Counter)
    _outbox: list[tuple[int, tuple[Outbound, ...]]] = attrs.field(factory=list)
    _ready_count: int = 0
    _released: list[Outbound] = attrs.field(factory=list)

    @classmethod
    def open(
        cls,
        config: RaftConfig,
        data_dir: str,
        fs: FileSystem,
        machine: StateMachine,
        rng: Rng,
        now_ms: int,
        *,
        log_config: LogConfig | None = None,
        clock: Clock = SYSTEM_CLOCK,
        snapshot_interval: int = 0,
        on_apply: ApplyListener | None = None,
        on_snapshot: SnapshotListener | None = None,
        on_leader: LeaderListener | None = None,
    ) -> RaftNode:
        """Recover the node's storage, load the latest snapshot into ``machine`` and start the
        core. ``snapshot_interval`` 0 never snapshots."""
        storage = RaftStorage.open(data_dir, fs, log_config, clock=clock)
        try:
            model = storage.model()
            applied = model.start_offset
            if model.snapshot is not None:
                records = storage.snapshots.read(model.snapshot)
                machine.restore(records)
                applied = model.snapshot.end_offset
                if on_snapshot is not None:
                    on_snapshot(model.snapshot, records, "loaded")
            core = RaftCore.start(config, storage.read_election(), model, storage, rng, now_ms)
        except BaseException:
            storage.abandon()
            raise
        node = cls(
            core=core,
            storage=storage,
            machine=machine,
            applied_offset=applied,
            snapshot_interval=snapshot_interval,
            on_apply=on_apply,
            on_snapshot=on_snapshot,
            on_leader=on_leader,
        )
        node._process(now_ms)
        return node

    # ------------------------------------------------------------------ inputs

    def on_message(self, src: int, message: Message, now_ms: int) -> None:
        """Deliver a message from node ``src``."""
        self.core.on_message(src, message, now_ms)
        self.core.tick(now_ms)
        self._process(now_ms)

    def tick(self, now_ms: int) -> None:
        """Let timers fire."""
        self.core.tick(now_ms)
        self._process(now_ms)

    def propose(self, values: Sequence[bytes], now_ms: int) -> ProposeResult:
        """Append ``values`` if this node leads (see `RaftCore.propose`)."""
        result = self.core.propose(values, now_ms)
        self._process(now_ms)
        return result

    def resign(self, now_ms: int) -> bool:
        """Step down if leading (graceful)."""
        resigned = self.core.resign(now_ms)
        self._process(now_ms)
        return resigned

    def leader_unreachable(self, node_id: int, now_ms: int) -> None:
        """The transport found ``node_id`` gone (see `RaftCore.leader_unreachable`)."""
        self.core.leader_unreachable(node_id, now_ms)
        self.core.tick(now_ms)
        self._process(now_ms)

    @property
    def needs_flush(self) -> bool:
        """Whether an fsync is due: appended records, or messages waiting for one."""
        return self.storage.has_unflushed or bool(self._outbox)

    def flush(self, now_ms: int) -> None:
        """fsync the log (step 3), tell the core, release the messages it covers."""
        covered = self._ready_count
        durable = self.storage.flush()
        self.core.on_flushed(durable, now_ms)
        self._release(covered)
        self._process(now_ms)

    def take_messages(self) -> list[Outbound]:
        """Messages whose prerequisites are durable, in the order the core produced them."""
        released, self._released = self._released, []
        return released

    def next_deadline_ms(self) -> int:
        """When the core next wants a tick."""
        return self.core.next_deadline_ms()

    # ------------------------------------------------------------------ Ready

    def _process(self, now_ms: int) -> None:
        core = self.core
        while core.has_ready:
            ready = core.take_ready()
            for op in ready.log_ops:
                self.counters[type(op).__name__] += 1
            if ready.leader is not None:
                self.counters["leader_changes"] += 1
                if self.on_leader is not None:
                    self.on_leader(ready.leader)
            installed = self.storage.apply(ready)
            self.storage.check_model(core.log)
            for snapshot_id, records in installed:
                self.machine.restore(records)
                self.applied_offset = snapshot_id.end_offset
                if self.on_snapshot is not None:
                    self.on_snapshot(snapshot_id, records, "installed")
            self._ready_count += 1
            if ready.messages:
                self._outbox.append((self._ready_count, ready.messages))
            if ready.high_watermark is not None:
                self._apply_committed(now_ms)
        if not self.storage.has_unflushed:
            self._release(self._ready_count)

    def _release(self, covered: int) -> None:
        while self._outbox and self._outbox[0][0] <= covered:
            self._released.extend(self._outbox.pop(0)[1])

    def _apply_committed(self, now_ms: int) -> None:
        """Step 5: apply everything below the HW, then snapshot if one is due."""
        high_watermark = self.core.high_watermark
        while self.applied_offset < high_watermark:
            data = self.storage.read_records(self.applied_offset, 1 << 20)
            entries = [e for e in decode_entries(data) if e.offset >= self.applied_offset]
            if not entries:
                break
            for entry in entries:
                if entry.offset >= high_watermark:
                    break
                result = None if entry.control is not None else self.machine.apply(entry)
                self.applied_offset = entry.offset + 1
                if self.on_apply is not None:
                    self.on_apply(entry, result)
        self._maybe_snapshot(now_ms)

    def _maybe_snapshot(self, now_ms: int) -> None:
        interval = self.snapshot_interval
        if interval <= 0 or self.applied_offset - self.core.log.start_offset < interval:
            return
        end_offset = self.applied_offset
        snapshot_id = RaftSnapshotId(end_offset, self.core.log.epoch_for_offset(end_offset - 1))
        records = self.machine.snapshot()
        self.storage.write_snapshot(snapshot_id, records, now_ms)
        if self.on_snapshot is not None:
            self.on_snapshot(snapshot_id, records, "written")
        self.core.on_snapshot(snapshot_id)

    def close(self) -> None:
        """Flush and close the storage (a clean stop)."""
        self.storage.close()

    def abandon(self) -> None:
        """Drop everything without writing (a simulated crash)."""
        self.storage.abandon()
