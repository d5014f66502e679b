"""The controller machine's admin-request handlers: create/delete topic, add partitions,
reassign (start or cancel), preferred election, AlterPartition (the config changes and
single-partition elections of the Kafka admin APIs are in ``controller_admin``); plus the
new-partition helpers (collision check, placement over the active brokers, first
registrations).

Each handler returns the request's writes, its effects first and its completion last, all in one
group (see ``controller_writes``): the store's effect is durable before the request completes.
Topic-level records (a refused create or delete) are filed under partition 0 of the topic, since
a state-change record always names a partition.

Delete topic queues a CloseReplica(delete) for every replica's broker after the deletion, so a
broker that is down meanwhile finds it queued when it returns (a broker's queue of state-change
requests is persistent).

The handlers see the machine through ``RequestsHost``, declared here: the members of
``ControllerMachine`` they use, over ``controller_admin.AdminHost`` (the config and election
requests go on to that module's handlers), so this module does not import the machine.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Protocol

from replog.election import controller_admin
from replog.election.alter_partition import handle_alter_partition, response_error
from replog.election.broker_events import on_broker_unclean_restart
from replog.election.controller_admin import AdminHost
from replog.election.controller_writes import (
    ControllerWrite,
    NewPartitionsWrite,
    NewTopicWrite,
    ProducerIdBlockWrite,
    SubmitRequestWrite,
    TopicDeletionWrite,
    WriteCause,
    alter_partition_result,
    partition_state,
)
from replog.election.partition_change import create_partition
from replog.election.placement import (
    InconsistentRackError,
    InvalidReplicationFactorError,
    assign_replicas,
)
from replog.election.reassignment import cancel_reassignment, next_reassignment_step
from replog.election.state import PartitionRegistration, TopicPartition, format_ids
from replog.election.state_change import Actor, StateChange, StateChangeKind, handled_request
from replog.errors import ErrorCode
from replog.metadata import types as ct
from replog.metadata.values import NEW_PARTITIONS_MAX
from replog.topics import collision_key

__all__ = [
    "RequestsHost",
    "alter_partition",
    "handle",
    "handling_order",
    "reject",
    "start_reassignment",
]


class RequestsHost(AdminHost, Protocol):
    """What the admin-request handlers use of ``ControllerMachine``."""

    @property
    def placement_start(self) -> Callable[[int], tuple[int, int]]:
        """The replica-placement start for ``n`` brokers (injected)."""

    def forget_topic(self, topic: str) -> None:
        """Drop a topic from the view (it is being deleted)."""

    def preferred_election(
        self,
        tps: Iterable[TopicPartition],
        now_ms: int,
        *,
        requester: Actor,
        cause: WriteCause,
        group: int | None = None,
        keep_rejections: bool = True,
    ) -> tuple[list[ControllerWrite], dict[TopicPartition, ErrorCode], list[StateChange]]:
        """Preferred elections on ``tps``: the writes, each partition's result, and the
        records of the rejected ones."""


def handling_order(
    machine: RequestsHost, pending: Sequence[ct.AdminRequest], limit: int
) -> list[ct.AdminRequest]:
    """Which of ``pending`` (the queue, oldest first) to handle in this round, in order: ISR
    proposals for partitions below their min ISR first (acks=all writes to them wait on it),
    then the other ISR proposals, then everything else; oldest first within each; at most
    ``limit``, plus the oldest request if it did not make the cut (so nothing starves).

    After a fault every leader proposes at once (``__consumer_offsets`` alone has 50
    partitions); handled oldest first and all in one round, a proposal that unblocked writes
    waited behind a hundred others, and one that arrived meanwhile behind the whole round. The
    order changes nothing else: each request is checked against the state as it is when
    handled, and the proposals for one partition keep their order (one rank)."""

    def rank(request: ct.AdminRequest) -> int:
        payload = request.payload
        if not isinstance(payload, ct.AlterPartition):
            return 2
        tp = payload.topic_partition
        current = machine.partitions.get(tp)
        if current is not None and len(current.isr) < machine.policy(tp).min_isr:
            return 0
        return 1

    chosen = sorted(pending, key=rank)[:limit]  # stable: oldest first within a rank
    if pending and pending[0] not in chosen:
        chosen.append(pending[0])
    return chosen


def _topic_record(
    machine: RequestsHost,
    topic: str,
    kind: StateChangeKind,
    error: ErrorCode,
    detail: str,
    now_ms: int,
) -> StateChange:
    return handled_request(
        kind,
        TopicPartition(topic, 0),
        requester=Actor.admin(),
        handler=machine.actor,
        registration=None,
        requested_ms=now_ms,
        now_ms=now_ms,
        error=error,
        detail=detail,
    )


def reject(
    machine: RequestsHost,
    request: ct.AdminRequest,
    error: ErrorCode,
    message: str,
    now_ms: int,
) -> list[ControllerWrite]:
    """Complete ``request`` with ``error`` and a REJECTED record."""
    topic = getattr(request.payload, "topic", "")
    partition = getattr(request.payload, "partition", 0)
    record = handled_request(
        StateChangeKind.UPDATE_PARTITION
        if not isinstance(request.payload, ct.CreateTopic)
        else StateChangeKind.CREATE_PARTITION,
        TopicPartition(topic or "-", max(partition, 0)),
        requester=Actor.admin(),
        handler=machine.actor,
        registration=None,
        requested_ms=now_ms,
        now_ms=now_ms,
        error=error,
        detail=f"{request.kind.value} request {request.request_id}: {message}",
    )
    return [machine.complete(request, machine.new_group(), error, message, [record])]


def handle(machine: RequestsHost, request: ct.AdminRequest, now_ms: int) -> list[ControllerWrite]:
    """Dispatch one queued request to its handler."""
    payload = request.payload
    if isinstance(payload, ct.AlterPartition):
        return alter_partition(machine, request, payload, now_ms)
    if isinstance(payload, ct.CreateTopic):
        return _create_topic(machine, request, payload, now_ms)
    if isinstance(payload, ct.DeleteTopic):
        return _delete_topic(machine, request, payload, now_ms)
    if isinstance(payload, ct.AddPartitions):
        return _add_partitions(machine, request, payload, now_ms)
    if isinstance(payload, ct.ReassignPartition):
        return start_reassignment(machine, request, payload, now_ms)
    if isinstance(payload, ct.PreferredElection):
        return _preferred_election(machine, request, payload, now_ms)
    if isinstance(payload, ct.DamagedReplica):
        return _damaged_replica(machine, request, payload, now_ms)
    if isinstance(payload, ct.AllocateProducerIds):
        return _allocate_producer_ids(machine, request, payload, now_ms)
    if isinstance(payload, ct.AlterConfigs):
        return controller_admin.alter_configs(machine, request, payload, now_ms)
    if isinstance(payload, ct.ElectLeader):
        return controller_admin.elect_leader(machine, request, payload, now_ms)
    message = f"{request.kind.value} is a broker request, not one for the controller"
    return reject(machine, request, ErrorCode.INVALID_REQUEST, message, now_ms)


def _allocate_producer_ids(
    machine: RequestsHost,
    request: ct.AdminRequest,
    payload: ct.AllocateProducerIds,
    now_ms: int,
) -> list[ControllerWrite]:
    """A broker asks for producer ids: the store hands out the next block (the allocation and
    the completion stand or fall together). An incarnation that is no longer registered is
    refused (STALE_BROKER_EPOCH), as Kafka's controller refuses AllocateProducerIds."""
    registration = machine.cluster.broker(payload.broker_id)
    if registration is None or registration.broker_epoch != payload.broker_epoch:
        message = f"broker {payload.broker_id} epoch {payload.broker_epoch} is not registered"
        return reject(machine, request, ErrorCode.STALE_BROKER_EPOCH, message, now_ms)
    group = machine.new_group()
    allocate = ProducerIdBlockWrite(
        group=group,
        cause=WriteCause(request=request),
        broker_id=payload.broker_id,
        broker_epoch=payload.broker_epoch,
        count=ct.PRODUCER_ID_BLOCK_SIZE,
    )
    return [allocate, machine.complete(request, group, ErrorCode.NONE, "")]


