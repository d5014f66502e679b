"""The coordinator contract suite: every backend runs it, so all behave the same.

A backend author subclasses ``CoordinatorContract`` in a pytest file (the class name must start
with ``Test``) and provides a ``coordinator_factory`` fixture returning a callable that opens a
fresh, empty, isolated store (a new chroot, key prefix or database)::

    class TestSqliteCoordinator(CoordinatorContract):
        @pytest.fixture
        def coordinator_factory(self, tmp_path):
            return lambda: SqliteCoordinator.open(tmp_path / "meta.db")

Session tests need the backend to implement ``SessionFaults`` and are skipped otherwise.
A backend that can open a second handle on one store also subclasses ``SecondHandleContract``
(instead of ``CoordinatorContract``) and provides a ``peer_factory`` fixture that opens one
(often ``coordinator_factory`` itself, when it reopens one chroot, key prefix or file); its
tests check what the second handle sees.
Listener assertions wait up to ``settle_timeout_s`` for asynchronous backends; the in-memory
backend delivers before the writing call returns.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator, Mapping
from typing import Any, ClassVar

import attrs
import pytest

from replog.coord.contract import Coordinator, SessionFaults, same_state_ignoring_epoch
from replog.coord.errors import (
    BrokerIdInUseError,
    CoordinatorClosedError,
    CoordinatorUnavailableError,
    FencedControllerError,
    InvalidPartitionStateError,
    InvalidReplicaAssignmentError,
    MustResyncError,
    SessionExpiredError,
    TopicExistsError,
    UnknownTopicError,
)
from replog.coord.types import (
    CONTROLLER_TARGET,
    NO_LEADER,
    TOPIC_CONFIG_KEY_CHARS_MAX,
    TOPIC_CONFIG_VALUE_CHARS_MAX,
    TOPIC_CONFIGS_BYTES_MAX,
    TOPIC_CONFIGS_MAX,
    AdminRequestChanged,
    AdminRequestChangeReason,
    AlterPartition,
    AlterPartitionResult,
    BrokerChanged,
    BrokerChangeReason,
    BrokerInfo,
    CasStatus,
    ChangeBatch,
    CloseReplica,
    ControllerChanged,
    ControllerInfo,
    CreateTopic,
    DeleteTopic,
    IsrMember,
    LeaderRecoveryState,
    MetadataChange,
    MetadataSnapshot,
    PartitionChanged,
    PartitionState,
    SessionEvent,
    SessionState,
    StartReplica,
    TopicAssignment,
    TopicChanged,
    TopicChangeReason,
)
from replog.errors import ErrorCode, InvalidTopicError
from replog.topics import ZERO_TOPIC_ID, topic_uuid

__all__ = ["CoordinatorContract", "CoordinatorFactory", "SecondHandleContract", "replay"]

CoordinatorFactory = Callable[[], Coordinator]


def replay(snapshot: MetadataSnapshot, changes: tuple[MetadataChange, ...]) -> MetadataSnapshot:
    """Apply feed records to a snapshot, as a follower would (records at or after
    ``snapshot.seq``; earlier ones are already in it). The suite checks that replaying the
    whole feed onto an empty image gives the store's own snapshot."""
    brokers = dict(snapshot.brokers)
    topics = dict(snapshot.topics)
    partitions = dict(snapshot.partitions)
    controller, epoch, seq = snapshot.controller, snapshot.controller_epoch, snapshot.seq
    for change in changes:
        if change.seq < snapshot.seq:
            continue
        seq = change.seq + 1
        match change:
            case BrokerChanged(broker=None, broker_id=broker_id):
                brokers.pop(broker_id, None)
            case BrokerChanged(broker=BrokerInfo() as broker):
                brokers[broker.broker_id] = broker
            case TopicChanged(reason=TopicChangeReason.DELETED, assignment=a):
                topics.pop(a.topic, None)
                for p in range(a.partition_count):
                    partitions.pop((a.topic, p), None)
            case TopicChanged(assignment=a):
                topics[a.topic] = a
            case PartitionChanged(topic=t, partition=p, state=s):
                partitions[(t, p)] = s
                old = topics[t]
                replicas = list(old.replicas)
                replicas[p] = s.replicas
                topics[t] = attrs.evolve(old, replicas=replicas)
            case ControllerChanged(controller=c):
                controller = c
                epoch = max(epoch, c.controller_epoch if c is not None else 0)
            case _:
                pass
    return MetadataSnapshot(
        seq=seq,
        brokers=dict(sorted(brokers.items())),
        topics=dict(sorted(topics.items())),
        partitions=dict(sorted(partitions.items())),
        controller=controller,
        controller_epoch=epoch,
    )


EMPTY = MetadataSnapshot(
    seq=0, brokers={}, topics={}, partitions={}, controller=None, controller_epoch=0
)


