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
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import attrs

from replog.config_layers import apply_changes, check_broker_configs
from replog.election.controller_writes import (
    BrokerConfigsWrite,
    ControllerWrite,
    TopicConfigsWrite,
    WriteCause,
)
from replog.election.partition_change import LeaderElectionStrategy
from replog.election.rebalance import elect_leader as decide_election
from replog.election.state import TopicPartition
from replog.election.state_change import Actor
from replog.errors import ErrorCode, InvalidConfigError
from replog.metadata import types as ct
from replog.topic_config import parse_topic_configs

if TYPE_CHECKING:
    from replog.election.controller import ControllerMachine

__all__ = ["alter_configs", "elect_leader"]


def alter_configs(
    machine: ControllerMachine, request: ct.AdminRequest, payload: ct.AlterConfigs, now_ms: int
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
    machine: ControllerMachine,
    request: ct.AdminRequest,
    error: ErrorCode,
    message: str,
    now_ms: int,
) -> list[ControllerWrite]:
    return list(machine.reject_request(request, error, message, now_ms).writes)


def _elect_where_leaderless(
    machine: ControllerMachine, tps: list[TopicPartition], now_ms: int
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
    machine: ControllerMachine, request: ct.AdminRequest, payload: ct.ElectLeader, now_ms: int
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