def _damaged_replica(
    machine: RequestsHost, request: ct.AdminRequest, payload: ct.DamagedReplica, now_ms: int
) -> list[ControllerWrite]:
    """A broker reports a damaged batch in its replica: it leaves the partition's ISR and ELR
    and leadership moves to a healthy replica, as for an unclean restart of that partition
    alone (when no healthy replica is eligible, the partition elects as that rule says). A
    report from an incarnation that is no longer registered is refused."""
    tp = TopicPartition(payload.topic, payload.partition)
    current = machine.partitions.get(tp)
    registration = machine.cluster.broker(payload.broker_id)
    if current is None:
        message = f"unknown partition {tp}"
        return reject(machine, request, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, message, now_ms)
    if registration is None or registration.broker_epoch != payload.broker_epoch:
        message = f"broker {payload.broker_id} incarnation {payload.broker_epoch} is not current"
        return reject(machine, request, ErrorCode.STALE_BROKER_EPOCH, message, now_ms)
    decision = on_broker_unclean_restart(
        tp, current, registration, machine.cluster,
        policy=machine.policy(tp), now_ms=now_ms, requester=Actor.broker(payload.broker_id),
    )  # fmt: skip
    group = machine.new_group()
    writes = machine.cas_writes(tp, decision, WriteCause(request=request), group)
    message = f"{tp}: replica on {payload.broker_id} damaged from offset {payload.first_offset}"
    return [*writes, machine.complete(request, group, ErrorCode.NONE, message)]


