"""A fixed-layout codec for Produce v3-v9, the request every producer sends and its answer:
a broker decodes one request and encodes one response per produce, and a client the other two,
and the generic compiled codec spends most of that time walking its field closures. Here each
body is read and written with a few ``struct`` calls; record batches stay zero-copy when read
(``memoryview`` slices of the frame, as the generic codec gives them).

Byte layout (integers big-endian). Up to v8 strings carry an int16 length (-1: null), bytes an
int32 length (-1: null) and arrays an int32 count; v9 is flexible: lengths and counts are
uvarints of value + 1 (0: null) and every struct ends with its tagged fields (a uvarint count,
0 here):

    ProduceRequest v3+    transactional_id nullable string, acks i16, timeout_ms i32,
                          topic_data [name string,
                                      partition_data [index i32, records nullable bytes]]
    ProduceResponse v3+   responses [name string,
                                     partition_responses [index i32, error_code i16,
                                         base_offset i64, log_append_time_ms i64,
                                         log_start_offset i64 (v5+),
                                         record_errors [...] (v8+), error_message (v8+)]],
                          throttle_time_ms i32

Same bytes and same values as the generic codec, or nothing: an encoder returns False and a
decoder None for anything off the common shape -- record errors or an error message in a
response, a tagged field, a value out of range, a malformed body -- and the generic codec,
whose errors are the reference, does the work instead. ``replog.protocol.compiled`` calls these
first for the two message classes at v3-v9; tests/protocol/test_produce_fast.py checks them
against the generic codec. (The same approach as ``replog.protocol.fetch_v12``.)
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import Any

from replog.protocol.compiled import register_fast_codec
from replog.protocol.fixed_layout import OffShape as _Off
from replog.protocol.fixed_layout import read_uvarint as _read_uvarint
from replog.protocol.fixed_layout import uvarint as _uvarint
from replog.protocol.messages.produce import (
    PRODUCE,
    PartitionProduceData,
    PartitionProduceResponse,
    ProduceRequest,
    ProduceResponse,
    TopicProduceData,
    TopicProduceResponse,
)
from replog.protocol.primitives import _STRING_BYTES_MAX, Writer

__all__ = ["decoder", "encoder"]

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I16_I32 = struct.Struct(">hi")
_I32_I16_Q_Q = struct.Struct(">ihqq")
_I32_I16_Q_Q_Q = struct.Struct(">ihqqq")
_NULL16 = _I16.pack(-1)
_NULL32 = _I32.pack(-1)
_EMPTY32 = _I32.pack(0)


_DECLINE = (_Off, struct.error, TypeError, AttributeError, UnicodeError, IndexError, ValueError)


class _Layout:
    """How one version writes and reads lengths: classic (v3-v8) or flexible (v9)."""

    def __init__(self, flexible: bool) -> None:
        self.flexible = flexible
        self.tags = b"\x00" if flexible else b""

    # -------------------------------------------------------------- writing

    def string(self, value: str | None, nullable: bool = False) -> bytes:
        if value is None:
            if not nullable:
                raise _Off  # the generic codec says why
            return b"\x00" if self.flexible else _NULL16
        data = value.encode("utf-8")
        if len(data) > _STRING_BYTES_MAX:
            raise _Off
        if self.flexible:
            return _uvarint(len(data) + 1) + data
        return _I16.pack(len(data)) + data

    def count(self, n: int) -> bytes:
        return _uvarint(n + 1) if self.flexible else _I32.pack(n)

    def bytes_length(self, n: int) -> bytes:
        return _uvarint(n + 1) if self.flexible else _I32.pack(n)

    # -------------------------------------------------------------- reading

    def read_length(self, buf: memoryview, pos: int, wide: bool) -> tuple[int, int]:
        """A length or count (-1: null) and the position after it."""
        if self.flexible:
            n, pos = _read_uvarint(buf, pos)
            return n - 1, pos
        if wide:
            return _I32.unpack_from(buf, pos)[0], pos + 4
        return _I16.unpack_from(buf, pos)[0], pos + 2

    def read_string(self, buf: memoryview, pos: int, nullable: bool) -> tuple[str | None, int]:
        n, pos = self.read_length(buf, pos, False)
        if n < 0:
            if n == -1 and nullable:
                return None, pos
            raise _Off
        stop = pos + n
        if stop > len(buf):
            raise _Off
        return str(buf[pos:stop], "utf-8"), stop

    def read_count(self, buf: memoryview, pos: int) -> tuple[int, int]:
        n, pos = self.read_length(buf, pos, True)
        if n < 0 or n > len(buf) - pos:  # null, or more items than bytes left
            raise _Off
        return n, pos

    def skip_tags(self, buf: memoryview, pos: int) -> int:
        if not self.flexible:
            return pos
        if buf[pos] != 0:
            raise _Off
        return pos + 1


_LAYOUTS = {v: _Layout(PRODUCE.is_flexible(v)) for v in range(3, PRODUCE.max_version + 1)}


# ---------------------------------------------------------------------- requests


def _encode_request(w: Writer, request: ProduceRequest, layout: _Layout) -> bool:
    try:
        out: list[bytes | memoryview] = [
            layout.string(request.transactional_id, nullable=True),
            _I16_I32.pack(request.acks, request.timeout_ms),
            layout.count(len(request.topic_data)),
        ]
        for topic in request.topic_data:
            out.append(layout.string(topic.name))
            out.append(layout.count(len(topic.partition_data)))
            for p in topic.partition_data:
                out.append(_I32.pack(p.index))
                records = p.records
                if records is None:
                    out.append(b"\x00" if layout.flexible else _NULL32)
                elif isinstance(records, (bytes, bytearray, memoryview)):
                    data = memoryview(records).cast("B")
                    out.append(layout.bytes_length(len(data)))
                    out.append(data)
                else:
                    raise _Off  # a RecordsRef: the generic codec leaves the hole
                out.append(layout.tags)
            out.append(layout.tags)
        out.append(layout.tags)
    except _DECLINE:
        return False
    w._buf += b"".join(out)
    return True


def _decode_request(buf: memoryview, pos: int, layout: _Layout) -> tuple[ProduceRequest, int]:
    transactional_id, pos = layout.read_string(buf, pos, True)
    acks, timeout_ms = _I16_I32.unpack_from(buf, pos)
    pos += 6
    topic_count, pos = layout.read_count(buf, pos)
    topics = []
    for _ in range(topic_count):
        name, pos = layout.read_string(buf, pos, False)
        count, pos = layout.read_count(buf, pos)
        partitions = []
        for _ in range(count):
            (index,) = _I32.unpack_from(buf, pos)
            n, pos = layout.read_length(buf, pos + 4, True)
            records: memoryview | None = None
            if n >= 0:
                stop = pos + n
                if stop > len(buf):
                    raise _Off
                records, pos = buf[pos:stop], stop
            elif n != -1:
                raise _Off
            pos = layout.skip_tags(buf, pos)
            partitions.append(PartitionProduceData(index=index, records=records))
        pos = layout.skip_tags(buf, pos)
        topics.append(TopicProduceData(name=name, partition_data=partitions))  # type: ignore[arg-type]
    pos = layout.skip_tags(buf, pos)
    request = ProduceRequest(
        transactional_id=transactional_id, acks=acks, timeout_ms=timeout_ms, topic_data=topics
    )
    return request, pos


# ---------------------------------------------------------------------- responses


def _encode_response(w: Writer, response: ProduceResponse, layout: _Layout, version: int) -> bool:
    try:
        with_log_start = version >= 5
        with_errors = version >= 8
        pack = _I32_I16_Q_Q_Q.pack if with_log_start else _I32_I16_Q_Q.pack
        out = [layout.count(len(response.responses))]
        for topic in response.responses:
            out.append(layout.string(topic.name))
            out.append(layout.count(len(topic.partition_responses)))
            for p in topic.partition_responses:
                if p.record_errors or p.error_message is not None:
                    raise _Off
                if with_log_start:
                    out.append(
                        pack(
                            p.index,
                            p.error_code,
                            p.base_offset,
                            p.log_append_time_ms,
                            p.log_start_offset,
                        )
                    )
                else:
                    out.append(pack(p.index, p.error_code, p.base_offset, p.log_append_time_ms))
                if with_errors:  # no record errors, no message
                    out.append(b"\x01\x00" if layout.flexible else _EMPTY32 + _NULL16)
                out.append(layout.tags)
            out.append(layout.tags)
        out.append(_I32.pack(response.throttle_time_ms))
        out.append(layout.tags)
    except _DECLINE:
        return False
    w._buf += b"".join(out)
    return True


def _decode_response(
    buf: memoryview, pos: int, layout: _Layout, version: int
) -> tuple[ProduceResponse, int]:
    with_log_start = version >= 5
    with_errors = version >= 8
    unpack = _I32_I16_Q_Q_Q.unpack_from if with_log_start else _I32_I16_Q_Q.unpack_from
    size = _I32_I16_Q_Q_Q.size if with_log_start else _I32_I16_Q_Q.size
    topic_count, pos = layout.read_count(buf, pos)
    topics = []
    for _ in range(topic_count):
        name, pos = layout.read_string(buf, pos, False)
        count, pos = layout.read_count(buf, pos)
        partitions = []
        for _ in range(count):
            fields = unpack(buf, pos)
            pos += size
            if with_errors:
                errors, pos = layout.read_length(buf, pos, True)
                message, pos = layout.read_length(buf, pos, False)
                if errors != 0 or message != -1:
                    raise _Off  # record errors or a message: the generic codec reads them
            pos = layout.skip_tags(buf, pos)
            partitions.append(
                PartitionProduceResponse(
                    index=fields[0],
                    error_code=fields[1],
                    base_offset=fields[2],
                    log_append_time_ms=fields[3],
                    log_start_offset=fields[4] if with_log_start else -1,
                )
            )
        pos = layout.skip_tags(buf, pos)
        topics.append(TopicProduceResponse(name=name, partition_responses=partitions))  # type: ignore[arg-type]
    (throttle_ms,) = _I32.unpack_from(buf, pos)
    pos = layout.skip_tags(buf, pos + 4)
    return ProduceResponse(responses=topics, throttle_time_ms=throttle_ms), pos


# ---------------------------------------------------------------------- registration

_Encoder = Callable[[Writer, Any], bool]
_Decoder = Callable[[memoryview, int], "tuple[Any, int] | None"]


def encoder(cls: type[ProduceRequest | ProduceResponse], version: int) -> _Encoder:
    """The fast encoder of ``cls`` at ``version`` (see the module docstring)."""
    layout = _LAYOUTS[version]
    if cls is ProduceRequest:
        return lambda w, message: _encode_request(w, message, layout)
    return lambda w, message: _encode_response(w, message, layout, version)


def decoder(cls: type[ProduceRequest | ProduceResponse], version: int) -> _Decoder:
    """The fast decoder of ``cls`` at ``version``: None when the generic codec must read it."""
    layout = _LAYOUTS[version]

    def decode(buf: memoryview, pos: int) -> tuple[Any, int] | None:
        try:
            if cls is ProduceRequest:
                return _decode_request(buf, pos, layout)
            return _decode_response(buf, pos, layout, version)
        except _DECLINE:
            return None

    return decode


for _version in _LAYOUTS:
    for _cls in (ProduceRequest, ProduceResponse):
        register_fast_codec(_cls, _version, encoder(_cls, _version), decoder(_cls, _version))
