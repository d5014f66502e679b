"""BrokerRegistration (key 62) and BrokerHeartbeat (key 63): how a KRaft broker joins the cluster
and keeps its session with the active controller (KIP-631).

Field order, version ranges, nullability, defaults and tags follow Kafka's
BrokerRegistrationRequest/Response.json and BrokerHeartbeatRequest/Response.json. Both APIs are
flexible from v0. Facts worth knowing:

- BrokerRegistration v1 adds ``is_migrating_zk_broker``, v2 ``log_dirs``, v3
  ``previous_broker_epoch`` (KIP-966: the epoch the broker held when it last shut down cleanly,
  -1 after a crash); v4 changes no field (features at level 0 are sent too). The response's
  ``broker_epoch`` is the offset of the registration record in the metadata log.
- BrokerHeartbeat v1 adds the tagged ``offline_log_dirs`` (tag 0). The response's ``is_fenced``
  defaults to true, ``is_caught_up`` to false.
- ``Listener.port`` is a uint16.

**replog's tagged fields.** replog's coordination contract registers a broker with its own
session timeout and says whether it shut down cleanly and starts fenced (``register_broker``);
Kafka's controller takes the first from its own config and decides the others itself. replog
sends them as tagged fields numbered from ``REPLOG_TAG_BASE`` (10000), far above Kafka's own
tags (KIP-482: a reader skips tags it does not know, so Kafka's decoders read these requests and
a Kafka broker's requests, without them, get the defaults). The response to a refused duplicate
registration names the live holder's epoch the same way, and the response to a heartbeat of a
stale epoch the current one.

These are controller-listener APIs: a broker's client port does not serve or advertise them, so
they are not in ``APIS`` but in ``CONTROLLER_APIS`` (the quorum node's port serves them,
``replog.quorum.kafka_port``).
"""

# `field(...)` is an attrs field specifier (schema.field wraps attrs.field); ruff cannot tell.
# ruff: noqa: RUF009

from __future__ import annotations

import uuid

import attrs

from replog.protocol.primitives import ZERO_UUID
from replog.protocol.schema import (
    BOOL,
    INT16,
    INT32,
    INT64,
    STRING,
    UINT16,
    UUID,
    ApiInfo,
    Request,
    Response,
    array,
    field,
)

__all__ = [
    "BROKER_HEARTBEAT",
    "BROKER_REGISTRATION",
    "REPLOG_TAG_BASE",
    "SECURITY_PROTOCOL_PLAINTEXT",
    "SESSION_TIMEOUT_MS_DEFAULT",
    "BrokerHeartbeatRequest",
    "BrokerHeartbeatResponse",
    "BrokerRegistrationFeature",
    "BrokerRegistrationListener",
    "BrokerRegistrationRequest",
    "BrokerRegistrationResponse",
]

BROKER_REGISTRATION = ApiInfo(
    62, "BrokerRegistration", min_version=0, max_version=4, flexible_from=0
)
BROKER_HEARTBEAT = ApiInfo(63, "BrokerHeartbeat", min_version=0, max_version=1, flexible_from=0)
REPLOG_TAG_BASE = 10_000
"""The first tag of replog's own tagged fields (see the module docstring)."""
SESSION_TIMEOUT_MS_DEFAULT = 9_000
"""Kafka's ``broker.session.timeout.ms`` default: the session of a registration that does not
carry replog's ``session_timeout_ms``."""
SECURITY_PROTOCOL_PLAINTEXT = 0
"""Kafka's ``SecurityProtocol`` id of PLAINTEXT (a listener's ``security_protocol``)."""


@attrs.frozen(kw_only=True)
class BrokerRegistrationListener:
    """One endpoint the broker serves on."""

    name: str = field(STRING, "0+")
    host: str = field(STRING, "0+")
    port: int = field(UINT16, "0+")
    security_protocol: int = field(INT16, "0+")


@attrs.frozen(kw_only=True)
class BrokerRegistrationFeature:
    """A feature the broker supports, with its range of levels."""

    name: str = field(STRING, "0+")
    min_supported_version: int = field(INT16, "0+")
    max_supported_version: int = field(INT16, "0+")


@attrs.frozen(kw_only=True)
class BrokerRegistrationRequest(Request):
    """A broker process announces itself to the active controller."""

    API = BROKER_REGISTRATION

    broker_id: int = field(INT32, "0+")
    cluster_id: str = field(STRING, "0+")
    incarnation_id: uuid.UUID = field(UUID, "0+", default=ZERO_UUID)
    listeners: list[BrokerRegistrationListener] = field(array(BrokerRegistrationListener), "0+")
    features: list[BrokerRegistrationFeature] = field(array(BrokerRegistrationFeature), "0+")
    rack: str | None = field(STRING, "0+", nullable="0+", default=None)
    is_migrating_zk_broker: bool = field(BOOL, "1+")
    log_dirs: list[uuid.UUID] = field(array(UUID), "2+")
    previous_broker_epoch: int = field(INT64, "3+", default=-1)
    # replog's own (see the module docstring); -1: the controller's default session timeout
    session_timeout_ms: int = field(INT32, "0+", tag=REPLOG_TAG_BASE, default=-1)
    unclean_shutdown: bool = field(BOOL, "0+", tag=REPLOG_TAG_BASE + 1)
    fenced: bool = field(BOOL, "0+", tag=REPLOG_TAG_BASE + 2)


@attrs.frozen(kw_only=True)
class BrokerRegistrationResponse(Response):
    """The broker's epoch (the registration record's offset), or an error."""

    API = BROKER_REGISTRATION

    throttle_time_ms: int = field(INT32, "0+")
    error_code: int = field(INT16, "0+")
    broker_epoch: int = field(INT64, "0+", default=-1)
    # replog's own: the epoch of the live registration that refused a duplicate (-1: none)
    holder_broker_epoch: int = field(INT64, "0+", tag=REPLOG_TAG_BASE, default=-1)


@attrs.frozen(kw_only=True)
class BrokerHeartbeatRequest(Request):
    """A registered broker's keep-alive, carrying how far it has read the metadata log and
    whether it wants to be fenced or to shut down."""

    API = BROKER_HEARTBEAT

    broker_id: int = field(INT32, "0+")
    broker_epoch: int = field(INT64, "0+", default=-1)
    # replog's own: the epoch of the live registration that refused a duplicate (-1: none)
    holder_broker_epoch: int = field(INT64, "0+", tag=REPLOG_TAG_BASE, default=-1)
    current_metadata_offset: int = field(INT64, "0+")
    want_fence: bool = field(BOOL, "0+")
    want_shut_down: bool = field(BOOL, "0+")
    offline_log_dirs: list[uuid.UUID] = field(array(UUID), "1+", tag=0)


@attrs.frozen(kw_only=True)
class BrokerHeartbeatResponse(Response):
    """The controller's view of the broker: caught up, fenced, may finish shutting down."""

    API = BROKER_HEARTBEAT

    throttle_time_ms: int = field(INT32, "0+")
    error_code: int = field(INT16, "0+")
    is_caught_up: bool = field(BOOL, "0+")
    is_fenced: bool = field(BOOL, "0+", default=True)
    should_shut_down: bool = field(BOOL, "0+")
    # replog's own: with STALE_BROKER_EPOCH, the epoch of the broker's live registration
    current_broker_epoch: int = field(INT64, "0+", tag=REPLOG_TAG_BASE, default=-1)
