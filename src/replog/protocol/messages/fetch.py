"""Fetch (key 1): consumers read, and followers replicate, with the same request.

Fields follow Kafka's FetchRequest/Response.json, versions 4-12:

- v4 adds the isolation level and aborted transactions; v5 log start offsets; v7 fetch sessions
  (KIP-227) and the top-level error code; v9 ``current_leader_epoch`` (KIP-320, fencing);
  v11 the rack id and ``preferred_read_replica`` (KIP-392); v12 is flexible and adds
  ``last_fetched_epoch`` in requests and the tagged ``diverging_epoch`` / ``current_leader`` /
  ``snapshot_id`` in responses (KIP-595, truncation on fetch).
- v13 switches topics to ids and is not served.

A follower sets ``replica_id`` to its broker id; consumers send -1. Records in a response are
opaque bytes; to stream them from segment files with ``os.sendfile`` put ``RecordsRef``
placeholders in ``records`` and encode with ``framing.encode_response_parts``.
"""

# `field(...)` is an attrs field specifier (schema.field wraps attrs.field); ruff cannot tell.
# ruff: noqa: RUF009

from __future__ import annotations

import attrs

from replog.protocol.schema import (
    INT8,
    INT16,
    INT32,
    INT64,
    RECORDS,
    STRING,
    ApiInfo,
    Records,
    Request,
    Response,
    array,
    field,
)

__all__ = [
    "FETCH",
    "AbortedTransaction",
    "EpochEndOffset",
    "FetchPartition",
    "FetchRequest",
    "FetchResponse",
    "FetchResponsePartition",
    "FetchResponseTopic",
    "FetchTopic",
    "ForgottenTopic",
    "LeaderIdAndEpoch",
    "SnapshotId",
]

FETCH = ApiInfo(1, "Fetch", min_version=4, max_version=12, flexible_from=12)


@attrs.frozen(kw_only=True)
class FetchPartition:
    """Where to read one partition from, and the follower's view of it."""

    partition: int = field(INT32, "0+")
    current_leader_epoch: int = field(INT32, "9+", default=-1, ignorable=True)
    fetch_offset: int = field(INT64, "0+")
    last_fetched_epoch: int = field(INT32, "12+", default=-1)
    log_start_offset: int = field(INT64, "5+", default=-1, ignorable=True)
    partition_max_bytes: int = field(INT32, "0+")


@attrs.frozen(kw_only=True)
class FetchTopic:
    """The partitions to read of one topic."""

    topic: str = field(STRING, "0-12", ignorable=True)
    partitions: list[FetchPartition] = field(array(FetchPartition), "0+")


@attrs.frozen(kw_only=True)
class ForgottenTopic:
    """Partitions to drop from an incremental fetch session."""

    topic: str = field(STRING, "7-12", ignorable=True)
    partitions: list[int] = field(array(INT32), "7+")


@attrs.frozen(kw_only=True)
class FetchRequest(Request):
    """Read from many partitions; the broker may wait ``max_wait_ms`` for ``min_bytes``."""

    API = FETCH

    cluster_id: str | None = field(
        STRING, "12+", nullable="12+", tag=0, default=None, ignorable=True
    )
    replica_id: int = field(INT32, "0-14", default=-1)
    max_wait_ms: int = field(INT32, "0+")
    min_bytes: int = field(INT32, "0+")
    max_bytes: int = field(INT32, "3+", default=0x7FFFFFFF, ignorable=True)
    isolation_level: int = field(INT8, "4+", ignorable=True)
    session_id: int = field(INT32, "7+", ignorable=True)
    session_epoch: int = field(INT32, "7+", default=-1, ignorable=True)
    topics: list[FetchTopic] = field(array(FetchTopic), "0+")
    forgotten_topics_data: list[ForgottenTopic] = field(array(ForgottenTopic), "7+")
    rack_id: str = field(STRING, "11+", ignorable=True)


@attrs.frozen(kw_only=True)
class AbortedTransaction:
    """An aborted transaction overlapping the returned records (read_committed consumers)."""

    producer_id: int = field(INT64, "4+")
    first_offset: int = field(INT64, "4+")


@attrs.frozen(kw_only=True)
class EpochEndOffset:
    """The leader's end offset for the follower's last fetched epoch, when the logs diverge."""

    epoch: int = field(INT32, "12+", default=-1)
    end_offset: int = field(INT64, "12+", default=-1)


@attrs.frozen(kw_only=True)
class LeaderIdAndEpoch:
    """The leader the responding broker knows of."""

    leader_id: int = field(INT32, "12+", default=-1)
    leader_epoch: int = field(INT32, "12+", default=-1)


@attrs.frozen(kw_only=True)
class SnapshotId:
    """A KRaft snapshot the fetcher must load first (carried for completeness)."""

    end_offset: int = field(INT64, "0+", default=-1)
    epoch: int = field(INT32, "0+", default=-1)


@attrs.frozen(kw_only=True)
class FetchResponsePartition:
    """One partition's data and offsets (Kafka's ``PartitionData``)."""

    partition_index: int = field(INT32, "0+")
    error_code: int = field(INT16, "0+")
    high_watermark: int = field(INT64, "0+")
    last_stable_offset: int = field(INT64, "4+", default=-1, ignorable=True)
    log_start_offset: int = field(INT64, "5+", default=-1, ignorable=True)
    diverging_epoch: EpochEndOffset | None = field(EpochEndOffset, "12+", tag=0)
    current_leader: LeaderIdAndEpoch | None = field(LeaderIdAndEpoch, "12+", tag=1)
    snapshot_id: SnapshotId | None = field(SnapshotId, "12+", tag=2)
    aborted_transactions: list[AbortedTransaction] | None = field(
        array(AbortedTransaction), "4+", nullable="4+", ignorable=True
    )
    preferred_read_replica: int = field(INT32, "11+", default=-1)
    records: Records = field(RECORDS, "0+", nullable="0+")


@attrs.frozen(kw_only=True)
class FetchResponseTopic:
    """The partitions of one topic (Kafka's ``FetchableTopicResponse``)."""

    topic: str = field(STRING, "0-12", ignorable=True)
    partitions: list[FetchResponsePartition] = field(array(FetchResponsePartition), "0+")


@attrs.frozen(kw_only=True)
class FetchResponse(Response):
    """Data for each requested partition, plus session bookkeeping."""

    API = FETCH

    throttle_time_ms: int = field(INT32, "1+", ignorable=True)
    error_code: int = field(INT16, "7+", ignorable=True)
    session_id: int = field(INT32, "7+")
    responses: list[FetchResponseTopic] = field(array(FetchResponseTopic), "0+")
