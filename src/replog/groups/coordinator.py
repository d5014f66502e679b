"""The group coordinator of one broker: every ``__consumer_offsets`` partition it leads.

A broker hosts one ``GroupCoordinatorShard`` per partition it leads and answers requests for
groups of other partitions NOT_COORDINATOR, and for partitions still loading
COORDINATOR_LOAD_IN_PROGRESS (a Heartbeat answers NONE while loading, a SyncGroup
REBALANCE_IN_PROGRESS: Kafka's choices for older clients). ``handle`` takes a decoded request of
any group API at its version and returns replies shaped for that version (``wire``); requests
naming groups of several partitions (DeleteGroups, DescribeGroups, OffsetFetch v8) are split
and answered once every part is.

A shard input that raises partway (a bug) is logged and abandoned (``core``): the request it
handled is answered UNKNOWN_SERVER_ERROR, every other request and the shard go on.

The owner's duties are those of ``effects``; in addition request ids must be >= 0 (negative
ids name the parts of split requests), and ``Write.partition`` says which shard a write
outcome goes back to. FindCoordinator needs cluster metadata and is answered by
``wire.find_coordinator``.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable, Iterable
from typing import Any

import attrs

from replog.errors import ErrorCode, invariant, unreachable
from replog.groups.config import GroupConfig
from replog.groups.core import InputFailed
from replog.groups.effects import Effects, GroupReply, RequestId
from replog.groups.group import SubscriptionReader
from replog.groups.loading import LoadSummary, ShardLoader
from replog.groups.partitioning import partition_for
from replog.groups.rebalance import join_error, sync_error
from replog.groups.records import RawRecord
from replog.groups.shard import GroupCoordinatorShard
from replog.groups.wire import (
    leave_members,
    offset_fetch_groups,
    shape_join_group,
    shape_leave_group,
    shape_offset_fetch,
)
from replog.protocol.messages import (
    HEARTBEAT,
    JOIN_GROUP,
    LEAVE_GROUP,
    OFFSET_COMMIT,
    OFFSET_DELETE,
    SYNC_GROUP,
    DeletableGroupResult,
    DeleteGroupsRequest,
    DeleteGroupsResponse,
    DescribedGroup,
    DescribeGroupsRequest,
    DescribeGroupsResponse,
    HeartbeatRequest,
    HeartbeatResponse,
    JoinGroupRequest,
    JoinGroupResponse,
    LeaveGroupRequest,
    LeaveGroupResponse,
    ListGroupsRequest,
    ListGroupsResponse,
    OffsetCommitRequest,
    OffsetCommitResponse,
    OffsetCommitResponsePartition,
    OffsetCommitResponseTopic,
    OffsetDeleteRequest,
    OffsetDeleteResponse,
    OffsetFetchRequest,
    OffsetFetchRequestGroup,
    OffsetFetchResponseGroup,
    OffsetFetchResponsePartitions,
    OffsetFetchResponseTopics,
    SyncGroupRequest,
)
from replog.protocol.schema import Message

__all__ = ["GROUP_OPERATIONS_ALLOWED", "GroupCoordinator"]

_log = logging.getLogger(__name__)

#: DescribeGroups ``authorized_operations`` without an authorizer: the operations a group
#: supports, as Kafka's AclOperation bits (READ 3, DELETE 6, DESCRIBE 8).
GROUP_OPERATIONS_ALLOWED = (1 << 3) | (1 << 6) | (1 << 8)


@attrs.frozen
class _Routed:
    """An owner request handed to one shard, whose reply is shaped for ``version``."""

    api_key: int
    version: int


@attrs.define
class _Split:
    """A DeleteGroups split across shards: the owner's id and the parts still to answer."""

    request_id: RequestId
    group_ids: list[str]
    parts: set[RequestId]
    results: dict[str, DeletableGroupResult] = attrs.field(factory=dict)


