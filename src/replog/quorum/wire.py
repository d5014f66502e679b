"""The built-in quorum's wire format: one TCP port per node, Kafka framing, three kinds of
connection.

Every frame is Kafka's: ``size int32`` (the bytes that follow), then the body
(``replog.protocol.framing.FrameReader`` splits a stream into frames). Integers are
big-endian. The first frame of a connection says who opens it::

    hello            magic "RLQ1"  kind int8 (0 peer, 1 client)  node_id int32 (-1: a client)
    Kafka request    api_key int16  api_version int16  correlation_id int32 ... (any first
                     frame that does not start with "RLQ1": a Kafka-protocol connection,
                     ``quorum/kafka_port.py``; no hello, and every frame is a Kafka request)

A **peer** connection (voter to voter) then carries Raft messages one way, from the opener
(``replog.raft.messages``; answers travel on the answerer's own connection)::

    message          type int8, then its fields in the order of _SCHEMAS below:
                     i32 / i64 / i16 (error code) / bool (int8 0|1) / bytes (int32 length,
                     bytes) / i32s (int32 count, int32 each) / offset_epoch (int8 present,
                     then epoch int32, offset int64) / snapshot_id (end_offset int64, epoch
                     int32) / snapshot_id? (int8 present, then a snapshot_id)

A **client** connection carries coordinator calls, many in flight, answered in any order::

    request          correlation_id int32  timeout_ms int32  request (UTF-8 JSON, raft_codec)
    reply            correlation_id int32  status int8  body (UTF-8 JSON)
                     status 0 OK: the value; 1 ERROR: the error (raft_codec.encode_error);
                     2 NOT_LEADER: {"leader": "host:port" or null} (not executed: retry
                     there); 3 UNKNOWN: a string (a write's outcome is unknown)

A **Kafka** connection carries BrokerRegistration, BrokerHeartbeat and ApiVersions requests
and their responses, byte for byte as Kafka lays them out (``quorum/kafka_port.py``): a broker's
registration and session keep-alive travel as Kafka's own RPCs.

The other calls travel as JSON values rather than Kafka RPCs because the contract has
operations no Kafka RPC has (admin queues, the change feed, the contract's controller role);
they are the replog-specific request of this port.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import attrs

from replog.errors import ErrorCode, ProtocolError
from replog.protocol.primitives import Reader, Writer
from replog.quorum import codec as raft_codec
from replog.raft.messages import (
    BeginQuorumEpochRequest,
    BeginQuorumEpochResponse,
    EndQuorumEpochRequest,
    EndQuorumEpochResponse,
    FetchSnapshotRequest,
    FetchSnapshotResponse,
    Message,
    OffsetAndEpoch,
    RaftFetchRequest,
    RaftFetchResponse,
    RaftSnapshotId,
    VoteRequest,
    VoteResponse,
)

__all__ = [
    "CLIENT",
    "MAGIC",
    "PEER",
    "ReplyFrame",
    "RequestFrame",
    "Status",
    "decode_hello",
    "decode_message",
    "decode_reply",
    "decode_request",
    "encode_hello",
    "encode_message",
    "encode_reply",
    "encode_request",
    "frame",
]

MAGIC = b"RLQ1"
PEER = 0
CLIENT = 1


def frame(body: bytes) -> bytes:
    """``body`` with its Kafka size prefix."""
    return len(body).to_bytes(4, "big", signed=True) + body


# ---------------------------------------------------------------------------- hello


def encode_hello(kind: int, node_id: int) -> bytes:
    """The first frame of a connection (framed)."""
    w = Writer()
    w.write_raw(MAGIC)
    w.write_int8(kind)
    w.write_int32(node_id)
    return frame(w.to_bytes())


def decode_hello(body: bytes) -> tuple[int, int]:
    """(kind, node_id) of a hello frame's body; ``ProtocolError`` if it is not one."""
    r = Reader(body)
    if bytes(r.read_raw(4, "magic")) != MAGIC:
        raise ProtocolError("not a replog quorum connection (bad magic)")
    kind, node_id = r.read_int8(), r.read_int32()
    r.expect_end("hello")
    if kind not in (PEER, CLIENT) or (kind == PEER and node_id < 0):
        raise ProtocolError(f"bad hello: kind {kind}, node {node_id}")
    return kind, node_id


# ---------------------------------------------------------------------------- raft messages

