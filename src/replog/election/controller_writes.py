"""What the controller machine asks its driver to do: the coordinator writes, as values.

The machine (``replog.election.controller``) never touches the store. Each input returns a
``ControllerOutput``: an ordered list of writes plus nothing else. The driver applies the writes
in order, each with the active controller epoch, and reports back what the store said.

Every write carries a ``group`` and a ``cause``. Writes of one group stand or fall together: a
group is one decision (one partition's CAS, or an admin request's effects followed by its
completion). When a write of a group fails, the driver skips the rest of that group and asks the
machine to decide again from the cause (``ControllerMachine.on_cas_conflict``), so a request is
never completed on the strength of a write that did not happen.

``state_changes`` on a write are the state-change records (``replog.state_change``) that become
true when the write is applied; the driver reports them only then.

This module also holds the conversions between the coordinator's values (``PartitionState``,
``BrokerInfo``, ``AlterPartitionResult``) and the election package's (``PartitionRegistration``,
``BrokerRegistration``).
"""

from __future__ import annotations

import attrs

from replog.election.state import (
    BrokerRegistration,
    PartitionRegistration,
    TopicPartition,
)
from replog.election.state_change import StateChange
from replog.errors import ErrorCode
from replog.metadata import types as ct

__all__ = [
    "NewPartitionsWrite",
    "AdmitBrokerWrite",
    "ProducerIdBlockWrite",
    "BrokerConfigsWrite",
    "TopicConfigsWrite",
    "CasPartitionWrite",
    "CompleteRequestWrite",
    "ControllerOutput",
    "ControllerWrite",
    "NewTopicWrite",
    "TopicDeletionWrite",
    "SubmitRequestWrite",
    "WriteCause",
    "alter_partition_result",
    "broker_registration",
    "partition_state",
    "registration_of",
]


@attrs.frozen
class WriteCause:
    """Why a write was decided, so the machine can decide again after a conflict: an admin
    request (handled again from scratch), or a partition (reconciled against its new state).
    ``admission``: the (broker id, incarnation epoch) whose registration the write processes
    (a fenced or unclean one, KIP-966), so a retry processes that partition again."""

    request: ct.AdminRequest | None = None
    topic_partition: TopicPartition | None = None
    admission: tuple[int, int] | None = None


@attrs.frozen(kw_only=True)
class CasPartitionWrite:
    """``compare_and_set_partition_state(topic, partition, expected_partition_epoch, state)``."""

    group: int
    cause: WriteCause
    topic_partition: TopicPartition
    expected_partition_epoch: int
    state: ct.PartitionState
    state_changes: tuple[StateChange, ...] = ()


@attrs.frozen(kw_only=True)
class NewTopicWrite:
    """``create_topic(topic, replica_assignment, initial_states=..., configs=...)``."""

    group: int
    cause: WriteCause
    topic: str
    replica_assignment: tuple[tuple[int, ...], ...]
    initial_states: tuple[ct.PartitionState, ...]
    configs: ct.TopicConfigs = ()
    state_changes: tuple[StateChange, ...] = ()


@attrs.frozen(kw_only=True)
class NewPartitionsWrite:
    """``add_partitions(topic, new_replica_assignment, initial_states=...)``."""

    group: int
    cause: WriteCause
    topic: str
    new_replica_assignment: tuple[tuple[int, ...], ...]
    initial_states: tuple[ct.PartitionState, ...]
    state_changes: tuple[StateChange, ...] = ()


@attrs.frozen(kw_only=True)
class TopicDeletionWrite:
    """``delete_topic(topic)``."""

    group: int
    cause: WriteCause
    topic: str
    state_changes: tuple[StateChange, ...] = ()


@attrs.frozen(kw_only=True)
class SubmitRequestWrite:
    """``submit_admin_request(target, payload)``: a request queued for a broker (its persistent
    queue of state-change requests, e.g. CloseReplica for a broker that may be down)."""

    group: int
    cause: WriteCause
    target: int
    payload: ct.AdminPayload
    state_changes: tuple[StateChange, ...] = ()


@attrs.frozen(kw_only=True)
class CompleteRequestWrite:
    """``complete_admin_request(request_id, outcome, message, result)``; always last in its
    group."""

    group: int
    cause: WriteCause
    request_id: int
    outcome: ErrorCode
    message: str
    result: ct.AlterPartitionResult | None = None
    state_changes: tuple[StateChange, ...] = ()


