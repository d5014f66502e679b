"""Kafka's text checkpoint files and the clean-shutdown marker.

Layout (UTF-8, every line ends with ``\\n``)::

    <version>\\n            # int; 0 for every file here
    <count>\\n              # number of entry lines that follow
    <entry>\\n              # count times, formatted by the file's formatter

    replication-offset-checkpoint, recovery-point-offset-checkpoint, log-start-offset-checkpoint,
    cleaner-offset-checkpoint:
        entry = "<topic> <partition> <offset>"          e.g. "0\\n2\\nfoo 0 42\\nfoo 1 17\\n"
    leader-epoch-checkpoint (per partition dir):
        entry = "<epoch> <start_offset>", ascending    e.g. "0\\n2\\n0 0\\n1 2\\n"

Writes are atomic: write ``<path>.tmp``, fsync it, rename it over ``<path>``, fsync the directory.
A crash at any point leaves either the old or the new file at ``<path>``; a stale ``.tmp`` is
simply overwritten by the next write.

Reading is strict, because a checkpoint decides what recovery trusts:

- a missing file, an empty file, or a version line alone reads as empty (the constructor does no
  IO, so unlike Kafka nothing creates the file up front);
- a wrong version, a line that does not parse (wrong token count, non-integer or negative
  values, out-of-range integers, a blank line), a count that does not match the entries, or a
  duplicate key raise `MalformedCheckpointError` naming the file and the 1-based line;
- ``\\r\\n`` line ends are accepted on read (Kafka's reader accepts them too);
- any ``OSError`` becomes `StorageError`, whose ``log_dir`` is the log dir holding the file.

``cleaner-offset-checkpoint`` (per log dir) holds each compacted log's clean offset, the end of
what the log cleaner has cleaned (`CleanerOffsetCheckpoint`: one entry is read and rewritten at a
time, as Kafka's LogCleanerManager does).

``.kafka_cleanshutdown`` (per log dir) is JSON ``{"version":0,"brokerEpoch":N}``, written in place
and fsynced at clean shutdown, read and deleted at startup (see
`read_and_delete_clean_shutdown_marker`).
"""

from __future__ import annotations

import json
import os
import re
import threading
from collections.abc import Hashable, Iterable, Mapping
from typing import Generic, NoReturn, Protocol, TypeVar

import attrs

from replog.errors import InvalidTopicError, MalformedCheckpointError, StorageError
from replog.log.epoch_cache import EpochEntry
from replog.log.fs import FileSystem
from replog.topics import TopicPartition, validate_topic_name

__all__ = [
    "clean_checkpoint_of",
    "CLEANER_OFFSET_CHECKPOINT_FILE",
    "CLEAN_SHUTDOWN_FILE",
    "CheckpointFile",
    "CleanerOffsetCheckpoint",
    "CheckpointFormatter",
    "LEADER_EPOCH_CHECKPOINT_FILE",
    "LOG_START_OFFSET_CHECKPOINT_FILE",
    "LeaderEpochCheckpointFile",
    "OffsetCheckpointFile",
    "RECOVERY_POINT_CHECKPOINT_FILE",
    "REPLICATION_OFFSET_CHECKPOINT_FILE",
    "read_and_delete_clean_shutdown_marker",
    "write_clean_shutdown_marker",
]

REPLICATION_OFFSET_CHECKPOINT_FILE = "replication-offset-checkpoint"
RECOVERY_POINT_CHECKPOINT_FILE = "recovery-point-offset-checkpoint"
LOG_START_OFFSET_CHECKPOINT_FILE = "log-start-offset-checkpoint"
LEADER_EPOCH_CHECKPOINT_FILE = "leader-epoch-checkpoint"
CLEAN_SHUTDOWN_FILE = ".kafka_cleanshutdown"
CLEANER_OFFSET_CHECKPOINT_FILE = "cleaner-offset-checkpoint"

_INT32_MAX = 2**31 - 1
_INT64_MAX = 2**63 - 1
_INTEGER = re.compile(r"-?[0-9]+")
_LEGAL_TOPIC = re.compile(r"[a-zA-Z0-9._-]+")

