"""Topic names: the one validator every module uses (coordinator, log manager, admin API).

A topic name becomes a directory name (``<topic>-<partition>``), a key in the coordination store
and a metric label, so it is restricted to ``[a-zA-Z0-9._-]``, 1 to 249 characters, and may not
be ``.`` or ``..`` (Kafka's rules). Because metrics replace ``.`` with ``_``, two names that differ
only in those characters collide; ``collision_key`` gives the form to compare.

Topic IDs (KIP-516) are random UUIDs given at creation, kept as the 32-digit hex string
(``new_topic_id``, ``topic_uuid``).
"""

from __future__ import annotations

import re
import uuid
from typing import NamedTuple

from replog.errors import InvalidConfigError as InvalidPartitionError
from replog.errors import InvalidTopicError

__all__ = [
    "MAX_TOPIC_NAME_LENGTH",
    "TopicPartition",
    "TopicPartitionLike",
    "ZERO_TOPIC_ID",
    "new_topic_id",
    "topic_uuid",
    "collision_key",
    "is_valid_topic_name",
    "validate_topic_name",
    "validate_topic_partition",
]

MAX_TOPIC_NAME_LENGTH = 249
"""Kafka's limit: 255 (a filename) minus room for ``-<partition>`` and a deletion suffix."""

_LEGAL = re.compile(r"[a-zA-Z0-9._-]+")


class TopicPartition(NamedTuple):
    """A partition's name: compares and hashes like the plain ``(topic, partition)`` tuple (so
    either may key a dict), and ``str()`` gives Kafka's ``<topic>-<partition>`` form, which is
    also the partition's directory name. The one definition every package uses."""

    topic: str
    partition: int

    def __str__(self) -> str:
        return f"{self.topic}-{self.partition}"

    @property
    def dir_name(self) -> str:
        """``<topic>-<partition>``."""
        return f"{self.topic}-{self.partition}"

    @classmethod
    def parse(cls, text: str) -> TopicPartition:
        """Inverse of ``str()``: split at the last ``-`` (topics may contain dashes);
        ``ValueError`` for anything else."""
        topic, sep, number = text.rpartition("-")
        if not sep or not topic or not number.isdigit():
            raise ValueError(f"not a <topic>-<partition> name: {text!r}")
        return cls(topic, int(number))


TopicPartitionLike = tuple[str, int]
"""What callers may pass for a partition: a ``TopicPartition`` or any ``(topic, partition)``."""

ZERO_TOPIC_ID = uuid.UUID(int=0)
"""Kafka's "no topic ID" (never assigned to a topic)."""


def new_topic_id() -> str:
    """A fresh random topic ID (hex form). Kafka never hands out the zero UUID."""
    while True:
        value = uuid.uuid4()
        if value != ZERO_TOPIC_ID:
            return value.hex


def topic_uuid(topic_id: str) -> uuid.UUID:
    """The UUID of a hex (or canonical) topic ID; the zero UUID when it is not one."""
    try:
        return uuid.UUID(topic_id)
    except (ValueError, AttributeError, TypeError):
        return ZERO_TOPIC_ID


def validate_topic_name(name: str) -> str:
    """Return ``name`` unchanged if it is a legal topic name, else raise ``InvalidTopicError``.

    Legal: 1..249 characters from ``[a-zA-Z0-9._-]``, and neither ``.`` nor ``..``.
    """
    if not isinstance(name, str):
        raise InvalidTopicError(f"topic name must be a str, not {type(name).__name__}")
    if not name:
        raise InvalidTopicError("topic name is empty")
    if name in (".", ".."):
        raise InvalidTopicError(f"topic name cannot be {name!r}")
    if len(name) > MAX_TOPIC_NAME_LENGTH:
        raise InvalidTopicError(
            f"topic name is {len(name)} characters, longer than {MAX_TOPIC_NAME_LENGTH}"
        )
    if _LEGAL.fullmatch(name) is None:
        bad = sorted({c for c in name if _LEGAL.fullmatch(c) is None})
        raise InvalidTopicError(
            f"topic name {name!r} has characters outside [a-zA-Z0-9._-]: {''.join(bad)!r}"
        )
    return name


def validate_topic_partition(tp: TopicPartition) -> TopicPartition:
    """Return ``tp`` if its topic is a legal name and its partition an int >= 0, else raise
    (``InvalidTopicError`` / ``InvalidPartitionError``): what must hold before a partition
    becomes a directory name."""
    validate_topic_name(tp.topic)
    if isinstance(tp.partition, bool) or not isinstance(tp.partition, int) or tp.partition < 0:
        raise InvalidPartitionError(f"partition must be an int >= 0, got {tp.partition!r}")
    return tp


def is_valid_topic_name(name: str) -> bool:
    """Whether ``validate_topic_name(name)`` would accept ``name``."""
    try:
        validate_topic_name(name)
    except InvalidTopicError:
        return False
    return True


def collision_key(name: str) -> str:
    """The form under which two topic names collide: ``.`` and ``_`` are the same character in
    metric names, so ``a.b`` and ``a_b`` cannot both exist."""
    return name.replace(".", "_")
