"""The controller machine's handlers of the Kafka admin APIs that change configs and elect
leaders: AlterConfigs (topic configs and dynamic broker configs) and ElectLeader (one
partition's preferred or unclean election).

AlterConfigs applies the request's changes to the configs in the controller's view (the
store's, so concurrent requests never undo one another), checks the result
(``replog.topic_config`` for a topic, ``replog.config_layers`` for a broker), writes it and
completes the request; INVALID_CONFIG names the key. When the change may let a leaderless
partition elect (unclean leader election switched on, for the topic or for every topic), those
partitions are reconciled right away, each its own decision after the completion.

ElectLeader completes with the partition's own outcome (Kafka's ElectLeaders answers), so the
broker that took the request answers each partition from its completion alone.

The handlers see the machine through ``AdminHost``: the members of ``ControllerMachine`` they
use, declared here, so this module does not import the machine (the machine imports it, through
``controller_requests``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, MutableMapping
from typing import Protocol

import attrs

from replog.config_layers import apply_changes, check_broker_configs
from replog.election.controller_writes import (
    BrokerConfigsWrite,
    CompleteRequestWrite,
    ControllerOutput,
    ControllerWrite,
    TopicConfigsWrite,
    WriteCause,
)
from replog.election.decision import Decision
from replog.election.partition_change import ElectionPolicy, LeaderElectionStrategy
from replog.election.rebalance import elect_leader as decide_election
from replog.election.state import ClusterView, PartitionRegistration, TopicPartition
from replog.election.state_change import Actor, StateChange
from replog.errors import ErrorCode, InvalidConfigError
from replog.metadata import types as ct
from replog.topic_config import parse_topic_configs

__all__ = ["AdminHost", "alter_configs", "elect_leader"]


class AdminHost(Protocol):
    """What the config and election handlers use of ``ControllerMachine``."""

    @property
    def controller_id(self) -> int:
        """The controller's broker id."""

    @property
    def actor(self) -> Actor:
        """This controller as a state-change participant."""

    @property
    def cluster(self) -> ClusterView:
        """The brokers' registrations as the view holds them."""

    @property
    def topics(self) -> MutableMapping[str, ct.TopicAssignment]:
        """The view's topics (the handlers update it ahead of the store's echo)."""

    @property
    def partitions(self) -> MutableMapping[TopicPartition, PartitionRegistration]:
        """The view's partitions."""

    @property
    def broker_configs(self) -> Mapping[int, ct.TopicConfigs]:
        """Dynamic broker configs by broker id (``ct.ALL_BROKERS``: the cluster default)."""

    def new_group(self) -> int:
        """A fresh write group."""

    def policy(self, tp: TopicPartition) -> ElectionPolicy:
        """``tp``'s election policy."""

    def on_broker_configs(self, broker_id: int, configs: ct.TopicConfigs) -> None:
        """Adopt a broker's (or the cluster default's) new dynamic configs."""

    def cas_writes(
        self, tp: TopicPartition, decision: Decision, cause: WriteCause, group: int | None = None
    ) -> list[ControllerWrite]:
        """The write for a partition decision, applied to the view at once."""

    def reconcile_partition(self, tp: TopicPartition, now_ms: int) -> ControllerOutput:
        """Bring one partition in line with the brokers' liveness."""

    def complete(
        self,
        request: ct.AdminRequest,
        group: int,
        error: ErrorCode,
        message: str,
        records: Iterable[StateChange] = (),
        *,
        result: ct.AlterPartitionResult | None = None,
    ) -> CompleteRequestWrite:
        """The completion write of ``request`` in ``group``."""

    def reject_request(
        self, request: ct.AdminRequest, error: ErrorCode, message: str, now_ms: int
    ) -> ControllerOutput:
        """Complete ``request`` with ``error`` and a REJECTED record."""


