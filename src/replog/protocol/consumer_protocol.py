"""The consumer protocol: what consumers put in JoinGroup metadata and SyncGroup assignments.

The group coordinator treats both as opaque bytes; only the members (and the leader's assignor)
read them. Both are version-prefixed (``versioned``), never flexible, and a reader takes a newer
version as its highest one (Kafka's ConsumerProtocol does the same: versions only append fields).

Byte layouts (Kafka's ConsumerProtocolSubscription.json and ConsumerProtocolAssignment.json):

    Subscription   version int16
                   topics            [string]
                   user_data         nullable bytes
                   owned_partitions  [topic string, partitions [int32]]   v1+ (KIP-429)
                   generation_id     int32, default -1                   v2+ (KIP-792)
                   rack_id           nullable string                     v3+ (KIP-881)
    Assignment     version int16
                   assigned_partitions  [topic string, partitions [int32]]
                   user_data            nullable bytes

``PROTOCOL_TYPE`` is the JoinGroup ``protocol_type`` of consumers; the protocol *names* are the
assignors ("range", "roundrobin", "sticky", "cooperative-sticky").
"""

# `field(...)` is an attrs field specifier (schema.field wraps attrs.field); ruff cannot tell.
# ruff: noqa: RUF009

from __future__ import annotations

from typing import Self

import attrs

from replog.errors import ProtocolError
from replog.protocol.primitives import Buffer
from replog.protocol.schema import BYTES, INT32, STRING, array, field
from replog.protocol.versioned import VersionedFormat

__all__ = [
    "ASSIGNMENT_FORMAT",
    "PROTOCOL_TYPE",
    "SUBSCRIPTION_FORMAT",
    "ConsumerProtocolAssignment",
    "ConsumerProtocolSubscription",
    "TopicPartitions",
    "subscribed_topics",
]

PROTOCOL_TYPE = "consumer"

SUBSCRIPTION_FORMAT = VersionedFormat(
    "ConsumerProtocolSubscription", "0-3", flexible_from=None, newer_as_highest=True
)
ASSIGNMENT_FORMAT = VersionedFormat(
    "ConsumerProtocolAssignment", "0-3", flexible_from=None, newer_as_highest=True
)


@attrs.frozen(kw_only=True)
class TopicPartitions:
    """Partitions of one topic."""

    topic: str = field(STRING, "0+")
    partitions: list[int] = field(array(INT32), "0+")


@attrs.frozen(kw_only=True)
class ConsumerProtocolSubscription:
    """A consumer's JoinGroup metadata: the topics it wants and what it owns now."""

    topics: list[str] = field(array(STRING), "0+")
    user_data: bytes | None = field(BYTES, "0+", nullable="0+", default=None)
    owned_partitions: list[TopicPartitions] = field(array(TopicPartitions), "1+", ignorable=True)
    generation_id: int = field(INT32, "2+", default=-1, ignorable=True)
    rack_id: str | None = field(STRING, "3+", nullable="3+", default=None, ignorable=True)

    def encode(self, version: int = SUBSCRIPTION_FORMAT.highest) -> bytes:
        """The version-prefixed bytes (fields newer than ``version`` are dropped)."""
        return SUBSCRIPTION_FORMAT.encode(self, version)

    @classmethod
    def decode(cls, data: Buffer) -> Self:
        """Read version-prefixed bytes (a newer version is read as v3)."""
        _, subscription = SUBSCRIPTION_FORMAT.decode(data, cls)
        return attrs.evolve(subscription, user_data=_copy(subscription.user_data))


@attrs.frozen(kw_only=True)
class ConsumerProtocolAssignment:
    """A consumer's SyncGroup assignment: the partitions it owns in this generation."""

    assigned_partitions: list[TopicPartitions] = field(array(TopicPartitions), "0+")
    user_data: bytes | None = field(BYTES, "0+", nullable="0+", default=None)

    def encode(self, version: int = ASSIGNMENT_FORMAT.highest) -> bytes:
        """The version-prefixed bytes."""
        return ASSIGNMENT_FORMAT.encode(self, version)

    @classmethod
    def decode(cls, data: Buffer) -> Self:
        """Read version-prefixed bytes (a newer version is read as v3)."""
        _, assignment = ASSIGNMENT_FORMAT.decode(data, cls)
        return attrs.evolve(assignment, user_data=_copy(assignment.user_data))


def subscribed_topics(metadata: Buffer) -> frozenset[str] | None:
    """The topics a consumer's JoinGroup metadata subscribes to, or None if it is not a valid
    subscription. Like Kafka's coordinator it reads only the v0 prefix (topics, user data) that
    every version starts with, so it does not depend on any later version."""
    try:
        _, prefix = _V0_PREFIX.decode(metadata, ConsumerProtocolSubscription)
    except ProtocolError:
        return None
    return frozenset(prefix.topics)


# Every version is read as v0, its prefix.
_V0_PREFIX = VersionedFormat(
    "ConsumerProtocolSubscription prefix", "0", flexible_from=None, newer_as_highest=True
)


def _copy(data: bytes | None) -> bytes | None:
    return None if data is None else bytes(data)
