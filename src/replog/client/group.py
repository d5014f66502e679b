"""``GroupClient``: one consumer group's coordinator, as the clients talk to it.

A group's coordinator is whichever broker leads the group's ``__consumer_offsets`` partition;
``coordinator()`` asks any broker (FindCoordinator, one key per request: v4 batches, earlier
versions name it directly) and remembers the answer until a request fails with
NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE or a lost connection (``coordinator_lost``); the next
request looks it up again. COORDINATOR_LOAD_IN_PROGRESS keeps the coordinator and retries.

The client has its own connections (a ``ClusterClient`` that only knows brokers), as Kafka's
clients use a connection of their own for the coordinator: a broker answers a connection's
requests in order, and a JoinGroup parked for a whole rebalance must not hold up a fetch.

``commit`` and ``fetch_committed`` retry what Kafka calls retriable until their deadline; a
commit the group refuses because the committer is not (or no longer) a member of the current
generation raises ``CommitFailedError``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Mapping, Sequence
from typing import TypeVar

import attrs

from replog.client.connection import ClusterClient, now_ms
from replog.client.errors import ConnectionLostError, error_for_code
from replog.client.metadata import BrokerAddress
from replog.errors import ErrorCode, ReplogError, RequestTimeoutError
from replog.protocol.messages import (
    COORDINATOR_KEY_GROUP,
    FIND_COORDINATOR,
    OFFSET_FETCH,
    FindCoordinatorRequest,
    FindCoordinatorResponse,
    OffsetCommitRequest,
    OffsetCommitRequestPartition,
    OffsetCommitRequestTopic,
    OffsetCommitResponse,
    OffsetFetchRequest,
    OffsetFetchRequestGroup,
    OffsetFetchRequestTopic,
    OffsetFetchRequestTopics,
    OffsetFetchResponse,
)
from replog.protocol.schema import ApiInfo, Message
from replog.topics import TopicPartitionLike

__all__ = [
    "COORDINATOR_CODES",
    "MEMBERSHIP_CODES",
    "CommitFailedError",
    "GroupClient",
    "OffsetAndMetadata",
]

R = TypeVar("R", bound=Message)

COORDINATOR_CODES = frozenset({ErrorCode.COORDINATOR_NOT_AVAILABLE, ErrorCode.NOT_COORDINATOR})
"""Errors after which the coordinator must be looked up again."""
MEMBERSHIP_CODES = frozenset(
    {
        ErrorCode.REBALANCE_IN_PROGRESS,
        ErrorCode.ILLEGAL_GENERATION,
        ErrorCode.UNKNOWN_MEMBER_ID,
        ErrorCode.FENCED_INSTANCE_ID,
    }
)
"""A commit refused because the committer is not a member of the current generation."""


class CommitFailedError(ReplogError):
    """The group refused a commit: a rebalance is under way or has already given the
    partitions to someone else (``code`` says which). The consumer rejoins on its next poll;
    records processed since the last successful commit may be delivered again."""

    def __init__(self, code: int, group_id: str) -> None:
        super().__init__(
            f"group {group_id!r} refused the commit ({ErrorCode(code).name}): the consumer is "
            "not a member of the current generation; poll to rejoin"
        )
        self.error_code = code
        self.code = ErrorCode(code)


@attrs.frozen
class OffsetAndMetadata:
    """A committed offset: the next offset to read, the leader epoch of the record before it
    (-1: unknown) and the committer's metadata."""

    offset: int
    leader_epoch: int = -1
    metadata: str = ""


