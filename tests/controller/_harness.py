"""A small cluster around one coordinator for the controller tests: brokers that register, fence
and expire, controller services, admin requests and leaders' AlterPartition proposals."""

from __future__ import annotations

import time
from collections.abc import Iterable
from typing import Any

import attrs

from replog.controller import (
    ControllerConfig,
    ControllerService,
    alter_partition_result,
    fixed_placement_start,
)
from replog.coord.contract import Coordinator, SessionFaults
from replog.coord.errors import BrokerIdInUseError
from replog.election.state_change import StateChange
from replog.errors import ErrorCode
from replog.metadata.types import (
    CONTROLLER_TARGET,
    AdminPayload,
    AdminRequest,
    AdminRequestChanged,
    AdminRequestChangeReason,
    AlterPartition,
    AlterPartitionResult,
    BrokerInfo,
    LeaderRecoveryState,
    PartitionChanged,
    PartitionState,
)

SESSION_TIMEOUT_MS = 30_000
REREGISTER_WAIT_S = 15.0
POLLS_MAX = 20


@attrs.define
class Cluster:
    """Brokers and controllers on ``coord``; ``now_ms`` is the time the tests pass to polls."""

    coord: Coordinator
    config: ControllerConfig = attrs.field(factory=ControllerConfig)
    brokers: dict[int, BrokerInfo] = attrs.field(factory=dict)
    now_ms: int = 0
    log: list[StateChange] = attrs.field(factory=list)
    #: each service's feed cursor, as its broker's channel would keep it
    _cursors: dict[int, int] = attrs.field(factory=dict)

    # ---- brokers ----

    def register(self, *broker_ids: int, clean_shutdown: bool = True) -> None:
        """Register each broker; a restarted one retries while the store still shows its old
        session (real backends notice an expiry a little later; the contract's advice)."""
        for b in broker_ids:
            deadline = time.monotonic() + REREGISTER_WAIT_S
            while True:
                try:
                    self.brokers[b] = self.coord.register_broker(
                        b,
                        "127.0.0.1",
                        9000 + b,
                        session_timeout_ms=SESSION_TIMEOUT_MS,
                        clean_shutdown=clean_shutdown,
                    )
                    break
                except BrokerIdInUseError:
                    if time.monotonic() > deadline:
                        raise
                    time.sleep(0.05)  # a real server's expiry; never taken on the memory store

    def fence(self, broker_id: int, fenced: bool = True) -> None:
        info = self.brokers[broker_id]
        self.brokers[broker_id] = self.coord.update_broker(
            broker_id, info.incarnation_epoch, fenced=fenced
        )

    def expire(self, broker_id: int) -> None:
        assert isinstance(self.coord, SessionFaults)
        self.coord.expire_session(broker_id)
        self.brokers.pop(broker_id)

    # ---- controllers ----

    def controller(self, broker_id: int, *, campaign: bool = True) -> ControllerService:
        service = ControllerService(
            self.coord,
            broker_id,
            self.brokers[broker_id].incarnation_epoch,
            config=self.config,
            start_index_source=fixed_placement_start,
        )
        if campaign:
            assert service.try_become_controller()
        return service

    def poll(self, service: ControllerService, now_ms: int | None = None) -> list[StateChange]:
        """One poll at ``now_ms`` (default: the cluster's time)."""
        if now_ms is not None:
            self.now_ms = now_ms
        changes = service.poll(self.now_ms, **self._metadata_for(service))
        self.log.extend(changes)
        return changes

    def _metadata_for(self, service: ControllerService) -> dict[str, Any]:
        """What a broker's metadata channel hands the service: a snapshot once it has seen
        the election (then the cursor is the snapshot's), and every feed batch from the cursor."""
        snapshot = None
        cursor = self._cursors.get(id(service), 0)
        if service.needs_snapshot:
            snapshot = self.coord.snapshot()
            if not service.has_seen_election(snapshot.controller_epoch):
                return {}
            cursor = snapshot.seq
        batches = []
        while (batch := self.coord.changes_since(cursor)).changes:
            batches.append(batch)
            cursor = batch.next_seq
        self._cursors[id(service)] = cursor
        return {"snapshot": snapshot, "batches": batches}

    def settle(self, service: ControllerService) -> None:
        """Poll until a poll changes nothing."""
        for _ in range(POLLS_MAX):
            if not self.poll(service):
                return
        raise AssertionError("the controller did not settle")

    # ---- requests ----

    def submit(self, payload: AdminPayload) -> AdminRequest:
        return self.coord.submit_admin_request(CONTROLLER_TARGET, payload)

    def completion(self, request: AdminRequest) -> AdminRequestChanged:
        """The completion record of ``request`` (fails if it is still pending)."""
        for change in self.feed():
            if (
                isinstance(change, AdminRequestChanged)
                and change.reason is AdminRequestChangeReason.COMPLETED
                and change.request.request_id == request.request_id
            ):
                return change
        raise AssertionError(f"request {request.request_id} has not completed")

    def outcome(self, request: AdminRequest) -> ErrorCode:
        return self.completion(request).outcome

    def feed(self) -> list[object]:
        changes: list[object] = []
        seq = 0
        while True:
            batch = self.coord.changes_since(seq)
            if not batch.changes:
                return changes
            changes.extend(batch.changes)
            seq = batch.next_seq

    def history(self, topic: str, partition: int) -> list[PartitionState]:
        """Every state the partition had, in feed order."""
        return [
            c.state
            for c in self.feed()
            if isinstance(c, PartitionChanged) and (c.topic, c.partition) == (topic, partition)
        ]

    def state(self, topic: str, partition: int = 0) -> PartitionState:
        state = self.coord.get_partition_state(topic, partition)
        assert state is not None, f"{topic}-{partition} does not exist"
        return state

    def propose_isr(
        self,
        topic: str,
        partition: int,
        isr: Iterable[int],
        *,
        sender: int | None = None,
        leader_epoch: int | None = None,
        partition_epoch: int | None = None,
        broker_epochs: dict[int, int] | None = None,
        recovery: LeaderRecoveryState = LeaderRecoveryState.RECOVERED,
    ) -> AdminRequest:
        """Queue an AlterPartition as the leader would, from the stored state (overridable)."""
        state = self.state(topic, partition)
        epochs = broker_epochs or {}
        payload = AlterPartition(
            topic=topic,
            partition=partition,
            leader_id=state.leader if sender is None else sender,
            leader_epoch=state.leader_epoch if leader_epoch is None else leader_epoch,
            partition_epoch=state.partition_epoch if partition_epoch is None else partition_epoch,
            new_isr=tuple((b, epochs.get(b, -1)) for b in isr),
            leader_recovery_state=recovery,
        )
        return self.submit(payload)

    def response(self, request: AdminRequest) -> AlterPartitionResult:
        """The AlterPartition result the leader takes from ``request``'s completion."""
        return alter_partition_result(self.completion(request))


def row(state: PartitionState) -> tuple[set[int], int, set[int]]:
    """A row of the seed-001 table: AR, leader/ISR."""
    return set(state.replicas), state.leader, set(state.isr)
