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
                     "topics": [TopicAssignment, ...],
                     "partitions": [[topic, partition, PartitionState], ...],
                     "broker_configs": [[broker_id, [[key, value], ...]], ...]}
                  each value in ``replog.coord.codec``'s encoding (closed class tables)

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
from replog.coord.types import (
    BrokerInfo,
    ControllerInfo,
    MetadataSnapshot,
    PartitionState,
    TopicAssignment,
)
from replog.errors import StorageError
from replog.log.fs import FileSystem

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
        "topics": [codec.encode(t) for _, t in sorted(snapshot.topics.items())],
        "partitions": [
            [topic, partition, codec.encode(state)]
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
    topics = [codec.decode(t) for t in doc["topics"]]
    partitions = {(str(t), int(p)): codec.decode(s) for t, p, s in doc["partitions"]}
    broker_configs = {int(b): codec.decode(c) for b, c in doc["broker_configs"]}
    _check_types(controller, brokers, topics, partitions)
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


def _check_types(
    controller: object,
    brokers: list[object],
    topics: list[object],
    partitions: dict[tuple[str, int], object],
) -> None:
    if controller is not None and not isinstance(controller, ControllerInfo):
        raise TypeError(f"not a controller: {controller!r}")
    for broker in brokers:
        if not isinstance(broker, BrokerInfo):
            raise TypeError(f"not a broker: {broker!r}")
    for topic in topics:
        if not isinstance(topic, TopicAssignment):
            raise TypeError(f"not a topic: {topic!r}")
    for state in partitions.values():
        if not isinstance(state, PartitionState):
            raise TypeError(f"not a partition state: {state!r}")


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
