"""Leader side of a fetch: epoch fencing (KIP-320), the divergence check and the read.

Pure functions over a ``ReplicaLog``: they sample the HW, log start and LEO *before* reading,
and return a ``PartitionFetchResponse`` holding a slice of the log, never the bytes themselves.
"""

from __future__ import annotations

from replog.epochs import UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
from replog.errors import ErrorCode
from replog.isr.messages import LeaderEpochEnd, PartitionFetchRequest, PartitionFetchResponse
from replog.isr.replica import ReplicaRole, ReplicaState
from replog.isr.replica_log import BytesSlice, LogSlice, ReplicaLog

__all__ = ["check_fetch_epoch", "check_follower_fetch", "read_for_fetch"]

_EMPTY = BytesSlice(b"")


def check_fetch_epoch(
    role: ReplicaRole, leader_epoch: int, request: PartitionFetchRequest
) -> ErrorCode:
    """``NOT_LEADER_OR_FOLLOWER`` unless leading -- a follower serves only Kafka's debugging
    consumer (replica id -2, the replica verification tool), from its own log up to its own
    HW; an older epoch is ``FENCED_LEADER_EPOCH``, a newer one ``UNKNOWN_LEADER_EPOCH`` (this
    broker has not heard of it yet: retry). A request without an epoch (-1) is not checked."""
    follower_serves = role is ReplicaRole.FOLLOWER and request.reads_any_replica
    if role is not ReplicaRole.LEADER and not follower_serves:
        return ErrorCode.NOT_LEADER_OR_FOLLOWER
    if request.current_leader_epoch < 0:
        return ErrorCode.NONE
    if request.current_leader_epoch < leader_epoch:
        return ErrorCode.FENCED_LEADER_EPOCH
    if request.current_leader_epoch > leader_epoch:
        return ErrorCode.UNKNOWN_LEADER_EPOCH
    return ErrorCode.NONE


def check_follower_fetch(
    request: PartitionFetchRequest, replica: ReplicaState | None, registered_epoch: int | None
) -> ErrorCode:
    """A follower's fetch that passed the epoch check: ``replica`` is the leader's state of the
    sender (None: not a replica of this partition), ``registered_epoch`` the broker epoch the
    leader knows for it (None: unknown)."""
    if replica is None:
        if request.current_leader_epoch < 0:
            return ErrorCode.NOT_LEADER_OR_FOLLOWER
        return ErrorCode.UNKNOWN_LEADER_EPOCH
    if (
        request.broker_epoch != -1
        and registered_epoch is not None
        and registered_epoch > request.broker_epoch
    ):
        return ErrorCode.NOT_LEADER_OR_FOLLOWER  # a stale incarnation (KIP-903)
    return ErrorCode.NONE


def read_for_fetch(log: ReplicaLog, request: PartitionFetchRequest) -> PartitionFetchResponse:
    """Answer a fetch that passed the epoch check.

    A follower naming ``last_fetched_epoch`` gets ``diverging_epoch`` (and no records) when
    the leader's end offset for that epoch is a smaller epoch or ends before the fetch offset.
    Followers read up to the LEO, consumers up to the HW.
    """
    high_watermark = log.high_watermark
    log_start_offset = log.log_start_offset
    log_end_offset = log.log_end_offset
    fetch_offset = request.fetch_offset

    def answer(
        code: ErrorCode,
        records: LogSlice | None = None,
        diverging: LeaderEpochEnd | None = None,
    ) -> PartitionFetchResponse:
        return PartitionFetchResponse(
            request_id=request.request_id,
            error_code=code,
            fetch_offset=fetch_offset,
            high_watermark=high_watermark,
            log_start_offset=log_start_offset,
            log_end_offset=log_end_offset,
            records=records,
            diverging_epoch=diverging,
            replica_id=request.replica_id,
        )

    if fetch_offset < log_start_offset:
        return answer(ErrorCode.OFFSET_OUT_OF_RANGE)
    if request.is_from_follower and request.last_fetched_epoch != UNDEFINED_EPOCH:
        epoch, end_offset = log.end_offset_for_epoch(request.last_fetched_epoch)
        if end_offset == UNDEFINED_EPOCH_OFFSET:
            return answer(ErrorCode.OFFSET_OUT_OF_RANGE)
        if epoch < request.last_fetched_epoch or end_offset < fetch_offset:
            return answer(ErrorCode.NONE, diverging=LeaderEpochEnd(epoch, end_offset))
    if fetch_offset > log_end_offset:
        return answer(ErrorCode.OFFSET_OUT_OF_RANGE)
    upper_offset = log_end_offset if request.is_from_follower else high_watermark
    if fetch_offset >= upper_offset:
        return answer(ErrorCode.NONE, _EMPTY)
    records = log.read(
        fetch_offset,
        request.max_bytes,
        max_offset=None if request.is_from_follower else high_watermark,
        min_one_batch=True,
    )
    return answer(ErrorCode.NONE, records)
