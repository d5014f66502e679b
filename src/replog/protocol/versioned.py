"""Version-prefixed data: an int16 version, then a schema struct encoded at that version.

Byte layout:

    version  int16 BE
    body     the struct's fields at ``version`` (compact and tagged when ``version`` is flexible)

Kafka stores several non-API formats this way (MessageUtil.toVersionPrefixedBytes): the consumer
protocol's subscription and assignment inside JoinGroup/SyncGroup, and the keys and values of the
``__consumer_offsets`` records. Each format says what a version newer than it knows means: the
consumer protocol reads it as its highest version (new versions only append fields), the offsets
records refuse it.
"""

from __future__ import annotations

from typing import Any, TypeVar

from replog.errors import ProtocolError, invariant
from replog.protocol.primitives import Buffer, Reader, Writer
from replog.protocol.schema import Versions, decode_struct, encode_struct

__all__ = ["VersionedFormat", "read_version"]

_T = TypeVar("_T")


class VersionedFormat:
    """One version-prefixed format: which versions exist and which are flexible."""

    __slots__ = ("flexible_from", "name", "newer_as_highest", "versions")

    def __init__(
        self, name: str, versions: str, *, flexible_from: int | None, newer_as_highest: bool
    ) -> None:
        self.name = name
        self.versions = Versions.parse(versions)
        invariant(self.versions.high is not None, f"{name}: versions need an upper bound")
        self.flexible_from = flexible_from
        self.newer_as_highest = newer_as_highest

    @property
    def highest(self) -> int:
        """The newest version this format knows."""
        return self.versions.high or 0

    def is_flexible(self, version: int) -> bool:
        """Whether ``version`` uses compact encodings and tagged fields."""
        return self.flexible_from is not None and version >= self.flexible_from

    def encode(self, obj: Any, version: int) -> bytes:
        """``version`` then ``obj`` encoded at ``version``."""
        if version not in self.versions:
            raise ValueError(f"{self.name} has no version {version}")
        w = Writer()
        w.write_int16(version)
        encode_struct(w, obj, version, self.is_flexible(version), drop_ignorable=True)
        return w.to_bytes()

    def decode(self, data: Buffer, cls: type[_T]) -> tuple[int, _T]:
        """(the version on the wire, the struct). A version below the first is an error; one
        above the last is read as the last when ``newer_as_highest`` (trailing bytes are the
        newer fields, skipped), else an error. Known versions must fill ``data`` exactly."""
        r = Reader(data)
        version = r.read_int16()
        highest = self.highest
        if version < self.versions.low or (version > highest and not self.newer_as_highest):
            raise ProtocolError(f"{self.name}: unsupported version {version}")
        if version > highest:
            newer: _T = decode_struct(r, cls, highest, self.is_flexible(highest))
            return version, newer
        obj: _T = decode_struct(r, cls, version, self.is_flexible(version))
        r.expect_end(f"{self.name} v{version}")
        return version, obj


def read_version(data: Buffer) -> int:
    """The int16 version prefix of ``data``."""
    return Reader(data).read_int16()
