"""`OffsetMap`: the log cleaner's map from a record key to the latest offset of that key, in a
bounded amount of memory (Kafka's ``SkimpyOffsetMap``).

A key is stored as its 16-byte MD5 digest (Kafka's default ``log.cleaner.hash.algorithm``), so
the map never holds the keys themselves and two different keys collide with probability about
2**-128. The capacity comes from the memory it may use, ``log.cleaner.dedupe.buffer.size``:
Kafka counts 24 bytes a slot (digest + offset) and fills the slots up to a load factor of 0.9;
here an entry is a CPython dict slot plus a 16-byte ``bytes`` and an ``int``, measured at about
`ENTRY_BYTES` bytes, so the same buffer holds fewer keys than Kafka's and the memory the map
really takes stays within the buffer (tests measure it). When the map is full the cleaner stops
reading the dirty section there and cleans what it has mapped; the rest waits for the next round.

``latest_offset`` is the largest offset the map has covered (every record up to it with a key is
in the map): records above it are always kept.
"""

from __future__ import annotations

import hashlib

import attrs

from replog.errors import InvalidConfigError

__all__ = ["ENTRY_BYTES", "LOAD_FACTOR", "OffsetMap"]

ENTRY_BYTES = 160
"""Measured bytes per entry: a dict slot with its share of the table at the dict's load, a
16-byte ``bytes`` object (49 bytes, rounded up by the allocator) and an ``int`` offset."""
LOAD_FACTOR = 0.9
"""Kafka's ``log.cleaner.io.buffer.load.factor`` default: how full the map may get."""


def key_digest(key: bytes) -> bytes:
    """The 16 bytes a key is stored as."""
    return hashlib.md5(key, usedforsecurity=False).digest()


@attrs.define(eq=False)
class OffsetMap:
    """Key digest -> latest offset, holding at most ``capacity`` keys. Create with
    `OffsetMap.for_memory`."""

    capacity: int
    _offsets: dict[bytes, int] = attrs.field(factory=dict)
    latest_offset: int = -1

    @classmethod
    def for_memory(cls, memory_bytes: int) -> OffsetMap:
        """A map that fits in ``memory_bytes`` (`InvalidConfigError` if not even one key fits,
        as Kafka refuses a buffer too small to make progress)."""
        capacity = int(memory_bytes // ENTRY_BYTES * LOAD_FACTOR)
        if capacity < 1:
            raise InvalidConfigError(
                f"a dedupe buffer of {memory_bytes} bytes holds no key "
                f"(one takes about {ENTRY_BYTES} bytes): the log cleaner could never progress"
            )
        return cls(capacity)

    @property
    def size(self) -> int:
        """Keys in the map."""
        return len(self._offsets)

    @property
    def is_full(self) -> bool:
        """No room for one more key (Kafka checks this before every put, even of a known key)."""
        return len(self._offsets) >= self.capacity

    @property
    def utilization(self) -> float:
        """How full the map is, 0..1 (Kafka's buffer utilization)."""
        return len(self._offsets) / self.capacity

    def put_digests(self, digests: list[bytes], offsets: list[int]) -> None:
        """Map each digest to its offset, in order (a later offset of a key replaces an earlier
        one); the caller keeps the count within `capacity`. Moves ``latest_offset`` to the last
        offset."""
        self._offsets.update(zip(digests, offsets, strict=True))
        if offsets:
            self.latest_offset = offsets[-1]

    def get(self, key: bytes) -> int:
        """The latest offset of ``key``; -1 if the map does not hold it."""
        return self._offsets.get(key_digest(key), -1)

    def get_digest(self, digest: bytes) -> int:
        """`get` by digest."""
        return self._offsets.get(digest, -1)

    def update_latest_offset(self, offset: int) -> None:
        """Record that everything up to ``offset`` is covered (a batch or a segment ended)."""
        self.latest_offset = offset
