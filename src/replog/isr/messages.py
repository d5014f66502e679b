"""Values that cross the machine boundary: requests in, responses and coordinator writes out.

The partition machine never sends anything itself. It returns (or queues in ``PartitionReady``)
these values, and the driver turns them into wire messages, coordinator writes and client
replies.
ISR changes travel as the coordinator's own values (``replog.metadata.types.AlterPartition`` out,
``AlterPartitionResult`` back), so the proposal the leader makes is the one the controller
validates.
"""

from __future__ import annotations

import attrs

from replog.epochs import UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
from replog.errors import ErrorCode
from replog.isr.replica_log import LogSlice
from replog.metadata.types import AlterPartition

__all__ = [
    "LeaderEpochEnd",
    "PartitionFetchRequest",
    "PartitionFetchResponse",
    "ProduceResult",
    "PartitionReady",
    "CONSUMER_REPLICA_ID",
    "DEBUGGING_CONSUMER_ID",
]

#: ``PartitionFetchRequest.replica_id`` of an ordinary consumer (reads up to the HW, no fetch
#: state).
CONSUMER_REPLICA_ID = -1
#: ``PartitionFetchRequest.replica_id`` of Kafka's debugging consumer (the replica verification
#: tool): like a consumer it reads up to the HW and leaves no fetch state, but any replica
#: serves it, a follower from its own log up to its own HW, so that replicas can be compared.
DEBUGGING_CONSUMER_ID = -2


@attrs.frozen
class LeaderEpochEnd:
    """An OffsetsForLeaderEpoch answer: ``end_offset`` ends ``epoch`` (-1, -1: undefined)."""

    epoch: int
    end_offset: int

    @property
    def is_undefined(self) -> bool:
        """True for Kafka's (UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET) answer."""
        return self.end_offset == UNDEFINED_EPOCH_OFFSET


@attrs.frozen
class PartitionFetchRequest:
    """One partition of a Fetch request (KIP-320 epochs, KIP-903 broker epoch)."""

    replica_id: int
    fetch_offset: int
    current_leader_epoch: int
    last_fetched_epoch: int = UNDEFINED_EPOCH
    log_start_offset: int = -1
    broker_epoch: int = -1
    max_bytes: int = 1_048_576
    min_bytes: int = 1
    max_wait_ms: int = 0
    #: correlation id: a follower ignores any response but the one to its outstanding request
    request_id: int = 0
    #: FSYNC mode: the driver must flush the local log before sending this request
    requires_flush: bool = False

    @property
    def is_from_follower(self) -> bool:
        """True when a replica (not a consumer) sent it."""
        return self.replica_id >= 0

    @property
    def reads_any_replica(self) -> bool:
        """True for the debugging consumer, which followers serve too."""
        return self.replica_id == DEBUGGING_CONSUMER_ID


@attrs.frozen
class PartitionFetchResponse:
    """What the leader answers; ``records`` is a slice to send, never copied here.

    ``high_watermark``, ``log_start_offset`` and ``log_end_offset`` are sampled before the read.
    With ``diverging_epoch`` set there are no records and the follower must truncate first.
    """

    request_id: int
    error_code: ErrorCode
    fetch_offset: int
    high_watermark: int = -1
    log_start_offset: int = -1
    log_end_offset: int = -1
    records: LogSlice | None = None
    diverging_epoch: LeaderEpochEnd | None = None
    #: who asked (``CONSUMER_REPLICA_ID`` for a consumer), so the driver can route it
    replica_id: int = CONSUMER_REPLICA_ID

    @property
    def size_bytes(self) -> int:
        """Bytes of record data carried."""
        return 0 if self.records is None else self.records.size_bytes


@attrs.frozen
class ProduceResult:
    """The outcome of one produce to this partition (acks=0: the driver sends nothing, and on an
    error closes the connection)."""

    request_id: int
    base_offset: int
    error_code: ErrorCode
    #: set when the append was an idempotent producer's retry of a batch already written:
    #: that batch's max timestamp (Kafka answers a duplicate with it); -1 otherwise
    log_append_time_ms: int = -1


@attrs.frozen
class PartitionReady:
    """Everything the machine wants the driver to do, drained by ``Partition.take_ready()``."""

    alter_partition: tuple[AlterPartition, ...] = ()
    produce_results: tuple[ProduceResult, ...] = ()

    @property
    def is_empty(self) -> bool:
        """True when there is nothing to do."""
        return not (self.alter_partition or self.produce_results)
