"""OffsetCommit, OffsetFetch, OffsetDelete and the expiry of offsets and empty groups.

- OffsetCommit: a member commits as part of its generation (UNKNOWN_MEMBER_ID,
  FENCED_INSTANCE_ID, ILLEGAL_GENERATION otherwise; REBALANCE_IN_PROGRESS while the group is
  CompletingRebalance). A commit with generation -1 and no member id is a *simple* commit,
  accepted only while the group is Empty (a missing group is created for it; a missing group
  with a generation >= 0 is ILLEGAL_GENERATION). Metadata longer than
  ``offset_metadata_length_max`` is OFFSET_METADATA_TOO_LARGE for that partition. The reply
  waits until the records are written; a commit in Stable or PreparingRebalance also extends the
  member's session.
- OffsetFetch returns acknowledged offsets (-1 and "" for partitions without one); with
  ``require_stable`` a partition whose offset is being written answers UNSTABLE_OFFSET_COMMIT.
- OffsetDelete is GROUP_ID_NOT_FOUND for unknown groups, NON_EMPTY_GROUP for active groups that
  are not consumer groups, and GROUP_SUBSCRIBED_TO_TOPIC for topics an active consumer group
  consumes (all topics when its subscriptions are unknown).
- Expiry (KIP-211), every ``offsets_retention_check_interval_ms``: an Empty group's offsets
  expire ``offsets_retention_ms`` after the group became Empty (after their commit when that
  time is unknown); a simple group's offsets and a Stable consumer group's offsets of topics it
  no longer consumes expire that long after their commit; an offset committed with an explicit
  retention (OffsetCommit v2-v4) expires at its own expiry time. An Empty group left without
  offsets is deleted (tombstone). Offsets with a write in flight never expire.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from replog.errors import ErrorCode
from replog.groups.core import CommittedOffset, ShardCore, TopicPartitionLike
from replog.groups.effects import RequestId
from replog.groups.group import ClassicGroup, GroupState
from replog.groups.membership import validate_member
from replog.groups.rebalance import Rebalance
from replog.groups.records import CoordinatorRecord, GroupRecord, OffsetRecord
from replog.protocol.messages import (
    OffsetCommitRequest,
    OffsetCommitResponse,
    OffsetCommitResponsePartition,
    OffsetCommitResponseTopic,
    OffsetDeleteRequest,
    OffsetDeleteResponse,
    OffsetDeleteResponsePartition,
    OffsetDeleteResponseTopic,
    OffsetFetchRequestGroup,
    OffsetFetchResponseGroup,
    OffsetFetchResponsePartitions,
    OffsetFetchResponseTopics,
)

INT64_MAX = 2**63 - 1
"""The largest expiry an offset record can hold (its field is an int64)."""

__all__ = ["Offsets", "append_error_to_commit_error", "java_length"]

_EMPTY = GroupState.EMPTY
_PREPARING = GroupState.PREPARING_REBALANCE
_COMPLETING = GroupState.COMPLETING_REBALANCE
_STABLE = GroupState.STABLE
_DEAD = GroupState.DEAD


def append_error_to_commit_error(error: ErrorCode) -> ErrorCode:
    """What a failed offset write tells the committer (Kafka's mapping)."""
    if error in (
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        ErrorCode.NOT_ENOUGH_REPLICAS,
        ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND,
        ErrorCode.REQUEST_TIMED_OUT,
    ):
        return ErrorCode.COORDINATOR_NOT_AVAILABLE
    if error in (ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.KAFKA_STORAGE_ERROR):
        return ErrorCode.NOT_COORDINATOR
    if error in (
        ErrorCode.MESSAGE_TOO_LARGE,
        ErrorCode.RECORD_LIST_TOO_LARGE,
        ErrorCode.INVALID_FETCH_SIZE,
    ):
        return ErrorCode.INVALID_COMMIT_OFFSET_SIZE
    return error


def java_length(text: str) -> int:
    """Java's ``String.length()``: UTF-16 code units."""
    return len(text.encode("utf-16-le", "surrogatepass")) // 2


class Offsets:
    """Committed offsets: commit, fetch, delete and expiry."""

    def __init__(self, core: ShardCore, rebalance: Rebalance) -> None:
        self.core = core
        self.rebalance = rebalance

    # -- OffsetCommit ---------------------------------------------------------------------------

    def commit(self, request_id: RequestId, request: OffsetCommitRequest, *, now_ms: int) -> None:
        """Handle an OffsetCommit (see the module docstring)."""
        group = self.core.groups.get(request.group_id)
        if group is None:
            if request.generation_id_or_member_epoch >= 0:
                error = ErrorCode.ILLEGAL_GENERATION
                return self.core.reply(request_id, _commit_response(request, lambda _: error))
            group = ClassicGroup(request.group_id, _EMPTY, now_ms)
            self.core.groups[group.group_id] = group
        error = self._validate_commit(group, request)
        if error is not ErrorCode.NONE:
            self.core.reply(request_id, _commit_response(request, lambda _: error))
            return self.core.discard_group_if_unused(group.group_id)
        if group.is_in(_STABLE, _PREPARING) and request.member_id in group.members:
            self.rebalance.reschedule_heartbeat(group.member(request.member_id), now_ms)
        records, too_large = self._commit_records(request, now_ms)

        def partition_error(tp: TopicPartitionLike, written: ErrorCode) -> ErrorCode:
            return ErrorCode.OFFSET_METADATA_TOO_LARGE if tp in too_large else written

        if not records:
            response = _commit_response(request, lambda tp: partition_error(tp, ErrorCode.NONE))
            self.core.reply(request_id, response)
            return self.core.discard_group_if_unused(group.group_id)
        self.core.park(request_id, lambda e: _commit_response(request, lambda _: e))

        def done(error: ErrorCode, now_ms: int) -> None:
            written = append_error_to_commit_error(error)
            response = _commit_response(request, lambda tp: partition_error(tp, written))
            self.core.reply(request_id, response)
            self.core.discard_group_if_unused(request.group_id)

        self.core.write(records, done)
        return None

    def _validate_commit(self, group: ClassicGroup, request: OffsetCommitRequest) -> ErrorCode:
        generation = request.generation_id_or_member_epoch
        if group.is_in(_DEAD):
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        if generation < 0 and group.is_in(_EMPTY):
            return ErrorCode.NONE  # a simple consumer, or an administrator
        if generation >= 0 or request.member_id != "" or request.group_instance_id is not None:
            error = validate_member(group, request.member_id, request.group_instance_id)
            if error is not ErrorCode.NONE:
                return error
            if generation != group.generation_id:
                return ErrorCode.ILLEGAL_GENERATION
        elif not group.is_in(_EMPTY):
            return ErrorCode.UNKNOWN_MEMBER_ID  # only members commit to an active group
        if group.is_in(_COMPLETING):
            return ErrorCode.REBALANCE_IN_PROGRESS
        return ErrorCode.NONE

    def _commit_records(
        self, request: OffsetCommitRequest, now_ms: int
    ) -> tuple[list[CoordinatorRecord], set[TopicPartitionLike]]:
        retention_ms = request.retention_time_ms
        # The retention is a wire int64: the expiry is kept inside int64 (and not before the
        # epoch), so an absurd retention means "never" or "at once", never an overflow.
        expire_ms = None if retention_ms == -1 else min(max(now_ms + retention_ms, 0), INT64_MAX)
        records: list[CoordinatorRecord] = []
        too_large: set[TopicPartitionLike] = set()
        for topic in request.topics:
            for partition in topic.partitions:
                metadata = partition.committed_metadata or ""
                if java_length(metadata) > self.core.config.offset_metadata_length_max:
                    too_large.add((topic.name, partition.partition_index))
                    continue
                timestamp = partition.commit_timestamp
                offset = CommittedOffset(
                    offset=partition.committed_offset,
                    leader_epoch=partition.committed_leader_epoch,
                    metadata=metadata,
                    commit_timestamp_ms=now_ms if timestamp == -1 else timestamp,
                    expire_timestamp_ms=expire_ms,
                )
                records.append(
                    OffsetRecord(
                        request.group_id, topic.name, partition.partition_index, offset.to_value()
                    )
                )
        return records, too_large

    # -- OffsetFetch ----------------------------------------------------------------------------

    def fetch(
        self, request: OffsetFetchRequestGroup, require_stable: bool
    ) -> OffsetFetchResponseGroup:
        """The acknowledged offsets of one group (all of them when ``topics`` is None)."""
        group = self.core.groups.get(request.group_id)
        exists = group is not None and not group.is_in(_DEAD)
        committed: Mapping[TopicPartitionLike, CommittedOffset] = (
            self.core.offsets.committed(request.group_id) if exists else {}
        )
        if request.topics is None:
            wanted: dict[str, list[int]] = {}
            for topic, partition in sorted(committed):
                wanted.setdefault(topic, []).append(partition)
        else:
            wanted = {}
            for t in request.topics:
                wanted.setdefault(t.name, []).extend(t.partition_indexes)
        topics = []
        for topic, partitions in wanted.items():
            answers = [
                self._fetch_one(request.group_id, (topic, p), committed, require_stable)
                for p in partitions
            ]
            topics.append(OffsetFetchResponseTopics(name=topic, partitions=answers))
        return OffsetFetchResponseGroup(group_id=request.group_id, topics=topics)

    def _fetch_one(
        self,
        group_id: str,
        tp: TopicPartitionLike,
        committed: Mapping[TopicPartitionLike, CommittedOffset],
        require_stable: bool,
    ) -> OffsetFetchResponsePartitions:
        found = committed.get(tp)
        if require_stable and self.core.offsets.in_flight(group_id, tp):
            return _no_offset(tp[1], ErrorCode.UNSTABLE_OFFSET_COMMIT)
        if found is None:
            return _no_offset(tp[1], ErrorCode.NONE)
        return OffsetFetchResponsePartitions(
            partition_index=tp[1],
            committed_offset=found.offset,
            committed_leader_epoch=found.leader_epoch,
            metadata=found.metadata,
        )

    # -- OffsetDelete ---------------------------------------------------------------------------

    def delete(self, request_id: RequestId, request: OffsetDeleteRequest) -> None:
        """Handle an OffsetDelete (see the module docstring)."""
        if not request.group_id:
            response = OffsetDeleteResponse(error_code=ErrorCode.INVALID_GROUP_ID)
            return self.core.reply(request_id, response)
        group = self.core.groups.get(request.group_id)
        if group is None or group.is_in(_DEAD):
            response = OffsetDeleteResponse(error_code=ErrorCode.GROUP_ID_NOT_FOUND)
            return self.core.reply(request_id, response)
        if not group.is_in(_EMPTY) and not group.uses_consumer_protocol():
            response = OffsetDeleteResponse(error_code=ErrorCode.NON_EMPTY_GROUP)
            return self.core.reply(request_id, response)
        topics, records = self._delete_plan(group, request)
        response = OffsetDeleteResponse(topics=topics)
        if not records:
            return self.core.reply(request_id, response)
        self.core.park(request_id, lambda e: OffsetDeleteResponse(error_code=e))

        def done(error: ErrorCode, now_ms: int) -> None:
            if error is ErrorCode.NONE:
                return self.core.reply(request_id, response)
            failed = OffsetDeleteResponse(error_code=append_error_to_commit_error(error))
            return self.core.reply(request_id, failed)

        self.core.write(records, done)
        return None

    def _delete_plan(
        self, group: ClassicGroup, request: OffsetDeleteRequest
    ) -> tuple[list[OffsetDeleteResponseTopic], list[CoordinatorRecord]]:
        committed = self.core.offsets.committed(group.group_id)
        topics = []
        records: list[CoordinatorRecord] = []
        for topic in request.topics:
            error = (
                ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC
                if group.is_subscribed_to(topic.name)
                else ErrorCode.NONE
            )
            partitions = []
            for p in topic.partitions:
                tp = (topic.name, p.partition_index)
                partitions.append(
                    OffsetDeleteResponsePartition(partition_index=tp[1], error_code=error)
                )
                known = tp in committed or self.core.offsets.in_flight(group.group_id, tp)
                if error is ErrorCode.NONE and known:
                    records.append(OffsetRecord(group.group_id, tp[0], tp[1], None))
            topics.append(OffsetDeleteResponseTopic(name=topic.name, partitions=partitions))
        return topics, records

    def delete_partitions(self, partitions: set[TopicPartitionLike]) -> None:
        """Tombstone the offsets every group holds (or is writing) for ``partitions``."""
        records: list[CoordinatorRecord] = []
        for group_id in list(self.core.groups):
            held = set(self.core.offsets.committed(group_id))
            held |= set(self.core.offsets.in_flight_partitions(group_id))
            for topic, partition in sorted(held & partitions):
                records.append(OffsetRecord(group_id, topic, partition, None))
        if records:
            self.core.write(records, _nothing_to_undo)

    # -- expiry ---------------------------------------------------------------------------------

    def expire(self, now_ms: int) -> None:
        """Delete expired offsets and empty groups left without offsets."""
        for group in list(self.core.groups.values()):
            if not group.is_in(_DEAD):
                self._expire_group(group, now_ms)

    def _expire_group(self, group: ClassicGroup, now_ms: int) -> None:
        group_id = group.group_id
        expired, all_expired = self._expired_offsets(group, now_ms)
        records: list[CoordinatorRecord] = [OffsetRecord(group_id, t, p, None) for t, p in expired]
        deletes_group = (
            all_expired
            and group.is_in(_EMPTY)
            and not group.pending_members
            and not self.core.offsets.in_flight_partitions(group_id)
        )
        if deletes_group and not records and group.generation_id == 0:
            return self.core.discard_group_if_unused(group_id)  # never written: just forget it
        became_empty_ms = group.state_timestamp_ms
        if deletes_group:
            group.transition_to(_DEAD, now_ms)
            records.append(GroupRecord(group_id, None))
        if not records:
            return None

        def done(error: ErrorCode, now_ms: int) -> None:
            if deletes_group:
                self.finish_group_deletion(group, error, became_empty_ms)

        self.core.write(records, done)
        return None

    def finish_group_deletion(
        self, group: ClassicGroup, error: ErrorCode, became_empty_ms: int | None
    ) -> None:
        """A write deleting ``group`` (now Dead) completed: forget the group, or if the write
        failed make it Empty again as it was (it stays in the log, so it stays here)."""
        if self.core.groups.get(group.group_id) is not group or not group.is_in(_DEAD):
            return
        if error is ErrorCode.NONE:
            del self.core.groups[group.group_id]
            return
        group.transition_to(_EMPTY, became_empty_ms or 0)
        group.state_timestamp_ms = became_empty_ms

    def _expired_offsets(
        self, group: ClassicGroup, now_ms: int
    ) -> tuple[list[TopicPartitionLike], bool]:
        """(expired partitions, whether every offset of the group expired)."""
        committed = self.core.offsets.committed(group.group_id)
        if not committed:
            return [], True
        base = self._retention_base(group)
        if base is None:
            return [], False
        retention_ms = self.core.config.offsets_retention_ms
        expired = []
        for tp, offset in committed.items():
            if group.is_subscribed_to(tp[0]) or self.core.offsets.in_flight(group.group_id, tp):
                continue
            if offset.expire_timestamp_ms is not None:
                is_expired = now_ms >= offset.expire_timestamp_ms
            else:
                is_expired = now_ms - base(offset) >= retention_ms
            if is_expired:
                expired.append(tp)
        return expired, len(expired) == len(committed)

    def _retention_base(self, group: ClassicGroup) -> Callable[[CommittedOffset], int] | None:
        """When an offset's retention starts, or None when the group's offsets do not expire."""
        if group.protocol_type is None:
            return lambda offset: offset.commit_timestamp_ms
        if group.is_in(_EMPTY):
            became_empty = group.state_timestamp_ms
            if became_empty is None:
                return lambda offset: offset.commit_timestamp_ms
            return lambda offset: became_empty
        consumers_known = group.uses_consumer_protocol() and group.subscribed_topics is not None
        if consumers_known and group.is_in(_STABLE):
            return lambda offset: offset.commit_timestamp_ms
        return None


def _nothing_to_undo(error: ErrorCode, now_ms: int) -> None:
    """Tombstones for deleted partitions failed: the offsets stay, and are deleted again when
    the topic's deletion is reported again (or expire)."""


def _commit_response(
    request: OffsetCommitRequest, error_of: Callable[[TopicPartitionLike], ErrorCode]
) -> OffsetCommitResponse:
    return OffsetCommitResponse(
        topics=[
            OffsetCommitResponseTopic(
                name=topic.name,
                partitions=[
                    OffsetCommitResponsePartition(
                        partition_index=p.partition_index,
                        error_code=error_of((topic.name, p.partition_index)),
                    )
                    for p in topic.partitions
                ],
            )
            for topic in request.topics
        ]
    )


def _no_offset(partition: int, error: ErrorCode) -> OffsetFetchResponsePartitions:
    return OffsetFetchResponsePartitions(
        partition_index=partition,
        committed_offset=-1,
        committed_leader_epoch=-1,
        metadata="",
        error_code=error,
    )
