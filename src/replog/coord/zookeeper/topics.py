"""Topics and partition states in the ZooKeeper backend: ``/brokers/topics/<t>`` (the
assignment, Kafka's shape) and one ``.../partitions/<p>/state`` znode per partition, whose znode
version is the partition epoch. So a partition state's compare-and-set is
``set(version=expected)``, checked against the controller nodes in the same multi-op.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Any

from replog.coord import rules
from replog.coord.errors import FencedControllerError, UnknownTopicError
from replog.coord.zookeeper.controller import ZkController
from replog.coord.zookeeper.znode_io import Op, Plan, ZkIo, kazoo_errors
from replog.coord.zookeeper.znodes import (
    TOPICS,
    decode_state,
    decode_topic,
    encode_state,
    encode_topic,
    state_path,
)
from replog.metadata import records
from replog.metadata.types import CasResult, PartitionState, TopicAssignment, TopicConfigs

__all__ = ["TopicRead", "ZkTopics", "read_topic"]

TopicRead = tuple[TopicAssignment, Any, list[tuple[PartitionState, Any]]]
"""A topic as read: (assignment with current replicas, topic node stat, [(state, state stat)])."""


def read_topic(io: ZkIo, client: Any, topic: str, deadline: float) -> TopicRead | None:
    """The topic's nodes (None: no such topic, or deleted while being read), inside the
    caller's ``kazoo_errors``."""
    got = io.get(client, f"{TOPICS}/{topic}", deadline)
    if got is None:
        return None
    topic_id, count, configs = decode_topic(got[0])
    nodes = io.gets(client, [state_path(topic, p) for p in range(count)], deadline)
    states = []
    for node in nodes:
        if node is None:
            return None  # deleted meanwhile
        states.append((decode_state(node[0], node[1].version), node[1]))
    replicas = [s.replicas for s, _ in states]
    assignment = TopicAssignment(topic=topic, topic_id=topic_id, replicas=replicas, configs=configs)
    return assignment, got[1], states


def _partition_ops(
    topic: str, first: int, states: Sequence[PartitionState], controller_epoch: int
) -> list[Op]:
    ops: list[Op] = []
    for i, state in enumerate(states):
        base = f"{TOPICS}/{topic}/partitions/{first + i}"
        ops.append(("create", base, b"", False))
        ops.append(("create", f"{base}/state", encode_state(state, controller_epoch), False))
    return ops


