"""Errors of the wire-protocol codec, all under ``replog.errors``' tree.

Decoding never raises anything but ``ProtocolError`` (or one of the subclasses here): bad bytes
from a peer must cost that peer its connection, never crash the broker. Encoding problems are the
caller's bug (a value that does not fit its wire type, or a field the chosen version cannot carry)
and raise ``EncodeError``.
"""

from __future__ import annotations

from replog.errors import ErrorCode, ProtocolError, ReplogError

__all__ = [
    "EncodeError",
    "FrameTooLargeError",
    "UnknownApiKeyError",
    "UnsupportedRequestError",
    "UnsupportedVersionError",
]


class EncodeError(ReplogError, ValueError):
    """A message cannot be put on the wire at the requested version: an integer out of its type's
    range, a string too long, a null where the version allows none, or a non-default value in a
    non-ignorable field the version lacks (Kafka's UnsupportedVersionException)."""


class FrameTooLargeError(ProtocolError):
    """A size prefix announces a frame larger than the configured maximum (or a negative one)."""

    def __init__(self, size_bytes: int, frame_bytes_max: int) -> None:
        super().__init__(f"frame of {size_bytes} bytes exceeds the maximum of {frame_bytes_max}")
        self.size_bytes = size_bytes
        self.frame_bytes_max = frame_bytes_max


class UnsupportedRequestError(ProtocolError):
    """A well-framed request this broker does not serve. Carries the header fields that could be
    read so the server can answer (see ``framing.unsupported_version_response``) or log it."""

    def __init__(
        self,
        message: str,
        *,
        api_key: int,
        api_version: int,
        correlation_id: int,
        client_id: str | None = None,
    ) -> None:
        super().__init__(message)
        self.api_key = api_key
        self.api_version = api_version
        self.correlation_id = correlation_id
        self.client_id = client_id


class UnknownApiKeyError(UnsupportedRequestError):
    """The api key is not one replog implements; Kafka closes the connection."""

    code = ErrorCode.INVALID_REQUEST


class UnsupportedVersionError(UnsupportedRequestError):
    """The api key is known but not at this version. For ApiVersions Kafka answers with a v0
    response carrying error 35; for every other api it closes the connection."""

    code = ErrorCode.UNSUPPORTED_VERSION
