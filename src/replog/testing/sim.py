"""The deterministic simulator: ``python -m replog.testing.sim --seeds N [--seed S] [--verbose]``.

Theory of operation. One seed fixes everything: ``SimOptions.draw(seed)`` (options.py) picks the
cluster shape, durability, acks, network faults, the fault and operator-action mix and what the
clients do; ``random.Random(seed)`` then drives every delay and fault. A single thread pops
events from a heap of ``(time_ms, seq, action)``; nothing reads the wall clock or a real
network. Brokers are ``SimBroker`` (node.py): the product's ``BrokerDriver`` -- request layer,
replica manager, follower fetching, controller role -- over a ``LogManager`` on a
``FaultInjectingFileSystem`` and one shared ``MemoryCoordinator`` whose ``ManualClock`` is the
simulation's clock. Only sockets, disk and time are simulated.

Clients speak the Kafka protocol (clients.py): a metadata cache, a producer and probes
(workload.py), one consumer per partition (consumers.py), and consumer groups' members
(group_clients.py) whose coordinators the brokers host on ``__consumer_offsets``; what the
members are told is checked as it arrives (group_checks.py). The nemesis (nemesis.py) injects
faults and takes an operator's actions: partitions added, reassignments, preferred elections,
a second topic deleted and recreated, controlled restarts.

A run has two phases. **Safety** (``safety_ms``): produce and consume while faults fire and the
operator acts. Then **liveness**: every fault heals, stopped brokers restart, and the run must
drain every acknowledged acks=all record to the consumers before ``liveness_ms_max``.

After every event the ``InvariantChecker`` runs on the main topic's replicas, and the churned
topic's replicas are checked for records of a deleted incarnation; at the end the history
checker runs. The first violation stops the run; ``--seed S`` replays it exactly.
"""

from __future__ import annotations

import argparse
import heapq
import itertools
import random
import shutil
import sys
import tempfile
from collections.abc import Callable

import attrs

from replog.broker import BrokerConfig
from replog.clock import ManualClock, monotonic_s
from replog.coord.memory import MemoryCoordinator
from replog.errors import StorageError
from replog.log.config import LogConfig
from replog.log.decoding import decode_records
from replog.log.log import Log
from replog.log.records import iter_batches
from replog.metadata.types import PartitionState
from replog.protocol import messages as m
from replog.simkit.net import SimNetwork
from replog.testing.clients import Rpc
from replog.testing.consumers import CONSUMER_NODE, PartitionConsumer
from replog.testing.group_clients import GroupClients, GroupOptions
from replog.testing.history import History, check_history
from replog.testing.invariants import InvariantChecker, ReplicaView
from replog.testing.nemesis import ADMIN_NODE, Nemesis
from replog.testing.node import SimBroker
from replog.testing.options import ACKS_ALL, SimOptions
from replog.testing.workload import (
    CHURN_TOPIC,
    TOPIC,
    ClientMetadataCache,
    Probes,
    UniqueValueProducer,
)
from replog.topics import TopicPartition

__all__ = ["SimOptions", "SimResult", "Simulation", "main", "run_seed"]

