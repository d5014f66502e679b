"""Dynamic configs of the ZooKeeper backend: a topic's configs replaced in its topic znode, and
the dynamic broker configs in Kafka's znodes::

    /config/brokers/<id>         {"version":1,"config":{"k":"v"}}  (one broker)
    /config/brokers/<default>    the same, for the cluster-wide default (``ALL_BROKERS``)

A broker whose configs become empty loses its znode. Every write is one multi-op checked against
the controller nodes (``_fence``) and the versions it read, committed with its feed record.

``ZkConfigsMixin`` is a part of ``ZooKeeperCoordinator``: it uses the handle's state and
helpers, declared below, and is not used on its own.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from replog.coord import rules
from replog.coord.errors import UnknownTopicError
from replog.coord.zookeeper.znode_io import Op, Plan, ZkIo, kazoo_errors
from replog.coord.zookeeper.znodes import TOPICS, encode_topic
from replog.metadata import records
from replog.metadata.types import (
    ALL_BROKERS,
    PartitionState,
    TopicAssignment,
    TopicConfigs,
    topic_configs,
)

__all__ = ["BROKER_CONFIGS", "ZkConfigsMixin", "broker_config_path", "read_broker_configs"]

BROKER_CONFIGS = "/config/brokers"
_DEFAULT_NODE = "<default>"


def broker_config_path(broker_id: int) -> str:
    """The znode of ``broker_id``'s dynamic configs (``ALL_BROKERS``: ``<default>``)."""
    return f"{BROKER_CONFIGS}/{_DEFAULT_NODE if broker_id == ALL_BROKERS else broker_id}"


def _encode(configs: TopicConfigs) -> bytes:
    return json.dumps(
        {"version": 1, "config": dict(configs)}, separators=(",", ":"), sort_keys=True
    ).encode()


def _broker_of(name: str) -> int | None:
    if name == _DEFAULT_NODE:
        return ALL_BROKERS
    return int(name) if name.isascii() and name.isdigit() else None


def read_broker_configs(io: ZkIo, client: Any, deadline: float) -> dict[int, TopicConfigs]:
    """Every broker's dynamic configs under ``/config/brokers``, sorted by id (nodes that are
    not a broker id are ignored)."""
    names = [(n, b) for n in io.children(client, BROKER_CONFIGS, deadline) if (b := _broker_of(n))
             is not None]  # fmt: skip
    nodes = io.gets(client, [f"{BROKER_CONFIGS}/{n}" for n, _ in names], deadline)
    out: dict[int, TopicConfigs] = {}
    for (_, broker_id), node in zip(names, nodes, strict=True):
        if node is not None and node[0]:
            configs = topic_configs(json.loads(node[0]).get("config") or {})
            if configs:
                out[broker_id] = configs
    return dict(sorted(out.items()))


class ZkConfigsMixin:
    """The dynamic-config part of ``ZooKeeperCoordinator``."""

    _io: ZkIo
    _main: Any

    if TYPE_CHECKING:  # provided by ZooKeeperCoordinator; declared here for the type checker

        def _deadline(self, timeout_ms: int | None) -> float: ...

        def _controller_client(self, controller_epoch: int, deadline: float) -> Any: ...

        def _fence(self, client: Any, controller_epoch: int, deadline: float) -> list[Op]: ...

        def _read_topic(
            self, client: Any, topic: str, deadline: float
        ) -> tuple[TopicAssignment, Any, list[tuple[PartitionState, Any]]] | None: ...

    def alter_topic_configs(
        self,
        topic: str,
        configs: Mapping[str, str],
        *,
        controller_epoch: int,
        timeout_ms: int | None = None,
    ) -> TopicAssignment:
        """See ``Coordinator.alter_topic_configs`` (the configs live in the topic znode)."""
        stored = topic_configs(configs)
        deadline = self._deadline(timeout_ms)
        io = self._io
        with kazoo_errors():
            client = self._controller_client(controller_epoch, deadline)

            def prepare(seq: int) -> Plan[TopicAssignment]:
                ops = self._fence(client, controller_epoch, deadline)
                read = self._read_topic(client, topic, deadline)
                if read is None:
                    raise UnknownTopicError(topic)
                current, topic_stat, _ = read
                result = TopicAssignment(
                    topic=topic,
                    topic_id=current.topic_id,
                    replicas=current.replicas,
                    configs=stored,
                )
                data = encode_topic(result.topic_id, result.replicas, stored)
                ops.append(("set", f"{TOPICS}/{topic}", data, topic_stat.version))
                return Plan(result, ops, records.topic_configs_altered(seq, result))

            return io.transact(client, prepare, deadline)

    def alter_broker_configs(
        self,
        broker_id: int,
        configs: Mapping[str, str],
        *,
        controller_epoch: int,
        timeout_ms: int | None = None,
    ) -> None:
        """See ``Coordinator.alter_broker_configs``."""
        stored = rules.broker_configs_to_store(broker_id, configs)
        deadline = self._deadline(timeout_ms)
        io, path = self._io, broker_config_path(broker_id)
        with kazoo_errors():
            client = self._controller_client(controller_epoch, deadline)

            def prepare(seq: int) -> Plan[None]:
                ops = self._fence(client, controller_epoch, deadline)
                got = io.get(client, path, deadline)
                if got is None and stored:
                    ops.append(("create", path, _encode(stored), False))
                elif got is not None and stored:
                    ops.append(("set", path, _encode(stored), got[1].version))
                elif got is not None:
                    ops.append(("delete", path, got[1].version))
                return Plan(None, ops, records.broker_configs_altered(seq, broker_id, stored))

            io.transact(client, prepare, deadline)

    def broker_configs(self, *, timeout_ms: int | None = None) -> dict[int, TopicConfigs]:
        """See ``Coordinator.broker_configs``."""
        deadline = self._deadline(timeout_ms)
        with kazoo_errors():
            return read_broker_configs(self._io, self._main, deadline)
