"""The coordinator contract suite (``replog.coord.testing``): topics: creation, deletion,
partitions added, names, IDs and their configs."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

import attrs
import pytest

from replog.coord.contract import Coordinator
from replog.coord.errors import (
    InvalidPartitionStateError,
    InvalidReplicaAssignmentError,
    TopicExistsError,
    UnknownTopicError,
)
from replog.coord.testing.base import ContractBase
from replog.errors import ErrorCode, InvalidTopicError
from replog.metadata.types import (
    CONTROLLER_TARGET,
    TOPIC_CONFIGS_BYTES_MAX,
    TOPIC_CONFIGS_MAX,
    CreateTopic,
    PartitionChanged,
    PartitionState,
    TopicChanged,
    TopicChangeReason,
)
from replog.metadata.values import TOPIC_CONFIG_KEY_CHARS_MAX, TOPIC_CONFIG_VALUE_CHARS_MAX
from replog.topics import ZERO_TOPIC_ID, topic_uuid

__all__ = ["TopicContract"]


class TopicContract(ContractBase):
    """Topics: creation, deletion, partitions added, names, IDs and their configs."""

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
