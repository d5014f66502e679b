"""The records of ``__consumer_offsets``: committed offsets and classic group metadata.

Each record is a key and a value, both version-prefixed (``replog.protocol.versioned``); the key
version says which kind of record it is. A null value (tombstone) deletes the key, so once the
topic is compacted the latest record per key is the state. Layouts (Kafka's OffsetCommitKey/
Value.json and GroupMetadataKey/Value.json in group-coordinator/src/main/resources):

    key v0, v1   OffsetCommitKey    group string, topic string, partition int32
    key v2       GroupMetadataKey   group string

    OffsetCommitValue v0-v4 (v4 flexible)
        offset            int64
        leader_epoch      int32, -1 = none                 v3+
        metadata          string
        commit_timestamp  int64
        expire_timestamp  int64, -1 = none                 v1 only

    GroupMetadataValue v0-v4 (v4 flexible)
        protocol_type            string ("" = none)
        generation               int32
        protocol                 nullable string (the selected protocol name)
        leader                   nullable string (member id)
        current_state_timestamp  int64, -1 = unknown       v2+
        members                  [MemberMetadata]
    MemberMetadata
        member_id          string
        group_instance_id  nullable string                  v3+
        client_id          string
        client_host        string
        rebalance_timeout  int32 (v0: the session timeout)  v1+
        session_timeout    int32
        subscription       bytes (the selected protocol's metadata)
        assignment         bytes

Kafka (3.x and 4.x) writes offset key v1 with value v3, or value v1 when the commit carried an
explicit retention (OffsetCommit v2-v4), and group key v2 with value v3; so does replog. Every
known version is read. A key version neither kind knows (KIP-848 consumer-group records, for
instance) decodes to ``UnknownRecord`` so a loader can count what it skipped.
"""

# `field(...)` is an attrs field specifier (schema.field wraps attrs.field); ruff cannot tell.
# ruff: noqa: RUF009

from __future__ import annotations

import attrs

from replog.errors import CorruptRecordError, ProtocolError
from replog.protocol.primitives import Buffer
from replog.protocol.schema import BYTES, INT32, INT64, STRING, array, field
from replog.protocol.versioned import VersionedFormat, read_version

__all__ = [
    "CoordinatorRecord",
    "GroupMetadataKey",
    "GroupMetadataValue",
    "GroupRecord",
    "MemberMetadata",
    "OffsetCommitKey",
    "OffsetCommitValue",
    "OffsetRecord",
    "RawRecord",
    "UnknownRecord",
    "decode_record",
    "encode_record",
]

RawRecord = tuple[bytes, bytes | None]
"""A (key, value) pair as appended to ``__consumer_offsets``; value None is a tombstone."""

_OFFSET_KEY = VersionedFormat("OffsetCommitKey", "0-1", flexible_from=None, newer_as_highest=False)
_GROUP_KEY = VersionedFormat("GroupMetadataKey", "2", flexible_from=None, newer_as_highest=False)
_OFFSET_VALUE = VersionedFormat("OffsetCommitValue", "0-4", flexible_from=4, newer_as_highest=False)
_GROUP_VALUE = VersionedFormat("GroupMetadataValue", "0-4", flexible_from=4, newer_as_highest=False)

OFFSET_KEY_VERSION = 1
GROUP_KEY_VERSION = 2
OFFSET_VALUE_VERSION = 3
OFFSET_VALUE_VERSION_WITH_EXPIRY = 1
GROUP_VALUE_VERSION = 3


@attrs.frozen(kw_only=True)
class OffsetCommitKey:
    """The key of a committed offset."""

    group: str = field(STRING, "0-1")
    topic: str = field(STRING, "0-1")
    partition: int = field(INT32, "0-1")


@attrs.frozen(kw_only=True)
class OffsetCommitValue:
    """A committed offset, as stored."""

    offset: int = field(INT64, "0+")
    leader_epoch: int = field(INT32, "3+", default=-1, ignorable=True)
    metadata: str = field(STRING, "0+")
    commit_timestamp: int = field(INT64, "0+")
    expire_timestamp: int = field(INT64, "1", default=-1, ignorable=True)


@attrs.frozen(kw_only=True)
class GroupMetadataKey:
    """The key of a group's metadata."""

    group: str = field(STRING, "2")


