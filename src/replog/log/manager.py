"""`LogManager`: the partition logs of one broker across one or more log dirs.

Each log dir holds ``<topic>-<partition>`` directories and four files of its own (as in Kafka):
``replication-offset-checkpoint`` (HW), ``recovery-point-offset-checkpoint``,
``log-start-offset-checkpoint`` and, after a clean shutdown, ``.kafka_cleanshutdown``.

Logs are opened lazily, on first use: start-up only reads the checkpoints and lists the
directories. The clean-shutdown marker is deleted as soon as it is read, so a crash before the
next clean shutdown makes every log recover. At shutdown the marker is written again only for a
dir that was clean at start or whose logs were all opened (and so recovered) since.

A log dir whose HW checkpoint cannot be parsed, or that fails a write or fsync, goes offline: its
partitions are not served and nothing more is written there until the broker restarts.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence

import attrs

from replog.clock import SYSTEM_CLOCK, Clock
from replog.errors import (
    InvalidConfigError,
    InvalidTopicError,
    MalformedCheckpointError,
    StorageError,
)
from replog.log.checkpoint_round import CheckpointRound, CheckpointWriter, PendingCheckpoint
from replog.log.checkpoints import (
    CleanerOffsetCheckpoint,
    OffsetCheckpointFile,
    read_and_delete_clean_shutdown_marker,
    write_clean_shutdown_marker,
)
from replog.log.cleaner import CleaningTask
from replog.log.config import LogConfig
from replog.log.fs import REAL_FS, FileSystem
from replog.log.log import Log
from replog.log.log_cleaner import CleaningResult, LogCleanerManager
from replog.log.partition_metadata import read_partition_metadata, write_partition_metadata
from replog.topics import TopicPartition, validate_topic_name, validate_topic_partition

__all__ = [
    "HW_CHECKPOINT",
    "LOG_START_CHECKPOINT",
    "LogManager",
    "RECOVERY_POINT_CHECKPOINT",
    "TopicPartition",
    "parse_partition_dir",
]

HW_CHECKPOINT = "replication-offset-checkpoint"
RECOVERY_POINT_CHECKPOINT = "recovery-point-offset-checkpoint"
LOG_START_CHECKPOINT = "log-start-offset-checkpoint"
_IGNORED_DIR_SUFFIXES = ("-delete", "-future", "-stray")


def parse_partition_dir(name: str) -> TopicPartition | None:
    """The partition a directory name denotes, or None if it is not a partition dir (a
    deletion, future or stray dir, or a name that is no legal topic)."""
    if name.endswith(_IGNORED_DIR_SUFFIXES):
        return None
    try:
        tp = TopicPartition.parse(name)
        validate_topic_name(tp.topic)
    except (ValueError, InvalidTopicError):
        return None
    return tp


@attrs.define(eq=False)
class _LogDir:
    """One log dir: its checkpoints as read at start, and what has been opened since."""

    path: str
    had_clean_shutdown: bool
    high_watermarks: dict[tuple[str, int], int]
    recovery_points: dict[tuple[str, int], int]
    log_start_offsets: dict[tuple[str, int], int]
    unopened: set[TopicPartition]
    offline_reason: str | None = None


@attrs.frozen
class _CheckpointKind:
    """One of the periodic checkpoint files: its name, its table in ``_LogDir``, the value it
    keeps per log, and which logs it keeps."""

    file_name: str
    table: str
    value: Callable[[Log], int]
    include: Callable[[Log], bool] = lambda log: True


_HW = _CheckpointKind(HW_CHECKPOINT, "high_watermarks", lambda log: log.high_watermark)
_RECOVERY_POINTS = _CheckpointKind(
    RECOVERY_POINT_CHECKPOINT, "recovery_points", lambda log: log.recovery_point
)
_LOG_STARTS = _CheckpointKind(
    LOG_START_CHECKPOINT,
    "log_start_offsets",
    lambda log: log.log_start_offset,
    include=lambda log: log.log_start_offset > log.segments.first_base,
)


@attrs.define(eq=False)
class LogManager:
    """All partition logs of a broker. Create with `LogManager.open`."""

    fs: FileSystem
    default_config: LogConfig
    clock: Clock
    dirs: list[_LogDir]
    logs: dict[TopicPartition, Log] = attrs.Factory(dict)
    configs: dict[str, LogConfig] = attrs.Factory(dict)
    #: the log cleaner's choices (which compacted log next, which failed)
    cleaner: LogCleanerManager = attrs.Factory(LogCleanerManager)
    _dir_of: dict[TopicPartition, _LogDir] = attrs.Factory(dict)
    _checkpoints: CheckpointWriter = attrs.field(init=False)
    #: set when a log or a checkpoint failed (``log_failed``, ``checkpoint_failed``): the
    #: broker then asks ``every_dir_offline``; one attribute read per request otherwise
    storage_failed: bool = False

    def __attrs_post_init__(self) -> None:
        self._checkpoints = CheckpointWriter(self.fs)

    @classmethod
    def open(
        cls,
        log_dirs: Sequence[str],
        config: LogConfig | None = None,
        *,
        fs: FileSystem = REAL_FS,
        clock: Clock = SYSTEM_CLOCK,
    ) -> LogManager:
        """Read each dir's checkpoints and list its partitions; logs open on first use. Every
        log gets ``clock`` (segment ages and time retention go by its wall time)."""
        if not log_dirs:
            raise InvalidConfigError("at least one log dir is required")
        dirs = [_scan_dir(fs, path) for path in log_dirs]
        manager = cls(
            fs=fs,
            default_config=config or LogConfig(),
            clock=clock,
            dirs=dirs,
        )
        for log_dir in dirs:
            for tp in log_dir.unopened:
                manager._dir_of.setdefault(tp, log_dir)
        return manager

    @property
    def had_clean_shutdown(self) -> bool:
        """Whether the previous run ended cleanly, as read at open: every log dir had the
        clean-shutdown marker, or holds no partition at all (a brand-new broker has nothing to
        lose). What the broker tells the coordinator at registration (KIP-966)."""
        return all(d.had_clean_shutdown or not d.unopened for d in self.dirs)

    # -- lookup -----------------------------------------------------------------------------

    def partitions(self) -> list[TopicPartition]:
        """Every partition with a log here (opened or not), on online dirs."""
        return sorted(tp for tp, d in self._dir_of.items() if d.offline_reason is None)

    def get_log(self, tp: TopicPartition) -> Log | None:
        """The log of ``tp`` (opened and recovered on first use), or None if there is none.
        A partition whose name could not be a directory raises (``validate_topic_partition``)."""
        validate_topic_partition(tp)
        log = self.logs.get(tp)
        if log is not None:
            return log
        log_dir = self._dir_of.get(tp)
        if log_dir is None:
            return None
        self._check_online(log_dir)
        return self._open_log(tp, log_dir)

    def get_or_create_log(self, tp: TopicPartition, config: LogConfig | None = None) -> Log:
        """The log of ``tp``, created in the online dir with the fewest partitions if new."""
        validate_topic_partition(tp)
        if config is not None:
            self.configs[tp.topic] = config
        log = self.get_log(tp)
        if log is not None:
            return log
        online = [d for d in self.dirs if d.offline_reason is None]
        if not online:
            raise StorageError("every log dir is offline")
        counts = {id(d): 0 for d in online}
        for owner in self._dir_of.values():
            if id(owner) in counts:
                counts[id(owner)] += 1
        log_dir = min(online, key=lambda d: counts[id(d)])
        self._dir_of[tp] = log_dir
        return self._open_log(tp, log_dir)

    def _open_log(self, tp: TopicPartition, log_dir: _LogDir) -> Log:
        key = (tp.topic, tp.partition)
        try:
            log = Log.open(
                f"{log_dir.path}/{tp.dir_name}",
                self.configs.get(tp.topic, self.default_config),
                fs=self.fs,
                clock=self.clock,
                recovery_point=log_dir.recovery_points.get(key, 0),
                log_start_offset=log_dir.log_start_offsets.get(key, 0),
                high_watermark=log_dir.high_watermarks.get(key, 0),
                had_clean_shutdown=log_dir.had_clean_shutdown and tp in log_dir.unopened,
            )
        except (StorageError, MalformedCheckpointError) as exc:
            # A leader-epoch checkpoint that does not parse is a failed read, as in Kafka.
            log_dir.offline_reason = str(exc)
            raise
        log_dir.unopened.discard(tp)
        self.logs[tp] = log
        return log

    def _check_online(self, log_dir: _LogDir) -> None:
        if log_dir.offline_reason is not None:
            raise StorageError(
                f"log dir {log_dir.path} is offline: {log_dir.offline_reason}", log_dir.path
            )

    def delete_log(self, tp: TopicPartition) -> bool:
        """Close (if open) and remove the log of ``tp`` and its directory, without recovering
        it first. Returns whether it existed."""
        log_dir = self._dir_of.pop(tp, None)
        log = self.logs.pop(tp, None)
        if log_dir is None:
            return False
        self._check_online(log_dir)
        log_dir.unopened.discard(tp)
        if log is not None:
            log.close()
        path = f"{log_dir.path}/{tp.dir_name}"
        try:
            for name in self.fs.listdir(path):
                self.fs.remove(f"{path}/{name}")
            self.fs.rmdir(path)
        except FileNotFoundError:
            pass
        except OSError as exc:
            log_dir.offline_reason = f"deleting {path} failed: {exc}"
            raise StorageError(log_dir.offline_reason, log_dir.path) from exc
        for table in (log_dir.high_watermarks, log_dir.recovery_points, log_dir.log_start_offsets):
            table.pop((tp.topic, tp.partition), None)
        self.cleaner.forget(tp)
        try:
            CleanerOffsetCheckpoint(self.fs, log_dir.path, tp.topic, tp.partition).remove()
        except (StorageError, MalformedCheckpointError) as exc:
            log_dir.offline_reason = str(exc)
            raise StorageError(log_dir.offline_reason, log_dir.path) from exc
        return True

    # -- topic IDs (KIP-516) --------------------------------------------------------------

    def topic_id(self, tp: TopicPartition) -> str | None:
        """The topic ID in the partition dir's ``partition.metadata`` (None: no log here, or a
        log written before topic IDs). A file that does not parse reads as no ID."""
        log_dir = self._dir_of.get(tp)
        if log_dir is None:
            return None
        self._check_online(log_dir)
        try:
            return read_partition_metadata(self.fs, f"{log_dir.path}/{tp.dir_name}")
        except MalformedCheckpointError:
            return None

    def set_topic_id(self, tp: TopicPartition, topic_id: str) -> None:
        """Write ``partition.metadata`` for the log of ``tp`` (which must exist)."""
        log_dir = self._dir_of.get(tp)
        if log_dir is None:
            raise StorageError(f"no log of {tp} to write a topic ID for")
        self._check_online(log_dir)
        try:
            write_partition_metadata(self.fs, f"{log_dir.path}/{tp.dir_name}", topic_id)
        except StorageError as exc:
            log_dir.offline_reason = str(exc)
            raise

    # -- periodic work ----------------------------------------------------------------------

    def checkpoint_high_watermarks(self) -> None:
        """Write every dir's ``replication-offset-checkpoint``."""
        self.checkpoint_failed(self._round([_HW]).write())

    def checkpoint_recovery_points(self) -> None:
        """Write every dir's ``recovery-point-offset-checkpoint``."""
        self.checkpoint_failed(self._round([_RECOVERY_POINTS]).write())

    def checkpoint_log_start_offsets(self) -> None:
        """Write every dir's ``log-start-offset-checkpoint`` (only logs whose start moved past
        their first segment, as Kafka does)."""
        self.checkpoint_failed(self._round([_LOG_STARTS]).write())

    def checkpoint_round(self) -> CheckpointRound:
        """The three checkpoints of every online dir as of now, for ``CheckpointRound.write``
        on another thread (``replog.log.checkpoint_round``); report its failures with
        ``checkpoint_failed``."""
        return self._round([_HW, _RECOVERY_POINTS, _LOG_STARTS])

    def log_failed(self, tp: TopicPartition, reason: str) -> None:
        """A log of ``tp`` failed a write or fsync elsewhere (a worker thread): its dir goes
        offline, as Kafka takes a whole log dir offline on any I/O error in it."""
        self.storage_failed = True
        log_dir = self._dir_of.get(tp)
        if log_dir is not None and log_dir.offline_reason is None:
            log_dir.offline_reason = f"log {tp} failed: {reason}"

    @property
    def every_dir_offline(self) -> bool:
        """Whether no log dir is online (Kafka stops such a broker)."""
        return all(d.offline_reason is not None for d in self.dirs)

    def checkpoint_failed(self, failures: Iterable[tuple[str, str]]) -> None:
        """``(log dir, reason)`` from a round's write: those dirs go offline."""
        for path, reason in failures:
            self.storage_failed = True
            for log_dir in self.dirs:
                if log_dir.path == path and log_dir.offline_reason is None:
                    log_dir.offline_reason = reason

    def _round(self, kinds: list[_CheckpointKind]) -> CheckpointRound:
        files = []
        for log_dir in self.dirs:
            if log_dir.offline_reason is not None:
                continue
            logs = [
                (tp, log)
                for tp, log in self.logs.items()
                if self._dir_of.get(tp) is log_dir and not log.is_offline
            ]
            for kind in kinds:
                table: dict[tuple[str, int], int] = getattr(log_dir, kind.table)
                for tp, log in logs:
                    key = (tp.topic, tp.partition)
                    if kind.include(log):
                        table[key] = kind.value(log)
                    else:
                        table.pop(key, None)
                path = f"{log_dir.path}/{kind.file_name}"
                files.append(PendingCheckpoint(log_dir.path, path, dict(table)))
        return self._checkpoints.round(files)

    def flush_all(self) -> None:
        """fsync every open log (each log goes offline on its own error)."""
        for log in self._open_logs():
            log.flush()

    def delete_old_segments(self) -> int:
        """Apply retention to every open log; returns the number of segments deleted. A log
        that fails goes offline and the others still run; the first `StorageError` is raised
        at the end."""
        deleted = 0
        errors: list[StorageError] = []
        for log in self._open_logs():
            try:
                deleted += log.delete_old_segments()
            except StorageError as exc:
                errors.append(exc)
        if errors:
            raise errors[0]
        return deleted

    def remove_expired_producers(self) -> int:
        """Drop idle idempotent producers' state in every open log (Kafka's
        producer.id.expiration.ms duty); returns how many producer ids went."""
        return sum(log.remove_expired_producers() for log in self._open_logs())

    def begin_cleaning(self, map_memory_bytes: int) -> CleaningTask | None:
        """Plan a cleaning of the dirtiest compacted log (`replog.log.log_cleaner`); run the
        task anywhere, then hand it to `complete_cleaning` on this thread. None: nothing to
        clean now, or a cleaning is running."""
        logs = {tp: log for tp, log in self.logs.items() if not log.is_offline}
        return self.cleaner.maybe_begin(logs, self.clock.wall_ms(), map_memory_bytes)

    def complete_cleaning(self, task: CleaningTask) -> CleaningResult:
        """Swap a finished cleaning in (or discard it if its log changed meanwhile). A log
        that fails the swap goes offline (`StorageError`)."""
        return self.cleaner.complete(self.logs, task)

    def _open_logs(self) -> Iterable[Log]:
        return [log for log in self.logs.values() if not log.is_offline]

    # -- shutdown ---------------------------------------------------------------------------

    def shutdown(self, broker_epoch: int = 0) -> None:
        """Clean shutdown: flush, checkpoint, close, and mark clean the dirs that may be."""
        errors: list[StorageError] = []
        for log in self._open_logs():
            try:
                log.flush()
            except StorageError as exc:
                errors.append(exc)
        self.checkpoint_high_watermarks()
        self.checkpoint_recovery_points()
        self.checkpoint_log_start_offsets()
        for tp, log in list(self.logs.items()):
            try:
                log.close()
            except StorageError as exc:
                errors.append(exc)  # the log is offline now: its dir gets no marker below
            if log.is_offline:
                owner = self._dir_of.get(tp)
                if owner is not None and owner.offline_reason is None:
                    owner.offline_reason = f"log {tp} went offline"
        self.logs.clear()
        for log_dir in self.dirs:
            clean = log_dir.had_clean_shutdown or not log_dir.unopened
            if log_dir.offline_reason is None and clean:
                try:
                    write_clean_shutdown_marker(self.fs, log_dir.path, broker_epoch)
                except StorageError as exc:
                    errors.append(exc)
        if errors:
            raise errors[0]

    @property
    def offline_dirs(self) -> dict[str, str]:
        """Offline log dirs and why."""
        return {d.path: d.offline_reason for d in self.dirs if d.offline_reason is not None}


