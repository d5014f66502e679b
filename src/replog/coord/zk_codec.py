"""JSON encodings of the ZooKeeper backend's znodes.

Layout under the chroot (Kafka's, §6, plus replog's feed and queues)::

    /brokers/ids/<id>                        ephemeral  {"version":5,"host","port","rack",
                                                         "broker_epoch","fenced",
                                                         "in_controlled_shutdown","endpoints"}
    /brokers/topics/<t>                      {"version":3,"topic_id","partitions":{"0":[1,2]}}
    /brokers/topics/<t>/partitions/<p>/state {"version":1,"leader","leader_epoch","isr",
                                              "replicas",...}; partition epoch = znode version
    /controller                              ephemeral {"version":2,"brokerid","epoch",
                                                        "broker_epoch"}
    /controller_epoch                        {"epoch": e, "holder": [id, incarnation] | null}
    /replog/head                             next feed seq (decimal)
    /replog/changes                          data: trimmed_before (decimal)
    /replog/changes/c-<seq:010d>             one atomic write's feed records (tagged JSON)
    /replog/gone/<id>-<incarnation>          marker: the end of that session is in the feed
    /admin/queues/<target>/<request_id:010d> a queued AdminRequest (target "controller" = -1)

Feed records and admin requests use a generic tagged encoding of the ``attrs`` values in
``replog.coord.types``: ``{"_t": class name, field: value}``, enums as ``{"_e": enum, "v": value}``,
tuples as lists (decoded back to tuples).
"""

from __future__ import annotations

import enum
import json
from typing import Any

import attrs

from replog.coord import types as _types
from replog.coord.types import (
    AdminRequest,
    BrokerInfo,
    ControllerInfo,
    LeaderRecoveryState,
    MetadataChange,
    PartitionState,
)
from replog.errors import ErrorCode, invariant

__all__ = [
    "decode_admin_request",
    "decode_broker",
    "decode_controller",
    "decode_records",
    "decode_state",
    "encode_admin_request",
    "encode_broker",
    "encode_controller",
    "encode_json",
    "encode_records",
    "encode_state",
]

_CLASSES: dict[str, type] = {
    name: obj
    for name, obj in vars(_types).items()
    if isinstance(obj, type) and attrs.has(obj) and obj.__module__ == _types.__name__
}
_ENUMS: dict[str, type[enum.Enum]] = {
    name: obj
    for name, obj in vars(_types).items()
    if isinstance(obj, type) and issubclass(obj, enum.Enum) and obj.__module__ == _types.__name__
}
_ENUMS["ErrorCode"] = ErrorCode


def _dump(value: Any) -> Any:
    if isinstance(value, enum.Enum):
        return {"_e": type(value).__name__, "v": value.value}
    if attrs.has(type(value)):
        out: dict[str, Any] = {"_t": type(value).__name__}
        for field in attrs.fields(type(value)):
            out[field.name] = _dump(getattr(value, field.name))
        return out
    if isinstance(value, (tuple, list)):
        return [_dump(v) for v in value]
    if isinstance(value, dict):
        return {"_m": [[_dump(k), _dump(v)] for k, v in value.items()]}
    invariant(value is None or isinstance(value, (int, str, bool)), f"cannot encode {value!r}")
    return value


def _load(value: Any) -> Any:
    if isinstance(value, list):
        return tuple(_load(v) for v in value)
    if isinstance(value, dict):
        if "_e" in value:
            return _ENUMS[value["_e"]](value["v"])
        if "_m" in value:
            return {_load(k): _load(v) for k, v in value["_m"]}
        cls = _CLASSES[value["_t"]]
        kwargs = {k: _load(v) for k, v in value.items() if k != "_t"}
        return cls(**kwargs)
    return value


def _json(obj: Any) -> bytes:
    return json.dumps(obj, separators=(",", ":"), sort_keys=True).encode()


def encode_records(records: list[MetadataChange]) -> bytes:
    """One feed node's content."""
    return _json([_dump(r) for r in records])


def decode_records(data: bytes) -> list[MetadataChange]:
    """The records of one feed node."""
    return [_load(r) for r in json.loads(data)]


def encode_admin_request(request: AdminRequest) -> bytes:
    """A queued admin request's node content."""
    return _json(_dump(request))


def decode_admin_request(data: bytes) -> AdminRequest:
    """Parse a queued admin request."""
    request = _load(json.loads(data))
    invariant(isinstance(request, AdminRequest), "an admin queue node holds an AdminRequest")
    return request  # type: ignore[no-any-return]


def encode_broker(broker: BrokerInfo) -> bytes:
    """A broker registration in Kafka's /brokers/ids/<id> shape, plus replog's flags."""
    return _json(
        {
            "version": 5,
            "host": broker.host,
            "port": broker.port,
            "rack": broker.rack,
            "endpoints": [f"PLAINTEXT://{broker.host}:{broker.port}"],
            "broker_epoch": broker.incarnation_epoch,
            "fenced": broker.fenced,
            "in_controlled_shutdown": broker.in_controlled_shutdown,
        }
    )


def decode_broker(broker_id: int, data: bytes) -> BrokerInfo:
    """Parse /brokers/ids/<id>."""
    obj = json.loads(data)
    return BrokerInfo(
        broker_id=broker_id,
        incarnation_epoch=int(obj["broker_epoch"]),
        host=obj["host"],
        port=int(obj["port"]),
        rack=obj.get("rack"),
        fenced=bool(obj.get("fenced", False)),
        in_controlled_shutdown=bool(obj.get("in_controlled_shutdown", False)),
    )


def encode_state(state: PartitionState, controller_epoch: int) -> bytes:
    """A partition state in Kafka's .../state shape (the partition epoch is the znode
    version, so it is not stored)."""
    return _json(
        {
            "version": 1,
            "controller_epoch": controller_epoch,
            "leader": state.leader,
            "leader_epoch": state.leader_epoch,
            "isr": list(state.isr),
            "replicas": list(state.replicas),
            "elr": list(state.elr),
            "last_known_elr": list(state.last_known_elr),
            "leader_recovery_state": int(state.leader_recovery_state),
            "adding_replicas": list(state.adding_replicas),
            "removing_replicas": list(state.removing_replicas),
        }
    )


def decode_state(data: bytes, version: int) -> PartitionState:
    """Parse a .../state node; ``version`` is its znode version (the partition epoch)."""
    obj = json.loads(data)
    return PartitionState(
        replicas=obj["replicas"],
        leader=int(obj["leader"]),
        leader_epoch=int(obj["leader_epoch"]),
        isr=obj["isr"],
        partition_epoch=version,
        elr=obj.get("elr", ()),
        last_known_elr=obj.get("last_known_elr", ()),
        leader_recovery_state=LeaderRecoveryState(int(obj.get("leader_recovery_state", 0))),
        adding_replicas=obj.get("adding_replicas", ()),
        removing_replicas=obj.get("removing_replicas", ()),
    )


def encode_controller(controller: ControllerInfo) -> bytes:
    """The /controller node."""
    return _json(
        {
            "version": 2,
            "brokerid": controller.controller_id,
            "epoch": controller.controller_epoch,
            "broker_epoch": controller.incarnation_epoch,
        }
    )


def decode_controller(data: bytes) -> ControllerInfo:
    """Parse /controller."""
    obj = json.loads(data)
    return ControllerInfo(int(obj["brokerid"]), int(obj["epoch"]), int(obj["broker_epoch"]))


def encode_json(obj: Any) -> bytes:
    """Compact JSON bytes (topic and epoch nodes)."""
    return _json(obj)
