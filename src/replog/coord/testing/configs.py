"""The coordinator contract's dynamic-config tests: ``alter_topic_configs``,
``alter_broker_configs`` and ``broker_configs`` (see ``replog.coord.contract``).

``DynamicConfigsContract`` is a part of ``replog.coord.testing.CoordinatorContract`` (which
every backend's suite subclasses); it uses that class's fixtures and helpers and is not run on
its own.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, ClassVar

import pytest

from replog.coord.contract import Coordinator
from replog.coord.errors import FencedControllerError, UnknownTopicError
from replog.metadata.types import (
    ALL_BROKERS,
    CONTROLLER_TARGET,
    TOPIC_CONFIGS_MAX,
    AlterConfigs,
    BrokerConfigsChanged,
    BrokerInfo,
    ConfigChange,
    ConfigOperation,
    ConfigResourceType,
    ControllerInfo,
    ElectLeader,
    MetadataChange,
    TopicChanged,
    TopicChangeReason,
)

__all__ = ["DynamicConfigsContract"]


class DynamicConfigsContract:
    """Dynamic topic and broker configs: stored, in the snapshot and the feed, fenced."""

    BROKER_CONFIGS: ClassVar[Mapping[str, str]] = {
        "log.retention.ms": "3600000",
        "min.insync.replicas": "2",
        "replog.note": "é ✓",
    }

    if TYPE_CHECKING:  # provided by CoordinatorContract

        def cluster(
            self, coord: Coordinator, size: int = 3
        ) -> tuple[list[BrokerInfo], ControllerInfo]: ...

        def all_changes(self, coord: Coordinator) -> list[MetadataChange]: ...

    def test_altered_topic_configs_replace_the_old_ones(self, coord: Coordinator) -> None:
        _, ctl = self.cluster(coord)
        epoch = ctl.controller_epoch
        created = coord.create_topic(
            "t", [[1, 2], [2, 3]], controller_epoch=epoch, configs={"retention.ms": "1000"}
        )
        start = coord.snapshot().seq
        altered = coord.alter_topic_configs(
            "t", {"segment.bytes": "4096", "min.insync.replicas": "2"}, controller_epoch=epoch
        )
        assert altered.topic_id == created.topic_id and altered.replicas == created.replicas
        assert altered.config_map == {"segment.bytes": "4096", "min.insync.replicas": "2"}
        assert coord.get_topic("t") == altered
        assert coord.snapshot().topics == {"t": altered}
        assert coord.get_partition_state("t", 1) is not None
        changes = coord.changes_since(start).changes
        assert changes == (
            TopicChanged(
                seq=changes[0].seq, reason=TopicChangeReason.CONFIGS_ALTERED, assignment=altered
            ),
        )
        cleared = coord.alter_topic_configs("t", {}, controller_epoch=epoch)
        assert cleared.configs == () and coord.get_topic("t") == cleared
        grown = coord.add_partitions("t", [[3, 1]], controller_epoch=epoch)
        assert grown.configs == ()

    def test_altering_an_unknown_topic_writes_nothing(self, coord: Coordinator) -> None:
        _, ctl = self.cluster(coord)
        before = coord.snapshot()
        with pytest.raises(UnknownTopicError):
            coord.alter_topic_configs("nope", {"k": "v"}, controller_epoch=ctl.controller_epoch)
        assert coord.snapshot() == before
        assert coord.changes_since(before.seq).changes == ()

    def test_broker_configs_are_stored_fed_and_in_the_snapshot(self, coord: Coordinator) -> None:
        _, ctl = self.cluster(coord)
        epoch = ctl.controller_epoch
        assert coord.broker_configs() == {} and coord.snapshot().broker_configs == {}
        start = coord.snapshot().seq
        coord.alter_broker_configs(2, self.BROKER_CONFIGS, controller_epoch=epoch)
        coord.alter_broker_configs(ALL_BROKERS, {"log.retention.ms": "1"}, controller_epoch=epoch)
        coord.alter_broker_configs(7, {"compression.type": "lz4"}, controller_epoch=epoch)
        expected = {
            ALL_BROKERS: (("log.retention.ms", "1"),),
            2: tuple(sorted(self.BROKER_CONFIGS.items())),
            7: (("compression.type", "lz4"),),  # no such broker registered: kept all the same
        }
        assert coord.broker_configs() == expected
        assert list(coord.broker_configs()) == [ALL_BROKERS, 2, 7]
        assert coord.snapshot().broker_configs == expected
        changes = coord.changes_since(start).changes
        assert [(type(c), getattr(c, "broker_id", None)) for c in changes] == [
            (BrokerConfigsChanged, 2),
            (BrokerConfigsChanged, ALL_BROKERS),
            (BrokerConfigsChanged, 7),
        ]
        assert changes[0] == BrokerConfigsChanged(
            seq=changes[0].seq, broker_id=2, configs=expected[2]
        )
        coord.alter_broker_configs(2, {}, controller_epoch=epoch)
        coord.alter_broker_configs(7, {"compression.type": "gzip"}, controller_epoch=epoch)
        assert coord.broker_configs() == {
            ALL_BROKERS: (("log.retention.ms", "1"),),
            7: (("compression.type", "gzip"),),
        }
        last = self.all_changes(coord)[-2]
        assert last == BrokerConfigsChanged(seq=last.seq, broker_id=2, configs=())

    @pytest.mark.parametrize(
        ("broker_id", "configs"),
        [
            (-2, {"k": "v"}),
            (1, {"k": 1}),
            (1, {f"k{i}": "v" for i in range(TOPIC_CONFIGS_MAX + 1)}),
        ],
        ids=["bad-broker-id", "int-value", "too-many"],
    )
    def test_bad_broker_configs_are_refused_and_write_nothing(
        self, coord: Coordinator, broker_id: int, configs: Any
    ) -> None:
        _, ctl = self.cluster(coord)
        before = coord.snapshot()
        with pytest.raises(ValueError):
            coord.alter_broker_configs(broker_id, configs, controller_epoch=ctl.controller_epoch)
        assert coord.snapshot() == before and coord.broker_configs() == {}

    def test_config_writes_of_a_resigned_controller_are_fenced(self, coord: Coordinator) -> None:
        _, ctl = self.cluster(coord)
        epoch = ctl.controller_epoch
        coord.create_topic("t", [[1]], controller_epoch=epoch, configs={"k": "v"})
        coord.alter_broker_configs(1, {"k": "v"}, controller_epoch=epoch)
        coord.resign_controller(1, epoch)
        before = coord.snapshot()
        with pytest.raises(FencedControllerError):
            coord.alter_topic_configs("t", {"k": "w"}, controller_epoch=epoch)
        with pytest.raises(FencedControllerError):
            coord.alter_topic_configs("unknown", {"k": "w"}, controller_epoch=epoch)
        with pytest.raises(FencedControllerError):
            coord.alter_broker_configs(1, {"k": "w"}, controller_epoch=epoch)
        assert coord.snapshot() == before
        assert coord.changes_since(before.seq).changes == ()

    def test_config_and_election_requests_queue_as_submitted(self, coord: Coordinator) -> None:
        payloads: list[AlterConfigs | ElectLeader] = [
            AlterConfigs(
                resource_type=ConfigResourceType.TOPIC,
                resource_name="t",
                changes=(
                    ConfigChange(operation=ConfigOperation.SET, key="retention.ms", value="1"),
                    ConfigChange(operation=ConfigOperation.DELETE, key="segment.bytes"),
                ),
                replace=True,
            ),
            AlterConfigs(
                resource_type=ConfigResourceType.BROKER,
                resource_name="",
                changes=(ConfigChange(operation=ConfigOperation.APPEND, key="k", value="a,b"),),
            ),
            ElectLeader(topic="t", partition=2, unclean=True),
        ]
        queued = [coord.submit_admin_request(CONTROLLER_TARGET, p) for p in payloads]
        assert [r.payload for r in coord.pending_admin_requests(CONTROLLER_TARGET)] == payloads
        assert coord.pending_admin_requests(CONTROLLER_TARGET) == queued
        bad_payloads: list[ElectLeader | AlterConfigs] = [
            ElectLeader(topic="t", partition=-1),
            ElectLeader(topic="bad name", partition=0),
            AlterConfigs(resource_type=ConfigResourceType.TOPIC, resource_name="a/b"),
            AlterConfigs(resource_type=ConfigResourceType.BROKER, resource_name="x"),
        ]
        for bad in bad_payloads:
            with pytest.raises(ValueError):
                coord.submit_admin_request(CONTROLLER_TARGET, bad)
        assert coord.pending_admin_requests(CONTROLLER_TARGET) == queued
