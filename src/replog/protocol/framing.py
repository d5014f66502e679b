"""Frames and headers: what surrounds every request and response body on a Kafka connection.

Byte layout (integers big-endian):

    frame            size: int32 (bytes that follow, excluding itself), then header, then body
    request header   v0: api_key int16, api_version int16, correlation_id int32
                     v1: v0 + client_id (classic nullable string: int16 length, -1 = null)
                     v2: v1 + tagged fields (client_id stays a classic string, so any broker can
                         read the header of any ApiVersions request)
    response header  v0: correlation_id int32;  v1: v0 + tagged fields

A request uses header v2 when its API version is flexible, else v1 (v0 only served
ControlledShutdown v0, which replog does not serve). A response uses header v1 when flexible, else
v0 -- except ApiVersions, which always answers with header v0 so that a client can read the answer
to a version the broker does not know (KIP-511).

The broker loop: ``FrameReader.feed()`` splits the byte stream into frames; ``decode_request()``
turns one into ``(RequestHeader, body)``; ``encode_response()`` (or ``encode_response_parts()`` to
``sendfile`` record payloads) frames the answer. An ``UnsupportedVersionError`` from
``decode_request`` may have an answer (``unsupported_version_response``); every other
``ProtocolError`` means: close that connection.
"""

from __future__ import annotations

import struct
from typing import Any

import attrs

from replog.errors import ErrorCode, ProtocolError
from replog.protocol.exceptions import (
    EncodeError,
    FrameTooLargeError,
    UnknownApiKeyError,
    UnsupportedRequestError,
    UnsupportedVersionError,
)
from replog.protocol.messages import (
    ALL_APIS,
    API_VERSIONS,
    APIS,
    ApiSpec,
    ApiVersion,
    ApiVersionsResponse,
    FetchResponse,
)
from replog.protocol.primitives import Buffer, Reader, RecordsRef, Writer
from replog.protocol.schema import Message

__all__ = [
    "DEFAULT_FRAME_BYTES_MAX",
    "FrameReader",
    "RequestHeader",
    "decode_request",
    "decode_request_header",
    "decode_response",
    "encode_fetch_response_parts",
    "encode_request",
    "encode_request_header",
    "encode_response",
    "encode_response_parts",
    "read_frame_size",
    "request_header_version",
    "response_header_version",
    "unsupported_version_response",
]

# Kafka's socket.request.max.bytes default.
DEFAULT_FRAME_BYTES_MAX = 100 * 1024 * 1024
_SIZE_PREFIX_BYTES = 4
#: a request header up to its client id: api key, api version, correlation id, client id length
_REQUEST_HEADER_PREFIX = struct.Struct(">hhih")
#: a response frame up to its header's tagged fields: size (filled in last), correlation id
_RESPONSE_HEADER_PREFIX = struct.Struct(">ii")
_INT32_MAX = 2**31 - 1


@attrs.frozen(kw_only=True)
class RequestHeader:
    """The header of a request; ``correlation_id`` is echoed in the response."""

    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None = None


def request_header_version(api_key: int, api_version: int) -> int:
    """2 for flexible API versions, else 1 (unknown api keys: 1)."""
    spec = ALL_APIS.get(api_key)
    return 2 if spec is not None and spec.info.is_flexible(api_version) else 1


def response_header_version(api_key: int, api_version: int) -> int:
    """1 for flexible API versions, else 0; ApiVersions is always 0."""
    spec = ALL_APIS.get(api_key)
    if api_key == API_VERSIONS.api_key or spec is None:
        return 0
    return 1 if spec.info.is_flexible(api_version) else 0


def encode_request_header(w: Writer, header: RequestHeader, header_version: int) -> None:
    """Append ``header`` in request header version 0, 1 or 2."""
    w.write_int16(header.api_key)
    w.write_int16(header.api_version)
    w.write_int32(header.correlation_id)
    if header_version >= 1:
        w.write_nullable_string(header.client_id)
    if header_version >= 2:
        w.write_empty_tagged_fields()


def decode_request_header(r: Reader, header_version: int) -> RequestHeader:
    """Read a request header of version 0, 1 or 2 (unknown tagged fields are skipped)."""
    api_key = r.read_int16()
    api_version = r.read_int16()
    correlation_id = r.read_int32()
    client_id = r.read_nullable_string() if header_version >= 1 else None
    if header_version >= 2:
        r.skip_tagged_fields()
    return RequestHeader(
        api_key=api_key,
        api_version=api_version,
        correlation_id=correlation_id,
        client_id=client_id,
    )