T = TypeVar("T")


class CheckpointFormatter(Protocol[T]):
    """Turns one entry into one line and back; ``key`` identifies duplicates."""

    def to_line(self, entry: T) -> str:
        """The entry's line, without the line end. ValueError if it cannot be written."""

    def from_line(self, line: str) -> T:
        """Parse one line; ValueError (with a reason) if it is malformed."""

    def key(self, entry: T) -> Hashable:
        """What must be unique among a file's entries."""


def _parse_int(token: str, what: str, max_value: int) -> int:
    """A non-negative ASCII decimal integer up to ``max_value``; ValueError otherwise."""
    if not _INTEGER.fullmatch(token):
        raise ValueError(f"{what} {token!r} is not an integer")
    value = int(token)
    if value < 0:
        raise ValueError(f"{what} {value} is negative")
    if value > max_value:
        raise ValueError(f"{what} {value} is above {max_value}")
    return value


@attrs.define
class CheckpointFile(Generic[T]):
    """A versioned list of entries in Kafka's checkpoint text format, written atomically.

    ``log_dir`` is reported in `StorageError` so the caller can take that dir offline.
    """

    fs: FileSystem
    path: str
    version: int
    formatter: CheckpointFormatter[T]
    log_dir: str
    _lock: threading.Lock = attrs.field(factory=threading.Lock, init=False)

    @property
    def tmp_path(self) -> str:
        """Where a write is staged before the rename."""
        return self.path + ".tmp"

    def write(self, entries: Iterable[T]) -> None:
        """Replace the file with ``entries``: tmp, fsync, rename, fsync the directory.

        Every entry is formatted before anything is written, so bad input (ValueError) leaves
        the file untouched.
        """
        lines = [self.formatter.to_line(entry) for entry in entries]
        text = "".join(f"{line}\n" for line in [str(self.version), str(len(lines)), *lines])
        directory = os.path.dirname(self.path) or "."
        with self._lock:
            try:
                self.fs.write_bytes(self.tmp_path, text.encode("utf-8"))
                self.fs.fsync_file(self.tmp_path)
                self.fs.rename(self.tmp_path, self.path)
                self.fs.fsync_dir(directory)
            except OSError as e:
                raise StorageError(
                    f"cannot write checkpoint {self.path}: {e}", log_dir=self.log_dir
                ) from e

    def read(self) -> list[T]:
        """The entries, in file order; [] for a missing or empty file."""
        try:
            raw = self.fs.read_bytes(self.path)
        except FileNotFoundError:
            return []
        except OSError as e:
            raise StorageError(
                f"cannot read checkpoint {self.path}: {e}", log_dir=self.log_dir
            ) from e
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as e:
            raise MalformedCheckpointError(f"not UTF-8: {e}", self.path) from e
        return self._parse(text)

    def _parse(self, text: str) -> list[T]:
        lines = text.split("\n")
        if lines[-1] == "":
            lines.pop()  # the final line end
        lines = [line.removesuffix("\r") for line in lines]
        if not lines:
            return []
        version = self._header_int(lines[0], 1, "version")
        if version != self.version:
            self._malformed(1, lines[0], f"unrecognised version {version}, expected {self.version}")
        if len(lines) == 1:
            return []
        expected_count = self._header_int(lines[1], 2, "entry count")
        entries: list[T] = []
        seen: dict[Hashable, int] = {}
        for line_no, line in enumerate(lines[2:], start=3):
            try:
                entry = self.formatter.from_line(line)
            except ValueError as e:
                self._malformed(line_no, line, f"malformed line ({e})")
            key = self.formatter.key(entry)
            if key in seen:
                self._malformed(line_no, line, f"duplicate of line {seen[key]}")
            seen[key] = line_no
            entries.append(entry)
        if len(entries) != expected_count:
            raise MalformedCheckpointError(
                f"line 2: expected {expected_count} entries, found {len(entries)}", self.path
            )
        return entries

    def _header_int(self, line: str, line_no: int, what: str) -> int:
        try:
            return _parse_int(line, what, _INT32_MAX)
        except ValueError as e:
            self._malformed(line_no, line, str(e))

    def _malformed(self, line_no: int, line: str, reason: str) -> NoReturn:
        raise MalformedCheckpointError(f"line {line_no}: {reason}: {line!r}", self.path)


