"""A fixed-layout codec for Fetch v12, the version every replog follower (and most clients)
speaks: the replication hot path encodes and decodes one request and one response per fetch
round on each side, and the generic compiled codec spends most of that time walking its field
closures. Both directions of both bodies are read and written here with a handful of
``struct`` calls at fixed offsets; record payloads stay zero-copy (``memoryview`` slices of the
frame when decoding, ``RecordsRef`` holes when encoding).

Byte layout (integers big-endian; ``uvarint`` lengths are count + 1, 0 = null; every struct
ends with its tagged fields: a uvarint count, then per field uvarint tag, uvarint size, bytes):

    FetchRequest v12   replica_id i32, max_wait_ms i32, min_bytes i32, max_bytes i32,
                       isolation_level i8, session_id i32, session_epoch i32,
                       topics [topic string, partitions [partition i32,
                           current_leader_epoch i32, fetch_offset i64,
                           last_fetched_epoch i32, log_start_offset i64,
                           partition_max_bytes i32, tags], tags],
                       forgotten_topics_data [topic string, partitions [i32], tags],
                       rack_id string, tags (0: cluster_id nullable string)
    FetchResponse v12  throttle_time_ms i32, error_code i16, session_id i32,
                       responses [topic string, partitions [partition_index i32,
                           error_code i16, high_watermark i64, last_stable_offset i64,
                           log_start_offset i64,
                           aborted_transactions nullable [producer_id i64,
                               first_offset i64, tags],
                           preferred_read_replica i32, records nullable bytes,
                           tags (0: diverging_epoch {epoch i32, end_offset i64, tags},
                                 1: current_leader {leader_id i32, leader_epoch i32, tags},
                                 2: snapshot_id {end_offset i64, epoch i32, tags})],
                           tags],
                       tags

Same bytes and same values as the generic codec, or nothing: an encoder returns False and a
decoder None for anything off the common shape (a value out of range, a string too long, an
unknown tagged field, a cluster id, a malformed body) and the generic codec, whose errors are
the reference, does the work instead. ``replog.protocol.compiled`` calls these first for the
two message classes at v12; tests/protocol/test_fetch_v12.py checks them against the generic
codec.
"""

from __future__ import annotations

import struct
from typing import Any

from replog.protocol.compiled import register_fast_codec
from replog.protocol.fixed_layout import OffShape as _Off
from replog.protocol.fixed_layout import read_uvarint as _read_uvarint
from replog.protocol.fixed_layout import uvarint as _uvarint
from replog.protocol.messages.fetch import (
    AbortedTransaction,
    EpochEndOffset,
    FetchPartition,
    FetchRequest,
    FetchResponse,
    FetchResponsePartition,
    FetchResponseTopic,
    FetchTopic,
    ForgottenTopic,
    LeaderIdAndEpoch,
    SnapshotId,
)
from replog.protocol.primitives import _STRING_BYTES_MAX, RecordsRef, Writer

__all__ = [
    "decode_fetch_request",
    "decode_fetch_response",
    "encode_fetch_request",
    "encode_fetch_response",
]

VERSION = 12
_REQUEST_HEAD = struct.Struct(">iiiibii")
_REQUEST_PARTITION = struct.Struct(">iiqiqi")
_RESPONSE_HEAD = struct.Struct(">ihi")
_RESPONSE_PARTITION = struct.Struct(">ihqqq")
_I32 = struct.Struct(">i")
_I32_I64 = struct.Struct(">iq")
_I64_I32 = struct.Struct(">qi")
_I32_I32 = struct.Struct(">ii")
_I64_I64 = struct.Struct(">qq")
_NO_TAGS = b"\x00"
#: the size of each known partition tagged field: its struct and its own empty tagged fields
_TAG_BYTES = {0: 4 + 8 + 1, 1: 4 + 4 + 1, 2: 8 + 4 + 1}


def _string(value: str) -> bytes:
    data = value.encode("utf-8")
    if len(data) > _STRING_BYTES_MAX:
        raise _Off
    return _uvarint(len(data) + 1) + data