def read_frame_size(prefix: Buffer, *, frame_bytes_max: int = DEFAULT_FRAME_BYTES_MAX) -> int:
    """Parse a 4-byte size prefix; negative or larger than ``frame_bytes_max`` raises
    ``FrameTooLargeError`` before anything is buffered."""
    size_bytes = Reader(prefix).read_int32()
    if size_bytes < 0 or size_bytes > frame_bytes_max:
        raise FrameTooLargeError(size_bytes, frame_bytes_max)
    return size_bytes


def _frame(parts: list[bytes | RecordsRef[Any]], size_bytes: int) -> list[bytes | RecordsRef[Any]]:
    """Fill the 4-byte size placeholder at the start of ``parts``."""
    if size_bytes > _INT32_MAX:
        raise EncodeError(f"frame of {size_bytes} bytes does not fit an int32 size")
    first = parts[0]
    if not isinstance(first, bytes):
        raise EncodeError("a frame must start with its header")
    return [size_bytes.to_bytes(4, "big") + first[_SIZE_PREFIX_BYTES:], *parts[1:]]


def _join(parts: list[bytes | RecordsRef[Any]]) -> bytes:
    chunks = [p for p in parts if isinstance(p, bytes)]
    if len(chunks) != len(parts):
        raise EncodeError("records are RecordsRef placeholders; use encode_response_parts()")
    return b"".join(chunks)


def encode_request(header: RequestHeader, request: Message) -> bytes:
    """A whole size-prefixed request frame (as a client, e.g. the replica fetcher, sends it)."""
    if request.API.api_key != header.api_key:
        raise EncodeError(f"{type(request).__name__} under api key {header.api_key}")
    w = Writer()
    w.write_int32(0)
    encode_request_header(w, header, request_header_version(header.api_key, header.api_version))
    request.encode_into(w, header.api_version)
    return _join(_frame(w.parts(), w.size_bytes - _SIZE_PREFIX_BYTES))


def _best_effort_client_id(r: Reader) -> str | None:
    try:
        return r.read_nullable_string()
    except ProtocolError:
        return None


def decode_request(
    frame: Buffer, *, frame_bytes_max: int = DEFAULT_FRAME_BYTES_MAX
) -> tuple[RequestHeader, Message]:
    """Decode one request frame (the bytes after its size prefix) into its header and body.

    Raises ``UnknownApiKeyError`` / ``UnsupportedVersionError`` (both carry the correlation id)
    for requests replog does not serve, ``FrameTooLargeError`` when ``frame`` is over
    ``frame_bytes_max``, and ``ProtocolError`` for anything malformed. Records in the body are
    zero-copy views of ``frame``. Bytes after the body are ignored, as Kafka's brokers ignore
    them (they parse the body and leave the rest of the frame unread); librdkafka's Metadata v12
    request for all topics carries three.
    """
    if len(frame) > frame_bytes_max:
        raise FrameTooLargeError(len(frame), frame_bytes_max)
    r = Reader(frame)
    header, spec = _read_request_header_fast(r) or _read_request_header(r)
    return header, spec.request.decode_prefix(r, header.api_version)


def _read_request_header_fast(r: Reader) -> tuple[RequestHeader, ApiSpec] | None:
    """The header of a well-formed request to an API version replog serves, read with one
    unpack; None (``r`` unread) for anything else, which ``_read_request_header`` reads and
    reports."""
    buf = r._buf
    if len(buf) < _REQUEST_HEADER_PREFIX.size:
        return None
    api_key, api_version, correlation_id, client_id_length = _REQUEST_HEADER_PREFIX.unpack_from(
        buf, 0
    )
    spec = APIS.get(api_key)
    if spec is None or not spec.info.min_version <= api_version <= spec.info.max_version:
        return None
    pos = _REQUEST_HEADER_PREFIX.size
    client_id: str | None = None
    if client_id_length >= 0:
        stop = pos + client_id_length
        if stop > len(buf):
            return None
        try:
            client_id = str(buf[pos:stop], "utf-8")
        except UnicodeDecodeError:
            return None
        pos = stop
    elif client_id_length != -1:
        return None
    if api_version >= spec.info.flexible_from:
        if pos >= len(buf) or buf[pos] != 0:
            return None  # tagged fields in the header: the general reader skips them
        pos += 1
    r._pos = pos
    header = RequestHeader(
        api_key=api_key,
        api_version=api_version,
        correlation_id=correlation_id,
        client_id=client_id,
    )
    return header, spec


