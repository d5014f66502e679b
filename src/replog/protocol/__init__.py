"""Kafka wire-protocol codec (pure: no sockets, no IO).

Layers, bottom up:

- ``primitives``: bounds-checked ``Reader`` / ``Writer`` for Kafka's primitive types, and
  ``RecordsRef`` placeholders for record payloads the caller streams itself;
- ``schema``: the declarative field mechanism (``field``, ``array``, ``Message``) and the one
  interpreter that encodes and decodes every message;
- ``messages``: the request/response schemas of the APIs replog serves, and ``APIS``;
- ``framing``: size-prefixed frames, request/response headers, ``decode_request``;
- ``error_responses``: the answer to a request whose handling failed (``error_response``).

Decoding raises only ``ProtocolError`` (and its subclasses in ``exceptions``); encoding a value
that does not fit raises ``EncodeError``.
"""

from __future__ import annotations

from replog.protocol import (
    fetch_v12,  # noqa: F401  (registers the Fetch v12 codec)
    produce_fast,  # noqa: F401  (registers the Produce v3-v9 codec)
)
from replog.protocol.error_responses import error_response
from replog.protocol.exceptions import (
    EncodeError,
    FrameTooLargeError,
    UnknownApiKeyError,
    UnsupportedRequestError,
    UnsupportedVersionError,
)
from replog.protocol.framing import (
    DEFAULT_FRAME_BYTES_MAX,
    FrameReader,
    RequestHeader,
    decode_request,
    decode_response,
    encode_fetch_response_parts,
    encode_request,
    encode_response,
    encode_response_parts,
    read_frame_size,
    unsupported_version_response,
)
from replog.protocol.messages import APIS, ApiSpec, supported_api_versions
from replog.protocol.primitives import Reader, RecordsRef, Writer
from replog.protocol.schema import ApiInfo, Message

__all__ = [
    "APIS",
    "DEFAULT_FRAME_BYTES_MAX",
    "ApiInfo",
    "ApiSpec",
    "EncodeError",
    "FrameReader",
    "FrameTooLargeError",
    "Message",
    "Reader",
    "RecordsRef",
    "RequestHeader",
    "UnknownApiKeyError",
    "UnsupportedRequestError",
    "UnsupportedVersionError",
    "Writer",
    "decode_request",
    "decode_response",
    "encode_fetch_response_parts",
    "encode_request",
    "encode_response",
    "encode_response_parts",
    "error_response",
    "read_frame_size",
    "supported_api_versions",
    "unsupported_version_response",
]
