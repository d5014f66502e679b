"""Follower side of replication: build fetches, apply responses, truncate by leader epoch.

Theory of operation. A follower always fetches from its own LEO and names the epoch of its last
appended batch (``last_fetched_epoch``). It never truncates to its local HW (the KIP-101 loss).
Instead the leader compares that epoch with its own cache and, on a mismatch, answers
``diverging_epoch``; the follower then truncates with ``truncation_offset`` and fetches again. When
it lacks the epoch the leader named, it truncates to the end of its own largest smaller epoch and
the next fetch asks again (KIP-279), so several rounds may be needed. A diverging response carries
no records, and its HW is **not** applied (KAFKA-14704): it could expose offsets the follower is
about to lose.

Only the answer to the outstanding request is processed; any other response (late, duplicated,
or for an older leader) is ignored, so message loss and duplication are harmless.
"""

from __future__ import annotations

import enum

import attrs

from replog.epochs import UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
from replog.errors import ErrorCode, invariant
from replog.isr.config import DurabilityMode, PartitionConfig
from replog.isr.messages import LeaderEpochEnd, PartitionFetchRequest, PartitionFetchResponse
from replog.isr.replica_log import ReplicaLog

__all__ = [
    "FollowerAction",
    "FollowerFetcher",
    "FollowerOutcome",
    "TruncationDecision",
    "truncation_offset",
]


@attrs.frozen
class TruncationDecision:
    """Where to truncate; ``complete`` False means another round is needed (KIP-279)."""

    offset: int
    complete: bool


def truncation_offset(leader: LeaderEpochEnd, log: ReplicaLog) -> TruncationDecision:
    """The follower truncation rule for a leader answer ``(E, End)`` (Kafka's
    ``AbstractFetcherThread.getOffsetTruncationState``).

    - ``End`` undefined: back to the HW (the initial fetch offset without epochs);
    - ``E`` undefined (no epoch protocol): ``min(End, LEO)``;
    - the follower has no entry for ``E`` or below it: ``min(End, LEO)``;
    - the follower's answer for ``E`` is a smaller epoch: ``min(its end, LEO)``, ask again;
    - otherwise ``min(its end, End, LEO)``.
    """
    log_end_offset = log.log_end_offset
    if leader.is_undefined:
        return TruncationDecision(min(log.high_watermark, log_end_offset), complete=True)
    if leader.epoch == UNDEFINED_EPOCH:
        return TruncationDecision(min(leader.end_offset, log_end_offset), complete=True)
    own_epoch, own_end_offset = log.end_offset_for_epoch(leader.epoch)
    if own_end_offset == UNDEFINED_EPOCH_OFFSET:
        return TruncationDecision(min(leader.end_offset, log_end_offset), complete=True)
    if own_epoch != leader.epoch:
        return TruncationDecision(min(own_end_offset, log_end_offset), complete=False)
    return TruncationDecision(min(own_end_offset, leader.end_offset, log_end_offset), complete=True)


class FollowerAction(enum.Enum):
    """What handling a fetch response did to the local log."""

    APPENDED = "appended"  # records (possibly none) appended, HW updated
    TRUNCATED = "truncated"  # diverging epoch or leader behind us: log cut at ``truncated_to``
    RESTARTED = "restarted"  # leader's log starts past our LEO: log emptied, restarted there
    IGNORED = "ignored"  # not the answer to the outstanding request
    FAILED = "failed"  # an error code: back off (and wait for metadata if fenced)


@attrs.frozen
class FollowerOutcome:
    """The result of ``FollowerFetcher.on_fetch_response``; the driver fetches again."""

    action: FollowerAction
    error_code: ErrorCode = ErrorCode.NONE
    truncated_to: int | None = None
    truncation_complete: bool = True
    appended_bytes: int = 0


