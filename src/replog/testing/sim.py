"""The deterministic simulator: ``python -m replog.testing.sim --seeds N [--seed S] [--verbose]``.

Theory of operation. One seed fixes everything: ``SimOptions.draw(seed)`` picks the cluster
shape (brokers, partitions, RF, min ISR), the durability mode, the acks, the network's fault
rates and the fault mix; ``random.Random(seed)`` then drives every delay and fault. A single
thread pops events from a heap of ``(time_ms, seq, action)``; nothing reads the wall clock or a
real network. Brokers are ``SimBroker`` (node.py): the real ``LogManager`` on a
``FaultInjectingFileSystem``, the real ``ReplicaManager``/``Partition`` machines, the real
``ControllerService`` and one shared ``MemoryCoordinator`` whose ``ManualClock`` is the
simulation's clock. Clients are a producer and one consumer per partition (they find leaders
from the stored partition states) recording a ``History``.

A run has two phases. **Safety** (``safety_ms``): produce and consume while faults fire:
process crashes, power losses (unsynced writes lost, the last one maybe torn; in FSYNC mode also
all brokers at once; in REPLICATED mode only when every other broker is up and the broker's
partitions have a full ISR, since that mode promises nothing more), symmetric and one-way network
partitions, clogged links, expired and suspended coordinator sessions and failing fsyncs. Then
**liveness**: every fault heals, crashed brokers restart, and the run must drain every
acknowledged acks=all record to the consumers before ``liveness_ms_max``.

After every event the ``InvariantChecker`` runs; at the end the history checker does. The first
violation stops the run; ``--seed S`` replays it exactly.
"""

from __future__ import annotations

import argparse
import heapq
import itertools
import random
import shutil
import sys
import tempfile
import time
from collections.abc import Callable

import attrs

from replog.broker import BrokerConfig
from replog.coord.memory import ManualClock, MemoryCoordinator
from replog.coord.types import PartitionState
from replog.errors import ErrorCode
from replog.isr import (
    DurabilityMode,
)
from replog.log.config import LogConfig
from replog.log.decoding import decode_records
from replog.log.encoding import encode_batch
from replog.log.log import Log
from replog.log.records import iter_batches
from replog.simkit.net import NetConfig, SimNetwork
from replog.testing.clients import (
    FetchAnswer,
    ProduceAnswer,
    create_topics_answer,
    create_topics_frame,
    fetch_answer,
    fetch_frame,
    produce_answer,
    produce_frame,
)
from replog.testing.history import History, Send, check_history
from replog.testing.invariants import InvariantChecker, ReplicaView
from replog.testing.node import SimBroker

__all__ = ["SimOptions", "SimResult", "Simulation", "main", "run_seed"]

TOPIC = "sim"
PRODUCER_NODE = 100
CONSUMER_NODE = 200
ADMIN_NODE = 300
ACKS_ALL = -1
#: produce errors that mean "not written" (anything else but NONE may have been appended)
_DEFINITE_FAILURES = frozenset(
    {
        ErrorCode.NOT_ENOUGH_REPLICAS,
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        ErrorCode.KAFKA_STORAGE_ERROR,
    }
)