class GroupCoordinator:
    """The shards of the ``__consumer_offsets`` partitions one broker leads."""

    def __init__(
        self,
        *,
        config: GroupConfig,
        member_id_suffix: Callable[[], str],
        subscription_reader: SubscriptionReader | None = None,
    ) -> None:
        self.config = config
        self._suffix = member_id_suffix
        self._reader = subscription_reader
        self._shards: dict[int, GroupCoordinatorShard] = {}
        self._loading: set[int] = set()
        self._routed: dict[RequestId, _Routed] = {}
        self._splits: dict[RequestId, _Split] = {}
        self._next_part_id = -1

    # -- leadership -----------------------------------------------------------------------------

    def begin_loading(self, partition: int) -> None:
        """This broker now leads ``partition`` and is reading it: its groups' requests get
        COORDINATOR_LOAD_IN_PROGRESS until ``finish_loading``."""
        invariant(partition not in self._shards, f"partition {partition} is already loaded")
        self._loading.add(partition)

    def finish_loading(self, partition: int, loader: ShardLoader, *, now_ms: int) -> LoadSummary:
        """The partition was read into ``loader``: start serving its groups."""
        invariant(partition in self._loading, f"partition {partition} is not loading")
        self._loading.discard(partition)
        self._shards[partition], summary = GroupCoordinatorShard.from_loader(
            partition,
            loader,
            config=self.config,
            member_id_suffix=self._suffix,
            subscription_reader=self._reader,
            now_ms=now_ms,
        )
        return summary

    def load(self, partition: int, records: Iterable[RawRecord], *, now_ms: int) -> LoadSummary:
        """``begin_loading`` and ``finish_loading`` in one step, from ``records``."""
        loader = ShardLoader()
        for key, value in records:
            loader.replay(key, value)
        self.begin_loading(partition)
        return self.finish_loading(partition, loader, now_ms=now_ms)

    def unload(self, partition: int) -> Effects:
        """Leadership of ``partition`` moved: its waiting requests get NOT_COORDINATOR."""
        self._loading.discard(partition)
        shard = self._shards.pop(partition, None)
        if shard is None:
            return Effects()
        return self._route_effects(shard.unload())

    def hosted_partitions(self) -> list[int]:
        """The partitions served now."""
        return sorted(self._shards)

    def shard(self, partition: int) -> GroupCoordinatorShard | None:
        """The shard of ``partition``, if served (for tools and tests)."""
        return self._shards.get(partition)

    # -- requests -------------------------------------------------------------------------------

    def handle(
        self,
        request_id: RequestId,
        api_version: int,
        request: Message,
        *,
        client_id: str,
        client_host: str,
        now_ms: int,
    ) -> Effects:
        """Handle a decoded group request (see the module docstring)."""
        invariant(request_id >= 0, "owner request ids are >= 0")
        context = _Context(request_id, api_version, client_id, client_host, now_ms)
        handler = _HANDLERS.get(type(request))
        if handler is None:
            unreachable(f"{type(request).__name__} is not a group request")
        return handler(self, context, request)

    def _join(self, c: _Context, request: JoinGroupRequest) -> Effects:
        return self._single(
            c,
            JOIN_GROUP.api_key,
            request.group_id,
            lambda shard: shard.on_join_group(
                c.request_id,
                request,
                api_version=c.version,
                client_id=c.client_id,
                client_host=c.client_host,
                now_ms=c.now_ms,
            ),
            lambda error: join_error(request.member_id, error),
        )

    def _sync(self, c: _Context, request: SyncGroupRequest) -> Effects:
        def unavailable(error: ErrorCode) -> Message:
            # Loading means the rebalance was lost: rejoin (older clients do not know 14 here).
            if error == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS:
                error = ErrorCode.REBALANCE_IN_PROGRESS
            return sync_error(error)

        return self._single(
            c,
            SYNC_GROUP.api_key,
            request.group_id,
            lambda shard: shard.on_sync_group(
                c.request_id, request, api_version=c.version, now_ms=c.now_ms
            ),
            unavailable,
        )

    def _heartbeat(self, c: _Context, request: HeartbeatRequest) -> Effects:
        def unavailable(error: ErrorCode) -> Message:
            if error == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS:
                error = ErrorCode.NONE  # still loading: answer blindly, as Kafka does
            return HeartbeatResponse(error_code=error)

        return self._single(
            c,
            HEARTBEAT.api_key,
            request.group_id,
            lambda shard: shard.on_heartbeat(c.request_id, request, now_ms=c.now_ms),
            unavailable,
        )

    def _leave(self, c: _Context, request: LeaveGroupRequest) -> Effects:
        members = leave_members(request, c.version)
        return self._single(
            c,
            LEAVE_GROUP.api_key,
            request.group_id,
            lambda shard: shard.on_leave_group(
                c.request_id, request.group_id, members, now_ms=c.now_ms
            ),
            lambda error: LeaveGroupResponse(error_code=error),
        )

    def _commit(self, c: _Context, request: OffsetCommitRequest) -> Effects:
        def unavailable(error: ErrorCode) -> Message:
            return OffsetCommitResponse(
                topics=[
                    OffsetCommitResponseTopic(
                        name=t.name,
                        partitions=[
                            OffsetCommitResponsePartition(
                                partition_index=p.partition_index, error_code=error
                            )
                            for p in t.partitions
                        ],
                    )
                    for t in request.topics
                ]
            )

        return self._single(
            c,
            OFFSET_COMMIT.api_key,
            request.group_id,
            lambda shard: shard.on_offset_commit(c.request_id, request, now_ms=c.now_ms),
            unavailable,
        )

    def _offset_delete(self, c: _Context, request: OffsetDeleteRequest) -> Effects:
        return self._single(
            c,
            OFFSET_DELETE.api_key,
            request.group_id,
            lambda shard: shard.on_offset_delete(c.request_id, request, now_ms=c.now_ms),
            lambda error: OffsetDeleteResponse(error_code=error),
        )

    def _offset_fetch(self, c: _Context, request: OffsetFetchRequest) -> Effects:
        answers = []
        for group in offset_fetch_groups(request, c.version):
            partition = self._partition_of(group.group_id)
            error = self._unavailable(partition)
            if error is None:
                shard = self._shards[partition]
                answers.append(shard.fetch_offsets(group, require_stable=request.require_stable))
            else:
                answers.append(_fetch_error(group, error, c.version))
        response = shape_offset_fetch(answers, c.version)
        return Effects(replies=(GroupReply(c.request_id, response),))

    def _list(self, c: _Context, request: ListGroupsRequest) -> Effects:
        groups = []
        for partition in sorted(self._shards):
            groups.extend(self._shards[partition].list_groups(list(request.states_filter)))
        error = ErrorCode.COORDINATOR_LOAD_IN_PROGRESS if self._loading else ErrorCode.NONE
        response = ListGroupsResponse(error_code=error, groups=groups)
        return Effects(replies=(GroupReply(c.request_id, response),))

    def _describe(self, c: _Context, request: DescribeGroupsRequest) -> Effects:
        described = []
        for group_id in request.groups:
            partition = self._partition_of(group_id)
            error = self._unavailable(partition)
            if error is None:
                found = self._shards[partition].describe_groups([group_id])[0]
                if request.include_authorized_operations:
                    # No authorizer: every operation on a group is allowed.
                    found = attrs.evolve(found, authorized_operations=GROUP_OPERATIONS_ALLOWED)
                described.append(found)
            else:
                described.append(DescribedGroup(error_code=error, group_id=group_id))
        response = DescribeGroupsResponse(groups=described)
        return Effects(replies=(GroupReply(c.request_id, response),))

    def _delete_groups(self, c: _Context, request: DeleteGroupsRequest) -> Effects:
        split = _Split(c.request_id, list(request.groups_names), set())
        by_partition: dict[int, list[str]] = {}
        for group_id in request.groups_names:
            partition = self._partition_of(group_id)
            error = self._unavailable(partition)
            if error is None:
                by_partition.setdefault(partition, []).append(group_id)
            else:
                split.results[group_id] = DeletableGroupResult(group_id=group_id, error_code=error)
        effects = Effects()
        parts = {self._new_part_id(): p for p in by_partition}
        split.parts = set(parts)
        self._splits[c.request_id] = split
        for part_id, partition in parts.items():
            group_ids = by_partition[partition]
            call = functools.partial(
                self._shards[partition].on_delete_groups, part_id, group_ids, now_ms=c.now_ms
            )

            def failed(_: RequestId, group_ids: list[str] = group_ids) -> Message:
                results = [
                    DeletableGroupResult(group_id=g, error_code=ErrorCode.UNKNOWN_SERVER_ERROR)
                    for g in group_ids
                ]
                return DeleteGroupsResponse(results=results)

            effects += self._shard_input(call, failed)
        return effects + self._maybe_finish_split(split)

    # -- writes and time ------------------------------------------------------------------------

    def on_write_complete(
        self, partition: int, write_id: int, error: ErrorCode, *, now_ms: int
    ) -> Effects:
        """The outcome of a ``Write`` to ``partition`` (ignored if the partition was unloaded)."""
        shard = self._shards.get(partition)
        if shard is None:
            return Effects()
        return self._shard_input(
            functools.partial(shard.on_write_complete, write_id, error, now_ms=now_ms)
        )

    def on_partitions_deleted(
        self, partitions: Iterable[tuple[str, int]], *, now_ms: int
    ) -> Effects:
        """Topic partitions were deleted: every group forgets its offsets for them."""
        effects = Effects()
        deleted = list(partitions)
        for partition in sorted(self._shards):
            shard = self._shards[partition]
            effects += self._shard_input(
                functools.partial(shard.on_partitions_deleted, deleted, now_ms=now_ms)
            )
        return effects

    def next_deadline_ms(self) -> int | None:
        """When ``on_tick`` next has something to do."""
        deadlines = [d for s in self._shards.values() if (d := s.next_deadline_ms()) is not None]
        return min(deadlines, default=None)

    def on_tick(self, now_ms: int) -> Effects:
        """Let every shard run its due timers."""
        effects = Effects()
        for partition in sorted(self._shards):
            effects += self._shard_input(functools.partial(self._shards[partition].on_tick, now_ms))
        return effects

    # -- routing --------------------------------------------------------------------------------

    def _partition_of(self, group_id: str) -> int:
        return partition_for(group_id, self.config.offsets_topic_partitions)

    def _unavailable(self, partition: int) -> ErrorCode | None:
        if partition in self._shards:
            return None
        if partition in self._loading:
            return ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
        return ErrorCode.NOT_COORDINATOR

    def _single(
        self,
        c: _Context,
        api_key: int,
        group_id: str,
        call: Callable[[GroupCoordinatorShard], Effects],
        unavailable: Callable[[ErrorCode], Message],
    ) -> Effects:
        partition = self._partition_of(group_id)
        error = self._unavailable(partition)
        routed = _Routed(api_key, c.version)
        if error is not None:
            return Effects(replies=(GroupReply(c.request_id, _shape(routed, unavailable(error))),))
        self._routed[c.request_id] = routed
        shard = self._shards[partition]
        return self._shard_input(
            functools.partial(call, shard), lambda _: unavailable(ErrorCode.UNKNOWN_SERVER_ERROR)
        )

    def _shard_input(
        self,
        call: Callable[[], Effects],
        failure_response: Callable[[RequestId], Message] | None = None,
    ) -> Effects:
        """The routed effects of one shard input. An input that raised (``InputFailed``: the
        shard resolved what it started and goes on) is logged with its cause, and the request
        it left unanswered gets ``failure_response``: that request alone fails."""
        try:
            effects = call()
        except InputFailed as failed:
            _log.error("group coordinator: %s", failed, exc_info=failed.__cause__)
            effects = failed.effects
            if failed.unanswered is not None:
                if failure_response is None:
                    unreachable("only an input handling a request leaves one unanswered")
                response = failure_response(failed.unanswered)
                effects += Effects(replies=(GroupReply(failed.unanswered, response),))
        return self._route_effects(effects)

    def _route_effects(self, effects: Effects) -> Effects:
        replies: list[GroupReply] = []
        for reply in effects.replies:
            if reply.request_id < 0:
                replies.extend(self._part_answered(reply))
                continue
            routed = self._routed.pop(reply.request_id)
            replies.append(GroupReply(reply.request_id, _shape(routed, reply.response)))
        return Effects(tuple(replies), effects.writes)

    def _new_part_id(self) -> RequestId:
        part_id = self._next_part_id
        self._next_part_id -= 1
        return part_id

    def _part_answered(self, reply: GroupReply) -> list[GroupReply]:
        split = next(s for s in self._splits.values() if reply.request_id in s.parts)
        split.parts.discard(reply.request_id)
        response = reply.response
        invariant(isinstance(response, DeleteGroupsResponse), "only DeleteGroups is split")
        for result in getattr(response, "results", []):
            split.results[result.group_id] = result
        return list(self._maybe_finish_split(split).replies)

    def _maybe_finish_split(self, split: _Split) -> Effects:
        if split.parts or split.request_id not in self._splits:
            return Effects()
        del self._splits[split.request_id]
        results = [split.results[g] for g in split.group_ids]
        return Effects(
            replies=(GroupReply(split.request_id, DeleteGroupsResponse(results=results)),)
        )


