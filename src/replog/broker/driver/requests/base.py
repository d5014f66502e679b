"""What a request handler sees and what it returns.

A handler is a plain function ``(RequestContext, body, RequestServices) -> Outcome`` (``body``
the decoded request, of the type the handler is registered for): no asyncio, no sockets. It
answers at once (``Reply``, ``NoReply``, ``Close``) or says what it waits for and how to finish:
the acknowledgement of acks=all produces (``AwaitProduces``), new data for a long poll
(``AwaitData``), the controller's completion of admin requests (``AwaitAdmin``), or an answer the
group coordinator gives later (``AwaitReply``: a JoinGroup parked until its join phase ends). The
driver keeps the wait, feeds the continuation what arrived, and turns the final outcome into the
response frame. ``RequestServices`` is the narrow view of the broker a handler may use.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol

import attrs

from replog.broker.config import BrokerConfig
from replog.broker.driver.change_feed import ChangeFeed
from replog.broker.driver.fetch_session_cache import FetchSessionCache
from replog.broker.driver.log_dirs import LogDirReport
from replog.broker.driver.producer_ids import ProducerIdManager
from replog.broker.driver.replication_throttle import ReplicationThrottle
from replog.errors import ErrorCode
from replog.isr import Partition, PartitionFetchRequest, PartitionFetchResponse, ProduceResult
from replog.log.log import Log
from replog.metadata.types import (
    AdminPayload,
    BrokerInfo,
    ControllerInfo,
    CreateTopic,
    PartitionState,
    TopicAssignment,
    TopicConfigs,
)
from replog.protocol import RequestHeader
from replog.protocol.schema import Message
from replog.topics import TopicPartition

__all__ = [
    "AdminResult",
    "AwaitAdmin",
    "AwaitData",
    "AwaitProduces",
    "AwaitReply",
    "Close",
    "GroupServices",
    "Handler",
    "NoReply",
    "Outcome",
    "Reply",
    "RequestContext",
    "RequestServices",
    "TopicPartition",
]


@attrs.frozen
class RequestContext:
    """One request as it reaches a handler (its decoded body is the handler's own argument)."""

    header: RequestHeader
    now_ms: int
    #: the client's address as Kafka shows it (``/127.0.0.1``); "" when not known
    client_host: str = ""

    @property
    def version(self) -> int:
        """The request's API version."""
        return self.header.api_version


@attrs.frozen
class Reply:
    """Answer with ``message`` (records fields may hold zero-copy ``RecordsRef`` holes)."""

    message: Message


@attrs.frozen
class NoReply:
    """Send nothing (a successful acks=0 produce)."""


@attrs.frozen
class Close:
    """Drop the client's connection (a failed acks=0 produce)."""

    reason: str


@attrs.frozen
class AwaitProduces:
    """Wait for acks=all produces (``(tp, request id)`` of each) to complete; then ``finish``
    gets every result, those already known included."""

    waiting: frozenset[tuple[TopicPartition, int]]
    finish: Callable[[Mapping[tuple[TopicPartition, int], ProduceResult]], Outcome]


@attrs.frozen
class AwaitData:
    """A long poll: call ``retry(now_ms, final)`` when any of ``tps`` gets new data or when
    ``deadline_ms`` passes (``final`` True: answer with whatever there is). ``on_hw`` False:
    a move of a partition's HW alone is no reason to read again (a follower's fetch, which
    reads up to the LEO: only new data, a truncation or a role change can complete it)."""

    tps: frozenset[TopicPartition]
    deadline_ms: int
    retry: Callable[[int, bool], Outcome]
    on_hw: bool = True


@attrs.frozen
class AdminResult:
    """How the controller completed one admin request (or why it did not)."""

    error: ErrorCode
    message: str = ""


@attrs.frozen
class AwaitAdmin:
    """Queue ``payloads`` for the controller and wait (at most ``timeout_ms``) for their
    completions; ``finish`` gets one result per payload, in order."""

    payloads: tuple[AdminPayload, ...]
    timeout_ms: int
    finish: Callable[[Sequence[AdminResult]], Outcome]


@attrs.frozen
class AwaitReply:
    """Wait for the answer the broker delivers later under ``key`` (``ClientRequests.on_reply``):
    the group coordinator parks requests (a JoinGroup until the join phase ends, an
    OffsetCommit until its records are written) and answers them from later inputs."""

    key: int


Outcome = Reply | NoReply | Close | AwaitProduces | AwaitData | AwaitAdmin | AwaitReply


class GroupServices(Protocol):
    """The consumer-group coordinator hosted by this broker
    (``replog.broker.driver.group_host``)."""

    def handle(self, ctx: RequestContext, body: Message) -> Outcome:
        """A group request (any group API but FindCoordinator): answered now or later."""
        ...

    def ensure_offsets_topic(self, now_ms: int) -> bool:
        """Whether ``__consumer_offsets`` exists; if not, ask the controller to create it (once
        at a time) and return False."""
        ...


class RequestServices(Protocol):
    """The broker as request handlers see it."""

    @property
    def broker_id(self) -> int:
        """This broker's id."""
        ...

    @property
    def broker_epoch(self) -> int:
        """This broker's incarnation (KIP-903)."""
        ...

    @property
    def config(self) -> BrokerConfig:
        """This broker's settings."""
        ...

    @property
    def producer_ids(self) -> ProducerIdManager:
        """The producer ids this broker hands to idempotent producers."""
        ...

    @property
    def brokers(self) -> Mapping[int, BrokerInfo]:
        """Live brokers in the metadata image."""
        ...

    @property
    def topics(self) -> Mapping[str, TopicAssignment]:
        """Topics in the metadata image."""
        ...

    @property
    def states(self) -> Mapping[TopicPartition, PartitionState]:
        """Partition states in the metadata image."""
        ...

    @property
    def cluster_id(self) -> str:
        """The cluster id to report (Metadata v2+, DescribeCluster): the store's, where the
        coordinator keeps one, else a fixed name."""
        ...

    @property
    def controller(self) -> ControllerInfo | None:
        """The active controller as the image knows it."""
        ...

    @property
    def groups(self) -> GroupServices:
        """The group coordinator of this broker."""
        ...

    def partition(self, topic: str, partition: int) -> Partition | None:
        """The hosted replica, if any."""
        ...

    def log(self, topic: str, partition: int) -> Log | None:
        """The hosted replica's log, if any."""
        ...

    def produce(
        self, topic: str, partition: int, batch: bytes, acks: int, now_ms: int, *, timeout_ms: int
    ) -> tuple[int, ProduceResult | None]:
        """Append as leader: (request id, result now, or None for an acks=all wait)."""
        ...

    def fetch(
        self, topic: str, partition: int, request: PartitionFetchRequest, now_ms: int
    ) -> PartitionFetchResponse:
        """Read one partition now (consumer or follower)."""
        ...

    @property
    def fetch_session_cache(self) -> FetchSessionCache:
        """The incremental fetch sessions (KIP-227) this broker keeps."""

    @property
    def partition_changes(self) -> ChangeFeed:
        """Which hosted partitions changed since a point (fetch sessions read only those)."""

    @property
    def replication_throttle(self) -> ReplicationThrottle:
        """This broker's replication quotas (KIP-73), for follower fetches."""
        ...

    # ---- administration (the Kafka admin APIs) ----

    @property
    def broker_configs(self) -> Mapping[int, TopicConfigs]:
        """Dynamic broker configs in the metadata image, by broker id (``ALL_BROKERS``: the
        cluster-wide default)."""
        ...

    def create_topic_in_background(self, payload: CreateTopic) -> bool:
        """Queue ``payload`` for the controller without waiting for it (Kafka's automatic topic
        creation); False, queueing nothing, while this broker has one for that topic in
        flight."""
        ...

    def delete_records(
        self, topic: str, partition: int, offset: int, now_ms: int
    ) -> tuple[ErrorCode, int]:
        """DeleteRecords as leader: move the log start up to ``offset`` (-1: the HW) and
        persist it; (error, the leader's log start offset now, or -1)."""
        ...

    def low_watermark(self, topic: str, partition: int) -> int:
        """The lowest log start offset of the partition's live replicas as this leader knows
        them (-1: not the leader, or a replica's is not known yet)."""
        ...

    def log_dirs(self, wanted: set[TopicPartition] | None) -> list[LogDirReport]:
        """This broker's log dirs and their logs (``wanted`` partitions only, if given)."""
        ...


Handler = Callable[[RequestContext, Any, RequestServices], Outcome]
"""A handler; its second argument is the decoded request of the type it is registered for."""
