"""A test owner for ``GroupCoordinatorShard``: a manual clock, a list standing in for the
``__consumer_offsets`` partition, and helpers that send requests and collect replies.

Writes returned by the shard wait in ``pending`` until the test completes them
(``complete_writes``); a successful write appends its records to ``log``, which is what a reload
replays. ``auto_write=True`` completes every write as soon as it is returned.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from typing import Any

from replog.errors import ErrorCode
from replog.groups.config import GroupConfig
from replog.groups.effects import Effects, Write
from replog.groups.records import RawRecord
from replog.groups.shard import GroupCoordinatorShard
from replog.protocol.consumer_protocol import ConsumerProtocolSubscription
from replog.protocol.messages import (
    HeartbeatRequest,
    JoinGroupRequest,
    JoinGroupRequestProtocol,
    MemberIdentity,
    OffsetCommitRequest,
    OffsetCommitRequestPartition,
    OffsetCommitRequestTopic,
    OffsetFetchRequestGroup,
    OffsetFetchRequestTopics,
    SyncGroupRequest,
    SyncGroupRequestAssignment,
)
from replog.protocol.schema import Message

SESSION_MS = 10_000
REBALANCE_MS = 30_000


def subscription(*topics: str) -> bytes:
    """Realistic consumer JoinGroup metadata."""
    return ConsumerProtocolSubscription(topics=list(topics)).encode()


def counter_suffixes() -> Iterator[str]:
    """Member id suffixes for tests: "1", "2", ..."""
    return (str(n) for n in itertools.count(1))


class Harness:
    """Drives one shard; see the module docstring."""

    def __init__(
        self,
        config: GroupConfig | None = None,
        *,
        auto_write: bool = True,
        now_ms: int = 1_000_000,
        partition: int = 0,
    ) -> None:
        self.config = config or GroupConfig()
        self.now_ms = now_ms
        self.auto_write = auto_write
        self.log: list[RawRecord] = []
        self.pending: list[Write] = []
        self.replies: dict[int, Message] = {}
        self._ids = itertools.count(1)
        suffixes = counter_suffixes()
        self._suffix = lambda: next(suffixes)
        self.shard = GroupCoordinatorShard(
            partition, config=self.config, member_id_suffix=self._suffix, now_ms=now_ms
        )

    # -- plumbing -------------------------------------------------------------------------------

    def absorb(self, effects: Effects) -> Effects:
        """Record replies and writes (completing writes at once when ``auto_write``)."""
        for reply in effects.replies:
            assert reply.request_id not in self.replies, f"second reply to {reply.request_id}"
            self.replies[reply.request_id] = reply.response
        self.pending.extend(effects.writes)
        if self.auto_write:
            self.complete_writes()
        return effects

    def complete_writes(self, error: ErrorCode = ErrorCode.NONE, count: int | None = None) -> None:
        """Report the oldest ``count`` (default all) pending writes with ``error``."""
        while self.pending and (count is None or count > 0):
            write = self.pending.pop(0)
            if error is ErrorCode.NONE:
                self.log.extend(write.records)
            self.absorb(self.shard.on_write_complete(write.write_id, error, now_ms=self.now_ms))
            if count is not None:
                count -= 1

    def advance(self, ms: int) -> Effects:
        """Let ``ms`` pass, firing timers."""
        self.now_ms += ms
        return self.absorb(self.shard.on_tick(self.now_ms))

    def new_id(self) -> int:
        """A fresh request id."""
        return next(self._ids)

    def reply(self, request_id: int) -> Any:
        """The reply to ``request_id`` (None if not answered yet)."""
        return self.replies.get(request_id)

    def reload(self) -> GroupCoordinatorShard:
        """Unload and rebuild the shard from ``log``."""
        self.absorb(self.shard.unload())
        self.pending.clear()
        self.shard, _ = GroupCoordinatorShard.load(
            0, self.log, config=self.config, member_id_suffix=self._suffix, now_ms=self.now_ms
        )
        return self.shard

    # -- requests -------------------------------------------------------------------------------

    def join(
        self,
        group_id: str = "g",
        member_id: str = "",
        *,
        instance_id: str | None = None,
        protocols: list[tuple[str, bytes]] | None = None,
        version: int = 5,
        session_ms: int = SESSION_MS,
        rebalance_ms: int = REBALANCE_MS,
        protocol_type: str = "consumer",
        client_id: str = "client",
    ) -> int:
        """Send a JoinGroup; returns its request id."""
        chosen = protocols if protocols is not None else [("range", subscription("t"))]
        request = JoinGroupRequest(
            group_id=group_id,
            session_timeout_ms=session_ms,
            rebalance_timeout_ms=rebalance_ms,
            member_id=member_id,
            group_instance_id=instance_id,
            protocol_type=protocol_type,
            protocols=[JoinGroupRequestProtocol(name=n, metadata=m) for n, m in chosen],
        )
        request_id = self.new_id()
        self.absorb(
            self.shard.on_join_group(
                request_id,
                request,
                api_version=version,
                client_id=client_id,
                client_host="/127.0.0.1",
                now_ms=self.now_ms,
            )
        )
        return request_id

    def sync(
        self,
        member_id: str,
        generation: int,
        group_id: str = "g",
        *,
        assignments: dict[str, bytes] | None = None,
        instance_id: str | None = None,
        version: int = 3,
    ) -> int:
        """Send a SyncGroup; returns its request id."""
        request = SyncGroupRequest(
            group_id=group_id,
            generation_id=generation,
            member_id=member_id,
            group_instance_id=instance_id,
            assignments=[
                SyncGroupRequestAssignment(member_id=m, assignment=a)
                for m, a in (assignments or {}).items()
            ],
        )
        request_id = self.new_id()
        self.absorb(
            self.shard.on_sync_group(request_id, request, api_version=version, now_ms=self.now_ms)
        )
        return request_id

    def heartbeat(
        self, member_id: str, generation: int, group_id: str = "g", instance_id: str | None = None
    ) -> int:
        """Send a Heartbeat; returns its error code."""
        request_id = self.new_id()
        request = HeartbeatRequest(
            group_id=group_id,
            generation_id=generation,
            member_id=member_id,
            group_instance_id=instance_id,
        )
        self.absorb(self.shard.on_heartbeat(request_id, request, now_ms=self.now_ms))
        return int(self.replies[request_id].error_code)

    def leave(self, *members: MemberIdentity, group_id: str = "g") -> Any:
        """Send a LeaveGroup; returns the response."""
        request_id = self.new_id()
        effects = self.shard.on_leave_group(request_id, group_id, list(members), now_ms=self.now_ms)
        self.absorb(effects)
        return self.replies[request_id]

    def commit(
        self,
        offsets: dict[tuple[str, int], int],
        group_id: str = "g",
        *,
        member_id: str = "",
        generation: int = -1,
        instance_id: str | None = None,
        metadata: str | None = "",
        retention_ms: int = -1,
    ) -> int:
        """Send an OffsetCommit; returns its request id."""
        topics: dict[str, list[OffsetCommitRequestPartition]] = {}
        for (topic, partition), offset in offsets.items():
            topics.setdefault(topic, []).append(
                OffsetCommitRequestPartition(
                    partition_index=partition, committed_offset=offset, committed_metadata=metadata
                )
            )
        request = OffsetCommitRequest(
            group_id=group_id,
            generation_id_or_member_epoch=generation,
            member_id=member_id,
            group_instance_id=instance_id,
            retention_time_ms=retention_ms,
            topics=[OffsetCommitRequestTopic(name=t, partitions=p) for t, p in topics.items()],
        )
        request_id = self.new_id()
        self.absorb(self.shard.on_offset_commit(request_id, request, now_ms=self.now_ms))
        return request_id

    def fetch(
        self,
        group_id: str = "g",
        partitions: list[tuple[str, int]] | None = None,
        *,
        require_stable: bool = False,
    ) -> dict[tuple[str, int], tuple[int, int]]:
        """Fetch offsets: {(topic, partition): (offset, error code)}."""
        topics = None
        if partitions is not None:
            by_topic: dict[str, list[int]] = {}
            for topic, partition in partitions:
                by_topic.setdefault(topic, []).append(partition)
            topics = [
                OffsetFetchRequestTopics(name=t, partition_indexes=p) for t, p in by_topic.items()
            ]
        response = self.shard.fetch_offsets(
            OffsetFetchRequestGroup(group_id=group_id, topics=topics), require_stable=require_stable
        )
        return {
            (t.name, p.partition_index): (p.committed_offset, p.error_code)
            for t in response.topics
            for p in t.partitions
        }

    # -- scenarios ------------------------------------------------------------------------------

    def join_with_id(self, group_id: str = "g", **kwargs: Any) -> tuple[str, int]:
        """The KIP-394 handshake: join, get MEMBER_ID_REQUIRED, rejoin with the id. Returns
        (member id, request id of the second join)."""
        first = self.join(group_id, **kwargs)
        response = self.replies[first]
        assert response.error_code == ErrorCode.MEMBER_ID_REQUIRED, response
        return response.member_id, self.join(group_id, member_id=response.member_id, **kwargs)

    def stable_group(self, size: int, group_id: str = "g") -> tuple[list[str], int]:
        """Bring ``size`` dynamic members to a Stable generation. Returns (member ids, leader
        first; generation)."""
        joins = [self.join_with_id(group_id) for _ in range(size)]
        # The initial rebalance extends itself while members keep arriving.
        while any(self.reply(request_id) is None for _, request_id in joins):
            self.advance(self.config.initial_rebalance_delay_ms)
        responses = [self.replies[request_id] for _, request_id in joins]
        generation = responses[0].generation_id
        leader = responses[0].leader
        members = [leader] + [m for m, _ in joins if m != leader]
        assignments = {m: f"assignment-{m}".encode() for m in members}
        syncs = [self.sync(leader, generation, group_id, assignments=assignments)]
        syncs += [self.sync(m, generation, group_id) for m in members[1:]]
        for request_id in syncs:
            assert self.replies[request_id].error_code == ErrorCode.NONE, self.replies[request_id]
        return members, generation
