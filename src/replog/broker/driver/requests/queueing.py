"""Admin requests checked here, queued for the controller (``AwaitAdmin``) and answered in the
request's order once it completes each one: the helper the admin API families share.

A request's items (topics, partitions, config resources) are each ``Checked``: its name, the
payload to queue (None when the broker's own checks refused it) and its result so far. Only
payloads are queued; ``validate_only`` queues nothing and answers every item that passed the
checks with success. A success carries no error message, as in Kafka.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TypeVar

from replog.broker.driver.requests.base import AdminResult, AwaitAdmin, Outcome, Reply
from replog.errors import ErrorCode
from replog.metadata.types import AdminPayload
from replog.protocol.schema import Message

__all__ = ["Checked", "queue_checked"]

K = TypeVar("K")
Checked = tuple[K, AdminPayload | None, AdminResult]
"""(the item's key, the payload to queue or None, its result so far)."""


def queue_checked(
    checked: Sequence[Checked[K]],
    timeout_ms: int,
    validate_only: bool,
    build: Callable[[list[tuple[K, AdminResult]]], Message],
) -> Outcome:
    """Queue the payloads that passed the checks (unless ``validate_only``), then answer every
    item in the request's order with ``build``."""
    queued = [(i, payload) for i, (_, payload, _) in enumerate(checked) if payload is not None]

    def finish(results: Sequence[AdminResult]) -> Outcome:
        final = [result for _, _, result in checked]
        for (i, _), result in zip(queued, results, strict=True):
            final[i] = result
        answers = [(key, _quiet(r)) for (key, _, _), r in zip(checked, final, strict=True)]
        return Reply(build(answers))

    if validate_only or not queued:
        return finish([AdminResult(ErrorCode.NONE)] * len(queued))
    return AwaitAdmin(tuple(p for _, p in queued), timeout_ms, finish)


def _quiet(result: AdminResult) -> AdminResult:
    return AdminResult(result.error) if result.error is ErrorCode.NONE else result
