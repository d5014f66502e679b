"""The simulator's nemesis: faults and an operator's actions during the safety phase.

Faults (``FAULTS``, one every ``fault_interval_ms`` by the seed's weights): process crashes
(any broker, or the controller's), power losses (unsynced writes lost, the last one maybe torn;
in FSYNC mode also every broker at once; in REPLICATED mode only when every other broker is up
and the main topic's ISRs are full, since that mode promises nothing more), symmetric and
one-way network partitions, clogged links, expired and suspended coordinator sessions, failing
fsyncs.

Operator actions (``ADMIN_OPERATIONS``, one every ``admin_interval_ms``), each sent the way an
operator's tool would: partitions added to the main topic (CreatePartitions), partition
reassignments and preferred-leader elections (queued for the controller), the churned topic
deleted and created again (DeleteTopics, CreateTopics), and controlled restarts (the broker
moves its leadership away, closes its logs cleanly and starts again). Faults and actions
interleave freely: a controller may crash in the middle of any of them.

The nemesis sees the simulation through ``NemesisHost``, the members of ``Simulation`` it uses.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping
from typing import Any, Protocol

import attrs

from replog.coord.memory import MemoryCoordinator
from replog.errors import ErrorCode
from replog.isr import DurabilityMode
from replog.metadata.types import (
    CONTROLLER_TARGET,
    PartitionState,
    PreferredElection,
    ReassignPartition,
)
from replog.protocol import messages as m
from replog.simkit.net import SimNetwork
from replog.testing.clients import Rpc, code_of
from replog.testing.consumers import CONSUMER_NODE
from replog.testing.group_clients import GROUP_NODES
from replog.testing.node import SimBroker
from replog.testing.sim_ports import SimCore
from replog.testing.workload import CHURN_TOPIC, METADATA_NODE, PROBE_NODE, PRODUCER_NODE, TOPIC

__all__ = ["ADMIN_NODE", "Nemesis", "NemesisHost"]

ADMIN_NODE = 300
CLIENT_NODES = frozenset(
    {METADATA_NODE, PRODUCER_NODE, PROBE_NODE}
    | {CONSUMER_NODE + n for n in range(100)}
    | GROUP_NODES
)
CHURN_SEGMENT_BYTES = 512
CHURN_RETENTION_BYTES = 1_024


class NemesisHost(SimCore, Protocol):
    """What the nemesis uses of the simulation."""

    @property
    def phase(self) -> str:
        """``safety`` (faults fire, the operator acts) or ``liveness``."""

    @property
    def brokers(self) -> Mapping[int, SimBroker]:
        """Every simulated broker, by id."""

    @property
    def coordinator(self) -> MemoryCoordinator:
        """The coordinator (sessions to expire or cut, the admin queue)."""

    @property
    def net(self) -> SimNetwork:
        """The network (partitions and clogged links)."""

    @property
    def rpc(self) -> Rpc:
        """The admin client's wire."""

    @property
    def churn_absent_since_ms(self) -> int | None:
        """Since when no churned topic exists (None: one does)."""

    def main_partitions(self) -> list[tuple[str, int]]:
        """The main topic's partitions as the coordinator stores them."""

    def state(self, tp: tuple[str, int]) -> PartitionState | None:
        """The partition's state as the coordinator stores it."""

    def restart_later(self, broker: SimBroker, delay_ms: int) -> None:
        """Start ``broker`` again after ``delay_ms``."""


