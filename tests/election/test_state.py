"""PartitionRegistration invariants and vocabulary; ClusterView; the sans-IO rule."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import replog.election
from replog.election import BrokerRegistration, ClusterView, PartitionRegistration, TopicPartition
from replog.errors import InvariantError
from replog.metadata.types import NO_LEADER, LeaderRecoveryState

BANNED_MODULES = {"time", "socket", "threading", "asyncio", "random", "os"}


def test_vocabulary_of_the_seeds() -> None:
    partition = PartitionRegistration(
        replicas=(4, 5, 1, 2),
        isr=(1, 2, 4),
        leader=1,
        adding_replicas=(4, 5),
        removing_replicas=(1, 2),
    )
    assert partition.assigned == (4, 5, 1, 2)  # AR
    assert partition.catching_up == (5,)  # CUR = AR - ISR
    assert partition.reassigning == (4, 5)  # RAR
    assert partition.original_replicas == (1, 2)
    assert partition.preferred_leader == 4
    settled = PartitionRegistration.initial([1, 2, 3])
    assert settled.reassigning == () and not settled.is_reassigning
    assert (settled.leader, settled.isr, settled.leader_epoch, settled.partition_epoch) == (
        1,
        (1, 2, 3),
        0,
        0,
    )


@pytest.mark.parametrize(
    "fields",
    [
        {"replicas": (), "isr": ()},
        {"replicas": (1, 1), "isr": (1,)},
        {"replicas": (1, 2), "isr": (3,)},
        {"replicas": (1, 2), "isr": (1,), "leader": 2},
        {"replicas": (1, 2), "isr": (1,), "leader": 1, "elr": (1,)},
        {"replicas": (1, 2), "isr": (1,), "leader": 1, "leader_epoch": -1},
        {
            "replicas": (1, 2),
            "isr": (1, 2),
            "leader": 1,
            "leader_recovery_state": LeaderRecoveryState.RECOVERING,
        },
        {"replicas": (1, 2), "isr": (1,), "adding_replicas": (1,), "removing_replicas": (1,)},
    ],
)
def test_impossible_registrations_are_refused(fields: dict[str, object]) -> None:
    with pytest.raises(InvariantError):
        PartitionRegistration(**fields)  # type: ignore[arg-type]


def test_offline_partition_may_have_empty_isr() -> None:
    offline = PartitionRegistration(replicas=(1, 2), isr=(), elr=(1, 2))
    assert offline.leader == NO_LEADER and not offline.has_leader


def test_cluster_view_liveness_and_broker_epochs() -> None:
    cluster = ClusterView([BrokerRegistration(broker_id=1, broker_epoch=10)]).with_registration(
        BrokerRegistration(broker_id=2, broker_epoch=20, rack="r1")
    )
    assert cluster.is_acceptable_leader(1) and not cluster.is_acceptable_leader(3)
    assert cluster.is_isr_eligible(2, 20) and cluster.is_isr_eligible(2, -1)
    assert not cluster.is_isr_eligible(2, 19)
    assert not cluster.with_fenced(1).is_acceptable_leader(1)
    shutting = cluster.with_controlled_shutdown(1)
    assert not shutting.is_isr_eligible(1)
    assert shutting.with_unfenced(1).is_acceptable_leader(1)
    assert cluster.active_broker_ids == (1, 2)
    with pytest.raises(ValueError, match="broker 9 is not registered"):
        cluster.with_fenced(9)


def test_topic_partition_text_form() -> None:
    assert str(TopicPartition("my-topic", 12)) == "my-topic-12"
    assert TopicPartition.parse("my-topic-12") == TopicPartition("my-topic", 12)
    with pytest.raises(ValueError):
        TopicPartition.parse("nodash")


def test_election_package_is_sans_io() -> None:
    package_dir = Path(replog.election.__file__).parent
    for source in sorted(package_dir.glob("*.py")):
        tree = ast.parse(source.read_text(), filename=str(source))
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                names = [node.module or ""]
            elif isinstance(node, ast.Call) and getattr(node.func, "id", None) == "open":
                pytest.fail(f"{source.name} opens a file")
            else:
                continue
            for name in names:
                assert name.split(".")[0] not in BANNED_MODULES, f"{source.name} imports {name}"
