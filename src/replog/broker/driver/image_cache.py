"""The broker's on-disk cache of its metadata image: ``<first log dir>/__cluster_metadata_image``.

A broker on a backend with a store identity (``raft://``: ``MetadataSnapshot.cluster_id``)
writes the image it acts on -- brokers, topics, partition states, controller, dynamic broker
configs -- with the feed cursor it is valid at and the cluster id, so a restart can follow
the feed from that cursor instead of reading a full snapshot (KRaft brokers keep their
metadata log and snapshots locally for the same reason). The file is a cache: whatever is
wrong with it, the broker reads a snapshot instead.

Byte layout (big-endian)::

    offset  size  field
    0       4     magic b"RLMI"
    4       2     version (1)
    6       4     CRC-32C of the payload
    10      8     payload length in bytes
    18      n     payload: UTF-8 JSON object
                    {"seq": int, "cluster_id": str, "controller_epoch": int,
                     "controller": ControllerInfo | null,
                     "brokers": [BrokerInfo, ...],
                     "topics": [[topic, topic_id, [[replica, ...], ...], [[key, value], ...]],
                                ...],
                     "partitions": [[topic, partition, replicas, leader, leader_epoch, isr,
                                     partition_epoch, elr, last_known_elr,
                                     leader_recovery_state, adding_replicas,
                                     removing_replicas], ...],
                     "broker_configs": [[broker_id, [[key, value], ...]], ...]}
                  controller and brokers in ``replog.coord.codec``'s encoding (closed class
                  tables); topics and partition states, the bulk of an image, as plain
                  positional lists (a third of the text, several times faster to read)

Nothing may follow the payload. The file is replaced atomically (written to ``.tmp``, fsynced,
renamed, directory fsynced), so a crash leaves the old file or the new one; a torn or damaged
file fails its length or CRC check, a file of another version is not read. ``read_image``
returns None for each of those, with a warning: never trusted, never fatal.
"""

from __future__ import annotations

import json
import logging
import os
import struct
from typing import Any

import crc32c

from replog.coord import codec
from replog.errors import StorageError
from replog.log.fs import FileSystem
from replog.metadata.types import (
    BrokerInfo,
    ControllerInfo,
    LeaderRecoveryState,
    MetadataSnapshot,
    PartitionState,
    TopicAssignment,
    TopicConfigs,
)

__all__ = [
    "IMAGE_CACHE_FILE",
    "IMAGE_CACHE_VERSION",
    "MalformedImageCacheError",
    "decode_image",
    "encode_image",
    "read_image",
    "write_image",
]

_log = logging.getLogger(__name__)

IMAGE_CACHE_FILE = "__cluster_metadata_image"
IMAGE_CACHE_VERSION = 1
_MAGIC = b"RLMI"
_HEADER = struct.Struct(">4sHIQ")


class MalformedImageCacheError(ValueError):
    """The cache file is not a whole, undamaged image of this version."""


def encode_image(snapshot: MetadataSnapshot) -> bytes:
    """The file's bytes for ``snapshot`` (which must carry a cluster id)."""
    if not snapshot.cluster_id:
        raise ValueError("an image without a cluster id cannot be cached")
    doc = {
        "seq": snapshot.seq,
        "cluster_id": snapshot.cluster_id,
        "controller_epoch": snapshot.controller_epoch,
        "controller": codec.encode(snapshot.controller),
        "brokers": [codec.encode(b) for _, b in sorted(snapshot.brokers.items())],
        "topics": [
            [t.topic, t.topic_id, t.replicas, t.configs] for _, t in sorted(snapshot.topics.items())
        ],
        "partitions": [
            [topic, partition, *_state_fields(state)]
            for (topic, partition), state in sorted(snapshot.partitions.items())
        ],
        "broker_configs": [
            [broker_id, codec.encode(configs)]
            for broker_id, configs in sorted(snapshot.broker_configs.items())
        ],
    }
    payload = json.dumps(doc, separators=(",", ":")).encode("utf-8")
    header = _HEADER.pack(_MAGIC, IMAGE_CACHE_VERSION, crc32c.crc32c(payload), len(payload))
    return header + payload


def decode_image(data: bytes) -> MetadataSnapshot:
    """The image in a cache file's bytes; ``MalformedImageCacheError`` if they are not one."""
    if len(data) < _HEADER.size:
        raise MalformedImageCacheError(f"{len(data)} bytes, shorter than the header")
    magic, version, crc, length = _HEADER.unpack_from(data)
    if magic != _MAGIC:
        raise MalformedImageCacheError(f"bad magic {magic!r}")
    if version != IMAGE_CACHE_VERSION:
        raise MalformedImageCacheError(f"version {version}, not {IMAGE_CACHE_VERSION}")
    payload = data[_HEADER.size :]
    if len(payload) != length:
        raise MalformedImageCacheError(f"payload is {len(payload)} bytes, header says {length}")
    if crc32c.crc32c(payload) != crc:
        raise MalformedImageCacheError("CRC mismatch")
    try:
        return _snapshot(json.loads(payload.decode("utf-8")))
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        # a CRC-valid payload a buggy or foreign writer made: still not trusted
        raise MalformedImageCacheError(f"bad payload: {exc!r}") from exc


