"""The controller's handling of AlterConfigs (topic configs and dynamic broker configs) and of
single-partition elections (ElectLeader), on every backend: what is stored, what is refused
(INVALID_CONFIG naming the key), and the policy the controller applies afterwards."""

from __future__ import annotations

from replog.controller import ControllerService
from replog.coord.contract import Coordinator
from replog.errors import ErrorCode
from replog.metadata.types import (
    ALL_BROKERS,
    NO_LEADER,
    AlterConfigs,
    ConfigChange,
    ConfigOperation,
    ConfigResourceType,
    CreateTopic,
    ElectLeader,
    ReassignPartition,
)

from ._harness import Cluster

CONTROLLER = 100
SET, DELETE, APPEND = ConfigOperation.SET, ConfigOperation.DELETE, ConfigOperation.APPEND


def _topic_change(topic: str, *changes: ConfigChange, replace: bool = False) -> AlterConfigs:
    return AlterConfigs(
        resource_type=ConfigResourceType.TOPIC,
        resource_name=topic,
        changes=changes,
        replace=replace,
    )


def _broker_change(name: str, *changes: ConfigChange) -> AlterConfigs:
    return AlterConfigs(
        resource_type=ConfigResourceType.BROKER, resource_name=name, changes=changes
    )


def _cluster(coordinator: Coordinator) -> tuple[Cluster, ControllerService]:
    cluster = Cluster(coordinator)
    cluster.register(1, 2, 3, CONTROLLER)
    controller = cluster.controller(CONTROLLER)
    cluster.submit(CreateTopic(topic="t", partition_count=1, replication_factor=3,
                               replica_assignment=[[1, 2, 3]],
                               configs={"retention.ms": "1000"}))  # fmt: skip
    cluster.poll(controller)
    return cluster, controller


def test_incremental_topic_changes_apply_to_the_stored_configs(coordinator: Coordinator) -> None:
    cluster, controller = _cluster(coordinator)
    request = cluster.submit(
        _topic_change(
            "t",
            ConfigChange(operation=SET, key="min.insync.replicas", value="2"),
            ConfigChange(operation=DELETE, key="retention.ms"),
            ConfigChange(operation=APPEND, key="cleanup.policy", value="delete"),
        )
    )
    cluster.poll(controller)
    assert cluster.outcome(request) is ErrorCode.NONE
    topic = coordinator.get_topic("t")
    assert topic is not None
    assert topic.config_map == {"min.insync.replicas": "2", "cleanup.policy": "delete"}


def test_alter_configs_replaces_the_whole_set(coordinator: Coordinator) -> None:
    cluster, controller = _cluster(coordinator)
    request = cluster.submit(
        _topic_change(
            "t", ConfigChange(operation=SET, key="segment.bytes", value="4096"), replace=True
        )
    )
    cluster.poll(controller)
    assert cluster.outcome(request) is ErrorCode.NONE
    topic = coordinator.get_topic("t")
    assert topic is not None and topic.config_map == {"segment.bytes": "4096"}


def test_bad_configs_are_refused_naming_the_key_and_change_nothing(
    coordinator: Coordinator,
) -> None:
    cluster, controller = _cluster(coordinator)
    refused = [
        cluster.submit(_topic_change("t", ConfigChange(operation=SET, key="bogus.key", value="1"))),
        cluster.submit(
            _topic_change("t", ConfigChange(operation=SET, key="retention.ms", value="soon"))
        ),
        cluster.submit(
            _topic_change("t", ConfigChange(operation=APPEND, key="retention.ms", value="1"))
        ),
        cluster.submit(
            _broker_change("", ConfigChange(operation=SET, key="num.partitions", value="3"))
        ),
    ]
    unknown = cluster.submit(
        _topic_change("nope", ConfigChange(operation=SET, key="retention.ms", value="1"))
    )
    cluster.poll(controller)
    for request, key in zip(
        refused, ["bogus.key", "retention.ms", "retention.ms", "num.partitions"], strict=True
    ):
        completion = cluster.completion(request)
        assert completion.outcome is ErrorCode.INVALID_CONFIG
        assert key in completion.message
    assert cluster.outcome(unknown) is ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    topic = coordinator.get_topic("t")
    assert topic is not None and topic.config_map == {"retention.ms": "1000"}
    assert coordinator.broker_configs() == {}


