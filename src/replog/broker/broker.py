"""``Broker``: the runtime around a ``ReplicaManager`` -- sockets, the event loop, the clock,
worker-thread fsyncs and the coordinator session.

States (seed 002): OFFLINE (not running, or recovering logs) -> FENCED (registered, catching up on
metadata) -> ONLINE (serving) -> STOPPING (moving leadership away) -> OFFLINE. ``start`` opens the
``LogManager`` (logs recover on first use), binds the server, registers with the coordinator (a
fresh incarnation epoch; ``clean_shutdown`` only if every log dir had the clean-shutdown marker, so
after a crash the controller takes it out of every ISR and ELR, KIP-966), loads a metadata snapshot
and follows the feed, tries to become controller, and serves. ``stop(controlled=True)`` asks the
controller to move leadership away (``in_controlled_shutdown``) and waits until this broker leads
nothing that could move or a deadline passes, then flushes, checkpoints and writes the
clean-shutdown marker. ``kill`` is a crash for tests: sockets closed, nothing flushed or
checkpointed, the session left to expire.

Every broker of a process runs on the one asyncio event loop it is started on. Coordinator calls
(``Coordinator`` is synchronous and thread-safe) run on worker threads through ``_coord``, so
ZooKeeper or etcd latency never blocks the loop; the controller service, which is not meant for
concurrent use, is driven under ``_controller_lock``.

Teardown is bounded: ``_halt`` stops fetchers and the server first (no new inputs), then cancels
and awaits every task it spawned -- repeatedly, since a task may spawn another while it ends --
so no task outlives the broker and nothing waits on a controller that is already gone.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import enum
import importlib
import logging
import time
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

from replog.broker.config import BrokerConfig
from replog.broker.fetcher import ReplicaFetcher
from replog.broker.handlers import handle_request
from replog.broker.replica_manager import TP, ReplicaManager
from replog.broker.server import Response, Server, wait_event
from replog.controller.alter_partition import alter_partition_payload, alter_partition_response
from replog.coord import connect
from replog.coord.contract import Coordinator
from replog.coord.errors import (
    BrokerIdInUseError,
    CoordinatorError,
    CoordinatorUnavailableError,
    MustResyncError,
    SessionExpiredError,
)
from replog.coord.types import (
    CONTROLLER_TARGET,
    AdminPayload,
    AdminRequestChanged,
    AdminRequestChangeReason,
    ChangeBatch,
    DamagedReplica,
    SessionEvent,
    SessionState,
    Subscription,
)
from replog.errors import ErrorCode, StorageError
from replog.isr import AlterPartitionRequest, AlterPartitionResponse, ProduceResult
from replog.isr.config import DurabilityMode
from replog.log.log import Log, PendingFlush
from replog.log.manager import LogManager
from replog.protocol import RequestHeader
from replog.protocol.schema import Message

__all__ = ["Broker", "BrokerState"]

_log = logging.getLogger(__name__)
T = TypeVar("T")


_EARLY_ADMIN_COMPLETIONS_MAX = 1024


class BrokerState(enum.Enum):
    """The broker lifecycle of seed 002."""

    OFFLINE = "offline"
    FENCED = "fenced"
    ONLINE = "online"
    STOPPING = "stopping"


def _run_flushes(pending: list[tuple[TP, PendingFlush]]) -> list[tuple[TP, str]]:
    failures: list[tuple[TP, str]] = []
    for tp, flush in pending:
        try:
            flush.run()
        except (OSError, StorageError) as exc:
            failures.append((tp, f"fsync failed: {exc}"))
    return failures


class Broker:
    """One broker; see the module docstring. Create, then ``await start()`` on the loop."""

    def __init__(self, config: BrokerConfig, *, coordinator: Coordinator | None = None) -> None:
        self.config = config
        self.broker_id = config.broker_id
        self.state = BrokerState.OFFLINE
        self.coordinator = coordinator if coordinator is not None else connect(config.coordinator)
        self.incarnation_epoch = -1
        self.log_manager: LogManager | None = None
        self._rm: ReplicaManager | None = None
        self.storage_lock = asyncio.Lock()
        self.data_event = asyncio.Event()
        self._server = Server(
            self._handle,
            frame_bytes_max=config.frame_bytes_max,
            inflight_requests_max=config.inflight_requests_max,
            connections_max=config.connections_max,
        )
        self._tasks: list[asyncio.Task[None]] = []
        self._fetchers: dict[int, ReplicaFetcher] = {}
        self._retiring_fetchers: set[ReplicaFetcher] = set()
        self._controller_lock = asyncio.Lock()
        self._produce_waiters: dict[tuple[TP, int], asyncio.Future[ProduceResult]] = {}
        self._admin_waiters: dict[int, asyncio.Future[AdminRequestChanged]] = {}
        # Completions seen in the feed before their submitter registered a waiter (the submit
        # runs on a worker thread, and the controller may finish first); bounded.
        self._early_admin_completions: collections.OrderedDict[int, AdminRequestChanged] = (
            collections.OrderedDict()
        )
        self._alter_inflight = 0
        self._seen_version = -1
        self._feed_seq = 0
        self._wake = asyncio.Event()
        self._dirty = asyncio.Event()
        self._subscriptions: list[Subscription] = []
        self._controller: Any = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._halting = False

    # ------------------------------------------------------------------ accessors

    @property
    def rm(self) -> ReplicaManager:
        """The replica manager (exists once started)."""
        if self._rm is None:
            raise RuntimeError(f"broker {self.broker_id} is not started")
        return self._rm

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

    @staticmethod
    def now_ms() -> int:
        """The runtime clock (monotonic ms); the only clock read of the broker."""
        return int(time.monotonic() * 1000)

    @property
    def is_controller(self) -> bool:
        """True while this broker runs the controller service."""
        return self._controller is not None

    # ------------------------------------------------------------------ lifecycle

    async def start(self) -> None:
        """OFFLINE -> FENCED -> ONLINE; see the module docstring."""
        if self.state is not BrokerState.OFFLINE:
            raise RuntimeError(f"broker {self.broker_id} is {self.state.value}")
        self._loop = asyncio.get_running_loop()
        self._halting = False
        self._alter_inflight = 0
        self.log_manager = LogManager.open(list(self.config.log_dirs), config=self.config.log)
        try:
            await self._start_serving()
        except BaseException:
            await self._halt()
            self._abandon_logs()
            raise
        self.state = BrokerState.ONLINE

    async def _start_serving(self) -> None:
        config = self.config
        assert self.log_manager is not None
        # Bind now (registration needs the port) but accept connections only once the replica
        # manager exists: a request must never find the broker half started.
        await self._server.start(config.host, config.port, serving=False)
        # FSYNC mode never counts an unflushed offset (toward the HW or ISR membership), so a
        # crash cannot lose what this broker vouched for: only REPLICATED mode needs the marker.
        await self._register(
            clean_shutdown=self.log_manager.had_clean_shutdown
            or config.durability is DurabilityMode.FSYNC
        )
        self.state = BrokerState.FENCED
        self._rm = ReplicaManager(
            self.broker_id,
            self.log_manager,
            config.partition_config(),
            broker_epoch=self.incarnation_epoch,
            checkpoint_interval_ms=config.checkpoint_interval_ms,
        )
        snapshot = await self._coord(self.coordinator.snapshot)
        self._feed_seq = snapshot.seq
        async with self.storage_lock:
            self.rm.apply_snapshot(snapshot, self.now_ms())
        loop = asyncio.get_running_loop()

        def on_batch(batch: ChangeBatch) -> None:
            del batch
            loop.call_soon_threadsafe(self._wake.set)

        def on_session(event: SessionEvent) -> None:
            loop.call_soon_threadsafe(self._on_session_event, event)

        self._subscriptions.append(await self._coord(self.coordinator.subscribe, on_batch))
        self._subscriptions.append(
            await self._coord(self.coordinator.add_session_listener, self.broker_id, on_session)
        )
        for coro in (
            self._metadata_loop(),
            self._heartbeat_loop(),
            self._tick_loop(),
            self._flush_loop(),
            self._retention_loop(),
            self._controller_loop(),
        ):
            self._spawn(coro)
        self._reconcile_fetchers()
        self.after_input()
        await self._drain_admin_requests()
        await self._server.start_serving()

    async def _coord(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """Run a (synchronous, thread-safe) coordinator call on a worker thread."""
        return await asyncio.to_thread(fn, *args, **kwargs)

    def _abandon_logs(self) -> None:
        if self.log_manager is not None:
            for log in list(self.log_manager.logs.values()):
                log.abandon()
            self.log_manager.logs.clear()

    async def _register(self, *, clean_shutdown: bool = True) -> None:
        """Register a new incarnation, retrying while the old one's session lives.
        ``clean_shutdown``: whether the previous run ended cleanly (KIP-966; a re-registration
        of this running process keeps its whole log, so it is clean)."""
        deadline = self.now_ms() + self.config.session_timeout_ms * 3
        while True:
            try:
                info = await self._coord(
                    self.coordinator.register_broker,
                    self.broker_id,
                    self.advertised_host,
                    self.advertised_port,
                    rack=self.config.rack,
                    session_timeout_ms=self.config.session_timeout_ms,
                    clean_shutdown=clean_shutdown,
                )
            except BrokerIdInUseError:
                if self.now_ms() > deadline:
                    raise
                await asyncio.sleep(0.05)  # the old incarnation's session has yet to expire
                continue
            self.incarnation_epoch = info.incarnation_epoch
            return

    def _spawn(self, coro: Coroutine[Any, Any, None]) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.append(task)
        task.add_done_callback(self._forget_task)

    def _forget_task(self, task: asyncio.Task[None]) -> None:
        with contextlib.suppress(ValueError):
            self._tasks.remove(task)
        if not task.cancelled() and task.exception() is not None:
            _log.error("broker %s: task failed", self.broker_id, exc_info=task.exception())

    async def stop(self, *, controlled: bool = True) -> None:
        """Controlled shutdown (move leaders away, bounded by ``controlled_shutdown_timeout_ms``),
        then flush, checkpoint, clean-shutdown marker and unregister."""
        if self.state is BrokerState.OFFLINE:
            return
        self.state = BrokerState.STOPPING
        if controlled:
            await self._move_leadership_away()
        await self._halt()
        if self.log_manager is not None:
            async with self.storage_lock:
                try:
                    self.log_manager.shutdown(self.incarnation_epoch)
                except StorageError as exc:
                    _log.error("broker %s: unclean log shutdown: %s", self.broker_id, exc)
        with contextlib.suppress(CoordinatorError):
            await self._coord(
                self.coordinator.unregister_broker, self.broker_id, self.incarnation_epoch
            )
        self.state = BrokerState.OFFLINE

    async def kill(self) -> None:
        """Crash (tests): close every socket, checkpoint nothing, let the session expire."""
        if self.state is BrokerState.OFFLINE:
            return
        self._controller = None  # a crashed controller does not resign; its session expires
        await self._halt()
        self._abandon_logs()
        self.state = BrokerState.OFFLINE

    async def _move_leadership_away(self) -> None:
        with contextlib.suppress(CoordinatorError):
            await self._coord(
                self.coordinator.update_broker,
                self.broker_id,
                self.incarnation_epoch,
                in_controlled_shutdown=True,
            )
        deadline = self.now_ms() + self.config.controlled_shutdown_timeout_ms
        while self.now_ms() < deadline:
            movable = [
                tp
                for tp in self.rm.leader_partitions()
                if len(self.rm.states.get(tp, _NO_STATE).replicas) > 1
            ]
            if not movable:
                return
            await asyncio.sleep(0.05)
        _log.warning("broker %s: controlled shutdown deadline passed", self.broker_id)

    async def _halt(self) -> None:
        """End every input (feed, fetchers, clients), then every task this broker spawned."""
        self._halting = True
        subscriptions, self._subscriptions = self._subscriptions, []
        for sub in subscriptions:
            with contextlib.suppress(Exception):
                await self._coord(sub.close)
        async with self._controller_lock:
            controller, self._controller = self._controller, None
            if controller is not None:
                with contextlib.suppress(Exception):
                    await self._coord(controller.resign)
        fetchers = list(self._fetchers.values()) + list(self._retiring_fetchers)
        self._fetchers.clear()
        self._retiring_fetchers.clear()
        for fetcher in fetchers:
            fetcher.cancel()
        for fetcher in fetchers:
            await fetcher.stop()
        await self._server.close()
        # Waiters first: a task parked on one (an AlterPartition waiting for a controller that
        # is gone) must not keep the halt waiting for its timeout.
        for future in self._produce_waiters.values():
            future.cancel()
        for waiter in self._admin_waiters.values():
            waiter.cancel()
        self._produce_waiters.clear()
        self._admin_waiters.clear()
        while self._tasks:
            tasks, self._tasks = self._tasks, []
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

    # ------------------------------------------------------------------ driver plumbing

    def after_input(self) -> None:
        """Drain the manager's outputs after any input: complete produces, queue AlterPartition
        requests for the controller, wake long polls and the flusher."""
        ready = self.rm.take_ready()
        for tp, result in ready.produce_results:
            future = self._produce_waiters.pop((tp, result.request_id), None)
            if future is not None and not future.done():
                future.set_result(result)
        for request in ready.alter_partition:
            if self._alter_inflight < self.config.alter_partition_queue_max:
                self._alter_inflight += 1
                self._spawn(self._send_alter_partition(request))
        for (topic, partition), first_offset in ready.damaged:
            payload = DamagedReplica(
                topic=topic,
                partition=partition,
                broker_id=self.broker_id,
                broker_epoch=self.incarnation_epoch,
                first_offset=first_offset,
            )
            self._spawn(self._report_damage(payload))
        if self.rm.data_version != self._seen_version:
            self._seen_version = self.rm.data_version
            old, self.data_event = self.data_event, asyncio.Event()
            old.set()
            self._dirty.set()

    def produce_waiter(self, tp: TP, request_id: int) -> asyncio.Future[ProduceResult]:
        """A future completed when the parked acks=all produce ends."""
        future: asyncio.Future[ProduceResult] = asyncio.get_running_loop().create_future()
        self._produce_waiters[(tp, request_id)] = future
        return future

    async def _handle(self, header: RequestHeader, body: Message) -> Response:
        return await handle_request(self, header, body)

    async def flush_logs(self) -> None:
        """Group commit: fsync every log with unflushed data on a worker thread (holding the
        storage lock so no truncation races the fsync), then advance recovery points."""
        async with self.storage_lock:
            pending = self.rm.begin_flushes()
            if not pending:
                return
            failures = await asyncio.to_thread(_run_flushes, pending)
            failed = {tp for tp, _ in failures}
            for tp, reason in failures:
                self.rm.fail_flush(tp, reason)
            self.rm.complete_flushes([p for p in pending if p[0] not in failed], self.now_ms())
            self.after_input()

    async def submit_admin(self, payload: AdminPayload, timeout_ms: int) -> tuple[ErrorCode, str]:
        """Queue ``payload`` for the controller and wait for its completion (or time out)."""
        try:
            change = await self._submit_admin_change(payload, timeout_ms)
        except CoordinatorError as exc:
            return ErrorCode.REQUEST_TIMED_OUT, str(exc)
        if change is None:
            return ErrorCode.REQUEST_TIMED_OUT, "the controller did not complete the request"
        return change.outcome, change.message

    def _remember_early_completion(self, change: AdminRequestChanged) -> None:
        early = self._early_admin_completions
        early[change.request.request_id] = change
        while len(early) > _EARLY_ADMIN_COMPLETIONS_MAX:
            early.popitem(last=False)

    async def _submit_admin_change(
        self, payload: AdminPayload, timeout_ms: int
    ) -> AdminRequestChanged | None:
        request = await self._coord(
            self.coordinator.submit_admin_request, CONTROLLER_TARGET, payload
        )
        early = self._early_admin_completions.pop(request.request_id, None)
        if early is not None:
            return early
        future: asyncio.Future[AdminRequestChanged] = asyncio.get_running_loop().create_future()
        self._admin_waiters[request.request_id] = future
        self._wake.set()
        try:
            await asyncio.wait({future}, timeout=max(timeout_ms, 1) / 1000)
            return future.result() if future.done() and not future.cancelled() else None
        finally:
            self._admin_waiters.pop(request.request_id, None)

    # ------------------------------------------------------------------ background loops

    async def _metadata_loop(self) -> None:
        interval_s = self.config.metadata_poll_interval_ms / 1000
        while True:
            await wait_event(self._wake, interval_s)
            self._wake.clear()
            try:
                await self._poll_feed()
            except CoordinatorError as exc:
                _log.debug("broker %s: feed unavailable: %s", self.broker_id, exc)
            except Exception:
                # A bug applying metadata must not silently end metadata handling: log it and
                # try the same changes again at the next wake-up.
                _log.exception("broker %s: applying metadata failed", self.broker_id)

    async def _poll_feed(self) -> None:
        try:
            batch = await self._coord(self.coordinator.changes_since, self._feed_seq)
        except MustResyncError:
            snapshot = await self._coord(self.coordinator.snapshot)
            async with self.storage_lock:
                self.rm.apply_snapshot(snapshot, self.now_ms())
            self._feed_seq = snapshot.seq
            batch = ChangeBatch((), snapshot.seq)
        queued_for_us = False
        if batch.changes:
            async with self.storage_lock:
                self.rm.apply_changes(batch.changes, self.now_ms())
            for change in batch.changes:
                if not isinstance(change, AdminRequestChanged):
                    continue
                if change.reason is AdminRequestChangeReason.SUBMITTED:
                    queued_for_us |= change.request.target == self.broker_id
                elif change.reason is AdminRequestChangeReason.COMPLETED:
                    future = self._admin_waiters.get(change.request.request_id)
                    if future is None:
                        self._remember_early_completion(change)
                    elif not future.done():
                        future.set_result(change)
        self._feed_seq = batch.next_seq
        if queued_for_us:
            await self._drain_admin_requests()
        self._reconcile_fetchers()
        self.after_input()
        if self._controller is not None:
            await self._poll_controller()

    async def _drain_admin_requests(self) -> None:
        """Act on and complete what the controller queued for this broker (CloseReplica after a
        deletion or a move, even one made while this broker was down), so the queue stays
        short. Run at start-up, after the snapshot, and when the feed shows a new request."""
        try:
            pending = await self._coord(self.coordinator.pending_admin_requests, self.broker_id)
        except CoordinatorError as exc:
            _log.debug("broker %s: admin queue unavailable: %s", self.broker_id, exc)
            return
        for request in pending:
            async with self.storage_lock:
                self.rm.on_admin_request(request.payload)
            self.after_input()
            try:
                await self._coord(self.coordinator.complete_admin_request, request.request_id)
            except CoordinatorError as exc:
                _log.debug("broker %s: completing %s failed: %s", self.broker_id, request, exc)
                return

    def _reconcile_fetchers(self) -> None:
        if self._halting:
            return
        wanted = self.rm.follower_leaders() - {self.broker_id}
        for leader_id in set(self._fetchers) - wanted:
            # Cancel now (a stop task cancelled before it ran would leave the fetcher running);
            # the retiring set lets ``_halt`` await it even if its stop task never runs.
            fetcher = self._fetchers.pop(leader_id)
            fetcher.cancel()
            self._retiring_fetchers.add(fetcher)
            self._spawn(self._retire_fetcher(fetcher))
        for leader_id in wanted - set(self._fetchers):
            fetcher = ReplicaFetcher(self, leader_id)
            self._fetchers[leader_id] = fetcher
            fetcher.start()

    async def _retire_fetcher(self, fetcher: ReplicaFetcher) -> None:
        try:
            await fetcher.stop()
        finally:
            self._retiring_fetchers.discard(fetcher)

    async def _heartbeat_loop(self) -> None:
        interval_s = self.config.heartbeat_interval_ms / 1000
        while True:
            await asyncio.sleep(interval_s)
            try:
                state = await self._coord(
                    self.coordinator.heartbeat, self.broker_id, self.incarnation_epoch
                )
                self._set_session(state)
            except CoordinatorUnavailableError:
                self._set_session(SessionState.SUSPENDED)
            except SessionExpiredError:
                self._set_session(SessionState.LOST)
                await self._reregister()
            except CoordinatorError as exc:
                _log.debug("broker %s: heartbeat failed: %s", self.broker_id, exc)

    def _on_session_event(self, event: SessionEvent) -> None:
        if event.incarnation_epoch == self.incarnation_epoch:
            self._set_session(event.state)

    def _set_session(self, state: SessionState) -> None:
        if self._rm is not None:
            self.rm.set_metadata_current(state is SessionState.CONNECTED)

    async def _reregister(self) -> None:
        """A LOST session: come back as a new incarnation (KIP-903), never the old one."""
        if self.state is not BrokerState.ONLINE:
            return
        self._controller = None
        await self._register()
        self.rm.broker_epoch = self.incarnation_epoch
        for replica in self.rm.partitions.values():
            replica.broker_epoch = self.incarnation_epoch
        self.rm.set_metadata_current(True)

    async def _tick_loop(self) -> None:
        interval_s = self.config.tick_interval_ms / 1000
        while True:
            await asyncio.sleep(interval_s)
            now_ms = self.now_ms()
            self.rm.tick(now_ms)
            try:
                self.rm.maybe_checkpoint(now_ms)
            except StorageError as exc:
                _log.error("broker %s: checkpoint failed: %s", self.broker_id, exc)
            self.after_input()

    async def _flush_loop(self) -> None:
        # FSYNC: group commit right after every change (the leader's flushed offset is what
        # its HW may count). REPLICATED: an append counts once written, so no acknowledgement
        # waits for an fsync; flushing after every append would only put fsyncs (and the
        # storage lock they hold) on the followers' fetch path. Flush at the checkpoint interval
        # instead, so recovery points still move.
        replicated = self.config.durability is DurabilityMode.REPLICATED
        interval_s = self.config.checkpoint_interval_ms / 1000
        while True:
            await self._dirty.wait()
            self._dirty.clear()
            await self.flush_logs()
            if replicated:
                await asyncio.sleep(interval_s)

    async def _retention_loop(self) -> None:
        interval_s = self.config.retention_check_interval_ms / 1000
        while True:
            await asyncio.sleep(interval_s)
            await self.apply_retention()

    async def apply_retention(self) -> int:
        """Delete segments past retention (never past the HW) on every online log, holding the
        storage lock so no worker-thread fsync meets a deleted segment; returns how many."""
        if self._rm is None:
            return 0
        async with self.storage_lock:
            try:
                deleted = self.rm.delete_old_segments()
            except StorageError as exc:
                _log.error("broker %s: retention failed: %s", self.broker_id, exc)
                return 0
            self.after_input()
        return deleted

    # ------------------------------------------------------------------ controller role

    async def _controller_loop(self) -> None:
        module = _controller_module()
        if module is None:
            return
        while True:
            if self._controller is None and self.state is BrokerState.ONLINE:
                current = self.rm.controller
                if current is None or current.controller_id == self.broker_id:
                    await self._try_become_controller(module)
            if self._controller is not None:
                await self._poll_controller()
            await asyncio.sleep(0.05)

    async def _try_become_controller(self, module: Any) -> None:
        async with self._controller_lock:
            if self._controller is not None or self._halting:
                return
            try:
                service = module.ControllerService(
                    self.coordinator,
                    self.broker_id,
                    self.incarnation_epoch,
                    clock_ms=self.now_ms,
                    config=self.config.controller_config(),
                )
                if await self._coord(service.try_become_controller):
                    self._controller = service
            except CoordinatorError as exc:
                _log.debug("broker %s: controller election failed: %s", self.broker_id, exc)

    async def _poll_controller(self) -> None:
        async with self._controller_lock:
            controller = self._controller
            if controller is None:
                return
            try:
                await self._coord(controller.poll, self.now_ms())
            except CoordinatorError as exc:
                _log.info("broker %s: lost the controller role: %s", self.broker_id, exc)
                if self._controller is controller:
                    self._controller = None

    async def _report_damage(self, payload: DamagedReplica) -> None:
        _log.error(
            "broker %s: replica %s-%s is damaged from offset %s; asking the controller to move "
            "it out of the ISR", self.broker_id, payload.topic, payload.partition,
            payload.first_offset,
        )  # fmt: skip
        code, message = await self.submit_admin(payload, self.config.request_timeout_ms)
        if code is not ErrorCode.NONE:
            _log.warning("broker %s: damage report refused: %s %s", self.broker_id, code, message)

    async def _send_alter_partition(self, request: AlterPartitionRequest) -> None:
        """Hand an ISR change to the controller through the admin queue; apply the answer."""
        try:
            payload = alter_partition_payload(request, leader_broker_epoch=self.incarnation_epoch)
            try:
                change = await self._submit_admin_change(payload, self.config.request_timeout_ms)
            except CoordinatorError:
                change = None
            if change is None:
                response = AlterPartitionResponse(ErrorCode.REQUEST_TIMED_OUT)
            else:
                response = alter_partition_response(change)
            self.rm.on_alter_partition_response(request, response, self.now_ms())
            self.after_input()
        finally:
            self._alter_inflight -= 1

    # ------------------------------------------------------------------ tests and tools

    def local_log(self, topic: str, partition: int) -> Log | None:
        """This broker's log of the partition (tests)."""
        return None if self._rm is None else self.rm.log(topic, partition)


class _NoState:
    replicas: tuple[int, ...] = ()


_NO_STATE = _NoState()


def _controller_module() -> Any:
    try:
        return importlib.import_module("replog.controller")
    except ImportError:
        return None
