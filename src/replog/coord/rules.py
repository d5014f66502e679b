"""The contract's per-operation rules, shared by every backend: argument checks, what a write
decides from the state it read (who may act, what the new value is, which outcome a CAS has).
A backend reads the state its own way, calls these, and commits the result its own way."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

import attrs

from replog.coord.contract import (
    new_partition_states,
    validate_partition_state,
    validate_replica_assignment,
)
from replog.coord.errors import FencedControllerError, SessionExpiredError, TopicExistsError
from replog.metadata.types import (
    ALL_BROKERS,
    BrokerInfo,
    CasResult,
    CasStatus,
    ControllerInfo,
    PartitionState,
    ProducerIdBlock,
    TopicAssignment,
    TopicConfigs,
    topic_configs,
)
from replog.topics import collision_key, validate_topic_name

__all__ = [
    "admitted_broker",
    "allocated_producer_ids",
    "broker_configs_to_store",
    "cas_decision",
    "cas_fenced",
    "cas_ok",
    "check_controller_epoch",
    "check_feed_read",
    "check_incarnation",
    "check_registration",
    "check_topic_free",
    "grown_assignment",
    "holds_controller",
    "new_partitions",
    "new_topic",
    "registration",
    "updated_broker",
]

# ---- brokers ----


def check_registration(broker_id: int, session_timeout_ms: int) -> None:
    """``register_broker``'s argument check (``ValueError``)."""
    if broker_id < 0 or session_timeout_ms <= 0:
        raise ValueError(f"bad broker id {broker_id} or session timeout {session_timeout_ms}")


def check_incarnation(
    broker_id: int, incarnation_epoch: int, current: BrokerInfo | None
) -> BrokerInfo:
    """``current`` (the broker's stored registration) if it is that incarnation's, else
    ``SessionExpiredError`` naming the current incarnation (None: no registration)."""
    if current is None or current.incarnation_epoch != incarnation_epoch:
        now = None if current is None else current.incarnation_epoch
        raise SessionExpiredError(broker_id, incarnation_epoch, now)
    return current


def updated_broker(
    old: BrokerInfo, fenced: bool | None, in_controlled_shutdown: bool | None
) -> BrokerInfo:
    """``update_broker``'s new registration (None: flag unchanged); write it only if it
    differs from ``old``."""
    return attrs.evolve(
        old,
        fenced=old.fenced if fenced is None else fenced,
        in_controlled_shutdown=(
            old.in_controlled_shutdown if in_controlled_shutdown is None else in_controlled_shutdown
        ),
    )


def admitted_broker(old: BrokerInfo | None, incarnation_epoch: int) -> BrokerInfo | None:
    """``admit_broker``'s new registration: None when ``incarnation_epoch`` is not the
    registered one (nothing to admit), else ``old`` admitted and unfenced (equal to ``old``
    when already admitted)."""
    if old is None or old.incarnation_epoch != incarnation_epoch:
        return None
    if old.admitted:
        return old
    return attrs.evolve(old, admitted=True, fenced=False)


def registration(
    broker_id: int,
    incarnation_epoch: int,
    host: str,
    port: int,
    rack: str | None,
    *,
    clean_shutdown: bool,
    fenced: bool,
) -> BrokerInfo:
    """A new registration as every backend stores it (admitted unless fenced or unclean)."""
    return BrokerInfo(
        broker_id=broker_id,
        incarnation_epoch=incarnation_epoch,
        host=host,
        port=port,
        rack=rack,
        fenced=fenced,
        clean_shutdown=clean_shutdown,
        admitted=clean_shutdown and not fenced,
    )


# ---- controller ----


def check_controller_epoch(active: ControllerInfo | None, controller_epoch: int) -> ControllerInfo:
    """The active controller if ``controller_epoch`` is its epoch, else
    ``FencedControllerError``."""
    if active is None or active.controller_epoch != controller_epoch:
        raise FencedControllerError(
            controller_epoch, None if active is None else active.controller_epoch
        )
    return active


def holds_controller(active: ControllerInfo | None, broker_id: int, controller_epoch: int) -> bool:
    """Whether ``broker_id`` holds the role at ``controller_epoch`` (``resign_controller``)."""
    return active is not None and (active.controller_id, active.controller_epoch) == (
        broker_id,
        controller_epoch,
    )


# ---- topics and partitions ----


