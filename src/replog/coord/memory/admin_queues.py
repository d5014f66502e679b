"""The memory backend's admin request queues: per-target FIFO queues held in process, under the
store's lock. The request id is a counter of its own here (other backends use the submission's
seq); the queue rules are ``replog.coord.admin``'s."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from replog.coord.admin import requests_to_drop, validate_admin_request
from replog.errors import ErrorCode
from replog.metadata import records
from replog.metadata.types import AdminPayload, AdminRequest, AlterPartitionResult, MetadataChange

__all__ = ["AdminQueues", "WriteFn"]

WriteFn = Callable[[Callable[[int], Sequence[MetadataChange]]], int]
"""The store's "append one atomic write to the feed" function: builds records from the seq."""


class AdminQueues:
    """Per-target FIFO queues of admin requests, held in process (the caller locks)."""

    def __init__(self, limit: int) -> None:
        self._limit = limit
        self._queues: dict[int, dict[int, AdminRequest]] = {}
        self._target_of: dict[int, int] = {}
        self._next_id = 1

    def submit(self, write: WriteFn, target: int, payload: AdminPayload) -> AdminRequest:
        """Queue a request, dropping superseded ones if the queue is full (one atomic write)."""
        validate_admin_request(target, payload)
        queue = self._queues.setdefault(target, {})
        dropped = requests_to_drop(list(queue.values()), target, self._limit)
        request_id = self._next_id
        self._next_id += 1
        made: list[AdminRequest] = []

        def build(seq: int) -> list[MetadataChange]:
            request = AdminRequest(
                request_id=request_id, target=target, payload=payload, submitted_seq=seq
            )
            made.append(request)
            return records.admin_submitted(seq, request, dropped)

        write(build)
        for old in dropped:
            del queue[old.request_id]
            del self._target_of[old.request_id]
        queue[request_id] = made[0]
        self._target_of[request_id] = target
        return made[0]

    def pending(self, target: int) -> list[AdminRequest]:
        """The target's queued requests, oldest first."""
        return list(self._queues.get(target, {}).values())

    def complete(
        self,
        write: WriteFn,
        request_id: int,
        outcome: ErrorCode,
        message: str,
        result: AlterPartitionResult | None = None,
    ) -> bool:
        """Remove a queued request and record its outcome; False if it is not queued."""
        target = self._target_of.pop(request_id, None)
        if target is None:
            return False
        request = self._queues[target].pop(request_id)
        write(lambda seq: records.admin_completed(seq, request, outcome, message, result))
        return True