@attrs.frozen
class SimOptions:
    """Everything one seed decides up front."""

    seed: int
    brokers: int
    partitions: int
    replication_factor: int
    min_isr: int
    durability: DurabilityMode
    acks: tuple[int, ...]
    net: NetConfig
    fault_interval_ms: int
    fault_weights: tuple[tuple[str, int], ...]
    #: min ISR set as the topic's ``min.insync.replicas`` config (stored with the topic) rather
    #: than as the brokers' and controller's default
    min_isr_in_topic: bool = False
    safety_ms: int = 1_500
    liveness_ms_max: int = 8_000
    #: once every broker is up in the liveness phase, every partition has a leader within this
    leader_bound_ms: int = 3_000
    produce_interval_ms: int = 15
    consume_interval_ms: int = 30
    session_ms: int = 600
    heartbeat_ms: int = 100
    metadata_ms: int = 20
    tick_ms: int = 50
    checkpoint_ms: int = 300
    disk_ms: int = 2
    fetch_backoff_ms: int = 25
    fetch_timeout_ms: int = 200
    #: followers' long poll on the leader (below fetch_timeout_ms less the network delays)
    replica_fetch_wait_ms: int = 100
    replica_lag_ms_max: int = 800
    request_timeout_ms: int = 400
    produce_timeout_ms: int = 400
    client_timeout_ms: int = 800

    @classmethod
    def draw(cls, seed: int) -> SimOptions:
        """The seed's own options (from a generator separate from the run's)."""
        rng = random.Random(f"options-{seed}")
        brokers = rng.choice((3, 3, 4, 5))
        rf = rng.choice((2, 3, 3)) if brokers > 2 else 2
        min_isr = rng.choice((1, 2, 2)) if rf > 1 else 1
        durability = rng.choice((DurabilityMode.FSYNC, DurabilityMode.REPLICATED))
        acks = rng.choice(((ACKS_ALL,), (ACKS_ALL,), (ACKS_ALL, 1)))
        net = NetConfig(
            delay_ms_min=1,
            delay_ms_max=rng.choice((2, 5, 20)),
            drop_rate=rng.choice((0.0, 0.01, 0.05)),
            duplicate_rate=rng.choice((0.0, 0.01, 0.05)),
            clog_delay_ms_max=rng.choice((100, 400)),
        )
        weights = {
            "crash": rng.randint(0, 4),
            "power_loss": rng.randint(0, 4),
            "power_loss_all": rng.randint(0, 1) if durability is DurabilityMode.FSYNC else 0,
            "partition": rng.randint(0, 4),
            "one_way": rng.randint(0, 2),
            "clog": rng.randint(0, 2),
            "expire_session": rng.randint(0, 2),
            "suspend_session": rng.randint(0, 2),
            "fail_fsync": rng.randint(0, 1),
            "nothing": 2,
        }
        return cls(
            seed=seed,
            brokers=brokers,
            partitions=rng.choice((1, 2, 3)),
            replication_factor=rf,
            min_isr=min_isr,
            durability=durability,
            acks=acks,
            net=net,
            fault_interval_ms=rng.choice((100, 200, 400)),
            fault_weights=tuple(sorted(weights.items())),
            min_isr_in_topic=rng.random() < 0.5,  # drawn after the rest: earlier draws stay
        ).with_extra_faults(rng)

    def with_extra_faults(self, rng: random.Random) -> SimOptions:
        """Fault kinds added after the first seeds were catalogued, drawn after every other
        option so that each seed's earlier draws stay as they were."""
        weights = dict(self.fault_weights)
        weights["crash_controller"] = rng.randint(0, 3)
        return attrs.evolve(self, fault_weights=tuple(sorted(weights.items())))

    def describe(self) -> str:
        """One line for logs."""
        faults = ",".join(f"{k}={w}" for k, w in self.fault_weights if w)
        return (
            f"brokers={self.brokers} partitions={self.partitions} rf={self.replication_factor} "
            f"min_isr={self.min_isr}{'(topic)' if self.min_isr_in_topic else ''} "
            f"durability={self.durability.value} acks={list(self.acks)} "
            f"net={attrs.asdict(self.net)} faults[{faults}]/{self.fault_interval_ms}ms"
        )


@attrs.frozen
class SimResult:
    """The outcome of one seed."""

    seed: int
    violations: tuple[str, ...]
    #: first occurrence of each tolerated known-bug kind
    known: tuple[str, ...]
    events: int
    end_ms: int
    acked: int
    options: SimOptions

    @property
    def ok(self) -> bool:
        """No violation."""
        return not self.violations


class _StopRun(Exception):
    """Raised inside the loop when a violation ends the run."""


