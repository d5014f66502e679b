"""Partition administration through the Kafka API: the partition methods of ``AsyncAdmin`` and
``Admin``.

- ``elect_leaders`` (ElectLeaders, preferred or unclean) and ``elect_preferred_leaders``;
  ``elect_leaders_results`` answers per partition instead of raising (operator tools);
- ``alter_partition_reassignments`` (AlterPartitionReassignments; None cancels) and
  ``reassign_partition`` for one partition;
- ``list_partition_reassignments`` (ListPartitionReassignments);
- ``describe_log_dirs`` (DescribeLogDirs, to each broker asked: its dirs hold its replicas).

Elections and reassignments go to the controller the metadata names (any broker would queue
them for the controller; the controller's metadata is the newest, so its checks are too). The
broker answers once the controller has carried out the election or started the reassignment;
replicas then move in the background (watch ``describe_topics`` or
``list_partition_reassignments``). A failed partition raises ``error_for_code`` of its error
code, naming the partition, after the whole answer has been read.
"""

from __future__ import annotations

import asyncio
import enum
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Generic, TypeVar

import attrs

from replog.client._sync import LoopThread
from replog.client.connection import ClusterClient
from replog.client.errors import ConnectionLostError, error_for_code
from replog.errors import ErrorCode, InvalidConfigError, RequestTimeoutError
from replog.protocol.messages import (
    ELECTION_PREFERRED,
    ELECTION_UNCLEAN,
    AlterPartitionReassignmentsRequest,
    AlterPartitionReassignmentsResponse,
    DescribableLogDirTopic,
    DescribeLogDirsRequest,
    DescribeLogDirsResponse,
    ElectLeadersRequest,
    ElectLeadersResponse,
    ElectLeadersTopicPartitions,
    ListPartitionReassignmentsRequest,
    ListPartitionReassignmentsResponse,
    ListPartitionReassignmentsTopics,
    ReassignablePartition,
    ReassignableTopic,
)
from replog.protocol.schema import Message
from replog.topics import TopicPartitionLike

__all__ = [
    "AsyncPartitionAdmin",
    "ElectionResult",
    "ElectionType",
    "LogDirDescription",
    "PartitionAdmin",
    "PartitionReassignment",
    "ReplicaLogDescription",
    "to_controller",
]

_CONTROLLER_TRIES = 5
_A = TypeVar("_A", bound="AsyncPartitionAdmin")


class ElectionType(enum.IntEnum):
    """Kafka's ElectionType: PREFERRED moves leadership to each partition's first replica (it
    must be in the ISR); UNCLEAN elects any live replica of a leaderless partition, even one
    outside the ISR (records may be lost)."""

    PREFERRED = ELECTION_PREFERRED
    UNCLEAN = ELECTION_UNCLEAN


@attrs.frozen(kw_only=True)
class ElectionResult:
    """One partition's answer to ElectLeaders: ``ErrorCode.NONE`` (a new leader was elected),
    ELECTION_NOT_NEEDED (already led as asked) or the error that stopped the election."""

    error: ErrorCode
    message: str | None = None


@attrs.frozen(kw_only=True)
class PartitionReassignment:
    """A running reassignment: the replicas now (target and leaving ones together), those
    being added and those to be removed when the added ones have caught up."""

    replicas: tuple[int, ...]
    adding_replicas: tuple[int, ...]
    removing_replicas: tuple[int, ...]


@attrs.frozen(kw_only=True)
class ReplicaLogDescription:
    """One replica's log in a log dir: its size on disk and how far its end is behind the
    high watermark (0 on a leader)."""

    topic: str
    partition: int
    size_bytes: int
    offset_lag: int


@attrs.frozen(kw_only=True)
class LogDirDescription:
    """One log dir of a broker: its path, its state (``ErrorCode.NONE``, or
    KAFKA_STORAGE_ERROR when offline), the replicas it holds and its volume's space (-1:
    not reported)."""

    path: str
    error: ErrorCode
    replicas: tuple[ReplicaLogDescription, ...]
    total_bytes: int = -1
    usable_bytes: int = -1


