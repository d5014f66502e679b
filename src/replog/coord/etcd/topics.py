"""Topics and partition states in the etcd backend::

    topics/<t>                       {"topic_id", "partition_count", "configs": {k: v}}
                                     (no "configs": written before topics had them, none)
    topics/<t>/partitions/<p>/state  PartitionState, its partition epoch inside the value

Every write is a controller write (guarded by ``EtcdController.guard``) that also compares the
mod_revision of the keys it replaces, or that a key it creates is absent.
"""

from __future__ import annotations

import functools
import json
import uuid
from collections.abc import Sequence

from replog.coord import codec, rules
from replog.coord.errors import FencedControllerError, UnknownTopicError
from replog.coord.etcd.client import (
    JsonObj,
    KeyValue,
    cmp_create,
    cmp_mod,
    op_delete,
    op_put,
    op_range,
)
from replog.coord.etcd.controller import EtcdController
from replog.coord.etcd.store import Done, EtcdStore, Records, TxnPlan, plan
from replog.metadata import records
from replog.metadata.types import (
    CasResult,
    MetadataChange,
    PartitionState,
    TopicAssignment,
    TopicConfigs,
    topic_configs,
)

__all__ = ["EtcdTopics"]


class EtcdTopics:
    """Topics and partition states in ``store``, written as ``controller``'s writes."""

    def __init__(self, store: EtcdStore, controller: EtcdController) -> None:
        self._store = store
        self._controller = controller

    # ---- keys and values ----

    @property
    def prefix(self) -> str:
        """The prefix of every topic key."""
        return self._store.k("topics/")

    def topic_key(self, topic: str) -> str:
        """The key of ``topic``'s value (id, partition count, configs)."""
        return self._store.k(f"topics/{topic}")

    def _state_key(self, topic: str, partition: int) -> str:
        return self._store.k(f"topics/{topic}/partitions/{partition}/state")

    def topic_ops(self, topic: str) -> list[JsonObj]:
        """The reads ``assignment`` needs: the topic's value and every key below it."""
        return [
            op_range(self.topic_key(topic)),
            op_range(self.topic_key(topic) + "/", prefix=True),
        ]

    def assignment(
        self, topic: str, meta: list[KeyValue], parts: list[KeyValue]
    ) -> tuple[TopicAssignment, dict[int, PartitionState]] | None:
        """The topic and its partition states from the reads of ``topic_ops`` (None: absent)."""
        if not meta:
            return None
        info = json.loads(meta[0].value)
        base = self.topic_key(topic) + "/partitions/"
        states: dict[int, PartitionState] = {}
        for kv in parts:
            states[int(kv.key[len(base) :].split("/")[0])] = codec.loads(kv.value)
        replicas = [states[p].replicas for p in range(int(info["partition_count"]))]
        configs = topic_configs(info.get("configs") or {})
        assignment = TopicAssignment(
            topic=topic, topic_id=info["topic_id"], replicas=replicas, configs=configs
        )
        return assignment, states

    def put_topic(self, topic: str, topic_id: str, count: int, configs: TopicConfigs) -> JsonObj:
        """The put of ``topic``'s value."""
        meta = {"topic_id": topic_id, "partition_count": count, "configs": dict(configs)}
        return op_put(self.topic_key(topic), json.dumps(meta))

    # ---- the contract's calls ----

    def create(
        self,
        topic: str,
        assignment: Sequence[Sequence[int]],
        states: Sequence[PartitionState],
        stored: TopicConfigs,
        controller_epoch: int,
        timeout_ms: int | None,
    ) -> TopicAssignment:
        """``create_topic`` with the values ``rules.new_topic`` made of its arguments
        (``configs`` go in the ``topics/<t>`` value)."""
        store, controller, topics_p = self._store, self._controller, self.prefix

        def attempt() -> TxnPlan[TopicAssignment]:
            last, seq_mod, got = store.seq_read(
                [*controller.ctl_ops(), op_range(topics_p, prefix=True, keys_only=True)],
                timeout_ms,
            )
            compares = controller.guard(controller_epoch, got[:3])
            names = [kv.key[len(topics_p) :] for kv in got[3]]
            rules.check_topic_free(topic, (n for n in names if "/" not in n))
            result = TopicAssignment(
                topic=topic, topic_id=uuid.uuid4().hex, replicas=assignment, configs=stored
            )
            ops = [self.put_topic(topic, result.topic_id, len(states), stored)]
            ops += [op_put(self._state_key(topic, p), codec.dumps(s)) for p, s in enumerate(states)]
            compares.append(cmp_create(self.topic_key(topic), 0))

            def build(seq: int) -> list[MetadataChange]:
                return records.topic_created(seq, result, states)

            return plan(last, seq_mod, compares, ops, build, lambda _: result)

        return store.run(timeout_ms, attempt)

    def delete(self, topic: str, controller_epoch: int, timeout_ms: int | None) -> TopicAssignment:
        """``delete_topic``: the topic's value and every key below it."""
        store, controller = self._store, self._controller

        def attempt() -> TxnPlan[TopicAssignment]:
            last, seq_mod, got = store.seq_read(
                [*controller.ctl_ops(), *self.topic_ops(topic)], timeout_ms
            )
            compares = controller.guard(controller_epoch, got[:3])
            found = self.assignment(topic, got[3], got[4])
            if found is None:
                raise UnknownTopicError(topic)
            removed = found[0]
            key = self.topic_key(topic)
            ops = [op_delete(key), op_delete(key + "/", prefix=True)]
            compares.append(cmp_mod(key, got[3][0].mod_revision))
            build: Records = functools.partial(records.topic_deleted, removed=removed)
            return plan(last, seq_mod, compares, ops, build, lambda _: removed)

        return store.run(timeout_ms, attempt)

    def add_partitions(
        self,
        topic: str,
        states: Sequence[PartitionState],
        controller_epoch: int,
        timeout_ms: int | None,
    ) -> TopicAssignment:
        """``add_partitions`` with the states ``rules.new_partitions`` made of its arguments."""
        store, controller = self._store, self._controller

        def attempt() -> TxnPlan[TopicAssignment]:
            last, seq_mod, got = store.seq_read(
                [*controller.ctl_ops(), *self.topic_ops(topic)], timeout_ms
            )
            compares = controller.guard(controller_epoch, got[:3])
            found = self.assignment(topic, got[3], got[4])
            if found is None:
                raise UnknownTopicError(topic)
            old = found[0]
            first = old.partition_count
            result = rules.grown_assignment(old, states)
            ops = [self.put_topic(topic, old.topic_id, result.partition_count, old.configs)]
            ops += [
                op_put(self._state_key(topic, first + i), codec.dumps(s))
                for i, s in enumerate(states)
            ]
            compares.append(cmp_mod(self.topic_key(topic), got[3][0].mod_revision))

            def build(seq: int) -> list[MetadataChange]:
                return records.partitions_added(seq, result, first, states)

            return plan(last, seq_mod, compares, ops, build, lambda _: result)

        return store.run(timeout_ms, attempt)

    def names(self, timeout_ms: int | None) -> list[str]:
        """``list_topics``."""
        topics_p = self.prefix
        (kvs,) = self._store.read([op_range(topics_p, prefix=True, keys_only=True)], timeout_ms)
        return sorted(n for n in (kv.key[len(topics_p) :] for kv in kvs) if "/" not in n)

    def get(self, topic: str, timeout_ms: int | None) -> TopicAssignment | None:
        """``get_topic``."""
        meta, parts = self._store.read(self.topic_ops(topic), timeout_ms)
        found = self.assignment(topic, meta, parts)
        return None if found is None else found[0]

    def partition_state(
        self, topic: str, partition: int, timeout_ms: int | None
    ) -> PartitionState | None:
        """``get_partition_state``."""
        (kvs,) = self._store.read([op_range(self._state_key(topic, partition))], timeout_ms)
        state: PartitionState | None = codec.loads(kvs[0].value) if kvs else None
        return state

    def compare_and_set(
        self,
        topic: str,
        partition: int,
        expected_partition_epoch: int,
        new_state: PartitionState,
        controller_epoch: int,
        timeout_ms: int | None,
    ) -> CasResult:
        """``compare_and_set_partition_state`` (``new_state`` validated by the caller): a txn
        comparing the state key's mod_revision (and ``feed/seq``, and the controller's keys)."""
        store, controller = self._store, self._controller
        key = self._state_key(topic, partition)

        def attempt() -> TxnPlan[CasResult] | Done[CasResult]:
            last, seq_mod, got = store.seq_read([*controller.ctl_ops(), op_range(key)], timeout_ms)
            try:
                compares = controller.guard(controller_epoch, got[:3])
            except FencedControllerError as e:
                return Done(rules.cas_fenced(e))
            current: PartitionState | None = codec.loads(got[3][0].value) if got[3] else None
            stored = rules.cas_decision(current, expected_partition_epoch, new_state)
            if isinstance(stored, CasResult):
                return Done(stored)
            compares.append(cmp_mod(key, got[3][0].mod_revision))

            def build(seq: int) -> list[MetadataChange]:
                return records.partition_changed(seq, topic, partition, stored)

            ops = [op_put(key, codec.dumps(stored))]
            return plan(
                last, seq_mod, compares, ops, build, functools.partial(rules.cas_ok, stored)
            )

        return store.run(timeout_ms, attempt)