def _read_string(buf: memoryview, pos: int) -> tuple[str, int]:
    n, pos = _read_uvarint(buf, pos)
    stop = pos + n - 1
    if n == 0 or stop > len(buf):
        raise _Off
    return str(buf[pos:stop], "utf-8"), stop


def _read_count(buf: memoryview, pos: int) -> tuple[int, int]:
    """A non-nullable array's count."""
    n, pos = _read_uvarint(buf, pos)
    if n == 0:
        raise _Off
    return n - 1, pos


def _skip_no_tags(buf: memoryview, pos: int) -> int:
    if buf[pos] != 0:
        raise _Off
    return pos + 1


# ---------------------------------------------------------------------- requests


def encode_fetch_request(w: Writer, request: FetchRequest) -> bool:
    """Append ``request`` at v12 to ``w``; False (nothing written) when the generic codec must."""
    if request.cluster_id is not None:
        return False
    try:
        out = [
            _REQUEST_HEAD.pack(
                request.replica_id,
                request.max_wait_ms,
                request.min_bytes,
                request.max_bytes,
                request.isolation_level,
                request.session_id,
                request.session_epoch,
            ),
            _uvarint(len(request.topics) + 1),
        ]
        pack_partition = _REQUEST_PARTITION.pack
        for topic in request.topics:
            out.append(_string(topic.topic))
            out.append(_uvarint(len(topic.partitions) + 1))
            for p in topic.partitions:
                out.append(
                    pack_partition(
                        p.partition,
                        p.current_leader_epoch,
                        p.fetch_offset,
                        p.last_fetched_epoch,
                        p.log_start_offset,
                        p.partition_max_bytes,
                    )
                )
                out.append(_NO_TAGS)
            out.append(_NO_TAGS)
        out.append(_uvarint(len(request.forgotten_topics_data) + 1))
        for forgotten in request.forgotten_topics_data:
            out.append(_string(forgotten.topic))
            out.append(_uvarint(len(forgotten.partitions) + 1))
            out.extend(_I32.pack(p) for p in forgotten.partitions)
            out.append(_NO_TAGS)
        out.append(_string(request.rack_id))
        out.append(_NO_TAGS)
    except (_Off, struct.error, TypeError, AttributeError, UnicodeError):
        return False
    w._buf += b"".join(out)
    return True


def decode_fetch_request(buf: memoryview, pos: int) -> tuple[FetchRequest, int] | None:
    """A v12 request read from ``buf`` at ``pos``, and the position after it; None when the
    generic codec must read it."""
    try:
        return _decode_request(buf, pos)
    except (_Off, struct.error, IndexError, UnicodeError, ValueError):
        return None


def _decode_request(buf: memoryview, pos: int) -> tuple[FetchRequest, int]:
    head = _REQUEST_HEAD.unpack_from(buf, pos)
    pos += _REQUEST_HEAD.size
    unpack_partition = _REQUEST_PARTITION.unpack_from
    topic_count, pos = _read_count(buf, pos)
    topics = []
    for _ in range(topic_count):
        name, pos = _read_string(buf, pos)
        count, pos = _read_count(buf, pos)
        partitions = []
        for _ in range(count):
            index, leader_epoch, offset, last_epoch, log_start, max_bytes = unpack_partition(
                buf, pos
            )
            pos = _skip_no_tags(buf, pos + 32)
            partitions.append(
                FetchPartition(
                    partition=index,
                    current_leader_epoch=leader_epoch,
                    fetch_offset=offset,
                    last_fetched_epoch=last_epoch,
                    log_start_offset=log_start,
                    partition_max_bytes=max_bytes,
                )
            )
        pos = _skip_no_tags(buf, pos)
        topics.append(FetchTopic(topic=name, partitions=partitions))
    forgotten_count, pos = _read_count(buf, pos)
    forgotten = []
    for _ in range(forgotten_count):
        name, pos = _read_string(buf, pos)
        count, pos = _read_count(buf, pos)
        ids = [_I32.unpack_from(buf, pos + 4 * i)[0] for i in range(count)]
        pos = _skip_no_tags(buf, pos + 4 * count)
        forgotten.append(ForgottenTopic(topic=name, partitions=ids))
    rack_id, pos = _read_string(buf, pos)
    pos = _skip_no_tags(buf, pos)
    replica_id, max_wait_ms, min_bytes, max_bytes, isolation, session_id, session_epoch = head
    request = FetchRequest(
        replica_id=replica_id,
        max_wait_ms=max_wait_ms,
        min_bytes=min_bytes,
        max_bytes=max_bytes,
        isolation_level=isolation,
        session_id=session_id,
        session_epoch=session_epoch,
        topics=topics,
        forgotten_topics_data=forgotten,
        rack_id=rack_id,
    )
    return request, pos


