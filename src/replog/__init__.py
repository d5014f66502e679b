"""replog: an embeddable library for Kafka-style replicated partition logs.

The public API: ``Cluster`` (brokers in this process), ``Broker`` and ``BrokerConfig`` (one
broker), and the clients ``Producer``, ``Consumer`` and ``Admin``. Underneath, the storage engine
lives in ``replog.log``; the replication core (pure state machines) in ``replog.isr``; leader
election and controller decisions in ``replog.election``; metadata coordination backends in
``replog.coord``.

The broker classes load on first use, so a process that only runs clients (a Spark task, an
application) does not import the broker runtime, the coordinator backends and their
dependencies.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from replog.client import Admin, Consumer, ConsumerRecord, Producer, RecordMetadata
from replog.errors import (
    CorruptRecordError,
    InvalidConfigError,
    NotEnoughReplicasError,
    NotLeaderError,
    ReplogError,
    StorageError,
)

__all__ = [
    "Admin",
    "Broker",
    "BrokerConfig",
    "Cluster",
    "Consumer",
    "ConsumerRecord",
    "CorruptRecordError",
    "InvalidConfigError",
    "NotEnoughReplicasError",
    "NotLeaderError",
    "Producer",
    "RecordMetadata",
    "ReplogError",
    "StorageError",
    "__version__",
]

__version__ = "0.1.0"

if TYPE_CHECKING:
    from replog.broker import Broker, BrokerConfig, Cluster

_LAZY = frozenset({"Broker", "BrokerConfig", "Cluster"})


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        from replog import broker

        value = getattr(broker, name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'replog' has no attribute {name!r}")
