"""The Raft simulator: ``python -m replog.testing.raft_sim.sim --seeds N [--seed S] [--verbose]``.

Theory of operation. One seed fixes everything: ``RaftSimOptions.draw(seed)`` (``options.py``) picks
the quorum (1, 3 or 5 voters, maybe an observer), the timeouts, the snapshot interval and chunk
size, the network's fault rates and the fault mix; ``random.Random(seed)`` then drives every delay
and fault, and each node incarnation draws its election timeouts from its own seeded generator. A
single thread pops ``(time_ms, seq, action)`` events from a heap. Nodes are real `RaftNode` drivers
on real files under a `FaultInjectingFileSystem` each; an fsync takes a random disk delay and the
node's messages wait for it, so a crash in between loses what was not durable. The network is
``replog.simkit.net.SimNetwork``: delay, loss, duplication, reordering, symmetric and one-way
partitions, clogged links.

Clients (``clients.py``) run read / write / compare-and-set operations on a replicated
register (`KvStateMachine`) through the node they believe leads, and record a history: ok,
fail (definitely not applied) or info (unknown). That is the default `Workload`; another one
brings its own state machine, node-side request layer and clients (the metadata quorum's:
``python -m replog.testing.quorum_sim``).

A run has two phases. **Safety** (``safety_ms``): operations while faults fire: process crashes,
power losses (unsynced writes lost, the last one maybe torn) of one, several or all nodes,
partitions, one-way partitions, clogged links, graceful resignations of the leader, failing
fsyncs, and (at a per-seed rate) a power loss right after a node sent messages, the moment that
punishes any message sent before what it depends on was durable. A process crash is reported
to the others as E9's ``leader_unreachable`` while the node is down (the TCP shell's refused
reconnects), and a fault tells a node its leader is unreachable when it may not be. Then
**liveness**: the network heals, every node restarts, and within ``liveness_ms_max`` a leader
must be elected, every client must complete operations again and every node must catch up.

After every event the `QuorumChecker` (``checks.py``) checks the nodes that event touched
(nothing else can have changed); at the end the client history
must be linearizable (``replog.simkit.linearizability``). The first violation stops the run;
``--seed S`` replays it exactly.
"""

from __future__ import annotations

import argparse
import heapq
import itertools
import os
import random
import shutil
import sys
import tempfile
from collections import Counter
from collections.abc import Callable, Sequence

import attrs

from replog.clock import ManualClock, monotonic_s
from replog.errors import InvariantError, StorageError
from replog.log.fault_fs import FaultInjectingFileSystem
from replog.raft.config import RaftConfig
from replog.raft.entries import Entry
from replog.raft.messages import Message, RaftSnapshotId
from replog.raft.node import RaftNode
from replog.raft.ready import LeaderAndEpoch
from replog.raft.states import Leader
from replog.raft.storage import metadata_log_config
from replog.simkit.net import SimNetwork
from replog.testing.raft_sim.checks import NodeView, QuorumChecker
from replog.testing.raft_sim.clients import ClientPool, Workload
from replog.testing.raft_sim.options import RaftSimOptions

__all__ = ["RaftSimResult", "RaftSimulation", "WorkloadFactory", "main", "run_seed"]

WorkloadFactory = Callable[["RaftSimulation"], Workload]
"""Builds a simulation's workload (default: ``ClientPool``, the register clients)."""


@attrs.frozen
class RaftSimResult:
    """The outcome of one seed."""

    seed: int
    violations: tuple[str, ...]
    events: int
    end_ms: int
    operations_ok: int
    options: RaftSimOptions
    counters: dict[str, int] = attrs.field(factory=dict)

    @property
    def ok(self) -> bool:
        """No violation."""
        return not self.violations


class _StopRaftRun(Exception):
    """Raised inside the loop when a violation ends the run."""


@attrs.define(eq=False)
class SimNode:
    """One node slot: its disk survives restarts, its `RaftNode` does not."""

    node_id: int
    root: str
    fs: FaultInjectingFileSystem
    raft: RaftNode | None = None
    incarnation: int = 0
    flush_scheduled: bool = False
    wake_ms: int | None = None
    down_until_restart: bool = False
    replied_to_client: bool = False