def new_topic(
    topic: str,
    replica_assignment: Sequence[Sequence[int]],
    initial_states: Sequence[PartitionState] | None,
    configs: Mapping[str, str] | None = None,
) -> tuple[tuple[tuple[int, ...], ...], list[PartitionState], TopicConfigs]:
    """``create_topic``'s checks before touching the store: (assignment, states, configs to
    store; ``types.topic_configs`` normalises and bounds the configs)."""
    validate_topic_name(topic)
    stored = topic_configs(configs)
    assignment, states = new_partitions(replica_assignment, initial_states)
    return assignment, states, stored


def new_partitions(
    replica_assignment: Sequence[Sequence[int]],
    initial_states: Sequence[PartitionState] | None,
) -> tuple[tuple[tuple[int, ...], ...], list[PartitionState]]:
    """``add_partitions``'s checks before touching the store: (assignment, states to store)."""
    assignment = validate_replica_assignment(replica_assignment)
    return assignment, new_partition_states(assignment, initial_states)


def check_topic_free(topic: str, existing: Iterable[str]) -> None:
    """``TopicExistsError`` if ``topic`` exists or collides with an existing name."""
    key = collision_key(topic)
    for name in existing:
        if collision_key(name) == key:
            raise TopicExistsError(topic, name)


def grown_assignment(current: TopicAssignment, states: Sequence[PartitionState]) -> TopicAssignment:
    """The whole assignment after ``add_partitions`` appends partitions with ``states``."""
    return attrs.evolve(current, replicas=(*current.replicas, *(s.replicas for s in states)))


def cas_fenced(e: FencedControllerError) -> CasResult:
    """The CAS result for a fenced controller."""
    return CasResult(
        status=CasStatus.FENCED_CONTROLLER, active_controller_epoch=e.active_controller_epoch
    )


def cas_decision(
    current: PartitionState | None, expected_partition_epoch: int, new_state: PartitionState
) -> CasResult | PartitionState:
    """After the controller check: the result of a CAS that writes nothing (UNKNOWN_PARTITION,
    VERSION_MISMATCH), or the state to store (stamped ``expected + 1``); an invalid
    transition raises ``InvalidPartitionStateError``."""
    if current is None:
        return CasResult(status=CasStatus.UNKNOWN_PARTITION)
    if current.partition_epoch != expected_partition_epoch:
        return CasResult(status=CasStatus.VERSION_MISMATCH, state=current)
    validate_partition_state(new_state, current)
    return attrs.evolve(new_state, partition_epoch=expected_partition_epoch + 1)


def cas_ok(stored: PartitionState, seq: int) -> CasResult:
    """The result of an applied CAS."""
    return CasResult(status=CasStatus.OK, state=stored, seq=seq)


# ---- the feed ----


def broker_configs_to_store(broker_id: int, configs: Mapping[str, str]) -> TopicConfigs:
    """``alter_broker_configs``' arguments checked: the configs as stored (``ValueError`` for a
    broker id below ``ALL_BROKERS`` or configs past the bounds)."""
    if not isinstance(broker_id, int) or broker_id < ALL_BROKERS:
        raise ValueError(f"broker id {broker_id!r} is neither a broker id nor ALL_BROKERS")
    return topic_configs(configs)


def check_feed_read(seq: int, max_changes: int) -> None:
    """``changes_since``'s argument check (``ValueError``)."""
    if seq < 0 or max_changes < 1:
        raise ValueError(f"bad seq {seq} or max_changes {max_changes}")


# ---- producer ids ----


def allocated_producer_ids(
    blocks: Iterable[ProducerIdBlock], broker_id: int, broker_epoch: int, count: int
) -> tuple[ProducerIdBlock, tuple[ProducerIdBlock, ...]]:
    """``allocate_producer_ids``'s decision from the stored blocks (each broker's latest, which
    include the newest block of all, so the next free id is past every one of them): the new
    block, and the blocks to store (``ValueError`` for a count below 1)."""
    if count < 1:
        raise ValueError(f"a producer id block needs at least one id, not {count}")
    stored = tuple(blocks)
    first = max((b.last_id + 1 for b in stored), default=0)
    block = ProducerIdBlock(
        broker_id=broker_id, broker_epoch=broker_epoch, first_id=first, size=count
    )
    kept = tuple(b for b in stored if b.broker_id != broker_id)
    return block, tuple(sorted((*kept, block), key=lambda b: b.broker_id))
