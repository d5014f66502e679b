"""``CoordinatorContract``, the whole contract suite (its groups of tests are the other modules
of ``replog.coord.testing``), and ``SecondHandleContract``, the suite plus what a second handle
on the same store sees. How a backend runs them: ``replog.coord.testing``'s docstring."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from replog.coord.contract import Coordinator
from replog.coord.errors import (
    CoordinatorClosedError,
)
from replog.coord.testing.admin import AdminQueueContract
from replog.coord.testing.base import ContractBase, CoordinatorFactory
from replog.coord.testing.brokers import BrokerContract
from replog.coord.testing.configs import DynamicConfigsContract
from replog.coord.testing.partitions import PartitionStateContract
from replog.coord.testing.topics import TopicContract
from replog.metadata.types import (
    ChangeBatch,
    SessionState,
    TopicAssignment,
    TopicChanged,
    TopicChangeReason,
)

__all__ = ["CoordinatorContract", "SecondHandleContract"]


class CoordinatorContract(
    BrokerContract,
    TopicContract,
    PartitionStateContract,
    AdminQueueContract,
    DynamicConfigsContract,
    ContractBase,
):
    """The contract tests; subclass with a ``coordinator_factory`` fixture (see
    ``replog.coord.testing``). The tests are grouped in the modules of that package."""


class SecondHandleContract(CoordinatorContract):
    """The contract plus what a second handle on the same store sees; subclass it with a
    ``peer_factory`` fixture as well (see ``replog.coord.testing``)."""

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

    def test_producer_id_blocks_are_read_through_another_handle(
        self, coord: Coordinator, peer: Coordinator
    ) -> None:
        _, ctl = self.cluster(coord)
        block = coord.allocate_producer_ids(1, 4, controller_epoch=ctl.controller_epoch)
        assert peer.producer_id_block(1) == block
        assert peer.producer_id_block(2) is None

    def test_dynamic_configs_are_seen_by_another_handle(
        self, coord: Coordinator, peer: Coordinator
    ) -> None:
        _, ctl = self.cluster(coord)
        coord.create_topic("t", [[1]], controller_epoch=ctl.controller_epoch)
        altered = coord.alter_topic_configs(
            "t", {"retention.ms": "1"}, controller_epoch=ctl.controller_epoch
        )
        coord.alter_broker_configs(1, {"k": "v"}, controller_epoch=ctl.controller_epoch)
        assert peer.get_topic("t") == altered
        assert peer.broker_configs() == {1: (("k", "v"),)}
        assert peer.snapshot().broker_configs == {1: (("k", "v"),)}

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