def _read_request_header(r: Reader) -> tuple[RequestHeader, ApiSpec]:
    """A request header read field by field: raises for an API or version replog does not
    serve (see ``decode_request``) and for a malformed header."""
    api_key = r.read_int16()
    api_version = r.read_int16()
    correlation_id = r.read_int32()
    spec = APIS.get(api_key)
    if spec is None or not spec.info.supports(api_version):
        error_type: type[UnsupportedRequestError]
        if spec is None:
            error_type, message = UnknownApiKeyError, f"unknown api key {api_key}"
        else:
            error_type = UnsupportedVersionError
            message = (
                f"{spec.info.name} v{api_version} is not supported "
                f"(replog serves v{spec.info.min_version}-v{spec.info.max_version})"
            )
        raise error_type(
            message,
            api_key=api_key,
            api_version=api_version,
            correlation_id=correlation_id,
            client_id=_best_effort_client_id(r),
        )
    client_id = r.read_nullable_string()
    if spec.info.is_flexible(api_version):
        r.skip_tagged_fields()
    header = RequestHeader(
        api_key=api_key,
        api_version=api_version,
        correlation_id=correlation_id,
        client_id=client_id,
    )
    return header, spec


def encode_response_parts(
    correlation_id: int, api_version: int, response: Message
) -> list[bytes | RecordsRef[Any]]:
    """A size-prefixed response frame as bytes chunks and ``RecordsRef`` holes, in order.

    The size prefix and every records length prefix count the holes' ``size_bytes``, so writing
    each chunk and streaming exactly ``ref.size_bytes`` bytes for each ref (``os.sendfile``)
    yields a valid frame.
    """
    api_key = response.API.api_key
    w = Writer()
    try:
        w._buf += _RESPONSE_HEADER_PREFIX.pack(0, correlation_id)
    except struct.error:
        w.write_int32(0)
        w.write_int32(correlation_id)  # raises the codec's EncodeError
    if response_header_version(api_key, api_version) >= 1:
        w.write_empty_tagged_fields()
    response.encode_into(w, api_version)
    return _frame(w.parts(), w.size_bytes - _SIZE_PREFIX_BYTES)


def encode_fetch_response_parts(
    correlation_id: int, api_version: int, response: FetchResponse
) -> list[bytes | RecordsRef[Any]]:
    """``encode_response_parts`` for a Fetch response whose records are ``RecordsRef``s."""
    return encode_response_parts(correlation_id, api_version, response)


def encode_response(correlation_id: int, api_version: int, response: Message) -> bytes:
    """A whole size-prefixed response frame (records must be bytes)."""
    return _join(encode_response_parts(correlation_id, api_version, response))


def decode_response(
    frame: Buffer,
    *,
    api_key: int,
    api_version: int,
    frame_bytes_max: int = DEFAULT_FRAME_BYTES_MAX,
) -> tuple[int, Message]:
    """Decode one response frame (after its size prefix) to a request of ``api_key`` at
    ``api_version``; returns ``(correlation_id, body)``. The caller matches the correlation id."""
    if len(frame) > frame_bytes_max:
        raise FrameTooLargeError(len(frame), frame_bytes_max)
    spec = ALL_APIS.get(api_key)
    if spec is None:
        raise ProtocolError(f"unknown api key {api_key}")
    r = Reader(frame)
    correlation_id = r.read_int32()
    if response_header_version(api_key, api_version) >= 1:
        r.skip_tagged_fields()
    return correlation_id, spec.response.decode_from(r, api_version)


def unsupported_version_response(error: UnsupportedVersionError) -> bytes | None:
    """The frame Kafka answers an unsupported request version with, or ``None`` when Kafka closes
    the connection instead. Only ApiVersions has an answer: a v0 response with error 35 listing
    the ApiVersions versions served (KIP-511), so the client can retry with one of them."""
    if error.api_key != API_VERSIONS.api_key:
        return None
    response = ApiVersionsResponse(
        error_code=ErrorCode.UNSUPPORTED_VERSION,
        api_keys=[
            ApiVersion(
                api_key=API_VERSIONS.api_key,
                min_version=API_VERSIONS.min_version,
                max_version=API_VERSIONS.max_version,
            )
        ],
    )
    return encode_response(error.correlation_id, 0, response)