def _placement(
    machine: RequestsHost,
    given: tuple[tuple[int, ...], ...],
    partition_count: int,
    replication_factor: int,
    first_partition: int,
) -> dict[int, tuple[int, ...]] | tuple[ErrorCode, str]:
    """The explicit assignment (numbered from ``first_partition``) or a placement; more than
    ``NEW_PARTITIONS_MAX`` new partitions are refused before anything is placed."""
    if partition_count > NEW_PARTITIONS_MAX or len(given) > NEW_PARTITIONS_MAX:
        asked = max(partition_count, len(given))
        return (
            ErrorCode.INVALID_PARTITIONS,
            f"{asked} new partitions; one request may create at most {NEW_PARTITIONS_MAX}",
        )
    if given:
        if len(given) != partition_count:
            return (
                ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                f"{len(given)} replica lists for {partition_count} partitions",
            )
        return {first_partition + i: replicas for i, replicas in enumerate(given)}
    try:
        return place(machine, partition_count, replication_factor, first_partition)
    except InvalidReplicationFactorError as e:
        return ErrorCode.INVALID_REPLICATION_FACTOR, str(e)
    except InconsistentRackError as e:
        return ErrorCode.INVALID_REPLICA_ASSIGNMENT, str(e)


def _create_topic(
    machine: RequestsHost, request: ct.AdminRequest, payload: ct.CreateTopic, now_ms: int
) -> list[ControllerWrite]:
    topic = payload.topic
    kind = StateChangeKind.CREATE_PARTITION
    group = machine.new_group()
    existing = topic_exists(machine, topic)
    if existing is not None:
        message = f"topic {topic!r} exists" if existing == topic else f"collides with {existing!r}"
        record = _topic_record(
            machine, topic, kind, ErrorCode.TOPIC_ALREADY_EXISTS, message, now_ms
        )
        return [machine.complete(request, group, ErrorCode.TOPIC_ALREADY_EXISTS, message, [record])]
    placed = _placement(
        machine,
        payload.replica_assignment,
        payload.partition_count,
        payload.replication_factor,
        0,
    )
    if isinstance(placed, tuple):
        error, message = placed
        record = _topic_record(machine, topic, kind, error, message, now_ms)
        return [machine.complete(request, group, error, message, [record])]
    registrations, records, error, message = new_partitions(machine, request, topic, placed, now_ms)
    if error is not ErrorCode.NONE:
        return [machine.complete(request, group, error, message, records)]
    record_topic(machine, topic, 0, registrations, configs=payload.configs)
    write = NewTopicWrite(
        group=group,
        cause=WriteCause(request=request),
        topic=topic,
        replica_assignment=tuple(r.replicas for r in registrations),
        initial_states=tuple(partition_state(r) for r in registrations),
        configs=payload.configs,
        state_changes=tuple(records),
    )
    summary = " ".join(f"{p}={format_ids(r.replicas)}" for p, r in enumerate(registrations))
    return [write, machine.complete(request, group, ErrorCode.NONE, summary)]


def _add_partitions(
    machine: RequestsHost, request: ct.AdminRequest, payload: ct.AddPartitions, now_ms: int
) -> list[ControllerWrite]:
    topic = payload.topic
    known = machine.topics.get(topic)
    group = machine.new_group()
    kind = StateChangeKind.CREATE_PARTITION
    if known is None:
        error, message = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"unknown topic {topic!r}"
        record = _topic_record(machine, topic, kind, error, message, now_ms)
        return [machine.complete(request, group, error, message, [record])]
    current = known.partition_count
    if payload.partition_count <= current:
        error = ErrorCode.INVALID_PARTITIONS
        message = f"topic {topic!r} has {current} partitions; asked for {payload.partition_count}"
        record = _topic_record(machine, topic, kind, error, message, now_ms)
        return [machine.complete(request, group, error, message, [record])]
    added = payload.partition_count - current
    rf = len(known.replicas[0]) if known.replicas else 1
    placed = _placement(machine, payload.replica_assignment, added, rf, current)
    if isinstance(placed, tuple):
        error, message = placed
        record = _topic_record(machine, topic, kind, error, message, now_ms)
        return [machine.complete(request, group, error, message, [record])]
    registrations, records, error, message = new_partitions(machine, request, topic, placed, now_ms)
    if error is not ErrorCode.NONE:
        return [machine.complete(request, group, error, message, records)]
    record_topic(machine, topic, current, registrations)
    write = NewPartitionsWrite(
        group=group,
        cause=WriteCause(request=request),
        topic=topic,
        new_replica_assignment=tuple(r.replicas for r in registrations),
        initial_states=tuple(partition_state(r) for r in registrations),
        state_changes=tuple(records),
    )
    message = f"{topic} now has {payload.partition_count} partitions"
    return [write, machine.complete(request, group, ErrorCode.NONE, message)]