@attrs.frozen(kw_only=True)
class AdmitBrokerWrite:
    """``admit_broker(broker_id, incarnation_epoch)``: the controller has processed that
    registration (the module docstring of ``replog.election.controller``), so it is unfenced
    and no later controller repeats it. The driver writes it only if no write of that
    admission (``cause.admission``) failed for good; otherwise it calls
    ``ControllerMachine.retry_admission``. Once written, the driver tells the machine
    (``ControllerMachine.on_admitted``) and applies what that returns."""

    group: int
    cause: WriteCause
    broker_id: int
    incarnation_epoch: int
    state_changes: tuple[StateChange, ...] = ()


@attrs.frozen(kw_only=True)
class ProducerIdBlockWrite:
    """``allocate_producer_ids(broker_id, broker_epoch, count)``: the next block of producer
    ids for a broker (its AllocateProducerIds request completes in the same group)."""

    group: int
    cause: WriteCause
    broker_id: int
    broker_epoch: int
    count: int
    state_changes: tuple[StateChange, ...] = ()


@attrs.frozen(kw_only=True)
class TopicConfigsWrite:
    """``alter_topic_configs(topic, configs)``: the topic's whole new configs."""

    group: int
    cause: WriteCause
    topic: str
    configs: ct.TopicConfigs
    state_changes: tuple[StateChange, ...] = ()


@attrs.frozen(kw_only=True)
class BrokerConfigsWrite:
    """``alter_broker_configs(broker_id, configs)``: a broker's (or, ``ALL_BROKERS``, the
    cluster-wide default's) whole new dynamic configs."""

    group: int
    cause: WriteCause
    broker_id: int
    configs: ct.TopicConfigs
    state_changes: tuple[StateChange, ...] = ()


ControllerWrite = (
    CasPartitionWrite
    | NewTopicWrite
    | NewPartitionsWrite
    | TopicDeletionWrite
    | SubmitRequestWrite
    | CompleteRequestWrite
    | AdmitBrokerWrite
    | ProducerIdBlockWrite
    | TopicConfigsWrite
    | BrokerConfigsWrite
)


@attrs.frozen
class ControllerOutput:
    """The writes one input produced, in the order the driver must apply them."""

    writes: tuple[ControllerWrite, ...] = ()

    def __add__(self, other: ControllerOutput) -> ControllerOutput:
        return ControllerOutput(self.writes + other.writes)

    @property
    def state_changes(self) -> list[StateChange]:
        """Every state-change record of every write (as if all were applied)."""
        return [c for w in self.writes for c in w.state_changes]


# ---- conversions between the coordinator's values and the election package's ----


def registration_of(state: ct.PartitionState) -> PartitionRegistration:
    """The election view of a stored partition state (same fields, same epochs)."""
    return PartitionRegistration(
        replicas=state.replicas,
        isr=state.isr,
        leader=state.leader,
        leader_epoch=state.leader_epoch,
        partition_epoch=state.partition_epoch,
        leader_recovery_state=state.leader_recovery_state,
        elr=state.elr,
        last_known_elr=state.last_known_elr,
        adding_replicas=state.adding_replicas,
        removing_replicas=state.removing_replicas,
    )


def partition_state(registration: PartitionRegistration) -> ct.PartitionState:
    """The stored form of a registration (the store re-stamps ``partition_epoch``)."""
    return ct.PartitionState(
        replicas=registration.replicas,
        leader=registration.leader,
        leader_epoch=registration.leader_epoch,
        isr=registration.isr,
        partition_epoch=registration.partition_epoch,
        elr=registration.elr,
        last_known_elr=registration.last_known_elr,
        leader_recovery_state=registration.leader_recovery_state,
        adding_replicas=registration.adding_replicas,
        removing_replicas=registration.removing_replicas,
    )


def broker_registration(info: ct.BrokerInfo) -> BrokerRegistration:
    """The election view of a live broker: its incarnation epoch is the KIP-903 broker epoch."""
    return BrokerRegistration(
        broker_id=info.broker_id,
        broker_epoch=info.incarnation_epoch,
        fenced=info.fenced,
        in_controlled_shutdown=info.in_controlled_shutdown,
        rack=info.rack,
    )


def alter_partition_result(
    error: ErrorCode, registration: PartitionRegistration | None
) -> ct.AlterPartitionResult:
    """The completion's answer to an AlterPartition: ``error`` and the partition as the
    controller holds it afterwards (``registration``; None when the partition is unknown)."""
    if registration is None:
        return ct.AlterPartitionResult(error)
    return ct.AlterPartitionResult(
        error,
        leader=registration.leader,
        leader_epoch=registration.leader_epoch,
        partition_epoch=registration.partition_epoch,
        isr=registration.isr,
    )
