"""``SimBroker``: one broker of the simulation, wired like ``replog.broker.Broker`` but driven
by simulated events instead of asyncio tasks, sockets and threads.

Per broker: a ``FaultInjectingFileSystem`` directory (its disk, which survives crashes), a
``LogManager`` and ``ReplicaManager`` (rebuilt at every start: a new incarnation), the coordinator
session (registered as the broker does: ``clean_shutdown`` False after a crash in REPLICATED
mode, so the controller's KIP-966 unclean-restart handling runs), a ``ControllerService``
when it wins the role, one replica fetcher per source broker and the AlterPartition channel
through the coordinator's admin queue. Every periodic activity is an event guarded by ``gen``
(bumped at each start and crash), so a crashed incarnation's events die with it. Fetch response
record bytes are materialised when the leader answers, as a socket would send them.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

import attrs

from replog.broker.replica_manager import TP, ReplicaManager
from replog.controller import ControllerService, alter_partition_payload, alter_partition_response
from replog.controller.service import random_placement_start
from replog.coord.errors import (
    BrokerIdInUseError,
    CoordinatorError,
    CoordinatorUnavailableError,
    MustResyncError,
    SessionExpiredError,
)
from replog.coord.types import (
    CONTROLLER_TARGET,
    AdminRequestChanged,
    AdminRequestChangeReason,
    MetadataChange,
    PartitionChanged,
    SessionEvent,
    SessionState,
    Subscription,
)
from replog.errors import ErrorCode, StorageError
from replog.isr import (
    AlterPartitionRequest,
    AlterPartitionResponse,
    BytesSlice,
    FetchRequest,
    FetchResponse,
    FollowerAction,
    ProduceResult,
)
from replog.isr.config import DurabilityMode
from replog.log.manager import LogManager
from replog.testing.disk import sim_filesystem

if TYPE_CHECKING:
    from replog.testing.sim import Simulation

__all__ = ["SimBroker", "wire_fetch_response"]

Reply = Callable[[ProduceResult], None]


def wire_fetch_response(request: FetchRequest, response: FetchResponse) -> FetchResponse:
    """What reaches the fetcher after the wire: record bytes materialised now, only the fields
    a Fetch v12 response carries (as ``ReplicaFetcher._apply`` rebuilds it)."""
    data = b"" if response.records is None else response.records.to_bytes()
    diverging = response.diverging_epoch
    if diverging is not None and diverging.epoch < 0:
        diverging = None
    return FetchResponse(
        request_id=request.request_id,
        error_code=response.error_code,
        fetch_offset=request.fetch_offset,
        high_watermark=response.high_watermark,
        log_start_offset=response.log_start_offset,
        records=BytesSlice(data) if data else None,
        diverging_epoch=diverging,
        replica_id=request.replica_id,
    )


@attrs.define(eq=False)
class _Fetcher:
    leader_id: int
    token: int = 0
    outstanding: int | None = None


class SimBroker:
    """One simulated broker (see the module docstring)."""

    def __init__(self, sim: Simulation, broker_id: int) -> None:
        self.sim = sim
        self.broker_id = broker_id
        root = os.path.join(sim.root, f"broker-{broker_id}")
        os.makedirs(root, exist_ok=True)
        self.fs = sim_filesystem(root, sim.rng.randrange(1 << 30))
        self.log_dir = os.path.join(root, "logs")
        self.gen = 0
        self.alive = False
        self.starting = False
        self.incarnation = -1
        self.rm: ReplicaManager | None = None
        self.log_manager: LogManager | None = None
        self.controller: ControllerService | None = None
        self.coord_cut = False
        self._feed_seq = 0
        self._fetchers: dict[int, _Fetcher] = {}
        self._alter_pending: dict[int, AlterPartitionRequest] = {}
        self._produce_waiters: dict[tuple[TP, int], Reply] = {}
        self._seen_version = -1
        self._flush_scheduled = False
        self._subscriptions: list[Subscription] = []
        #: (tp, leader epoch) -> largest ISR a state naming this broker leader gave it in the
        #: current step (the simulation reads and clears it after each event)
        self.led_isr_sizes: dict[tuple[TP, int], int] = {}

    # ------------------------------------------------------------------ lifecycle

    def start(self) -> None:
        """Open the logs (recovery), register a new incarnation, load metadata, serve."""
        sim = self.sim
        self.gen += 1
        gen = self.gen
        self.starting = True
        if self.log_manager is None:
            # Opened once per start (retries keep it): opening reads and deletes the
            # clean-shutdown marker, so a crash while starting counts as unclean next time.
            self.log_manager = LogManager.open(
                [self.log_dir], sim.log_config, fs=self.fs, clock=sim.clock
            )
        try:
            info = sim.coordinator.register_broker(
                self.broker_id,
                "sim",
                9000 + self.broker_id,
                session_timeout_ms=sim.opts.session_ms,
                # As the broker does: clean only after a clean shutdown (never, here: every stop
                # is a crash), or in FSYNC mode, which never counts an unflushed offset.
                clean_shutdown=self.log_manager.had_clean_shutdown
                or sim.opts.durability is DurabilityMode.FSYNC,
            )
        except BrokerIdInUseError:
            sim.after(50, lambda: self._retry_start(gen))  # the old session has yet to expire
            return
        self.starting = False
        self.incarnation = info.incarnation_epoch
        rm = ReplicaManager(
            self.broker_id,
            self.log_manager,
            sim.partition_config,
            broker_epoch=self.incarnation,
            checkpoint_interval_ms=sim.opts.checkpoint_ms,
        )
        self.rm = rm
        self.alive = True
        self._seen_version = -1
        self.coord_cut = False
        snapshot = sim.coordinator.snapshot()
        self._feed_seq = snapshot.seq
        rm.apply_snapshot(snapshot, sim.now_ms)
        incarnation = self.incarnation

        def on_session(event: SessionEvent) -> None:
            if self.gen == gen and self.rm is not None and event.incarnation_epoch == incarnation:
                self.rm.set_metadata_current(event.state is SessionState.CONNECTED)

        self._subscriptions.append(sim.coordinator.add_session_listener(self.broker_id, on_session))
        self._every(gen, sim.opts.heartbeat_ms, self._heartbeat)
        self._every(gen, sim.opts.metadata_ms, self._poll_metadata)
        self._every(gen, sim.opts.tick_ms, self._tick)
        self._reconcile_fetchers()
        self.after_input()
        self._drain_admin_requests()
        sim.trace(f"broker {self.broker_id} started incarnation {self.incarnation}")

    def _retry_start(self, gen: int) -> None:
        if self.gen == gen and self.starting:
            self.start()

    def kill(self, *, power_loss: bool, tear: bool) -> None:
        """Crash: drop every object; with ``power_loss`` the disk loses unsynced writes too."""
        self.gen += 1
        self.starting = False
        if self.alive:
            for sub in self._subscriptions:
                sub.close()
            if self.log_manager is not None:
                for log in list(self.log_manager.logs.values()):
                    log.abandon()
                self.log_manager.logs.clear()
        self._subscriptions.clear()
        self.alive = False
        self.rm = None
        self.log_manager = None
        self.controller = None  # a crashed controller does not resign; its session expires
        self._fetchers.clear()
        self._alter_pending.clear()
        self._produce_waiters.clear()
        self._flush_scheduled = False
        if power_loss:
            self.fs.crash(tear=tear)
        self.sim.trace(f"broker {self.broker_id} {'lost power' if power_loss else 'crashed'}")

    def _every(self, gen: int, interval_ms: int, action: Callable[[], None]) -> None:
        def run() -> None:
            if self.gen != gen or not self.alive:
                return
            action()
            self.sim.after(self.sim.jitter(interval_ms), run)

        self.sim.after(self.sim.jitter(interval_ms), run)

    def _rm(self) -> ReplicaManager:
        rm = self.rm
        if rm is None:
            raise RuntimeError(f"broker {self.broker_id} is not running")
        return rm

    # ------------------------------------------------------------------ driver plumbing

    def after_input(self) -> None:
        """Drain the manager's outputs: produce answers, AlterPartition writes, flushes."""
        rm = self._rm()
        ready = rm.take_ready()
        for tp, result in ready.produce_results:
            reply = self._produce_waiters.pop((tp, result.request_id), None)
            if reply is not None:
                reply(result)
        for request in ready.alter_partition:
            self._send_alter_partition(request)
        if rm.data_version != self._seen_version:
            self._seen_version = rm.data_version
            if not self._flush_scheduled:
                self._flush_scheduled = True
                gen = self.gen
                self.sim.after(self.sim.opts.disk_ms, lambda: self._flush_event(gen))

    def _flush_event(self, gen: int) -> None:
        if self.gen != gen or not self.alive:
            return
        self._flush_scheduled = False
        self.flush_logs()

    def flush_logs(self) -> None:
        """Group commit: fsync every log with unflushed data, then advance recovery points."""
        rm = self._rm()
        pending = rm.begin_flushes()
        if not pending:
            return
        failed: set[TP] = set()
        for tp, flush in pending:
            try:
                flush.run()
            except (OSError, StorageError) as exc:
                failed.add(tp)
                rm.fail_flush(tp, f"fsync failed: {exc}")
        rm.complete_flushes([p for p in pending if p[0] not in failed], self.sim.now_ms)
        if failed:
            self.sim.on_storage_failure(self)
        self.after_input()

    # ------------------------------------------------------------------ coordinator

    def _heartbeat(self) -> None:
        if self.coord_cut:
            return
        rm = self._rm()
        try:
            state = self.sim.coordinator.heartbeat(self.broker_id, self.incarnation)
            rm.set_metadata_current(state is SessionState.CONNECTED)
        except CoordinatorUnavailableError:
            rm.set_metadata_current(False)
        except SessionExpiredError:
            rm.set_metadata_current(False)
            self._reregister()

    def _reregister(self) -> None:
        """A LOST session: come back as a new incarnation (KIP-903), as the broker does."""
        try:
            info = self.sim.coordinator.register_broker(
                self.broker_id,
                "sim",
                9000 + self.broker_id,
                session_timeout_ms=self.sim.opts.session_ms,
            )
        except CoordinatorError:
            return
        rm = self._rm()
        self.controller = None
        self.incarnation = info.incarnation_epoch
        rm.broker_epoch = self.incarnation
        for replica in rm.partitions.values():
            replica.broker_epoch = self.incarnation
        rm.set_metadata_current(True)
        self.sim.trace(f"broker {self.broker_id} re-registered as {self.incarnation}")

    def _poll_metadata(self) -> None:
        if self.coord_cut:
            return
        sim, rm = self.sim, self._rm()
        try:
            batch = sim.coordinator.changes_since(self._feed_seq)
        except MustResyncError:
            snapshot = sim.coordinator.snapshot()
            rm.apply_snapshot(snapshot, sim.now_ms)
            self._feed_seq = snapshot.seq
            batch = None
        queued_for_us = False
        if batch is not None:
            self._note_led_isrs(batch.changes)
            rm.apply_changes(batch.changes, sim.now_ms)
            for change in batch.changes:
                if not isinstance(change, AdminRequestChanged):
                    continue
                if change.reason is AdminRequestChangeReason.SUBMITTED:
                    queued_for_us |= change.request.target == self.broker_id
                elif change.reason is AdminRequestChangeReason.COMPLETED:
                    request = self._alter_pending.pop(change.request.request_id, None)
                    if request is not None:
                        rm.on_alter_partition_response(
                            request, alter_partition_response(change), sim.now_ms
                        )
            self._feed_seq = batch.next_seq
        if queued_for_us:
            self._drain_admin_requests()
        self._reconcile_fetchers()
        self.after_input()
        self._controller_step()

    def _note_led_isrs(self, changes: Iterable[MetadataChange]) -> None:
        for change in changes:
            if isinstance(change, PartitionChanged) and change.state.leader == self.broker_id:
                key = ((change.topic, change.partition), change.state.leader_epoch)
                size = len(change.state.isr)
                self.led_isr_sizes[key] = max(self.led_isr_sizes.get(key, 0), size)

    def _drain_admin_requests(self) -> None:
        """As ``Broker._drain_admin_requests``: act on and complete this broker's queue."""
        try:
            pending = self.sim.coordinator.pending_admin_requests(self.broker_id)
            for request in pending:
                self._rm().on_admin_request(request.payload)
                self.sim.coordinator.complete_admin_request(request.request_id)
        except CoordinatorError:
            return
        self.after_input()

    def _controller_step(self) -> None:
        sim, rm = self.sim, self._rm()
        if self.controller is None:
            current = rm.controller
            if current is None or current.controller_id == self.broker_id:
                service = ControllerService(
                    sim.coordinator,
                    self.broker_id,
                    self.incarnation,
                    clock_ms=lambda: sim.now_ms,
                    config=sim.controller_config,
                    start_index_source=random_placement_start(sim.rng),
                )
                try:
                    if service.try_become_controller():
                        self.controller = service
                        sim.trace(f"broker {self.broker_id} is controller")
                except CoordinatorError:
                    pass
        if self.controller is not None:
            try:
                self.controller.poll(sim.now_ms)
            except CoordinatorError:
                self.controller = None
            if self.controller is not None and not self.controller.is_active:
                self.controller = None

    def _send_alter_partition(self, request: AlterPartitionRequest) -> None:
        sim = self.sim
        gen = self.gen
        admin_id = None
        if not self.coord_cut:
            try:
                payload = alter_partition_payload(request, leader_broker_epoch=self.incarnation)
                admin = sim.coordinator.submit_admin_request(CONTROLLER_TARGET, payload)
                admin_id = admin.request_id
                self._alter_pending[admin_id] = request
            except CoordinatorError:
                admin_id = None

        def timed_out() -> None:
            if self.gen != gen or not self.alive:
                return
            if admin_id is not None and self._alter_pending.pop(admin_id, None) is None:
                return
            self._rm().on_alter_partition_response(
                request, AlterPartitionResponse(ErrorCode.REQUEST_TIMED_OUT), sim.now_ms
            )
            self.after_input()

        sim.after(sim.opts.request_timeout_ms if admin_id is not None else 50, timed_out)

    def _tick(self) -> None:
        rm = self._rm()
        rm.tick(self.sim.now_ms)
        try:
            rm.maybe_checkpoint(self.sim.now_ms)
        except StorageError:
            self.sim.on_storage_failure(self)
        self.after_input()

    # ------------------------------------------------------------------ replication

    def _reconcile_fetchers(self) -> None:
        wanted = self._rm().follower_leaders() - {self.broker_id}
        for leader_id in set(self._fetchers) - wanted:
            del self._fetchers[leader_id]
        for leader_id in sorted(wanted - set(self._fetchers)):
            fetcher = _Fetcher(leader_id)
            self._fetchers[leader_id] = fetcher
            self.sim.after(1, functools.partial(self._fetch_round, self.gen, fetcher))

    def _fetch_round(self, gen: int, fetcher: _Fetcher) -> None:
        sim = self.sim
        if (
            self.gen != gen
            or not self.alive
            or self._fetchers.get(fetcher.leader_id) is not fetcher
        ):
            return
        rm = self._rm()
        requests = rm.fetch_requests_for(fetcher.leader_id)
        if not requests or fetcher.leader_id not in rm.brokers:
            sim.after(sim.opts.fetch_backoff_ms, lambda: self._fetch_round(gen, fetcher))
            return
        if any(r.requires_flush for _, r in requests):
            self.flush_logs()
        fetcher.token += 1
        token = fetcher.token
        fetcher.outstanding = token
        leader = sim.brokers[fetcher.leader_id]
        sim.net.send(
            self.broker_id,
            leader.broker_id,
            lambda: leader.on_replica_fetch(self, gen, token, requests),
        )

        def timeout() -> None:
            if fetcher.outstanding == token:
                fetcher.outstanding = None
                self._fetch_round(gen, fetcher)

        sim.after(sim.opts.fetch_timeout_ms, timeout)

    def on_replica_fetch(
        self, follower: SimBroker, gen: int, token: int, requests: list[tuple[TP, FetchRequest]]
    ) -> None:
        """Leader side of a replica fetch: answer each partition at once."""
        if not self.alive:
            return  # connection refused: the follower times out
        rm = self._rm()
        answers = [
            (tp, wire_fetch_response(r, rm.fetch(tp[0], tp[1], r, self.sim.now_ms)))
            for tp, r in requests
        ]
        self.after_input()
        self.sim.net.send(
            self.broker_id,
            follower.broker_id,
            lambda: follower.on_replica_fetch_response(self.broker_id, gen, token, answers),
        )

    def on_replica_fetch_response(
        self, leader_id: int, gen: int, token: int, answers: list[tuple[TP, FetchResponse]]
    ) -> None:
        """Follower side: apply the answer if it is the one this fetcher waits for."""
        fetcher = self._fetchers.get(leader_id)
        if self.gen != gen or not self.alive or fetcher is None or fetcher.outstanding != token:
            return  # a stale answer on a connection the real fetcher has closed
        fetcher.outstanding = None
        rm = self._rm()
        progressed, failed = False, False
        for tp, answer in answers:
            outcome = rm.on_fetch_response(tp, answer, self.sim.now_ms)
            failed = failed or outcome.action is FollowerAction.FAILED
            progressed = progressed or answer.records is not None
        self.after_input()
        delay = 1 if progressed and not failed else self.sim.opts.fetch_backoff_ms
        self.sim.after(delay, lambda: self._fetch_round(gen, fetcher))

    # ------------------------------------------------------------------ clients

    def on_produce(self, tp: TP, batch: bytes, acks: int, reply: Reply) -> None:
        """A client's produce request (the answer goes to ``reply``, now or when it completes)."""
        if not self.alive:
            return
        rm = self._rm()
        request_id, result = rm.produce(
            tp[0], tp[1], batch, acks, self.sim.now_ms, timeout_ms=self.sim.opts.produce_timeout_ms
        )
        if result is None:
            self._produce_waiters[(tp, request_id)] = reply
        else:
            reply(result)
        self.after_input()

    def on_consumer_fetch(
        self, tp: TP, request: FetchRequest, reply: Callable[[FetchResponse], None]
    ) -> None:
        """A consumer's fetch, answered at once (records up to the HW)."""
        if not self.alive:
            return
        rm = self._rm()
        response = rm.fetch(tp[0], tp[1], request, self.sim.now_ms)
        reply(wire_fetch_response(request, response))
        self.after_input()
