"""The one JSON encoding of the coordination values the ZooKeeper and etcd backends store
(feed records, admin requests, and etcd's brokers, partition states and controller).

An attrs value becomes ``{"@": "<class name>", <field>: <encoded value>, ...}`` (fields in
declaration order), an enum ``{"@e": "<class name>", "v": <value>}``, a tuple a list; everything
else is a JSON scalar. Text is compact (no spaces). Decoding turns every list back into a tuple
(all sequences in these values are tuples) and rebuilds classes by name from a closed table
built from ``replog.metadata.types``, so a stored value can never name an arbitrary class.
"""

from __future__ import annotations

import enum
import json
from typing import Any

import attrs

from replog.errors import ErrorCode
from replog.metadata import types as t

__all__ = ["CLASSES", "ENUMS", "decode", "dumps", "dumps_bytes", "encode", "loads"]

CLASSES: dict[str, type[Any]] = {
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
        t.AlterPartitionResult,
        t.DamagedReplica,
        t.AllocateProducerIds,
        t.ProducerIdBlock,
        t.ConfigChange,
        t.AlterConfigs,
        t.ElectLeader,
        t.AdminRequest,
        t.BrokerChanged,
        t.TopicChanged,
        t.PartitionChanged,
        t.ControllerChanged,
        t.AdminRequestChanged,
        t.BrokerConfigsChanged,
    )
}
"""The attrs classes a stored value may hold, by name (the names are the stored format)."""

ENUMS: dict[str, type[enum.Enum]] = {
    cls.__name__: cls
    for cls in (
        t.LeaderRecoveryState,
        t.BrokerChangeReason,
        t.TopicChangeReason,
        t.AdminRequestChangeReason,
        t.ConfigResourceType,
        t.ConfigOperation,
        ErrorCode,
    )
}
"""The enums a stored value may hold, by name."""


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
    raise TypeError(f"cannot encode {type(value).__name__} for the store")


def decode(data: Any) -> Any:
    """The value ``encode`` made ``data`` from."""
    if isinstance(data, list):
        return tuple(decode(v) for v in data)
    if isinstance(data, dict):
        if "@e" in data:
            return ENUMS[data["@e"]](data["v"])
        cls = CLASSES[data["@"]]
        return cls(**{k: decode(v) for k, v in data.items() if k != "@"})
    return data


def dumps(value: Any) -> str:
    """``encode`` as compact JSON text."""
    return json.dumps(encode(value), separators=(",", ":"))


def dumps_bytes(value: Any) -> bytes:
    """``dumps`` as UTF-8 bytes (znode data)."""
    return dumps(value).encode()


def loads(text: str | bytes) -> Any:
    """``decode`` JSON text."""
    return decode(json.loads(text))
