"""Dynamic configs of the ZooKeeper backend: a topic's configs replaced in its topic znode, and
the dynamic broker configs in Kafka's znodes::

    /config/brokers/<id>         {"version":1,"config":{"k":"v"}}  (one broker)
    /config/brokers/<default>    the same, for the cluster-wide default (``ALL_BROKERS``)

A broker whose configs become empty loses its znode. Every write is one multi-op checked against
the controller nodes (``ZkController.fence``) and the versions it read, committed with its feed
record.
"""

from __future__ import annotations

import json
from typing import Any

from replog.coord.errors import UnknownTopicError
from replog.coord.zookeeper.controller import ZkController
from replog.coord.zookeeper.topics import read_topic
from replog.coord.zookeeper.znode_io import Plan, ZkIo, kazoo_errors
from replog.coord.zookeeper.znodes import TOPICS, encode_topic
from replog.metadata import records
from replog.metadata.types import ALL_BROKERS, TopicAssignment, TopicConfigs, topic_configs

__all__ = ["BROKER_CONFIGS", "ZkConfigs", "broker_config_path", "read_broker_configs"]

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


class ZkConfigs:
    """Dynamic topic and broker configs: read with ``io`` and the ``main`` client, written as
    ``controller``'s writes. Callers pass deadlines (monotonic seconds)."""

    def __init__(self, io: ZkIo, main: Any, controller: ZkController) -> None:
        self._io = io
        self._main = main
        self._controller = controller

    def alter_topic_configs(
        self, topic: str, stored: TopicConfigs, controller_epoch: int, deadline: float
    ) -> TopicAssignment:
        """``alter_topic_configs`` with the configs normalised (the configs live in the topic
        znode)."""
        io, controller = self._io, self._controller
        with kazoo_errors():
            client = controller.client_for(controller_epoch, deadline)

            def prepare(seq: int) -> Plan[TopicAssignment]:
                ops = controller.fence(client, controller_epoch, deadline)
                read = read_topic(io, client, topic, deadline)
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
        self, broker_id: int, stored: TopicConfigs, controller_epoch: int, deadline: float
    ) -> None:
        """``alter_broker_configs`` with the configs ``rules.broker_configs_to_store`` made."""
        io, path, controller = self._io, broker_config_path(broker_id), self._controller
        with kazoo_errors():
            client = controller.client_for(controller_epoch, deadline)

            def prepare(seq: int) -> Plan[None]:
                ops = controller.fence(client, controller_epoch, deadline)
                got = io.get(client, path, deadline)
                if got is None and stored:
                    ops.append(("create", path, _encode(stored), False))
                elif got is not None and stored:
                    ops.append(("set", path, _encode(stored), got[1].version))
                elif got is not None:
                    ops.append(("delete", path, got[1].version))
                return Plan(None, ops, records.broker_configs_altered(seq, broker_id, stored))

            io.transact(client, prepare, deadline)

    def broker_configs(self, deadline: float) -> dict[int, TopicConfigs]:
        """``broker_configs``."""
        with kazoo_errors():
            return read_broker_configs(self._io, self._main, deadline)
