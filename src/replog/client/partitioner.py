"""Choosing a partition for a record, the way Kafka's Java client does for keyed records.

Keyed records: ``(murmur2(key) & 0x7fffffff) % partition_count`` with Kafka's murmur2 variant
(seed 0x9747b28c, little-endian 4-byte blocks, the Java client's ``Utils.murmur2`` and
``Utils.toPositive``), so a key lands on the same partition as with kafka-python and the Java
producer (librdkafka's default is a different hash; its ``murmur2_random`` partitioner matches).

Keyless records go **round-robin** over the topic's partitions, per topic. (Kafka's newer
default, "sticky" partitioning, fills one partition's batch before moving on; round-robin
spreads load evenly record by record, which is simpler to reason about and to test.)
"""

from __future__ import annotations

import struct

import attrs

__all__ = ["DefaultPartitioner", "murmur2", "partition_for_key"]

_SEED = 0x9747B28C
_M = 0x5BD1E995
_R = 24
_MASK32 = 0xFFFFFFFF


def murmur2(data: bytes) -> int:
    """Kafka's 32-bit murmur2 of ``data`` as a signed int (as Java's ``Utils.murmur2`` returns)."""
    length = len(data)
    h = (_SEED ^ length) & _MASK32
    blocks = length // 4
    for (k,) in struct.iter_unpack("<I", data[: blocks * 4]):
        k = (k * _M) & _MASK32
        k ^= k >> _R
        k = (k * _M) & _MASK32
        h = (h * _M) & _MASK32
        h ^= k
    tail = blocks * 4
    extra = length - tail
    if extra == 3:
        h ^= data[tail + 2] << 16
    if extra >= 2:
        h ^= data[tail + 1] << 8
    if extra >= 1:
        h ^= data[tail]
        h = (h * _M) & _MASK32
    h ^= h >> 13
    h = (h * _M) & _MASK32
    h ^= h >> 15
    return h - (1 << 32) if h & 0x80000000 else h


def partition_for_key(key: bytes, partition_count: int) -> int:
    """The partition Kafka's default partitioner picks for ``key``."""
    if partition_count <= 0:
        raise ValueError(f"partition count {partition_count} must be positive")
    return (murmur2(key) & 0x7FFFFFFF) % partition_count


@attrs.define
class DefaultPartitioner:
    """murmur2 for keys, round-robin per topic for keyless records (see module doc)."""

    _next: dict[str, int] = attrs.field(factory=dict)

    def partition(self, topic: str, key: bytes | None, partition_count: int) -> int:
        """The partition for a record of ``topic`` with ``key``."""
        if key is not None:
            return partition_for_key(key, partition_count)
        index = self._next.get(topic, 0)
        self._next[topic] = index + 1
        return index % partition_count
