"""``Broker``: the asyncio shell of a ``BrokerDriver`` -- sockets, the event loop, the clock,
worker threads for coordinator calls, fsyncs and log cleanings.

The driver decides everything (see ``replog.broker.driver``); this shell carries out its effects
and feeds their results back: client connections (``server.Server``; each connection hands the
driver one request at a time and waits for its ``Respond``, written to the socket straight
from that effect: a parked produce or fetch answer costs no future and no task), coordinator
calls and group-commit fsyncs on worker threads (so ZooKeeper or etcd latency never blocks the
loop), requests to other brokers on ``BrokerLink`` connections (written at once on an open,
idle link, the answer fed back from the link's socket callback -- a follower's fetch round costs
no task; a link not yet connected goes through a task that connects), the coordinator's feed and
session listeners, and one timer calling ``on_tick`` every ``tick_interval_ms``.

Every broker of a process runs on the one asyncio event loop it is started on. ``start`` binds
the server (registration needs the port) and accepts connections only once the driver is ONLINE.
``stop(controlled=True)`` lets the driver move leadership away, then stops serving, waits for a
running fsync, and closes the logs (flush, checkpoints, clean-shutdown marker) before
unregistering. ``kill`` is a crash for tests: sockets closed, nothing flushed or checkpointed,
the session left to expire. Teardown is bounded: every task this shell spawned is cancelled and
awaited, repeatedly, since a task may spawn another while it ends.

Failures (``replog.broker.shell.supervision``). A tick that raises is logged and the next tick runs;
``TICK_FAILURES_MAX`` in a row are fatal. Any other step that feeds the driver (a coordinator
call's completion -- metadata application --, a broker's answer, a flush, checkpoint or cleaning
report, a listener's event) is fatal when it raises: skipping it would leave driver state
behind (a feed never read again). A fatal failure is logged CRITICAL and the broker is killed
(listener and links closed, clients fail over, nothing checkpointed: the state it had is in
doubt); ``failure`` says why and ``wait_failed`` returns it, so the process exits non-zero.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Coroutine
from typing import Any

import attrs

from replog.broker.config import BrokerConfig
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
from replog.broker.shell.faults import BLACKHOLE, INTER_BROKER_CLIENT_PREFIX, BrokerFaults
from replog.broker.shell.links import BrokerLink
from replog.broker.shell.metrics import BrokerMetrics, gauge_values, live_topics
from replog.broker.shell.server import (
    PARKED,
    CloseConnection,
    Parked,
    Response,
    Server,
    error_parts,
)
from replog.broker.shell.supervision import Retries, run_fatal, supervised
from replog.clock import SYSTEM_CLOCK, Clock, monotonic_ms
from replog.coord import connect
from replog.coord.contract import Coordinator
from replog.errors import StorageError
from replog.log.fs import REAL_FS, FileSystem
from replog.log.log import Log
from replog.log.manager import LogManager
from replog.metadata.types import ChangeBatch, SessionEvent, Subscription
from replog.protocol import RequestHeader
from replog.protocol.schema import Message
from replog.state_change import StateChange, StateChangeSink
from replog.state_change_log import StateChangeLog

__all__ = ["Broker", "BrokerState"]

_log = logging.getLogger(__name__)
STATE_POLL_S = 0.01
TICK_FAILURES_MAX = 100
"""Ticks that may raise in a row before the fault counts as one that does not heal."""


def _fan_out(sinks: list[StateChangeSink]) -> StateChangeSink:
    """One sink handing every record to each of ``sinks``."""
    if len(sinks) == 1:
        return sinks[0]

    def sink(change: StateChange) -> None:
        for each in sinks:
            each(change)

    return sink


@attrs.define
class _InDriver:
    """A connection's request in the driver: for the metrics, and the answer while
    ``_handle`` (which returns it) is still running."""

    api_key: int
    body: Message
    received_ms: int
    handling: bool = True
    answer: Respond | CloseClient | None = None


class Broker:
    """One broker; see the module docstring. Create, then ``await start()`` on the loop."""

    def __init__(
        self,
        config: BrokerConfig,
        *,
        coordinator: Coordinator | None = None,
        clock: Clock = SYSTEM_CLOCK,
        fs: FileSystem = REAL_FS,
        faults: BrokerFaults | None = None,
    ) -> None:
        self.config = config
        self.fs = fs
        #: faults a test set on this broker (``replog.broker.shell.faults``)
        self.faults = faults if faults is not None else BrokerFaults(config.broker_id)
        self.broker_id = config.broker_id
        self.coordinator = coordinator if coordinator is not None else connect(config.coordinator)
        self.clock = clock
        self.driver: BrokerDriver | None = None
        self._server = Server(
            self._handle,
            frame_bytes_max=config.frame_bytes_max,
            inflight_requests_max=config.inflight_requests_max,
            connections_max=config.connections_max,
            on_connection_closed=self._connection_closed,
        )
        #: each connection's request in the driver, until its answer is carried out
        self._in_driver: dict[int, _InDriver] = {}
        self._carrying_out = False
        self._links: dict[int, BrokerLink] = {}
        self._tasks: set[asyncio.Task[Any]] = set()
        self._subscriptions: list[Subscription] = []
        self._loop: asyncio.AbstractEventLoop | None = None
        self._halting = False
        self._state_change_log: StateChangeLog | None = None
        self._metrics: BrokerMetrics | None = None
        #: the bound Prometheus port (None: metrics off or not started)
        self.metrics_port: int | None = None
        #: why the broker stopped itself (a fatal step raised), and when that is known
        self.failure: BaseException | None = None
        self._failed = asyncio.Event()
        self._dying: asyncio.Task[None] | None = None

    # ------------------------------------------------------------------ accessors

    @property
    def state(self) -> BrokerState:
        """The driver's life-cycle state (OFFLINE before start)."""
        return BrokerState.OFFLINE if self.driver is None else self.driver.state

    @property
    def rm(self) -> ReplicaManager:
        """The replica manager (exists once registered)."""
        if self.driver is None:
            raise RuntimeError(f"broker {self.broker_id} is not started")
        return self.driver.rm

    @property
    def log_manager(self) -> LogManager | None:
        """The log manager (exists once started)."""
        return None if self.driver is None else self.driver.log_manager

    @property
    def incarnation_epoch(self) -> int:
        """This incarnation's epoch (-1 before registration)."""
        return -1 if self.driver is None else self.driver.incarnation_epoch

    @property
    def port(self) -> int:
        """The bound port (0 before start)."""
        return self._server.port

    @property
    def advertised_host(self) -> str:
        """The host clients and brokers are told (``advertised_host``, else ``host``)."""
        return self.config.advertised_host or self.config.host

    @property
    def advertised_port(self) -> int:
        """The port clients and brokers are told (``advertised_port``, else the bound one)."""
        return self.config.advertised_port or self.port

    @property
    def address(self) -> str:
        """The advertised ``host:port``."""
        return f"{self.advertised_host}:{self.advertised_port}"

    @property
    def is_controller(self) -> bool:
        """True while this broker holds the controller role."""
        return self.driver is not None and self.driver.controller.is_controller

    def now_ms(self) -> int:
        """The runtime clock (monotonic ms)."""
        return self.clock.monotonic_ms()

    def local_log(self, topic: str, partition: int) -> Log | None:
        """This broker's log of the partition (tests)."""
        driver = self.driver
        rm = None if driver is None else driver.rm_or_none
        return None if rm is None else rm.log(topic, partition)

    # ------------------------------------------------------------------ life cycle

    async def start(self) -> None:
        """OFFLINE -> FENCED -> ONLINE; see the module docstring."""
        if self.state is not BrokerState.OFFLINE:
            raise RuntimeError(f"broker {self.broker_id} is {self.state.value}")
        self._loop = asyncio.get_running_loop()
        self._halting = False
        self.failure = None
        self._failed.clear()
        config = self.config
        log_manager = LogManager.open(
            list(config.log_dirs), config=config.log, fs=self.fs, clock=self.clock
        )
        self._state_change_log = StateChangeLog.open(
            config.log_dirs[0],
            bytes_max=config.state_change_log_bytes_max,
            backups=config.state_change_log_backups,
            clock=self.clock,
        )
        sinks: list[StateChangeSink] = [self._state_change_log.write]
        metrics = None
        if config.metrics_port is not None:
            metrics = self._metrics = self._start_metrics(config.metrics_port)
            sinks.append(metrics.on_state_change)
        driver = BrokerDriver(
            config,
            log_manager,
            state_change_sink=_fan_out(sinks),
            state_listener=None if metrics is None else metrics.on_partition_state,
        )
        self.driver = driver
        try:
            # Bind now (registration needs the port); accept only once ONLINE.
            await self._server.start(config.host, config.port, serving=False)
            driver.start(self.now_ms(), self._server.port)
            self._carry_out()
            self._spawn(self._tick_loop(), "the tick loop")
            while driver.state is not BrokerState.ONLINE:
                if driver.start_error is not None:
                    raise driver.start_error
                if self.failure is not None:
                    raise RuntimeError(f"broker {self.broker_id} failed") from self.failure
                await asyncio.sleep(STATE_POLL_S)
                # Tick at the poll's pace while starting: the controller campaign (and whatever
                # else is due) starts now rather than a whole tick interval after registration.
                driver.on_tick(self.now_ms())
                self._carry_out()
            await self._server.start_serving()
        except BaseException:
            await self._halt()
            driver.abandon()
            raise

    def _start_metrics(self, port: int) -> BrokerMetrics:
        """Serve this broker's Prometheus metrics (``replog.broker.shell.metrics``) on ``port``."""
        metrics = BrokerMetrics.create(self.broker_id, self.clock)
        loop = asyncio.get_running_loop()
        self.metrics_port = metrics.serve(
            self.config.host,
            port,
            loop,
            lambda: gauge_values(self.driver, self.now_ms()),
            lambda: live_topics(self.driver),
        )
        return metrics

    async def stop(self, *, controlled: bool = True) -> None:
        """Controlled shutdown (move leaders away, bounded by ``controlled_shutdown_timeout_ms``),
        then flush, checkpoint, clean-shutdown marker and unregister."""
        driver = self.driver
        if driver is None or driver.state is BrokerState.OFFLINE:
            return
        driver.begin_stop(self.now_ms(), controlled=controlled)
        self._carry_out()
        while (phase := driver.stop_sequence.step()) is not StopPhase.DOWN:
            if phase is StopPhase.STOP_SERVING:
                await self._server.close()
                continue
            self._carry_out()
            if phase is StopPhase.HALTED:
                continue
            await asyncio.sleep(STATE_POLL_S)
            if phase is StopPhase.MOVING_LEADERSHIP:
                driver.on_tick(self.now_ms())
        for effect in driver.take_effects():
            if isinstance(effect, CoordCall):
                with contextlib.suppress(Exception):
                    await asyncio.to_thread(effect.call, self.coordinator)
        await self._halt()

    async def kill(self) -> None:
        """Crash (tests): close every socket, checkpoint nothing, let the session expire."""
        driver = self.driver
        if driver is None or driver.state is BrokerState.OFFLINE:
            return
        driver.abandon()
        await self._halt()

    async def wait_failed(self) -> BaseException:
        """Wait until the broker stopped itself because a fatal step raised; returns why."""
        await self._failed.wait()
        failure = self.failure
        if failure is None:
            raise RuntimeError("failed without a failure")
        return failure

    def _died(self, name: str, exc: BaseException) -> None:
        """A fatal step raised (``supervision``, already logged): kill the broker, once."""
        del name  # supervision logged it, with the traceback
        if self.failure is not None or self._halting or self._loop is None:
            return
        self.failure = exc
        self._dying = self._loop.create_task(self._die())  # outside _tasks: _halt cancels those

    async def _die(self) -> None:
        try:
            await self.kill()
        finally:
            self._failed.set()

    async def _halt(self) -> None:
        """End every input (listeners, links, clients), then every task this shell spawned."""
        self._halting = True
        subscriptions, self._subscriptions = self._subscriptions, []
        for sub in subscriptions:
            with contextlib.suppress(Exception):
                await asyncio.to_thread(sub.close)
        for link in self._links.values():
            link.close()
        self._links.clear()
        await self._server.close()
        self._in_driver.clear()
        while self._tasks:
            tasks = list(self._tasks)
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            self._tasks.difference_update(tasks)
        if self._state_change_log is not None:
            self._state_change_log.close()
        metrics, self._metrics = self._metrics, None
        if metrics is not None:
            await asyncio.to_thread(metrics.close)

    # ------------------------------------------------------------------ carrying out effects

    def _spawn(self, coro: Coroutine[Any, Any, Any], name: str) -> None:
        """Run ``coro`` as a task the teardown ends; if it raises, the broker dies."""
        work = supervised(f"broker {self.broker_id}: {name}", coro, self._died)
        task = asyncio.get_running_loop().create_task(work)
        self._tasks.add(task)
        task.add_done_callback(self._forget_task)

    def _forget_task(self, task: asyncio.Task[Any]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            _log.error("broker %s: task failed", self.broker_id, exc_info=task.exception())

    def _carry_out(self) -> None:
        """Carry out every effect the driver has queued, in order. Not re-entered: an answer
        written from a ``Respond`` may hand the driver that connection's next request, whose
        effects this same loop then carries out after the ones already taken."""
        driver = self.driver
        if driver is None or self._halting or self._carrying_out:
            return
        self._carrying_out = True
        try:
            while effects := driver.take_effects():
                for effect in effects:
                    self._carry_out_one(effect)
        finally:
            self._carrying_out = False
        if driver.log_manager.storage_failed:
            self._stop_if_disks_failed()

    def _carry_out_one(self, effect: Effect) -> None:
        _CARRY_OUT[type(effect)](self, effect)

    def _start_coord_call(self, effect: CoordCall) -> None:
        self._spawn(self._coord_call(effect), f"completing the coordinator call {effect.what}")

    def _start_send(self, effect: SendToBroker) -> None:
        if self.faults.active or not self._send_now(effect):  # a fault: through the task
            self._spawn(self._send_to_broker(effect), f"a request to {effect.broker_id}")

    def _start_flush(self, effect: RunFlushes) -> None:
        self._spawn(self._flush(effect), "a group commit")

    def _start_cleaning(self, effect: RunCleaning) -> None:
        self._spawn(self._clean(effect), "a log cleaning")

    def _start_checkpoints(self, effect: RunCheckpoints) -> None:
        self._spawn(self._write_checkpoints(effect), "a checkpoint round")

    def _reset_link(self, effect: ResetLink) -> None:
        link = self._links.pop(effect.broker_id, None)
        if link is not None:
            link.close()

    def _start_subscription(self, effect: Subscribe) -> None:
        self._spawn(self._subscribe(effect), "subscribing to the coordinator")

    async def _coord_call(self, effect: CoordCall) -> None:
        if self.faults.paused:
            await self.faults.wait_resumed()
        try:
            result = await asyncio.to_thread(effect.call, self.coordinator)
            error: BaseException | None = None
        except Exception as exc:
            result, error = None, exc
        if self.driver is not None and not self._halting:
            self.driver.on_coord_done(effect.token, result, error, self.now_ms())
            self._carry_out()

    def _send_now(self, effect: SendToBroker) -> bool:
        """Send on an open, idle link without a task (``BrokerLink.send_now``): the answer is
        handed to the driver from the link's socket callback. False when the link is not ready
        (first use, reconnecting): ``_send_to_broker`` connects."""
        driver = self.driver
        link = self._links.get(effect.broker_id)
        if driver is None or link is None or effect.broker_id not in driver.rm.image.brokers:
            return False
        timeout_s = (self.config.replica_fetch_wait_ms_max + self.config.request_timeout_ms) / 1000

        def answered(response: Message | None, error: BaseException | None) -> None:
            if not self._halting:
                self._run_fatal(
                    "applying a broker's answer",
                    lambda: driver.on_broker_response(effect.token, response, error, self.now_ms()),
                )

        return link.send_now(effect.api_key, effect.api_version, effect.body, timeout_s, answered)

    async def _send_to_broker(self, effect: SendToBroker) -> None:
        driver = self.driver
        if driver is None:
            return
        info = driver.rm.image.brokers.get(effect.broker_id)
        link = self._links.get(effect.broker_id)
        if link is None:
            link = BrokerLink(
                effect.broker_id,
                f"{INTER_BROKER_CLIENT_PREFIX}{self.broker_id}",
                self.config.frame_bytes_max,
            )
            self._links[effect.broker_id] = link
        timeout_s = (self.config.replica_fetch_wait_ms_max + self.config.request_timeout_ms) / 1000
        response: Message | None = None
        error: BaseException | None = None
        try:
            if info is None:
                raise ConnectionError(f"broker {effect.broker_id} is not registered")
            await self.faults.wait_resumed()
            if not await self.faults.reachable(effect.broker_id, timeout_s):
                raise TimeoutError(f"broker {effect.broker_id} is cut off (an injected fault)")
            response = await link.request(
                (info.host, info.port), effect.api_key, effect.api_version, effect.body, timeout_s
            )
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            error = exc
        if not self._halting:
            driver.on_broker_response(effect.token, response, error, self.now_ms())
            self._carry_out()

    async def _flush(self, effect: RunFlushes) -> None:
        started_ms = monotonic_ms()
        failures = await asyncio.to_thread(effect.run)
        if self._metrics is not None:
            self._metrics.on_log_flush(monotonic_ms() - started_ms)
        if self.driver is not None and not self._halting:
            self.driver.on_flushes_done(effect.token, failures, self.now_ms())
            self._carry_out()

    async def _write_checkpoints(self, effect: RunCheckpoints) -> None:
        failures = await asyncio.to_thread(effect.round.write)
        if self.driver is not None and not self._halting:
            self.driver.on_checkpoints_done(effect.token, failures, self.now_ms())
            self._carry_out()

    def _stop_if_disks_failed(self) -> None:
        """Every log dir offline (a failed fsync or write): the broker stops itself, as Kafka
        halts a broker with no online log dir, so its leaderships move instead of staying
        unavailable here; it serves again once restarted on a working disk."""
        driver = self.driver
        if driver is not None and driver.log_manager.every_dir_offline and not self._halting:
            dirs = driver.log_manager.offline_dirs
            _log.critical(
                "broker %s: every log dir is offline (%s); stopping", self.broker_id, dirs
            )
            self._died("storage", StorageError(f"every log dir is offline: {dirs}"))

    async def _clean(self, effect: RunCleaning) -> None:
        await asyncio.to_thread(effect.task.run)
        if self.driver is not None and not self._halting:
            self.driver.on_cleaning_done(effect.token, self.now_ms())
            self._carry_out()

    async def _subscribe(self, effect: Subscribe) -> None:
        loop = asyncio.get_running_loop()

        def on_batch(batch: ChangeBatch) -> None:
            del batch
            loop.call_soon_threadsafe(self._feed_notified)

        def on_session(event: SessionEvent) -> None:
            loop.call_soon_threadsafe(self._session_event, event)

        coordinator = self.coordinator
        try:
            self._subscriptions.append(await asyncio.to_thread(coordinator.subscribe, on_batch))
            self._subscriptions.append(
                await asyncio.to_thread(
                    coordinator.add_session_listener, effect.broker_id, on_session
                )
            )
        except Exception as exc:  # the feed is still polled every metadata_poll_interval_ms
            _log.error("broker %s: cannot subscribe to the coordinator: %s", self.broker_id, exc)

    # ------------------------------------------------------------------ inputs

    def _feed_notified(self) -> None:
        driver = self.driver
        if driver is not None and not self._halting:
            self._run_fatal("a feed notification", lambda: driver.on_feed_notified(self.now_ms()))

    def _session_event(self, event: SessionEvent) -> None:
        driver = self.driver
        if driver is not None and not self._halting:
            now_ms = self.now_ms()
            self._run_fatal("a session event", lambda: driver.on_session_event(event, now_ms))

    def _run_fatal(self, name: str, step: Callable[[], None]) -> None:
        """``step`` then the effects it queued, under the fatal policy (module docstring)."""

        def run() -> None:
            step()
            self._carry_out()

        if self.faults.active and self.faults.hold(lambda: self._run_fatal(name, step)):
            return  # paused: it runs at resume
        run_fatal(f"broker {self.broker_id}: {name}", run, self._died)

    async def _tick_loop(self) -> None:
        """``on_tick`` every ``tick_interval_ms``; a tick that raises is retried by the next
        (``TICK_FAILURES_MAX`` in a row end the loop, which kills the broker)."""
        interval_s = self.config.tick_interval_ms / 1000
        retries = Retries(f"broker {self.broker_id}: a tick", TICK_FAILURES_MAX)
        while True:
            await asyncio.sleep(interval_s)
            driver = self.driver
            if driver is None or self._halting or self.faults.paused:
                continue
            try:
                driver.on_tick(self.now_ms())
                self._carry_out()
            except Exception as exc:
                if not retries.failed(exc):
                    raise
            else:
                retries.succeeded()

    async def _handle(
        self, conn_id: int, header: RequestHeader, body: Message
    ) -> Response | Parked:
        """Hand the request to the driver; its answer if the driver gave it at once, else
        ``PARKED`` (``_answer`` writes it when the driver's ``Respond`` comes)."""
        if self.faults.active:
            injected = await self.faults.before_request(conn_id, header, body.API.name)
            if injected is BLACKHOLE:
                return PARKED
            if injected is not None:
                return error_parts(header, body, injected)
        driver = self.driver
        if driver is None or self._halting:
            raise CloseConnection("broker stopping")
        received_ms = self.now_ms()
        entry = _InDriver(header.api_key, body, received_ms)
        self._in_driver[conn_id] = entry
        client_host = self._server.peer_host(conn_id)
        try:
            driver.on_request(conn_id, header, body, received_ms, client_host=client_host)
            self._carry_out()
        except BaseException:
            if self._in_driver.get(conn_id) is entry:
                del self._in_driver[conn_id]  # answered with the error response instead
            raise
        finally:
            entry.handling = False
        answer = entry.answer
        if answer is None:
            return PARKED
        if isinstance(answer, CloseClient):
            raise CloseConnection(answer.reason)
        return answer.parts

    def _answer(self, effect: Respond | CloseClient) -> None:
        """The driver's answer to a connection's request: kept for ``_handle`` to return while
        it is still running, else written (or the connection dropped) now."""
        entry = self._in_driver.pop(effect.conn_id, None)
        if entry is None:
            return  # the connection closed meanwhile
        metrics = self._metrics
        if metrics is not None:
            metrics.on_request(entry.api_key, self.now_ms() - entry.received_ms)
            if isinstance(effect, Respond):
                metrics.on_traffic(entry.body, effect.parts)
        if entry.handling:
            entry.answer = effect
        elif isinstance(effect, Respond):
            self._server.respond(effect.conn_id, effect.parts)
        else:
            self._server.close_client(effect.conn_id)

    def drop_connection(self, conn_id: int) -> None:
        """Close client connection ``conn_id`` (a healed fault's), if still open."""
        self._server.close_client(conn_id)

    def _connection_closed(self, conn_id: int) -> None:
        self._in_driver.pop(conn_id, None)
        if self.driver is not None and not self._halting:
            self.driver.on_connection_closed(conn_id, self.now_ms())


_CARRY_OUT: dict[type[Any], Callable[[Broker, Any], None]] = {
    Respond: Broker._answer,
    CloseClient: Broker._answer,
    CoordCall: Broker._start_coord_call,
    SendToBroker: Broker._start_send,
    RunFlushes: Broker._start_flush,
    RunCleaning: Broker._start_cleaning,
    RunCheckpoints: Broker._start_checkpoints,
    ResetLink: Broker._reset_link,
    Subscribe: Broker._start_subscription,
}
"""How the asyncio shell carries out each kind of effect (one entry per ``Effect`` member)."""
