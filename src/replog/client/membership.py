"""``GroupMembership``: one consumer's membership of its group (the classic protocol, eager).

A member joins (JoinGroup; from v4 the first join only hands out a member id, KIP-394, and is
repeated with it), the coordinator picks a generation, a leader and a protocol (the first of the
members' assignors they all support), the leader assigns every subscribed partition with that
assignor (``assignors``) and sends everyone's share with its SyncGroup; the others' SyncGroup
returns theirs. Subscriptions and assignments are Kafka's consumer protocol
(``replog.protocol.consumer_protocol``), so a group may mix replog with any Kafka client.

Once the member has its assignment it is STABLE and a heartbeat task keeps its session alive
every ``heartbeat_interval_ms``, also while the application is busy between polls:

- REBALANCE_IN_PROGRESS: another member joined or left; ``needs_join`` (the owner rejoins on its
  next poll, after giving its partitions up);
- ILLEGAL_GENERATION / UNKNOWN_MEMBER_ID / FENCED_INSTANCE_ID: this member was dropped (its
  session expired); it rejoins (with a new member id for UNKNOWN_MEMBER_ID);
- NOT_COORDINATOR / COORDINATOR_NOT_AVAILABLE / a lost connection: the coordinator moved (its
  broker failed, say); the next heartbeat finds the new one, which loaded the group, generation
  and assignment from ``__consumer_offsets``, so the group goes on without a rebalance.

A member that has not polled for ``max_poll_interval_ms`` leaves the group (as Kafka's consumer
does), so its partitions go to members that are making progress.
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence

import attrs

from replog.client.assignors import Assignor
from replog.client.connection import now_ms
from replog.client.errors import ConnectionLostError, error_for_code
from replog.client.group import GroupClient
from replog.errors import ErrorCode, InvalidConfigError, RequestTimeoutError
from replog.protocol.consumer_protocol import (
    PROTOCOL_TYPE,
    ConsumerProtocolAssignment,
    ConsumerProtocolSubscription,
    TopicPartitions,
)
from replog.protocol.messages import (
    LEAVE_GROUP,
    HeartbeatRequest,
    HeartbeatResponse,
    JoinGroupRequest,
    JoinGroupRequestProtocol,
    JoinGroupResponse,
    LeaveGroupRequest,
    LeaveGroupResponse,
    MemberIdentity,
    SyncGroupRequest,
    SyncGroupRequestAssignment,
    SyncGroupResponse,
)

__all__ = ["GroupMembership", "MemberState", "MembershipConfig"]

_log = logging.getLogger(__name__)

PartitionCounts = Callable[[set[str]], Awaitable[Mapping[str, int]]]
"""How the leader learns the partition counts of the topics it assigns."""

_JOIN_TIMEOUT_EXTRA_MS = 5_000
"""A JoinGroup waits for the rebalance: its request timeout is the rebalance timeout plus this."""
_SUBSCRIPTION_VERSION = 0
_ASSIGNMENT_VERSION = 0
_REJOIN_CODES = frozenset(
    {ErrorCode.REBALANCE_IN_PROGRESS, ErrorCode.ILLEGAL_GENERATION, ErrorCode.UNKNOWN_MEMBER_ID}
)


class MemberState(enum.Enum):
    """Where the member is."""

    UNJOINED = "unjoined"
    REBALANCING = "rebalancing"
    STABLE = "stable"


@attrs.frozen(kw_only=True)
class MembershipConfig:
    """Kafka's consumer settings for the group protocol."""

    session_timeout_ms: int
    rebalance_timeout_ms: int  # Kafka's max.poll.interval.ms
    heartbeat_interval_ms: int
    group_instance_id: str | None
    assignors: tuple[Assignor, ...]

    def __attrs_post_init__(self) -> None:
        if not self.assignors:
            raise InvalidConfigError("partition_assignment_strategy names no assignor")
        if not 0 < self.heartbeat_interval_ms < self.session_timeout_ms:
            raise InvalidConfigError("heartbeat_interval_ms must be below session_timeout_ms")


@attrs.frozen
class _Joined:
    generation: int
    member_id: str
    leader: str
    protocol: str
    members: tuple[tuple[str, bytes], ...]


