"""``SimBroker``: the simulator's shell of a ``BrokerDriver`` -- the product's driver, request
handlers and follow-fetch logic, with only sockets, disk and time simulated.

Per broker: a ``FaultInjectingFileSystem`` directory (its disk, which survives crashes), and per
incarnation a ``LogManager`` and a ``BrokerDriver`` (rebuilt at every start). The shell carries
out the driver's effects on simulated resources:

- requests travel as real Kafka frames (``encode_request`` / ``decode_request``) over the
  simulated network, each on a connection of its own; a response's zero-copy record holes are
  read from the (simulated) disk when it leaves, as a socket would send them;
- coordinator calls run on the shared ``MemoryCoordinator`` after a small delay, as a worker
  thread would pick them up, and fail while this broker is cut off from it;
- group-commit fsyncs complete after ``disk_ms`` (a failed fsync takes its log offline and
  the operator restarts the broker, see ``Simulation.on_storage_failure``); a log cleaning's
  heavy pass runs after ``disk_ms`` too, in one step, and reports at once;
- requests to other brokers time out after ``fetch_timeout_ms`` when no answer comes;
- ``on_tick`` every ``tick_ms``; session events the next instant.

Every scheduled action is guarded by ``gen`` (bumped at each start and crash), so a crashed
incarnation's events die with it. The shell sees the simulation through ``SimBrokerHost``, the
members of ``Simulation`` it uses.
"""

from __future__ import annotations

import contextlib
import functools
import itertools
import os
from collections.abc import Callable, Mapping
from typing import Any, Protocol

from replog.broker import BrokerConfig
from replog.broker.driver import BrokerDriver, BrokerState
from replog.broker.driver.effects import (
    CloseClient,
    CoordCall,
    Effect,
    ResetLink,
    Respond,
    RunCheckpoints,
    RunCleaning,
    RunFlushes,
    SendToBroker,
    Subscribe,
)
from replog.broker.driver.replica_manager import ReplicaManager
from replog.broker.driver.stop_sequence import StopPhase
from replog.clock import Clock
from replog.controller.service import random_placement_start
from replog.coord.errors import CoordinatorUnavailableError
from replog.coord.memory import MemoryCoordinator
from replog.errors import ProtocolError
from replog.log.log import FetchSlice
from replog.log.manager import LogManager
from replog.metadata.types import PartitionState, SessionEvent, Subscription
from replog.protocol import (
    RecordsRef,
    RequestHeader,
    decode_request,
    decode_response,
    encode_request,
)
from replog.simkit.net import SimNetwork
from replog.testing.disk import sim_filesystem
from replog.testing.sim_ports import SimCore
from replog.topics import TopicPartition

__all__ = ["SimBroker", "SimBrokerHost", "frame_of"]

Reply = Callable[[bytes | None], None]
_SERVING = frozenset({BrokerState.ONLINE, BrokerState.STOPPING})
COORD_DELAY_MS_MAX = 2


def frame_of(parts: list[bytes | RecordsRef[Any]]) -> bytes:
    """A response frame with its record holes read from disk (what a socket would send)."""
    out = bytearray()
    for part in parts:
        if isinstance(part, bytes):
            out += part
        elif isinstance(part.source, FetchSlice):
            out += part.source.to_bytes()
        else:
            raise ProtocolError("a records hole without a FetchSlice source")
    return bytes(out)


class SimBrokerHost(SimCore, Protocol):
    """What a simulated broker uses of the simulation."""

    @property
    def root(self) -> str:
        """The run's directory (each broker's disk is a directory in it)."""

    @property
    def clock(self) -> Clock:
        """The simulation's clock, the logs' and the coordinator's."""

    @property
    def coordinator(self) -> MemoryCoordinator:
        """The coordinator every broker shares."""

    @property
    def net(self) -> SimNetwork:
        """The network."""

    @property
    def brokers(self) -> Mapping[int, SimBroker]:
        """Every simulated broker, by id (requests to other brokers)."""

    def broker_config(self, broker_id: int, log_dir: str) -> BrokerConfig:
        """The product's ``BrokerConfig`` for a simulated broker."""

    def on_storage_failure(self, broker: SimBroker) -> None:
        """A log of ``broker`` went offline (the operator restarts it)."""


