"""What the group coordinator asks its owner to do: values, never callbacks.

- ``GroupReply``: send ``response`` for the request the owner named ``request_id``. Every request
  given to the coordinator gets exactly one reply, possibly from a later input (a JoinGroup
  parked until the join phase ends, an OffsetCommit waiting for its records to be written).
- ``Write``: append ``records`` to ``__consumer_offsets`` partition ``partition`` as one batch
  with acks=all, then call ``on_write_complete(write_id, error)``. Writes must be appended in
  the order they are returned, and successes reported in that order (the log and its high
  watermark impose it); failures may be reported at any time. Nothing a write changes is
  visible, and no reply that depends on it is sent, until it is reported written.

Timers are not effects: the owner asks ``next_deadline_ms()`` after each input and calls
``on_tick(now_ms)`` once that time has come.
"""

from __future__ import annotations

import attrs

from replog.groups.records import RawRecord
from replog.protocol.schema import Message

__all__ = ["Effects", "GroupReply", "RequestId", "Write"]

RequestId = int
"""The owner's name for a request it handed to the coordinator (unique while unanswered)."""


@attrs.frozen
class GroupReply:
    """Send ``response`` for request ``request_id``."""

    request_id: RequestId
    response: Message


@attrs.frozen
class Write:
    """Append ``records`` (key, value; value None = tombstone) to ``__consumer_offsets``
    partition ``partition`` with acks=all, then report the outcome under ``write_id``."""

    partition: int
    write_id: int
    records: tuple[RawRecord, ...]


@attrs.frozen
class Effects:
    """Everything one input asks for, in order."""

    replies: tuple[GroupReply, ...] = ()
    writes: tuple[Write, ...] = ()

    def __add__(self, other: Effects) -> Effects:
        return Effects(self.replies + other.replies, self.writes + other.writes)

    def reply_to(self, request_id: RequestId) -> Message | None:
        """The response to ``request_id`` among these replies, if there is one."""
        for reply in self.replies:
            if reply.request_id == request_id:
                return reply.response
        return None
