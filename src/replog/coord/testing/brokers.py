"""The coordinator contract suite (``replog.coord.testing``): brokers, incarnations and sessions,
controller election and fencing."""

from __future__ import annotations

from collections.abc import Callable

import attrs
import pytest

from replog.coord.contract import Coordinator
from replog.coord.errors import (
    BrokerIdInUseError,
    CoordinatorUnavailableError,
    FencedControllerError,
    SessionExpiredError,
)
from replog.coord.testing.base import ContractBase
from replog.errors import ErrorCode
from replog.metadata.types import (
    CONTROLLER_TARGET,
    BrokerChanged,
    BrokerChangeReason,
    CasStatus,
    ChangeBatch,
    ControllerInfo,
    DeleteTopic,
    SessionEvent,
    SessionState,
)

__all__ = ["BrokerContract"]


class BrokerContract(ContractBase):
    """Brokers, incarnations and sessions, controller election and fencing."""

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