@attrs.define
class FrameReader:
    """Splits a connection's byte stream into frames (sans-IO: the caller reads the socket).

    Holds at most one partial frame; a size prefix over ``frame_bytes_max`` raises
    ``FrameTooLargeError`` at once, before its body is buffered.
    """

    frame_bytes_max: int = DEFAULT_FRAME_BYTES_MAX
    _buffer: bytearray = attrs.field(factory=bytearray, init=False)

    @property
    def buffered_bytes(self) -> int:
        """Bytes received but not yet returned as a frame."""
        return len(self._buffer)

    def feed(self, data: Buffer) -> list[bytes]:
        """Add received bytes; return every frame (without its size prefix) now complete.

        Each frame is copied once, straight out of ``data`` when nothing is buffered (the common
        case: whole frames per read) and out of the buffer otherwise."""
        buffer = self._buffer
        if not buffer:
            with memoryview(data) as view:
                frames, start = self._split(view)
                if start < len(view):
                    buffer += view[start:]
            return frames
        buffer += data
        with memoryview(buffer) as view:
            frames, start = self._split(view)
        del buffer[:start]
        return frames

    def _split(self, view: memoryview) -> tuple[list[bytes], int]:
        """The complete frames at the start of ``view`` and where the rest begins."""
        frames: list[bytes] = []
        start, end_of_data = 0, len(view)
        limit = self.frame_bytes_max
        while end_of_data - start >= _SIZE_PREFIX_BYTES:
            size_bytes = int.from_bytes(
                view[start : start + _SIZE_PREFIX_BYTES], "big", signed=True
            )
            if size_bytes < 0 or size_bytes > limit:
                raise FrameTooLargeError(size_bytes, limit)
            end = start + _SIZE_PREFIX_BYTES + size_bytes
            if end > end_of_data:
                break
            frames.append(bytes(view[start + _SIZE_PREFIX_BYTES : end]))
            start = end
        return frames, start

    def feed_views(self, data: bytes) -> list[memoryview]:
        """Like ``feed``, without copying: frames wholly inside ``data`` come back as views of
        it (``data`` must be immutable ``bytes``, as a transport's ``data_received`` gets), and
        a frame completed from the buffer is that buffer itself, handed over (a new buffer
        takes its place). Only a frame's partial head and tail are ever copied, into the
        buffer. The views keep ``data`` alive as long as something holds them."""
        frames: list[memoryview] = []
        view = memoryview(data)
        start = 0
        buffer = self._buffer
        if buffer:
            start, frame = self._complete_buffered(view)
            if frame is None:
                return frames
            frames.append(frame)
        limit = self.frame_bytes_max
        end_of_data = len(view)
        while end_of_data - start >= _SIZE_PREFIX_BYTES:
            prefix = view[start : start + _SIZE_PREFIX_BYTES]
            size_bytes = int.from_bytes(prefix, "big", signed=True)
            if size_bytes < 0 or size_bytes > limit:
                raise FrameTooLargeError(size_bytes, limit)
            end = start + _SIZE_PREFIX_BYTES + size_bytes
            if end > end_of_data:
                break
            frames.append(view[start + _SIZE_PREFIX_BYTES : end])
            start = end
        if start < end_of_data:
            self._buffer += view[start:]
        return frames

    def _complete_buffered(self, view: memoryview) -> tuple[int, memoryview | None]:
        """Add the start of ``view`` to the buffered partial frame: (bytes of ``view`` used,
        the completed frame or None when ``view`` ran out first)."""
        buffer = self._buffer
        used = 0
        if len(buffer) < _SIZE_PREFIX_BYTES:
            used = min(_SIZE_PREFIX_BYTES - len(buffer), len(view))
            buffer += view[:used]
            if len(buffer) < _SIZE_PREFIX_BYTES:
                return used, None
        size_bytes = int.from_bytes(buffer[:_SIZE_PREFIX_BYTES], "big", signed=True)
        if size_bytes < 0 or size_bytes > self.frame_bytes_max:
            raise FrameTooLargeError(size_bytes, self.frame_bytes_max)
        missing = _SIZE_PREFIX_BYTES + size_bytes - len(buffer)
        if missing > len(view) - used:
            buffer += view[used:]
            return len(view), None
        buffer += view[used : used + missing]
        self._buffer = bytearray()
        return used + missing, memoryview(buffer)[_SIZE_PREFIX_BYTES:]