@attrs.frozen(kw_only=True)
class MemberMetadata:
    """One member of a stored generation."""

    member_id: str = field(STRING, "0+")
    group_instance_id: str | None = field(STRING, "3+", nullable="3+", default=None, ignorable=True)
    client_id: str = field(STRING, "0+")
    client_host: str = field(STRING, "0+")
    rebalance_timeout: int = field(INT32, "1+", default=-1, ignorable=True)
    session_timeout: int = field(INT32, "0+")
    subscription: bytes = field(BYTES, "0+")
    assignment: bytes = field(BYTES, "0+")


@attrs.frozen(kw_only=True)
class GroupMetadataValue:
    """A classic group's stored generation: protocol, leader, members and assignments."""

    protocol_type: str = field(STRING, "0+")
    generation: int = field(INT32, "0+")
    protocol: str | None = field(STRING, "0+", nullable="0+")
    leader: str | None = field(STRING, "0+", nullable="0+")
    current_state_timestamp: int = field(INT64, "2+", default=-1, ignorable=True)
    members: list[MemberMetadata] = field(array(MemberMetadata), "0+")


@attrs.frozen
class OffsetRecord:
    """A committed offset of ``group_id`` for one partition; ``value`` None deletes it."""

    group_id: str
    topic: str
    partition: int
    value: OffsetCommitValue | None


@attrs.frozen
class GroupRecord:
    """The metadata of ``group_id``; ``value`` None deletes the group."""

    group_id: str
    value: GroupMetadataValue | None


@attrs.frozen
class UnknownRecord:
    """A record whose key version is neither an offset nor a classic group's metadata."""

    key_version: int


CoordinatorRecord = OffsetRecord | GroupRecord


def encode_record(record: CoordinatorRecord) -> RawRecord:
    """The (key, value) bytes of ``record``, in the versions Kafka writes."""
    if isinstance(record, OffsetRecord):
        key = _OFFSET_KEY.encode(
            OffsetCommitKey(group=record.group_id, topic=record.topic, partition=record.partition),
            OFFSET_KEY_VERSION,
        )
        if record.value is None:
            return key, None
        version = (
            OFFSET_VALUE_VERSION
            if record.value.expire_timestamp == -1
            else OFFSET_VALUE_VERSION_WITH_EXPIRY
        )
        return key, _OFFSET_VALUE.encode(record.value, version)
    key = _GROUP_KEY.encode(GroupMetadataKey(group=record.group_id), GROUP_KEY_VERSION)
    if record.value is None:
        return key, None
    return key, _GROUP_VALUE.encode(record.value, GROUP_VALUE_VERSION)


def decode_record(key: Buffer, value: Buffer | None) -> CoordinatorRecord | UnknownRecord:
    """Read one record; raises ``CorruptRecordError`` if a known kind does not parse."""
    try:
        key_version = read_version(key)
        if key_version in _OFFSET_KEY.versions:
            _, offset_key = _OFFSET_KEY.decode(key, OffsetCommitKey)
            offset_value = None
            if value is not None:
                _, offset_value = _OFFSET_VALUE.decode(value, OffsetCommitValue)
            return OffsetRecord(
                offset_key.group, offset_key.topic, offset_key.partition, offset_value
            )
        if key_version in _GROUP_KEY.versions:
            _, group_key = _GROUP_KEY.decode(key, GroupMetadataKey)
            group_value = None
            if value is not None:
                _, group_value = _GROUP_VALUE.decode(value, GroupMetadataValue)
                group_value = _owned(group_value)
            return GroupRecord(group_key.group, group_value)
    except ProtocolError as e:
        raise CorruptRecordError(f"__consumer_offsets record: {e}") from e
    return UnknownRecord(key_version)


def _owned(value: GroupMetadataValue) -> GroupMetadataValue:
    """Copy the members' byte fields out of the decoded buffer (they outlive it)."""
    members = [
        attrs.evolve(m, subscription=bytes(m.subscription), assignment=bytes(m.assignment))
        for m in value.members
    ]
    return attrs.evolve(value, members=members)


def value_version_of(value: Buffer) -> int:
    """The version prefix of a stored value (for tests and tools)."""
    return read_version(value)