class Nemesis:
    """Faults and operator actions (see the module docstring)."""

    def __init__(self, sim: NemesisHost) -> None:
        self._sim = sim
        self._power_lost_recently: set[int] = set()
        self._admin_busy = False

    def start(self, delay_ms: int) -> None:
        """Begin both loops (they stop at the end of the safety phase)."""
        self._sim.after(delay_ms, self._fault_step)
        self._sim.after(delay_ms, self._admin_step)

    @staticmethod
    def _pick(weights: tuple[tuple[str, int], ...], rng: random.Random) -> str | None:
        names = [n for n, w in weights if w]
        if not names:
            return None
        return rng.choices(names, [w for _, w in weights if w])[0]

    def _fault_step(self) -> None:
        sim = self._sim
        if sim.phase != "safety":
            return
        sim.after(sim.jitter(sim.opts.fault_interval_ms), self._fault_step)
        kind = self._pick(sim.opts.fault_weights, sim.rng)
        if kind is not None:
            victim = sim.brokers[sim.rng.randint(1, sim.opts.brokers)]
            getattr(self, f"_fault_{kind}")(victim)

    def _admin_step(self) -> None:
        sim = self._sim
        if sim.phase != "safety":
            return
        sim.after(sim.jitter(sim.opts.admin_interval_ms), self._admin_step)
        kind = self._pick(sim.opts.admin_weights, sim.rng)
        if kind is not None and not self._admin_busy:
            getattr(self, f"_admin_{kind}")()

    # ------------------------------------------------------------------ faults

    def _fault_nothing(self, victim: SimBroker) -> None:
        del victim

    def _fault_crash_controller(self, victim: SimBroker) -> None:
        """Crash whichever broker holds the controller role, whatever it is doing."""
        del victim
        current = self._sim.coordinator.current_controller()
        if current is not None:
            self._fault_crash(self._sim.brokers[current.controller_id])

    def _fault_crash(self, victim: SimBroker) -> None:
        if victim.alive:
            victim.kill(power_loss=False, tear=False)
            self._sim.restart_later(victim, self._sim.rng.randint(50, 800))

    def _power_loss_allowed(self, victim: SimBroker) -> bool:
        sim = self._sim
        if sim.opts.durability is DurabilityMode.FSYNC:
            return True
        # REPLICATED promises survival of fewer than all replicas losing unsynced data: only cut
        # one broker's power while every other broker is up and its partitions' ISRs are full.
        if any(not b.online for b in sim.brokers.values() if b is not victim):
            return False
        for tp in sim.main_partitions():
            state = sim.state(tp)
            if state is None or set(state.isr) != set(state.replicas):
                return False
        return victim.broker_id not in self._power_lost_recently

    def _fault_power_loss(self, victim: SimBroker) -> None:
        sim = self._sim
        if victim.alive and self._power_loss_allowed(victim):
            victim.kill(power_loss=True, tear=sim.rng.random() < 0.7)
            if sim.opts.durability is DurabilityMode.REPLICATED:
                self._power_lost_recently = {victim.broker_id}
            sim.restart_later(victim, sim.rng.randint(50, 800))

    def _fault_power_loss_all(self, victim: SimBroker) -> None:
        del victim
        sim = self._sim
        sim.trace("power loss of every broker")
        for broker in sim.brokers.values():
            if broker.alive or broker.starting:
                broker.kill(power_loss=True, tear=sim.rng.random() < 0.7)
                sim.restart_later(broker, sim.rng.randint(50, 600))

    def _fault_partition(self, victim: SimBroker, *, one_way: bool = False) -> None:
        del victim
        sim = self._sim
        nodes = list(sim.brokers)
        sim.rng.shuffle(nodes)
        cut = sim.rng.randint(1, len(nodes) - 1)
        side_a, side_b = set(nodes[:cut]), set(nodes[cut:])
        if sim.rng.random() < 0.5:
            side_a |= CLIENT_NODES
        sim.trace(f"partition {sorted(side_a)} | {sorted(side_b)} one_way={one_way}")
        sim.net.partition(side_a, side_b, one_way=one_way)
        blocked = set(sim.net.blocked)

        def heal() -> None:
            sim.net.blocked -= blocked

        sim.after(sim.rng.randint(100, 700), heal)

    def _fault_one_way(self, victim: SimBroker) -> None:
        self._fault_partition(victim, one_way=True)

    def _fault_clog(self, victim: SimBroker) -> None:
        sim = self._sim
        other = sim.rng.randint(1, sim.opts.brokers)
        link = (victim.broker_id, other)
        sim.net.clog(*link)
        sim.after(sim.rng.randint(100, 700), lambda: sim.net.clogged.discard(link))

    def _fault_expire_session(self, victim: SimBroker) -> None:
        self._sim.trace(f"expire session of {victim.broker_id}")
        self._sim.coordinator.expire_session(victim.broker_id)

    def _fault_suspend_session(self, victim: SimBroker) -> None:
        sim = self._sim
        if not victim.alive or victim.coord_cut:
            return
        sim.trace(f"cut broker {victim.broker_id} from the coordinator")
        victim.coord_cut = True
        sim.coordinator.suspend_session(victim.broker_id)
        gen = victim.gen

        def resume() -> None:
            if victim.gen == gen and victim.coord_cut:
                victim.coord_cut = False
                sim.coordinator.resume_session(victim.broker_id)

        sim.after(sim.rng.randint(100, 1_000), resume)

    def _fault_fail_fsync(self, victim: SimBroker) -> None:
        self._sim.trace(f"next fsync of a segment on broker {victim.broker_id} fails")
        victim.fs.fail_fsync(".log")

    # ------------------------------------------------------------------ operator actions

    def _send_admin(self, body: Any, what: str, effect: Callable[[], str | None]) -> None:
        """Send an admin request to a random broker, one at a time. When the answer says it
        succeeded, ``effect`` must find it done in the coordinator (its complaint, if any, is an
        ``admin-effect-missing`` violation: a success a client is told must have happened)."""
        sim = self._sim
        self._admin_busy = True

        def answered(answer: Any) -> None:
            self._admin_busy = False
            outcome = _outcome(answer)
            sim.trace(f"{what}: {outcome}")
            if outcome == ErrorCode.NONE.name and (problem := effect()) is not None:
                sim.violation(f"admin-effect-missing: {what} answered NONE, but {problem}")

        sim.rpc.call(
            ADMIN_NODE,
            sim.rng.randint(1, sim.opts.brokers),
            body,
            answered,
            client_id="sim-admin",
            timeout_ms=sim.opts.client_timeout_ms,
        )

    def _admin_add_partitions(self) -> None:
        sim = self._sim
        count = len(sim.main_partitions())
        if count == 0 or count >= sim.opts.partitions_max:
            return
        body = m.CreatePartitionsRequest(
            topics=[m.CreatePartitionsTopic(name=TOPIC, count=count + 1, assignments=None)],
            timeout_ms=1_000,
            validate_only=False,
        )

        def added() -> str | None:
            now = len(sim.main_partitions())
            return None if now > count else f"{TOPIC} has {now} partitions"

        self._send_admin(body, f"add partition {count} to {TOPIC}", added)

    def _admin_reassign(self) -> None:
        """AlterPartitionReassignments of one partition onto a random set of brokers, or, one
        time in four, the same through the controller's admin queue (as before the Kafka API)."""
        sim = self._sim
        partitions = sim.main_partitions()
        if not partitions:
            return
        tp = sim.rng.choice(partitions)
        target = tuple(sim.rng.sample(sorted(sim.brokers), sim.opts.replication_factor))
        if sim.rng.random() < 0.25:
            sim.trace(f"reassign {tp} to {list(target)} (admin queue)")
            sim.coordinator.submit_admin_request(
                CONTROLLER_TARGET,
                ReassignPartition(topic=tp[0], partition=tp[1], target_replicas=target),
            )
            return
        body = m.AlterPartitionReassignmentsRequest(
            timeout_ms=1_000,
            topics=[
                m.ReassignableTopic(
                    name=tp[0],
                    partitions=[
                        m.ReassignablePartition(partition_index=tp[1], replicas=list(target))
                    ],
                )
            ],
        )
        # The answer says the controller took the reassignment; it may still be in progress or
        # be cancelled later, so there is no effect to check beyond the other invariants.
        self._send_admin(body, f"reassign {tp} to {list(target)}", lambda: None)

    def _admin_preferred_election(self) -> None:
        """ElectLeaders (preferred, or one time in four through the admin queue)."""
        sim = self._sim
        partitions = sim.main_partitions()
        chosen = tuple(tp for tp in partitions if sim.rng.random() < 0.5)
        if sim.rng.random() < 0.25:
            sim.trace(f"preferred election of {list(chosen) or 'every partition'} (admin queue)")
            sim.coordinator.submit_admin_request(
                CONTROLLER_TARGET, PreferredElection(partitions=chosen)
            )
            return
        body = m.ElectLeadersRequest(
            election_type=0,
            topic_partitions=[
                m.ElectLeadersTopicPartitions(topic=TOPIC, partitions=[p for _, p in chosen])
            ]
            if chosen
            else None,
            timeout_ms=1_000,
        )
        what = f"preferred election of {list(chosen) or 'every partition'}"
        self._send_admin(body, what, lambda: None)

    def _admin_churn_topic(self) -> None:
        sim = self._sim
        if not sim.opts.churn_topic:
            return
        existing = sim.coordinator.get_topic(CHURN_TOPIC)
        if existing is not None:
            body: Any = m.DeleteTopicsRequest(
                topics=[m.DeleteTopicState(name=CHURN_TOPIC)], timeout_ms=1_000
            )

            def deleted() -> str | None:
                now = sim.coordinator.get_topic(CHURN_TOPIC)
                gone = now is None or now.topic_id != existing.topic_id
                return None if gone else f"topic ID {existing.topic_id} is still there"

            self._send_admin(body, f"delete {CHURN_TOPIC}", deleted)
            return
        absent_since_ms = sim.churn_absent_since_ms
        quiet_ms = sim.opts.net.delay_ms_max + sim.opts.net.clog_delay_ms_max + 100
        if absent_since_ms is None or sim.now_ms - absent_since_ms < quiet_ms:
            return  # recreate only when the deleted topic's records are older than any delay
        configs = {
            "segment.bytes": str(CHURN_SEGMENT_BYTES),
            "retention.bytes": str(CHURN_RETENTION_BYTES),
        }
        body = m.CreateTopicsRequest(
            topics=[
                m.CreatableTopic(
                    name=CHURN_TOPIC,
                    num_partitions=sim.rng.randint(1, 2),
                    replication_factor=sim.opts.replication_factor,
                    assignments=[],
                    configs=[m.CreatableTopicConfig(name=k, value=v) for k, v in configs.items()],
                )
            ],
            timeout_ms=1_000,
            validate_only=False,
        )

        def created() -> str | None:
            return None if sim.coordinator.get_topic(CHURN_TOPIC) else "there is no such topic"

        self._send_admin(body, f"create {CHURN_TOPIC}", created)

    def _admin_controlled_restart(self) -> None:
        sim = self._sim
        online = [b for b in sim.brokers.values() if b.online]
        if not online:
            return
        victim = sim.rng.choice(online)
        sim.trace(f"controlled restart of broker {victim.broker_id}")
        victim.stop(
            controlled=True, then=lambda: sim.restart_later(victim, sim.rng.randint(0, 300))
        )


def _outcome(answer: Any) -> str:
    """A one-line summary of an admin answer's error codes (every ``error_code`` in it)."""
    if answer is None:
        return "no answer"
    codes = [c for c in _error_codes(answer) if c != 0] or [0]
    return ",".join(code_of(c).name for c in codes)


def _error_codes(value: Any) -> list[int]:
    """Every ``error_code`` field in a response, nested structs and lists included."""
    if isinstance(value, list):
        return [c for item in value for c in _error_codes(item)]
    if not attrs.has(type(value)):
        return []
    codes: list[int] = []
    for field in attrs.fields(type(value)):
        item = getattr(value, field.name)
        if field.name == "error_code" and isinstance(item, int):
            codes.append(item)
        elif isinstance(item, list) or attrs.has(type(item)):
            codes.extend(_error_codes(item))
    return codes