# ---------------------------------------------------------------------- responses


def _partition_tags(p: FetchResponsePartition) -> bytes:
    tags: list[bytes] = []
    if p.diverging_epoch is not None:
        body = _I32_I64.pack(p.diverging_epoch.epoch, p.diverging_epoch.end_offset) + _NO_TAGS
        tags.append(b"\x00" + _uvarint(len(body)) + body)
    if p.current_leader is not None:
        leader = p.current_leader
        body = _I32_I32.pack(leader.leader_id, leader.leader_epoch) + _NO_TAGS
        tags.append(b"\x01" + _uvarint(len(body)) + body)
    if p.snapshot_id is not None:
        body = _I64_I32.pack(p.snapshot_id.end_offset, p.snapshot_id.epoch) + _NO_TAGS
        tags.append(b"\x02" + _uvarint(len(body)) + body)
    if not tags:
        return _NO_TAGS
    return _uvarint(len(tags)) + b"".join(tags)


def encode_fetch_response(w: Writer, response: FetchResponse) -> bool:
    """Append ``response`` at v12 to ``w`` (records that are ``RecordsRef`` become holes);
    False (nothing written) when the generic codec must."""
    try:
        parts = _encode_response(response)
    except (_Off, struct.error, TypeError, AttributeError, UnicodeError):
        return False
    for part in parts:
        if isinstance(part, RecordsRef):
            w.write_records_ref(part, compact=True)
        else:
            w._buf += part
    return True


def _encode_response(response: FetchResponse) -> list[bytes | memoryview | RecordsRef[Any]]:
    """The body as bytes runs, record payloads and ``RecordsRef`` holes (each hole's length
    prefix left to ``Writer.write_records_ref``)."""
    parts: list[bytes | memoryview | RecordsRef[Any]] = []
    out = [
        _RESPONSE_HEAD.pack(response.throttle_time_ms, response.error_code, response.session_id),
        _uvarint(len(response.responses) + 1),
    ]
    pack_partition = _RESPONSE_PARTITION.pack
    for topic in response.responses:
        out.append(_string(topic.topic))
        out.append(_uvarint(len(topic.partitions) + 1))
        for p in topic.partitions:
            out.append(
                pack_partition(
                    p.partition_index,
                    p.error_code,
                    p.high_watermark,
                    p.last_stable_offset,
                    p.log_start_offset,
                )
            )
            aborted = p.aborted_transactions
            if aborted is None:
                out.append(b"\x00")
            else:
                out.append(_uvarint(len(aborted) + 1))
                for txn in aborted:
                    out.append(_I64_I64.pack(txn.producer_id, txn.first_offset) + _NO_TAGS)
            out.append(_I32.pack(p.preferred_read_replica))
            records = p.records
            if records is None:
                out.append(b"\x00")
            elif isinstance(records, RecordsRef):
                if records.size_bytes < 0:
                    raise _Off
                parts.append(b"".join(out))
                parts.append(records)
                out = []
            elif isinstance(records, (bytes, bytearray, memoryview)):
                data = memoryview(records).cast("B")
                out.append(_uvarint(len(data) + 1))
                parts.append(b"".join(out))
                parts.append(data)  # copied once, into the writer
                out = []
            else:
                raise _Off
            out.append(_partition_tags(p))
        out.append(_NO_TAGS)
    out.append(_NO_TAGS)
    parts.append(b"".join(out))
    return parts


