"""One exception tree for replog, plus the ``invariant()`` helper.

Retriable errors (the caller may try again, possibly elsewhere) derive from ``RetriableError``;
everything else is fatal for the operation. Inside the pure machines (``replog.isr``,
``replog.election``) expected failures are ``ErrorCode`` values, not exceptions; a broken
invariant is a bug and raises ``InvariantError`` through ``invariant()``, which, unlike ``assert``,
does not vanish under ``python -O``.

Error codes use Kafka's numbers so the broker can put them on the wire unchanged.
"""

from __future__ import annotations

import enum
from typing import NoReturn

__all__ = [
    "error_name",
    "CorruptIndexError",
    "CorruptProducerSnapshotError",
    "CorruptRecordError",
    "ErrorCode",
    "FencedLeaderEpochError",
    "InvalidConfigError",
    "InvalidOffsetError",
    "InvalidProducerEpochError",
    "InvalidRecordError",
    "InvalidTopicError",
    "InvariantError",
    "MalformedCheckpointError",
    "NotEnoughReplicasError",
    "NotLeaderError",
    "OffsetOutOfRangeError",
    "OutOfOrderSequenceError",
    "ProducerStateError",
    "ProtocolError",
    "RecordBatchTooLargeError",
    "ReplogError",
    "RequestTimeoutError",
    "RetriableError",
    "StorageError",
    "UnknownProducerIdError",
    "invariant",
    "unreachable",
]


class ErrorCode(enum.IntEnum):
    """Kafka protocol error codes used by replog (values are Kafka's)."""

    UNKNOWN_SERVER_ERROR = -1
    NONE = 0
    OFFSET_OUT_OF_RANGE = 1
    CORRUPT_MESSAGE = 2
    UNKNOWN_TOPIC_OR_PARTITION = 3
    INVALID_FETCH_SIZE = 4
    LEADER_NOT_AVAILABLE = 5
    NOT_LEADER_OR_FOLLOWER = 6
    REQUEST_TIMED_OUT = 7
    BROKER_NOT_AVAILABLE = 8
    REPLICA_NOT_AVAILABLE = 9
    MESSAGE_TOO_LARGE = 10
    STALE_CONTROLLER_EPOCH = 11
    OFFSET_METADATA_TOO_LARGE = 12
    NETWORK_EXCEPTION = 13
    COORDINATOR_LOAD_IN_PROGRESS = 14
    COORDINATOR_NOT_AVAILABLE = 15
    NOT_COORDINATOR = 16
    INVALID_TOPIC_EXCEPTION = 17
    RECORD_LIST_TOO_LARGE = 18
    NOT_ENOUGH_REPLICAS = 19
    NOT_ENOUGH_REPLICAS_AFTER_APPEND = 20
    INVALID_REQUIRED_ACKS = 21
    ILLEGAL_GENERATION = 22
    INCONSISTENT_GROUP_PROTOCOL = 23
    INVALID_GROUP_ID = 24
    UNKNOWN_MEMBER_ID = 25
    INVALID_SESSION_TIMEOUT = 26
    REBALANCE_IN_PROGRESS = 27
    INVALID_COMMIT_OFFSET_SIZE = 28
    UNSUPPORTED_VERSION = 35
    TOPIC_ALREADY_EXISTS = 36
    INVALID_PARTITIONS = 37
    INVALID_REPLICATION_FACTOR = 38
    INVALID_REPLICA_ASSIGNMENT = 39
    INVALID_CONFIG = 40
    NOT_CONTROLLER = 41
    INVALID_REQUEST = 42
    TRANSACTIONAL_ID_AUTHORIZATION_FAILED = 53
    OUT_OF_ORDER_SEQUENCE_NUMBER = 45
    DUPLICATE_SEQUENCE_NUMBER = 46
    INVALID_PRODUCER_EPOCH = 47
    KAFKA_STORAGE_ERROR = 56
    LOG_DIR_NOT_FOUND = 57
    UNKNOWN_PRODUCER_ID = 59
    REASSIGNMENT_IN_PROGRESS = 60
    NON_EMPTY_GROUP = 68
    FETCH_SESSION_ID_NOT_FOUND = 70
    INVALID_FETCH_SESSION_EPOCH = 71
    GROUP_ID_NOT_FOUND = 69
    OPERATION_NOT_ATTEMPTED = 55
    FENCED_LEADER_EPOCH = 74
    UNKNOWN_LEADER_EPOCH = 75
    STALE_BROKER_EPOCH = 77
    OFFSET_NOT_AVAILABLE = 78
    MEMBER_ID_REQUIRED = 79
    PREFERRED_LEADER_NOT_AVAILABLE = 80
    GROUP_MAX_SIZE_REACHED = 81
    FENCED_INSTANCE_ID = 82
    ELIGIBLE_LEADERS_NOT_AVAILABLE = 83
    ELECTION_NOT_NEEDED = 84
    NO_REASSIGNMENT_IN_PROGRESS = 85
    GROUP_SUBSCRIBED_TO_TOPIC = 86
    INVALID_RECORD = 87
    UNSTABLE_OFFSET_COMMIT = 88
    PRODUCER_FENCED = 90
    INVALID_UPDATE_VERSION = 95
    UNKNOWN_TOPIC_ID = 100
    DUPLICATE_BROKER_REGISTRATION = 101
    BROKER_ID_NOT_REGISTERED = 102
    INCONSISTENT_CLUSTER_ID = 104
    INELIGIBLE_REPLICA = 107
    NEW_LEADER_ELECTED = 108
    MISMATCHED_ENDPOINT_TYPE = 114
    UNSUPPORTED_ENDPOINT_TYPE = 115

    @property
    def retriable(self) -> bool:
        """Whether a client may retry the request that got this code (Kafka's classification)."""
        return self in _RETRIABLE_CODES


