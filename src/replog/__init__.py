"""replog: an embeddable library for Kafka-style replicated partition logs.

The public API: ``Cluster`` (brokers in this process), ``Broker`` and ``BrokerConfig`` (one
broker), and the clients ``Producer``, ``Consumer`` and ``Admin``. Underneath, the storage engine
lives in ``replog.log``; the replication core (pure state machines) in ``replog.isr``; leader
election and controller decisions in ``replog.election``; metadata coordination backends in
``replog.coord``.
"""

from replog.broker import Broker, BrokerConfig, Cluster
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
