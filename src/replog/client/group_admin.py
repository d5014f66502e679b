"""Consumer-group administration: the group methods of ``AsyncAdmin`` and ``Admin``.

- ``list_groups``: ListGroups to every broker (each lists the groups it coordinates), merged;
- ``describe_groups``: DescribeGroups to each group's coordinator: state, protocol, members and
  their assignments (decoded when the group uses the consumer protocol);
- ``delete_groups``: DeleteGroups (a group must be empty: NON_EMPTY_GROUP otherwise);
- ``list_group_offsets`` / ``alter_group_offsets`` / ``delete_group_offsets``: OffsetFetch,
  OffsetCommit outside any generation (the group must have no members, as Kafka's
  ``alterConsumerGroupOffsets`` requires) and OffsetDelete.

Requests to a coordinator go through ``GroupClient`` (lookup, coordinator moves, retries).
Errors are raised as ``error_for_code`` gives them, naming the group.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Generic, TypeVar

import attrs

from replog.client._sync import LoopThread
from replog.client.connection import ClusterClient, now_ms
from replog.client.errors import ConnectionLostError, error_for_code
from replog.client.group import GroupClient, OffsetAndMetadata
from replog.errors import ErrorCode, RequestTimeoutError
from replog.protocol.consumer_protocol import PROTOCOL_TYPE, ConsumerProtocolAssignment
from replog.protocol.messages import (
    DeleteGroupsRequest,
    DeleteGroupsResponse,
    DescribeGroupsRequest,
    DescribeGroupsResponse,
    ListGroupsRequest,
    ListGroupsResponse,
    OffsetDeleteRequest,
    OffsetDeleteRequestPartition,
    OffsetDeleteRequestTopic,
    OffsetDeleteResponse,
)
from replog.topics import TopicPartitionLike

__all__ = [
    "AsyncGroupAdmin",
    "GroupAdmin",
    "GroupDescription",
    "GroupListing",
    "MemberDescription",
]

_RETRY_MS = 100
_A = TypeVar("_A", bound="AsyncGroupAdmin")


@attrs.frozen(kw_only=True)
class GroupListing:
    """One group as ListGroups names it."""

    group_id: str
    protocol_type: str
    state: str


@attrs.frozen(kw_only=True)
class MemberDescription:
    """One member of a described group; ``assignment`` decoded for consumer groups."""

    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    assignment: tuple[tuple[str, int], ...]


@attrs.frozen(kw_only=True)
class GroupDescription:
    """A group's state ("Stable", "Empty", "PreparingRebalance", "CompletingRebalance",
    "Dead" for a group that does not exist), its protocol, members and coordinator (the broker
    that answered; -1: unknown)."""

    group_id: str
    state: str
    protocol_type: str
    protocol: str
    members: tuple[MemberDescription, ...]
    coordinator_id: int = -1


class AsyncGroupAdmin:
    """The group methods of ``AsyncAdmin`` (a base class: it provides ``_client`` and
    ``request_timeout_ms``)."""

    _client: ClusterClient
    request_timeout_ms: int

    def _group(self, group_id: str) -> GroupClient:
        return GroupClient(
            self._client,
            group_id,
            request_timeout_ms=self.request_timeout_ms,
            retry_backoff_ms=_RETRY_MS,
        )

    async def list_groups(self, states: Iterable[str] | None = None) -> list[GroupListing]:
        """Every group of the cluster (in ``states`` only, when given), sorted by id."""
        wanted = None if states is None else set(states)
        metadata = await self._client.refresh_metadata([])
        found: dict[str, GroupListing] = {}
        for node in sorted(metadata.brokers):
            response = await self._retrying(
                lambda node=node: self._client.send(node, ListGroupsRequest(), ListGroupsResponse),
                lambda r: r.error_code,
                "ListGroups",
            )
            for group in response.groups:
                listing = GroupListing(
                    group_id=group.group_id,
                    protocol_type=group.protocol_type,
                    state=group.group_state,
                )
                if wanted is None or listing.state in wanted:
                    found[listing.group_id] = listing
        return [found[g] for g in sorted(found)]

    async def describe_groups(self, group_ids: Iterable[str]) -> dict[str, GroupDescription]:
        """Each group's description (a group that does not exist is "Dead", no members)."""
        out: dict[str, GroupDescription] = {}
        for group_id in group_ids:
            group = self._group(group_id)
            response = await self._retrying(
                lambda group=group, gid=group_id: group.send(
                    DescribeGroupsRequest(groups=[gid]), DescribeGroupsResponse
                ),
                lambda r, group=group: _noted(group, r.groups[0].error_code),
                f"DescribeGroups of {group_id!r}",
            )
            described = response.groups[0]
            out[group_id] = GroupDescription(
                group_id=group_id,
                state=described.group_state,
                protocol_type=described.protocol_type,
                protocol=described.protocol_data,
                members=tuple(
                    MemberDescription(
                        member_id=m.member_id,
                        group_instance_id=m.group_instance_id,
                        client_id=m.client_id,
                        client_host=m.client_host,
                        assignment=_assigned(described.protocol_type, m.member_assignment),
                    )
                    for m in described.members
                ),
                coordinator_id=_or_unknown(group.known_coordinator),
            )
        return out

    async def delete_groups(self, group_ids: Iterable[str]) -> None:
        """Delete groups and their offsets; raises for the first that cannot be
        (NON_EMPTY_GROUP, GROUP_ID_NOT_FOUND, ...)."""
        for group_id in group_ids:
            group = self._group(group_id)
            await self._retrying(
                lambda group=group, gid=group_id: group.send(
                    DeleteGroupsRequest(groups_names=[gid]), DeleteGroupsResponse
                ),
                lambda r, group=group: _noted(group, r.results[0].error_code),
                f"DeleteGroups of {group_id!r}",
            )

    async def list_group_offsets(
        self, group_id: str, partitions: Iterable[TopicPartitionLike] | None = None
    ) -> dict[TopicPartitionLike, OffsetAndMetadata]:
        """The group's committed offsets (of ``partitions``, or of every partition it has
        one for); partitions without one are left out."""
        found = await self._group(group_id).fetch_committed(
            None if partitions is None else list(partitions)
        )
        return {tp: o for tp, o in found.items() if o is not None}

    async def alter_group_offsets(
        self, group_id: str, offsets: Mapping[TopicPartitionLike, int | OffsetAndMetadata]
    ) -> None:
        """Set the group's committed offsets (the group must have no active member)."""
        await self._group(group_id).commit(
            {
                (t, int(p)): o if isinstance(o, OffsetAndMetadata) else OffsetAndMetadata(o)
                for (t, p), o in offsets.items()
            }
        )

    async def delete_group_offsets(
        self, group_id: str, partitions: Iterable[TopicPartitionLike]
    ) -> None:
        """Forget the group's committed offsets of ``partitions`` (refused with
        GROUP_SUBSCRIBED_TO_TOPIC while a member consumes the topic)."""
        by_topic: dict[str, list[OffsetDeleteRequestPartition]] = {}
        for topic, partition in partitions:
            by_topic.setdefault(topic, []).append(
                OffsetDeleteRequestPartition(partition_index=int(partition))
            )
        request = OffsetDeleteRequest(
            group_id=group_id,
            topics=[OffsetDeleteRequestTopic(name=t, partitions=p) for t, p in by_topic.items()],
        )
        group = self._group(group_id)

        def error_of(response: OffsetDeleteResponse) -> int:
            codes = [p.error_code for t in response.topics for p in t.partitions if p.error_code]
            return _noted(group, response.error_code or (codes[0] if codes else 0))

        await self._retrying(
            lambda: group.send(request, OffsetDeleteResponse),
            error_of,
            f"OffsetDelete of {group_id!r}",
        )

    async def _retrying(self, send: Any, error_of: Any, what: str) -> Any:
        """``await send()`` until ``error_of(response)`` is NONE (retriable errors and lost
        connections are retried until the request timeout)."""
        deadline = now_ms() + self.request_timeout_ms
        while True:
            code: int = ErrorCode.NETWORK_EXCEPTION
            try:
                response = await send()
                code = error_of(response)
                if code == ErrorCode.NONE:
                    return response
            except (ConnectionLostError, RequestTimeoutError):
                pass
            if not ErrorCode(code).retriable:
                raise error_for_code(code, what)
            if now_ms() >= deadline:
                raise RequestTimeoutError(f"{what}: no answer in time ({ErrorCode(code).name})")
            await asyncio.sleep(_RETRY_MS / 1000)


