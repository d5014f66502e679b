"""The coordinator contract suite (``replog.coord.testing``): partition state compare-and-set and
the change feed."""

from __future__ import annotations

import threading

import attrs
import pytest

from replog.clock import sleep_s
from replog.coord.contract import Coordinator, same_state_ignoring_epoch
from replog.coord.errors import (
    InvalidPartitionStateError,
    MustResyncError,
)
from replog.coord.testing.base import EMPTY, ContractBase, replay
from replog.errors import ErrorCode
from replog.metadata.image import MetadataImage
from replog.metadata.types import (
    NO_LEADER,
    CasStatus,
    ChangeBatch,
    ControllerInfo,
    MetadataChange,
    PartitionChanged,
    PartitionState,
    StartReplica,
)

__all__ = ["PartitionStateContract"]


class PartitionStateContract(ContractBase):
    """Partition state compare-and-set and the change feed."""

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
        coord.alter_topic_configs(
            "a", {"retention.ms": "2000"}, controller_epoch=ctl.controller_epoch
        )
        coord.alter_broker_configs(
            -1, {"log.retention.ms": "5"}, controller_epoch=ctl.controller_epoch
        )
        coord.alter_broker_configs(3, {"k": "v"}, controller_epoch=ctl.controller_epoch)
        coord.alter_broker_configs(3, {}, controller_epoch=ctl.controller_epoch)
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
        assert rebuilt.broker_configs == snap.broker_configs == {-1: (("log.retention.ms", "5"),)}
        assert rebuilt.seq <= snap.seq

    def test_an_image_advanced_by_the_feed_is_the_later_snapshot(self, coord: Coordinator) -> None:
        ctl = self._busy_store(coord)
        start = coord.snapshot()
        coord.create_topic("later", [[1], [1]], controller_epoch=ctl.controller_epoch)
        coord.delete_topic("later", controller_epoch=ctl.controller_epoch)
        coord.create_topic("kept", [[1]], controller_epoch=ctl.controller_epoch)
        self.register(coord, 9)
        image = MetadataImage.from_snapshot(start)
        while (batch := coord.changes_since(image.seq, max_changes=2)).changes:
            image.apply(batch.changes, batch.next_seq)
        snap = coord.snapshot()
        assert attrs.evolve(image.snapshot(), seq=snap.seq) == snap
        assert image.seq <= snap.seq

    def test_the_cluster_id_is_the_snapshots(self, coord: Coordinator) -> None:
        self.eventually(
            lambda: coord.cluster_id() == coord.snapshot().cluster_id == coord.cluster_id(),
            "cluster_id() and snapshot().cluster_id agree",
        )

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
        sleep_s(0.05)
        assert pushed() == expected

    def test_subscriber_from_trimmed_history_is_told_to_resync(self, coord: Coordinator) -> None:
        self._busy_store(coord)
        coord.trim_history(coord.snapshot().seq)
        batches: list[ChangeBatch] = []
        coord.subscribe(batches.append, from_seq=1)
        self.eventually(lambda: bool(batches), "a batch pushed")
        assert batches[0].resync_required and batches[0].changes == ()