_RETRIABLE_CODES = frozenset(
    {
        ErrorCode.CORRUPT_MESSAGE,
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        ErrorCode.LEADER_NOT_AVAILABLE,
        ErrorCode.NOT_LEADER_OR_FOLLOWER,
        ErrorCode.REQUEST_TIMED_OUT,
        ErrorCode.NETWORK_EXCEPTION,
        ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
        ErrorCode.COORDINATOR_NOT_AVAILABLE,
        ErrorCode.NOT_COORDINATOR,
        ErrorCode.NOT_ENOUGH_REPLICAS,
        ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND,
        ErrorCode.NOT_CONTROLLER,
        ErrorCode.KAFKA_STORAGE_ERROR,
        ErrorCode.FENCED_LEADER_EPOCH,
        ErrorCode.UNKNOWN_LEADER_EPOCH,
        ErrorCode.OFFSET_NOT_AVAILABLE,
        ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE,
        ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE,
        ErrorCode.UNSTABLE_OFFSET_COMMIT,
    }
)


class InvariantError(AssertionError):
    """A broken internal invariant: a bug in replog, never an expected failure."""


def error_name(code: int) -> str:
    """Kafka's name of error ``code`` (``UNKNOWN_ERROR_CODE`` for one replog does not know)."""
    try:
        return ErrorCode(code).name
    except ValueError:
        return "UNKNOWN_ERROR_CODE"


def invariant(condition: bool, message: str) -> None:
    """Raise ``InvariantError(message)`` when ``condition`` is false (survives ``python -O``)."""
    if not condition:
        raise InvariantError(message)


def unreachable(message: str) -> NoReturn:
    """Mark a branch that cannot run unless replog has a bug."""
    raise InvariantError(message)


class ReplogError(Exception):
    """Base of every error replog raises on purpose."""

    code: ErrorCode = ErrorCode.UNKNOWN_SERVER_ERROR


class RetriableError(ReplogError):
    """The operation may succeed if retried, possibly against another broker."""


class InvalidConfigError(ReplogError, ValueError):
    """A configuration value is out of range or inconsistent; raised eagerly at construction."""

    code = ErrorCode.INVALID_CONFIG


class InvalidTopicError(ReplogError, ValueError):
    """A topic name is empty, too long, '.'/'..', or has characters outside [a-zA-Z0-9._-]."""

    code = ErrorCode.INVALID_TOPIC_EXCEPTION


class StorageError(ReplogError):
    """A write, read, fsync or rename failed. The log dir that raised it is offline; nothing
    further is appended to it until the broker restarts and recovers it."""

    code = ErrorCode.KAFKA_STORAGE_ERROR

    def __init__(self, message: str, log_dir: str | None = None) -> None:
        super().__init__(message)
        self.log_dir = log_dir


class CorruptRecordError(ReplogError):
    """A record batch fails validation (size, magic, CRC, or framing).

    For a batch already in a log (found damaged when read) it also says where: ``path`` (the
    segment's ``.log`` file), ``position`` (the damaged batch's file position) and the offsets
    that cannot be served, ``first_offset`` to ``last_offset`` inclusive. ``first_offset`` is
    the first damaged offset: what a follower truncates to before fetching again."""

    code = ErrorCode.CORRUPT_MESSAGE

    def __init__(
        self,
        message: str,
        position: int | None = None,
        *,
        path: str | None = None,
        first_offset: int | None = None,
        last_offset: int | None = None,
    ) -> None:
        super().__init__(message)
        self.position = position
        self.path = path
        self.first_offset = first_offset
        self.last_offset = last_offset


class CorruptIndexError(ReplogError):
    """An index file fails its sanity check (wrong size, entries out of order)."""

    code = ErrorCode.KAFKA_STORAGE_ERROR


