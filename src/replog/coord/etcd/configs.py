"""Dynamic configs of the etcd backend: a topic's configs replaced in its ``topics/<t>`` value,
and the dynamic broker configs under::

    configs/brokers/<id>          {"k": "v", ...}  (one broker)
    configs/brokers/<default>     the same, for the cluster-wide default (``ALL_BROKERS``)

A broker whose configs become empty loses its key. Every write is one txn guarded like the
other controller writes (``EtcdController.guard``) and by the mod_revision of the key it
replaces.
"""

from __future__ import annotations

import json

from replog.coord.errors import UnknownTopicError
from replog.coord.etcd.client import KeyValue, cmp_mod, op_delete, op_put, op_range
from replog.coord.etcd.controller import EtcdController
from replog.coord.etcd.store import EtcdStore, TxnPlan, mod_rev, plan
from replog.coord.etcd.topics import EtcdTopics
from replog.metadata import records
from replog.metadata.types import (
    ALL_BROKERS,
    MetadataChange,
    TopicAssignment,
    TopicConfigs,
    topic_configs,
)

__all__ = ["EtcdConfigs", "decode_broker_configs"]

_DEFAULT_KEY = "<default>"


def _name(broker_id: int) -> str:
    return _DEFAULT_KEY if broker_id == ALL_BROKERS else str(broker_id)


def decode_broker_configs(prefix: str, kvs: list[KeyValue]) -> dict[int, TopicConfigs]:
    """The broker configs held by the keys ``kvs`` under ``prefix``, sorted by broker id."""
    out: dict[int, TopicConfigs] = {}
    for kv in kvs:
        name = kv.key[len(prefix) :]
        if name == _DEFAULT_KEY:
            broker_id = ALL_BROKERS
        elif name.isascii() and name.isdigit():
            broker_id = int(name)
        else:
            continue
        configs = topic_configs(json.loads(kv.value))
        if configs:
            out[broker_id] = configs
    return dict(sorted(out.items()))


class EtcdConfigs:
    """Dynamic topic and broker configs in ``store``, written as ``controller``'s writes; a
    topic's configs live in its ``topics/<t>`` value, kept by ``topics``."""

    def __init__(self, store: EtcdStore, controller: EtcdController, topics: EtcdTopics) -> None:
        self._store = store
        self._controller = controller
        self._topics = topics

    @property
    def broker_configs_prefix(self) -> str:
        """The prefix of every broker's configs key."""
        return self._store.k("configs/brokers/")

    def alter_topic_configs(
        self,
        topic: str,
        stored: TopicConfigs,
        controller_epoch: int,
        timeout_ms: int | None,
    ) -> TopicAssignment:
        """``alter_topic_configs`` with the configs normalised (the configs live in
        ``topics/<t>``)."""
        store, controller, topics = self._store, self._controller, self._topics

        def attempt() -> TxnPlan[TopicAssignment]:
            last, seq_mod, got = store.seq_read(
                [*controller.ctl_ops(), *topics.topic_ops(topic)], timeout_ms
            )
            compares = controller.guard(controller_epoch, got[:3])
            found = topics.assignment(topic, got[3], got[4])
            if found is None:
                raise UnknownTopicError(topic)
            old = found[0]
            result = TopicAssignment(
                topic=topic, topic_id=old.topic_id, replicas=old.replicas, configs=stored
            )
            ops = [topics.put_topic(topic, old.topic_id, old.partition_count, stored)]
            compares.append(cmp_mod(topics.topic_key(topic), got[3][0].mod_revision))

            def build(seq: int) -> list[MetadataChange]:
                return records.topic_configs_altered(seq, result)

            return plan(last, seq_mod, compares, ops, build, lambda _: result)

        return store.run(timeout_ms, attempt)

    def alter_broker_configs(
        self,
        broker_id: int,
        stored: TopicConfigs,
        controller_epoch: int,
        timeout_ms: int | None,
    ) -> None:
        """``alter_broker_configs`` with the configs ``rules.broker_configs_to_store`` made."""
        store, controller = self._store, self._controller
        key = self.broker_configs_prefix + _name(broker_id)

        def attempt() -> TxnPlan[None]:
            last, seq_mod, got = store.seq_read([*controller.ctl_ops(), op_range(key)], timeout_ms)
            compares = controller.guard(controller_epoch, got[:3])
            compares.append(cmp_mod(key, mod_rev(got[3])))
            if stored:
                ops = [op_put(key, json.dumps(dict(stored), separators=(",", ":")))]
            else:
                ops = [op_delete(key)]

            def build(seq: int) -> list[MetadataChange]:
                return records.broker_configs_altered(seq, broker_id, stored)

            return plan(last, seq_mod, compares, ops, build, lambda _: None)

        store.run(timeout_ms, attempt)

    def broker_configs(self, timeout_ms: int | None) -> dict[int, TopicConfigs]:
        """``broker_configs``."""
        prefix = self.broker_configs_prefix
        (kvs,) = self._store.read([op_range(prefix, prefix=True)], timeout_ms)
        return decode_broker_configs(prefix, kvs)
