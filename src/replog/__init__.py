"""replog: an embeddable library for Kafka-style replicated partition logs.

The storage engine lives in ``replog.log``; the replication core (pure state machines) in
``replog.isr``; leader election and controller decisions in ``replog.election``; metadata
coordination backends in ``replog.coord``.
"""

from replog.errors import (
    CorruptRecordError,
    InvalidConfigError,
    NotEnoughReplicasError,
    NotLeaderError,
    ReplogError,
    StorageError,
)

__all__ = [
    "CorruptRecordError",
    "InvalidConfigError",
    "NotEnoughReplicasError",
    "NotLeaderError",
    "ReplogError",
    "StorageError",
    "__version__",
]

__version__ = "0.1.0"