async def to_controller(
    client: ClusterClient, request: Message | Callable[[int], Message], response_type: type[Any]
) -> Any:
    """Send to the controller, following a moved controller / lost connections a few times.
    ``request`` is a message, or a function from the negotiated version of
    ``response_type``'s API to the message (for requests whose fields vary by version)."""
    last: Exception | None = None
    for _ in range(_CONTROLLER_TRIES):
        try:
            await client.refresh_metadata()
            controller = await client.controller()
            if isinstance(request, Message):
                message = request
            else:
                message = request(await client.api_version(controller, response_type.API))
            return await client.send(controller, message, response_type)
        except (ConnectionLostError, RequestTimeoutError) as exc:
            last = exc
            await asyncio.sleep(0.1)
    raise last if last is not None else ConnectionLostError("no controller reachable")


def _by_topic(partitions: Iterable[TopicPartitionLike]) -> dict[str, list[int]]:
    topics: dict[str, list[int]] = {}
    for topic, partition in partitions:
        if partition not in topics.setdefault(topic, []):
            topics[topic].append(partition)
    return topics


def _raise_first(failures: list[tuple[int, str]]) -> None:
    if failures:
        code, message = failures[0]
        more = f" (and {len(failures) - 1} more failed)" if len(failures) > 1 else ""
        raise error_for_code(code, message + more)


def _error_code(code: int) -> ErrorCode:
    try:
        return ErrorCode(code)
    except ValueError:
        return ErrorCode.UNKNOWN_SERVER_ERROR


def _election_type(election_type: ElectionType | str) -> ElectionType:
    if isinstance(election_type, ElectionType):
        return election_type
    try:
        return ElectionType[election_type.upper()]
    except KeyError:
        raise InvalidConfigError(
            f"election_type must be 'preferred' or 'unclean': {election_type!r}"
        ) from None


