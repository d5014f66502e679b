"""replog's built-in metadata quorum: KRaft (KIP-595) as a sans-IO core with its storage.

This package: `RaftCore`, the pure protocol machine (elections with pre-vote,
replication by pull, the high watermark, divergence, snapshots); `RaftStorage`, the metadata
log ``__cluster_metadata-0`` with its ``quorum-state`` and snapshot files; `RaftNode`, the driver
that joins them to an owner's `StateMachine`. The deterministic simulator that checks them is
``replog.testing.raft_sim`` (``python -m replog.testing.raft_sim.sim``). The core replicates
opaque records and reports the committed offset; what the records mean is the owner's business.
"""

from __future__ import annotations

from replog.raft.config import RaftConfig
from replog.raft.core import RaftCore
from replog.raft.entries import Entry
from replog.raft.messages import Message, OffsetAndEpoch, Outbound, RaftSnapshotId
from replog.raft.node import RaftNode, StateMachine
from replog.raft.ready import LeaderAndEpoch, ProposeResult, Ready
from replog.raft.states import ElectionState, EpochState
from replog.raft.storage import METADATA_LOG_DIR, RaftStorage, metadata_log_config

__all__ = [
    "METADATA_LOG_DIR",
    "ElectionState",
    "Entry",
    "EpochState",
    "LeaderAndEpoch",
    "Message",
    "OffsetAndEpoch",
    "Outbound",
    "ProposeResult",
    "RaftConfig",
    "RaftCore",
    "RaftNode",
    "RaftStorage",
    "Ready",
    "RaftSnapshotId",
    "StateMachine",
    "metadata_log_config",
]