def alter_configs(
    machine: AdminHost, request: ct.AdminRequest, payload: ct.AlterConfigs, now_ms: int
) -> list[ControllerWrite]:
    """Change a topic's configs or a broker's dynamic configs (module docstring)."""
    group = machine.new_group()
    cause = WriteCause(request=request)
    name = payload.resource_name
    try:
        if payload.resource_type is ct.ConfigResourceType.TOPIC:
            known = machine.topics.get(name)
            if known is None:
                return _refuse(
                    machine,
                    request,
                    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                    f"unknown topic {name!r}",
                    now_ms,
                )
            configs = apply_changes(known.config_map, payload.changes, replace=payload.replace)
            parse_topic_configs(configs)
            stored = ct.topic_configs(configs)
            machine.topics[name] = attrs.evolve(known, configs=stored)
            write: ControllerWrite = TopicConfigsWrite(
                group=group, cause=cause, topic=name, configs=stored
            )
            affected = [tp for tp in sorted(machine.partitions) if tp.topic == name]
        else:
            broker_id = int(name) if name else ct.ALL_BROKERS
            current = dict(machine.broker_configs.get(broker_id, ()))
            configs = apply_changes(current, payload.changes, replace=payload.replace)
            check_broker_configs(configs)
            stored = ct.topic_configs(configs)
            machine.on_broker_configs(broker_id, stored)
            write = BrokerConfigsWrite(
                group=group, cause=cause, broker_id=broker_id, configs=stored
            )
            applies = broker_id in (ct.ALL_BROKERS, machine.controller_id)
            affected = sorted(machine.partitions) if applies else []
    except (InvalidConfigError, ValueError) as exc:
        return _refuse(machine, request, ErrorCode.INVALID_CONFIG, str(exc), now_ms)
    done = machine.complete(request, group, ErrorCode.NONE, f"{name or '<default>'}: {stored}")
    return [write, done, *_elect_where_leaderless(machine, affected, now_ms)]


def _refuse(
    machine: AdminHost,
    request: ct.AdminRequest,
    error: ErrorCode,
    message: str,
    now_ms: int,
) -> list[ControllerWrite]:
    return list(machine.reject_request(request, error, message, now_ms).writes)


def _elect_where_leaderless(
    machine: AdminHost, tps: list[TopicPartition], now_ms: int
) -> list[ControllerWrite]:
    """Reconcile the leaderless partitions among ``tps`` whose policy now allows an unclean
    election (Kafka checks them periodically; here the change itself triggers it)."""
    writes: list[ControllerWrite] = []
    for tp in tps:
        registration = machine.partitions.get(tp)
        if registration is None or registration.has_leader:
            continue
        if machine.policy(tp).unclean_allowed:
            writes.extend(machine.reconcile_partition(tp, now_ms).writes)
    return writes


def elect_leader(
    machine: AdminHost, request: ct.AdminRequest, payload: ct.ElectLeader, now_ms: int
) -> list[ControllerWrite]:
    """One partition's preferred (or unclean) election, completed with its own outcome."""
    tp = TopicPartition(payload.topic, payload.partition)
    current = machine.partitions.get(tp)
    if current is None:
        message = f"unknown partition {tp}"
        return _refuse(machine, request, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, message, now_ms)
    election = (
        LeaderElectionStrategy.UNCLEAN if payload.unclean else LeaderElectionStrategy.PREFERRED
    )
    decision = decide_election(
        tp, current, machine.cluster, election, policy=machine.policy(tp), now_ms=now_ms,
        requester=Actor.admin(), controller=machine.actor,
    )  # fmt: skip
    group = machine.new_group()
    if not decision.ok:
        message = f"{tp}: {decision.error.name}"
        return [machine.complete(request, group, decision.error, message, decision.state_changes)]
    writes = machine.cas_writes(tp, decision, WriteCause(request=request), group)
    message = f"{tp}: {machine.partitions[tp].describe()}"
    return [*writes, machine.complete(request, group, ErrorCode.NONE, message)]
