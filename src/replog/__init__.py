"""replog: an embeddable library for Kafka-style replicated partition logs.

The public API: ``Cluster`` (brokers in this process), ``Broker`` and ``BrokerConfig`` (one
broker), and the clients ``Producer``, ``Consumer`` and ``Admin``. Underneath, the storage engine
lives in ``replog.log``; the replication core (pure state machines) in ``replog.isr``; leader
election and controller decisions in ``replog.election``; metadata coordination backends in
``replog.coord``.

Every class loads on first use (``replog.Producer`` imports the client, ``replog.Cluster`` the
broker runtime), so ``import replog`` costs almost nothing and a process that only runs clients
(a Spark task, an application) never imports the broker runtime, the coordinator backends and
their dependencies.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from replog.errors import (
    CorruptRecordError,
    InvalidConfigError,
    NotEnoughReplicasError,
    NotLeaderError,
    ReplogError,
    StorageError,
)
from replog.lazy_exports import lazy_exports

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
    from replog.client import Admin, Consumer, ConsumerRecord, Producer, RecordMetadata

#: where each lazily loaded name lives
_LAZY = {
    **dict.fromkeys(("Broker", "BrokerConfig", "Cluster"), "replog.broker"),
    **dict.fromkeys(
        ("Admin", "Consumer", "ConsumerRecord", "Producer", "RecordMetadata"), "replog.client"
    ),
}

__getattr__ = lazy_exports(__name__, _LAZY)