class CoordinatorContract:
    """The contract tests; subclass with a ``coordinator_factory`` fixture (module docstring)."""

    session_timeout_ms: ClassVar[int] = 6_000
    settle_timeout_s: ClassVar[float] = 5.0

    # ---- fixtures and helpers ----

    @pytest.fixture
    def coord(self, coordinator_factory: CoordinatorFactory) -> Iterator[Coordinator]:
        """A fresh store, closed after the test."""
        coordinator = coordinator_factory()
        try:
            yield coordinator
        finally:
            coordinator.close()

    def faults(self, coord: Coordinator) -> SessionFaults:
        """The backend's fault hooks, or skip the test."""
        if not isinstance(coord, SessionFaults):
            pytest.skip(f"{type(coord).__name__} does not implement SessionFaults")
        return coord

    def eventually(self, predicate: Callable[[], bool], what: str) -> None:
        """Wait (bounded) until ``predicate()`` holds; listeners may be asynchronous."""
        deadline = time.monotonic() + self.settle_timeout_s
        while not predicate():
            if time.monotonic() > deadline:
                pytest.fail(f"timed out waiting for: {what}")
            time.sleep(0.005)

    def register(self, coord: Coordinator, broker_id: int, rack: str | None = None) -> BrokerInfo:
        """Register ``broker_id`` at 127.0.0.1:9000+id."""
        return coord.register_broker(
            broker_id,
            "127.0.0.1",
            9000 + broker_id,
            rack=rack,
            session_timeout_ms=self.session_timeout_ms,
        )

    def cluster(self, coord: Coordinator, size: int = 3) -> tuple[list[BrokerInfo], ControllerInfo]:
        """Register brokers 1..size and elect broker 1 controller."""
        brokers = [self.register(coord, b) for b in range(1, size + 1)]
        controller = coord.elect_controller(1, brokers[0].incarnation_epoch)
        assert controller.controller_id == 1
        return brokers, controller

    def all_changes(self, coord: Coordinator) -> list[MetadataChange]:
        """The whole retained feed."""
        changes: list[MetadataChange] = []
        seq = 0
        while True:
            batch = coord.changes_since(seq, max_changes=7)
            changes.extend(batch.changes)
            if not batch.changes:
                return changes
            seq = batch.next_seq

    # ---- brokers and incarnations ----

    def test_registered_broker_is_live_and_connected(self, coord: Coordinator) -> None:
        info = self.register(coord, 1, rack="r1")
        assert (info.broker_id, info.host, info.port, info.rack) == (1, "127.0.0.1", 9001, "r1")
        assert not info.fenced and not info.in_controlled_shutdown
        assert coord.live_brokers() == {1: info}
        assert coord.get_broker(1) == info
        assert coord.session_state(1) is SessionState.CONNECTED
        assert coord.heartbeat(1, info.incarnation_epoch) is SessionState.CONNECTED
        assert coord.session_state(2) is SessionState.LOST

    def test_clean_shutdown_flag_round_trips(self, coord: Coordinator) -> None:
        start = coord.snapshot().seq
        clean = self.register(coord, 1)
        unclean = coord.register_broker(
            2,
            "127.0.0.1",
            9002,
            session_timeout_ms=self.session_timeout_ms,
            clean_shutdown=False,
        )
        assert clean.clean_shutdown and not unclean.clean_shutdown
        assert coord.get_broker(1) == clean and coord.get_broker(2) == unclean
        assert coord.live_brokers() == {1: clean, 2: unclean}
        assert dict(coord.snapshot().brokers) == {1: clean, 2: unclean}
        registered = {
            c.broker_id: c.broker
            for c in coord.changes_since(start).changes
            if isinstance(c, BrokerChanged) and c.reason is BrokerChangeReason.REGISTERED
        }
        assert registered == {1: clean, 2: unclean}
        updated = coord.update_broker(2, unclean.incarnation_epoch, in_controlled_shutdown=True)
        assert not updated.clean_shutdown  # the flag belongs to the incarnation

    def test_admission_is_stored_once_and_fenced(self, coord: Coordinator) -> None:
        """A fenced or unclean registration waits for the controller to admit it; the
        admission is in the registration, the snapshot and the feed (once), unfences it, and
        only the active controller epoch may write it (KIP-966 handled exactly once)."""
        (_, clean, _), controller = self.cluster(coord)
        assert clean.admitted and not clean.awaiting_admission
        coord.unregister_broker(3, coord.live_brokers()[3].incarnation_epoch)
        unclean = coord.register_broker(
            3, "127.0.0.1", 9003, session_timeout_ms=self.session_timeout_ms,
            clean_shutdown=False, fenced=True,
        )  # fmt: skip
        assert unclean.fenced and unclean.unclean_restart_pending and unclean.awaiting_admission
        epoch = controller.controller_epoch
        with pytest.raises(FencedControllerError):
            coord.admit_broker(3, unclean.incarnation_epoch, controller_epoch=epoch + 1)
        assert coord.get_broker(3) == unclean
        start = coord.snapshot().seq
        assert coord.admit_broker(3, unclean.incarnation_epoch, controller_epoch=epoch)
        admitted = coord.get_broker(3)
        assert admitted is not None and admitted.admitted and not admitted.fenced
        assert not admitted.unclean_restart_pending and not admitted.clean_shutdown
        assert coord.snapshot().brokers[3] == admitted
        # idempotent: a second admission writes nothing; a clean registration needs none
        assert coord.admit_broker(3, unclean.incarnation_epoch, controller_epoch=epoch)
        assert coord.admit_broker(2, clean.incarnation_epoch, controller_epoch=epoch)
        updates = [
            c
            for c in coord.changes_since(start).changes
            if isinstance(c, BrokerChanged) and c.reason is BrokerChangeReason.UPDATED
        ]
        assert [u.broker for u in updates] == [admitted]
        # the admission survives the broker's own flag updates and belongs to the incarnation
        updated = coord.update_broker(3, unclean.incarnation_epoch, in_controlled_shutdown=True)
        assert updated.admitted
        assert not coord.admit_broker(3, unclean.incarnation_epoch - 1, controller_epoch=epoch)
        coord.unregister_broker(3, unclean.incarnation_epoch)
        assert not coord.admit_broker(3, unclean.incarnation_epoch, controller_epoch=epoch)
        again = coord.register_broker(
            3, "127.0.0.1", 9003, session_timeout_ms=self.session_timeout_ms, fenced=True
        )
        assert again.awaiting_admission and again.fenced and not again.unclean_restart_pending

    def test_incarnation_epoch_grows_on_restart(self, coord: Coordinator) -> None:
        first = self.register(coord, 1)
        self.register(coord, 2)
        assert coord.unregister_broker(1, first.incarnation_epoch)
        assert 1 not in coord.live_brokers()
        second = self.register(coord, 1)
        assert second.incarnation_epoch > first.incarnation_epoch
        with pytest.raises(SessionExpiredError) as e:
            coord.heartbeat(1, first.incarnation_epoch)
        assert e.value.current_incarnation_epoch == second.incarnation_epoch
        assert e.value.code is ErrorCode.STALE_BROKER_EPOCH

    def test_incarnation_epoch_grows_after_session_expiry(self, coord: Coordinator) -> None:
        faults = self.faults(coord)
        first = self.register(coord, 1)
        faults.expire_session(1)
        self.eventually(lambda: coord.session_state(1) is SessionState.LOST, "session LOST")
        second = self.register(coord, 1)
        assert second.incarnation_epoch > first.incarnation_epoch

    def test_live_broker_id_cannot_be_registered_twice(self, coord: Coordinator) -> None:
        first = self.register(coord, 1)
        with pytest.raises(BrokerIdInUseError) as e:
            self.register(coord, 1)
        assert e.value.holder_incarnation_epoch == first.incarnation_epoch
        assert coord.live_brokers() == {1: first}

    def test_stale_incarnation_is_refused_and_changes_nothing(self, coord: Coordinator) -> None:
        old = self.register(coord, 1)
        coord.unregister_broker(1, old.incarnation_epoch)
        new = self.register(coord, 1)
        assert not coord.unregister_broker(1, old.incarnation_epoch)
        with pytest.raises(SessionExpiredError):
            coord.update_broker(1, old.incarnation_epoch, fenced=True)
        with pytest.raises(SessionExpiredError):
            coord.elect_controller(1, old.incarnation_epoch)
        assert coord.live_brokers() == {1: new}

    def test_broker_flags_are_updated_and_published(self, coord: Coordinator) -> None:
        info = self.register(coord, 1)
        start = coord.snapshot().seq
        updated = coord.update_broker(1, info.incarnation_epoch, in_controlled_shutdown=True)
        assert updated.in_controlled_shutdown and not updated.fenced
        assert coord.get_broker(1) == updated
        unchanged = coord.update_broker(1, info.incarnation_epoch, in_controlled_shutdown=True)
        assert unchanged == updated
        changes = coord.changes_since(start).changes
        assert [c for c in changes if isinstance(c, BrokerChanged)] == [
            BrokerChanged(
                seq=changes[0].seq,
                reason=BrokerChangeReason.UPDATED,
                broker_id=1,
                incarnation_epoch=info.incarnation_epoch,
                broker=updated,
            )
        ]

    # ---- sessions ----

    def test_session_expiry_removes_broker_and_fires_watches(self, coord: Coordinator) -> None:
        faults = self.faults(coord)
        info = self.register(coord, 1)
        self.register(coord, 2)
        batches: list[ChangeBatch] = []
        coord.subscribe(batches.append)
        faults.expire_session(1)
        self.eventually(lambda: 1 not in coord.live_brokers(), "broker 1 gone")
        assert set(coord.live_brokers()) == {2}

        def expired_seen() -> bool:
            return any(
                isinstance(c, BrokerChanged)
                and c.reason is BrokerChangeReason.EXPIRED
                and c.broker_id == 1
                and c.incarnation_epoch == info.incarnation_epoch
                and c.broker is None
                for b in batches
                for c in b.changes
            )

        self.eventually(expired_seen, "BrokerChanged(EXPIRED) pushed to the subscriber")
        with pytest.raises(SessionExpiredError):
            coord.heartbeat(1, info.incarnation_epoch)

    def test_session_states_are_observable(self, coord: Coordinator) -> None:
        faults = self.faults(coord)
        events: list[SessionEvent] = []
        coord.add_session_listener(1, events.append)
        info = self.register(coord, 1)
        faults.suspend_session(1)
        self.eventually(lambda: coord.session_state(1) is SessionState.SUSPENDED, "SUSPENDED")
        assert 1 in coord.live_brokers()  # the store still holds the registration
        with pytest.raises(CoordinatorUnavailableError):
            coord.heartbeat(1, info.incarnation_epoch)
        faults.resume_session(1)
        self.eventually(lambda: coord.session_state(1) is SessionState.CONNECTED, "CONNECTED")
        faults.expire_session(1)
        self.eventually(lambda: coord.session_state(1) is SessionState.LOST, "LOST")
        want = [SessionState.CONNECTED, SessionState.SUSPENDED]
        want += [SessionState.CONNECTED, SessionState.LOST]
        self.eventually(lambda: [e.state for e in events] == want, f"events {want}")
        assert {e.incarnation_epoch for e in events} == {info.incarnation_epoch}

    def test_unregister_ends_the_session(self, coord: Coordinator) -> None:
        events: list[SessionEvent] = []
        coord.add_session_listener(1, events.append)
        info = self.register(coord, 1)
        assert coord.unregister_broker(1, info.incarnation_epoch)
        assert coord.session_state(1) is SessionState.LOST
        lost = SessionEvent(1, info.incarnation_epoch, SessionState.LOST)
        self.eventually(lambda: events[-1:] == [lost], "LOST event")

    # ---- controller election and fencing ----

    def test_first_controller_gets_epoch_one_and_loser_sees_winner(
        self, coord: Coordinator
    ) -> None:
        b1, b2 = self.register(coord, 1), self.register(coord, 2)
        assert coord.current_controller() is None
        won = coord.elect_controller(1, b1.incarnation_epoch)
        assert won == ControllerInfo(1, 1, b1.incarnation_epoch)
        assert coord.elect_controller(2, b2.incarnation_epoch) == won
        assert coord.current_controller() == won

    def test_controller_epoch_grows_with_each_election(self, coord: Coordinator) -> None:
        b1, b2 = self.register(coord, 1), self.register(coord, 2)
        first = coord.elect_controller(1, b1.incarnation_epoch)
        assert coord.resign_controller(1, first.controller_epoch)
        assert not coord.resign_controller(1, first.controller_epoch)
        assert coord.current_controller() is None
        second = coord.elect_controller(2, b2.incarnation_epoch)
        assert second.controller_id == 2
        assert second.controller_epoch == first.controller_epoch + 1
        assert coord.snapshot().controller_epoch == second.controller_epoch

    def test_resigned_controller_is_fenced_before_any_successor(self, coord: Coordinator) -> None:
        _, ctl = self.cluster(coord)
        coord.create_topic("t", [[1, 2, 3]], controller_epoch=ctl.controller_epoch)
        coord.resign_controller(1, ctl.controller_epoch)
        state = coord.get_partition_state("t", 0)
        assert state is not None
        result = coord.compare_and_set_partition_state(
            "t", 0, 0, attrs.evolve(state, isr=(1, 2)), controller_epoch=ctl.controller_epoch
        )
        assert result.status is CasStatus.FENCED_CONTROLLER
        assert result.active_controller_epoch is None
        assert coord.get_partition_state("t", 0) == state

    def test_zombie_controller_is_fenced_after_new_election(self, coord: Coordinator) -> None:
        faults = self.faults(coord)
        brokers, zombie = self.cluster(coord)
        coord.create_topic("t", [[1, 2, 3]], controller_epoch=zombie.controller_epoch)
        faults.expire_session(1)
        self.eventually(lambda: coord.current_controller() is None, "controller role vacated")
        new = coord.elect_controller(2, brokers[1].incarnation_epoch)
        assert new.controller_epoch > zombie.controller_epoch
        before = coord.snapshot()
        state = before.partitions[("t", 0)]
        proposal = attrs.evolve(state, leader=2, leader_epoch=1, isr=(2, 3))
        result = coord.compare_and_set_partition_state(
            "t", 0, 0, proposal, controller_epoch=zombie.controller_epoch
        )
        assert result.status is CasStatus.FENCED_CONTROLLER
        assert result.status.error_code is ErrorCode.STALE_CONTROLLER_EPOCH
        assert result.active_controller_epoch == new.controller_epoch
        epoch = zombie.controller_epoch
        queued = coord.submit_admin_request(CONTROLLER_TARGET, DeleteTopic(topic="t"))
        writes: list[Callable[[], object]] = [
            lambda: coord.create_topic("u", [[2]], controller_epoch=epoch),
            lambda: coord.delete_topic("t", controller_epoch=epoch),
            lambda: coord.add_partitions("t", [[2]], controller_epoch=epoch),
            lambda: coord.complete_admin_request(
                queued.request_id, outcome=ErrorCode.UNKNOWN_SERVER_ERROR, controller_epoch=epoch
            ),
        ]
        for write in writes:
            with pytest.raises(FencedControllerError) as e:
                write()
            assert e.value.active_controller_epoch == new.controller_epoch
        after = coord.snapshot()
        assert (after.topics, after.partitions) == (before.topics, before.partitions)
        assert coord.pending_admin_requests(CONTROLLER_TARGET) == [queued]
        assert self.completions(coord) == []
        ok = coord.compare_and_set_partition_state(
            "t", 0, 0, proposal, controller_epoch=new.controller_epoch
        )
        assert ok.ok

    def test_controller_role_ends_with_its_session(self, coord: Coordinator) -> None:
        faults = self.faults(coord)
        brokers, ctl = self.cluster(coord)
        faults.expire_session(1)
        self.eventually(lambda: coord.current_controller() is None, "controller role vacated")
        with pytest.raises(FencedControllerError):
            coord.create_topic("t", [[2]], controller_epoch=ctl.controller_epoch)
        again = coord.elect_controller(2, brokers[1].incarnation_epoch)
        assert again.controller_epoch == ctl.controller_epoch + 1

    def test_suspended_controller_cannot_write(self, coord: Coordinator) -> None:
        faults = self.faults(coord)
        _, ctl = self.cluster(coord)
        faults.suspend_session(1)
        self.eventually(lambda: coord.session_state(1) is SessionState.SUSPENDED, "SUSPENDED")
        with pytest.raises(CoordinatorUnavailableError):
            coord.create_topic("t", [[1]], controller_epoch=ctl.controller_epoch)
        assert coord.list_topics() == []
        queued = coord.submit_admin_request(CONTROLLER_TARGET, DeleteTopic(topic="t"))
        with pytest.raises(CoordinatorUnavailableError):
            coord.complete_admin_request(queued.request_id, controller_epoch=ctl.controller_epoch)
        assert coord.pending_admin_requests(CONTROLLER_TARGET) == [queued]
        faults.resume_session(1)
        self.eventually(lambda: coord.session_state(1) is SessionState.CONNECTED, "CONNECTED")
        coord.create_topic("t", [[1]], controller_epoch=ctl.controller_epoch)

    # ---- topics ----

    def test_create_topic_writes_assignment_and_states_atomically(self, coord: Coordinator) -> None:
        _, ctl = self.cluster(coord)
        start = coord.snapshot().seq
        created = coord.create_topic(
            "orders", [[1, 2], [2, 3], [3, 1]], controller_epoch=ctl.controller_epoch
        )
        assert created.topic == "orders" and created.partition_count == 3
        assert created.replicas == ((1, 2), (2, 3), (3, 1))
        assert coord.get_topic("orders") == created
        assert coord.list_topics() == ["orders"]
        for p, replicas in enumerate(created.replicas):
            assert coord.get_partition_state("orders", p) == PartitionState.initial(replicas)
        changes = coord.changes_since(start).changes
        assert len({c.seq for c in changes}) == 1, "one atomic write"
        assert changes[0] == TopicChanged(
            seq=changes[0].seq, reason=TopicChangeReason.CREATED, assignment=created
        )
        assert [(c.topic, c.partition) for c in changes[1:] if isinstance(c, PartitionChanged)] == [
            ("orders", 0),
            ("orders", 1),
            ("orders", 2),
        ]

    def test_create_topic_with_explicit_initial_states(self, coord: Coordinator) -> None:
        _, ctl = self.cluster(coord)
        state = PartitionState(replicas=(1, 2, 3), leader=2, leader_epoch=0, isr=(2, 3))
        coord.create_topic(
            "t", [[1, 2, 3]], controller_epoch=ctl.controller_epoch, initial_states=[state]
        )
        assert coord.get_partition_state("t", 0) == state
        with pytest.raises(InvalidPartitionStateError):
            coord.create_topic(
                "u", [[1, 2]], controller_epoch=ctl.controller_epoch, initial_states=[state]
            )
        assert coord.get_topic("u") is None

    def test_existing_or_colliding_topic_is_refused(self, coord: Coordinator) -> None:
        _, ctl = self.cluster(coord)
        original = coord.create_topic("a.b", [[1]], controller_epoch=ctl.controller_epoch)
        for name in ("a.b", "a_b"):
            with pytest.raises(TopicExistsError) as e:
                coord.create_topic(name, [[2], [3]], controller_epoch=ctl.controller_epoch)
            assert e.value.existing == "a.b"
            assert e.value.code is ErrorCode.TOPIC_ALREADY_EXISTS
        assert coord.get_topic("a.b") == original
        assert coord.list_topics() == ["a.b"]

    @pytest.mark.parametrize("name", ["", ".", "..", "a" * 250, "a b", "a/b", "ü", "a:b"])
    def test_invalid_topic_names_are_refused(self, coord: Coordinator, name: str) -> None:
        _, ctl = self.cluster(coord)
        with pytest.raises(InvalidTopicError):
            coord.create_topic(name, [[1]], controller_epoch=ctl.controller_epoch)
        with pytest.raises(InvalidTopicError):
            coord.submit_admin_request(
                CONTROLLER_TARGET, CreateTopic(topic=name, partition_count=1, replication_factor=1)
            )
        assert coord.list_topics() == []

    @pytest.mark.parametrize("name", ["a", "a" * 249, "A-b_c.9", "..."])
    def test_valid_topic_names_are_accepted(self, coord: Coordinator, name: str) -> None:
        _, ctl = self.cluster(coord)
        coord.create_topic(name, [[1]], controller_epoch=ctl.controller_epoch)
        assert coord.list_topics() == [name]

    @pytest.mark.parametrize("assignment", [[], [[]], [[1, 1]], [[1], [-2]]])
    def test_malformed_assignment_writes_nothing(
        self, coord: Coordinator, assignment: list[list[int]]
    ) -> None:
        _, ctl = self.cluster(coord)
        before = coord.snapshot()
        with pytest.raises(InvalidReplicaAssignmentError):
            coord.create_topic("t", assignment, controller_epoch=ctl.controller_epoch)
        assert coord.snapshot() == before

    def test_delete_topic_removes_everything_atomically(self, coord: Coordinator) -> None:
        _, ctl = self.cluster(coord)
        created = coord.create_topic("t", [[1], [2]], controller_epoch=ctl.controller_epoch)
        start = coord.snapshot().seq
        assert coord.delete_topic("t", controller_epoch=ctl.controller_epoch) == created
        assert coord.get_topic("t") is None and coord.list_topics() == []
        assert coord.get_partition_state("t", 0) is None
        assert coord.get_partition_state("t", 1) is None
        changes = coord.changes_since(start).changes
        assert changes == (
            TopicChanged(seq=changes[0].seq, reason=TopicChangeReason.DELETED, assignment=created),
        )
        with pytest.raises(UnknownTopicError):
            coord.delete_topic("t", controller_epoch=ctl.controller_epoch)

    def test_recreated_topic_has_a_new_topic_id(self, coord: Coordinator) -> None:
        _, ctl = self.cluster(coord)
        first = coord.create_topic("t", [[1]], controller_epoch=ctl.controller_epoch)
        coord.delete_topic("t", controller_epoch=ctl.controller_epoch)
        second = coord.create_topic("t", [[2]], controller_epoch=ctl.controller_epoch)
        assert second.topic_id != first.topic_id
        assert coord.get_partition_state("t", 0) == PartitionState.initial([2])
        # KIP-516: a topic ID is a UUID (never the zero one), kept as its hex string
        for topic_id in (first.topic_id, second.topic_id):
            assert topic_uuid(topic_id) != ZERO_TOPIC_ID and topic_uuid(topic_id).hex == topic_id

    def test_add_partitions_appends_the_next_numbers(self, coord: Coordinator) -> None:
        _, ctl = self.cluster(coord)
        created = coord.create_topic("t", [[1, 2]], controller_epoch=ctl.controller_epoch)
        grown = coord.add_partitions("t", [[2, 3], [3, 1]], controller_epoch=ctl.controller_epoch)
        assert grown.topic_id == created.topic_id
        assert grown.replicas == ((1, 2), (2, 3), (3, 1))
        assert coord.get_partition_state("t", 2) == PartitionState.initial([3, 1])
        with pytest.raises(UnknownTopicError):
            coord.add_partitions("nope", [[1]], controller_epoch=ctl.controller_epoch)
        with pytest.raises(InvalidReplicaAssignmentError):
            coord.add_partitions("t", [], controller_epoch=ctl.controller_epoch)
        assert coord.get_topic("t") == grown

    # ---- topic configs ----

    #: given in no particular order; a non-ASCII value checks the stored encoding
    CONFIGS: ClassVar[Mapping[str, str]] = {
        "retention.ms": "604800000",
        "cleanup.policy": "compact",
        "min.insync.replicas": "2",
        "replog.note": 'héllo ✓ "quoted"\n',
    }

    def _sorted_configs(self) -> tuple[tuple[str, str], ...]:
        return tuple(sorted(self.CONFIGS.items()))

    def test_topic_configs_are_stored_with_the_topic(self, coord: Coordinator) -> None:
        _, ctl = self.cluster(coord)
        start = coord.snapshot().seq
        created = coord.create_topic(
            "t", [[1, 2], [2, 3]], controller_epoch=ctl.controller_epoch, configs=self.CONFIGS
        )
        assert created.configs == self._sorted_configs()
        assert created.config_map == dict(self.CONFIGS)
        assert coord.get_topic("t") == created
        assert coord.snapshot().topics == {"t": created}
        changes = coord.changes_since(start).changes
        assert changes[0] == TopicChanged(
            seq=changes[0].seq, reason=TopicChangeReason.CREATED, assignment=created
        )
        state = coord.get_partition_state("t", 1)
        assert state is not None
        moved = coord.compare_and_set_partition_state(
            "t", 1, 0, attrs.evolve(state, isr=(2,)), controller_epoch=ctl.controller_epoch
        )
        assert moved.ok
        assert coord.get_topic("t") == created  # partition changes leave the configs be

    def test_add_partitions_keeps_topic_configs(self, coord: Coordinator) -> None:
        _, ctl = self.cluster(coord)
        created = coord.create_topic(
            "t", [[1, 2]], controller_epoch=ctl.controller_epoch, configs=self.CONFIGS
        )
        start = coord.snapshot().seq
        grown = coord.add_partitions("t", [[2, 3]], controller_epoch=ctl.controller_epoch)
        assert grown == attrs.evolve(created, replicas=((1, 2), (2, 3)))
        assert grown.configs == self._sorted_configs()
        assert coord.get_topic("t") == grown
        assert coord.snapshot().topics == {"t": grown}
        added = [c for c in coord.changes_since(start).changes if isinstance(c, TopicChanged)]
        assert [(c.reason, c.assignment) for c in added] == [
            (TopicChangeReason.PARTITIONS_ADDED, grown)
        ]

    def test_delete_topic_reports_its_configs(self, coord: Coordinator) -> None:
        _, ctl = self.cluster(coord)
        created = coord.create_topic(
            "t", [[1]], controller_epoch=ctl.controller_epoch, configs=self.CONFIGS
        )
        start = coord.snapshot().seq
        removed = coord.delete_topic("t", controller_epoch=ctl.controller_epoch)
        assert removed == created and removed.configs == self._sorted_configs()
        changes = coord.changes_since(start).changes
        assert changes == (
            TopicChanged(seq=changes[0].seq, reason=TopicChangeReason.DELETED, assignment=created),
        )
        again = coord.create_topic("t", [[1]], controller_epoch=ctl.controller_epoch)
        assert again.configs == () and coord.get_topic("t") == again  # nothing left behind

    @pytest.mark.parametrize("configs", [None, {}])
    def test_topic_without_configs_has_none(
        self, coord: Coordinator, configs: dict[str, str] | None
    ) -> None:
        _, ctl = self.cluster(coord)
        start = coord.snapshot().seq
        created = coord.create_topic(
            "t", [[1]], controller_epoch=ctl.controller_epoch, configs=configs
        )
        assert created.configs == () and created.config_map == {}
        assert coord.get_topic("t") == created
        assert coord.snapshot().topics["t"].configs == ()
        changes = coord.changes_since(start).changes
        assert isinstance(changes[0], TopicChanged) and changes[0].assignment == created
        grown = coord.add_partitions("t", [[2]], controller_epoch=ctl.controller_epoch)
        assert grown.configs == ()

    def test_topic_configs_at_their_limits(self, coord: Coordinator) -> None:
        _, ctl = self.cluster(coord)
        # As many and as long keys as allowed, values filling the stored-size budget (JSON:
        # quotes, colon and comma cost 6 bytes per pair, plus the braces).
        value_chars = (TOPIC_CONFIGS_BYTES_MAX - 2) // TOPIC_CONFIGS_MAX
        value_chars -= TOPIC_CONFIG_KEY_CHARS_MAX + 6
        biggest = {
            f"{i:02d}".ljust(TOPIC_CONFIG_KEY_CHARS_MAX, "k"): chr(ord("a") + i % 26) * value_chars
            for i in range(TOPIC_CONFIGS_MAX)
        }
        created = coord.create_topic(
            "t", [[1]], controller_epoch=ctl.controller_epoch, configs=biggest
        )
        assert created.config_map == biggest
        assert coord.get_topic("t") == created
        grown = coord.add_partitions("t", [[2]], controller_epoch=ctl.controller_epoch)
        assert grown.config_map == biggest
        assert coord.delete_topic("t", controller_epoch=ctl.controller_epoch) == grown
        reasons = [c.reason for c in self.all_changes(coord) if isinstance(c, TopicChanged)]
        assert reasons == [
            TopicChangeReason.CREATED,
            TopicChangeReason.PARTITIONS_ADDED,
            TopicChangeReason.DELETED,
        ]

    @pytest.mark.parametrize(
        "configs",
        [
            {"retention.ms": 1000},
            {1: "x"},
            {f"k{i}": "v" for i in range(TOPIC_CONFIGS_MAX + 1)},
            {"": "v"},
            {"k" * (TOPIC_CONFIG_KEY_CHARS_MAX + 1): "v"},
            {"k": "v" * (TOPIC_CONFIG_VALUE_CHARS_MAX + 1)},
            # within the count and length limits, but escaped non-ASCII past the stored size
            {f"k{i}": "\u2713" * TOPIC_CONFIG_VALUE_CHARS_MAX for i in range(TOPIC_CONFIGS_MAX)},
        ],
        ids=[
            "int-value",
            "int-key",
            "too-many",
            "empty-key",
            "long-key",
            "long-value",
            "too-big-stored",
        ],
    )
    def test_bad_topic_configs_are_refused_and_write_nothing(
        self, coord: Coordinator, configs: Any
    ) -> None:
        _, ctl = self.cluster(coord)
        before = coord.snapshot()
        with pytest.raises(ValueError):
            coord.create_topic("t", [[1]], controller_epoch=ctl.controller_epoch, configs=configs)
        assert coord.snapshot() == before
        assert coord.get_topic("t") is None and coord.list_topics() == []
        assert coord.changes_since(before.seq).changes == ()

    # ---- partition state CAS ----

    def _topic(self, coord: Coordinator) -> tuple[ControllerInfo, PartitionState]:
        _, ctl = self.cluster(coord)
        coord.create_topic("t", [[1, 2, 3]], controller_epoch=ctl.controller_epoch)
        state = coord.get_partition_state("t", 0)
        assert state is not None
        return ctl, state

    def test_cas_success_bumps_the_partition_epoch(self, coord: Coordinator) -> None:
        ctl, state = self._topic(coord)
        shrunk = attrs.evolve(state, isr=(1, 2), partition_epoch=99)  # the store stamps it
        result = coord.compare_and_set_partition_state(
            "t", 0, 0, shrunk, controller_epoch=ctl.controller_epoch
        )
        assert result.ok and result.status.error_code is ErrorCode.NONE
        assert result.state == attrs.evolve(shrunk, partition_epoch=1)
        assert coord.get_partition_state("t", 0) == result.state
        assert result.seq is not None
        assert coord.changes_since(result.seq).changes == (
            PartitionChanged(seq=result.seq, topic="t", partition=0, state=result.state),
        )

    def test_cas_with_a_stale_epoch_changes_nothing(self, coord: Coordinator) -> None:
        ctl, state = self._topic(coord)
        first = coord.compare_and_set_partition_state(
            "t", 0, 0, attrs.evolve(state, isr=(1, 2)), controller_epoch=ctl.controller_epoch
        )
        stale = coord.compare_and_set_partition_state(
            "t", 0, 0, attrs.evolve(state, isr=(1, 3)), controller_epoch=ctl.controller_epoch
        )
        assert stale.status is CasStatus.VERSION_MISMATCH
        assert stale.status.error_code is ErrorCode.INVALID_UPDATE_VERSION
        assert stale.state == first.state == coord.get_partition_state("t", 0)

    def test_cas_on_an_unknown_partition(self, coord: Coordinator) -> None:
        ctl, state = self._topic(coord)
        for topic, partition in (("t", 1), ("nope", 0)):
            result = coord.compare_and_set_partition_state(
                topic, partition, 0, state, controller_epoch=ctl.controller_epoch
            )
            assert result.status is CasStatus.UNKNOWN_PARTITION

    def test_cas_refuses_malformed_states(self, coord: Coordinator) -> None:
        ctl, state = self._topic(coord)
        bad = [
            attrs.evolve(state, isr=(2, 3)),  # leader 1 outside the ISR
            attrs.evolve(state, isr=(1, 4)),  # ISR outside the replicas
            attrs.evolve(state, leader=2, isr=(1, 2)),  # new leader without an epoch bump
            attrs.evolve(state, elr=(1,)),  # ELR overlaps the ISR
            attrs.evolve(state, replicas=(1, 1, 2), isr=(1,)),
        ]
        for proposal in bad:
            with pytest.raises(InvalidPartitionStateError):
                coord.compare_and_set_partition_state(
                    "t", 0, 0, proposal, controller_epoch=ctl.controller_epoch
                )
        assert coord.get_partition_state("t", 0) == state
        moved = coord.compare_and_set_partition_state(
            "t",
            0,
            0,
            attrs.evolve(state, leader=2, leader_epoch=3, isr=(2,)),
            controller_epoch=ctl.controller_epoch,
        )
        assert moved.ok
        with pytest.raises(InvalidPartitionStateError):  # leader epoch going back
            coord.compare_and_set_partition_state(
                "t",
                0,
                1,
                attrs.evolve(state, leader=NO_LEADER, leader_epoch=2, isr=(2,)),
                controller_epoch=ctl.controller_epoch,
            )

    def test_two_writers_lose_no_update(self, coord: Coordinator) -> None:
        ctl, _ = self._topic(coord)
        rounds = 25
        mismatches = [0, 0]

        def writer(index: int) -> None:
            done = 0
            while done < rounds:
                current = coord.get_partition_state("t", 0)
                assert current is not None
                bumped = attrs.evolve(current, leader_epoch=current.leader_epoch + 1)
                result = coord.compare_and_set_partition_state(
                    "t", 0, current.partition_epoch, bumped, controller_epoch=ctl.controller_epoch
                )
                if result.ok:
                    done += 1
                else:
                    assert result.status is CasStatus.VERSION_MISMATCH
                    mismatches[index] += 1

        threads = [threading.Thread(target=writer, args=(i,)) for i in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=60)
        final = coord.get_partition_state("t", 0)
        assert final is not None
        assert (final.leader_epoch, final.partition_epoch) == (2 * rounds, 2 * rounds)

    def _race(self, coord: Coordinator, ctl: ControllerInfo, current: PartitionState) -> list[str]:
        """Two threads CAS different ISRs from the same state at the same moment."""
        barrier = threading.Barrier(2, timeout=30)
        statuses: list[str] = []

        def write(isr: tuple[int, ...]) -> None:
            proposal = attrs.evolve(current, isr=isr)
            barrier.wait()
            result = coord.compare_and_set_partition_state(
                "t", 0, current.partition_epoch, proposal, controller_epoch=ctl.controller_epoch
            )
            statuses.append(result.status.value)

        threads = [threading.Thread(target=write, args=(isr,)) for isr in ((1, 2), (1, 3))]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=60)
        return sorted(statuses)

    def test_same_expected_epoch_has_exactly_one_winner(self, coord: Coordinator) -> None:
        ctl, current = self._topic(coord)
        for attempt in range(10):
            assert current.partition_epoch == attempt
            assert self._race(coord, ctl, current) == ["ok", "version_mismatch"]
            latest = coord.get_partition_state("t", 0)
            assert latest is not None
            current = latest

    def test_retry_after_unknown_outcome_recognises_applied_write(self, coord: Coordinator) -> None:
        ctl, state = self._topic(coord)
        proposal = attrs.evolve(state, isr=(1, 2))
        coord.compare_and_set_partition_state(
            "t", 0, 0, proposal, controller_epoch=ctl.controller_epoch
        )
        retry = coord.compare_and_set_partition_state(
            "t", 0, 0, proposal, controller_epoch=ctl.controller_epoch
        )
        assert retry.status is CasStatus.VERSION_MISMATCH and retry.state is not None
        assert same_state_ignoring_epoch(retry.state, proposal)

    # ---- the change feed ----

    def _busy_store(self, coord: Coordinator) -> ControllerInfo:
        _, ctl = self.cluster(coord)
        configs = {"retention.ms": "1000", "cleanup.policy": "delete"}
        coord.create_topic(
            "a", [[1, 2], [2, 3]], controller_epoch=ctl.controller_epoch, configs=configs
        )
        coord.create_topic("b", [[3]], controller_epoch=ctl.controller_epoch)
        coord.add_partitions("a", [[3, 1]], controller_epoch=ctl.controller_epoch)
        state = coord.get_partition_state("a", 1)
        assert state is not None
        coord.compare_and_set_partition_state(
            "a", 1, 0, attrs.evolve(state, isr=(2,)), controller_epoch=ctl.controller_epoch
        )
        coord.delete_topic("b", controller_epoch=ctl.controller_epoch)
        coord.submit_admin_request(2, StartReplica(topic="a", partition=0))
        return ctl

    def test_feed_is_ordered_and_never_splits_a_write(self, coord: Coordinator) -> None:
        self._busy_store(coord)
        changes = self.all_changes(coord)
        seqs = [c.seq for c in changes]
        assert seqs == sorted(seqs)
        whole = coord.changes_since(0, max_changes=10_000).changes
        assert tuple(changes) == whole
        seq = 0
        while True:
            batch = coord.changes_since(seq, max_changes=1)
            if not batch.changes:
                break
            group = [c for c in whole if c.seq == batch.changes[0].seq]
            assert list(batch.changes) == group
            seq = batch.next_seq
        assert coord.changes_since(seq).next_seq == seq

    def test_replaying_the_feed_rebuilds_the_snapshot(self, coord: Coordinator) -> None:
        self._busy_store(coord)
        snap = coord.snapshot()
        rebuilt = replay(EMPTY, tuple(self.all_changes(coord)))
        assert (rebuilt.brokers, rebuilt.topics, rebuilt.partitions) == (
            snap.brokers,
            snap.topics,
            snap.partitions,
        )
        assert (rebuilt.controller, rebuilt.controller_epoch) == (
            snap.controller,
            snap.controller_epoch,
        )
        assert rebuilt.seq <= snap.seq

    def test_catch_up_after_a_gap_goes_through_a_snapshot(self, coord: Coordinator) -> None:
        ctl = self._busy_store(coord)
        follower_seq = 1
        oldest = coord.trim_history(coord.snapshot().seq)
        coord.create_topic("c", [[1]], controller_epoch=ctl.controller_epoch)
        with pytest.raises(MustResyncError) as e:
            coord.changes_since(follower_seq)
        assert e.value.oldest_seq == oldest > follower_seq
        snap = coord.snapshot()
        caught_up = replay(snap, coord.changes_since(snap.seq).changes)
        assert caught_up.topics == coord.snapshot().topics
        assert "c" in snap.topics

    def test_subscriber_gets_batches_in_order(self, coord: Coordinator) -> None:
        batches: list[ChangeBatch] = []
        start = coord.snapshot().seq
        sub = coord.subscribe(batches.append, from_seq=start)
        self._busy_store(coord)
        expected = tuple(coord.changes_since(start, max_changes=10_000).changes)

        def pushed() -> tuple[MetadataChange, ...]:
            return tuple(c for b in batches for c in b.changes)

        self.eventually(lambda: pushed() == expected, "every change pushed once, in order")
        assert not any(b.resync_required for b in batches)
        sub.close()
        sub.close()
        self.register(coord, 7)
        time.sleep(0.05)
        assert pushed() == expected

    def test_subscriber_from_trimmed_history_is_told_to_resync(self, coord: Coordinator) -> None:
        self._busy_store(coord)
        coord.trim_history(coord.snapshot().seq)
        batches: list[ChangeBatch] = []
        coord.subscribe(batches.append, from_seq=1)
        self.eventually(lambda: bool(batches), "a batch pushed")
        assert batches[0].resync_required and batches[0].changes == ()

    # ---- admin requests ----

    def test_admin_requests_wait_for_a_target_that_is_down(self, coord: Coordinator) -> None:
        close = CloseReplica(topic="t", partition=0, leader_epoch=4)
        queued = coord.submit_admin_request(3, close)
        delete = coord.submit_admin_request(CONTROLLER_TARGET, DeleteTopic(topic="t"))
        assert queued.request_id < delete.request_id
        assert (queued.target, queued.payload, queued.kind) == (3, close, close.kind)
        info = self.register(coord, 3)
        coord.unregister_broker(3, info.incarnation_epoch)
        self.register(coord, 3)
        assert coord.pending_admin_requests(3) == [queued]
        assert coord.pending_admin_requests(CONTROLLER_TARGET) == [delete]
        assert coord.complete_admin_request(queued.request_id, message="deleted")
        assert not coord.complete_admin_request(queued.request_id)
        assert coord.pending_admin_requests(3) == []
        assert coord.pending_admin_requests(CONTROLLER_TARGET) == [delete]
        done = [
            c
            for c in self.all_changes(coord)
            if isinstance(c, AdminRequestChanged) and c.reason is AdminRequestChangeReason.COMPLETED
        ]
        assert [(c.request, c.outcome, c.message) for c in done] == [
            (queued, ErrorCode.NONE, "deleted")
        ]

    def completions(self, coord: Coordinator) -> list[AdminRequestChanged]:
        """The feed's AdminRequestChanged(COMPLETED) records."""
        return [
            c
            for c in self.all_changes(coord)
            if isinstance(c, AdminRequestChanged) and c.reason is AdminRequestChangeReason.COMPLETED
        ]

    def test_controller_completes_admin_requests_with_its_epoch(self, coord: Coordinator) -> None:
        _, ctl = self.cluster(coord)
        queued = coord.submit_admin_request(CONTROLLER_TARGET, DeleteTopic(topic="t"))
        epoch = ctl.controller_epoch
        assert coord.complete_admin_request(
            queued.request_id,
            outcome=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
            message="unknown topic",
            controller_epoch=epoch,
        )
        assert not coord.complete_admin_request(queued.request_id, controller_epoch=epoch)
        assert coord.pending_admin_requests(CONTROLLER_TARGET) == []
        assert [(c.request, c.outcome, c.message) for c in self.completions(coord)] == [
            (queued, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "unknown topic")
        ]

    def test_alter_partition_completes_with_its_structured_result(self, coord: Coordinator) -> None:
        """An AlterPartition is queued as the leader made it and completed with the controller's
        ``AlterPartitionResult``, which the feed hands back equal (no text in between)."""
        brokers, ctl = self.cluster(coord)
        proposal = AlterPartition(
            topic="t",
            partition=0,
            leader_id=1,
            leader_epoch=3,
            partition_epoch=8,
            new_isr=(IsrMember(1, brokers[0].incarnation_epoch), IsrMember(2)),
            leader_broker_epoch=brokers[0].incarnation_epoch,
            leader_recovery_state=LeaderRecoveryState.RECOVERING,
        )
        queued = coord.submit_admin_request(CONTROLLER_TARGET, proposal)
        other = coord.submit_admin_request(CONTROLLER_TARGET, DeleteTopic(topic="t"))
        assert coord.pending_admin_requests(CONTROLLER_TARGET) == [queued, other]
        assert queued.payload == proposal
        result = AlterPartitionResult(
            ErrorCode.INELIGIBLE_REPLICA, leader=1, leader_epoch=3, partition_epoch=9, isr=(1, 3)
        )
        assert coord.complete_admin_request(
            queued.request_id,
            outcome=ErrorCode.INELIGIBLE_REPLICA,
            result=result,
            controller_epoch=ctl.controller_epoch,
        )
        assert coord.complete_admin_request(other.request_id, controller_epoch=ctl.controller_epoch)
        done = self.completions(coord)
        assert [(c.request, c.outcome, c.message, c.result) for c in done] == [
            (queued, ErrorCode.INELIGIBLE_REPLICA, "", result),
            (other, ErrorCode.NONE, "", None),
        ]
        assert isinstance(done[0].result, AlterPartitionResult)

    def test_stale_controller_cannot_complete_admin_requests(self, coord: Coordinator) -> None:
        brokers, old = self.cluster(coord)
        queued = coord.submit_admin_request(CONTROLLER_TARGET, DeleteTopic(topic="t"))
        assert coord.resign_controller(1, old.controller_epoch)
        vacant = coord.snapshot()
        with pytest.raises(FencedControllerError) as e:  # fenced before any successor
            coord.complete_admin_request(queued.request_id, controller_epoch=old.controller_epoch)
        assert e.value.active_controller_epoch is None
        assert coord.snapshot().seq == vacant.seq
        new = coord.elect_controller(2, brokers[1].incarnation_epoch)
        assert new.controller_epoch > old.controller_epoch
        before = coord.snapshot()
        attempts: list[Callable[[], object]] = [
            lambda: coord.complete_admin_request(
                queued.request_id,
                outcome=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                message="stale view",
                controller_epoch=old.controller_epoch,
            ),
            # checked first: also for a request that is not queued
            lambda: coord.complete_admin_request(
                queued.request_id + 1_000, controller_epoch=old.controller_epoch
            ),
            lambda: coord.complete_admin_request(
                queued.request_id, controller_epoch=new.controller_epoch + 1
            ),
        ]
        for attempt in attempts:
            with pytest.raises(FencedControllerError) as e:
                attempt()
            assert e.value.active_controller_epoch == new.controller_epoch
        assert coord.pending_admin_requests(CONTROLLER_TARGET) == [queued]
        assert coord.snapshot().seq == before.seq
        assert coord.changes_since(before.seq).changes == ()
        assert self.completions(coord) == []
        assert coord.complete_admin_request(
            queued.request_id, message="done", controller_epoch=new.controller_epoch
        )
        assert [(c.request, c.message) for c in self.completions(coord)] == [(queued, "done")]

    def test_admin_completion_without_an_epoch_is_not_fenced(self, coord: Coordinator) -> None:
        _, ctl = self.cluster(coord)
        to_broker = coord.submit_admin_request(2, StartReplica(topic="t", partition=0))
        to_controller = coord.submit_admin_request(CONTROLLER_TARGET, DeleteTopic(topic="t"))
        assert coord.resign_controller(1, ctl.controller_epoch)  # no controller at all
        assert coord.complete_admin_request(to_broker.request_id, message="started")
        assert coord.complete_admin_request(to_controller.request_id)
        assert coord.pending_admin_requests(2) == []
        assert coord.pending_admin_requests(CONTROLLER_TARGET) == []
        assert [c.request for c in self.completions(coord)] == [to_broker, to_controller]

    def test_admin_queue_is_fifo_per_target(self, coord: Coordinator) -> None:
        made = [
            coord.submit_admin_request(t, StartReplica(topic="t", partition=p))
            for p in range(3)
            for t in (1, 2)
        ]
        assert coord.pending_admin_requests(1) == [r for r in made if r.target == 1]
        assert coord.pending_admin_requests(2) == [r for r in made if r.target == 2]
        with pytest.raises(ValueError):
            coord.submit_admin_request(-5, StartReplica(topic="t", partition=0))

    # ---- lifecycle ----

    def test_closed_coordinator_refuses_calls(
        self, coordinator_factory: CoordinatorFactory
    ) -> None:
        coord = coordinator_factory()
        coord.close()
        coord.close()
        with pytest.raises(CoordinatorClosedError):
            coord.live_brokers()