def _delete_topic(
    machine: RequestsHost, request: ct.AdminRequest, payload: ct.DeleteTopic, now_ms: int
) -> list[ControllerWrite]:
    topic = payload.topic
    group = machine.new_group()
    cause = WriteCause(request=request)
    if topic not in machine.topics:
        error, message = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"unknown topic {topic!r}"
        kind = StateChangeKind.STOP_REPLICA
        record = _topic_record(machine, topic, kind, error, message, now_ms)
        return [machine.complete(request, group, error, message, [record])]
    closes: list[ControllerWrite] = []
    topic_id = machine.topics[topic].topic_id
    for tp, registration in sorted(machine.partitions.items()):
        if tp.topic != topic:
            continue
        for broker in registration.replicas:
            close = ct.CloseReplica(
                topic=topic,
                partition=tp.partition,
                leader_epoch=registration.leader_epoch,
                topic_id=topic_id,
            )
            record = StateChange(
                kind=StateChangeKind.STOP_REPLICA,
                topic_partition=tp,
                requester=machine.actor,
                target=Actor.broker(broker),
                leader_epoch=registration.leader_epoch,
                partition_epoch=registration.partition_epoch,
                requested_ms=now_ms,
                detail="delete=true; topic deleted",
            )
            closes.append(
                SubmitRequestWrite(
                    group=group, cause=cause, target=broker, payload=close, state_changes=(record,)
                )
            )
    machine.forget_topic(topic)
    deletion = TopicDeletionWrite(group=group, cause=cause, topic=topic)
    message = f"deleted {topic}"
    return [deletion, *closes, machine.complete(request, group, ErrorCode.NONE, message)]


def _preferred_election(
    machine: RequestsHost,
    request: ct.AdminRequest,
    payload: ct.PreferredElection,
    now_ms: int,
) -> list[ControllerWrite]:
    if payload.partitions:
        tps = [TopicPartition(t, p) for t, p in payload.partitions]
    else:
        tps = sorted(machine.partitions)
    group = machine.new_group()
    writes, results, rejected = machine.preferred_election(
        tps, now_ms, requester=Actor.admin(), cause=WriteCause(request=request), group=group
    )
    failures = [
        code
        for code in results.values()
        if code not in (ErrorCode.NONE, ErrorCode.ELECTION_NOT_NEEDED)
    ]
    outcome = failures[0] if failures else ErrorCode.NONE
    message = " ".join(f"{tp}={code.name}" for tp, code in results.items())
    return [*writes, machine.complete(request, group, outcome, message, rejected)]


def alter_partition(
    machine: RequestsHost, request: ct.AdminRequest, payload: ct.AlterPartition, now_ms: int
) -> list[ControllerWrite]:
    """A leader's ISR proposal, validated in KRaft's order (``alter_partition.py``); the
    completion carries the error and the resulting (or current) partition as an
    ``AlterPartitionResult``."""
    tp = payload.topic_partition
    current = machine.partitions.get(tp)
    decision = handle_alter_partition(
        payload,
        current,
        machine.cluster,
        policy=machine.policy(tp),
        now_ms=now_ms,
        controller=machine.actor,
        complete_reassignment=False,
    )
    group = machine.new_group()
    cause = WriteCause(request=request)
    error = response_error(payload, decision)
    writes: list[ControllerWrite] = []
    if decision.ok and current is not None:
        writes.extend(machine.cas_writes(tp, decision, cause, group))
    result = alter_partition_result(error, machine.partitions.get(tp))
    records = [] if writes else decision.state_changes
    return [*writes, machine.complete(request, group, error, "", records, result=result)]