@attrs.frozen
class _Context:
    request_id: RequestId
    version: int
    client_id: str
    client_host: str
    now_ms: int


def _shape(routed: _Routed, response: Message) -> Message:
    if routed.api_key == JOIN_GROUP.api_key and isinstance(response, JoinGroupResponse):
        return shape_join_group(response, routed.version)
    if routed.api_key == LEAVE_GROUP.api_key and isinstance(response, LeaveGroupResponse):
        return shape_leave_group(response, routed.version)
    return response


def _fetch_error(
    group: OffsetFetchRequestGroup, error: ErrorCode, version: int
) -> OffsetFetchResponseGroup:
    """A group the broker cannot answer for: the error, and (for v0-v1, which carry errors
    per partition) the partitions asked about."""
    topics = []
    if version < 2 and group.topics is not None:
        topics = [
            OffsetFetchResponseTopics(
                name=t.name,
                partitions=[
                    OffsetFetchResponsePartitions(
                        partition_index=p, committed_offset=-1, metadata="", error_code=error
                    )
                    for p in t.partition_indexes
                ],
            )
            for t in group.topics
        ]
    return OffsetFetchResponseGroup(group_id=group.group_id, topics=topics, error_code=error)


# Each handler takes its own request type; the table is keyed by that type.
_Handler = Callable[[GroupCoordinator, _Context, Any], Effects]
_HANDLERS: dict[type, _Handler] = {
    JoinGroupRequest: GroupCoordinator._join,
    SyncGroupRequest: GroupCoordinator._sync,
    HeartbeatRequest: GroupCoordinator._heartbeat,
    LeaveGroupRequest: GroupCoordinator._leave,
    OffsetCommitRequest: GroupCoordinator._commit,
    OffsetFetchRequest: GroupCoordinator._offset_fetch,
    OffsetDeleteRequest: GroupCoordinator._offset_delete,
    ListGroupsRequest: GroupCoordinator._list,
    DescribeGroupsRequest: GroupCoordinator._describe,
    DeleteGroupsRequest: GroupCoordinator._delete_groups,
}
