"""JSON encoding of the coordination values the etcd backend stores (brokers, topics, partition
states, controller, admin requests, feed records).

An attrs value becomes ``{"@": "<class name>", <field>: <encoded value>, ...}``, an enum
``{"@e": "<class name>", "v": <value>}``, a tuple a list; everything else is a JSON scalar.
Decoding turns every list back into a tuple (all sequences in these values are tuples) and
rebuilds classes by name from a closed table, so a stored value can never name an arbitrary
class.
"""

from __future__ import annotations

import enum
import json
from typing import Any

import attrs

from replog.coord import types as t
from replog.errors import ErrorCode

__all__ = ["decode", "dumps", "encode", "loads"]

_CLASSES: dict[str, type[Any]] = {
    cls.__name__: cls
    for cls in (
        t.BrokerInfo,
        t.TopicAssignment,
        t.PartitionState,
        t.ControllerInfo,
        t.CreateTopic,
        t.DeleteTopic,
        t.AddPartitions,
        t.ReassignPartition,
        t.PreferredElection,
        t.StartReplica,
        t.CloseReplica,
        t.AlterPartition,
        t.AdminRequest,
        t.BrokerChanged,
        t.TopicChanged,
        t.PartitionChanged,
        t.ControllerChanged,
        t.AdminRequestChanged,
    )
}
_ENUMS: dict[str, type[enum.Enum]] = {
    cls.__name__: cls
    for cls in (
        t.LeaderRecoveryState,
        t.BrokerChangeReason,
        t.TopicChangeReason,
        t.AdminRequestChangeReason,
        ErrorCode,
    )
}


def encode(value: Any) -> Any:
    """A JSON-ready form of ``value``."""
    if isinstance(value, enum.Enum):
        return {"@e": type(value).__name__, "v": value.value}
    if attrs.has(type(value)):
        out: dict[str, Any] = {"@": type(value).__name__}
        for field in attrs.fields(type(value)):
            out[field.name] = encode(getattr(value, field.name))
        return out
    if isinstance(value, (tuple, list)):
        return [encode(v) for v in value]
    if value is None or isinstance(value, (bool, int, str)):
        return value
    raise TypeError(f"cannot encode {type(value).__name__} for etcd")


def decode(data: Any) -> Any:
    """The value ``encode`` made ``data`` from."""
    if isinstance(data, list):
        return tuple(decode(v) for v in data)
    if isinstance(data, dict):
        if "@e" in data:
            return _ENUMS[data["@e"]](data["v"])
        cls = _CLASSES[data["@"]]
        return cls(**{k: decode(v) for k, v in data.items() if k != "@"})
    return data


def dumps(value: Any) -> str:
    """``encode`` as compact JSON text."""
    return json.dumps(encode(value), separators=(",", ":"))


def loads(text: str | bytes) -> Any:
    """``decode`` JSON text."""
    return decode(json.loads(text))