_SCHEMAS: tuple[tuple[type[Any], tuple[tuple[str, str], ...]], ...] = (
    (
        VoteRequest,
        (
            ("epoch", "i32"),
            ("candidate_id", "i32"),
            ("last_epoch", "i32"),
            ("end_offset", "i64"),
            ("pre_vote", "bool"),
        ),
    ),
    (
        VoteResponse,
        (
            ("epoch", "i32"),
            ("leader_id", "i32"),
            ("vote_granted", "bool"),
            ("pre_vote", "bool"),
            ("error", "error"),
        ),
    ),
    (BeginQuorumEpochRequest, (("epoch", "i32"), ("leader_id", "i32"))),
    (BeginQuorumEpochResponse, (("epoch", "i32"), ("leader_id", "i32"), ("error", "error"))),
    (
        EndQuorumEpochRequest,
        (("epoch", "i32"), ("leader_id", "i32"), ("preferred_successors", "i32s")),
    ),
    (EndQuorumEpochResponse, (("epoch", "i32"), ("leader_id", "i32"), ("error", "error"))),
    (
        RaftFetchRequest,
        (
            ("epoch", "i32"),
            ("replica_id", "i32"),
            ("fetch_offset", "i64"),
            ("last_fetched_epoch", "i32"),
            ("max_bytes", "i32"),
        ),
    ),
    (
        RaftFetchResponse,
        (
            ("epoch", "i32"),
            ("leader_id", "i32"),
            ("error", "error"),
            ("fetch_offset", "i64"),
            ("last_fetched_epoch", "i32"),
            ("high_watermark", "i64"),
            ("records", "bytes"),
            ("diverging", "offset_epoch?"),
            ("snapshot_id", "snapshot_id?"),
        ),
    ),
    (
        FetchSnapshotRequest,
        (
            ("epoch", "i32"),
            ("replica_id", "i32"),
            ("snapshot_id", "snapshot_id"),
            ("position", "i64"),
            ("max_bytes", "i32"),
        ),
    ),
    (
        FetchSnapshotResponse,
        (
            ("epoch", "i32"),
            ("leader_id", "i32"),
            ("error", "error"),
            ("snapshot_id", "snapshot_id"),
            ("position", "i64"),
            ("size_bytes", "i64"),
            ("data", "bytes"),
        ),
    ),
)
_TYPE_IDS = {cls: i for i, (cls, _) in enumerate(_SCHEMAS)}


def _write_snapshot_id(w: Writer, value: RaftSnapshotId) -> None:
    w.write_int64(value.end_offset)
    w.write_int32(value.epoch)


def _write_field(w: Writer, kind: str, value: Any) -> None:
    if kind == "i32":
        w.write_int32(value)
    elif kind == "i64":
        w.write_int64(value)
    elif kind == "bool":
        w.write_bool(value)
    elif kind == "error":
        w.write_int16(int(value))
    elif kind == "bytes":
        w.write_bytes(value)
    elif kind == "i32s":
        w.write_array_length(len(value))
        for item in value:
            w.write_int32(item)
    elif kind == "offset_epoch?":
        w.write_int8(0 if value is None else 1)
        if value is not None:
            w.write_int32(value.epoch)
            w.write_int64(value.offset)
    elif kind == "snapshot_id":
        _write_snapshot_id(w, value)
    elif kind == "snapshot_id?":
        w.write_int8(0 if value is None else 1)
        if value is not None:
            _write_snapshot_id(w, value)
    else:  # pragma: no cover - the schema table is fixed
        raise ValueError(f"unknown field kind {kind}")


def _read_snapshot_id(r: Reader) -> RaftSnapshotId:
    end_offset = r.read_int64()
    return RaftSnapshotId(end_offset, r.read_int32())


def _read_present(r: Reader) -> bool:
    flag = r.read_int8()
    if flag not in (0, 1):
        raise ProtocolError(f"bad presence flag {flag}")
    return flag == 1


def _read_error(r: Reader) -> ErrorCode:
    code = r.read_int16()
    try:
        return ErrorCode(code)
    except ValueError:
        raise ProtocolError(f"unknown error code {code}") from None


def _read_i32s(r: Reader) -> tuple[int, ...]:
    return tuple(r.read_array(r.read_int32))


def _read_offset_epoch(r: Reader) -> OffsetAndEpoch | None:
    if not _read_present(r):
        return None
    epoch = r.read_int32()
    return OffsetAndEpoch(epoch, r.read_int64())


