"""A scripted shell for ``BrokerDriver`` unit tests: effects are carried out synchronously on a
``MemoryCoordinator`` with a manual clock, except those a test holds back to reorder them."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from replog.broker import BrokerConfig
from replog.broker.driver import BrokerDriver
from replog.broker.driver.effects import (
    CloseClient,
    CoordCall,
    Effect,
    Respond,
    RunCheckpoints,
    RunFlushes,
    Subscribe,
)
from replog.broker.driver.stop_sequence import StopPhase
from replog.clock import ManualClock
from replog.coord.memory import MemoryCoordinator
from replog.log.manager import LogManager


class ScriptedShell:
    """Runs one driver; ``hold(predicate)`` keeps matching CoordCalls for ``release``."""

    def __init__(self, tmp_path: Any, broker_id: int = 1, **settings: Any) -> None:
        self.clock = ManualClock()
        self.coordinator = MemoryCoordinator(clock=self.clock)
        config = BrokerConfig(broker_id=broker_id, log_dirs=(f"{tmp_path}/b{broker_id}",),
                              **settings)  # fmt: skip
        logs = LogManager.open(list(config.log_dirs), config=config.log, clock=self.clock)
        self.driver = BrokerDriver(config, logs)
        self.responses: dict[int, Any] = {}
        self.closed: dict[int, str] = {}
        self.held: list[CoordCall] = []
        #: with ``hold_checkpoints``, checkpoint rounds wait here for the test to write them
        self.hold_checkpoints = False
        self.checkpoints: list[RunCheckpoints] = []
        self._hold: Callable[[CoordCall], bool] = lambda call: False

    @property
    def now_ms(self) -> int:
        return self.clock.monotonic_ms()

    def hold(self, predicate: Callable[[CoordCall], bool]) -> None:
        self._hold = predicate

    def run(self) -> None:
        """Carry out effects until none is left (held calls stay held)."""
        while True:
            effects = self.driver.take_effects()
            if not effects:
                return
            for effect in effects:
                self._one(effect)

    def _one(self, effect: Effect) -> None:
        driver = self.driver
        if isinstance(effect, CoordCall):
            if self._hold(effect):
                self.held.append(effect)
                return
            self._call(effect)
        elif isinstance(effect, Respond):
            self.responses[effect.conn_id] = effect.parts
        elif isinstance(effect, CloseClient):
            self.closed[effect.conn_id] = effect.reason
        elif isinstance(effect, RunFlushes):
            for _, flush in effect.pending:
                flush.run()
            driver.on_flushes_done(effect.token, [], self.now_ms)
        elif isinstance(effect, RunCheckpoints):
            if self.hold_checkpoints:
                self.checkpoints.append(effect)
            else:
                driver.on_checkpoints_done(effect.token, effect.round.write(), self.now_ms)
        elif isinstance(effect, Subscribe):
            pass

    def _call(self, effect: CoordCall) -> None:
        try:
            result, error = effect.call(self.coordinator), None
        except Exception as exc:
            result, error = None, exc
        self.driver.on_coord_done(effect.token, result, error, self.now_ms)

    def release(self) -> None:
        held, self.held = self.held, []
        for effect in held:
            self._call(effect)
        self.run()

    def start(self, *, online: bool = True) -> None:
        """Start the driver; with ``online``, tick until the controller (this broker, in a
        one-broker cluster) has admitted it."""
        from replog.broker.driver import BrokerState

        self.driver.start(self.now_ms, 9092)
        self.run()
        for _ in range(100):
            if not online or self.driver.state is BrokerState.ONLINE:
                return
            self.tick(10)
        raise AssertionError(f"the driver did not come online: {self.driver.state}")

    def stop_with_a_feed_read_in_flight(self) -> None:
        """Tick until a metadata feed read is issued and hold it back, then stop the driver
        (uncontrolled), halt it and close its logs; ``release`` then completes the read after
        the logs closed (the shell's race at shutdown)."""
        self.hold(lambda call: call.what == "feed")
        for _ in range(30):
            self.tick(20)
            if self.held:
                break
        assert self.held, "no metadata feed read was issued"
        driver = self.driver
        driver.begin_stop(self.now_ms, controlled=False)
        self.run()
        assert driver.stop_sequence.step() is StopPhase.STOP_SERVING
        assert driver.stop_sequence.step() is StopPhase.HALTED
        self.run()
        driver.close_logs()

    def tick(self, delta_ms: int = 50) -> None:
        self.clock.advance(delta_ms)
        self.coordinator.check_sessions()
        self.driver.on_tick(self.now_ms)
        self.run()
