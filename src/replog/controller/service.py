"""``ControllerService``: the driver that connects the controller machine to a ``Coordinator``.

Theory of operation. Every broker runs one service; the broker runtime calls
``try_become_controller()`` when the role is vacant and ``poll(now_ms, ...)`` while it holds it.
No thread, no timer, no clock: the service acts only inside those calls, at the ``now_ms`` they
carry. The service reads no feed of its own: its view is the broker's metadata image. Once it
has won (``elect_controller``) and the broker's image has seen that election, the broker hands
a snapshot of that image to ``poll``, which builds a ``ControllerMachine`` for the controller
epoch from it; every later poll gets the feed batches the broker applied since (records
below the service's cursor, already in its snapshot, are skipped). A gap in the broker's feed
reloads its image, and the broker hands the new snapshot the same way. One poll:

1. feeds every new record to the machine (a BrokerChanged(REGISTERED) whose ``clean_shutdown`` is
   False removes that incarnation from every ISR and ELR, KIP-966; a fenced one loses its
   leadership and ISR places; then the controller admits it in the store, so no later
   controller repeats it, and counts it unfenced at once: the broker serves as soon as it sees
   the admission, so a request from its clients may come before the feed brings it back);
2. right after winning (or a rebuild), processes the registrations the snapshot names that no
   controller has admitted yet (the previous term may have died in between),
   reconciles every partition with the brokers' liveness and resumes reassignments
   (``on_become_controller``);
3. checks ``current_controller()`` is still this term, then handles every pending admin request
   for ``CONTROLLER_TARGET``, oldest first;
4. runs ``on_tick`` (one step of each reassignment, auto leader rebalance when due).

Writes are applied in order with this term's controller epoch. A VERSION_MISMATCH hands the
store's state back to the machine, which decides again from the write's cause (at most
``CONFLICT_RETRIES_MAX`` times in a row); the rest of the failed write's group is skipped, so a
request never completes on a write that did not happen. FENCED_CONTROLLER (or
``FencedControllerError``, a ``ControllerChanged`` record naming another term, or our session
ending) means the role is lost: the service stops acting at once, ``role`` becomes LOST and
``lost_reason`` says why; the broker may campaign again later with a new service state.

``poll`` returns the state-change records (``replog.state_change``) of the writes it applied.
"""

from __future__ import annotations

import enum
import logging
import random
from collections.abc import Callable, Sequence

from replog.coord.contract import Coordinator
from replog.coord.errors import (
    AdminQueueFullError,
    FencedControllerError,
    InvalidPartitionStateError,
    InvalidReplicaAssignmentError,
    SessionExpiredError,
    TopicExistsError,
    UnknownTopicError,
)
from replog.election.controller import ControllerConfig, ControllerMachine
from replog.election.controller_requests import handling_order
from replog.election.controller_writes import (
    AdmitBrokerWrite,
    BrokerConfigsWrite,
    CasPartitionWrite,
    CompleteRequestWrite,
    ControllerOutput,
    ControllerWrite,
    NewPartitionsWrite,
    NewTopicWrite,
    ProducerIdBlockWrite,
    SubmitRequestWrite,
    TopicConfigsWrite,
    TopicDeletionWrite,
)
from replog.election.state_change import StateChange
from replog.errors import ErrorCode, invariant, unreachable
from replog.metadata.types import (
    CONTROLLER_TARGET,
    CasStatus,
    ChangeBatch,
    MetadataSnapshot,
)

__all__ = [
    "CONFLICT_RETRIES_MAX",
    "ControllerRoleState",
    "ControllerService",
    "random_placement_start",
]

_log = logging.getLogger(__name__)

CONFLICT_RETRIES_MAX = 3
"""How many times in a row one decision is retried after a VERSION_MISMATCH."""

REQUESTS_PER_POLL_MAX = 16
"""A bound on the admin requests one poll handles (``handling_order`` picks them): a request
that arrives while a poll works is considered within about this many handlings, not after a
whole backlog."""

_STRUCTURAL_ERRORS = (
    TopicExistsError,
    UnknownTopicError,
    InvalidReplicaAssignmentError,
    InvalidPartitionStateError,
)


class ControllerRoleState(enum.Enum):
    """Where this broker stands: not (yet) controller, the active one, or one that lost the
    role (fenced, session gone, or resigned)."""

    STANDBY = "standby"
    ACTIVE = "active"
    LOST = "lost"