def _or_unknown(node_id: int | None) -> int:
    return -1 if node_id is None else node_id


def _noted(group: GroupClient, code: int) -> int:
    group.note_error(code)
    return code


def _assigned(protocol_type: str, data: bytes) -> tuple[tuple[str, int], ...]:
    if protocol_type != PROTOCOL_TYPE or not data:
        return ()
    try:
        assignment = ConsumerProtocolAssignment.decode(data)
    except Exception:  # another client's private format: nothing to show
        return ()
    return tuple(
        sorted((tp.topic, p) for tp in assignment.assigned_partitions for p in tp.partitions)
    )


class GroupAdmin(Generic[_A]):
    """The group methods of the synchronous ``Admin`` (a base class: it provides ``_loop`` and
    ``_admin``, the ``AsyncAdmin``)."""

    _loop: LoopThread
    _admin: _A

    def list_groups(self, states: Iterable[str] | None = None) -> list[GroupListing]:
        """See ``AsyncGroupAdmin.list_groups``."""
        return self._loop.run(self._admin.list_groups(None if states is None else list(states)))

    def describe_groups(self, group_ids: Iterable[str]) -> dict[str, GroupDescription]:
        """See ``AsyncGroupAdmin.describe_groups``."""
        return self._loop.run(self._admin.describe_groups(list(group_ids)))

    def delete_groups(self, group_ids: Iterable[str]) -> None:
        """See ``AsyncGroupAdmin.delete_groups``."""
        self._loop.run(self._admin.delete_groups(list(group_ids)))

    def list_group_offsets(
        self, group_id: str, partitions: Sequence[TopicPartitionLike] | None = None
    ) -> dict[TopicPartitionLike, OffsetAndMetadata]:
        """See ``AsyncGroupAdmin.list_group_offsets``."""
        return self._loop.run(self._admin.list_group_offsets(group_id, partitions))

    def alter_group_offsets(
        self, group_id: str, offsets: Mapping[TopicPartitionLike, int | OffsetAndMetadata]
    ) -> None:
        """See ``AsyncGroupAdmin.alter_group_offsets``."""
        self._loop.run(self._admin.alter_group_offsets(group_id, dict(offsets)))

    def delete_group_offsets(self, group_id: str, partitions: Iterable[TopicPartitionLike]) -> None:
        """See ``AsyncGroupAdmin.delete_group_offsets``."""
        self._loop.run(self._admin.delete_group_offsets(group_id, list(partitions)))
