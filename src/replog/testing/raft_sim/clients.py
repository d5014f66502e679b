"""The quorum simulator's clients and the small request layer on the nodes (``sim.py``).

Each client is one sequential process: it sends an operation on the replicated register to the
node it believes leads and waits. The node proposes it (one record); when the node later
applies the record at the proposed offset it answers ``ok`` with the result, and if it applies
another record there (the proposal was lost in a leader change) it answers ``fail``: the
operation's only copy is gone, so it never takes effect. A node that does not lead answers
``fail`` at once with the leader it knows, which the client tries next. No answer within
``client_timeout_ms`` is ``info``: the operation may or may not take effect, now or later.
Client requests and answers are never duplicated by the network (one TCP exchange each).

Every call and return is stamped from one counter that follows the simulator's event order,
which is the real-time order the linearizability checker needs.

`ClientPool` is the simulator's default `Workload`; another workload (the metadata quorum's,
``replog.testing.quorum_sim``) brings its own state machine, request layer on the nodes and
clients through the same protocol. The pool sees the simulation through ``PoolHost``, the
members of ``RaftSimulation`` it uses.
"""

from __future__ import annotations

import itertools
import random
from collections.abc import Callable
from typing import Protocol

import attrs

from replog.errors import ErrorCode
from replog.raft.entries import Entry
from replog.raft.kv import KvOp, KvStateMachine
from replog.raft.node import RaftNode, StateMachine
from replog.raft.ready import LeaderAndEpoch
from replog.simkit.linearizability import KvOperation, LinearizabilityResult, check_kv
from replog.simkit.net import SimNetwork
from replog.testing.raft_sim.checks import CheckedMachine
from replog.testing.raft_sim.options import RaftSimOptions

__all__ = ["ClientPool", "ClientRecord", "PoolHost", "Workload"]

_NEVER = 1 << 62


class Workload(Protocol):
    """What the simulator runs on the quorum: the nodes' state machine, what the nodes do with
    client requests, the clients, and the check of their history."""

    def new_machine(self, node_id: int) -> StateMachine:
        """A fresh state machine for a node (re)starting."""
        ...

    def reference_machine(self) -> CheckedMachine:
        """A fresh state machine for the checker's reference."""
        ...

    def on_node_restart(self, node_id: int) -> None:
        """A node is about to (re)start: whatever it held in memory is gone."""
        ...

    def on_node_started(self, node_id: int, raft: RaftNode) -> None:
        """A node has (re)started."""
        ...

    def on_applied(self, node_id: int, entry: Entry, result: object) -> None:
        """A node applied ``entry`` (``RaftNode.on_apply``)."""
        ...

    def on_leader(self, node_id: int, known: LeaderAndEpoch) -> None:
        """A node's view of the leader changed (``RaftNode.on_leader``)."""
        ...

    def after_input(self, node_id: int, raft: RaftNode) -> None:
        """After every input to a node (inside its storage-failure guard)."""
        ...

    def next_deadline_ms(self, node_id: int) -> int:
        """When the node next needs a wake-up for the workload's sake."""
        ...

    def node_ids(self) -> set[int]:
        """The clients' network ids."""
        ...

    def start(self) -> None:
        """Begin issuing operations."""
        ...

    def on_heal(self) -> None:
        """The liveness phase begins."""
        ...

    def done(self) -> bool:
        """Every client did its work after the heal."""
        ...

    def finish(self) -> None:
        """The run is over: what still waits is indefinite."""
        ...

    def check(self) -> LinearizabilityResult:
        """The verdict on the clients' history."""
        ...

    def counts(self) -> dict[str, int]:
        """Operations by outcome."""
        ...

    def ok_count(self) -> int:
        """Operations that completed ok."""
        ...

    def status(self) -> str:
        """One line for a liveness failure."""
        ...


CLIENT_NET_ID_BASE = 100
_OKS_AFTER_HEAL = 2


@attrs.define
class ClientRecord:
    """One operation as the client saw it (``status``: pending, ok, fail, info)."""

    process: int
    op: KvOp
    call: int
    token: int
    ret: int | None = None
    status: str = "pending"
    output: object = None


