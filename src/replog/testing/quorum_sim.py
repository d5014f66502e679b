"""The metadata quorum under the Raft simulator's faults:
``python -m replog.testing.quorum_sim --seeds N [--seed S] [--verbose]``.

Theory of operation. This is a `Workload` for ``replog.testing.raft_sim``: the same seeded
clusters, network, disks and faults (crashes, power losses, partitions, clogged links, resignations,
failing fsyncs), but every node runs the real metadata stack -- a `MetadataMachine` applied by
its `RaftNode` and a `QuorumFrontend` serving requests on it, exactly as ``QuorumServer``
wires them -- and the clients speak its requests over the simulated network:

- a **keeper** per broker keeps the broker registered: it registers (adopting the incarnation
  of a registration of its own whose reply it missed) and heartbeats every third of the session
  timeout; when a heartbeat says the session expired -- the leader's clock decided so during a
  partition or a crash, and committed the expiry -- it registers a new incarnation;
- an **admin** keeps a controller elected among the registered brokers and creates the topic;
- **data clients** read a partition's state and compare-and-set it (from the state they read,
  with the controller epoch they last learned), through the node they believe leads.

Every read and CAS goes into a history (ok; fail when it definitely had no effect: not leader,
or a fenced controller epoch; info when the outcome is unknown), and each partition is a
register whose value is ``(partition_epoch, leader_epoch)`` (the leader epoch of every proposal
is drawn from one growing counter, so no two writes are equal). At the end the history must be
linearizable (``replog.simkit.linearizability``). The simulator's own checker meanwhile
compares every node's image with a reference `MetadataMachine` at every applied offset, and
every snapshot written, loaded or installed with the reference at its offset.
"""

from __future__ import annotations

import itertools
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, cast

import attrs

from replog.coord.errors import (
    BrokerIdInUseError,
    FencedControllerError,
    SessionExpiredError,
    TopicExistsError,
)
from replog.metadata.types import BrokerInfo, CasResult, CasStatus, ControllerInfo, PartitionState
from replog.quorum.commands import (
    CasPartitionState,
    CreateTopicWrite,
    CurrentController,
    ElectController,
    GetPartitionState,
    Heartbeat,
    RegisterBroker,
)
from replog.quorum.frontend import (
    QuorumFrontend,
    Reply,
    ReplyError,
    ReplyNotLeader,
    ReplyOk,
    ReplyUnknown,
    Request,
)
from replog.quorum.machine import MetadataMachine
from replog.raft.entries import Entry
from replog.raft.node import RaftNode, StateMachine
from replog.raft.ready import LeaderAndEpoch
from replog.simkit.linearizability import KvOperation, LinearizabilityResult, check_kv
from replog.testing.raft_sim.checks import CheckedMachine
from replog.testing.raft_sim.sim import main as sim_main

if TYPE_CHECKING:
    from replog.testing.raft_sim.sim import RaftSimulation

__all__ = ["MetadataWorkload", "main"]

TOPIC = "meta"
_CLIENT_NET_ID_BASE = 200
_OKS_AFTER_HEAL = 2
_NEVER = 1 << 62
_INITIAL = (0, 0)


@attrs.define
class _Record:
    """One data-client operation as the client saw it."""

    process: int
    f: str
    partition: int
    call: int
    expected: tuple[int, int] | None = None
    value: tuple[int, int] | None = None
    ret: int | None = None
    status: str = "pending"
    output: object = None


@attrs.define
class _Process:
    """A sequential client: one request at a time to the node it believes leads."""

    index: int
    role: str  # "keeper", "admin" or "data"
    leader_hint: int
    broker_id: int = -1
    incarnation: int | None = None
    token: int = 0
    request: Request | None = None
    waiting: bool = False
    looked: bool = False
    record: _Record | None = None
    ok_after_heal: int = 0

    @property
    def net_id(self) -> int:
        return _CLIENT_NET_ID_BASE + self.index