class GroupClient:
    """Requests to one group's coordinator (see the module docstring)."""

    def __init__(
        self,
        client: ClusterClient,
        group_id: str,
        *,
        request_timeout_ms: int,
        retry_backoff_ms: int,
    ) -> None:
        self.group_id = group_id
        self._client = client
        self.request_timeout_ms = request_timeout_ms
        self.retry_backoff_ms = retry_backoff_ms
        self._coordinator: int | None = None
        self._lookup = asyncio.Lock()

    @classmethod
    def connect(
        cls,
        bootstrap: Sequence[tuple[str, int]],
        group_id: str,
        *,
        client_id: str,
        request_timeout_ms: int,
        retry_backoff_ms: int,
    ) -> GroupClient:
        """A client with connections of its own to the brokers at ``bootstrap``."""
        client = ClusterClient(
            list(bootstrap), client_id=client_id, request_timeout_ms=request_timeout_ms
        )
        return cls(
            client,
            group_id,
            request_timeout_ms=request_timeout_ms,
            retry_backoff_ms=retry_backoff_ms,
        )

    # -- the coordinator ------------------------------------------------------------------------

    @property
    def known_coordinator(self) -> int | None:
        """The coordinator's node id, if known."""
        return self._coordinator

    def coordinator_lost(self) -> None:
        """Look the coordinator up again before the next request."""
        self._coordinator = None

    async def coordinator(self, deadline_ms: int | None = None) -> int:
        """The coordinator's node id, looked up (and waited for) if unknown."""
        deadline = deadline_ms if deadline_ms is not None else now_ms() + self.request_timeout_ms
        async with self._lookup:
            while self._coordinator is None:
                found = await self._find_once()
                if found is not None:
                    self._coordinator = found
                    break
                if now_ms() >= deadline:
                    raise RequestTimeoutError(f"no coordinator for group {self.group_id!r}")
                await self.backoff()
            return self._coordinator

    async def _find_once(self) -> int | None:
        """Ask one broker; the coordinator's id, or None to retry (not available yet)."""
        client = self._client
        try:
            metadata = await client.refresh_metadata([])
            if not metadata.brokers:
                return None
            node = min(metadata.brokers)
            version = await client.api_version(node, FIND_COORDINATOR)
            if version >= 4:
                request = FindCoordinatorRequest(
                    key_type=COORDINATOR_KEY_GROUP, coordinator_keys=[self.group_id]
                )
            else:
                request = FindCoordinatorRequest(key=self.group_id, key_type=COORDINATOR_KEY_GROUP)
            response = await client.send(node, request, FindCoordinatorResponse)
        except (ConnectionLostError, RequestTimeoutError):
            return None
        if version >= 4:
            (found,) = response.coordinators
            code, node_id, host, port = found.error_code, found.node_id, found.host, found.port
        else:
            code, node_id = response.error_code, response.node_id
            host, port = response.host, response.port
        if code == ErrorCode.NONE:
            client.metadata.brokers[node_id] = BrokerAddress(node_id, host, port)
            return node_id
        if ErrorCode(code).retriable:
            return None
        raise error_for_code(code, f"FindCoordinator for group {self.group_id!r}")

    async def backoff(self) -> None:
        """Wait ``retry_backoff_ms``."""
        await asyncio.sleep(self.retry_backoff_ms / 1000)

    async def send(
        self, message: Message, response_type: type[R], *, timeout_ms: int | None = None
    ) -> R:
        """Send to the coordinator; a lost connection forgets it and re-raises."""
        node = await self.coordinator()
        try:
            return await self._client.send(node, message, response_type, timeout_ms=timeout_ms)
        except (ConnectionLostError, RequestTimeoutError):
            self.coordinator_lost()
            raise

    async def api_version(self, api: ApiInfo) -> int:
        """The negotiated version of ``api`` on the coordinator's connection."""
        node = await self.coordinator()
        try:
            return await self._client.api_version(node, api)
        except (ConnectionLostError, RequestTimeoutError):
            self.coordinator_lost()
            raise

    def note_error(self, code: int) -> None:
        """Forget the coordinator after an error that says it moved."""
        if code in COORDINATOR_CODES:
            self.coordinator_lost()

    # -- offsets --------------------------------------------------------------------------------

    async def commit(
        self,
        offsets: Mapping[TopicPartitionLike, OffsetAndMetadata],
        *,
        generation: int = -1,
        member_id: str = "",
        group_instance_id: str | None = None,
        timeout_ms: int | None = None,
    ) -> None:
        """Commit ``offsets`` for the group (generation -1 and no member: a consumer outside
        any generation, as ``assign`` users are). Retries until ``timeout_ms``."""
        if not offsets:
            return
        by_topic: dict[str, list[OffsetCommitRequestPartition]] = {}
        for (topic, partition), committed in sorted(offsets.items()):
            by_topic.setdefault(topic, []).append(
                OffsetCommitRequestPartition(
                    partition_index=partition,
                    committed_offset=committed.offset,
                    committed_leader_epoch=committed.leader_epoch,
                    committed_metadata=committed.metadata,
                )
            )
        request = OffsetCommitRequest(
            group_id=self.group_id,
            generation_id_or_member_epoch=generation,
            member_id=member_id,
            group_instance_id=group_instance_id,
            topics=[OffsetCommitRequestTopic(name=t, partitions=p) for t, p in by_topic.items()],
        )
        deadline = now_ms() + (timeout_ms if timeout_ms is not None else self.request_timeout_ms)
        while True:
            code = await self._commit_once(request)
            if code == ErrorCode.NONE:
                return
            if code in MEMBERSHIP_CODES:
                raise CommitFailedError(code, self.group_id)
            if not ErrorCode(code).retriable:
                raise error_for_code(code, f"commit of group {self.group_id!r}")
            if now_ms() >= deadline:
                raise RequestTimeoutError(
                    f"commit of group {self.group_id!r} did not succeed in time "
                    f"(last error {ErrorCode(code).name})"
                )
            await self.backoff()

    async def _commit_once(self, request: OffsetCommitRequest) -> int:
        """One attempt: NONE, or the first partition error (NETWORK_EXCEPTION: no answer)."""
        try:
            response = await self.send(request, OffsetCommitResponse)
        except (ConnectionLostError, RequestTimeoutError):
            return ErrorCode.NETWORK_EXCEPTION
        codes = [p.error_code for t in response.topics for p in t.partitions if p.error_code]
        for code in codes:
            self.note_error(code)
        return codes[0] if codes else ErrorCode.NONE

    async def fetch_committed(
        self, partitions: Iterable[TopicPartitionLike] | None, *, timeout_ms: int | None = None
    ) -> dict[TopicPartitionLike, OffsetAndMetadata | None]:
        """The group's committed offset of each partition (None: nothing committed; with
        ``partitions`` None, every partition the group has an offset for), waiting out commits
        in flight (``require_stable``, KIP-447) and coordinator moves."""
        tps = None if partitions is None else sorted({(t, int(p)) for t, p in partitions})
        if tps == []:
            return {}
        deadline = now_ms() + (timeout_ms if timeout_ms is not None else self.request_timeout_ms)
        while True:
            code, found = await self._fetch_once(tps)
            if code == ErrorCode.NONE:
                return found
            if not ErrorCode(code).retriable:
                raise error_for_code(code, f"committed offsets of group {self.group_id!r}")
            if now_ms() >= deadline:
                raise RequestTimeoutError(
                    f"committed offsets of group {self.group_id!r} not available in time "
                    f"(last error {ErrorCode(code).name})"
                )
            await self.backoff()

    async def _fetch_once(
        self, tps: list[tuple[str, int]] | None
    ) -> tuple[int, dict[TopicPartitionLike, OffsetAndMetadata | None]]:
        by_topic: dict[str, list[int]] = {}
        for topic, partition in tps or ():
            by_topic.setdefault(topic, []).append(partition)
        try:
            version = await self.api_version(OFFSET_FETCH)
            if version >= 8:
                topics8 = (
                    None
                    if tps is None
                    else [
                        OffsetFetchRequestTopics(name=t, partition_indexes=p)
                        for t, p in by_topic.items()
                    ]
                )
                request = OffsetFetchRequest(
                    groups=[OffsetFetchRequestGroup(group_id=self.group_id, topics=topics8)],
                    require_stable=True,
                )
            else:
                topics = (
                    None
                    if tps is None
                    else [
                        OffsetFetchRequestTopic(name=t, partition_indexes=p)
                        for t, p in by_topic.items()
                    ]
                )
                request = OffsetFetchRequest(
                    group_id=self.group_id, topics=topics, require_stable=version >= 7
                )
            response = await self.send(request, OffsetFetchResponse)
        except (ConnectionLostError, RequestTimeoutError):
            return ErrorCode.NETWORK_EXCEPTION, {}
        if version >= 8:
            (group,) = response.groups
            code = group.error_code
            rows = [
                (t.name, p.partition_index, p.committed_offset, p.committed_leader_epoch,
                 p.metadata, p.error_code)
                for t in group.topics for p in t.partitions
            ]  # fmt: skip
        else:
            code = response.error_code
            rows = [
                (t.name, p.partition_index, p.committed_offset, p.committed_leader_epoch,
                 p.metadata, p.error_code)
                for t in response.topics for p in t.partitions
            ]  # fmt: skip
        code = code or next((row[5] for row in rows if row[5]), ErrorCode.NONE)
        if code:
            self.note_error(code)
            return code, {}
        found: dict[TopicPartitionLike, OffsetAndMetadata | None] = {tp: None for tp in tps or ()}
        for topic, partition, offset, epoch, metadata, _ in rows:
            if offset >= 0:
                found[(topic, partition)] = OffsetAndMetadata(offset, epoch, metadata or "")
        return ErrorCode.NONE, found

    async def close(self) -> None:
        """Close the connections."""
        await self._client.close()
