"""The request layer: one module per API family, each registering its handlers in
``HANDLERS`` (request type -> handler); dispatch is a table look-up.

``dispatch`` runs the handler for a decoded request. A handler that raises is answered with the
API's error response (``replog.protocol.error_response``: the error code on every topic and
partition of the request), or the connection is closed when the API has no answer to give (a
Produce with acks=0) -- a client is never left waiting. See ``base`` for what a handler sees and
returns.
"""

from __future__ import annotations

import logging
from typing import Any

from replog.broker.driver.requests import (
    alter_configs,
    configs,
    fetch,
    groups,
    metadata,
    offsets,
    partition_admin,
    produce,
    producer_ids,
    topics,
)
from replog.broker.driver.requests.base import (
    AdminResult,
    AwaitAdmin,
    AwaitData,
    AwaitProduces,
    AwaitReply,
    Close,
    GroupServices,
    Handler,
    NoReply,
    Outcome,
    Reply,
    RequestContext,
    RequestServices,
)
from replog.protocol import error_response
from replog.protocol.schema import Message, Request

__all__ = [
    "HANDLERS",
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
    "dispatch",
    "failed",
]

_log = logging.getLogger(__name__)

HANDLERS: dict[type[Message], Handler] = {
    **produce.HANDLERS,
    **fetch.HANDLERS,
    **metadata.HANDLERS,
    **offsets.HANDLERS,
    **topics.HANDLERS,
    **configs.HANDLERS,
    **producer_ids.HANDLERS,
    **alter_configs.HANDLERS,
    **partition_admin.HANDLERS,
    **groups.HANDLERS,
}
"""Every served request type and its handler."""


def dispatch(ctx: RequestContext, body: Message, services: RequestServices) -> Outcome:
    """Run ``body``'s handler; an exception becomes the API's error response."""
    handler = HANDLERS.get(type(body))
    if handler is None:
        return Close(f"no handler for {type(body).__name__}")
    try:
        return handler(ctx, body, services)
    except Exception as exc:
        return failed(ctx, body, exc)


def failed(ctx: RequestContext, body: Any, error: BaseException) -> Outcome:
    """The answer to a request whose handling raised ``error`` (logged once)."""
    header = ctx.header
    _log.error(
        "handling %s v%d (correlation id %d) failed",
        type(body).__name__, header.api_version, header.correlation_id, exc_info=error,
    )  # fmt: skip
    if not isinstance(body, Request):
        return Close(f"{type(body).__name__} failed: {error}")
    try:
        answer = error_response(body, error, version=header.api_version)
    except Exception as exc:  # no error response can be built: the client must not wait
        return Close(f"no error response for {type(body).__name__}: {exc}")
    return Close("no answer to give") if answer is None else Reply(answer)