CHURN_CONSUMER_NODE = CONSUMER_NODE + 50


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
    #: group offsets acknowledged to the group clients, and OffsetFetch answers checked
    group_commits_acked: int = 0
    group_fetches_checked: int = 0
    #: how long after the heal every group was stable and committing (None: no heal reached)
    groups_settled_ms: int | None = None

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
        groups: bool = True,
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
            clock=self.clock,
            topic_ids=lambda: f"{topic_ids.getrandbits(128) | 1:032x}",
            feed_retention_max=opts.feed_retention_max,
        )
        self.net = SimNetwork(self.rng, opts.net, self.after)
        self.group_opts = GroupOptions.draw(opts.seed)
        if not groups:  # the schedule the seed had before the group clients existed
            self.group_opts = attrs.evolve(self.group_opts, groups=0)
        self.log_config = LogConfig(
            segment_bytes=1024, segment_index_bytes=256, index_interval_bytes=128
        )
        self.brokers = {b: SimBroker(self, b) for b in range(1, opts.brokers + 1)}
        self.history = History()
        self.checker = InvariantChecker(min_isr=opts.min_isr)
        self.violations: list[str] = []
        self.phase = "safety"
        self.rpc = Rpc(self.net, self.brokers, self.after)
        self.view = ClientMetadataCache(self)
        self.producer = UniqueValueProducer(self)
        self.probes = Probes(self)
        self.nemesis = Nemesis(self)
        self.groups = GroupClients(self)
        self.consumers: dict[tuple[str, int], PartitionConsumer] = {}
        #: churned topic ID -> when it was created (ms), and since when no churned topic exists
        self.churn_created_ms: dict[str, int] = {}
        self.churn_absent_since_ms: int | None = 0
        self._records_cache: dict[
            tuple[int, int, tuple[str, int], str], tuple[int, int, dict[int, bytes]]
        ] = {}
        self._down: set[int] = set()
        self._all_up_since_ms: int | None = None
        self.healed_ms = 0
        self.groups_settled_ms: int | None = None

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
            retention_check_interval_ms=opts.retention_check_ms,
            controlled_shutdown_timeout_ms=opts.controlled_shutdown_ms,
            leader_imbalance_check_interval_ms=1_000,
            log=self.log_config,
            groups=self.group_opts.group_config(),
            offsets_commit_timeout_ms=opts.produce_timeout_ms,
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
            self.healed_ms = self.now_ms
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
        self.view.start(50)
        self.producer.start(100)
        self.probes.start(150)
        self.after(100, self._ensure_consumers)
        self.nemesis.start(300)
        self.groups.start(200)

    def _create_topic(self) -> None:
        """An admin client creates the main topic through a broker (CreateTopics, as any
        Kafka client would), retrying until it exists."""
        if self.coordinator.get_topic(TOPIC) is not None:
            return
        self.after(50, self._create_topic)
        online = [b for b in self.brokers.values() if b.online]
        if len(online) < len(self.brokers):
            return  # placement needs every broker admitted
        configs = {}
        if self.opts.min_isr_in_topic:
            configs["min.insync.replicas"] = str(self.opts.min_isr)
        body = m.CreateTopicsRequest(
            topics=[
                m.CreatableTopic(
                    name=TOPIC,
                    num_partitions=self.opts.partitions,
                    replication_factor=self.opts.replication_factor,
                    assignments=[],
                    configs=[m.CreatableTopicConfig(name=k, value=v) for k, v in configs.items()],
                )
            ],
            timeout_ms=1_000,
            validate_only=False,
        )
        self.rpc.call(
            ADMIN_NODE,
            self.rng.choice(online).broker_id,
            body,
            lambda answer: self.trace(f"create {TOPIC}: {answer is not None}"),
            client_id="sim-admin",
            timeout_ms=self.opts.client_timeout_ms,
        )

    def _ensure_consumers(self) -> None:
        """One consumer per partition the clients' metadata shows (partitions get added)."""
        self.after(50, self._ensure_consumers)
        for topic, node in ((TOPIC, CONSUMER_NODE), (CHURN_TOPIC, CHURN_CONSUMER_NODE)):
            for p in range(self.view.partition_counts.get(topic, 0)):
                if (topic, p) not in self.consumers:
                    consumer = PartitionConsumer(self, (topic, p), node + p, checked=topic == TOPIC)
                    self.consumers[(topic, p)] = consumer
                    consumer.start(0)

    # ------------------------------------------------------------------ cluster facts

    def state(self, tp: tuple[str, int]) -> PartitionState | None:
        """The partition's state as the coordinator stores it."""
        return self.coordinator.get_partition_state(*tp)

    def main_partitions(self) -> list[tuple[str, int]]:
        """The main topic's partitions as the coordinator stores them."""
        assignment = self.coordinator.get_topic(TOPIC)
        return [] if assignment is None else [(TOPIC, p) for p in range(assignment.partition_count)]

    def restart_later(self, broker: SimBroker, delay_ms: int) -> None:
        """Start ``broker`` again after ``delay_ms`` (unless something started it meanwhile)."""
        self._down.add(broker.broker_id)

        def restart() -> None:
            if broker.broker_id in self._down and not broker.alive:
                self._down.discard(broker.broker_id)
                broker.start()

        self.after(delay_ms, restart)

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
        self.trace("heal: network, sessions, restarts, paused group members")
        self.net.heal()
        # Liveness is judged on a healed network: no message is lost any more (a lost message
        # stands for a broken connection, one of the faults), and paused members resume.
        self.net.config = attrs.evolve(self.net.config, drop_rate=0.0)
        self.groups.resume()
        for broker in self.brokers.values():
            if broker.coord_cut:
                broker.coord_cut = False
                self.coordinator.resume_session(broker.broker_id)
            if not broker.alive and not broker.starting and not broker.stopping:
                self._down.discard(broker.broker_id)
                broker.start()
            elif broker.log_manager is not None and any(
                log.is_offline for log in broker.log_manager.logs.values()
            ):
                broker.kill(power_loss=False, tear=False)
                broker.start()

    def _max_acked(self, tp: tuple[str, int]) -> int:
        return max(self.checker.acked.get(tp, {}), default=-1)

    def _position(self, tp: tuple[str, int]) -> int:
        consumer = self.consumers.get(tp)
        return -1 if consumer is None or consumer.position is None else consumer.position

    def _drained(self) -> bool:
        partitions = self.main_partitions()
        groups_settled = self.groups_settled(len(partitions))  # checked at every step
        if any(s.status == "pending" for s in self.history.sends):
            return False
        if any(b.stopping or not b.alive for b in self.brokers.values()):
            return False
        partitions = self.main_partitions()
        for tp in partitions:
            state = self.state(tp)
            leader = None if state is None else self.brokers.get(state.leader)
            replica = (
                None
                if leader is None or leader.rm is None
                else leader.rm.partitions.get(TopicPartition(*tp))
            )
            if replica is None or not replica.is_leader:
                return False
            if replica.high_watermark <= self._max_acked(tp):
                return False  # the final read (up to the HW) must see every acked record
        if not groups_settled:
            return False
        return bool(partitions) and all(
            self._position(tp) > self._max_acked(tp) for tp in partitions
        )

    def groups_settled(self, partitions: int) -> bool:
        """Every group stable and committing every partition since the heal; a violation
        once ``GroupOptions.settle_bound_ms`` has passed without it."""
        if self.groups_settled_ms is not None:
            return True
        if self.groups.settled(self.healed_ms, partitions):
            self.groups_settled_ms = self.now_ms - self.healed_ms
            return True
        bound = self.group_opts.settle_bound_ms(self.opts)
        if self.now_ms > self.healed_ms + bound:
            self.violation(
                f"group liveness: not settled {bound} ms after the heal: {self.groups.status()}"
            )
        return False

    def _drain_status(self) -> str:
        return (
            "; ".join(
                f"{tp}: consumer at {self._position(tp)}, acked up to "
                f"{self._max_acked(tp)}, state {self.state(tp)}"
                for tp in self.main_partitions()
            )
            + f"; groups: {self.groups.status()}"
        )

    def _final_read(self) -> None:
        for tp in self.main_partitions():
            state = self.state(tp)
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
                if tp[0] != TOPIC or log is None or log.is_offline:
                    continue
                stored = rm.image.partitions.get(tp)
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
                        records=self._records(broker, tp, log, ""),
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

    def _records(
        self, broker: SimBroker, tp: tuple[str, int], log: Log, topic_id: str
    ) -> dict[int, bytes]:
        """offset -> value of the replica's log, read incrementally (re-read on truncation)."""
        key = (broker.broker_id, broker.gen, tp, topic_id)
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
        for tp in self.main_partitions():
            state = states.get(tp)
            if state is None or state.leader < 0:
                self.violation(
                    f"liveness: {tp} has no leader {self.opts.leader_bound_ms} ms after "
                    f"every broker is up: {state}"
                )

    def _check_churned_topic(self) -> None:
        """No replica of the churned topic holds records sent before its topic was created
        (records of a deleted incarnation come back), or a log of another incarnation than
        the one its broker's metadata names."""
        if not self.opts.churn_topic:
            return
        assignment = self.coordinator.get_topic(CHURN_TOPIC)
        if assignment is None:
            if self.churn_absent_since_ms is None:
                self.churn_absent_since_ms = self.now_ms
        else:
            self.churn_absent_since_ms = None
            self.churn_created_ms.setdefault(assignment.topic_id, self.now_ms)
        delay_ms_max = self.opts.net.delay_ms_max + self.opts.net.clog_delay_ms_max
        for broker in self.brokers.values():
            rm = broker.rm
            if not broker.alive or rm is None:
                continue
            for tp in sorted(tp for tp in rm.partitions if tp[0] == CHURN_TOPIC):
                log = rm.log(*tp)
                if log is None or log.is_offline:
                    continue
                try:
                    stored = rm.log_manager.topic_id(TopicPartition(*tp)) or ""
                except StorageError:
                    continue
                named = rm.image.topics.get(CHURN_TOPIC)
                if named is not None and stored and stored != named.topic_id:
                    self.violation(
                        f"stale-incarnation-hosted: broker {broker.broker_id} hosts {tp} of "
                        f"topic ID {stored}, its metadata names {named.topic_id}"
                    )
                created_ms = self.churn_created_ms.get(stored)
                if created_ms is None:
                    continue
                for offset, value in self._records(broker, tp, log, stored).items():
                    sent_ms = int(value[1 : value.index(b":")])
                    if sent_ms < created_ms - delay_ms_max:
                        self.violation(
                            f"deleted-topic-records-resurrected: broker {broker.broker_id} "
                            f"{tp} (topic ID {stored}, created at {created_ms} ms) holds "
                            f"offset {offset} sent at {sent_ms} ms"
                        )

    def _check_invariants(self) -> None:
        states = {tp: s for tp in self.main_partitions() if (s := self.state(tp)) is not None}
        stored = {tp: (s.replicas, s.isr) for tp, s in states.items()}
        if self.phase == "liveness":
            self._check_leaders_elected(states)
        views = self._views(states)
        for broker in self.brokers.values():
            broker.led_isr_sizes.clear()
        for problem in self.checker.check(views, stored):
            self.violation(problem)
        self._check_churned_topic()


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


