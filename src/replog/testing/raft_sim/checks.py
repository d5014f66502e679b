"""The quorum simulator's safety invariants, checked after every event (``sim.py``).

Theory of operation. The checker learns the committed log from the nodes themselves: every
record a node applies is committed (it was below that node's high watermark), so the first node
to apply offset ``o`` defines ``committed[o]`` and every later application anywhere must match
it. A reference state machine (the workload's: the `KvStateMachine` register by default)
applies the committed records in order and remembers its state at every offset. Then, after
every event, for every running node:

1. **one leader per epoch**: a node leading epoch ``e`` is the only one that ever did;
2. **HW monotonic**: a node's high watermark never goes down while it runs (it restarts from its
   snapshot), and never passes its log end;
3. **logs agree below the commit point**: the node's log below its HW equals ``committed``, and
   a leader whose epoch is at least the newest epoch that committed anything holds every
   committed record (Leader Completeness); a record once found equal is never removed;
4. **state machines**: the node's state equals the reference state at its applied offset;
5. **snapshots** written, loaded or installed equal the reference state at their end offset, and
   their epoch is that of the committed record below it.

Each problem is returned as a message; the simulator stops at the first.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable, Sequence
from typing import Protocol

import attrs

from replog.raft.entries import Entry, decode_entries
from replog.raft.kv import KvStateMachine
from replog.raft.messages import RaftSnapshotId
from replog.raft.node import RaftNode
from replog.raft.states import Leader

__all__ = ["CheckedMachine", "NodeView", "QuorumChecker"]


class CheckedMachine(Protocol):
    """A state machine the checker can compare: a ``StateMachine`` with a comparable
    ``state()``."""

    def apply(self, entry: Entry) -> object: ...

    def restore(self, records: Sequence[bytes]) -> None: ...

    def state(self) -> Hashable: ...


_Record = tuple[int, bytes, bytes | None]  # epoch, value, control key


@attrs.frozen
class NodeView:
    """A running node as the checker sees it."""

    node_id: int
    incarnation: int
    raft: RaftNode


@attrs.define
class _LogCache:
    """A node's log records read so far (re-read after truncation) and how far they were
    found equal to the committed log."""

    start: int
    end: int
    records: dict[int, _Record]
    verified_to: int


@attrs.define
class QuorumChecker:
    """See the module docstring."""

    machine_factory: Callable[[], CheckedMachine] = KvStateMachine
    leaders: dict[int, int] = attrs.field(factory=dict)
    committed: list[_Record] = attrs.field(factory=list)
    reference_states: list[Hashable] = attrs.field(init=False)
    commit_epoch: int = -1
    _reference: CheckedMachine = attrs.field(init=False)
    _checked_states: dict[tuple[int, int], int] = attrs.field(factory=dict)
    _high_watermarks: dict[tuple[int, int], int] = attrs.field(factory=dict)
    _logs: dict[tuple[int, int], _LogCache] = attrs.field(factory=dict)

    def __attrs_post_init__(self) -> None:
        self._reference = self.machine_factory()
        self.reference_states = [self._reference.state()]

    # ------------------------------------------------------------------ events from nodes

    def on_applied(self, node_id: int, entry: Entry, leader_epoch: int | None) -> list[str]:
        """``node_id`` applied ``entry``; ``leader_epoch`` is its epoch if it leads."""
        record = (entry.epoch, entry.value, entry.control)
        offset = entry.offset
        if offset < len(self.committed):
            if self.committed[offset] != record:
                return [
                    f"committed changed: node {node_id} applied {record} at {offset}, "
                    f"committed is {self.committed[offset]}"
                ]
            return []
        if offset > len(self.committed):
            return [f"gap: node {node_id} applied {offset} before {len(self.committed)}"]
        self.committed.append(record)
        if entry.control is None:
            self._reference.apply(entry)
        self.reference_states.append(self._reference.state())
        if leader_epoch is not None:
            self.commit_epoch = max(self.commit_epoch, leader_epoch)
        return []

    def on_snapshot(
        self, node_id: int, snapshot_id: RaftSnapshotId, records: list[bytes], how: str
    ) -> list[str]:
        """A snapshot was written, loaded or installed on ``node_id``."""
        end = snapshot_id.end_offset
        if end > len(self.committed):
            return [f"snapshot {snapshot_id} {how} on {node_id} past the committed end"]
        machine = self.machine_factory()
        machine.restore(records)
        problems = []
        if machine.state() != self.reference_states[end]:
            problems.append(
                f"snapshot {snapshot_id} {how} on {node_id} holds {machine.state()}, "
                f"the committed state there is {self.reference_states[end]}"
            )
        if end > 0 and self.committed[end - 1][0] != snapshot_id.epoch:
            problems.append(f"snapshot {snapshot_id} epoch, record has {self.committed[end - 1]}")
        return problems

    # ------------------------------------------------------------------ after every event

    def check(self, views: Iterable[NodeView]) -> list[str]:
        """Invariants 1-4 over the running nodes."""
        problems: list[str] = []
        for view in views:
            problems += self._check_node(view)
            if problems:
                break
        return problems

    def _check_node(self, view: NodeView) -> list[str]:
        core, node_id = view.raft.core, view.node_id
        state = core.state
        if isinstance(state, Leader):
            leader = self.leaders.setdefault(state.epoch, node_id)
            if leader != node_id:
                return [f"two leaders in epoch {state.epoch}: {leader} and {node_id}"]
        key = (node_id, view.incarnation)
        hw, end = core.high_watermark, core.log.end_offset
        previous = self._high_watermarks.get(key, hw)
        self._high_watermarks[key] = hw
        if hw < previous:
            return [f"HW of node {node_id} went back from {previous} to {hw}"]
        if hw > end:
            return [f"HW {hw} of node {node_id} past its log end {end}"]
        applied = view.raft.applied_offset
        machine = view.raft.machine
        fresh = self._checked_states.get(key) != applied  # the state changes only on apply
        if fresh and hasattr(machine, "state") and applied < len(self.reference_states):
            self._checked_states[key] = applied
            expected = self.reference_states[applied]
            if machine.state() != expected:
                return [f"node {node_id} state {machine.state()} at {applied}, expected {expected}"]
        return self._check_log(view, key, isinstance(state, Leader) and self._is_current(state))

    def _is_current(self, state: Leader) -> bool:
        return state.epoch >= self.commit_epoch

    def _check_log(self, view: NodeView, key: tuple[int, int], complete: bool) -> list[str]:
        """Invariant 3, incrementally: only records not yet found equal are compared."""
        cache = self._refresh(view, key)
        if isinstance(cache, str):
            return [cache]
        bound = view.raft.core.high_watermark
        if complete:
            committed_end = len(self.committed)
            if cache.end < committed_end:
                return [
                    f"leader {view.node_id} (epoch {view.raft.core.state.epoch}) log ends at "
                    f"{cache.end}, before the committed end {committed_end}"
                ]
            bound = max(bound, committed_end)
        bound = min(bound, len(self.committed))
        for offset in range(max(cache.verified_to, cache.start), bound):
            if cache.records.get(offset) != self.committed[offset]:
                return [
                    f"node {view.node_id} log at {offset} holds {cache.records.get(offset)}, "
                    f"committed is {self.committed[offset]}"
                ]
        cache.verified_to = max(cache.verified_to, bound)
        return []

    def _refresh(self, view: NodeView, key: tuple[int, int]) -> _LogCache | str:
        """Bring the node's cached records up to its log (or a violation message)."""
        model = view.raft.core.log
        start, end = model.start_offset, model.end_offset
        cache = self._logs.get(key)
        if cache is None:
            cache = self._logs[key] = _LogCache(start, start, {}, start)
        if end < cache.end:
            if end < cache.verified_to:
                return (
                    f"node {view.node_id} cut committed records: log end {end}, "
                    f"verified to {cache.verified_to}"
                )
            cache.records = {o: r for o, r in cache.records.items() if o < end}
            cache.end = end
        if start != cache.start:
            cache.records = {o: r for o, r in cache.records.items() if o >= start}
            cache.start = start
            cache.end = max(cache.end, start)
            cache.verified_to = max(cache.verified_to, start)
        while cache.end < end:
            data = view.raft.storage.read_records(cache.end, 1 << 20)
            entries = [e for e in decode_entries(data) if e.offset >= cache.end]
            if not entries:
                return f"node {view.node_id} log unreadable at {cache.end} (end {end})"
            for entry in entries:
                cache.records[entry.offset] = (entry.epoch, entry.value, entry.control)
            cache.end = entries[-1].offset + 1
        return cache
