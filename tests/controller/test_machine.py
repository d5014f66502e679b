"""The pure ControllerMachine on its own (no store): built from a snapshot value, it returns
writes and state-change records; conflicts and an unclean restart (a replica of the ELR that
re-registers after an unclean shutdown)."""

from __future__ import annotations

from replog.controller import ControllerConfig, ControllerMachine, TopicPolicy
from replog.election.controller_writes import (
    AdmitBrokerWrite,
    CasPartitionWrite,
)
from replog.election.state_change import Phase, Role, StateChangeKind
from replog.errors import ErrorCode
from replog.metadata.types import BrokerInfo, MetadataSnapshot, PartitionState, TopicAssignment


def _machine(
    isr: tuple[int, ...] = (1, 2, 3), config: ControllerConfig | None = None, **state: object
) -> ControllerMachine:
    partition = PartitionState(replicas=(1, 2, 3), leader=isr[0], leader_epoch=4, isr=isr,
                               partition_epoch=7, **state)  # type: ignore[arg-type]  # fmt: skip
    snapshot = MetadataSnapshot(
        seq=10,
        brokers={
            b: BrokerInfo(broker_id=b, incarnation_epoch=b, host="h", port=b) for b in (1, 2, 3)
        },
        topics={"t": TopicAssignment(topic="t", topic_id="id", replicas=[(1, 2, 3)])},
        partitions={("t", 0): partition},
        controller=None,
        controller_epoch=5,
    )
    return ControllerMachine.from_snapshot(
        snapshot, controller_id=9, controller_epoch=5, now_ms=0, config=config
    )


def test_fence_decision_is_a_cas_with_records() -> None:
    machine = _machine()
    (write,) = machine.on_broker_fenced(1, now_ms=42).writes
    assert isinstance(write, CasPartitionWrite)
    assert write.expected_partition_epoch == 7
    assert (write.state.leader, write.state.isr, write.state.leader_epoch) == (2, (2, 3), 5)
    leader = next(c for c in write.state_changes if c.kind is StateChangeKind.BECOME_LEADER)
    assert str(leader) == "controller 9 requested become-leader for t-0 to broker 2 at epoch 5"
    assert leader.requested_ms == 42 and leader.phase is Phase.REQUESTED
    # the machine's view moved on at once; the echo from the feed changes nothing
    assert machine.on_broker_fenced(1, now_ms=43).writes == ()
    machine.on_partition_state("t", 0, write.state)
    assert machine.partitions[write.topic_partition].leader == 2


def test_conflict_adopts_the_store_state_and_reconciles() -> None:
    machine = _machine()
    (write,) = machine.on_broker_fenced(3, now_ms=1).writes
    assert isinstance(write, CasPartitionWrite)
    stored = PartitionState(replicas=(1, 2, 3), leader=1, leader_epoch=4, isr=(1, 3),
                            partition_epoch=8)  # fmt: skip
    (retry,) = machine.on_cas_conflict(write, stored, now_ms=2).writes
    assert isinstance(retry, CasPartitionWrite)
    assert (retry.expected_partition_epoch, retry.state.isr) == (8, (1,))


def test_unclean_restart_leaves_the_elr() -> None:
    """2, in the ELR, re-registers after an unclean shutdown and leaves the ELR (with balanced
    recovery off; see the next test for what it does)."""
    no_recovery = ControllerConfig(
        default_topic_policy=TopicPolicy(last_known_leader_recovery=False)
    )
    machine = _machine(isr=(1,), elr=(2,), config=no_recovery)
    machine.on_broker_fenced(1, now_ms=1)
    new_two = BrokerInfo(
        broker_id=2, incarnation_epoch=50, host="h", port=2, clean_shutdown=False, admitted=False
    )
    writes = machine.on_broker_registered(new_two, now_ms=2).writes
    # the old incarnation is handled as gone first, then the restart, then the store's mark
    *cas, mark = writes
    assert isinstance(mark, AdmitBrokerWrite)
    assert (mark.broker_id, mark.incarnation_epoch) == (2, 50)
    write = cas[-1]
    assert isinstance(write, CasPartitionWrite)
    epochs = [w.expected_partition_epoch for w in cas if isinstance(w, CasPartitionWrite)]
    assert epochs == list(range(8, 8 + len(cas)))
    assert 2 not in write.state.elr and 2 not in write.state.isr


def test_alter_partition_rejection_record() -> None:
    from replog.metadata.types import AdminRequest, AlterPartition, AlterPartitionResult

    machine = _machine()
    payload = AlterPartition(topic="t", partition=0, leader_id=2, leader_epoch=4,
                             partition_epoch=7, new_isr=[(2, -1)])  # fmt: skip
    request = AdminRequest(request_id=1, target=-1, payload=payload, submitted_seq=3)
    (done,) = machine.on_admin_request(request, now_ms=5).writes
    assert done.outcome is ErrorCode.INVALID_REQUEST  # type: ignore[union-attr]
    (record,) = done.state_changes
    assert record.phase is Phase.REJECTED and record.requester.role is Role.LEADER
    result = done.result  # type: ignore[union-attr]
    assert result == AlterPartitionResult(
        ErrorCode.INVALID_REQUEST, leader=1, leader_epoch=4, partition_epoch=7, isr=result.isr
    )
    assert done.message == ""  # type: ignore[union-attr]


def test_balanced_recovery_elects_the_last_known_leader() -> None:
    """KIP-966 balanced recovery: 2 leads alone (ISR [2], min ISR 1), crashes (ISR and ELR
    empty after its unclean restart) and is the last known leader: once its new incarnation
    registers it is elected uncleanly (RECOVERING, ISR [2]) instead of leaving the partition
    offline for good. 1 is fenced throughout."""
    machine = _machine(isr=(2,))
    machine.on_broker_fenced(1, now_ms=1)
    gone = machine.on_broker_unregistered(2, 2, now_ms=2).writes
    (cas,) = [w for w in gone if isinstance(w, CasPartitionWrite)]
    assert (cas.state.leader, cas.state.isr, cas.state.last_known_elr) == (-1, (), (2,))
    new_two = BrokerInfo(
        broker_id=2, incarnation_epoch=50, host="h", port=2, clean_shutdown=False, admitted=False
    )
    writes = machine.on_broker_registered(new_two, now_ms=3).writes
    states = [w.state for w in writes if isinstance(w, CasPartitionWrite)]
    final = states[-1]
    assert (final.leader, final.isr, final.elr, final.last_known_elr) == (2, (2,), (), ())
    assert final.leader_recovery_state.name == "RECOVERING"
    records = [c for w in writes for c in w.state_changes]
    assert any("last known leader" in c.detail for c in records)