def test_broker_configs_are_stored_per_broker_and_for_the_cluster(
    coordinator: Coordinator,
) -> None:
    cluster, controller = _cluster(coordinator)
    first = cluster.submit(
        _broker_change("2", ConfigChange(operation=SET, key="log.retention.ms", value="5000"))
    )
    second = cluster.submit(
        _broker_change("", ConfigChange(operation=SET, key="compression.type", value="lz4"))
    )
    cluster.poll(controller)
    assert cluster.outcome(first) is cluster.outcome(second) is ErrorCode.NONE
    assert coordinator.broker_configs() == {
        ALL_BROKERS: (("compression.type", "lz4"),),
        2: (("log.retention.ms", "5000"),),
    }
    cleared = cluster.submit(
        _broker_change("2", ConfigChange(operation=DELETE, key="log.retention.ms"))
    )
    cluster.poll(controller)
    assert cluster.outcome(cleared) is ErrorCode.NONE
    assert coordinator.broker_configs() == {ALL_BROKERS: (("compression.type", "lz4"),)}


def _leaderless(cluster: Cluster, controller: ControllerService) -> None:
    """Leave t-0 without a leader: its ISR shrinks to 1, then 1 is fenced (2 and 3 live)."""
    cluster.propose_isr("t", 0, [1])
    cluster.poll(controller)
    cluster.fence(1)
    cluster.poll(controller)
    assert cluster.state("t").leader == NO_LEADER


def test_enabling_unclean_election_on_the_topic_elects_at_once(
    coordinator: Coordinator,
) -> None:
    cluster, controller = _cluster(coordinator)
    _leaderless(cluster, controller)
    enable = ConfigChange(operation=SET, key="unclean.leader.election.enable", value="true")
    cluster.submit(_topic_change("t", enable))
    cluster.poll(controller)
    assert cluster.state("t").leader == 2  # the first live replica, uncleanly


def test_enabling_unclean_election_for_the_cluster_elects_at_once(
    coordinator: Coordinator,
) -> None:
    cluster, controller = _cluster(coordinator)
    _leaderless(cluster, controller)
    enable = ConfigChange(operation=SET, key="unclean.leader.election.enable", value="true")
    cluster.submit(_broker_change("", enable))
    cluster.poll(controller)
    assert cluster.state("t").leader == 2


def test_elect_leader_answers_each_partition_as_kafka_does(coordinator: Coordinator) -> None:
    cluster, controller = _cluster(coordinator)
    not_needed = cluster.submit(ElectLeader(topic="t", partition=0))
    unknown = cluster.submit(ElectLeader(topic="t", partition=5))
    cluster.poll(controller)
    assert cluster.outcome(not_needed) is ErrorCode.ELECTION_NOT_NEEDED
    assert cluster.outcome(unknown) is ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    cluster.submit(ReassignPartition(topic="t", partition=0, target_replicas=(2, 1, 3)))
    cluster.settle(controller)
    assert cluster.state("t").leader == 1 and cluster.state("t").replicas == (2, 1, 3)
    preferred = cluster.submit(ElectLeader(topic="t", partition=0))
    cluster.poll(controller)
    assert cluster.outcome(preferred) is ErrorCode.NONE
    assert cluster.state("t").leader == 2
    clean = cluster.submit(ElectLeader(topic="t", partition=0, unclean=True))
    cluster.poll(controller)
    assert cluster.outcome(clean) is ErrorCode.ELECTION_NOT_NEEDED  # it has a leader


def test_unclean_elect_leader_elects_a_leaderless_partition(coordinator: Coordinator) -> None:
    cluster, controller = _cluster(coordinator)
    _leaderless(cluster, controller)
    preferred = cluster.submit(ElectLeader(topic="t", partition=0))
    cluster.poll(controller)
    assert cluster.outcome(preferred) is ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE
    assert cluster.state("t").leader == NO_LEADER
    unclean = cluster.submit(ElectLeader(topic="t", partition=0, unclean=True))
    cluster.poll(controller)
    assert cluster.outcome(unclean) is ErrorCode.NONE
    assert cluster.state("t").leader == 2