@attrs.define
class _Client:
    index: int
    leader_hint: int
    current: ClientRecord | None = None
    ok_after_heal: int = 0

    @property
    def net_id(self) -> int:
        return CLIENT_NET_ID_BASE + self.index


@attrs.define
class _ClientProposal:
    epoch: int
    client: int
    token: int


class PoolHost(Protocol):
    """What the client pool uses of ``RaftSimulation``."""

    @property
    def opts(self) -> RaftSimOptions:
        """What the seed drew."""

    @property
    def rng(self) -> random.Random:
        """The seed's generator."""

    @property
    def now_ms(self) -> int:
        """The simulated time of the current event."""

    @property
    def voters(self) -> frozenset[int]:
        """The quorum's voters' ids (where a client looks for the leader)."""

    @property
    def net(self) -> SimNetwork:
        """The network between the clients and the nodes."""

    def after(self, delay_ms: int, action: Callable[[], None]) -> None:
        """Run ``action`` ``delay_ms`` from now."""

    def with_node(self, node_id: int, action: Callable[[RaftNode], None]) -> bool:
        """Run ``action`` on a running node, then carry out its outputs; False if it is down."""

    def note_client_reply(self, node_id: int) -> None:
        """A node answered a client."""


class ClientPool:
    """The clients of one simulation and the nodes' pending proposals."""

    def __init__(self, sim: PoolHost, count: int, keys: int) -> None:
        self.sim = sim
        self.keys = [f"k{i}" for i in range(keys)]
        voters = sorted(sim.voters)
        self.clients = [_Client(i, voters[i % len(voters)]) for i in range(count)]
        self.records: list[ClientRecord] = []
        self._stamps = itertools.count()
        self._tokens = itertools.count(1)
        self._values = itertools.count(1)
        self._written: dict[str, list[int]] = {k: [] for k in self.keys}
        self._pending: dict[int, dict[int, _ClientProposal]] = {}
        self._healed = False

    def node_ids(self) -> set[int]:
        """The clients' network ids (to put them on one side of a partition)."""
        return {c.net_id for c in self.clients}

    # ------------------------------------------------------------------ Workload hooks

    def new_machine(self, node_id: int) -> StateMachine:
        """The register."""
        del node_id
        return KvStateMachine()

    def reference_machine(self) -> CheckedMachine:
        """The register."""
        return KvStateMachine()

    def on_node_started(self, node_id: int, raft: RaftNode) -> None:
        """Nothing to set up."""

    def on_leader(self, node_id: int, known: LeaderAndEpoch) -> None:
        """Nothing to do: proposals are answered when their offset applies."""

    def after_input(self, node_id: int, raft: RaftNode) -> None:
        """Nothing to do: requests are proposed when they arrive."""

    def next_deadline_ms(self, node_id: int) -> int:
        """No timers of its own."""
        del node_id
        return _NEVER

    def check(self) -> LinearizabilityResult:
        """The register history must be linearizable."""
        return check_kv(self.history())

    def start(self) -> None:
        """Begin issuing operations."""
        for client in self.clients:
            self._schedule_next(client)

    def on_heal(self) -> None:
        """From now on count operations toward liveness."""
        self._healed = True

    # ------------------------------------------------------------------ client side

    def _schedule_next(self, client: _Client) -> None:
        think_ms = self.sim.rng.randint(1, self.sim.opts.client_think_ms)
        self.sim.after(think_ms, lambda: self._issue(client))

    def _issue(self, client: _Client) -> None:
        if client.current is not None or (self._healed and client.ok_after_heal >= _OKS_AFTER_HEAL):
            return
        rng = self.sim.rng
        key = rng.choice(self.keys)
        f = rng.choices(("read", "write", "cas"), (4, 3, 3))[0]
        value = next(self._values) if f != "read" else None
        expected = None
        if f == "cas":
            written = self._written[key]
            expected = rng.choice(written[-3:]) if written else 0
        op = KvOp(f, key, value, expected)
        if value is not None:
            self._written[key].append(value)
        record = ClientRecord(client.index, op, next(self._stamps), next(self._tokens))
        client.current = record
        self.records.append(record)
        node_id = client.leader_hint
        self.sim.net.send(
            client.net_id,
            node_id,
            lambda: self._on_request(node_id, client, record.token, op),
            duplicable=False,
        )
        self.sim.after(self.sim.opts.client_timeout_ms, lambda: self._on_timeout(client, record))

    def _on_timeout(self, client: _Client, record: ClientRecord) -> None:
        if client.current is record:
            self._complete(client, record, "info", None)
            client.leader_hint = self.sim.rng.choice(sorted(self.sim.voters))

    def _on_reply(
        self, client: _Client, token: int, status: str, output: object, leader_hint: int
    ) -> None:
        record = client.current
        if record is None or record.token != token:
            return
        self._complete(client, record, status, output)
        if status == "fail":
            client.leader_hint = (
                leader_hint if leader_hint >= 0 else self.sim.rng.choice(sorted(self.sim.voters))
            )

    def _complete(self, client: _Client, record: ClientRecord, status: str, output: object) -> None:
        record.status, record.output = status, output
        record.ret = next(self._stamps) if status != "info" else None
        client.current = None
        if status == "ok" and self._healed:
            client.ok_after_heal += 1
        self._schedule_next(client)

    # ------------------------------------------------------------------ node side

    def _on_request(self, node_id: int, client: _Client, token: int, op: KvOp) -> None:
        def propose(raft: RaftNode) -> None:
            result = raft.propose([op.encode()], self.sim.now_ms)
            if result.error is not ErrorCode.NONE:
                self._reply(node_id, client, token, "fail", None, result.leader_id)
            else:
                proposals = self._pending.setdefault(node_id, {})
                proposals[result.base_offset] = _ClientProposal(result.epoch, client.index, token)

        self.sim.with_node(node_id, propose)

    def on_applied(self, node_id: int, entry: Entry, result: object) -> None:
        """A node applied ``entry``: answer the client whose proposal sat at its offset."""
        proposal = self._pending.get(node_id, {}).pop(entry.offset, None)
        if proposal is None:
            return
        client = self.clients[proposal.client]
        if entry.epoch == proposal.epoch:
            self._reply(node_id, client, proposal.token, "ok", result, node_id)
        else:
            self._reply(node_id, client, proposal.token, "fail", None, -1)

    def on_node_restart(self, node_id: int) -> None:
        """A restarted node has forgotten its proposals (their clients will time out)."""
        self._pending.pop(node_id, None)

    def _reply(
        self, node_id: int, client: _Client, token: int, status: str, output: object, hint: int
    ) -> None:
        self.sim.note_client_reply(node_id)
        self.sim.net.send(
            node_id,
            client.net_id,
            lambda: self._on_reply(client, token, status, output, hint),
            duplicable=False,
        )

    # ------------------------------------------------------------------ results

    def done(self) -> bool:
        """Every client completed its operations after the heal."""
        return all(c.ok_after_heal >= _OKS_AFTER_HEAL and c.current is None for c in self.clients)

    def finish(self) -> None:
        """Operations still waiting at the end are indefinite."""
        for client in self.clients:
            if client.current is not None:
                client.current.status = "info"
                client.current = None

    def history(self) -> list[KvOperation]:
        """Every operation that may have taken effect (ok and info), for the checker."""
        return [
            KvOperation(
                process=r.process,
                f=r.op.f,
                key=r.op.key,
                call=r.call,
                ret=r.ret if r.status == "ok" else None,
                value=r.op.value,
                expected=r.op.expected,
                output=r.output,
            )
            for r in self.records
            if r.status in ("ok", "info", "pending")
        ]

    def counts(self) -> dict[str, int]:
        """Operations by outcome."""
        found: dict[str, int] = {}
        for record in self.records:
            found[f"op_{record.status}"] = found.get(f"op_{record.status}", 0) + 1
        return found

    def ok_count(self) -> int:
        """How many operations completed ok."""
        return sum(1 for r in self.records if r.status == "ok")

    def status(self) -> str:
        """One line for a liveness failure."""
        return "clients " + ", ".join(
            f"c{c.index}:{c.ok_after_heal} ok after heal"
            + (f", waiting on {c.current.op.f}" if c.current else "")
            for c in self.clients
        )
