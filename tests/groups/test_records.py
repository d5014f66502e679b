"""The ``__consumer_offsets`` record formats and the partition a group maps to."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from replog.errors import CorruptRecordError
from replog.groups.partitioning import java_string_hashcode, partition_for
from replog.groups.records import (
    _GROUP_VALUE,
    _OFFSET_VALUE,
    GroupMetadataValue,
    GroupRecord,
    MemberMetadata,
    OffsetCommitValue,
    OffsetRecord,
    UnknownRecord,
    decode_record,
    encode_record,
    value_version_of,
)
from tests.protocol.strategies import struct_strategy

# (group id, String.hashCode(), partition of 50, partition of 7), printed by a Java 17 program
# (`k.hashCode()` and `Utils.abs(h) % n` with Kafka's Utils.abs).
JAVA_VALUES = [
    ("", 0, 0, 0),
    ("a", 97, 47, 6),
    ("hello", 99162322, 22, 0),
    ("polygenelubricants", -2147483648, 0, 0),
    ("my-group", -1906497762, 12, 1),
    ("console-consumer-42", 1109249087, 37, 2),
    ("Hello World", -862545276, 26, 5),
    ("group\u00e9", -1237460406, 6, 0),
    ("emoji \U0001f600", 1164498813, 13, 2),
    ("spark-kafka-source-0123456789abcdef-driver-0", -766591787, 37, 3),
    ("test-group-7", 2060176942, 42, 5),
]


@pytest.mark.parametrize(("group_id", "hashcode", "of_50", "of_7"), JAVA_VALUES)
def test_partition_for_matches_kafka(group_id: str, hashcode: int, of_50: int, of_7: int) -> None:
    assert java_string_hashcode(group_id) == hashcode
    assert partition_for(group_id, 50) == of_50
    assert partition_for(group_id, 7) == of_7


def _s(text: str) -> bytes:
    data = text.encode()
    return struct.pack(">h", len(data)) + data


def test_offset_commit_record_bytes_are_kafkas_key_v1_value_v3() -> None:
    value = OffsetCommitValue(offset=42, leader_epoch=3, metadata="m", commit_timestamp=1000)
    key, encoded = encode_record(OffsetRecord("g", "t", 5, value))
    assert key == struct.pack(">h", 1) + _s("g") + _s("t") + struct.pack(">i", 5)
    assert encoded == struct.pack(">hqi", 3, 42, 3) + _s("m") + struct.pack(">q", 1000)
    assert decode_record(key, encoded) == OffsetRecord("g", "t", 5, value)


def test_an_offset_with_an_expiry_is_written_as_value_v1() -> None:
    value = OffsetCommitValue(offset=1, metadata="", commit_timestamp=10, expire_timestamp=99)
    _, encoded = encode_record(OffsetRecord("g", "t", 0, value))
    assert encoded is not None
    assert encoded == struct.pack(">hq", 1, 1) + _s("") + struct.pack(">qq", 10, 99)
    assert decode_record(*encode_record(OffsetRecord("g", "t", 0, value))) == OffsetRecord(
        "g", "t", 0, value
    )


def test_group_metadata_record_bytes_are_kafkas_key_v2_value_v3() -> None:
    member = MemberMetadata(
        member_id="m1",
        group_instance_id=None,
        client_id="c",
        client_host="/h",
        rebalance_timeout=300,
        session_timeout=100,
        subscription=b"S",
        assignment=b"A",
    )
    value = GroupMetadataValue(
        protocol_type="consumer",
        generation=7,
        protocol="range",
        leader="m1",
        current_state_timestamp=123,
        members=[member],
    )
    key, encoded = encode_record(GroupRecord("grp", value))
    assert key == struct.pack(">h", 2) + _s("grp")
    expected_member = (
        _s("m1")
        + struct.pack(">h", -1)  # null group instance id
        + _s("c")
        + _s("/h")
        + struct.pack(">ii", 300, 100)
        + struct.pack(">i", 1)
        + b"S"
        + struct.pack(">i", 1)
        + b"A"
    )
    assert encoded == (
        struct.pack(">h", 3)
        + _s("consumer")
        + struct.pack(">i", 7)
        + _s("range")
        + _s("m1")
        + struct.pack(">q", 123)
        + struct.pack(">i", 1)
        + expected_member
    )
    assert decode_record(key, encoded) == GroupRecord("grp", value)


def test_tombstones_have_a_null_value() -> None:
    assert encode_record(OffsetRecord("g", "t", 1, None))[1] is None
    key, value = encode_record(GroupRecord("g", None))
    assert value is None
    assert decode_record(key, None) == GroupRecord("g", None)


@pytest.mark.parametrize("version", [0, 1, 2, 3, 4])
@settings(max_examples=30, deadline=None)
@given(data=st.data())
def test_every_offset_value_version_decodes(version: int, data: st.DataObject) -> None:
    value = data.draw(struct_strategy(OffsetCommitValue, version, version >= 4))
    key, _ = encode_record(OffsetRecord("g", "t", 0, None))
    encoded = _OFFSET_VALUE.encode(value, version)
    assert value_version_of(encoded) == version
    assert decode_record(key, encoded) == OffsetRecord("g", "t", 0, value)


@pytest.mark.parametrize("version", [0, 1, 2, 3, 4])
@settings(max_examples=30, deadline=None)
@given(data=st.data())
def test_every_group_value_version_decodes(version: int, data: st.DataObject) -> None:
    value = data.draw(struct_strategy(GroupMetadataValue, version, version >= 4))
    key, _ = encode_record(GroupRecord("g", None))
    decoded = decode_record(key, _GROUP_VALUE.encode(value, version))
    assert decoded == GroupRecord("g", value)
    assert isinstance(decoded, GroupRecord) and decoded.value is not None
    for member in decoded.value.members:
        assert type(member.subscription) is bytes and type(member.assignment) is bytes


def test_an_unknown_key_version_is_reported_not_dropped_silently() -> None:
    assert decode_record(struct.pack(">h", 3) + _s("g"), b"whatever") == UnknownRecord(3)


def test_a_newer_value_version_is_corrupt_not_guessed() -> None:
    key, _ = encode_record(OffsetRecord("g", "t", 0, None))
    with pytest.raises(CorruptRecordError, match="unsupported version 5"):
        decode_record(key, struct.pack(">hq", 5, 1))


def test_a_truncated_record_is_corrupt() -> None:
    key, value = encode_record(
        OffsetRecord("g", "t", 0, OffsetCommitValue(offset=1, metadata="", commit_timestamp=2))
    )
    assert value is not None
    with pytest.raises(CorruptRecordError):
        decode_record(key, value[:-1])
    with pytest.raises(CorruptRecordError):
        decode_record(key[:-1], value)