def _snapshot(doc: dict[str, Any]) -> MetadataSnapshot:
    cluster_id = doc["cluster_id"]
    if not isinstance(cluster_id, str) or not cluster_id:
        raise ValueError(f"bad cluster id {cluster_id!r}")
    seq = doc["seq"]
    if not isinstance(seq, int) or seq < 0:
        raise ValueError(f"bad seq {seq!r}")
    controller = codec.decode(doc["controller"])
    brokers = [codec.decode(b) for b in doc["brokers"]]
    topics = [
        TopicAssignment(topic=_text(t), topic_id=_text(i), replicas=r, configs=_configs(c))
        for t, i, r, c in doc["topics"]
    ]
    partitions = {(_text(row[0]), _int(row[1])): _state(row[2:]) for row in doc["partitions"]}
    broker_configs = {_int(b): _configs(c) for b, c in doc["broker_configs"]}
    _check_types(controller, brokers)
    return MetadataSnapshot(
        seq=seq,
        brokers={b.broker_id: b for b in brokers},
        topics={t.topic: t for t in topics},
        partitions=partitions,
        controller=controller,
        controller_epoch=int(doc["controller_epoch"]),
        broker_configs=broker_configs,
        cluster_id=cluster_id,
    )


def _state_fields(state: PartitionState) -> list[Any]:
    return [
        state.replicas,
        state.leader,
        state.leader_epoch,
        state.isr,
        state.partition_epoch,
        state.elr,
        state.last_known_elr,
        state.leader_recovery_state.value,
        state.adding_replicas,
        state.removing_replicas,
    ]


def _state(fields: list[Any]) -> PartitionState:
    (replicas, leader, leader_epoch, isr, epoch, elr, last_elr, recovery, adding, removing) = fields
    return PartitionState(
        replicas=replicas,
        leader=_int(leader),
        leader_epoch=_int(leader_epoch),
        isr=isr,
        partition_epoch=_int(epoch),
        elr=elr,
        last_known_elr=last_elr,
        leader_recovery_state=LeaderRecoveryState(recovery),
        adding_replicas=adding,
        removing_replicas=removing,
    )


def _text(value: object) -> str:
    if not isinstance(value, str):
        raise TypeError(f"not a string: {value!r}")
    return value


def _int(value: object) -> int:
    if not isinstance(value, int) or isinstance(value, bool):
        raise TypeError(f"not an int: {value!r}")
    return value


def _configs(pairs: list[list[str]]) -> TopicConfigs:
    return tuple((_text(k), _text(v)) for k, v in pairs)


def _check_types(controller: object, brokers: list[object]) -> None:
    if controller is not None and not isinstance(controller, ControllerInfo):
        raise TypeError(f"not a controller: {controller!r}")
    for broker in brokers:
        if not isinstance(broker, BrokerInfo):
            raise TypeError(f"not a broker: {broker!r}")


def write_image(fs: FileSystem, log_dir: str, snapshot: MetadataSnapshot) -> None:
    """Replace the cache file in ``log_dir`` with ``snapshot``: tmp, fsync, rename, fsync the
    directory. ``StorageError`` on an IO error."""
    path = os.path.join(log_dir, IMAGE_CACHE_FILE)
    tmp_path = path + ".tmp"
    data = encode_image(snapshot)
    try:
        fs.write_bytes(tmp_path, data)
        fs.fsync_file(tmp_path)
        fs.rename(tmp_path, path)
        fs.fsync_dir(log_dir)
    except OSError as exc:
        raise StorageError(f"cannot write {path}: {exc}", log_dir=log_dir) from exc


def read_image(fs: FileSystem, log_dir: str) -> MetadataSnapshot | None:
    """The cached image in ``log_dir``; None when there is none or it cannot be trusted (a
    damaged, truncated or other-version file, an IO error: logged as a warning)."""
    path = os.path.join(log_dir, IMAGE_CACHE_FILE)
    try:
        if not fs.exists(path):
            return None
        data = fs.read_bytes(path)
    except OSError as exc:
        _log.warning("cannot read the metadata image cache %s: %s", path, exc)
        return None
    try:
        return decode_image(data)
    except MalformedImageCacheError as exc:
        _log.warning("ignoring the metadata image cache %s: %s", path, exc)
        return None