class Simulation:
    """One seeded run (see the module docstring)."""

    def __init__(
        self,
        opts: SimOptions,
        root: str,
        *,
        verbose: bool = False,
        known: frozenset[str] = frozenset(),
    ) -> None:
        self.opts = opts
        self.known = known
        self.known_seen: dict[str, str] = {}
        self.root = root
        self.verbose = verbose
        self.rng = random.Random(opts.seed)
        self.now_ms = 0
        self._queue: list[tuple[int, int, Callable[[], None]]] = []
        self._seq = itertools.count()
        self.events = 0
        self.clock = ManualClock()
        topic_ids = random.Random(f"topic-ids-{opts.seed}")
        self.coordinator = MemoryCoordinator(
            clock=self.clock, topic_ids=lambda: f"{topic_ids.getrandbits(128) | 1:032x}"
        )
        self.net = SimNetwork(self.rng, opts.net, self.after)
        self.log_config = LogConfig(
            segment_bytes=1024, segment_index_bytes=256, index_interval_bytes=128
        )
        self.brokers = {b: SimBroker(self, b) for b in range(1, opts.brokers + 1)}
        self.history = History()
        self.checker = InvariantChecker(min_isr=opts.min_isr)
        self.violations: list[str] = []
        self.phase = "safety"
        self._values = itertools.count()
        self._cids = itertools.count(1)
        self._positions: dict[tuple[str, int], int] = {}
        self._consumer_tokens: dict[tuple[str, int], int] = {}
        self._records_cache: dict[
            tuple[int, int, tuple[str, int]], tuple[int, int, dict[int, bytes]]
        ] = {}
        self._down: set[int] = set()
        self._power_lost_recently: set[int] = set()
        self._all_up_since_ms: int | None = None

    def broker_config(self, broker_id: int, log_dir: str) -> BrokerConfig:
        """The product's ``BrokerConfig`` for a simulated broker: the seed's timings, min ISR
        as the brokers' default unless the topic sets it, a fast leader rebalance check."""
        opts = self.opts
        return BrokerConfig(
            broker_id=broker_id,
            log_dirs=(log_dir,),
            host="sim",
            port=9000 + broker_id,
            session_timeout_ms=opts.session_ms,
            heartbeat_interval_ms=opts.heartbeat_ms,
            durability=opts.durability,
            default_min_insync_replicas=1 if opts.min_isr_in_topic else opts.min_isr,
            replica_lag_ms_max=opts.replica_lag_ms_max,
            replica_fetch_wait_ms_max=opts.replica_fetch_wait_ms,
            replica_fetch_backoff_ms=opts.fetch_backoff_ms,
            request_timeout_ms=opts.request_timeout_ms,
            tick_interval_ms=opts.tick_ms,
            checkpoint_interval_ms=opts.checkpoint_ms,
            metadata_poll_interval_ms=opts.metadata_ms,
            leader_imbalance_check_interval_ms=1_000,
            log=self.log_config,
        )

    # ------------------------------------------------------------------ event loop

    def after(self, delay_ms: int, action: Callable[[], None]) -> None:
        """Run ``action`` ``delay_ms`` from now."""
        heapq.heappush(self._queue, (self.now_ms + max(0, delay_ms), next(self._seq), action))

    def jitter(self, interval_ms: int) -> int:
        """``interval_ms`` +- 25 %, seeded."""
        spread = max(1, interval_ms // 4)
        return interval_ms + self.rng.randint(-spread, spread)

    def trace(self, message: str) -> None:
        """Print a step when ``--verbose``."""
        if self.verbose:
            print(f"  [{self.now_ms:>6} ms] {message}")

    def violation(self, message: str) -> None:
        """Record a violation and stop the run; a violation of a kind listed in ``known``
        (a diagnosed replog bug, see ``KNOWN_BUGS``) is recorded once and the run goes on."""
        kind = message.split(":", 1)[0]
        if kind in self.known:
            if kind not in self.known_seen:
                self.known_seen[kind] = f"t={self.now_ms}ms {message}"
            return
        self.violations.append(f"t={self.now_ms}ms {message}")
        raise _StopRun

    def _run_until(self, end_ms: int, done: Callable[[], bool] | None = None) -> None:
        while self._queue and self._queue[0][0] <= end_ms:
            time_ms, _, action = heapq.heappop(self._queue)
            self.now_ms = time_ms
            self.clock.set(time_ms)
            self.coordinator.check_sessions()
            try:
                action()
            except _StopRun:
                raise
            except Exception as exc:  # a replog component raised into its driver
                self.violation(f"uncaught {type(exc).__name__}: {exc}")
            self.events += 1
            self._check_invariants()
            if done is not None and done():
                return
        self.now_ms = max(self.now_ms, end_ms)

    def run(self) -> None:
        """Both phases and the final checks; violations end up in ``self.violations``."""
        try:
            self._setup()
            self._run_until(self.opts.safety_ms)
            self._heal()
            self.phase = "liveness"
            deadline = self.now_ms + self.opts.liveness_ms_max
            self._run_until(deadline, self._drained)
            if not self._drained():
                self.violation(f"liveness: not drained by {deadline} ms: {self._drain_status()}")
            self._final_read()
            for anomaly in check_history(self.history, acks_all=ACKS_ALL):
                self.violation(f"history {anomaly.kind}: {anomaly.detail}")
        except _StopRun:
            pass

    def _setup(self) -> None:
        for broker in self.brokers.values():
            broker.start()
        self.after(20, self._create_topic)
        self.after(100, self._produce_loop)
        for p in range(self.opts.partitions):
            self.after(100, lambda p=p: self._consume_loop((TOPIC, p)))  # type: ignore[misc]
        self.after(300, self._fault_loop)

    def _create_topic(self) -> None:
        """An admin client creates the topic through a broker (CreateTopics, as any Kafka
        client would), retrying until it exists."""
        if self.coordinator.get_topic(TOPIC) is not None:
            return
        self.after(50, self._create_topic)
        online = [b for b in self.brokers.values() if b.online]
        if len(online) < len(self.brokers):
            return  # placement needs every broker admitted
        broker = self.rng.choice(online)
        configs = {}
        if self.opts.min_isr_in_topic:
            configs["min.insync.replicas"] = str(self.opts.min_isr)
        frame = create_topics_frame(
            TOPIC, self.opts.partitions, self.opts.replication_factor, configs, next(self._cids)
        )

        def reply(answer: bytes | None) -> None:
            if answer is not None:
                self.trace(f"create topic: {create_topics_answer(answer).name}")

        self.net.send(
            ADMIN_NODE, broker.broker_id, lambda: broker.on_frame(ADMIN_NODE, frame, reply)
        )

    # ------------------------------------------------------------------ clients

    def _state(self, tp: tuple[str, int]) -> PartitionState | None:
        return self.coordinator.get_partition_state(*tp)

    def _produce_loop(self) -> None:
        if self.phase != "safety":
            return
        self.after(self.jitter(self.opts.produce_interval_ms), self._produce_loop)
        tp = (TOPIC, self.rng.randrange(self.opts.partitions))
        state = self._state(tp)
        if state is None or state.leader < 0:
            return
        acks = self.rng.choice(self.opts.acks)
        value = f"v{next(self._values)}".encode()
        op = self.history.send(tp, value, acks)
        batch = encode_batch([value], base_timestamp=self.now_ms)
        frame = produce_frame(tp, batch, acks, self.opts.produce_timeout_ms, next(self._cids))
        leader = self.brokers[state.leader]

        def reply(answer: bytes | None) -> None:
            self._on_produced(op, None if answer is None else produce_answer(answer))

        self.net.send(
            PRODUCER_NODE,
            leader.broker_id,
            lambda: leader.on_frame(PRODUCER_NODE, frame, reply),
            duplicable=False,
        )
        self.after(self.opts.client_timeout_ms, lambda: self._produce_timeout(op))

    def _produce_timeout(self, op: Send) -> None:
        if op.status == "pending":
            op.status = "info"

    def _on_produced(self, op: Send, answer: ProduceAnswer | None) -> None:
        if op.status != "pending":
            return
        if answer is None:  # the connection closed: the outcome is unknown
            op.status = "info"
        elif answer.error_code is ErrorCode.NONE:
            op.status, op.offset = "ok", answer.base_offset
            if op.acks == ACKS_ALL:
                for problem in self.checker.on_acked(op.tp, op.offset, op.value):
                    self.violation(problem)
        elif answer.error_code in _DEFINITE_FAILURES:
            op.status = "fail"
        else:
            op.status = "info"

    def _consume_loop(self, tp: tuple[str, int]) -> None:
        self.after(self.jitter(self.opts.consume_interval_ms), lambda: self._consume_loop(tp))
        state = self._state(tp)
        if state is None or state.leader < 0:
            return
        position = self._positions.get(tp, 0)
        token = self._consumer_tokens.get(tp, 0) + 1
        self._consumer_tokens[tp] = token
        frame = fetch_frame(tp, position, state.leader_epoch, next(self._cids), max_bytes=4096)
        leader = self.brokers[state.leader]
        node = CONSUMER_NODE + tp[1]

        def reply(answer: bytes | None) -> None:
            if answer is not None:
                self._on_consumed(tp, token, position, fetch_answer(answer))

        self.net.send(node, leader.broker_id, lambda: leader.on_frame(node, frame, reply))

    def _on_consumed(
        self, tp: tuple[str, int], token: int, position: int, answer: FetchAnswer
    ) -> None:
        if self._consumer_tokens.get(tp) != token or self._positions.get(tp, 0) != position:
            return  # not the answer this consumer waits for
        if answer.error_code is not ErrorCode.NONE:
            return
        for problem in self.checker.on_consumer_hw(tp, answer.high_watermark):
            self.violation(problem)
        records = [(o, v) for o, v in _decode(answer.records) if o >= position]
        if records:
            self.history.poll(CONSUMER_NODE + tp[1], tp, records)
            self._positions[tp] = records[-1][0] + 1

    # ------------------------------------------------------------------ faults

    def _fault_loop(self) -> None:
        if self.phase != "safety":
            return
        self.after(self.jitter(self.opts.fault_interval_ms), self._fault_loop)
        names = [n for n, _ in self.opts.fault_weights]
        weights = [w for _, w in self.opts.fault_weights]
        if not any(weights):
            return
        kind = self.rng.choices(names, weights)[0]
        victim = self.brokers[self.rng.randint(1, self.opts.brokers)]
        getattr(self, f"_fault_{kind}")(victim)

    def _fault_nothing(self, victim: SimBroker) -> None:
        del victim

    def _restart_later(self, broker: SimBroker, delay_ms: int) -> None:
        self._down.add(broker.broker_id)

        def restart() -> None:
            if broker.broker_id in self._down and not broker.alive:
                self._down.discard(broker.broker_id)
                broker.start()

        self.after(delay_ms, restart)

    def _fault_crash_controller(self, victim: SimBroker) -> None:
        """Crash whichever broker holds the controller role, whatever it is doing."""
        del victim
        current = self.coordinator.current_controller()
        if current is not None:
            self._fault_crash(self.brokers[current.controller_id])

    def _fault_crash(self, victim: SimBroker) -> None:
        if victim.alive:
            victim.kill(power_loss=False, tear=False)
            self._restart_later(victim, self.rng.randint(50, 800))

    def _power_loss_allowed(self, victim: SimBroker) -> bool:
        if self.opts.durability is DurabilityMode.FSYNC:
            return True
        # REPLICATED promises survival of fewer than all replicas losing unsynced data: only cut
        # one broker's power while every other broker is up and its partitions' ISRs are full.
        if any(not b.online for b in self.brokers.values() if b is not victim):
            return False
        for p in range(self.opts.partitions):
            state = self._state((TOPIC, p))
            if state is None or set(state.isr) != set(state.replicas):
                return False
        return victim.broker_id not in self._power_lost_recently

    def _fault_power_loss(self, victim: SimBroker) -> None:
        if victim.alive and self._power_loss_allowed(victim):
            victim.kill(power_loss=True, tear=self.rng.random() < 0.7)
            if self.opts.durability is DurabilityMode.REPLICATED:
                self._power_lost_recently = {victim.broker_id}
            self._restart_later(victim, self.rng.randint(50, 800))

    def _fault_power_loss_all(self, victim: SimBroker) -> None:
        del victim
        self.trace("power loss of every broker")
        for broker in self.brokers.values():
            if broker.alive or broker.starting:
                broker.kill(power_loss=True, tear=self.rng.random() < 0.7)
                self._restart_later(broker, self.rng.randint(50, 600))

    def _fault_partition(self, victim: SimBroker, *, one_way: bool = False) -> None:
        nodes = list(self.brokers)
        self.rng.shuffle(nodes)
        cut = self.rng.randint(1, len(nodes) - 1)
        side_a, side_b = set(nodes[:cut]), set(nodes[cut:])
        if self.rng.random() < 0.5:
            side_a |= {PRODUCER_NODE} | {CONSUMER_NODE + p for p in range(self.opts.partitions)}
        self.trace(f"partition {sorted(side_a)} | {sorted(side_b)} one_way={one_way}")
        self.net.partition(side_a, side_b, one_way=one_way)
        blocked = set(self.net.blocked)

        def heal() -> None:
            self.net.blocked -= blocked

        self.after(self.rng.randint(100, 700), heal)
        del victim

    def _fault_one_way(self, victim: SimBroker) -> None:
        self._fault_partition(victim, one_way=True)

    def _fault_clog(self, victim: SimBroker) -> None:
        other = self.rng.randint(1, self.opts.brokers)
        link = (victim.broker_id, other)
        self.net.clog(*link)
        self.after(self.rng.randint(100, 700), lambda: self.net.clogged.discard(link))

    def _fault_expire_session(self, victim: SimBroker) -> None:
        self.trace(f"expire session of {victim.broker_id}")
        self.coordinator.expire_session(victim.broker_id)

    def _fault_suspend_session(self, victim: SimBroker) -> None:
        if not victim.alive or victim.coord_cut:
            return
        self.trace(f"cut broker {victim.broker_id} from the coordinator")
        victim.coord_cut = True
        self.coordinator.suspend_session(victim.broker_id)
        gen = victim.gen

        def resume() -> None:
            if victim.gen == gen and victim.coord_cut:
                victim.coord_cut = False
                self.coordinator.resume_session(victim.broker_id)

        self.after(self.rng.randint(100, 1_000), resume)

    def _fault_fail_fsync(self, victim: SimBroker) -> None:
        self.trace(f"next fsync of a segment on broker {victim.broker_id} fails")
        victim.fs.fail_fsync(".log")

    def on_storage_failure(self, broker: SimBroker) -> None:
        """A log went offline (failed fsync): the operator restarts the broker (process crash,
        the page cache survives; a real failed fsync may drop pages -- see the report)."""
        if not broker.alive:
            return
        gen = broker.gen

        def restart() -> None:
            if broker.gen == gen and broker.alive:
                broker.kill(power_loss=False, tear=False)
                broker.start()

        self.after(self.rng.randint(50, 200), restart)

    # ------------------------------------------------------------------ liveness

    def _heal(self) -> None:
        self.trace("heal: network, sessions, restarts")
        self.net.heal()
        for broker in self.brokers.values():
            if broker.coord_cut:
                broker.coord_cut = False
                self.coordinator.resume_session(broker.broker_id)
            if not broker.alive and not broker.starting:
                self._down.discard(broker.broker_id)
                broker.start()
            elif broker.log_manager is not None and any(
                log.is_offline for log in broker.log_manager.logs.values()
            ):
                broker.kill(power_loss=False, tear=False)
                broker.start()

    def _max_acked(self, tp: tuple[str, int]) -> int:
        return max(self.checker.acked.get(tp, {}), default=-1)

    def _drained(self) -> bool:
        if any(s.status == "pending" for s in self.history.sends):
            return False
        for p in range(self.opts.partitions):
            state = self._state((TOPIC, p))
            leader = None if state is None else self.brokers.get(state.leader)
            replica = (
                None
                if leader is None or leader.rm is None
                else leader.rm.partitions.get((TOPIC, p))
            )
            if replica is None or not replica.is_leader:
                return False
            if replica.high_watermark <= self._max_acked((TOPIC, p)):
                return False  # the final read (up to the HW) must see every acked record
        return all(
            self._positions.get((TOPIC, p), 0) > self._max_acked((TOPIC, p))
            for p in range(self.opts.partitions)
        )

    def _drain_status(self) -> str:
        return "; ".join(
            f"p{p}: consumer at {self._positions.get((TOPIC, p), 0)}, acked up to "
            f"{self._max_acked((TOPIC, p))}, state {self._state((TOPIC, p))}"
            for p in range(self.opts.partitions)
        )

    def _final_read(self) -> None:
        for p in range(self.opts.partitions):
            tp = (TOPIC, p)
            state = self._state(tp)
            broker = None if state is None else self.brokers.get(state.leader)
            if broker is None or broker.rm is None:
                self.violation(f"liveness: no running leader for {tp} at the end: {state}")
                return
            log = broker.rm.log(*tp)
            if log is None:
                self.violation(f"liveness: leader {broker.broker_id} has no log for {tp}")
                return
            self.history.final_reads[tp] = _read_all(log, log.log_start_offset, log.high_watermark)

    # ------------------------------------------------------------------ invariants

    def _views(self, states: dict[tuple[str, int], PartitionState]) -> list[ReplicaView]:
        views: list[ReplicaView] = []
        for broker in self.brokers.values():
            rm = broker.rm
            if not broker.alive or rm is None:
                continue
            for tp, replica in sorted(rm.partitions.items()):
                log = rm.log(*tp)
                if log is None or log.is_offline:
                    continue
                stored = rm.states.get(tp)
                current = states.get(tp)
                views.append(
                    ReplicaView(
                        broker_id=broker.broker_id,
                        incarnation=broker.gen,
                        tp=tp,
                        is_leader=replica.is_leader,
                        leader_epoch=replica.leader_epoch,
                        high_watermark=log.high_watermark,
                        log_end_offset=log.log_end_offset,
                        isr=replica.isr,
                        assigned=replica.assigned,
                        records=self._records(broker, tp),
                        current=(
                            stored is not None
                            and current is not None
                            and current.leader == broker.broker_id
                            and current.leader_epoch == replica.leader_epoch
                        ),
                        isr_size_max_in_step=broker.led_isr_sizes.get(
                            (tp, replica.leader_epoch), 0
                        ),
                    )
                )
        return views

    def _records(self, broker: SimBroker, tp: tuple[str, int]) -> dict[int, bytes]:
        """offset -> value of the replica's log, read incrementally (re-read on truncation)."""
        rm = broker.rm
        log = None if rm is None else rm.log(*tp)
        if log is None:
            return {}
        key = (broker.broker_id, broker.gen, tp)
        cached = self._records_cache.get(key)
        start, end = log.log_start_offset, log.log_end_offset
        if cached is not None and cached[0] == start and cached[1] <= end:
            records = cached[2]
            read_from = cached[1]
        else:
            records, read_from = {}, start
        if read_from < end:
            records = dict(records)
            for offset, value in _read_all(log, read_from, end):
                if offset >= read_from:
                    records[offset] = value
        if cached is not None and cached[1] > end:
            records = {o: v for o, v in cached[2].items() if o < end}
        self._records_cache[key] = (start, end, records)
        return records

    def _check_leaders_elected(self, states: dict[tuple[str, int], PartitionState]) -> None:
        """Liveness: once every broker is up (healed), every partition has a leader within
        ``leader_bound_ms``."""
        if not all(b.online for b in self.brokers.values()):
            self._all_up_since_ms = None
            return
        if self._all_up_since_ms is None:
            self._all_up_since_ms = self.now_ms
        if self.now_ms - self._all_up_since_ms <= self.opts.leader_bound_ms:
            return
        for p in range(self.opts.partitions):
            state = states.get((TOPIC, p))
            if state is None or state.leader < 0:
                self.violation(
                    f"liveness: {(TOPIC, p)} has no leader {self.opts.leader_bound_ms} ms after "
                    f"every broker is up: {state}"
                )

    def _check_invariants(self) -> None:
        states = {
            (TOPIC, p): s
            for p in range(self.opts.partitions)
            if (s := self._state((TOPIC, p))) is not None
        }
        stored = {tp: (s.replicas, s.isr) for tp, s in states.items()}
        if self.phase == "liveness":
            self._check_leaders_elected(states)
        views = self._views(states)
        for broker in self.brokers.values():
            broker.led_isr_sizes.clear()
        for problem in self.checker.check(views, stored):
            self.violation(problem)


def _read_all(log: Log, start_offset: int, end_offset: int) -> list[tuple[int, bytes]]:
    """Every record in [start_offset, end_offset): a ``Log.read`` stops at a segment's end, as
    in Kafka, so loop."""
    out: list[tuple[int, bytes]] = []
    offset = start_offset
    while offset < end_offset:
        data = log.read(offset, 1 << 30, max_offset=end_offset).to_bytes()
        got = [(o, v) for o, v in _decode(data) if o >= offset]
        if not got:
            break
        out.extend(got)
        offset = got[-1][0] + 1
    return out


def _decode(data: bytes) -> list[tuple[int, bytes]]:
    out: list[tuple[int, bytes]] = []
    for position, _ in iter_batches(data):
        for record in decode_records(data, position):
            out.append((record.offset, record.value or b""))
    return out


KNOWN_BUGS: dict[str, str] = {}
"""Diagnosed replog bugs: ``--known KIND`` (and the test suite) tolerate these kinds so the
other invariants keep running; each has a strict-xfail regression test in tests/sim."""


def run_seed(seed: int, *, verbose: bool = False, known: frozenset[str] = frozenset()) -> SimResult:
    """Run one seed in a fresh temp dir (removed afterwards)."""
    opts = SimOptions.draw(seed)
    root = tempfile.mkdtemp(prefix=f"replog-sim-{seed}-")
    try:
        sim = Simulation(opts, root, verbose=verbose, known=known)
        if verbose:
            print(f"seed {seed}: {opts.describe()}")
        sim.run()
        acked = sum(len(v) for v in sim.checker.acked.values())
        return SimResult(
            seed,
            tuple(sim.violations),
            tuple(sim.known_seen.values()),
            sim.events,
            sim.now_ms,
            acked,
            opts,
        )
    finally:
        shutil.rmtree(root, ignore_errors=True)


def reproduce_command(seed: int) -> str:
    """The one command that replays ``seed``."""
    return f"python -m replog.testing.sim --seed {seed}"


def main(argv: list[str] | None = None) -> int:
    """CLI entry point; exit status 1 when any seed has a violation."""
    parser = argparse.ArgumentParser(prog="python -m replog.testing.sim", description=__doc__)
    parser.add_argument("--seeds", type=int, default=100, help="how many seeds (from --first)")
    parser.add_argument("--first", type=int, default=0, help="first seed of the range")
    parser.add_argument("--seed", type=int, default=None, help="run only this seed")
    parser.add_argument("--verbose", action="store_true", help="trace every fault and role")
    parser.add_argument(
        "--known",
        action="append",
        default=[],
        choices=sorted(KNOWN_BUGS),
        help="tolerate a diagnosed bug's violations (still printed with --verbose)",
    )
    args = parser.parse_args(argv)
    known = frozenset(args.known)
    seeds = [args.seed] if args.seed is not None else range(args.first, args.first + args.seeds)
    started = time.perf_counter()
    failures = 0
    count = 0
    for seed in seeds:
        result = run_seed(seed, verbose=args.verbose, known=known)
        count += 1
        if not result.ok:
            failures += 1
            extra = "".join(f" --known {k}" for k in sorted(known))
            print(
                f"seed {seed}: {result.violations[0]} -- reproduce: "
                f"{reproduce_command(seed)}{extra}"
            )
        elif args.verbose:
            print(f"seed {seed}: ok ({result.events} events, {result.acked} acked)")
    elapsed = time.perf_counter() - started
    print(f"{count} seeds, {failures} violations ({elapsed:.1f} s)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