class SimBroker:
    """One simulated broker (see the module docstring)."""

    def __init__(self, sim: SimBrokerHost, broker_id: int) -> None:
        self.sim = sim
        self.broker_id = broker_id
        root = os.path.join(sim.root, f"broker-{broker_id}")
        os.makedirs(root, exist_ok=True)
        self.fs = sim_filesystem(root, sim.rng.randrange(1 << 30))
        self.log_dir = os.path.join(root, "logs")
        self.config: BrokerConfig = sim.broker_config(broker_id, self.log_dir)
        self.gen = 0
        self.driver: BrokerDriver | None = None
        self.coord_cut = False
        #: a controlled stop is under way (the shell still serves until the driver is ready)
        self.stopping = False
        self._serving = False
        self._conn_ids = itertools.count(1)
        self._replies: dict[int, tuple[int, Reply]] = {}
        self._subscriptions: list[Subscription] = []
        #: (tp, leader epoch) -> largest ISR a state naming this broker leader gave it in the
        #: current step (the simulation reads and clears it after each event)
        self.led_isr_sizes: dict[tuple[TopicPartition, int], int] = {}

    # ------------------------------------------------------------------ accessors

    @property
    def alive(self) -> bool:
        """An incarnation runs (serving, or on its way to it; one whose start failed does
        not: the operator restarts it, see ``Simulation._heal``)."""
        return self.driver is not None and self.driver.start_error is None

    @property
    def starting(self) -> bool:
        """Started but not yet serving."""
        return self.driver is not None and self.driver.state is not BrokerState.ONLINE

    @property
    def online(self) -> bool:
        """Registered and serving."""
        return self.driver is not None and self.driver.state is BrokerState.ONLINE

    @property
    def rm(self) -> ReplicaManager | None:
        """The replica manager of the running incarnation."""
        return None if self.driver is None else self.driver.rm_or_none

    @property
    def log_manager(self) -> LogManager | None:
        """The log manager of the running incarnation."""
        return None if self.driver is None else self.driver.log_manager

    @property
    def incarnation(self) -> int:
        """The running incarnation's epoch (-1: none)."""
        return -1 if self.driver is None else self.driver.incarnation_epoch

    @property
    def is_controller(self) -> bool:
        """Whether this broker holds the controller role now."""
        return self.driver is not None and self.driver.controller.is_controller

    # ------------------------------------------------------------------ life cycle

    def start(self) -> None:
        """Open the logs (recovery), then start a new incarnation of the driver."""
        sim = self.sim
        self._stop_incarnation()
        self.gen += 1
        gen = self.gen
        self.coord_cut = False
        log_manager = LogManager.open([self.log_dir], self.config.log, fs=self.fs, clock=sim.clock)
        member_ids = itertools.count()
        driver = BrokerDriver(
            self.config,
            log_manager,
            placement_start=random_placement_start(sim.rng),
            state_listener=self._note_state,
            # deterministic group member ids (a UUID would differ between runs of a seed)
            member_id_suffix=lambda: f"b{self.broker_id}.{gen}.{next(member_ids)}",
        )
        self.driver = driver
        self.stopping = False
        self._serving = True
        driver.start(sim.now_ms, 9000 + self.broker_id)
        self._carry_out()
        self._every(gen, sim.opts.tick_ms, self._tick)
        sim.trace(f"broker {self.broker_id} starting")

    def kill(self, *, power_loss: bool, tear: bool) -> None:
        """Crash: drop every object; with ``power_loss`` the disk loses unsynced writes too."""
        self.stopping = False
        self._stop_incarnation()
        self.gen += 1
        if power_loss:
            self.fs.crash(tear=tear)
        self.sim.trace(f"broker {self.broker_id} {'lost power' if power_loss else 'crashed'}")

    def stop(self, *, controlled: bool, then: Callable[[], None]) -> None:
        """Shut down as ``replog.Broker.stop`` does: with ``controlled``, leadership moves away
        first (the broker keeps serving meanwhile); then serving stops, a running fsync ends,
        the logs close cleanly (checkpoints, clean-shutdown marker) and the broker unregisters.
        ``then`` runs once it is down (not when it crashes on the way)."""
        driver = self.driver
        if driver is None or driver.state is not BrokerState.ONLINE:
            return
        sim, gen = self.sim, self.gen
        self.stopping = True
        driver.begin_stop(sim.now_ms, controlled=controlled)
        self._carry_out()

        def step() -> None:
            live = self._live(gen)
            if live is None:
                return
            phase = live.stop_sequence.step()
            if phase is StopPhase.MOVING_LEADERSHIP:
                sim.after(sim.opts.tick_ms, step)
            elif phase is StopPhase.STOP_SERVING:
                self._serving = False
                step()
            elif phase is StopPhase.HALTED:
                self._carry_out()
                step()
            elif phase is StopPhase.DRAINING:
                self._carry_out()
                sim.after(sim.opts.disk_ms, step)
            else:
                down(live)

        def down(live: BrokerDriver) -> None:
            for effect in live.take_effects():
                if isinstance(effect, CoordCall) and not self.coord_cut:
                    with contextlib.suppress(Exception):
                        effect.call(sim.coordinator)
            self._stop_incarnation()
            self.gen += 1
            self.stopping = False
            sim.trace(
                f"broker {self.broker_id} stopped ({'controlled' if controlled else 'plain'})"
            )
            then()

        step()

    def _stop_incarnation(self) -> None:
        for sub in self._subscriptions:
            sub.close()
        self._subscriptions.clear()
        if self.driver is not None and self.driver.state is not BrokerState.OFFLINE:
            self.driver.abandon()
        self.driver = None
        self._replies.clear()

    def _live(self, gen: int) -> BrokerDriver | None:
        driver = self.driver
        return driver if self.gen == gen and driver is not None else None

    def _every(self, gen: int, interval_ms: int, action: Callable[[], None]) -> None:
        def run() -> None:
            if self._live(gen) is None:
                return
            action()
            self.sim.after(self.sim.jitter(interval_ms), run)

        self.sim.after(self.sim.jitter(interval_ms), run)

    def _tick(self) -> None:
        driver = self.driver
        if driver is not None:
            driver.on_tick(self.sim.now_ms)
            self._carry_out()

    # ------------------------------------------------------------------ effects

    def _carry_out(self) -> None:
        driver = self.driver
        while driver is not None and driver is self.driver:
            effects = driver.take_effects()
            if not effects:
                return
            for effect in effects:
                self._carry_out_one(effect)

    def _carry_out_one(self, effect: Effect) -> None:
        _CARRY_OUT[type(effect)](self, effect)

    def _respond(self, effect: Respond) -> None:
        self._answer(effect.conn_id, effect.parts, closed=False)

    def _close_client(self, effect: CloseClient) -> None:
        self._answer(effect.conn_id, None, closed=True)

    def _reset_link(self, effect: ResetLink) -> None:
        pass  # simulated links hold no connection state

    def _coord_call(self, effect: CoordCall) -> None:
        sim, gen = self.sim, self.gen

        def run() -> None:
            driver = self._live(gen)
            if driver is None:
                return
            result: Any = None
            error: BaseException | None = None
            if self.coord_cut:
                error = CoordinatorUnavailableError(f"broker {self.broker_id} is cut off")
            else:
                try:
                    result = effect.call(sim.coordinator)
                except Exception as exc:
                    error = exc
            if self._live(gen) is driver:
                driver.on_coord_done(effect.token, result, error, sim.now_ms)
                self._carry_out()

        sim.after(sim.rng.randint(0, COORD_DELAY_MS_MAX), run)

    def _flush(self, effect: RunFlushes) -> None:
        sim, gen = self.sim, self.gen

        def run() -> None:
            driver = self._live(gen)
            if driver is None:
                return
            failures = effect.run()
            driver.on_flushes_done(effect.token, failures, sim.now_ms)
            self._carry_out()
            if failures:
                sim.on_storage_failure(self)

        sim.after(sim.opts.disk_ms, run)

    def _write_checkpoints(self, effect: RunCheckpoints) -> None:
        """At once: the write is the same work the driver used to do inline in ``on_tick``."""
        driver = self._live(self.gen)
        if driver is None:
            return
        failures = effect.round.write()
        driver.on_checkpoints_done(effect.token, failures, self.sim.now_ms)
        self._carry_out()

    def _clean(self, effect: RunCleaning) -> None:
        sim, gen = self.sim, self.gen

        def run() -> None:
            driver = self._live(gen)
            if driver is None:
                return
            effect.task.run()
            driver.on_cleaning_done(effect.token, sim.now_ms)
            self._carry_out()

        sim.after(sim.opts.disk_ms, run)

    def _subscribe(self, effect: Subscribe) -> None:
        sim, gen = self.sim, self.gen

        def on_session(event: SessionEvent) -> None:
            def deliver() -> None:
                driver = self._live(gen)
                if driver is not None:
                    driver.on_session_event(event, sim.now_ms)
                    self._carry_out()

            sim.after(0, deliver)

        self._subscriptions.append(
            sim.coordinator.add_session_listener(effect.broker_id, on_session)
        )

    # ------------------------------------------------------------------ requests between nodes

    def _send_to_broker(self, effect: SendToBroker) -> None:
        sim, gen = self.sim, self.gen
        header = RequestHeader(
            api_key=effect.api_key,
            api_version=effect.api_version,
            correlation_id=effect.token,
            client_id=f"replica-{self.broker_id}",
        )
        frame = encode_request(header, effect.body)[4:]  # the network carries framed payloads
        answered = False

        def reply(response: bytes | None) -> None:
            nonlocal answered
            driver = self._live(gen)
            if driver is None or answered:
                return
            answered = True
            if response is None:
                driver.on_broker_response(effect.token, None, ConnectionError("closed"), sim.now_ms)
            else:
                _, body = decode_response(
                    response, api_key=effect.api_key, api_version=effect.api_version
                )
                driver.on_broker_response(effect.token, body, None, sim.now_ms)
            self._carry_out()

        def timeout() -> None:
            nonlocal answered
            driver = self._live(gen)
            if driver is None or answered:
                return
            answered = True
            driver.on_broker_response(effect.token, None, TimeoutError("no answer"), sim.now_ms)
            self._carry_out()

        target = sim.brokers.get(effect.broker_id)
        if target is not None:
            sim.net.send(
                self.broker_id,
                effect.broker_id,
                lambda: target.on_frame(self.broker_id, frame, reply),
            )
        sim.after(sim.opts.fetch_timeout_ms, timeout)

    def on_frame(self, src: int, frame: bytes, reply: Reply) -> None:
        """A request frame from node ``src`` (a client or another broker) on a connection of
        its own; the answer frame goes back over the network (None: connection closed)."""
        driver = self.driver
        if driver is None or not self._serving or driver.state not in _SERVING:
            return  # connection refused: the sender times out
        header, body = decode_request(frame)
        conn_id = next(self._conn_ids)
        self._replies[conn_id] = (src, reply)
        driver.on_request(conn_id, header, body, self.sim.now_ms)
        self._carry_out()

    def _answer(self, conn_id: int, parts: list[Any] | None, *, closed: bool) -> None:
        entry = self._replies.pop(conn_id, None)
        if entry is None:
            return
        src, reply = entry
        if parts is None and not closed:
            return  # acks=0: nothing goes back
        data = None if parts is None else frame_of(parts)
        self.sim.net.send(
            self.broker_id,
            src,
            functools.partial(reply, data[4:] if data is not None else None),
        )

    # ------------------------------------------------------------------ the step's record

    def _note_state(self, tp: TopicPartition, state: PartitionState) -> None:
        """Record the ISRs metadata gives this broker as leader (the sim reads them per step:
        one feed batch may grow and shrink an ISR within a step)."""
        if state.leader == self.broker_id:
            key = (tp, state.leader_epoch)
            self.led_isr_sizes[key] = max(self.led_isr_sizes.get(key, 0), len(state.isr))


_CARRY_OUT: dict[type[Any], Callable[[SimBroker, Any], None]] = {
    Respond: SimBroker._respond,
    CloseClient: SimBroker._close_client,
    CoordCall: SimBroker._coord_call,
    SendToBroker: SimBroker._send_to_broker,
    RunFlushes: SimBroker._flush,
    RunCleaning: SimBroker._clean,
    RunCheckpoints: SimBroker._write_checkpoints,
    Subscribe: SimBroker._subscribe,
    ResetLink: SimBroker._reset_link,
}
"""How the simulator's broker carries out each kind of effect (one entry per ``Effect``)."""
