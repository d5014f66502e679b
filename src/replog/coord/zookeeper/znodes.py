"""The ZooKeeper backend's znode layout and the Kafka-shaped JSON of its broker, partition
state, controller and topic znodes.

Layout under the chroot (Kafka's znodes and JSON shapes, plus replog's feed and queues)::

    /brokers/ids/<id>                        ephemeral  {"version":5,"host","port","rack",
                                                         "broker_epoch","fenced",
                                                         "in_controlled_shutdown","endpoints"}
    /brokers/topics/<t>                      {"version":3,"topic_id","partitions":{"0":[1,2]},
                                              "configs":{"k":"v"}} (no "configs": none)
    /brokers/topics/<t>/partitions/<p>/state {"version":1,"leader","leader_epoch","isr",
                                              "replicas",...}; partition epoch = znode version
    /controller                              ephemeral {"version":2,"brokerid","epoch",
                                                        "broker_epoch"}
    /controller_epoch                        {"epoch": e, "holder": [id, incarnation] | null}
    /replog/head                             next feed seq (decimal)
    /replog/changes                          data: trimmed_before (decimal)
    /replog/changes/c-<seq:010d>             one atomic write's feed records (tagged JSON)
    /replog/gone/<id>-<incarnation>          marker: the end of that session is in the feed
    /replog/seen/<id>                        the incarnation of the latest registration of
                                             <id> whose end is not in the feed yet (decimal)
    /admin/queues/<target>/<request_id:010d> a queued AdminRequest (target "controller" = -1)
    /config/brokers/<id> | <default>         dynamic broker configs (``zookeeper.configs``)

Feed records and admin requests are stored in the encoding shared with the etcd backend,
``replog.coord.codec``.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from replog.metadata.types import (
    CONTROLLER_TARGET,
    BrokerInfo,
    ControllerInfo,
    LeaderRecoveryState,
    PartitionState,
    TopicConfigs,
    topic_configs,
)

__all__ = [
    "CONTROLLER",
    "EPOCH",
    "GONE",
    "IDS",
    "PRODUCER_IDS",
    "QUEUES",
    "SEEN",
    "TOPICS",
    "decode_broker",
    "decode_controller",
    "decode_epoch",
    "decode_state",
    "decode_topic",
    "encode_broker",
    "encode_controller",
    "encode_epoch",
    "encode_state",
    "encode_topic",
    "queue_dir",
    "state_path",
]

IDS = "/brokers/ids"
TOPICS = "/brokers/topics"
CONTROLLER = "/controller"
EPOCH = "/controller_epoch"
GONE = "/replog/gone"
SEEN = "/replog/seen"
QUEUES = "/admin/queues"
#: the latest producer-id block of each broker (codec JSON of a tuple of ProducerIdBlock)
PRODUCER_IDS = "/replog/producer_ids"


def queue_dir(target: int) -> str:
    """The admin queue directory of ``target``."""
    return f"{QUEUES}/{'controller' if target == CONTROLLER_TARGET else target}"


def state_path(topic: str, partition: int) -> str:
    """A partition's state znode."""
    return f"{TOPICS}/{topic}/partitions/{partition}/state"


def _json(obj: Any) -> bytes:
    return json.dumps(obj, separators=(",", ":"), sort_keys=True).encode()


def encode_epoch(epoch: int, holder: Sequence[int] | None) -> bytes:
    """/controller_epoch: the last epoch and the [id, incarnation] holding it (None: vacant)."""
    return _json({"epoch": epoch, "holder": None if holder is None else list(holder)})


def decode_epoch(data: bytes) -> tuple[int, list[int] | None]:
    """Parse /controller_epoch: (epoch, holder); an empty node is epoch 0."""
    if not data:
        return 0, None
    obj = json.loads(data)
    return int(obj["epoch"]), obj.get("holder")


def encode_topic(
    topic_id: str, replicas: Sequence[Sequence[int]], configs: TopicConfigs = ()
) -> bytes:
    """/brokers/topics/<t> in Kafka's shape, plus replog's per-topic ``configs``."""
    return _json(
        {
            "version": 3,
            "topic_id": topic_id,
            "partitions": {str(p): list(r) for p, r in enumerate(replicas)},
            "adding_replicas": {},
            "removing_replicas": {},
            "configs": dict(configs),
        }
    )


def decode_topic(data: bytes) -> tuple[str, int, TopicConfigs]:
    """Parse /brokers/topics/<t>: (topic_id, partition count, configs); a node written before
    topics had configs has none."""
    obj = json.loads(data)
    return obj["topic_id"], len(obj["partitions"]), topic_configs(obj.get("configs") or {})


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
            "clean_shutdown": broker.clean_shutdown,
            "admitted": broker.admitted,
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
        clean_shutdown=bool(obj.get("clean_shutdown", True)),
        admitted=bool(obj.get("admitted", True)),
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