def decode_fetch_response(buf: memoryview, pos: int) -> tuple[FetchResponse, int] | None:
    """A v12 response read from ``buf`` at ``pos`` (records as zero-copy slices of ``buf``),
    and the position after it; None when the generic codec must read it."""
    try:
        return _decode_response(buf, pos)
    except (_Off, struct.error, IndexError, UnicodeError, ValueError):
        return None


def _decode_response(buf: memoryview, pos: int) -> tuple[FetchResponse, int]:
    throttle_ms, error_code, session_id = _RESPONSE_HEAD.unpack_from(buf, pos)
    pos += _RESPONSE_HEAD.size
    topic_count, pos = _read_count(buf, pos)
    topics = []
    for _ in range(topic_count):
        name, pos = _read_string(buf, pos)
        count, pos = _read_count(buf, pos)
        partitions = []
        for _ in range(count):
            partition, pos = _decode_response_partition(buf, pos)
            partitions.append(partition)
        pos = _skip_no_tags(buf, pos)
        topics.append(FetchResponseTopic(topic=name, partitions=partitions))
    pos = _skip_no_tags(buf, pos)
    response = FetchResponse(
        throttle_time_ms=throttle_ms,
        error_code=error_code,
        session_id=session_id,
        responses=topics,
    )
    return response, pos


def _decode_response_partition(buf: memoryview, pos: int) -> tuple[FetchResponsePartition, int]:
    index, error_code, high_watermark, last_stable, log_start = _RESPONSE_PARTITION.unpack_from(
        buf, pos
    )
    pos += _RESPONSE_PARTITION.size
    n, pos = _read_uvarint(buf, pos)
    aborted: list[AbortedTransaction] | None = None
    if n:
        aborted = []
        for _ in range(n - 1):
            producer_id, first_offset = _I64_I64.unpack_from(buf, pos)
            pos = _skip_no_tags(buf, pos + 16)
            aborted.append(AbortedTransaction(producer_id=producer_id, first_offset=first_offset))
    (preferred,) = _I32.unpack_from(buf, pos)
    n, pos = _read_uvarint(buf, pos + 4)
    records = None
    if n:
        stop = pos + n - 1
        if stop > len(buf):
            raise _Off
        records, pos = buf[pos:stop], stop
    tags, pos = _read_uvarint(buf, pos)
    found: dict[int, Any] = {}
    last_tag = -1
    for _ in range(tags):
        tag, pos = _read_uvarint(buf, pos)
        size, pos = _read_uvarint(buf, pos)
        if tag <= last_tag or size != _TAG_BYTES.get(tag):
            raise _Off  # out of order, repeated, unknown, or not the shape below
        last_tag = tag
        if tag == 0:
            epoch, end_offset = _I32_I64.unpack_from(buf, pos)
            found[0] = EpochEndOffset(epoch=epoch, end_offset=end_offset)
        elif tag == 1:
            leader_id, leader_epoch = _I32_I32.unpack_from(buf, pos)
            found[1] = LeaderIdAndEpoch(leader_id=leader_id, leader_epoch=leader_epoch)
        elif tag == 2:
            end_offset, epoch = _I64_I32.unpack_from(buf, pos)
            found[2] = SnapshotId(end_offset=end_offset, epoch=epoch)
        else:
            raise _Off
        pos = _skip_no_tags(buf, pos + size - 1)
    partition = FetchResponsePartition(
        partition_index=index,
        error_code=error_code,
        high_watermark=high_watermark,
        last_stable_offset=last_stable,
        log_start_offset=log_start,
        diverging_epoch=found.get(0),
        current_leader=found.get(1),
        snapshot_id=found.get(2),
        aborted_transactions=aborted,
        preferred_read_replica=preferred,
        records=records,
    )
    return partition, pos


register_fast_codec(FetchRequest, VERSION, encode_fetch_request, decode_fetch_request)
register_fast_codec(FetchResponse, VERSION, encode_fetch_response, decode_fetch_response)