class AsyncPartitionAdmin:
    """The partition methods of ``AsyncAdmin`` (a base class: it provides ``_client`` and
    ``request_timeout_ms``)."""

    _client: ClusterClient
    request_timeout_ms: int

    async def elect_leaders(
        self,
        partitions: Iterable[TopicPartitionLike] | None = None,
        election_type: ElectionType | str = ElectionType.PREFERRED,
    ) -> dict[TopicPartitionLike, bool]:
        """Elect leaders for ``partitions`` (None: every partition that needs an election of
        that type). Returns per partition whether a new leader was elected (False: the
        partition was already led as asked, ELECTION_NOT_NEEDED). Any other failure raises
        its ``error_for_code`` (PREFERRED_LEADER_NOT_AVAILABLE, ELIGIBLE_LEADERS_NOT_AVAILABLE,
        UNKNOWN_TOPIC_OR_PARTITION, ...)."""
        results = await self.elect_leaders_results(partitions, election_type)
        out: dict[TopicPartitionLike, bool] = {}
        failures: list[tuple[int, str]] = []
        for tp, result in results.items():
            if result.error in (ErrorCode.NONE, ErrorCode.ELECTION_NOT_NEEDED):
                out[tp] = result.error == ErrorCode.NONE
            else:
                failures.append((result.error, f"{tp[0]}-{tp[1]}: {result.message or ''}"))
        _raise_first(failures)
        return out

    async def elect_leaders_results(
        self,
        partitions: Iterable[TopicPartitionLike] | None = None,
        election_type: ElectionType | str = ElectionType.PREFERRED,
    ) -> dict[TopicPartitionLike, ElectionResult]:
        """As ``elect_leaders``, but every partition's answer is returned, failures included
        (a tool reports each one); only a request-level error raises."""
        kind = _election_type(election_type)
        asked = None if partitions is None else list(partitions)
        keys = {(tp[0], tp[1]): tp for tp in asked or ()}
        topic_partitions = (
            None
            if asked is None
            else [
                ElectLeadersTopicPartitions(topic=t, partitions=ps)
                for t, ps in _by_topic(asked).items()
            ]
        )
        timeout_ms = self.request_timeout_ms

        def request(version: int) -> ElectLeadersRequest:
            if version == 0 and kind is not ElectionType.PREFERRED:
                raise InvalidConfigError("the broker's ElectLeaders v0 elects preferred only")
            return ElectLeadersRequest(
                election_type=int(kind), topic_partitions=topic_partitions, timeout_ms=timeout_ms
            )

        response: ElectLeadersResponse = await to_controller(
            self._client, request, ElectLeadersResponse
        )
        if response.error_code != ErrorCode.NONE:
            raise error_for_code(response.error_code, f"ElectLeaders ({kind.name.lower()})")
        out: dict[TopicPartitionLike, ElectionResult] = {}
        for topic_result in response.replica_election_results:
            for part in topic_result.partition_result:
                tp = (topic_result.topic, part.partition_id)
                out[keys.get(tp, tp)] = ElectionResult(
                    error=_error_code(part.error_code), message=part.error_message
                )
        self._client.metadata.mark_stale()
        return out

    async def elect_preferred_leaders(
        self, partitions: Iterable[TopicPartitionLike] | None = None
    ) -> dict[TopicPartitionLike, bool]:
        """``elect_leaders(partitions, ElectionType.PREFERRED)``: each partition's first
        replica leads again (None: every partition it does not lead)."""
        return await self.elect_leaders(partitions, ElectionType.PREFERRED)

    async def alter_partition_reassignments(
        self, reassignments: Mapping[TopicPartitionLike, Sequence[int] | None]
    ) -> None:
        """Move each partition to its target replicas (the first is the preferred leader),
        or cancel its running reassignment (None: its replicas go back to the original ones).
        Returns once the controller has started each; the replicas move in the background.
        A failure raises its ``error_for_code`` (UNKNOWN_TOPIC_OR_PARTITION,
        INVALID_REPLICA_ASSIGNMENT, NO_REASSIGNMENT_IN_PROGRESS, ...)."""
        topics: dict[str, list[ReassignablePartition]] = {}
        for (topic, partition), replicas in reassignments.items():
            topics.setdefault(topic, []).append(
                ReassignablePartition(
                    partition_index=partition,
                    replicas=None if replicas is None else list(replicas),
                )
            )
        request = AlterPartitionReassignmentsRequest(
            timeout_ms=self.request_timeout_ms,
            allow_replication_factor_change=True,
            topics=[ReassignableTopic(name=t, partitions=ps) for t, ps in topics.items()],
        )
        response: AlterPartitionReassignmentsResponse = await to_controller(
            self._client, request, AlterPartitionReassignmentsResponse
        )
        if response.error_code != ErrorCode.NONE:
            raise error_for_code(response.error_code, response.error_message or "")
        failures = [
            (part.error_code, f"{result.name}-{part.partition_index}: {part.error_message or ''}")
            for result in response.responses
            for part in result.partitions
            if part.error_code != ErrorCode.NONE
        ]
        _raise_first(failures)
        self._client.metadata.mark_stale()

    async def reassign_partition(
        self, topic: str, partition: int, replicas: Sequence[int] | None
    ) -> None:
        """Move ``topic-partition`` to ``replicas`` (None cancels a running reassignment):
        ``alter_partition_reassignments`` for one partition."""
        await self.alter_partition_reassignments({(topic, partition): replicas})

    async def list_partition_reassignments(
        self, partitions: Iterable[TopicPartitionLike] | None = None
    ) -> dict[TopicPartitionLike, PartitionReassignment]:
        """The running reassignments among ``partitions`` (None: all); a partition that is
        not being reassigned is absent. A topic that does not exist raises the error for
        UNKNOWN_TOPIC_OR_PARTITION."""
        asked = None if partitions is None else list(partitions)
        keys = {(tp[0], tp[1]): tp for tp in asked or ()}
        request = ListPartitionReassignmentsRequest(
            timeout_ms=self.request_timeout_ms,
            topics=None
            if asked is None
            else [
                ListPartitionReassignmentsTopics(name=t, partition_indexes=ps)
                for t, ps in _by_topic(asked).items()
            ],
        )
        response: ListPartitionReassignmentsResponse = await to_controller(
            self._client, request, ListPartitionReassignmentsResponse
        )
        if response.error_code != ErrorCode.NONE:
            raise error_for_code(response.error_code, response.error_message or "")
        out: dict[TopicPartitionLike, PartitionReassignment] = {}
        for topic in response.topics:
            for part in topic.partitions:
                tp = (topic.name, part.partition_index)
                out[keys.get(tp, tp)] = PartitionReassignment(
                    replicas=tuple(part.replicas),
                    adding_replicas=tuple(part.adding_replicas),
                    removing_replicas=tuple(part.removing_replicas),
                )
        return out

    async def describe_log_dirs(
        self,
        broker_ids: Iterable[int] | None = None,
        partitions: Iterable[TopicPartitionLike] | None = None,
    ) -> dict[int, tuple[LogDirDescription, ...]]:
        """Each broker's log dirs (``broker_ids`` None: every live broker) with the replicas
        they hold among ``partitions`` (None: all) and their sizes. A broker's top-level error
        raises its ``error_for_code``; an offline dir is reported with its error."""
        if broker_ids is None:
            metadata = await self._client.refresh_metadata()
            brokers = sorted(metadata.brokers)
        else:
            brokers = list(dict.fromkeys(broker_ids))
            if not set(brokers) <= set(self._client.metadata.brokers):
                await self._client.refresh_metadata()  # their addresses (a fresh client)
        asked = None if partitions is None else list(partitions)
        request = DescribeLogDirsRequest(
            topics=None
            if asked is None
            else [
                DescribableLogDirTopic(topic=t, partitions=ps) for t, ps in _by_topic(asked).items()
            ]
        )
        answers = await asyncio.gather(
            *(self._client.send(b, request, DescribeLogDirsResponse) for b in brokers)
        )
        out: dict[int, tuple[LogDirDescription, ...]] = {}
        for broker, response in zip(brokers, answers, strict=True):
            if response.error_code != ErrorCode.NONE:
                raise error_for_code(response.error_code, f"DescribeLogDirs on broker {broker}")
            out[broker] = tuple(
                LogDirDescription(
                    path=result.log_dir,
                    error=ErrorCode(result.error_code),
                    replicas=tuple(
                        ReplicaLogDescription(
                            topic=topic.name,
                            partition=part.partition_index,
                            size_bytes=part.partition_size,
                            offset_lag=part.offset_lag,
                        )
                        for topic in result.topics
                        for part in topic.partitions
                    ),
                    total_bytes=result.total_bytes,
                    usable_bytes=result.usable_bytes,
                )
                for result in response.results
            )
        return out