def start_reassignment(
    machine: RequestsHost, request: ct.AdminRequest, payload: ct.ReassignPartition, now_ms: int
) -> list[ControllerWrite]:
    """Start (or cancel, target None) a reassignment; the request completes once the
    START record is written, and ``on_tick`` drives the rest."""
    tp = TopicPartition(payload.topic, payload.partition)
    current = machine.partitions.get(tp)
    group = machine.new_group()
    cause = WriteCause(request=request)
    if current is None:
        return _reject_tp(machine, request, tp, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, now_ms)
    if payload.target_replicas is None:
        decision = cancel_reassignment(
            tp, current, machine.cluster, policy=machine.policy(tp), now_ms=now_ms,
            requester=Actor.admin(),
        )  # fmt: skip
    else:
        target = payload.target_replicas
        if current.is_reassigning and current.target_replicas == target:
            return [machine.complete(request, group, ErrorCode.NONE, "reassignment in progress")]
        decision = next_reassignment_step(
            tp, current, target, machine.cluster, caught_up=(),
            policy=machine.policy(tp), now_ms=now_ms, requester=Actor.admin(),
        ).decision  # fmt: skip
    if not decision.ok:
        detail = decision.state_changes[0].detail if decision.state_changes else ""
        return [machine.complete(request, group, decision.error, detail, decision.state_changes)]
    writes = machine.cas_writes(tp, decision, cause, group)
    message = machine.partitions[tp].describe()
    return [*writes, machine.complete(request, group, ErrorCode.NONE, message)]


def _reject_tp(
    machine: RequestsHost,
    request: ct.AdminRequest,
    tp: TopicPartition,
    error: ErrorCode,
    now_ms: int,
) -> list[ControllerWrite]:
    record = handled_request(
        StateChangeKind.UPDATE_PARTITION,
        tp,
        requester=Actor.admin(),
        handler=machine.actor,
        registration=None,
        requested_ms=now_ms,
        now_ms=now_ms,
        error=error,
        detail=f"{request.kind.value} request {request.request_id}",
    )
    return [
        machine.complete(request, machine.new_group(), error, f"unknown partition {tp}", [record])
    ]


def topic_exists(machine: RequestsHost, topic: str) -> str | None:
    """The existing topic ``topic`` would collide with ('.' and '_' are the same), if any."""
    key = collision_key(topic)
    return next((t for t in machine.topics if collision_key(t) == key), None)


def place(
    machine: RequestsHost, partition_count: int, replication_factor: int, first_partition: int
) -> dict[int, tuple[int, ...]]:
    """Replicas for new partitions over the live, unfenced brokers (raises
    InvalidReplicationFactorError / InconsistentRackError)."""
    brokers = [reg for _, reg in sorted(machine.cluster.brokers.items()) if reg.is_active]
    start_index, shift = machine.placement_start(max(len(brokers), 1))
    return assign_replicas(
        brokers,
        partition_count,
        replication_factor,
        start_index=start_index,
        replica_shift=shift,
        first_partition=first_partition,
    )


def new_partitions(
    machine: RequestsHost,
    request: ct.AdminRequest,
    topic: str,
    assignment: Mapping[int, tuple[int, ...]],
    now_ms: int,
) -> tuple[list[PartitionRegistration], list[StateChange], ErrorCode, str]:
    """First registrations of new partitions (``create_partition``), or the first error."""
    registrations: list[PartitionRegistration] = []
    records: list[StateChange] = []
    for p, replicas in sorted(assignment.items()):
        decision = create_partition(
            TopicPartition(topic, p), replicas, machine.cluster, now_ms=now_ms,
            requester=machine.actor,
        )  # fmt: skip
        if not decision.ok:
            message = f"partition {p} replicas {format_ids(replicas)}: {decision.error.name}"
            return [], decision.state_changes, decision.error, message
        registrations.append(decision.registration)
        records.extend(decision.state_changes)
    return registrations, records, ErrorCode.NONE, ""


def record_topic(
    machine: RequestsHost,
    topic: str,
    first_partition: int,
    registrations: list[PartitionRegistration],
    *,
    configs: ct.TopicConfigs = (),
) -> None:
    """Add new partitions (and the topic, with ``configs``) to the view, ahead of the store's
    echo."""
    known = machine.topics.get(topic)
    replicas = (() if known is None else known.replicas) + tuple(r.replicas for r in registrations)
    topic_id = "" if known is None else known.topic_id
    machine.topics[topic] = ct.TopicAssignment(
        topic=topic,
        topic_id=topic_id,
        replicas=replicas,
        configs=configs if known is None else known.configs,
    )
    for i, registration in enumerate(registrations):
        machine.partitions[TopicPartition(topic, first_partition + i)] = registration
