"""State-change records: the seed-000 one-line form, the lifecycle, and log-line round trips."""

from __future__ import annotations

import pytest

from replog.election import (
    Actor,
    ClusterView,
    ElectionPolicy,
    Phase,
    StateChange,
    StateChangeKind,
    TopicPartition,
    create_partition,
    on_broker_fenced,
    parse_log_line,
)
from replog.errors import ErrorCode, InvariantError

from ._support import TP, applied, lines, registration


def become_leader() -> StateChange:
    return StateChange(
        kind=StateChangeKind.BECOME_LEADER,
        topic_partition=TP,
        requester=Actor.controller(0),
        target=Actor.broker(1),
        leader_epoch=10,
        partition_epoch=12,
        requested_ms=1000,
        detail="leader=1 isr=[1,2]",
    )


def test_requested_line_matches_seed_form() -> None:
    assert str(become_leader()) == (
        "controller 0 requested become-leader for foo-0 to broker 1 at epoch 10"
    )


def test_lifecycle_received_then_completed() -> None:
    received = become_leader().received(1005)
    assert (
        str(received) == "broker 1 received become-leader for foo-0 from controller 0 at epoch 10"
    )
    completed = received.completed(1010)
    assert str(completed) == (
        "broker 1 completed become-leader for foo-0 requested by controller 0 at epoch 10"
    )
    assert (completed.requested_ms, completed.received_ms, completed.completed_ms) == (
        1000,
        1005,
        1010,
    )
    with pytest.raises(InvariantError):
        completed.completed(1011)
    with pytest.raises(InvariantError):
        become_leader().received(999)


def test_rejection_names_the_error() -> None:
    rejected = become_leader().rejected(1002, ErrorCode.STALE_CONTROLLER_EPOCH)
    assert rejected.phase is Phase.REJECTED
    assert str(rejected).endswith("requested by controller 0 at epoch 10: STALE_CONTROLLER_EPOCH")


@pytest.mark.parametrize(
    "change",
    [
        become_leader(),
        become_leader().received(1001),
        become_leader().received(1001).completed(1003),
        become_leader().rejected(1004, ErrorCode.FENCED_LEADER_EPOCH),
    ],
)
def test_log_line_round_trips(change: StateChange) -> None:
    line = change.to_log_line()
    assert line.startswith(f"{change.at_ms} ")
    assert parse_log_line(line) == change


def test_log_lines_of_a_decision_round_trip_and_sort_by_time() -> None:
    decision = on_broker_fenced(
        TopicPartition("my-topic", 3),
        registration([3, 1, 2], [1, 2], 1),
        1,
        ClusterView.of(1, 2, 3),
        policy=ElectionPolicy(),
        now_ms=77,
    )
    for change in decision.state_changes:
        assert parse_log_line(change.to_log_line()) == change
    assert lines(decision) == [
        "controller 0 requested become-leader for my-topic-3 to broker 2 at epoch 6",
        "controller 0 requested become-follower for my-topic-3 to broker 3 at epoch 6",
        "controller 0 requested become-follower for my-topic-3 to broker 1 at epoch 6",
    ]


def test_parse_rejects_foreign_lines() -> None:
    with pytest.raises(ValueError):
        parse_log_line("12 something else entirely")
    with pytest.raises(ValueError):
        parse_log_line("12 broker 1 did a thing | partition_epoch=1 requested_ms=1")


def test_create_partition_starts_every_replica() -> None:
    cluster = ClusterView.of(1, 2, 3).with_fenced(3)
    decision = create_partition(TP, [1, 2, 3], cluster, now_ms=5)
    created = applied(decision)
    assert (created.leader, created.isr, created.leader_epoch, created.partition_epoch) == (
        1,
        (1, 2),
        0,
        0,
    )
    kinds = [c.kind for c in decision.state_changes]
    assert kinds.count(StateChangeKind.START_REPLICA) == 3
    assert kinds.count(StateChangeKind.BECOME_LEADER) == 1
    all_fenced = cluster.with_fenced(1).with_fenced(2)
    assert create_partition(TP, [1, 2, 3], all_fenced, now_ms=5).outcome is (
        ErrorCode.INVALID_REPLICATION_FACTOR
    )
    assert create_partition(TP, [1, 1], cluster, now_ms=5).outcome is (
        ErrorCode.INVALID_REPLICA_ASSIGNMENT
    )