class PartitionAdmin(Generic[_A]):
    """The partition methods of the synchronous ``Admin`` (a base class: it provides
    ``_loop`` and ``_admin``, the ``AsyncAdmin``)."""

    _loop: LoopThread
    _admin: _A

    def elect_leaders(
        self,
        partitions: Iterable[TopicPartitionLike] | None = None,
        election_type: ElectionType | str = ElectionType.PREFERRED,
    ) -> dict[TopicPartitionLike, bool]:
        """See ``AsyncPartitionAdmin.elect_leaders``."""
        tps = None if partitions is None else list(partitions)
        return self._loop.run(self._admin.elect_leaders(tps, election_type))

    def elect_leaders_results(
        self,
        partitions: Iterable[TopicPartitionLike] | None = None,
        election_type: ElectionType | str = ElectionType.PREFERRED,
    ) -> dict[TopicPartitionLike, ElectionResult]:
        """See ``AsyncPartitionAdmin.elect_leaders_results``."""
        tps = None if partitions is None else list(partitions)
        return self._loop.run(self._admin.elect_leaders_results(tps, election_type))

    def elect_preferred_leaders(
        self, partitions: Iterable[TopicPartitionLike] | None = None
    ) -> dict[TopicPartitionLike, bool]:
        """See ``AsyncPartitionAdmin.elect_preferred_leaders``."""
        tps = None if partitions is None else list(partitions)
        return self._loop.run(self._admin.elect_preferred_leaders(tps))

    def alter_partition_reassignments(
        self, reassignments: Mapping[TopicPartitionLike, Sequence[int] | None]
    ) -> None:
        """See ``AsyncPartitionAdmin.alter_partition_reassignments``."""
        self._loop.run(self._admin.alter_partition_reassignments(dict(reassignments)))

    def reassign_partition(
        self, topic: str, partition: int, replicas: Sequence[int] | None
    ) -> None:
        """See ``AsyncPartitionAdmin.reassign_partition``."""
        self._loop.run(self._admin.reassign_partition(topic, partition, replicas))

    def list_partition_reassignments(
        self, partitions: Iterable[TopicPartitionLike] | None = None
    ) -> dict[TopicPartitionLike, PartitionReassignment]:
        """See ``AsyncPartitionAdmin.list_partition_reassignments``."""
        tps = None if partitions is None else list(partitions)
        return self._loop.run(self._admin.list_partition_reassignments(tps))

    def describe_log_dirs(
        self,
        broker_ids: Iterable[int] | None = None,
        partitions: Iterable[TopicPartitionLike] | None = None,
    ) -> dict[int, tuple[LogDirDescription, ...]]:
        """See ``AsyncPartitionAdmin.describe_log_dirs``."""
        brokers = None if broker_ids is None else list(broker_ids)
        tps = None if partitions is None else list(partitions)
        return self._loop.run(self._admin.describe_log_dirs(brokers, tps))
