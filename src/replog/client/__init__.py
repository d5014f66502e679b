"""replog's clients: producer, consumer and admin, each in an asyncio form (``Async*``) and a
synchronous form that runs the asyncio one on a background event-loop thread.

They speak the Kafka wire protocol (``replog.protocol``) to replog brokers, and to any broker
serving the same API versions.
"""

from __future__ import annotations

from replog.client.accumulator import RecordMetadata
from replog.client.admin import (
    Admin,
    AsyncAdmin,
    BrokerDescription,
    ClusterDescription,
    PartitionDescription,
    TopicDescription,
)
from replog.client.admin_ops import ConfigEntry
from replog.client.consumer import AsyncConsumer
from replog.client.consumer_config import ConsumerConfig
from replog.client.errors import (
    BrokerResponseError,
    BufferFullError,
    ClientClosedError,
    ConnectionLostError,
    DeliveryTimeoutError,
    FlushTimeoutError,
    LogTruncationError,
    NoOffsetForPartitionError,
    RetriableBrokerResponseError,
)
from replog.client.fetching import ConsumerRecord
from replog.client.group import CommitFailedError, OffsetAndMetadata
from replog.client.offsets import OffsetAndTimestamp
from replog.client.partition_admin import (
    ElectionResult,
    ElectionType,
    LogDirDescription,
    PartitionReassignment,
    ReplicaLogDescription,
)
from replog.client.partitioner import murmur2, partition_for_key
from replog.client.producer import AsyncProducer, Producer, ProducerConfig
from replog.client.sync_consumer import Consumer

__all__ = [
    "Admin",
    "AsyncAdmin",
    "AsyncConsumer",
    "AsyncProducer",
    "BrokerDescription",
    "BrokerResponseError",
    "BufferFullError",
    "ClientClosedError",
    "DeliveryTimeoutError",
    "FlushTimeoutError",
    "ClusterDescription",
    "CommitFailedError",
    "ConfigEntry",
    "ConnectionLostError",
    "Consumer",
    "ConsumerConfig",
    "ConsumerRecord",
    "ElectionResult",
    "ElectionType",
    "LogDirDescription",
    "LogTruncationError",
    "NoOffsetForPartitionError",
    "OffsetAndMetadata",
    "OffsetAndTimestamp",
    "PartitionDescription",
    "PartitionReassignment",
    "Producer",
    "ProducerConfig",
    "RecordMetadata",
    "ReplicaLogDescription",
    "RetriableBrokerResponseError",
    "TopicDescription",
    "murmur2",
    "partition_for_key",
]