def _scan_dir(fs: FileSystem, path: str) -> _LogDir:
    """Read a log dir's marker and checkpoints and list its partition directories. A dir that
    cannot be created, read or listed is offline from the start."""
    try:
        return _read_dir(fs, path)
    except (OSError, StorageError) as exc:
        return _LogDir(path, False, {}, {}, {}, set(), offline_reason=f"unreadable: {exc}")


def _read_dir(fs: FileSystem, path: str) -> _LogDir:
    fs.makedirs(path)
    had_clean = read_and_delete_clean_shutdown_marker(fs, path) is not None
    offline_reason = None
    try:
        hws = OffsetCheckpointFile(fs, f"{path}/{HW_CHECKPOINT}").read()
    except MalformedCheckpointError as exc:
        hws, offline_reason = {}, f"unreadable HW checkpoint: {exc}"
    recovery_points = _read_or_empty(fs, f"{path}/{RECOVERY_POINT_CHECKPOINT}")
    log_starts = _read_or_empty(fs, f"{path}/{LOG_START_CHECKPOINT}")
    if recovery_points is None:
        had_clean = False
        recovery_points = {}  # unreadable: nothing is known flushed, recover every log from 0
    unopened = set()
    for name in fs.listdir(path):
        tp = parse_partition_dir(name)
        if tp is not None:
            unopened.add(tp)
    return _LogDir(
        path=path,
        had_clean_shutdown=had_clean,
        high_watermarks=hws,
        recovery_points=recovery_points,
        log_start_offsets=log_starts or {},
        unopened=unopened,
        offline_reason=offline_reason,
    )


def _read_or_empty(fs: FileSystem, path: str) -> dict[tuple[str, int], int] | None:
    """A checkpoint that may be lost without losing data: None when it cannot be parsed."""
    try:
        return OffsetCheckpointFile(fs, path).read()
    except MalformedCheckpointError:
        return None
