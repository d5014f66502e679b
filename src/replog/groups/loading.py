"""Rebuilding a shard's state from its ``__consumer_offsets`` partition.

Replaying the records in log order leaves, per key, the latest value (a tombstone deletes), which
is all compaction keeps too. The result, as Kafka loads it:

- a group with metadata is Stable if the stored generation has members, else Empty; each member
  supports just the selected protocol (only its metadata was stored) and keeps its assignment;
- a group with offsets but no metadata is a simple group: Empty, generation 0, no protocol type;
- every loaded member's session starts at load time.

A record whose key is of an unknown kind is skipped and counted in ``LoadSummary``.
"""

from __future__ import annotations

import attrs

from replog.errors import CorruptRecordError
from replog.groups.core import ShardCore
from replog.groups.group import ClassicGroup, GroupState, Member, Protocol
from replog.groups.records import (
    GroupMetadataValue,
    GroupRecord,
    OffsetRecord,
    UnknownRecord,
    decode_record,
)
from replog.protocol.primitives import Buffer

__all__ = ["LoadSummary", "ShardLoader"]


@attrs.frozen
class LoadSummary:
    """What a load read."""

    records_read: int
    groups_loaded: int
    offsets_loaded: int
    unknown_records_skipped: int


class ShardLoader:
    """Accumulates a partition's records (in log order) before the shard is built."""

    def __init__(self) -> None:
        self._groups: dict[str, GroupMetadataValue] = {}
        self._offsets: dict[tuple[str, str, int], OffsetRecord] = {}
        self._records_read = 0
        self._unknown = 0

    def replay(self, key: Buffer, value: Buffer | None) -> None:
        """Apply one record (raises ``CorruptRecordError`` if it does not parse)."""
        self._records_read += 1
        record = decode_record(key, value)
        if isinstance(record, UnknownRecord):
            self._unknown += 1
        elif isinstance(record, OffsetRecord):
            key_of = (record.group_id, record.topic, record.partition)
            if record.value is None:
                self._offsets.pop(key_of, None)
            else:
                self._offsets[key_of] = record
        elif isinstance(record, GroupRecord):
            if record.value is None:
                self._groups.pop(record.group_id, None)
            else:
                self._groups[record.group_id] = record.value

    def populate(self, core: ShardCore, now_ms: int) -> LoadSummary:
        """Fill ``core`` (empty) with the replayed state."""
        for offset in self._offsets.values():
            core.offsets.apply(offset)
        for group_id, value in self._groups.items():
            core.groups[group_id] = _group_from_value(group_id, value, core, now_ms)
        for group_id, _, _ in self._offsets:
            if group_id not in core.groups:
                core.groups[group_id] = ClassicGroup(group_id, GroupState.EMPTY, now_ms)
        return LoadSummary(
            records_read=self._records_read,
            groups_loaded=len(core.groups),
            offsets_loaded=len(self._offsets),
            unknown_records_skipped=self._unknown,
        )


def _group_from_value(
    group_id: str, value: GroupMetadataValue, core: ShardCore, now_ms: int
) -> ClassicGroup:
    if value.members and value.protocol is None:
        raise CorruptRecordError(f"group {group_id!r}: members without a selected protocol")
    group = ClassicGroup(
        group_id,
        GroupState.STABLE if value.members else GroupState.EMPTY,
        None if value.current_state_timestamp == -1 else value.current_state_timestamp,
        generation_id=value.generation,
        protocol_type=value.protocol_type or None,
        protocol_name=value.protocol,
    )
    for stored in value.members:
        # v0 stored no rebalance timeout: the session timeout stood in for it.
        rebalance_timeout_ms = stored.rebalance_timeout
        if rebalance_timeout_ms == -1:
            rebalance_timeout_ms = stored.session_timeout
        if stored.member_id in group.members or (
            stored.group_instance_id is not None
            and stored.group_instance_id in group.static_members
        ):
            raise CorruptRecordError(f"group {group_id!r}: member {stored.member_id!r} twice")
        member = Member(
            member_id=stored.member_id,
            group_instance_id=stored.group_instance_id,
            client_id=stored.client_id,
            client_host=stored.client_host,
            rebalance_timeout_ms=rebalance_timeout_ms,
            session_timeout_ms=stored.session_timeout,
            protocol_type=value.protocol_type,
            protocols=(Protocol(value.protocol or "", bytes(stored.subscription)),),
            assignment=bytes(stored.assignment),
            heartbeat_deadline_ms=now_ms + stored.session_timeout,
        )
        group.add(member)
    if value.leader in group.members:
        group.leader_id = value.leader
    group.subscribed_topics = group.compute_subscribed_topics(core.subscription_reader)
    return group
