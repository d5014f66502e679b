"""Errors the clients raise, on top of ``replog.errors``.

A broker answers with Kafka error codes; ``error_for_code`` turns one into an exception of the
replog tree. Retriable codes (``ErrorCode.retriable``, Kafka's classification) become
``RetriableError`` subclasses, so callers and the producer's retry loop classify by type alone.
"""

from __future__ import annotations

from replog.errors import (
    ErrorCode,
    NotLeaderError,
    ReplogError,
    RequestTimeoutError,
    RetriableError,
    error_name,
)

__all__ = [
    "BrokerResponseError",
    "BufferFullError",
    "ClientClosedError",
    "ConnectionLostError",
    "DeliveryTimeoutError",
    "FlushTimeoutError",
    "LogTruncationError",
    "NoOffsetForPartitionError",
    "RetriableBrokerResponseError",
    "error_for_code",
    "is_retriable",
]


class BrokerResponseError(ReplogError):
    """A broker answered with a non-retriable error code."""

    def __init__(self, code: int, message: str = "") -> None:
        name = error_name(code)
        super().__init__(f"{name} ({code}){': ' + message if message else ''}")
        self.error_code = code
        self.code = _as_error_code(code)


class RetriableBrokerResponseError(RetriableError):
    """A broker answered with a retriable error code (e.g. NOT_ENOUGH_REPLICAS)."""

    def __init__(self, code: int, message: str = "") -> None:
        name = error_name(code)
        super().__init__(f"{name} ({code}){': ' + message if message else ''}")
        self.error_code = code
        self.code = _as_error_code(code)


class ConnectionLostError(RetriableError):
    """The connection to a broker failed or closed with requests outstanding."""

    code = ErrorCode.NETWORK_EXCEPTION


class ClientClosedError(ReplogError):
    """The client was closed; no further requests are accepted."""


class BufferFullError(ReplogError):
    """The producer's buffer holds ``buffer_bytes_max`` of unsent records; the new record would
    exceed it. Wait for deliveries (``flush()``) or raise the limit."""

    def __init__(self, needed_bytes: int, buffered_bytes: int, buffer_bytes_max: int) -> None:
        super().__init__(
            f"producer buffer full: {buffered_bytes} of {buffer_bytes_max} bytes used, "
            f"record needs {needed_bytes}"
        )
        self.needed_bytes = needed_bytes
        self.buffered_bytes = buffered_bytes
        self.buffer_bytes_max = buffer_bytes_max


class DeliveryTimeoutError(ReplogError):
    """A record was neither acknowledged nor failed for good within the producer's
    ``delivery_timeout_ms`` of its batch's creation (no leader, retries that kept failing, an
    answer that never came). It may or may not have been written. ``last_error``: the last
    attempt's error, if one was sent."""

    code = ErrorCode.REQUEST_TIMED_OUT

    def __init__(
        self, topic: str, partition: int, delivery_timeout_ms: int, last_error: BaseException | None
    ) -> None:
        why = f" (last error: {last_error})" if last_error is not None else ""
        super().__init__(
            f"{topic}-{partition}: record not delivered within delivery_timeout_ms="
            f"{delivery_timeout_ms}{why}"
        )
        self.topic = topic
        self.partition = partition
        self.delivery_timeout_ms = delivery_timeout_ms
        self.last_error = last_error


class FlushTimeoutError(ReplogError):
    """``flush(timeout)`` ended with ``pending`` records neither acknowledged nor failed."""

    code = ErrorCode.REQUEST_TIMED_OUT

    def __init__(self, pending: int, timeout_ms: int) -> None:
        super().__init__(f"flush: {pending} records still pending after {timeout_ms} ms")
        self.pending = pending
        self.timeout_ms = timeout_ms


class NoOffsetForPartitionError(ReplogError):
    """A partition has no position and the consumer's ``auto_reset`` is "none"."""

    def __init__(self, topic: str, partition: int) -> None:
        super().__init__(f"no offset for {topic}-{partition} and auto_reset='none'")
        self.topic = topic
        self.partition = partition


class LogTruncationError(ReplogError):
    """The consumer read records that the partition's current leader does not have (KIP-320):
    after an unclean election the log was truncated below the consumer's position.

    ``divergent_offsets`` maps (topic, partition) to ``(position, end_offset)``: the consumer's
    position and the first offset past the last record both logs agree on (-1: unknown). Records
    in ``[end_offset, position)`` that the consumer returned are gone from the log. The consumer
    does not move; ``seek()`` to continue.
    """

    def __init__(self, divergent_offsets: dict[tuple[str, int], tuple[int, int]]) -> None:
        parts = ", ".join(
            f"{t}-{p}: position {pos}, log ends at {end}"
            for (t, p), (pos, end) in sorted(divergent_offsets.items())
        )
        super().__init__(f"log truncation detected ({parts})")
        self.divergent_offsets = divergent_offsets


def _as_error_code(code: int) -> ErrorCode:
    """``code`` as an ``ErrorCode`` (UNKNOWN_SERVER_ERROR for a number Kafka does not define),
    so ``ReplogError.code`` agrees with ``error_code`` on broker errors."""
    try:
        return ErrorCode(code)
    except ValueError:
        return ErrorCode.UNKNOWN_SERVER_ERROR


def is_retriable(code: int) -> bool:
    """Kafka's classification of ``code``; unknown codes are not retriable."""
    try:
        return ErrorCode(code).retriable
    except ValueError:
        return False


def error_for_code(code: int, message: str = "") -> ReplogError:
    """The exception for a non-zero broker error code."""
    if code == ErrorCode.NOT_LEADER_OR_FOLLOWER:
        return NotLeaderError()
    if code == ErrorCode.REQUEST_TIMED_OUT:
        return RequestTimeoutError(message or "request timed out on the broker")
    if is_retriable(code):
        return RetriableBrokerResponseError(code, message)
    return BrokerResponseError(code, message)