class MetadataWorkload:
    """The metadata stack and its clients (see the module docstring)."""

    def __init__(self, sim: RaftSimulation) -> None:
        self.sim = sim
        opts = sim.opts
        self.partitions = max(1, opts.keys)
        self.brokers = max(1, min(3, len(sim.voters) + 1))
        self.session_timeout_ms = 4 * opts.fetch_timeout_ms
        voters = sorted(sim.voters)
        roles = ["keeper"] * self.brokers + ["admin"] + ["data"] * opts.clients
        self.processes = [
            _Process(i, role, voters[i % len(voters)]) for i, role in enumerate(roles)
        ]
        for i, process in enumerate(self.processes[: self.brokers]):
            process.broker_id = i + 1
        self.frontends: dict[int, QuorumFrontend] = {}
        self.records: list[_Record] = []
        self.topic_created = False
        self.controller: ControllerInfo | None = None
        self._stamps = itertools.count()
        self._tokens = itertools.count(1)
        self._leader_epochs = itertools.count(1)
        self._healed = False
        self.stats: dict[str, int] = {}

    def _count(self, name: str) -> None:
        self.stats[name] = self.stats.get(name, 0) + 1

    # ------------------------------------------------------------------ node side

    def new_machine(self, node_id: int) -> StateMachine:
        """A fresh metadata image."""
        del node_id
        return MetadataMachine()

    def reference_machine(self) -> CheckedMachine:
        """The checker's reference image."""
        return MetadataMachine()

    def on_node_restart(self, node_id: int) -> None:
        """The node's frontend (its pending requests) is gone with it."""
        self.frontends.pop(node_id, None)

    def on_node_started(self, node_id: int, raft: RaftNode) -> None:
        """A fresh frontend on the node's machine."""
        machine = raft.machine
        if not isinstance(machine, MetadataMachine):  # pragma: no cover - new_machine made it
            raise TypeError(f"node {node_id} runs {type(machine).__name__}")
        ids = itertools.count()  # each leader draws its own cluster id; the log decides
        frontend = QuorumFrontend(
            machine, new_cluster_id=lambda: f"sim-{node_id}-{raft.core.state.epoch}-{next(ids)}"
        )
        frontend.attach(raft)
        self.frontends[node_id] = frontend

    def on_applied(self, node_id: int, entry: Entry, result: object) -> None:
        """``RaftNode.on_apply`` into the frontend."""
        frontend = self.frontends.get(node_id)
        if frontend is not None:
            frontend.on_apply(entry, result)

    def on_leader(self, node_id: int, known: LeaderAndEpoch) -> None:
        """``RaftNode.on_leader`` into the frontend."""
        frontend = self.frontends.get(node_id)
        if frontend is not None:
            frontend.on_leader(known)

    def after_input(self, node_id: int, raft: RaftNode) -> None:
        """Pump the frontend and send its replies over the network."""
        del raft
        frontend = self.frontends.get(node_id)
        if frontend is None:
            return
        frontend.pump(self.sim.now_ms)
        for token, reply in frontend.take_replies():
            index, request_token = cast(tuple[int, int], token)
            self._send_reply(node_id, self.processes[index], request_token, reply)

    def next_deadline_ms(self, node_id: int) -> int:
        """The frontend's next deadline."""
        frontend = self.frontends.get(node_id)
        return _NEVER if frontend is None else frontend.next_deadline_ms()

    # ------------------------------------------------------------------ the network

    def _send(self, process: _Process, request: Request) -> None:
        """Send ``request`` to the node ``process`` believes leads; time out if no answer."""
        sim = self.sim
        process.token = token = next(self._tokens)
        process.request = request
        process.waiting = True
        node_id = process.leader_hint
        deadline_ms = sim.now_ms + sim.opts.client_timeout_ms

        def arrive() -> None:
            frontend = self.frontends.get(node_id)
            if frontend is None:
                return

            def deliver(raft: RaftNode) -> None:
                del raft
                frontend.on_request((process.index, token), request, deadline_ms, sim.now_ms)

            sim.with_node(node_id, deliver)

        sim.net.send(process.net_id, node_id, arrive, duplicable=False)
        sim.after(sim.opts.client_timeout_ms, lambda: self._on_timeout(process, token))

    def _send_reply(self, node_id: int, process: _Process, token: int, reply: Reply) -> None:
        self.sim.note_client_reply(node_id)
        self.sim.net.send(
            node_id,
            process.net_id,
            lambda: self._on_reply(process, token, reply),
            duplicable=False,
        )

    def _on_timeout(self, process: _Process, token: int) -> None:
        if process.waiting and process.token == token:
            process.waiting = False
            process.leader_hint = self.sim.rng.choice(sorted(self.sim.voters))
            self._outcome(process, None)

    def _on_reply(self, process: _Process, token: int, reply: Reply) -> None:
        if not process.waiting or process.token != token:
            return
        process.waiting = False
        if isinstance(reply, ReplyNotLeader):
            hint = reply.leader_id
            voters = sorted(self.sim.voters)
            process.leader_hint = hint if hint in voters else self.sim.rng.choice(voters)
        self._outcome(process, reply)

    def _next(self, process: _Process, delay_ms: int | None = None) -> None:
        think_ms = delay_ms if delay_ms is not None else self.sim.rng.randint(1, 15)
        self.sim.after(think_ms, lambda: self._act(process))

    # ------------------------------------------------------------------ the processes

    def start(self) -> None:
        """Every process begins."""
        for process in self.processes:
            self._next(process)

    def _act(self, process: _Process) -> None:
        if process.waiting:
            return
        if self._healed and process.role != "data" and self.done():
            return  # quiet, so that every node can catch up (see ``done``)
        if process.role == "keeper":
            self._keeper_act(process)
        elif process.role == "admin":
            self._admin_act(process)
        elif self.topic_created and not (self._healed and process.ok_after_heal >= _OKS_AFTER_HEAL):
            self._data_act(process)
        else:
            self._next(process, 20)

    def _outcome(self, process: _Process, reply: Reply | None) -> None:
        """A request ended: ``reply`` None means no answer in time."""
        if process.role == "keeper":
            self._keeper_outcome(process, reply)
        elif process.role == "admin":
            self._admin_outcome(process, reply)
        else:
            self._data_outcome(process, reply)

    def _keeper_act(self, process: _Process) -> None:
        if process.incarnation is None:
            self._send(
                process,
                RegisterBroker(
                    broker_id=process.broker_id,
                    host="sim",
                    port=process.broker_id,
                    rack=None,
                    session_timeout_ms=self.session_timeout_ms,
                    clean_shutdown=True,
                    fenced=False,
                ),
            )
        else:
            self._send(process, Heartbeat(process.broker_id, process.incarnation))

    def _keeper_outcome(self, process: _Process, reply: Reply | None) -> None:
        interval_ms = self.session_timeout_ms // 3
        if isinstance(reply, ReplyOk) and isinstance(reply.value, BrokerInfo):
            process.incarnation = reply.value.incarnation_epoch
            self._count("registrations")
        elif isinstance(reply, ReplyError) and isinstance(reply.error, BrokerIdInUseError):
            process.incarnation = reply.error.holder_incarnation_epoch  # a reply it missed
        elif isinstance(reply, ReplyError) and isinstance(reply.error, SessionExpiredError):
            process.incarnation = None
            self._count("sessions_expired")
            interval_ms = 1
        elif not isinstance(reply, ReplyOk):
            interval_ms = 10
        self._next(process, interval_ms)

    def _admin_act(self, process: _Process) -> None:
        """Look up the controller; elect one if the role is vacant; create the topic once."""
        controller = self.controller
        if controller is None or not process.looked:
            process.looked = True
            self._send(process, CurrentController())
        elif not self.topic_created:
            assignment = tuple((1,) for _ in range(self.partitions))
            command = CreateTopicWrite(
                topic=TOPIC,
                topic_id="0" * 31 + "1",
                replica_assignment=assignment,
                controller_epoch=controller.controller_epoch,
                initial_states=None,
                configs=(),
            )
            self._send(process, command)
        else:
            process.looked = False
            self._next(process, 30)

    def _admin_outcome(self, process: _Process, reply: Reply | None) -> None:
        request = process.request
        value = reply.value if isinstance(reply, ReplyOk) else None
        error = reply.error if isinstance(reply, ReplyError) else None
        if isinstance(request, CurrentController) and isinstance(reply, ReplyOk):
            self.controller = value if isinstance(value, ControllerInfo) else None
            if self.controller is None and self._elect(process):
                return
        elif isinstance(request, ElectController) and isinstance(value, ControllerInfo):
            self.controller = value
        elif isinstance(request, CreateTopicWrite):
            if isinstance(reply, ReplyOk) or isinstance(error, TopicExistsError):
                self.topic_created = True
            elif isinstance(error, FencedControllerError):
                self.controller = None
        self._next(process, 10)

    def _elect(self, process: _Process) -> bool:
        """Elect a registered broker (the role is vacant); False if none is known."""
        for keeper in self.processes[: self.brokers]:
            if keeper.incarnation is not None:
                command = ElectController(
                    broker_id=keeper.broker_id, incarnation_epoch=keeper.incarnation
                )
                self._count("elections_tried")
                self._send(process, command)
                return True
        return False

    def _data_act(self, process: _Process) -> None:
        partition = self.sim.rng.randrange(self.partitions)
        record = _Record(process.index, "read", partition, next(self._stamps))
        process.record = record
        self.records.append(record)
        self._send(process, GetPartitionState(TOPIC, partition))

    def _data_outcome(self, process: _Process, reply: Reply | None) -> None:
        record = process.record
        if record is None:  # pragma: no cover - a data process always has one in flight
            return
        process.record = None
        follow_up: tuple[int, PartitionState] | None = None
        if reply is None or isinstance(reply, ReplyUnknown):
            record.status = "info"
        elif isinstance(reply, ReplyNotLeader):
            record.status = "fail"
        elif isinstance(reply, ReplyError):
            self.sim.violation(f"data client {process.index}: {record.f} raised {reply.error!r}")
        elif record.f == "read":
            state = reply.value
            if not isinstance(state, PartitionState):
                self.sim.violation(f"read of partition {record.partition} gave {state!r}")
                return
            self._ok(process, record, (state.partition_epoch, state.leader_epoch))
            if self.controller is not None and self.sim.rng.random() < 0.6:
                follow_up = (record.partition, state)
        else:
            self._cas_outcome(process, record, reply)
        if follow_up is not None:
            self._cas(process, *follow_up)
        else:
            self._next(process)

    def _ok(self, process: _Process, record: _Record, output: object) -> None:
        record.status, record.output, record.ret = "ok", output, next(self._stamps)
        if self._healed:
            process.ok_after_heal += 1

    def _cas(self, process: _Process, partition: int, state: PartitionState) -> None:
        controller = self.controller
        if controller is None:
            self._next(process)
            return
        proposal = attrs.evolve(state, leader_epoch=next(self._leader_epochs) + state.leader_epoch)
        expected = (state.partition_epoch, state.leader_epoch)
        value = (state.partition_epoch + 1, proposal.leader_epoch)
        record = _Record(process.index, "cas", partition, next(self._stamps), expected, value)
        process.record = record
        self.records.append(record)
        self._send(
            process,
            CasPartitionState(
                topic=TOPIC,
                partition=partition,
                expected_partition_epoch=state.partition_epoch,
                new_state=proposal,
                controller_epoch=controller.controller_epoch,
            ),
        )

    def _cas_outcome(self, process: _Process, record: _Record, reply: ReplyOk) -> None:
        result = reply.value
        if not isinstance(result, CasResult):
            self.sim.violation(f"cas gave {result!r}")
            return
        if result.status is CasStatus.FENCED_CONTROLLER:
            record.status = "fail"
            self.controller = None  # the admin looks again
            self._count("cas_fenced")
        elif result.status is CasStatus.OK:
            self._ok(process, record, True)
            self._count("cas_ok")
        elif result.status is CasStatus.VERSION_MISMATCH:
            self._ok(process, record, False)
            self._count("cas_mismatch")
        else:
            self.sim.violation(f"cas on partition {record.partition} gave {result}")

    # ------------------------------------------------------------------ the run

    def node_ids(self) -> set[int]:
        """The processes' network ids."""
        return {p.net_id for p in self.processes}

    def on_heal(self) -> None:
        """From now on data clients count their ok operations."""
        self._healed = True
        for process in self.processes:
            if process.role == "data":
                process.ok_after_heal = 0

    def done(self) -> bool:
        """Every data client completed its operations after the heal. Then the keepers and
        the admin stop too: with heartbeats (read barriers) the log would grow for ever, and a
        follower whose snapshot download takes longer than the leader's snapshot interval
        (the simulator draws 8 records and 64-byte chunks; a metadata image is about 2 KB)
        never catches up while it grows -- the leader deletes the snapshot it downloads."""
        return all(
            p.ok_after_heal >= _OKS_AFTER_HEAL and not p.waiting
            for p in self.processes
            if p.role == "data"
        )

    def finish(self) -> None:
        """Operations still waiting are indefinite."""
        for record in self.records:
            if record.status == "pending":
                record.status = "info"

    def history(self) -> list[KvOperation]:
        """Every operation that may have taken effect, per partition register."""
        return [
            KvOperation(
                process=r.process,
                f=r.f,
                key=r.partition,
                call=r.call,
                ret=r.ret if r.status == "ok" else None,
                value=r.value,
                expected=r.expected,
                output=r.output,
            )
            for r in self.records
            if r.status in ("ok", "info")
        ]

    def check(self) -> LinearizabilityResult:
        """Each partition's history must be linearizable, and the settled nodes must all hold
        the one cluster id the log decided."""
        named = {repr(f.machine.cluster_id) for f in self.frontends.values()}
        if len(named) != 1 or "None" in named:
            return LinearizabilityResult(False, detail=f"cluster ids at the end: {named}")
        return check_kv(self.history(), initial=_INITIAL)

    def counts(self) -> dict[str, int]:
        """Operations by outcome, and what the sessions and controllers went through."""
        found = dict(self.stats)
        for record in self.records:
            key = f"op_{record.f}_{record.status}"
            found[key] = found.get(key, 0) + 1
        for frontend in self.frontends.values():
            for name, count in frontend.counters.items():
                found[f"frontend_{name}"] = found.get(f"frontend_{name}", 0) + count
        return found

    def ok_count(self) -> int:
        """Data operations that completed ok."""
        return sum(1 for r in self.records if r.status == "ok")

    def status(self) -> str:
        """One line for a liveness failure."""
        return "processes " + ", ".join(
            f"{p.role}{p.index}:{p.ok_after_heal}{' waiting' if p.waiting else ''}"
            for p in self.processes
        )


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m replog.testing.quorum_sim``: the simulator's options, this workload."""
    return sim_main(argv, workload=MetadataWorkload, module="replog.testing.quorum_sim")


if __name__ == "__main__":
    sys.exit(main())