def random_placement_start(rng: random.Random | None = None) -> Callable[[int], tuple[int, int]]:
    """Kafka's placement start: ``start_index`` and ``replica_shift`` each random in [0, n)."""
    source = rng or random.Random()
    return lambda n: (source.randrange(n), source.randrange(n))


class ControllerService:
    """The controller role of one broker incarnation (see the module docstring)."""

    def __init__(
        self,
        coordinator: Coordinator,
        broker_id: int,
        incarnation_epoch: int,
        *,
        config: ControllerConfig | None = None,
        start_index_source: Callable[[int], tuple[int, int]] | None = None,
        timeout_ms: int | None = None,
    ) -> None:
        self.coordinator = coordinator
        self.broker_id = broker_id
        self.incarnation_epoch = incarnation_epoch
        self.config = config or ControllerConfig()
        self.start_index_source = start_index_source or random_placement_start()
        self.timeout_ms = timeout_ms
        self.role = ControllerRoleState.STANDBY
        self.controller_epoch: int | None = None
        self.machine: ControllerMachine | None = None
        self.lost_reason = ""
        self._cursor = 0
        self._needs_reconcile = False
        #: won, and waiting for an image that names this term to build the machine from
        self.needs_snapshot = False
        #: admissions (broker, incarnation) a write of which failed for good
        self._admission_failed: set[tuple[int, int]] = set()

    @property
    def is_active(self) -> bool:
        """Whether this service currently acts as the controller."""
        return self.role is ControllerRoleState.ACTIVE

    # ---- the role ---------------------------------------------------------------------

    def try_become_controller(self) -> bool:
        """Campaign once. Returns whether this broker is the active controller afterwards; its
        machine is built by the first ``poll`` given a snapshot that names this term."""
        if self.is_active:
            return True
        try:
            info = self.coordinator.elect_controller(
                self.broker_id, self.incarnation_epoch, timeout_ms=self.timeout_ms
            )
        except SessionExpiredError as e:
            self._lose(f"cannot campaign: {e}")
            return False
        if (info.controller_id, info.incarnation_epoch) != (self.broker_id, self.incarnation_epoch):
            return False
        self.controller_epoch = info.controller_epoch
        self.role = ControllerRoleState.ACTIVE
        self.lost_reason = ""
        self.needs_snapshot = True
        return self.is_active

    def resign(self) -> bool:
        """Give up the role (a controlled shutdown of this broker); returns whether it did."""
        if not self.is_active or self.controller_epoch is None:
            return False
        resigned = self.coordinator.resign_controller(
            self.broker_id, self.controller_epoch, timeout_ms=self.timeout_ms
        )
        self._lose("resigned")
        return resigned

    def _lose(self, reason: str) -> None:
        self.role = ControllerRoleState.LOST
        self.lost_reason = reason
        if self.machine is not None:
            self.machine.active = False

    def has_seen_election(self, controller_epoch: int) -> bool:
        """Whether an image whose highest controller epoch is ``controller_epoch`` has seen this
        service's election (it names this term, or a later one: then the role is lost)."""
        return self.controller_epoch is not None and controller_epoch >= self.controller_epoch

    def _rebuild(self, snapshot: MetadataSnapshot, now_ms: int) -> None:
        """A fresh machine for this term from ``snapshot``; reconcile on the next step."""
        invariant(self.controller_epoch is not None, "rebuild without a controller epoch")
        self.needs_snapshot = False
        machine = ControllerMachine.from_snapshot(
            snapshot,
            controller_id=self.broker_id,
            controller_epoch=self.controller_epoch or 0,
            now_ms=now_ms,
            config=self.config,
            placement_start=self.start_index_source,
        )
        machine.on_controller_changed(snapshot.controller)
        previous = self.machine
        if previous is not None and previous.controller_epoch == machine.controller_epoch:
            # A rebuild within the term: registrations this term processed stay processed (the
            # snapshot still says clean_shutdown=False for them; see ControllerMachine).
            machine.admitted_here |= previous.admitted_here
        self.machine = machine
        self._cursor = snapshot.seq
        self._needs_reconcile = True
        if not machine.active:
            self._lose(f"the snapshot names another controller: {snapshot.controller}")

    # ---- one poll -----------------------------------------------------------------------

    def poll(
        self,
        now_ms: int,
        *,
        snapshot: MetadataSnapshot | None = None,
        batches: Sequence[ChangeBatch] = (),
    ) -> list[StateChange]:
        """Take the metadata the broker applied (``snapshot``: rebuild from it; ``batches``: the
        feed batches since, in order), handle pending controller requests and periodic work;
        return the state-change records of the writes applied. Does nothing unless ACTIVE, or
        before a snapshot has built the machine."""
        if not self.is_active:
            return []
        now = now_ms
        if snapshot is not None:
            self._rebuild(snapshot, now)
        if self.machine is None or not self.is_active:
            return []
        records: list[StateChange] = []
        try:
            self._follow(batches, now, records)
            if self._needs_reconcile and self.is_active:
                self._needs_reconcile = False
                self._apply(self._machine().on_become_controller(now), now, records)
            if self.is_active:
                self._check_still_controller()
            if self.is_active:
                self._handle_requests(now, records)
            if self.is_active:
                self._apply(self._machine().on_tick(now), now, records)
        except SessionExpiredError as e:
            self._lose(f"session lost: {e}")
        return records

    def _machine(self) -> ControllerMachine:
        if self.machine is None:
            unreachable("an active controller service has a machine")
        return self.machine

    def _follow(
        self, batches: Sequence[ChangeBatch], now_ms: int, records: list[StateChange]
    ) -> None:
        """Feed the machine every record at or past the cursor (records the snapshot already
        holds are skipped), in order."""
        for batch in batches:
            for change in batch.changes:
                if change.seq < self._cursor:
                    continue
                output = self._machine().on_change(change, now_ms)
                if not self._machine().active:
                    self._lose(f"the feed names another controller term (seq {change.seq})")
                    return
                self._apply(output, now_ms, records)
                if not self.is_active:
                    return
            self._cursor = max(self._cursor, batch.next_seq)

    def _check_still_controller(self) -> None:
        active = self.coordinator.current_controller(timeout_ms=self.timeout_ms)
        if active is None or (active.controller_id, active.controller_epoch) != (
            self.broker_id,
            self.controller_epoch,
        ):
            self._lose(f"the active controller is now {active}")

    def _handle_requests(self, now_ms: int, records: list[StateChange]) -> None:
        pending = self.coordinator.pending_admin_requests(
            CONTROLLER_TARGET, timeout_ms=self.timeout_ms
        )
        for request in handling_order(self._machine(), pending, REQUESTS_PER_POLL_MAX):
            if not self.is_active:
                return
            self._apply(self._machine().on_admin_request(request, now_ms), now_ms, records)

    # ---- applying writes ------------------------------------------------------------------

    def _apply(
        self, output: ControllerOutput, now_ms: int, records: list[StateChange], depth: int = 0
    ) -> None:
        failed: set[int] = set()
        for write in output.writes:
            if not self.is_active:
                return
            if write.group in failed:
                continue
            if not self._apply_one(write, now_ms, records, depth):
                failed.add(write.group)

    def _apply_one(
        self, write: ControllerWrite, now_ms: int, records: list[StateChange], depth: int
    ) -> bool:
        """Apply one write; False when it failed (the rest of its group is skipped)."""
        epoch = self.controller_epoch or 0
        c = self.coordinator
        t = self.timeout_ms
        if isinstance(write, CasPartitionWrite):
            return self._apply_cas(write, now_ms, records, depth)
        try:
            if isinstance(write, NewTopicWrite):
                assignment = c.create_topic(
                    write.topic,
                    write.replica_assignment,
                    controller_epoch=epoch,
                    initial_states=write.initial_states,
                    configs=dict(write.configs),
                    timeout_ms=t,
                )
                self._machine().on_topic_written(assignment)
            elif isinstance(write, NewPartitionsWrite):
                assignment = c.add_partitions(
                    write.topic,
                    write.new_replica_assignment,
                    controller_epoch=epoch,
                    initial_states=write.initial_states,
                    timeout_ms=t,
                )
                self._machine().on_topic_written(assignment)
            elif isinstance(write, TopicDeletionWrite):
                c.delete_topic(write.topic, controller_epoch=epoch, timeout_ms=t)
            elif isinstance(write, TopicConfigsWrite):
                c.alter_topic_configs(
                    write.topic, dict(write.configs), controller_epoch=epoch, timeout_ms=t
                )
            elif isinstance(write, BrokerConfigsWrite):
                c.alter_broker_configs(
                    write.broker_id, dict(write.configs), controller_epoch=epoch, timeout_ms=t
                )
            elif isinstance(write, SubmitRequestWrite):
                try:
                    c.submit_admin_request(write.target, write.payload, timeout_ms=t)
                except AdminQueueFullError as full:
                    # A broker's queue full of work it has yet to do (it is down): the request
                    # is a clean-up the broker also finds at start-up (stray logs), so losing
                    # it must not cost the controller role.
                    _log.warning("controller %s: %s; dropped %s", self.broker_id, full, write)
            elif isinstance(write, AdmitBrokerWrite):
                return self._admit(write, now_ms, records, depth)
            elif isinstance(write, ProducerIdBlockWrite):
                c.allocate_producer_ids(
                    write.broker_id,
                    write.broker_epoch,
                    count=write.count,
                    controller_epoch=epoch,
                    timeout_ms=t,
                )
            elif isinstance(write, CompleteRequestWrite):
                c.complete_admin_request(
                    write.request_id,
                    outcome=write.outcome,
                    message=write.message,
                    result=write.result,
                    controller_epoch=epoch,
                    timeout_ms=t,
                )
        except FencedControllerError as e:
            self._lose(f"fenced: {e}")
            return False
        except _STRUCTURAL_ERRORS as e:
            self._refused(write, e, now_ms, records)
            return False
        records.extend(write.state_changes)
        return True

    def _admit(
        self, write: AdmitBrokerWrite, now_ms: int, records: list[StateChange], depth: int
    ) -> bool:
        """Admit the incarnation unless a write of its admission failed (then it is processed
        again next tick); once admitted the machine counts it unfenced at once."""
        incarnation = (write.broker_id, write.incarnation_epoch)
        if incarnation in self._admission_failed:
            self._admission_failed.discard(incarnation)
            self._machine().retry_admission(*incarnation)
            return False
        epoch = self.controller_epoch or 0
        admitted = self.coordinator.admit_broker(
            *incarnation, controller_epoch=epoch, timeout_ms=self.timeout_ms
        )
        records.extend(write.state_changes)
        if admitted:  # (False: that incarnation is gone or replaced)
            self._apply(self._machine().on_admitted(*incarnation, now_ms), now_ms, records, depth)
        return True

    def _apply_cas(
        self, write: CasPartitionWrite, now_ms: int, records: list[StateChange], depth: int
    ) -> bool:
        tp = write.topic_partition
        result = self.coordinator.compare_and_set_partition_state(
            tp.topic,
            tp.partition,
            write.expected_partition_epoch,
            write.state,
            controller_epoch=self.controller_epoch or 0,
            timeout_ms=self.timeout_ms,
        )
        if result.ok:
            invariant(
                result.state is not None
                and result.state.partition_epoch == write.state.partition_epoch,
                f"{tp}: the store stamped {result.state}, the machine expected {write.state}",
            )
            records.extend(write.state_changes)
            return True
        if result.status is CasStatus.FENCED_CONTROLLER:
            self._lose(
                f"fenced writing {tp}: controller epoch {self.controller_epoch} is not the "
                f"active one ({result.active_controller_epoch})"
            )
            return False
        if depth < CONFLICT_RETRIES_MAX:
            retry = self._machine().on_cas_conflict(write, result.state, now_ms)
            self._apply(retry, now_ms, records, depth + 1)
        elif write.cause.admission is not None:
            self._admission_failed.add(write.cause.admission)
        return False

    def _refused(
        self, write: ControllerWrite, error: Exception, now_ms: int, records: list[StateChange]
    ) -> None:
        """The store refused a structural write: the view was wrong, so rebuild it from the
        store's own snapshot (the broker's image may be as wrong), then complete the request
        with the store's reason."""
        self._rebuild(self.coordinator.snapshot(timeout_ms=self.timeout_ms), now_ms)
        request = write.cause.request
        if request is None or not self.is_active:
            return
        code = getattr(error, "code", ErrorCode.UNKNOWN_SERVER_ERROR)
        output = self._machine().reject_request(request, code, str(error), now_ms)
        self._apply(output, now_ms, records)