class GroupMembership:
    """See the module docstring."""

    def __init__(self, group: GroupClient, config: MembershipConfig) -> None:
        self.group = group
        self.config = config
        self.member_id = ""
        self.generation = -1
        self.state = MemberState.UNJOINED
        self.needs_join = True
        #: as the leader of the current generation: the partition counts it assigned
        self.assigned_counts: dict[str, int] | None = None
        self.last_poll_ms = now_ms()
        self._heartbeats: asyncio.Task[None] | None = None

    # -- joining --------------------------------------------------------------------------------

    def request_rejoin(self, why: str) -> None:
        """Rejoin on the next poll (the subscription or the partition counts changed)."""
        if not self.needs_join:
            _log.info("group %s: rejoining: %s", self.group.group_id, why)
        self.needs_join = True

    async def join(
        self, topics: set[str], partition_counts: PartitionCounts
    ) -> list[tuple[str, int]]:
        """Join and sync until this member has an assignment in a generation (retrying what
        Kafka retries); returns it."""
        self.state = MemberState.REBALANCING
        self.needs_join = False
        while True:
            assignment = await self._join_once(topics, partition_counts)
            if assignment is not None:
                self.state = MemberState.STABLE
                self._start_heartbeats()
                return assignment
            self.needs_join = False
            await self.group.backoff()

    async def _join_once(
        self, topics: set[str], partition_counts: PartitionCounts
    ) -> list[tuple[str, int]] | None:
        joined = await self._join_group(topics)
        if joined is None:
            return None
        self.member_id, self.generation = joined.member_id, joined.generation
        assignments: list[SyncGroupRequestAssignment] = []
        self.assigned_counts = None
        if joined.leader == joined.member_id:
            assignments = await self._lead(joined, partition_counts)
        request = SyncGroupRequest(
            group_id=self.group.group_id,
            generation_id=joined.generation,
            member_id=joined.member_id,
            group_instance_id=self.config.group_instance_id,
            protocol_type=PROTOCOL_TYPE,
            protocol_name=joined.protocol,
            assignments=assignments,
        )
        try:
            response = await self.group.send(
                request, SyncGroupResponse, timeout_ms=self._join_timeout_ms
            )
        except (ConnectionLostError, RequestTimeoutError):
            return None
        code = response.error_code
        if code != ErrorCode.NONE:
            self._on_membership_error(code, "SyncGroup")
            return None
        if not response.assignment:
            return []
        decoded = ConsumerProtocolAssignment.decode(response.assignment)
        return sorted((tp.topic, p) for tp in decoded.assigned_partitions for p in tp.partitions)

    async def _join_group(self, topics: set[str]) -> _Joined | None:
        """One JoinGroup (two when the coordinator first asks for a member id)."""
        subscription = ConsumerProtocolSubscription(topics=sorted(topics)).encode(
            _SUBSCRIPTION_VERSION
        )
        for _ in range(2):
            request = JoinGroupRequest(
                group_id=self.group.group_id,
                session_timeout_ms=self.config.session_timeout_ms,
                rebalance_timeout_ms=self.config.rebalance_timeout_ms,
                member_id=self.member_id,
                group_instance_id=self.config.group_instance_id,
                protocol_type=PROTOCOL_TYPE,
                protocols=[
                    JoinGroupRequestProtocol(name=a.name, metadata=subscription)
                    for a in self.config.assignors
                ],
            )
            try:
                response = await self.group.send(
                    request, JoinGroupResponse, timeout_ms=self._join_timeout_ms
                )
            except (ConnectionLostError, RequestTimeoutError):
                return None
            code = response.error_code
            if code == ErrorCode.MEMBER_ID_REQUIRED:
                self.member_id = response.member_id
                continue
            if code != ErrorCode.NONE:
                self._on_membership_error(code, "JoinGroup")
                return None
            return _Joined(
                generation=response.generation_id,
                member_id=response.member_id,
                leader=response.leader,
                protocol=response.protocol_name or "",
                members=tuple((m.member_id, bytes(m.metadata)) for m in response.members),
            )
        return None

    async def _lead(
        self, joined: _Joined, partition_counts: PartitionCounts
    ) -> list[SyncGroupRequestAssignment]:
        """As the leader: assign every member's subscribed partitions."""
        assignor = next((a for a in self.config.assignors if a.name == joined.protocol), None)
        if assignor is None:
            raise InvalidConfigError(f"the group chose assignor {joined.protocol!r}, unknown here")
        subscriptions: dict[str, list[str]] = {}
        for member_id, metadata in joined.members:
            try:
                subscriptions[member_id] = list(
                    ConsumerProtocolSubscription.decode(metadata).topics
                )
            except Exception:  # a member we cannot read gets nothing (its client will rejoin)
                _log.warning("group %s: unreadable subscription of %s", self.group.group_id,
                             member_id)  # fmt: skip
                subscriptions[member_id] = []
        wanted = {t for topics in subscriptions.values() for t in topics}
        counts = dict(await partition_counts(wanted))
        self.assigned_counts = counts
        shares = assignor.assign(subscriptions, counts)
        return [
            SyncGroupRequestAssignment(
                member_id=member_id,
                assignment=ConsumerProtocolAssignment(
                    assigned_partitions=_topic_partitions(tps)
                ).encode(_ASSIGNMENT_VERSION),
            )
            for member_id, tps in sorted(shares.items())
        ]

    def _on_membership_error(self, code: int, what: str) -> None:
        """What a failed JoinGroup / SyncGroup means for the next attempt; raises when no
        attempt can succeed (an invalid session timeout, an unknown protocol, ...)."""
        self.group.note_error(code)
        if code == ErrorCode.UNKNOWN_MEMBER_ID:
            self.member_id = ""
        if code in (ErrorCode.ILLEGAL_GENERATION, ErrorCode.UNKNOWN_MEMBER_ID):
            self.generation = -1
        if code in _REJOIN_CODES or ErrorCode(code).retriable:
            return
        raise error_for_code(code, f"{what} of group {self.group.group_id!r}")

    @property
    def _join_timeout_ms(self) -> int:
        return max(
            self.group.request_timeout_ms, self.config.rebalance_timeout_ms + _JOIN_TIMEOUT_EXTRA_MS
        )

    # -- heartbeats and leaving ----------------------------------------------------------------

    def _start_heartbeats(self) -> None:
        if self._heartbeats is None or self._heartbeats.done():
            self._heartbeats = asyncio.get_running_loop().create_task(self._heartbeat_loop())

    async def _heartbeat_loop(self) -> None:
        interval_s = self.config.heartbeat_interval_ms / 1000
        while True:
            await asyncio.sleep(interval_s)
            if self.state is not MemberState.STABLE or self.needs_join:
                continue
            if now_ms() - self.last_poll_ms > self.config.rebalance_timeout_ms:
                _log.warning("group %s: no poll for max_poll_interval_ms: leaving the group",
                             self.group.group_id)  # fmt: skip
                await self.leave("the consumer did not poll within max_poll_interval_ms")
                continue
            await self._heartbeat_once()

    async def _heartbeat_once(self) -> None:
        generation, member_id = self.generation, self.member_id
        request = HeartbeatRequest(
            group_id=self.group.group_id,
            generation_id=generation,
            member_id=member_id,
            group_instance_id=self.config.group_instance_id,
        )
        try:
            response = await self.group.send(
                request, HeartbeatResponse, timeout_ms=self.config.session_timeout_ms
            )
        except (ConnectionLostError, RequestTimeoutError):
            return  # the coordinator is looked up again for the next one
        code = response.error_code
        if code == ErrorCode.NONE or (generation, member_id) != (self.generation, self.member_id):
            return
        self.group.note_error(code)
        if code == ErrorCode.UNKNOWN_MEMBER_ID:
            self.member_id = ""
        if code in (ErrorCode.ILLEGAL_GENERATION, ErrorCode.UNKNOWN_MEMBER_ID,
                    ErrorCode.FENCED_INSTANCE_ID):  # fmt: skip
            self.generation = -1
        if code in _REJOIN_CODES or code == ErrorCode.FENCED_INSTANCE_ID:
            self.request_rejoin(f"heartbeat: {ErrorCode(code).name}")

    def note_poll(self) -> None:
        """The application polled (for ``max_poll_interval_ms``)."""
        self.last_poll_ms = now_ms()

    async def leave(self, reason: str) -> None:
        """Leave the group (a dynamic member; a static one keeps its place until its session
        ends, as in Kafka), and be ready to join again."""
        member_id, self.member_id = self.member_id, ""
        self.generation, self.state, self.needs_join = -1, MemberState.UNJOINED, True
        if not member_id or self.config.group_instance_id is not None:
            return
        try:
            version = await self.group.api_version(LEAVE_GROUP)
            if version >= 3:
                identity = MemberIdentity(
                    member_id=member_id, reason=reason if version >= 5 else None
                )
                request = LeaveGroupRequest(group_id=self.group.group_id, members=[identity])
            else:
                request = LeaveGroupRequest(group_id=self.group.group_id, member_id=member_id)
            await self.group.send(request, LeaveGroupResponse)
        except (ConnectionLostError, RequestTimeoutError) as exc:
            _log.info("group %s: leave not delivered (%s): the session will expire",
                      self.group.group_id, exc)  # fmt: skip

    async def stop(self) -> None:
        """Stop heartbeating."""
        task, self._heartbeats = self._heartbeats, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task


def _topic_partitions(tps: Sequence[tuple[str, int]]) -> list[TopicPartitions]:
    by_topic: dict[str, list[int]] = {}
    for topic, partition in sorted(tps):
        by_topic.setdefault(topic, []).append(partition)
    return [TopicPartitions(topic=t, partitions=p) for t, p in by_topic.items()]
