"""The JSON encoding of the built-in quorum: metadata-log commands, snapshot records, queries,
their results and the errors an operation raises.

It extends ``replog.coord.codec`` (the one encoding of the coordination values) with what the
quorum also sends: mappings, the contract's result values (``MetadataSnapshot``,
``ChangeBatch``, ``CasResult``), the classes of ``raft_commands`` and errors:

- an attrs value is ``{"@": "<class name>", <field>: <value>, ...}``, an enum
  ``{"@e": "<class name>", "v": <value>}`` (both as in ``codec``);
- a mapping is ``{"@m": [[key, value], ...]}`` (keys may be tuples, such as a partition's
  ``(topic, partition)``);
- an error is ``{"@x": "<class name>", "a": [<constructor arguments>]}``, from a closed table
  of the errors an operation may raise (``encode_error`` / ``decode_error``).

Decoding turns lists back into tuples and rebuilds classes from closed tables only, so a record
or a peer can never name an arbitrary class.
"""

from __future__ import annotations

import enum
import json
from collections.abc import Callable, Mapping
from typing import Any

import attrs

from replog.coord import codec
from replog.coord.errors import (
    AdminQueueFullError,
    BrokerIdInUseError,
    CoordinatorUnavailableError,
    FencedControllerError,
    InvalidPartitionStateError,
    InvalidReplicaAssignmentError,
    MustResyncError,
    SessionExpiredError,
    TopicExistsError,
    UnknownTopicError,
)
from replog.errors import InvalidTopicError, ProtocolError, RecordBatchTooLargeError
from replog.metadata import types as t
from replog.quorum import commands as rc

__all__ = [
    "CLASSES",
    "ENUMS",
    "decode",
    "decode_error",
    "dumps",
    "encode",
    "encode_error",
    "loads",
]

CLASSES: dict[str, type[Any]] = {
    **codec.CLASSES,
    **{
        cls.__name__: cls
        for cls in (
            t.MetadataSnapshot,
            t.ChangeBatch,
            t.CasResult,
            *rc.COMMANDS,
            *rc.QUERIES,
            rc.SnapshotMeta,
            rc.SnapshotBroker,
            rc.SnapshotBrokerConfigs,
            rc.SnapshotTopic,
            rc.SnapshotAdmin,
        )
    },
}
"""The attrs classes a quorum message or record may hold, by name."""

ENUMS: dict[str, type[enum.Enum]] = {
    **codec.ENUMS,
    t.CasStatus.__name__: t.CasStatus,
    t.SessionState.__name__: t.SessionState,
}
"""The enums a quorum message or record may hold, by name."""


def encode(value: Any) -> Any:
    """A JSON-ready form of ``value``."""
    if isinstance(value, enum.Enum):
        return {"@e": type(value).__name__, "v": value.value}
    if attrs.has(type(value)):
        out: dict[str, Any] = {"@": type(value).__name__}
        for field in attrs.fields(type(value)):
            out[field.name] = encode(getattr(value, field.name))
        return out
    if isinstance(value, Mapping):
        return {"@m": [[encode(k), encode(v)] for k, v in value.items()]}
    if isinstance(value, (tuple, list)):
        return [encode(v) for v in value]
    if value is None or isinstance(value, (bool, int, str)):
        return value
    raise TypeError(f"cannot encode {type(value).__name__} for the quorum")


def decode(data: Any) -> Any:
    """The value ``encode`` made ``data`` from; ``ProtocolError`` for anything else."""
    try:
        return _decode(data)
    except (KeyError, TypeError, ValueError) as exc:
        raise ProtocolError(f"not a quorum value: {exc}") from exc


def _decode(data: Any) -> Any:
    if isinstance(data, list):
        return tuple(_decode(v) for v in data)
    if isinstance(data, dict):
        if "@e" in data:
            return ENUMS[data["@e"]](data["v"])
        if "@m" in data:
            return {_decode(k): _decode(v) for k, v in data["@m"]}
        cls = CLASSES[data["@"]]
        return cls(**{k: _decode(v) for k, v in data.items() if k != "@"})
    return data


def dumps(value: Any) -> bytes:
    """``encode`` as compact UTF-8 JSON."""
    return json.dumps(encode(value), separators=(",", ":")).encode()


def loads(data: bytes | str) -> Any:
    """``decode`` JSON; ``ProtocolError`` if it is not a quorum value."""
    try:
        parsed = json.loads(data)
    except ValueError as exc:
        raise ProtocolError(f"not JSON: {exc}") from exc
    return decode(parsed)


# ---------------------------------------------------------------------------- errors

_Args = Callable[[Any], list[Any]]


def _message(e: BaseException) -> list[Any]:
    return [str(e)]


_ERRORS: dict[str, tuple[type[BaseException], _Args]] = {
    cls.__name__: (cls, args)
    for cls, args in (
        (
            SessionExpiredError,
            lambda e: [e.broker_id, e.incarnation_epoch, e.current_incarnation_epoch],
        ),
        (BrokerIdInUseError, lambda e: [e.broker_id, e.holder_incarnation_epoch]),
        (FencedControllerError, lambda e: [e.controller_epoch, e.active_controller_epoch]),
        (TopicExistsError, lambda e: [e.topic, e.existing]),
        (UnknownTopicError, lambda e: [e.topic, e.partition]),
        (MustResyncError, lambda e: [e.requested_seq, e.oldest_seq]),
        (AdminQueueFullError, lambda e: [e.target, e.limit]),
        (RecordBatchTooLargeError, lambda e: [e.size_bytes, e.limit_bytes]),
        (InvalidPartitionStateError, _message),
        (InvalidReplicaAssignmentError, _message),
        (InvalidTopicError, _message),
        (CoordinatorUnavailableError, _message),
        (ValueError, _message),
    )
}


def encode_error(error: BaseException) -> Any:
    """The JSON-ready form of an error an operation raised (the first class of the table it
    is an instance of, so subclasses travel as their nearest known class)."""
    for name, (cls, args) in _ERRORS.items():
        if type(error) is cls:
            return {"@x": name, "a": [encode(a) for a in args(error)]}
    for name, (cls, args) in _ERRORS.items():
        if args is _message and isinstance(error, cls):
            return {"@x": name, "a": [str(error)]}
    raise TypeError(f"cannot encode error {type(error).__name__}: {error}")


def decode_error(data: Any) -> BaseException:
    """The error ``encode_error`` made ``data`` from."""
    try:
        cls, _ = _ERRORS[data["@x"]]
        return cls(*(decode(a) for a in data["a"]))
    except (KeyError, TypeError, ValueError) as exc:
        raise ProtocolError(f"not a quorum error: {exc}") from exc
