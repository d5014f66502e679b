"""Dynamic configs of the etcd backend: a topic's configs replaced in its ``topics/<t>`` value,
and the dynamic broker configs under::

    configs/brokers/<id>          {"k": "v", ...}  (one broker)
    configs/brokers/<default>     the same, for the cluster-wide default (``ALL_BROKERS``)

A broker whose configs become empty loses its key. Every write is one txn guarded like the
other controller writes (``_guard``) and by the mod_revision of the key it replaces.

``EtcdConfigsMixin`` is a part of ``EtcdCoordinator``, not used on its own.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import TYPE_CHECKING

from replog.coord import rules
from replog.coord.errors import UnknownTopicError
from replog.coord.etcd_client import JsonObj, KeyValue, cmp_mod, op_delete, op_put, op_range
from replog.coord.etcd_txn import EtcdTxnBase, TxnPlan, mod_rev, plan
from replog.metadata import records
from replog.metadata.types import (
    ALL_BROKERS,
    MetadataChange,
    PartitionState,
    TopicAssignment,
    TopicConfigs,
    topic_configs,
)

__all__ = ["EtcdConfigsMixin", "decode_broker_configs"]

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


class EtcdConfigsMixin(EtcdTxnBase):
    """The dynamic-config part of ``EtcdCoordinator``."""

    if TYPE_CHECKING:  # provided by EtcdCoordinator; declared here for the type checker

        def _ctl_ops(self) -> list[JsonObj]: ...

        def _guard(self, controller_epoch: int, got: list[list[KeyValue]]) -> list[JsonObj]: ...

        def _topic_key(self, topic: str) -> str: ...

        def _topic_ops(self, topic: str) -> list[JsonObj]: ...

        def _assignment(
            self, topic: str, meta: list[KeyValue], parts: list[KeyValue]
        ) -> tuple[TopicAssignment, dict[int, PartitionState]] | None: ...

        def _put_topic(
            self, topic: str, topic_id: str, count: int, configs: TopicConfigs
        ) -> JsonObj: ...

    @property
    def _broker_configs_prefix(self) -> str:
        return self._k("configs/brokers/")

    def alter_topic_configs(
        self,
        topic: str,
        configs: Mapping[str, str],
        *,
        controller_epoch: int,
        timeout_ms: int | None = None,
    ) -> TopicAssignment:
        """See ``Coordinator.alter_topic_configs`` (the configs live in ``topics/<t>``)."""
        stored = topic_configs(configs)

        def attempt() -> TxnPlan[TopicAssignment]:
            last, seq_mod, got = self._seq_read(
                [*self._ctl_ops(), *self._topic_ops(topic)], timeout_ms
            )
            compares = self._guard(controller_epoch, got[:3])
            found = self._assignment(topic, got[3], got[4])
            if found is None:
                raise UnknownTopicError(topic)
            old = found[0]
            result = TopicAssignment(
                topic=topic, topic_id=old.topic_id, replicas=old.replicas, configs=stored
            )
            ops = [self._put_topic(topic, old.topic_id, old.partition_count, stored)]
            compares.append(cmp_mod(self._topic_key(topic), got[3][0].mod_revision))

            def build(seq: int) -> list[MetadataChange]:
                return records.topic_configs_altered(seq, result)

            return plan(last, seq_mod, compares, ops, build, lambda _: result)

        return self._run(timeout_ms, attempt)

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
        key = self._broker_configs_prefix + _name(broker_id)

        def attempt() -> TxnPlan[None]:
            last, seq_mod, got = self._seq_read([*self._ctl_ops(), op_range(key)], timeout_ms)
            compares = self._guard(controller_epoch, got[:3])
            compares.append(cmp_mod(key, mod_rev(got[3])))
            if stored:
                ops = [op_put(key, json.dumps(dict(stored), separators=(",", ":")))]
            else:
                ops = [op_delete(key)]

            def build(seq: int) -> list[MetadataChange]:
                return records.broker_configs_altered(seq, broker_id, stored)

            return plan(last, seq_mod, compares, ops, build, lambda _: None)

        self._run(timeout_ms, attempt)

    def broker_configs(self, *, timeout_ms: int | None = None) -> dict[int, TopicConfigs]:
        """See ``Coordinator.broker_configs``."""
        prefix = self._broker_configs_prefix
        (kvs,) = self._read([op_range(prefix, prefix=True)], timeout_ms)
        return decode_broker_configs(prefix, kvs)
