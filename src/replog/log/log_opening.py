"""Opening a partition log: read its checkpoints (leader epochs, the clean offset), load and
recover its segments (``replog.log.loader``), rebuild its producer state, and build the
``Log`` (``Log.open`` is the public entry). A damaged batch the producer state would be rebuilt
from (`read_producer_batches`) fails the open with `CorruptRecordError`: the partition's caller
keeps it out of service (``replog.broker.replica_manager``); the files are left as they are."""

from __future__ import annotations

from typing import TYPE_CHECKING

from replog.clock import Clock
from replog.errors import CorruptRecordError, StorageError
from replog.log.checkpoints import LeaderEpochCheckpointFile, clean_checkpoint_of
from replog.log.config import LogConfig
from replog.log.epoch_cache import LeaderEpochCache
from replog.log.fs import FileSystem
from replog.log.loader import load_segments
from replog.log.producer_manager import ProducerStateManager

if TYPE_CHECKING:
    from replog.log.log import Log

__all__ = ["LEADER_EPOCH_CHECKPOINT", "open_log"]

LEADER_EPOCH_CHECKPOINT = "leader-epoch-checkpoint"


def open_log(
    log_type: type[Log],
    dir_path: str,
    config: LogConfig,
    *,
    fs: FileSystem,
    clock: Clock,
    recovery_point: int,
    log_start_offset: int,
    high_watermark: int,
    had_clean_shutdown: bool,
) -> Log:
    """See ``Log.open``."""
    try:
        fs.makedirs(dir_path)
        checkpoint = LeaderEpochCheckpointFile(fs, f"{dir_path}/{LEADER_EPOCH_CHECKPOINT}")
        epoch_cache = LeaderEpochCache(checkpoint, checkpoint.read())
        clean_checkpoint = clean_checkpoint_of(fs, dir_path)
        clean_offset = 0 if clean_checkpoint is None else clean_checkpoint.read() or 0
        loaded = load_segments(
            fs,
            dir_path,
            config,
            epoch_cache,
            clock=clock,
            recovery_point=recovery_point,
            log_start_offset=log_start_offset,
            had_clean_shutdown=had_clean_shutdown,
            gaps_below=clean_offset,
        )
        try:
            producers = ProducerStateManager.load(
                fs,
                dir_path,
                loaded.segments,
                log_end_offset=loaded.log_end_offset,
                trusted_offset=loaded.recovery_point,
                now_ms=clock.wall_ms(),
                expiration_ms=config.producer_id_expiration_ms,
            )
        except CorruptRecordError:
            # A batch the producer state must be rebuilt from is damaged (below the recovery
            # point nothing was checked at load): the log cannot open; nothing was cut.
            for segment in loaded.segments.values():
                segment.close_without_trim()
            raise
    except OSError as exc:
        raise StorageError(f"cannot open log {dir_path}: {exc}", dir_path) from exc
    hw = min(max(high_watermark, loaded.log_start_offset), loaded.log_end_offset)
    log = log_type(
        dir_path=dir_path,
        config=config,
        fs=fs,
        clock=clock,
        segments=loaded.segments,
        epoch_cache=epoch_cache,
        log_start_offset=loaded.log_start_offset,
        recovery_point=loaded.recovery_point,
        high_watermark=hw,
        recovery_report=loaded.report,
        producers=producers,
        next_offset=loaded.log_end_offset,
        clean_offset=clean_offset,
        clean_checkpoint=clean_checkpoint,
        clean_from_log_start=loaded.report.interrupted_cleaning,
    )
    if clean_offset > log.log_end_offset:
        # What the clean offset covered was lost (the entry was written before data that
        # never became durable): new appends there are dense again.
        log.clean_from_log_start = True
        with log.storage_errors("cleaner checkpoint write"):
            log.set_clean_offset(log.log_end_offset)
    return log