class SecondHandleContract(CoordinatorContract):
    """The contract plus what a second handle on the same store sees; subclass it with a
    ``peer_factory`` fixture as well (module docstring)."""

    @pytest.fixture
    def peer(self, coord: Coordinator, peer_factory: CoordinatorFactory) -> Iterator[Any]:
        """A second handle on ``coord``'s store (after ``coord``), closed after the test."""
        other = peer_factory()
        try:
            yield other
        finally:
            other.close()

    def test_topic_configs_are_seen_by_another_handle(
        self, coord: Coordinator, peer: Coordinator
    ) -> None:
        _, ctl = self.cluster(coord)
        start = peer.snapshot().seq
        pushed: list[ChangeBatch] = []
        peer.subscribe(pushed.append, from_seq=start)
        created = coord.create_topic(
            "t", [[1], [2]], controller_epoch=ctl.controller_epoch, configs=self.CONFIGS
        )
        assert created.configs == self._sorted_configs()
        assert peer.get_topic("t") == created
        assert peer.snapshot().topics == {"t": created}
        topic_changes = [
            c for c in peer.changes_since(start).changes if isinstance(c, TopicChanged)
        ]
        assert [(c.reason, c.assignment) for c in topic_changes] == [
            (TopicChangeReason.CREATED, created)
        ]

        def pushed_created() -> list[TopicAssignment]:
            return [c.assignment for b in pushed for c in b.changes if isinstance(c, TopicChanged)]

        self.eventually(lambda: pushed_created() == [created], "TopicChanged pushed to the peer")

    def test_closing_a_handle_leaves_the_other_working(
        self, coord: Coordinator, peer: Coordinator
    ) -> None:
        """Closing one handle ends what was made through it, never the store another handle
        uses: the peer's session, controller role, writes and feed go on."""
        info = self.register(peer, 1)
        controller = peer.elect_controller(1, info.incarnation_epoch)
        pushed: list[ChangeBatch] = []
        peer.subscribe(pushed.append, from_seq=peer.snapshot().seq)
        mine = self.register(coord, 2)
        coord.subscribe(lambda batch: None)
        coord.close()
        with pytest.raises(CoordinatorClosedError):
            coord.snapshot()
        assert peer.heartbeat(1, info.incarnation_epoch) is SessionState.CONNECTED
        assert peer.current_controller() == controller
        created = peer.create_topic("t", [[1]], controller_epoch=controller.controller_epoch)
        assert peer.get_topic("t") == created

        def pushed_created() -> list[TopicAssignment]:
            return [c.assignment for b in pushed for c in b.changes if isinstance(c, TopicChanged)]

        self.eventually(lambda: pushed_created() == [created], "the peer's feed goes on")
        # the closed handle's own session ends; the peer's does not
        self.eventually(lambda: peer.get_broker(2) is None, "the closed handle's session ends")
        assert mine.broker_id == 2 and peer.get_broker(1) == info