class RaftSimulation:
    """One seeded run (see the module docstring)."""

    def __init__(
        self,
        opts: RaftSimOptions,
        root: str,
        *,
        verbose: bool = False,
        workload: WorkloadFactory | None = None,
    ) -> None:
        self.opts = opts
        self.verbose = verbose
        self.rng = random.Random(opts.seed)
        self.now_ms = 0
        self.events = 0
        self._queue: list[tuple[int, int, Callable[[], None]]] = []
        self._seq = itertools.count()
        self.net = SimNetwork(self.rng, opts.net, self.after)
        self.voters = frozenset(range(1, opts.voters + 1))
        ids = range(1, opts.voters + opts.observers + 1)
        self.nodes = {
            i: SimNode(i, f"{root}/node{i}", FaultInjectingFileSystem(root, seed=opts.seed + i))
            for i in ids
        }
        self._touched: set[int] = set()
        self.clients: Workload = (
            workload(self) if workload is not None else ClientPool(self, opts.clients, opts.keys)
        )
        self.checker = QuorumChecker(machine_factory=self.clients.reference_machine)
        self.violations: list[str] = []
        self.phase = "safety"
        self.counters: Counter[str] = Counter()

    # ------------------------------------------------------------------ event loop

    def after(self, delay_ms: int, action: Callable[[], None]) -> None:
        """Run ``action`` ``delay_ms`` from now."""
        heapq.heappush(self._queue, (self.now_ms + max(0, delay_ms), next(self._seq), action))

    def trace(self, message: str) -> None:
        """Print a step when ``--verbose``."""
        if self.verbose:
            print(f"  [{self.now_ms:>6} ms] {message}")

    def violation(self, message: str) -> None:
        """Record a violation and stop the run."""
        self.violations.append(f"t={self.now_ms}ms {message}")
        raise _StopRaftRun

    def _run_until(self, end_ms: int, done: Callable[[], bool] | None = None) -> None:
        while self._queue and self._queue[0][0] <= end_ms:
            time_ms, _, action = heapq.heappop(self._queue)
            self.now_ms = time_ms
            try:
                action()
            except (_StopRaftRun, InvariantError):
                raise
            except Exception as exc:  # a replog component raised into its driver
                self.violation(f"uncaught {type(exc).__name__}: {exc}")
            self.events += 1
            for problem in self.checker.check(self._views(self._touched)):
                self.violation(problem)
            if done is not None and done():
                return
        self.now_ms = max(self.now_ms, end_ms)

    def run(self) -> None:
        """Both phases and the final checks; violations end up in ``self.violations``."""
        try:
            try:
                self._run_phases()
            except InvariantError as exc:
                self.violation(f"invariant: {exc}")
        except _StopRaftRun:
            pass

    def close(self) -> None:
        """Release every running node's files (the run is over; nothing more is written)."""
        for node in self.nodes.values():
            if node.raft is not None:
                node.raft.abandon()
                node.raft = None

    def _run_phases(self) -> None:
        for node in self.nodes.values():
            self._start(node)
        self.after(20, self.clients.start)
        self.after(200, self._fault_loop)
        self._run_until(self.opts.safety_ms)
        self._heal()
        self.phase = "liveness"
        self.clients.on_heal()
        deadline = self.now_ms + self.opts.liveness_ms_max
        self._run_until(deadline, self._settled)
        if not self._settled():
            self.violation(f"liveness: not settled by {deadline} ms: {self._status()}")
        self.clients.finish()
        for node in self.nodes.values():
            if node.raft is not None:
                self.counters.update(node.raft.counters)
        self.counters.update(self.clients.counts())
        result = self.clients.check()
        if not result.ok:
            self.violation(f"linearizability: {result.detail}")

    # ------------------------------------------------------------------ nodes

    def _views(self, node_ids: set[int]) -> list[NodeView]:
        """The running nodes among ``node_ids`` (an event changes only the nodes it touched,
        so only those are checked after it)."""
        views = [
            NodeView(n.node_id, n.incarnation, n.raft)
            for i in sorted(node_ids)
            if (n := self.nodes[i]).raft is not None
        ]
        node_ids.clear()
        return views

    def _config(self, node_id: int) -> RaftConfig:
        o = self.opts
        return RaftConfig(
            node_id=node_id,
            voters=self.voters,
            election_timeout_ms=o.election_timeout_ms,
            fetch_timeout_ms=o.fetch_timeout_ms,
            request_timeout_ms=o.request_timeout_ms,
            fetch_backoff_ms=o.fetch_backoff_ms,
            retry_backoff_ms=o.retry_backoff_ms,
            election_backoff_max_ms=o.election_backoff_max_ms,
            snapshot_chunk_bytes=o.snapshot_chunk_bytes,
        )

    def _start(self, node: SimNode) -> None:
        node.incarnation += 1
        node.down_until_restart = False
        node.flush_scheduled, node.wake_ms = False, None
        incarnation = node.incarnation
        rng = random.Random(f"{self.opts.seed}-{node.node_id}-{incarnation}")
        self.clients.on_node_restart(node.node_id)
        try:
            node.raft = RaftNode.open(
                self._config(node.node_id),
                node.root,
                node.fs,
                self.clients.new_machine(node.node_id),
                rng.randrange,
                self.now_ms,
                log_config=metadata_log_config(self.opts.segment_bytes, 256),
                clock=_SimTime(self),
                snapshot_interval=self.opts.snapshot_interval,
                on_apply=lambda e, r: self._on_apply(node, incarnation, e, r),
                on_snapshot=lambda s, recs, how: self._on_snapshot(node, s, recs, how),
                on_leader=lambda known: self._on_leader(node, known),
            )
        except StorageError as exc:
            self.trace(f"node {node.node_id} failed to start: {exc}")
            self._crash(node, power_loss=True, reason="storage failure at start")
            return
        self.clients.on_node_started(node.node_id, node.raft)
        self._touched.add(node.node_id)
        self.trace(f"node {node.node_id} started (incarnation {incarnation})")
        self._after_input(node)

    def _on_apply(self, node: SimNode, incarnation: int, entry: Entry, result: object) -> None:
        raft = node.raft
        state = None if raft is None else raft.core.state
        epoch = state.epoch if isinstance(state, Leader) else None
        for problem in self.checker.on_applied(node.node_id, entry, epoch):
            self.violation(problem)
        self.clients.on_applied(node.node_id, entry, result)

    def _on_leader(self, node: SimNode, known: LeaderAndEpoch) -> None:
        self.trace(f"node {node.node_id}: epoch {known.epoch}, leader {known.leader_id}")
        self.clients.on_leader(node.node_id, known)

    def _on_snapshot(
        self, node: SimNode, snapshot_id: RaftSnapshotId, records: list[bytes], how: str
    ) -> None:
        self.trace(f"node {node.node_id} snapshot {how} {snapshot_id}")
        for problem in self.checker.on_snapshot(node.node_id, snapshot_id, records, how):
            self.violation(problem)

    def with_node(self, node_id: int, action: Callable[[RaftNode], None]) -> bool:
        """Run ``action`` on a running node, then carry out its outputs; False if it is down.
        A storage failure inside crashes the node (its unsynced writes may be lost)."""
        node = self.nodes[node_id]
        raft = node.raft
        if raft is None:
            return False
        self._touched.add(node_id)
        try:
            action(raft)
            self.clients.after_input(node_id, raft)
        except StorageError as exc:
            self.trace(f"node {node_id} storage failure: {exc}")
            self._crash(node, power_loss=True, reason="storage failure")
            return True
        self._after_input(node)
        return True

    def _after_input(self, node: SimNode) -> None:
        raft, incarnation = node.raft, node.incarnation
        if raft is None:
            return
        messages = raft.take_messages()
        for out in messages:
            self._send(node.node_id, out.dst, out.message)
        sent = bool(messages) or node.replied_to_client
        node.replied_to_client = False
        if sent and self.rng.random() < self.opts.crash_after_send_rate:
            # the most adversarial moment for "persist before send": the messages are out
            self._crash(node, power_loss=True, reason="power loss right after sending")
            return
        if raft.needs_flush and not node.flush_scheduled:
            node.flush_scheduled = True
            disk_ms = self.rng.randint(1, self.opts.disk_ms_max)
            self.after(disk_ms, lambda: self._flush(node, incarnation))
        wanted = min(raft.next_deadline_ms(), self.clients.next_deadline_ms(node.node_id))
        deadline = max(wanted, self.now_ms + 1)
        if node.wake_ms is None or deadline < node.wake_ms or node.wake_ms < self.now_ms:
            node.wake_ms = deadline
            self.after(deadline - self.now_ms, lambda: self._wake(node, incarnation, deadline))

    def _flush(self, node: SimNode, incarnation: int) -> None:
        if node.incarnation != incarnation or node.raft is None:
            return
        node.flush_scheduled = False
        self.with_node(node.node_id, lambda raft: raft.flush(self.now_ms))

    def _wake(self, node: SimNode, incarnation: int, deadline: int) -> None:
        if node.incarnation != incarnation or node.wake_ms != deadline:
            return
        node.wake_ms = None
        self.with_node(node.node_id, lambda raft: raft.tick(self.now_ms))

    def note_client_reply(self, node_id: int) -> None:
        """A node answered a client (an acknowledgement that depends on durability)."""
        self.nodes[node_id].replied_to_client = True

    def _send(self, src: int, dst: int, message: Message) -> None:
        def deliver() -> None:
            self.with_node(dst, lambda raft: raft.on_message(src, message, self.now_ms))

        self.net.send(src, dst, deliver)

    def _crash(self, node: SimNode, *, power_loss: bool, reason: str) -> None:
        self.counters["crash" + ("_power_loss" if power_loss else "")] += 1
        if node.raft is not None:
            self.counters.update(node.raft.counters)
            node.raft.abandon()
            node.raft = None
        if power_loss:
            node.fs.crash(tear=self.rng.random() < 0.7)
        self.trace(f"node {node.node_id} down ({reason}, power_loss={power_loss})")
        if not power_loss:  # its process died: the others' transports find its port closed
            incarnation = node.incarnation
            self.after(self.rng.randint(1, 5), lambda: self._report_unreachable(node, incarnation))
        quick = self.rng.random() < 0.5  # back within an election, or after it
        self._restart_later(node, self.rng.randint(1, 20) if quick else self.rng.randint(30, 400))

    def _report_unreachable(self, node: SimNode, incarnation: int) -> None:
        """E9 as the TCP shell feeds it: while ``node`` is down after a process crash, every
        running node is told it is unreachable, again every half request timeout (a refused
        reconnect each time) until it restarts."""
        if node.raft is not None or node.incarnation != incarnation:
            return
        gone = node.node_id
        for other in self.nodes.values():
            if other is not node and other.raft is not None:
                self.counters["unreachable_report"] += 1
                self.with_node(
                    other.node_id, lambda raft: raft.leader_unreachable(gone, self.now_ms)
                )
        delay_ms = max(1, self.opts.request_timeout_ms // 2)
        self.after(delay_ms, lambda: self._report_unreachable(node, incarnation))

    def _restart_later(self, node: SimNode, delay_ms: int) -> None:
        node.down_until_restart = True
        incarnation = node.incarnation

        def restart() -> None:
            if node.raft is None and node.incarnation == incarnation:
                self._start(node)

        self.after(delay_ms, restart)

    # ------------------------------------------------------------------ faults

    def _fault_loop(self) -> None:
        if self.phase != "safety":
            return
        interval_ms = self.opts.fault_interval_ms
        spread = interval_ms // 4
        self.after(interval_ms + self.rng.randint(-spread, spread), self._fault_loop)
        names = [n for n, _ in self.opts.fault_weights]
        weights = [w for _, w in self.opts.fault_weights]
        kind = self.rng.choices(names, weights)[0]
        victim = self.nodes[self.rng.choice(sorted(self.nodes))]
        getattr(self, f"_fault_{kind}")(victim)

    def _fault_nothing(self, victim: SimNode) -> None:
        del victim

    def _fault_crash(self, victim: SimNode) -> None:
        if victim.raft is not None:
            self._crash(victim, power_loss=False, reason="process crash")

    def _fault_power_loss(self, victim: SimNode) -> None:
        if victim.raft is not None:
            self._crash(victim, power_loss=True, reason="power loss")

    def _fault_power_loss_all(self, victim: SimNode) -> None:
        del victim
        for node in self.nodes.values():
            if node.raft is not None:
                self._crash(node, power_loss=True, reason="power loss of every node")

    def _fault_power_loss_some(self, victim: SimNode) -> None:
        del victim
        running = [n for n in self.nodes.values() if n.raft is not None]
        for node in self.rng.sample(running, min(len(running), self.rng.randint(2, 3))):
            self._crash(node, power_loss=True, reason="power loss of several nodes")

    def _fault_partition(self, victim: SimNode, *, one_way: bool = False) -> None:
        del victim
        ids = sorted(self.nodes)
        self.rng.shuffle(ids)
        cut = self.rng.randint(1, max(1, len(ids) - 1))
        side_a, side_b = set(ids[:cut]), set(ids[cut:])
        if self.rng.random() < 0.5:
            side_a |= self.clients.node_ids()
        self.trace(f"partition {sorted(side_a)} | {sorted(side_b)} one_way={one_way}")
        self.net.partition(side_a, side_b, one_way=one_way)
        blocked = {(a, b) for a in side_a for b in side_b} | (
            set() if one_way else {(b, a) for a in side_a for b in side_b}
        )
        self.after(self.rng.randint(100, 700), lambda: self.net.blocked.difference_update(blocked))

    def _fault_one_way(self, victim: SimNode) -> None:
        self._fault_partition(victim, one_way=True)

    def _fault_clog(self, victim: SimNode) -> None:
        other = self.rng.choice(sorted(self.nodes))
        link = (victim.node_id, other)
        self.net.clog(*link)
        self.after(self.rng.randint(100, 600), lambda: self.net.clogged.discard(link))

    def _fault_unreachable(self, victim: SimNode) -> None:
        """A wrong E9 report: ``victim`` is told the leader it follows is gone, alive or not
        (the pre-vote round must keep a healthy quorum as it is)."""
        raft = victim.raft
        if raft is not None:
            leader = raft.core.state.leader_id
            self.counters["spurious_unreachable"] += 1
            self.trace(f"node {victim.node_id} is told leader {leader} is unreachable")
            self.with_node(victim.node_id, lambda r: r.leader_unreachable(leader, self.now_ms))

    def _fault_resign(self, victim: SimNode) -> None:
        del victim
        for node in self.nodes.values():
            if node.raft is not None and isinstance(node.raft.core.state, Leader):
                self.trace(f"leader {node.node_id} resigns")
                self.with_node(node.node_id, self._resign)

    def _resign(self, raft: RaftNode) -> None:
        raft.resign(self.now_ms)

    def _fault_fail_fsync(self, victim: SimNode) -> None:
        if victim.raft is not None:
            target = self.rng.choice((".log", "quorum-state", ".checkpoint"))
            self.trace(f"next fsync of {target} on node {victim.node_id} fails")
            victim.fs.fail_fsync(target)

    # ------------------------------------------------------------------ liveness

    def _heal(self) -> None:
        self.trace("heal: network, restarts")
        self.net.heal()
        for node in self.nodes.values():
            if node.raft is None:
                self._start(node)

    def current_leader(self) -> SimNode | None:
        """The running node leading the highest epoch, if any."""
        best: tuple[int, SimNode] | None = None
        for node in self.nodes.values():
            state = None if node.raft is None else node.raft.core.state
            if isinstance(state, Leader) and (best is None or state.epoch > best[0]):
                best = (state.epoch, node)
        return None if best is None else best[1]

    def _settled(self) -> bool:
        if not self.clients.done():
            return False
        leader = self.current_leader()
        if leader is None or leader.raft is None:
            return False
        core = leader.raft.core
        target = core.log.end_offset
        if core.high_watermark < target:
            return False
        return all(
            n.raft is not None and n.raft.applied_offset >= target for n in self.nodes.values()
        )

    def _status(self) -> str:
        parts = [self.clients.status()]
        for node in self.nodes.values():
            raft = node.raft
            if raft is None:
                parts.append(f"n{node.node_id}: down")
                continue
            core = raft.core
            parts.append(
                f"n{node.node_id}: {type(core.state).__name__}({core.state.epoch}) "
                f"hw={core.high_watermark} applied={raft.applied_offset} "
                f"log=[{core.log.start_offset},{core.log.end_offset})"
            )
        return "; ".join(parts)


def run_seed(
    seed: int, *, verbose: bool = False, workload: WorkloadFactory | None = None
) -> RaftSimResult:
    """Run one seed in a fresh temp dir (removed afterwards), with the register clients or
    ``workload``."""
    opts = RaftSimOptions.draw(seed)
    shm = "/dev/shm"  # a RAM disk where there is one: fsync costs nothing there
    root = tempfile.mkdtemp(
        prefix=f"replog-raft-sim-{seed}-", dir=shm if os.path.isdir(shm) else None
    )
    try:
        sim = RaftSimulation(opts, root, verbose=verbose, workload=workload)
        if verbose:
            print(f"seed {seed}: {opts.describe()}")
        try:
            sim.run()
        finally:
            sim.close()
        return RaftSimResult(
            seed,
            tuple(sim.violations),
            sim.events,
            sim.now_ms,
            sim.clients.ok_count(),
            opts,
            dict(sim.counters),
        )
    finally:
        shutil.rmtree(root, ignore_errors=True)


def reproduce_command(seed: int, module: str = "replog.testing.raft_sim.sim") -> str:
    """The one command that replays ``seed``."""
    return f"python -m {module} --seed {seed} --verbose"


def main(
    argv: Sequence[str] | None = None,
    *,
    workload: WorkloadFactory | None = None,
    module: str = "replog.testing.raft_sim.sim",
) -> int:
    """CLI entry point; exit status 1 when any seed has a violation. ``workload`` and
    ``module`` let another workload's entry point reuse it."""
    parser = argparse.ArgumentParser(prog=f"python -m {module}", description=__doc__)
    parser.add_argument("--seeds", type=int, default=100, help="how many seeds (from --first)")
    parser.add_argument("--first", type=int, default=0, help="first seed of the range")
    parser.add_argument("--seed", type=int, default=None, help="run only this seed")
    parser.add_argument("--verbose", action="store_true", help="trace faults and roles")
    parser.add_argument("--stats", action="store_true", help="print totals of what happened")
    args = parser.parse_args(argv)
    seeds = [args.seed] if args.seed is not None else range(args.first, args.first + args.seeds)
    started = monotonic_s()
    failures = count = events = operations = 0
    totals: Counter[str] = Counter()
    for seed in seeds:
        result = run_seed(seed, verbose=args.verbose, workload=workload)
        totals.update(result.counters)
        count += 1
        events += result.events
        operations += result.operations_ok
        if not result.ok:
            failures += 1
            command = reproduce_command(seed, module)
            print(f"seed {seed}: {result.violations[0]} -- reproduce: {command}")
        elif args.verbose:
            print(f"seed {seed}: ok ({result.events} events, {result.counters})")
    elapsed = monotonic_s() - started
    print(
        f"{count} seeds, {failures} violations ({elapsed:.1f} s, {events} events, "
        f"{operations} operations ok)"
    )
    if args.verbose or args.stats:
        print("totals: " + ", ".join(f"{k}={v}" for k, v in sorted(totals.items())))
    return 1 if failures else 0


class _SimTime:
    """The simulation's time as a ``replog.clock.Clock`` (the metadata logs' segment ages)."""

    def __init__(self, sim: RaftSimulation) -> None:
        self._sim = sim

    def monotonic_ms(self) -> int:
        """The simulation's now."""
        return self._sim.now_ms

    def wall_ms(self) -> int:
        """A realistic epoch time moving with the simulation."""
        return ManualClock.DEFAULT_WALL_OFFSET_MS + self._sim.now_ms


if __name__ == "__main__":
    sys.exit(main())