class ZkTopics:
    """Topics and partition states: read with ``io`` and the ``main`` client, written as
    ``controller``'s writes. Callers pass deadlines (monotonic seconds)."""

    def __init__(self, io: ZkIo, main: Any, controller: ZkController) -> None:
        self._io = io
        self._main = main
        self._controller = controller

    def create(
        self,
        topic: str,
        assignment: Sequence[Sequence[int]],
        states: Sequence[PartitionState],
        configs: TopicConfigs,
        controller_epoch: int,
        deadline: float,
    ) -> TopicAssignment:
        """``create_topic`` with the values ``rules.new_topic`` made of its arguments
        (``configs`` go in the topic znode)."""
        io, controller = self._io, self._controller
        with kazoo_errors():
            client = controller.client_for(controller_epoch, deadline)

            def prepare(seq: int) -> Plan[TopicAssignment]:
                ops = controller.fence(client, controller_epoch, deadline)
                rules.check_topic_free(topic, io.children(client, TOPICS, deadline))
                result = TopicAssignment(
                    topic=topic, topic_id=uuid.uuid4().hex, replicas=assignment, configs=configs
                )
                base = f"{TOPICS}/{topic}"
                data = encode_topic(result.topic_id, assignment, configs)
                ops.append(("create", base, data, False))
                ops.append(("create", f"{base}/partitions", b"", False))
                ops += _partition_ops(topic, 0, states, controller_epoch)
                return Plan(result, ops, records.topic_created(seq, result, states))

            return io.transact(client, prepare, deadline)

    def delete(self, topic: str, controller_epoch: int, deadline: float) -> TopicAssignment:
        """``delete_topic``: the topic's znodes, deepest first, in one multi-op."""
        io, controller = self._io, self._controller
        with kazoo_errors():
            client = controller.client_for(controller_epoch, deadline)

            def prepare(seq: int) -> Plan[TopicAssignment]:
                ops = controller.fence(client, controller_epoch, deadline)
                read = read_topic(io, client, topic, deadline)
                if read is None:
                    raise UnknownTopicError(topic)
                removed, topic_stat, states = read
                base = f"{TOPICS}/{topic}"
                for p, (_, stat) in enumerate(states):
                    ops.append(("delete", f"{base}/partitions/{p}/state", stat.version))
                    ops.append(("delete", f"{base}/partitions/{p}", -1))
                ops.append(("delete", f"{base}/partitions", -1))
                ops.append(("delete", base, topic_stat.version))
                return Plan(removed, ops, records.topic_deleted(seq, removed))

            return io.transact(client, prepare, deadline)

    def add_partitions(
        self,
        topic: str,
        states: Sequence[PartitionState],
        controller_epoch: int,
        deadline: float,
    ) -> TopicAssignment:
        """``add_partitions`` with the states ``rules.new_partitions`` made of its arguments."""
        io, controller = self._io, self._controller
        with kazoo_errors():
            client = controller.client_for(controller_epoch, deadline)

            def prepare(seq: int) -> Plan[TopicAssignment]:
                ops = controller.fence(client, controller_epoch, deadline)
                read = read_topic(io, client, topic, deadline)
                if read is None:
                    raise UnknownTopicError(topic)
                current, topic_stat, _ = read
                first = current.partition_count
                result = rules.grown_assignment(current, states)
                data = encode_topic(result.topic_id, result.replicas, result.configs)
                ops.append(("set", f"{TOPICS}/{topic}", data, topic_stat.version))
                ops += _partition_ops(topic, first, states, controller_epoch)
                return Plan(result, ops, records.partitions_added(seq, result, first, states))

            return io.transact(client, prepare, deadline)

    def names(self, deadline: float) -> list[str]:
        """``list_topics``."""
        with kazoo_errors():
            return self._io.children(self._main, TOPICS, deadline)

    def get(self, topic: str, deadline: float) -> TopicAssignment | None:
        """``get_topic``."""
        with kazoo_errors():
            read = read_topic(self._io, self._main, topic, deadline)
        return None if read is None else read[0]

    def partition_state(self, topic: str, partition: int, deadline: float) -> PartitionState | None:
        """``get_partition_state``."""
        if partition < 0:
            return None
        with kazoo_errors():
            got = self._io.get(self._main, state_path(topic, partition), deadline)
        return None if got is None else decode_state(got[0], got[1].version)

    def compare_and_set(
        self,
        topic: str,
        partition: int,
        expected_partition_epoch: int,
        new_state: PartitionState,
        controller_epoch: int,
        deadline: float,
    ) -> CasResult:
        """``compare_and_set_partition_state`` (``new_state`` validated by the caller):
        ``set(version=expected)`` on the state znode, checked against the controller nodes, in
        one multi-op."""
        io, path, controller = self._io, state_path(topic, partition), self._controller
        with kazoo_errors():
            client = controller.client_for(controller_epoch, deadline)

            def prepare(seq: int) -> Plan[CasResult]:
                try:
                    ops = controller.fence(client, controller_epoch, deadline)
                except FencedControllerError as e:
                    return Plan(rules.cas_fenced(e), write=False)
                got = io.get(client, path, deadline) if partition >= 0 else None
                current = None if got is None else decode_state(got[0], got[1].version)
                stored = rules.cas_decision(current, expected_partition_epoch, new_state)
                if isinstance(stored, CasResult):
                    return Plan(stored, write=False)
                data = encode_state(stored, controller_epoch)
                ops.append(("set", path, data, expected_partition_epoch))
                done = records.partition_changed(seq, topic, partition, stored)
                return Plan(rules.cas_ok(stored, seq), ops, done)

            return io.transact(client, prepare, deadline)