class MalformedCheckpointError(ReplogError):
    """A checkpoint file does not parse: bad version, bad line, or a count that does not match."""

    code = ErrorCode.KAFKA_STORAGE_ERROR

    def __init__(self, message: str, path: str) -> None:
        super().__init__(f"{path}: {message}")
        self.path = path


class InvalidOffsetError(ReplogError, ValueError):
    """An offset goes backwards where it must increase, or is outside the representable range."""


class InvalidRecordError(ReplogError, ValueError):
    """A well-formed record the log refuses: a record without a key appended to a compacted
    topic (Kafka's INVALID_RECORD, "Compacted topic cannot accept message without key")."""

    code = ErrorCode.INVALID_RECORD


class RecordBatchTooLargeError(ReplogError, ValueError):
    """A batch is larger than the segment or message size limit allows."""

    code = ErrorCode.RECORD_LIST_TOO_LARGE

    def __init__(self, size_bytes: int, limit_bytes: int) -> None:
        super().__init__(f"record batch of {size_bytes} bytes exceeds the limit of {limit_bytes}")
        self.size_bytes = size_bytes
        self.limit_bytes = limit_bytes


class OffsetOutOfRangeError(ReplogError):
    """A read asked for an offset outside [log start offset, log end offset]."""

    code = ErrorCode.OFFSET_OUT_OF_RANGE

    def __init__(self, offset: int, log_start_offset: int, log_end_offset: int) -> None:
        super().__init__(f"offset {offset} is outside [{log_start_offset}, {log_end_offset}]")
        self.offset = offset
        self.log_start_offset = log_start_offset
        self.log_end_offset = log_end_offset


class CorruptProducerSnapshotError(ReplogError):
    """A producer-state ``.snapshot`` file is short, has an unknown version or a CRC that does
    not match: the log drops it and rebuilds the producer state from the log instead."""

    code = ErrorCode.KAFKA_STORAGE_ERROR

    def __init__(self, message: str, path: str) -> None:
        super().__init__(f"{path}: {message}")
        self.path = path


class ProducerStateError(ReplogError):
    """An idempotent producer's batch does not fit the partition's producer state (the leader
    refuses it and writes nothing). ``producer_id`` and ``producer_epoch`` name the batch's
    producer."""

    def __init__(self, message: str, producer_id: int, producer_epoch: int) -> None:
        super().__init__(message)
        self.producer_id = producer_id
        self.producer_epoch = producer_epoch


class OutOfOrderSequenceError(ProducerStateError):
    """The batch's first sequence does not follow the producer's last one (a gap: a batch in
    between was lost), or a new epoch does not start at sequence 0."""

    code = ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER


class InvalidProducerEpochError(ProducerStateError):
    """The batch's producer epoch is older than the one the partition has seen (a zombie)."""

    code = ErrorCode.INVALID_PRODUCER_EPOCH


class UnknownProducerIdError(ProducerStateError):
    """The partition has no state for the producer (never written, expired, or its batches
    were all deleted) and the batch does not start a sequence at 0."""

    code = ErrorCode.UNKNOWN_PRODUCER_ID


class ProtocolError(ReplogError):
    """Malformed input from a remote peer: drop that connection, keep serving the others."""

    code = ErrorCode.INVALID_REQUEST


class NotLeaderError(RetriableError):
    """This broker does not lead the partition; ``leader_id`` is the leader it knows (-1: none)."""

    code = ErrorCode.NOT_LEADER_OR_FOLLOWER

    def __init__(self, leader_id: int = -1, leader_epoch: int = -1) -> None:
        super().__init__(f"not the leader (known leader {leader_id} at epoch {leader_epoch})")
        self.leader_id = leader_id
        self.leader_epoch = leader_epoch


class NotEnoughReplicasError(RetriableError):
    """acks=all and the ISR is smaller than min.insync.replicas."""

    code = ErrorCode.NOT_ENOUGH_REPLICAS

    def __init__(self, isr_size: int, min_isr: int) -> None:
        super().__init__(f"ISR size {isr_size} is below min.insync.replicas {min_isr}")
        self.isr_size = isr_size
        self.min_isr = min_isr


class FencedLeaderEpochError(RetriableError):
    """The request carried a leader epoch older than the partition's current one."""

    code = ErrorCode.FENCED_LEADER_EPOCH

    def __init__(self, request_epoch: int, current_epoch: int) -> None:
        super().__init__(f"leader epoch {request_epoch} is fenced by {current_epoch}")
        self.request_epoch = request_epoch
        self.current_epoch = current_epoch


class RequestTimeoutError(RetriableError):
    """The request did not complete within its timeout (for acks=all: the HW did not pass it)."""

    code = ErrorCode.REQUEST_TIMED_OUT
