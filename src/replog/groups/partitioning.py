"""Which ``__consumer_offsets`` partition holds a group: Kafka's exact rule.

    partition = Utils.abs(groupId.hashCode()) % offsets.topic.num.partitions

``String.hashCode`` is Java's: h = 31 * h + c over the UTF-16 code units of the string (a
character outside the BMP counts as its two surrogates), in 32-bit two's-complement arithmetic.
``Utils.abs`` maps Integer.MIN_VALUE to 0 (Math.abs would leave it negative). Clients and
brokers must agree on this exactly: a group's coordinator is the leader of that partition.
"""

from __future__ import annotations

from replog.errors import invariant

__all__ = ["OFFSETS_TOPIC", "OFFSETS_TOPIC_PARTITIONS_DEFAULT", "java_string_hashcode"]
__all__ += ["partition_for"]

OFFSETS_TOPIC = "__consumer_offsets"
#: Kafka's ``offsets.topic.num.partitions`` default
OFFSETS_TOPIC_PARTITIONS_DEFAULT = 50

_INT32_MIN = -(2**31)


def java_string_hashcode(text: str) -> int:
    """Java's ``String.hashCode`` of ``text`` (a signed 32-bit int)."""
    utf16 = text.encode("utf-16-be", "surrogatepass")
    h = 0
    for index in range(0, len(utf16), 2):
        h = (31 * h + (utf16[index] << 8 | utf16[index + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h >= 1 << 31 else h


def partition_for(group_id: str, partition_count: int) -> int:
    """The ``__consumer_offsets`` partition of ``group_id`` among ``partition_count``."""
    invariant(partition_count > 0, f"partition count {partition_count} must be positive")
    h = java_string_hashcode(group_id)
    return (0 if h == _INT32_MIN else abs(h)) % partition_count
