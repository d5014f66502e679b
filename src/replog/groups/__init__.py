"""Consumer groups: a sans-IO classic group coordinator and the ``__consumer_offsets`` formats.

- ``GroupCoordinator`` (``coordinator``): every ``__consumer_offsets`` partition one broker
  leads; takes decoded group requests at any version and returns ``Effects`` (replies shaped for
  that version, records to write). ``GroupCoordinatorShard`` (``shard``) is one partition's
  groups; both are driven the same way (``effects`` says how).
- ``records``: the offset-commit and group-metadata records, ``partitioning``: which partition
  a group lives in, ``wire``: request/response shapes per version and FindCoordinator.
- Rules live where they apply: ``membership`` (JoinGroup, SyncGroup, Heartbeat, LeaveGroup),
  ``rebalance`` (join phases, assignments, timers), ``offsets`` (commit, fetch, delete,
  expiry), ``administration`` (list, describe, delete groups), ``loading`` (replay).

Nothing here reads a clock, touches a socket or a file, or draws randomness.
"""

from __future__ import annotations

from replog.groups.config import GroupConfig
from replog.groups.coordinator import GroupCoordinator
from replog.groups.effects import Effects, GroupReply, RequestId, Write
from replog.groups.group import ClassicGroup, GroupState, Member, SubscriptionReader
from replog.groups.loading import LoadSummary, ShardLoader
from replog.groups.partitioning import (
    OFFSETS_TOPIC,
    OFFSETS_TOPIC_PARTITIONS_DEFAULT,
    java_string_hashcode,
    partition_for,
)
from replog.groups.records import RawRecord
from replog.groups.shard import GroupCoordinatorShard
from replog.groups.wire import Endpoint, find_coordinator

__all__ = [
    "OFFSETS_TOPIC",
    "OFFSETS_TOPIC_PARTITIONS_DEFAULT",
    "ClassicGroup",
    "Effects",
    "Endpoint",
    "GroupConfig",
    "GroupCoordinator",
    "GroupCoordinatorShard",
    "GroupState",
    "LoadSummary",
    "Member",
    "RawRecord",
    "GroupReply",
    "RequestId",
    "ShardLoader",
    "SubscriptionReader",
    "Write",
    "find_coordinator",
    "java_string_hashcode",
    "partition_for",
]