def _read_optional_snapshot_id(r: Reader) -> RaftSnapshotId | None:
    return _read_snapshot_id(r) if _read_present(r) else None


_READERS: dict[str, Callable[[Reader], Any]] = {
    "i32": Reader.read_int32,
    "i64": Reader.read_int64,
    "bool": Reader.read_bool,
    "error": _read_error,
    "bytes": lambda r: bytes(r.read_bytes()),
    "i32s": _read_i32s,
    "offset_epoch?": _read_offset_epoch,
    "snapshot_id": _read_snapshot_id,
    "snapshot_id?": _read_optional_snapshot_id,
}


def encode_message(message: Message) -> bytes:
    """A Raft message as a frame (with its size prefix)."""
    type_id = _TYPE_IDS[type(message)]
    w = Writer()
    w.write_int8(type_id)
    for name, kind in _SCHEMAS[type_id][1]:
        _write_field(w, kind, getattr(message, name))
    return frame(w.to_bytes())


def decode_message(body: bytes) -> Message:
    """The Raft message in a frame's body; ``ProtocolError`` if malformed."""
    r = Reader(body)
    type_id = r.read_int8()
    if not 0 <= type_id < len(_SCHEMAS):
        raise ProtocolError(f"unknown quorum message type {type_id}")
    cls, schema = _SCHEMAS[type_id]
    fields = {name: _READERS[kind](r) for name, kind in schema}
    r.expect_end(cls.__name__)
    message: Message = cls(**fields)
    return message


# ---------------------------------------------------------------------------- client calls


class Status:
    """A reply's status byte."""

    OK = 0
    ERROR = 1
    NOT_LEADER = 2
    UNKNOWN = 3


@attrs.frozen
class RequestFrame:
    """A decoded client request."""

    correlation_id: int
    timeout_ms: int
    request: Any


@attrs.frozen
class ReplyFrame:
    """A decoded reply: ``status`` and its body (a value, an error, a leader address or a
    reason)."""

    correlation_id: int
    status: int
    body: Any


def encode_request(correlation_id: int, timeout_ms: int, request: Any) -> bytes:
    """A client request frame."""
    w = Writer()
    w.write_int32(correlation_id)
    w.write_int32(timeout_ms)
    w.write_raw(raft_codec.dumps(request))
    return frame(w.to_bytes())


def decode_request(body: bytes) -> RequestFrame:
    """A client request frame's body; ``ProtocolError`` if malformed."""
    r = Reader(body)
    correlation_id, timeout_ms = r.read_int32(), r.read_int32()
    request = raft_codec.loads(bytes(r.read_raw(r.remaining)))
    return RequestFrame(correlation_id, timeout_ms, request)


def encode_reply(correlation_id: int, status: int, body: Any) -> bytes:
    """A reply frame: ``body`` is the value (OK), the error (ERROR), the leader's address or
    None (NOT_LEADER), or a reason (UNKNOWN)."""
    if status == Status.OK:
        payload = raft_codec.encode(body)
    elif status == Status.ERROR:
        payload = raft_codec.encode_error(body)
    elif status == Status.NOT_LEADER:
        payload = {"leader": body}
    else:
        payload = str(body)
    w = Writer()
    w.write_int32(correlation_id)
    w.write_int8(status)
    w.write_raw(json.dumps(payload, separators=(",", ":")).encode())
    return frame(w.to_bytes())


def decode_reply(body: bytes) -> ReplyFrame:
    """A reply frame's body, with the value or error rebuilt; ``ProtocolError`` if
    malformed."""
    r = Reader(body)
    correlation_id, status = r.read_int32(), r.read_int8()
    try:
        payload = json.loads(bytes(r.read_raw(r.remaining)))
    except ValueError as exc:
        raise ProtocolError(f"reply body is not JSON: {exc}") from exc
    if status == Status.OK:
        value: Any = raft_codec.decode(payload)
    elif status == Status.ERROR:
        value = raft_codec.decode_error(payload)
    elif status == Status.NOT_LEADER:
        if not isinstance(payload, dict) or not isinstance(payload.get("leader"), str | None):
            raise ProtocolError(f"bad redirect {payload!r}")
        value = payload["leader"]
    elif status == Status.UNKNOWN:
        value = str(payload)
    else:
        raise ProtocolError(f"unknown reply status {status}")
    return ReplyFrame(correlation_id, status, value)
