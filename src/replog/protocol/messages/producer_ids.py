"""InitProducerId (key 22): an idempotent producer asks for its producer id and epoch.

Fields follow Kafka's InitProducerIdRequest/Response.json. Versions 0-5 are served (v2 is the
first flexible one; v3 adds the producer's current id and epoch, KIP-360; v4 and v5 only add
error codes a client may get). v6 (KIP-939, two-phase commit) is not: Kafka marks it unstable.
replog serves idempotent producers only: a request with a ``transactional_id`` is refused.
"""

# `field(...)` is an attrs field specifier (schema.field wraps attrs.field); ruff cannot tell.

from __future__ import annotations

import attrs

from replog.protocol.schema import INT16, INT32, INT64, STRING, ApiInfo, Request, Response, field

__all__ = ["INIT_PRODUCER_ID", "InitProducerIdRequest", "InitProducerIdResponse"]

INIT_PRODUCER_ID = ApiInfo(22, "InitProducerId", min_version=0, max_version=5, flexible_from=2)


@attrs.frozen(kw_only=True)
class InitProducerIdRequest(Request):
    """Ask for a producer id (``transactional_id`` None: an idempotent producer). From v3 a
    producer that has an id passes it with its epoch (a new one is handed out all the same for
    an idempotent producer, as Kafka does)."""

    API = INIT_PRODUCER_ID

    transactional_id: str | None = field(STRING, "0+", nullable="0+", default="")
    transaction_timeout_ms: int = field(INT32, "0+")
    producer_id: int = field(INT64, "3+", default=-1)
    producer_epoch: int = field(INT16, "3+", default=-1)


@attrs.frozen(kw_only=True)
class InitProducerIdResponse(Response):
    """The producer id and epoch to stamp batches with, or an error."""

    API = INIT_PRODUCER_ID

    throttle_time_ms: int = field(INT32, "0+", ignorable=True)
    error_code: int = field(INT16, "0+")
    producer_id: int = field(INT64, "0+", default=-1)
    producer_epoch: int = field(INT16, "0+")
