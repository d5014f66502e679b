"""InitProducerId (key 22): an idempotent producer gets a producer id (epoch 0).

The id comes from this broker's block (``ProducerIdManager``); when the block is used up the
request waits (``AwaitAdmin``) for the controller to allocate the next one, and gets
COORDINATOR_LOAD_IN_PROGRESS (retriable, as Kafka answers while no block is at hand) if none
arrives in time. As in Kafka, an idempotent producer that passes its current id and epoch (v3+,
after a lost batch) gets a new id all the same. Transactional producers (a ``transactional_id``)
are not served: replog has no transaction coordinator.
"""

from __future__ import annotations

from collections.abc import Sequence

from replog.broker.driver.requests.base import (
    AdminResult,
    AwaitAdmin,
    Handler,
    Outcome,
    Reply,
    RequestContext,
    RequestServices,
)
from replog.errors import ErrorCode
from replog.metadata.types import AllocateProducerIds
from replog.protocol import messages as m
from replog.protocol.schema import Message

__all__ = ["HANDLERS", "handle_init_producer_id"]


def _answer(error: ErrorCode, producer_id: int = -1, epoch: int = -1) -> Reply:
    return Reply(
        m.InitProducerIdResponse(
            throttle_time_ms=0, error_code=int(error), producer_id=producer_id, producer_epoch=epoch
        )
    )


def handle_init_producer_id(
    ctx: RequestContext, body: m.InitProducerIdRequest, services: RequestServices
) -> Outcome:
    """See the module docstring."""
    if body.transactional_id is not None:
        return _answer(ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
    producer_id = services.producer_ids.take()
    if producer_id is not None:
        return _answer(ErrorCode.NONE, producer_id, 0)
    payload = AllocateProducerIds(broker_id=services.broker_id, broker_epoch=services.broker_epoch)

    def finish(results: Sequence[AdminResult]) -> Outcome:
        taken = services.producer_ids.take()
        if taken is None:
            return _answer(ErrorCode.COORDINATOR_LOAD_IN_PROGRESS)
        return _answer(ErrorCode.NONE, taken, 0)

    return AwaitAdmin((payload,), services.config.request_timeout_ms, finish)


HANDLERS: dict[type[Message], Handler] = {m.InitProducerIdRequest: handle_init_producer_id}