def run_seed(
    seed: int,
    *,
    verbose: bool = False,
    known: frozenset[str] = frozenset(),
    groups: bool = True,
) -> SimResult:
    """Run one seed in a fresh temp dir (removed afterwards); without ``groups`` no group
    client runs (the seed's schedule as it was before they existed)."""
    opts = SimOptions.draw(seed)
    root = tempfile.mkdtemp(prefix=f"replog-sim-{seed}-")
    try:
        sim = Simulation(opts, root, verbose=verbose, known=known, groups=groups)
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
            sim.groups.history.acked_count,
            sim.groups.history.fetches_checked,
            sim.groups_settled_ms,
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
        "--no-groups",
        action="store_true",
        help="no consumer-group clients (the schedules seeds had before they existed)",
    )
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
    started = monotonic_s()
    failures = 0
    count = 0
    settle_ms: list[int] = []
    for seed in seeds:
        result = run_seed(seed, verbose=args.verbose, known=known, groups=not args.no_groups)
        count += 1
        if result.groups_settled_ms is not None:
            settle_ms.append(result.groups_settled_ms)
        if not result.ok:
            failures += 1
            extra = "".join(f" --known {k}" for k in sorted(known))
            print(
                f"seed {seed}: {result.violations[0]} -- reproduce: "
                f"{reproduce_command(seed)}{extra}"
            )
        elif args.verbose:
            print(
                f"seed {seed}: ok ({result.events} events, {result.acked} acked, "
                f"{result.group_commits_acked} group commits acked, "
                f"{result.group_fetches_checked} committed offsets checked)"
            )
    elapsed = monotonic_s() - started
    print(f"{count} seeds, {failures} violations ({elapsed:.1f} s)")
    if settle_ms:
        settle_ms.sort()
        print(
            f"groups settled after the heal in {settle_ms[len(settle_ms) // 2]} ms (median), "
            f"{settle_ms[-1]} ms (longest)"
        )
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
