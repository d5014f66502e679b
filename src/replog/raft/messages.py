"""The quorum's RPCs as immutable values (KIP-595 with KIP-996 pre-vote and KIP-630 snapshots).

These are the *meaning* of Kafka's Vote, BeginQuorumEpoch, EndQuorumEpoch, Fetch and
FetchSnapshot for the single metadata partition, without the wire encoding (``replog.quorum.wire``
encodes them, in Kafka's framing). Every request carries the sender's view of the
epoch; every response carries the responder's epoch and the leader it knows (``-1``: none),
which is how a node that is behind learns about newer epochs and leaders.

Departures from the wire format, each to keep the core exact without the real transport:

- ``VoteResponse`` echoes ``pre_vote``, so a late answer to a real vote is never counted as a
  pre-vote (Kafka infers it from the receiver's state).
- ``RaftFetchResponse`` echoes the request's ``fetch_offset`` and ``last_fetched_epoch``; the
  follower applies a response only if they still describe its log (a late or duplicated
  response that does not is ignored).
- ``ErrorCode`` has neither SNAPSHOT_NOT_FOUND nor POSITION_OUT_OF_RANGE yet; a FetchSnapshot
  that names a snapshot the leader no longer has, or a position past its end, is answered with
  ``OFFSET_OUT_OF_RANGE`` and the follower goes back to Fetch.
"""

from __future__ import annotations

import attrs

from replog.errors import ErrorCode

__all__ = [
    "BeginQuorumEpochRequest",
    "BeginQuorumEpochResponse",
    "EndQuorumEpochRequest",
    "EndQuorumEpochResponse",
    "RaftFetchRequest",
    "RaftFetchResponse",
    "FetchSnapshotRequest",
    "FetchSnapshotResponse",
    "Message",
    "NO_LEADER",
    "OffsetAndEpoch",
    "Outbound",
    "RaftSnapshotId",
    "UNKNOWN_HIGH_WATERMARK",
    "VoteRequest",
    "VoteResponse",
]

#: ``leader_id`` when no leader is known.
NO_LEADER = -1
#: ``high_watermark`` of a leader that has not committed anything in its epoch yet.
UNKNOWN_HIGH_WATERMARK = -1


@attrs.frozen(order=True)
class OffsetAndEpoch:
    """An end offset and the epoch of the record just below it; ordered epoch first, which is
    Raft's "at least as up to date" comparison of two logs."""

    epoch: int
    offset: int


@attrs.frozen(order=True)
class RaftSnapshotId:
    """A snapshot holds the state after applying every record below ``end_offset``; ``epoch``
    is the epoch of the record at ``end_offset - 1`` (KIP-630)."""

    end_offset: int
    epoch: int

    @property
    def file_stem(self) -> str:
        """``<20-digit end offset>-<10-digit epoch>``, the name of its ``.checkpoint`` file."""
        return f"{self.end_offset:020d}-{self.epoch:010d}"


# ------------------------------------------------------------------------------- elections


@attrs.frozen
class VoteRequest:
    """Ask for a vote (or, with ``pre_vote``, whether a vote would be granted) in ``epoch``.

    A candidate sends its new epoch; a prospective node (pre-vote) sends its current epoch,
    unchanged. ``last_epoch`` / ``end_offset`` describe the sender's log."""

    epoch: int
    candidate_id: int
    last_epoch: int
    end_offset: int
    pre_vote: bool


@attrs.frozen
class VoteResponse:
    """The answer to a `VoteRequest`."""

    epoch: int
    leader_id: int
    vote_granted: bool
    pre_vote: bool
    error: ErrorCode = ErrorCode.NONE


@attrs.frozen
class BeginQuorumEpochRequest:
    """A new leader announces itself to the voters (repeated until each one acknowledges)."""

    epoch: int
    leader_id: int


@attrs.frozen
class BeginQuorumEpochResponse:
    """The acknowledgement of a `BeginQuorumEpochRequest`."""

    epoch: int
    leader_id: int
    error: ErrorCode = ErrorCode.NONE


@attrs.frozen
class EndQuorumEpochRequest:
    """A leader resigns (graceful): voters should elect, ``preferred_successors`` first."""

    epoch: int
    leader_id: int
    preferred_successors: tuple[int, ...]


@attrs.frozen
class EndQuorumEpochResponse:
    """The acknowledgement of an `EndQuorumEpochRequest`."""

    epoch: int
    leader_id: int
    error: ErrorCode = ErrorCode.NONE


# ------------------------------------------------------------------------------- replication


@attrs.frozen
class RaftFetchRequest:
    """A follower's or observer's fetch: also its heartbeat. ``fetch_offset`` is its log end
    offset (durable before this request was sent), ``last_fetched_epoch`` the epoch of the
    record below it."""

    epoch: int
    replica_id: int
    fetch_offset: int
    last_fetched_epoch: int
    max_bytes: int


@attrs.frozen
class RaftFetchResponse:
    """The leader's answer: at most one of ``records`` (possibly empty), ``diverging`` (truncate,
    then fetch again) or ``snapshot_id`` (the offset is below the log start: fetch a snapshot)."""

    epoch: int
    leader_id: int
    error: ErrorCode
    fetch_offset: int
    last_fetched_epoch: int
    high_watermark: int = UNKNOWN_HIGH_WATERMARK
    records: bytes = b""
    diverging: OffsetAndEpoch | None = None
    snapshot_id: RaftSnapshotId | None = None


@attrs.frozen
class FetchSnapshotRequest:
    """Ask for ``max_bytes`` of snapshot ``snapshot_id`` from byte ``position``."""

    epoch: int
    replica_id: int
    snapshot_id: RaftSnapshotId
    position: int
    max_bytes: int


@attrs.frozen
class FetchSnapshotResponse:
    """One chunk of a snapshot file; ``size_bytes`` is the whole file's size."""

    epoch: int
    leader_id: int
    error: ErrorCode
    snapshot_id: RaftSnapshotId
    position: int
    size_bytes: int = 0
    data: bytes = b""


Message = (
    VoteRequest
    | VoteResponse
    | BeginQuorumEpochRequest
    | BeginQuorumEpochResponse
    | EndQuorumEpochRequest
    | EndQuorumEpochResponse
    | RaftFetchRequest
    | RaftFetchResponse
    | FetchSnapshotRequest
    | FetchSnapshotResponse
)


@attrs.frozen
class Outbound:
    """A message the driver sends to node ``dst``."""

    dst: int
    message: Message
