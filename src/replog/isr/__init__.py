"""replog.isr: the replication core as sans-IO state machines (Kafka's current replication and
leader-epoch rules).

``Partition`` is one replica of one partition: leader-side ISR management, the high watermark,
acks and delayed produces/fetches, and follower-side fetch and truncation by leader epoch. It
never reads a clock or does IO: inputs carry ``now_ms``; outputs are values for the driver.
"""

from __future__ import annotations

from replog.isr.config import Acks, DurabilityMode, PartitionConfig
from replog.isr.follower import (
    FollowerAction,
    FollowerFetcher,
    FollowerOutcome,
    TruncationDecision,
    truncation_offset,
)
from replog.isr.isr_state import (
    Assignment,
    CommittedIsr,
    IsrState,
    PendingExpandIsr,
    PendingShrinkIsr,
)
from replog.isr.messages import (
    CONSUMER_REPLICA_ID,
    DEBUGGING_CONSUMER_ID,
    LeaderEpochEnd,
    PartitionFetchRequest,
    PartitionFetchResponse,
    PartitionReady,
    ProduceResult,
)
from replog.isr.partition import Partition, ReplicaRole
from replog.isr.purgatory import DelayedProduce, Purgatory
from replog.isr.replica import UNKNOWN_OFFSET, ReplicaState
from replog.isr.replica_log import BytesSlice, LogSlice, ReplicaLog
from replog.state_change import StateChange, StateChangeSink, discard_state_change

__all__ = [
    "CONSUMER_REPLICA_ID",
    "DEBUGGING_CONSUMER_ID",
    "UNKNOWN_OFFSET",
    "Acks",
    "Assignment",
    "BytesSlice",
    "CommittedIsr",
    "DelayedProduce",
    "DurabilityMode",
    "LeaderEpochEnd",
    "PartitionFetchRequest",
    "PartitionFetchResponse",
    "FollowerAction",
    "FollowerFetcher",
    "FollowerOutcome",
    "IsrState",
    "LogSlice",
    "Partition",
    "PartitionConfig",
    "PendingExpandIsr",
    "PendingShrinkIsr",
    "ProduceResult",
    "Purgatory",
    "PartitionReady",
    "ReplicaLog",
    "ReplicaState",
    "ReplicaRole",
    "StateChange",
    "StateChangeSink",
    "TruncationDecision",
    "discard_state_change",
    "truncation_offset",
]
