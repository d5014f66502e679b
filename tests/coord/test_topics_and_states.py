"""The shared validators: topic names and partition-state rules."""

from __future__ import annotations

import attrs
import pytest

from replog.coord.contract import validate_partition_state, validate_replica_assignment
from replog.coord.errors import InvalidPartitionStateError, InvalidReplicaAssignmentError
from replog.errors import ErrorCode, InvalidTopicError
from replog.metadata.types import NO_LEADER, LeaderRecoveryState, PartitionState
from replog.topics import (
    MAX_TOPIC_NAME_LENGTH,
    collision_key,
    is_valid_topic_name,
    validate_topic_name,
)


@pytest.mark.parametrize("name", ["a", "A.b-c_9", "...", "x" * MAX_TOPIC_NAME_LENGTH])
def test_legal_topic_names(name: str) -> None:
    assert validate_topic_name(name) == name and is_valid_topic_name(name)


@pytest.mark.parametrize("name", ["", ".", "..", "x" * 250, "a b", "a/b", "é", "a\n"])
def test_illegal_topic_names(name: str) -> None:
    with pytest.raises(InvalidTopicError) as e:
        validate_topic_name(name)
    assert e.value.code is ErrorCode.INVALID_TOPIC_EXCEPTION
    assert not is_valid_topic_name(name)


def test_dot_and_underscore_collide() -> None:
    assert collision_key("a.b_c") == collision_key("a_b.c") == "a_b_c"


STATE = PartitionState(replicas=(1, 2, 3), leader=1, leader_epoch=2, isr=(1, 2))


def test_well_formed_states_pass() -> None:
    validate_partition_state(STATE)
    validate_partition_state(attrs.evolve(STATE, leader=NO_LEADER, isr=()))
    validate_partition_state(attrs.evolve(STATE, elr=(3,), last_known_elr=(3,)))
    recovering = attrs.evolve(STATE, isr=(1,), leader_recovery_state=LeaderRecoveryState.RECOVERING)
    validate_partition_state(recovering)
    validate_partition_state(attrs.evolve(STATE, leader=2, leader_epoch=3), STATE)


@pytest.mark.parametrize(
    "bad",
    [
        attrs.evolve(STATE, replicas=(), leader=NO_LEADER, isr=()),
        attrs.evolve(STATE, leader_recovery_state=LeaderRecoveryState.RECOVERING),
        attrs.evolve(STATE, adding_replicas=(3,), removing_replicas=(3,)),
        attrs.evolve(STATE, adding_replicas=(4,)),
        attrs.evolve(STATE, isr=(1, 1)),
        attrs.evolve(STATE, leader_epoch=-1),
    ],
)
def test_malformed_states_fail(bad: PartitionState) -> None:
    with pytest.raises(InvalidPartitionStateError):
        validate_partition_state(bad)


def test_leader_epoch_rules_against_the_current_state() -> None:
    with pytest.raises(InvalidPartitionStateError):
        validate_partition_state(attrs.evolve(STATE, leader_epoch=1), STATE)
    with pytest.raises(InvalidPartitionStateError):
        validate_partition_state(attrs.evolve(STATE, leader=2), STATE)


def test_replica_assignment_is_normalised() -> None:
    assert validate_replica_assignment([[1, 2], (3,)]) == ((1, 2), (3,))
    with pytest.raises(InvalidReplicaAssignmentError):
        validate_replica_assignment("12")  # type: ignore[arg-type]


def test_codec_round_trips_every_admin_payload_including_alter_partition() -> None:
    """Both networked backends store admin payloads through one allow-listed codec."""
    from replog.coord import codec
    from replog.metadata.types import AlterPartition

    payload = AlterPartition(
        topic="t", partition=0, leader_id=1, leader_epoch=0, partition_epoch=0, new_isr=((1, -1),)
    )
    assert codec.loads(codec.dumps(payload)) == payload