# ------------------------------------------------------------------------ offset checkpoints

_OffsetEntry = tuple[str, int, int]


class _OffsetFormatter:
    """``topic partition offset``; topics use Kafka's legal characters (never whitespace)."""

    def to_line(self, entry: _OffsetEntry) -> str:
        topic, partition, offset = entry
        if not _LEGAL_TOPIC.fullmatch(topic):
            raise InvalidTopicError(f"topic {topic!r} cannot be written to a checkpoint")
        if not 0 <= partition <= _INT32_MAX:
            raise ValueError(f"partition {partition} of {topic} is out of range")
        if not 0 <= offset <= _INT64_MAX:
            raise ValueError(f"offset {offset} of {topic}-{partition} is out of range")
        return f"{topic} {partition} {offset}"

    def from_line(self, line: str) -> _OffsetEntry:
        tokens = line.split()
        if len(tokens) != 3:
            raise ValueError(f"expected 3 fields, found {len(tokens)}")
        topic, partition, offset = tokens
        if not _LEGAL_TOPIC.fullmatch(topic):
            raise ValueError(f"illegal topic name {topic!r}")
        return (
            topic,
            _parse_int(partition, "partition", _INT32_MAX),
            _parse_int(offset, "offset", _INT64_MAX),
        )

    def key(self, entry: _OffsetEntry) -> Hashable:
        return (entry[0], entry[1])


class OffsetCheckpointFile:
    """Per-log-dir offsets by partition (replication offsets, recovery points, log starts)."""

    VERSION = 0

    def __init__(self, fs: FileSystem, path: str) -> None:
        log_dir = os.path.dirname(path) or "."
        self._file = CheckpointFile(fs, path, self.VERSION, _OffsetFormatter(), log_dir)

    @property
    def path(self) -> str:
        """The checkpoint's path."""
        return self._file.path

    def write(self, offsets: Mapping[tuple[str, int], int]) -> None:
        """Atomically replace the file with ``offsets`` (sorted by topic, partition)."""
        self._file.write((t, p, o) for (t, p), o in sorted(offsets.items()))

    def read(self) -> dict[tuple[str, int], int]:
        """(topic, partition) -> offset; {} for a missing or empty file."""
        return {(t, p): o for t, p, o in self._file.read()}


class CleanerOffsetCheckpoint:
    """One partition's entry in its log dir's ``cleaner-offset-checkpoint``: read, rewrite
    (the other partitions' entries are kept) and remove it. Every write is atomic and durable
    before it returns."""

    def __init__(self, fs: FileSystem, log_dir: str, topic: str, partition: int) -> None:
        self._file = OffsetCheckpointFile(fs, os.path.join(log_dir, CLEANER_OFFSET_CHECKPOINT_FILE))
        self._key = (topic, partition)

    @property
    def path(self) -> str:
        """The checkpoint's path."""
        return self._file.path

    def read(self) -> int | None:
        """This partition's offset; None if it has no entry. `MalformedCheckpointError` if the
        file does not parse."""
        return self._file.read().get(self._key)

    def write(self, offset: int) -> None:
        """Set this partition's entry to ``offset``."""
        offsets = self._file.read()
        offsets[self._key] = offset
        self._file.write(offsets)

    def remove(self) -> None:
        """Drop this partition's entry (its log was deleted); nothing is written if it has none."""
        offsets = self._file.read()
        if offsets.pop(self._key, None) is not None:
            self._file.write(offsets)


# ------------------------------------------------------------------------ leader epochs