@attrs.define
class FollowerFetcher:
    """Fetch state of this broker while it follows ``leader_id`` at ``leader_epoch``."""

    leader_id: int
    leader_epoch: int
    next_request_id: int = 1
    outstanding: PartitionFetchRequest | None = None

    def fetch_request(
        self, log: ReplicaLog, replica_id: int, broker_epoch: int, config: PartitionConfig
    ) -> PartitionFetchRequest:
        """The next fetch: from the LEO, with the last fetched epoch; it supersedes any
        outstanding one (a lost request or response is simply asked again)."""
        latest_epoch = log.latest_epoch()
        log_end_offset = log.log_end_offset
        requires_flush = (
            config.durability is DurabilityMode.FSYNC and log.recovery_point < log_end_offset
        )
        request = PartitionFetchRequest(
            replica_id=replica_id,
            fetch_offset=log_end_offset,
            current_leader_epoch=self.leader_epoch,
            last_fetched_epoch=UNDEFINED_EPOCH if latest_epoch is None else latest_epoch,
            log_start_offset=log.log_start_offset,
            broker_epoch=broker_epoch,
            max_bytes=config.fetch_bytes_max,
            min_bytes=config.fetch_min_bytes,
            max_wait_ms=config.fetch_wait_ms_max,
            request_id=self.next_request_id,
            requires_flush=requires_flush,
        )
        self.next_request_id += 1
        self.outstanding = request
        return request

    def on_fetch_response(
        self, log: ReplicaLog, response: PartitionFetchResponse, now_ms: int
    ) -> FollowerOutcome:
        """Apply the leader's answer to the outstanding request (Kafka's
        ``processPartitionData``)."""
        request = self.outstanding
        if request is None or response.request_id != request.request_id:
            return FollowerOutcome(FollowerAction.IGNORED)
        self.outstanding = None
        if response.fetch_offset != log.log_end_offset:
            # The log moved since the request (it cannot, unless the driver truncated it).
            return FollowerOutcome(FollowerAction.IGNORED)
        if response.error_code is ErrorCode.OFFSET_OUT_OF_RANGE:
            return self._on_out_of_range(log, response)
        if response.error_code is not ErrorCode.NONE:
            return FollowerOutcome(FollowerAction.FAILED, error_code=response.error_code)
        if response.diverging_epoch is not None:
            decision = truncation_offset(response.diverging_epoch, log)
            log.truncate_to(decision.offset)
            return FollowerOutcome(
                FollowerAction.TRUNCATED,
                truncated_to=decision.offset,
                truncation_complete=decision.complete,
            )
        return self._append(log, response)

    def _append(self, log: ReplicaLog, response: PartitionFetchResponse) -> FollowerOutcome:
        appended_bytes = 0
        if response.records is not None and response.records.size_bytes > 0:
            data = response.records.to_bytes()
            log.append_as_follower(data)
            appended_bytes = len(data)
        log_end_offset = log.log_end_offset
        invariant(log_end_offset >= response.fetch_offset, "follower LEO went backwards on append")
        # Follower HW = min(leader HW, own LEO); it may go backwards (after a leader change).
        log.update_high_watermark(min(response.high_watermark, log_end_offset))
        new_start = min(response.log_start_offset, log.high_watermark)
        if new_start > log.log_start_offset:
            log.maybe_increment_log_start_offset(new_start)
        return FollowerOutcome(FollowerAction.APPENDED, appended_bytes=appended_bytes)

    @staticmethod
    def _on_out_of_range(log: ReplicaLog, response: PartitionFetchResponse) -> FollowerOutcome:
        """Leader behind us (unclean election): cut to its LEO. Leader's log starts past our
        LEO (retention): restart empty at its log start. Otherwise refetch from our LEO."""
        log_end_offset = log.log_end_offset
        if 0 <= response.log_end_offset < log_end_offset:
            log.truncate_to(response.log_end_offset)
            return FollowerOutcome(FollowerAction.TRUNCATED, truncated_to=response.log_end_offset)
        if response.log_start_offset > log_end_offset:
            log.truncate_fully_and_start_at(response.log_start_offset)
            return FollowerOutcome(FollowerAction.RESTARTED, truncated_to=response.log_start_offset)
        return FollowerOutcome(FollowerAction.FAILED, error_code=ErrorCode.OFFSET_OUT_OF_RANGE)
