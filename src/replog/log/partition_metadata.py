"""``partition.metadata``: the topic ID a partition directory belongs to (KIP-516), in Kafka's
format, so a log is tied to one topic incarnation and a recreated topic of the same name never
serves the records of the old one.

Layout (UTF-8 text, Kafka's ``PartitionMetadataFile``)::

    version: 0
    topic_id: <the 16-byte UUID in URL-safe base64, no padding: 22 characters>

Written like the checkpoints: ``partition.metadata.tmp``, fsync, rename, fsync the directory.
A file that does not parse raises ``MalformedCheckpointError`` (the log dir's caller decides);
a missing file means a log written before topic IDs, whose ID is unknown.

Topic IDs travel in replog as the UUID's 32-digit hex string (``uuid.UUID.hex``), the form the
coordination backends store; ``encode_topic_id`` / ``decode_topic_id`` convert to and from the
file's base64, and ``topic_uuid`` gives the ``uuid.UUID`` the wire protocol carries (the zero
UUID for an ID that is not a UUID, as older stores wrote).
"""

from __future__ import annotations

import base64
import binascii
import os
import uuid

from replog.errors import MalformedCheckpointError, StorageError
from replog.log.fs import FileSystem
from replog.topics import ZERO_TOPIC_ID, new_topic_id, topic_uuid

__all__ = [
    "PARTITION_METADATA_FILE",
    "ZERO_TOPIC_ID",
    "decode_topic_id",
    "encode_topic_id",
    "new_topic_id",
    "read_partition_metadata",
    "topic_uuid",
    "write_partition_metadata",
]

PARTITION_METADATA_FILE = "partition.metadata"
_VERSION = 0


def encode_topic_id(topic_id: str) -> str:
    """The file (and Kafka tools') form: URL-safe base64 of the 16 bytes, unpadded."""
    value = topic_uuid(topic_id)
    if value == ZERO_TOPIC_ID:
        raise ValueError(f"not a topic ID: {topic_id!r}")
    return base64.urlsafe_b64encode(value.bytes).decode("ascii").rstrip("=")


def decode_topic_id(text: str) -> str:
    """The hex form of a base64 topic ID; ``ValueError`` if it is not 16 bytes of base64."""
    try:
        raw = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    except (binascii.Error, ValueError) as exc:
        raise ValueError(f"bad topic ID {text!r}: {exc}") from exc
    if len(raw) != 16:
        raise ValueError(f"bad topic ID {text!r}: {len(raw)} bytes, not 16")
    return uuid.UUID(bytes=raw).hex


def write_partition_metadata(fs: FileSystem, partition_dir: str, topic_id: str) -> None:
    """Write ``partition.metadata`` atomically; ``StorageError`` on an IO error."""
    path = f"{partition_dir}/{PARTITION_METADATA_FILE}"
    text = f"version: {_VERSION}\ntopic_id: {encode_topic_id(topic_id)}\n"
    try:
        fs.write_bytes(path + ".tmp", text.encode("utf-8"))
        fs.fsync_file(path + ".tmp")
        fs.rename(path + ".tmp", path)
        fs.fsync_dir(os.path.dirname(path) or ".")
    except OSError as exc:
        log_dir = os.path.dirname(partition_dir)
        raise StorageError(f"cannot write {path}: {exc}", log_dir=log_dir) from exc


def read_partition_metadata(fs: FileSystem, partition_dir: str) -> str | None:
    """The topic ID (hex) in ``partition.metadata``; None when there is no such file."""
    path = f"{partition_dir}/{PARTITION_METADATA_FILE}"
    try:
        raw = fs.read_bytes(path)
    except FileNotFoundError:
        return None
    except OSError as exc:
        log_dir = os.path.dirname(partition_dir)
        raise StorageError(f"cannot read {path}: {exc}", log_dir=log_dir) from exc
    fields: dict[str, str] = {}
    try:
        for line in raw.decode("utf-8").splitlines():
            if line.strip():
                key, sep, value = line.partition(":")
                if not sep:
                    raise ValueError(f"no ':' in {line!r}")
                fields[key.strip()] = value.strip()
        if fields.get("version") != str(_VERSION):
            raise ValueError(f"unsupported version {fields.get('version')!r}")
        return decode_topic_id(fields["topic_id"])
    except (UnicodeDecodeError, ValueError, KeyError) as exc:
        raise MalformedCheckpointError(str(exc), path) from exc
