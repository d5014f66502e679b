"""The effects a ``BrokerDriver`` asks its shell to carry out, as values.

The driver owns every decision and no IO beyond the storage engine's short synchronous calls;
a shell (the asyncio ``Broker``, the simulator's broker) drains ``BrokerDriver.take_effects()``
after every input and carries each effect out, feeding the result back as a new input:

- ``Respond`` / ``CloseClient``: the answer to a client connection's current request (a
  connection has at most one request in the driver at a time, so answers keep their order);
- ``CoordCall``: run ``call(coordinator)`` -- off the event loop, it may block on ZooKeeper or
  etcd -- then ``on_coord_done(token, result, error)``;
- ``SendToBroker``: send ``body`` (api ``api_key`` at ``api_version``) to another broker, then
  ``on_broker_response(token, response)`` or ``on_broker_unreachable(token, reason)``;
- ``RunFlushes``: fsync these logs (a worker thread; nothing truncates them meanwhile), then
  ``on_flushes_done(token, failures)``;
- ``RunCleaning``: run a log cleaning's heavy pass (``task.run()``: reading the dirty section,
  building the offset map, writing the ``.cleaned`` segments) off the loop, then
  ``on_cleaning_done(token)``; the driver swaps the result in under ``exclusive``;
- ``RunCheckpoints``: write a round of the periodic offset checkpoints (``round.write()``: an
  fsync or two per file) off the loop, then ``on_checkpoints_done(token, failures)``;
- ``ResetLink``: drop the connection to a broker (its fetch session ended);
- ``Subscribe``: the broker registered: push feed notices (``on_feed_notified``) and this
  broker's session events (``on_session_event``) to the driver.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import attrs

from replog.coord.contract import Coordinator
from replog.errors import StorageError
from replog.log.checkpoint_round import CheckpointRound
from replog.log.cleaner import CleaningTask
from replog.log.log import PendingFlush
from replog.protocol import RecordsRef
from replog.protocol.schema import Message
from replog.topics import TopicPartition

__all__ = [
    "CloseClient",
    "CoordCall",
    "Effect",
    "FsyncFailures",
    "ResetLink",
    "Respond",
    "RunCheckpoints",
    "RunCleaning",
    "RunFlushes",
    "SendToBroker",
    "Subscribe",
]

ResponseParts = list[bytes | RecordsRef[Any]]


@attrs.frozen
class Respond:
    """Write ``parts`` (a whole response frame; None: acks=0, nothing to send) to connection
    ``conn_id`` and hand the driver its next request."""

    conn_id: int
    parts: ResponseParts | None


@attrs.frozen
class CloseClient:
    """Drop connection ``conn_id`` (acks=0 produce failed, or no error response possible)."""

    conn_id: int
    reason: str


@attrs.frozen
class CoordCall:
    """Run ``call`` with the coordinator, off the loop; report with ``on_coord_done``."""

    token: int
    call: Callable[[Coordinator], Any] = attrs.field(repr=False)
    what: str = ""


@attrs.frozen
class SendToBroker:
    """Send a request to broker ``broker_id`` on the driver's link to it."""

    token: int
    broker_id: int
    api_key: int
    api_version: int
    body: Message


@attrs.frozen
class ResetLink:
    """Close the link to ``broker_id`` (outstanding requests on it are abandoned)."""

    broker_id: int


@attrs.frozen
class RunFlushes:
    """fsync each pending flush (a group commit), off the loop; report failures by partition."""

    token: int
    pending: tuple[tuple[TopicPartition, PendingFlush], ...]

    def run(self) -> FsyncFailures:
        """fsync each log in turn (blocking: a shell calls this off its loop); a failed fsync is
        reported for its partition and the others still run."""
        failures: FsyncFailures = []
        for tp, flush in self.pending:
            try:
                flush.run()
            except (OSError, StorageError) as exc:
                failures.append((tp, f"fsync failed: {exc}"))
        return failures


FsyncFailures = list[tuple[TopicPartition, str]]
"""The logs of a ``RunFlushes`` whose fsync failed, with the reason."""


@attrs.frozen
class RunCleaning:
    """Run ``task.run()`` off the loop (it never raises); report with ``on_cleaning_done``."""

    token: int
    task: CleaningTask = attrs.field(repr=False)


@attrs.frozen
class RunCheckpoints:
    """Write ``round`` off the loop (it never raises); report ``on_checkpoints_done(token,
    failures)`` with what ``round.write()`` returned."""

    token: int
    round: CheckpointRound = attrs.field(repr=False)


@attrs.frozen
class Subscribe:
    """Listen to the coordinator's feed and to ``broker_id``'s session events."""

    broker_id: int
    incarnation_epoch: int


Effect = (
    Respond
    | CloseClient
    | CoordCall
    | SendToBroker
    | ResetLink
    | RunFlushes
    | RunCheckpoints
    | RunCleaning
    | Subscribe
)