class _EpochFormatter:
    """``epoch start_offset``."""

    def to_line(self, entry: EpochEntry) -> str:
        return f"{entry.epoch} {entry.start_offset}"

    def from_line(self, line: str) -> EpochEntry:
        tokens = line.split()
        if len(tokens) != 2:
            raise ValueError(f"expected 2 fields, found {len(tokens)}")
        return EpochEntry(
            _parse_int(tokens[0], "epoch", _INT32_MAX),
            _parse_int(tokens[1], "start offset", _INT64_MAX),
        )

    def key(self, entry: EpochEntry) -> Hashable:
        return entry.epoch


class LeaderEpochCheckpointFile:
    """A partition's ``leader-epoch-checkpoint``: the epoch cache's entries, ascending."""

    VERSION = 0

    def __init__(self, fs: FileSystem, path: str) -> None:
        # <log dir>/<topic>-<partition>/leader-epoch-checkpoint
        log_dir = os.path.dirname(os.path.dirname(path)) or "."
        self._file = CheckpointFile(fs, path, self.VERSION, _EpochFormatter(), log_dir)

    @property
    def path(self) -> str:
        """The checkpoint's path."""
        return self._file.path

    def write(self, entries: Iterable[EpochEntry]) -> None:
        """Atomically replace the file with ``entries``."""
        self._file.write(entries)

    def read(self) -> list[EpochEntry]:
        """The entries in file order; [] for a missing or empty file."""
        return self._file.read()


# ------------------------------------------------------------------------ clean shutdown


def write_clean_shutdown_marker(fs: FileSystem, log_dir: str, broker_epoch: int) -> None:
    """Write ``<log_dir>/.kafka_cleanshutdown`` and make it durable (file, then directory).

    Written in place, not via tmp+rename: a torn marker fails to parse and counts as unclean,
    which is the safe direction. ``broker_epoch`` is -1 when unknown.
    """
    if broker_epoch < -1:
        raise ValueError(f"broker epoch must be >= -1, got {broker_epoch}")
    path = os.path.join(log_dir, CLEAN_SHUTDOWN_FILE)
    data = json.dumps({"version": 0, "brokerEpoch": broker_epoch}, separators=(",", ":"))
    try:
        fs.write_bytes(path, data.encode("utf-8"))
        fs.fsync_file(path)
        fs.fsync_dir(log_dir)
    except OSError as e:
        raise StorageError(f"cannot write {path}: {e}", log_dir=log_dir) from e


def read_and_delete_clean_shutdown_marker(fs: FileSystem, log_dir: str) -> int | None:
    """The broker epoch from the clean-shutdown marker, or None if the last shutdown was unclean.

    The marker is deleted (and the deletion made durable) before returning, so a crash while
    the logs load counts as unclean on the next boot. A marker that does not parse also counts
    as unclean and is deleted too (Kafka would still trust a present marker; replog prefers a
    recovery it did not need over skipping one it did).
    """
    path = os.path.join(log_dir, CLEAN_SHUTDOWN_FILE)
    try:
        if not fs.exists(path):
            return None
        raw = fs.read_bytes(path)
        fs.remove(path)
        fs.fsync_dir(log_dir)
    except OSError as e:
        raise StorageError(f"cannot read and delete {path}: {e}", log_dir=log_dir) from e
    return _parse_marker(raw)


def _parse_marker(raw: bytes) -> int | None:
    try:
        doc = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        return None
    if not isinstance(doc, dict) or type(doc.get("version")) is not int or doc["version"] != 0:
        return None
    epoch = doc.get("brokerEpoch")
    if not isinstance(epoch, int) or isinstance(epoch, bool) or epoch < -1:
        return None
    return epoch


def clean_checkpoint_of(fs: FileSystem, dir_path: str) -> CleanerOffsetCheckpoint | None:
    """The ``cleaner-offset-checkpoint`` entry of the log in ``dir_path`` (in its parent, the
    log dir); None if the directory is not named ``<topic>-<partition>``."""
    path = dir_path.rstrip("/")
    try:
        tp = TopicPartition.parse(os.path.basename(path))
        validate_topic_name(tp.topic)
    except (ValueError, InvalidTopicError):
        return None
    return CleanerOffsetCheckpoint(fs, os.path.dirname(path) or ".", tp.topic, tp.partition)
