"""The coordinator contract suite (``replog.coord.testing``): the admin request queue, producer-id
blocks and a closed handle."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from replog.coord.contract import Coordinator
from replog.coord.errors import (
    CoordinatorClosedError,
    FencedControllerError,
)
from replog.coord.testing.base import ContractBase, CoordinatorFactory
from replog.errors import ErrorCode
from replog.metadata.types import (
    CONTROLLER_TARGET,
    PRODUCER_ID_BLOCK_SIZE,
    AdminRequestChanged,
    AdminRequestChangeReason,
    AlterPartition,
    AlterPartitionResult,
    CloseReplica,
    DeleteTopic,
    IsrMember,
    LeaderRecoveryState,
    ProducerIdBlock,
    StartReplica,
)

__all__ = ["AdminQueueContract"]


class AdminQueueContract(ContractBase):
    """The admin request queue, producer-id blocks and a closed handle."""

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

    # ---- producer ids ----

    def test_producer_id_blocks_never_overlap(self, coord: Coordinator) -> None:
        _, ctl = self.cluster(coord)
        epoch = ctl.controller_epoch
        assert coord.producer_id_block(2) is None
        before = coord.snapshot().seq
        first = coord.allocate_producer_ids(2, 7, controller_epoch=epoch)
        assert first == ProducerIdBlock(
            broker_id=2, broker_epoch=7, first_id=0, size=PRODUCER_ID_BLOCK_SIZE
        )
        other = coord.allocate_producer_ids(3, 8, count=10, controller_epoch=epoch)
        again = coord.allocate_producer_ids(2, 9, count=5, controller_epoch=epoch)
        assert (other.first_id, other.size) == (first.last_id + 1, 10)
        assert (again.first_id, again.broker_epoch) == (other.last_id + 1, 9)
        assert coord.producer_id_block(2) == again
        assert coord.producer_id_block(3) == other
        assert coord.snapshot().seq == before  # no feed record
        with pytest.raises(ValueError):
            coord.allocate_producer_ids(2, 9, count=0, controller_epoch=epoch)
        assert coord.producer_id_block(2) == again

    def test_producer_id_allocation_is_fenced_and_outlives_its_controller(
        self, coord: Coordinator
    ) -> None:
        brokers, old = self.cluster(coord)
        block = coord.allocate_producer_ids(1, 1, count=3, controller_epoch=old.controller_epoch)
        assert coord.resign_controller(1, old.controller_epoch)
        with pytest.raises(FencedControllerError):  # before any successor
            coord.allocate_producer_ids(2, 1, controller_epoch=old.controller_epoch)
        new = coord.elect_controller(2, brokers[1].incarnation_epoch)
        for stale in (old.controller_epoch, new.controller_epoch + 1):
            with pytest.raises(FencedControllerError) as e:
                coord.allocate_producer_ids(2, 1, controller_epoch=stale)
            assert e.value.active_controller_epoch == new.controller_epoch
        assert coord.producer_id_block(2) is None
        after = coord.allocate_producer_ids(2, 1, controller_epoch=new.controller_epoch)
        assert after.first_id == block.last_id + 1

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
