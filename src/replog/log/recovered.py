"""`RecoveredLog`: one partition directory read and recovered at open, as what a `Log` starts
from (``Log.open`` builds the log from it).

The steps, in order: read the leader-epoch checkpoint (the epoch cache) and the log's
``cleaner-offset-checkpoint`` entry (the clean offset: below it offsets may be missing); load
and recover the segments with both (``replog.log.loader``: what it cuts is in its
`RecoveryReport`); rebuild the producer state from its snapshots and the batches after them
(``replog.log.producer_manager``), trusting the log end after a clean shutdown and the recovery
point otherwise. A damaged batch the producer state would be rebuilt from fails the open with
`CorruptRecordError`: nothing is cut, the segments are closed, and the partition's caller keeps
it out of service. Any other OS error fails it with `StorageError`.
"""

from __future__ import annotations

import attrs

from replog.clock import Clock
from replog.errors import CorruptRecordError, StorageError
from replog.log.checkpoints import (
    LEADER_EPOCH_CHECKPOINT_FILE,
    CleanerOffsetCheckpoint,
    LeaderEpochCheckpointFile,
    clean_checkpoint_of,
)
from replog.log.config import LogConfig
from replog.log.epoch_cache import LeaderEpochCache
from replog.log.fs import FileSystem
from replog.log.loader import RecoveryReport, load_segments
from replog.log.producer_manager import ProducerStateManager
from replog.log.segment_list import SegmentList

__all__ = ["RecoveredLog"]


@attrs.frozen
class RecoveredLog:
    """What a partition directory holds once recovered (see the module docstring)."""

    segments: SegmentList
    epoch_cache: LeaderEpochCache
    producers: ProducerStateManager
    log_start_offset: int
    log_end_offset: int
    recovery_point: int
    report: RecoveryReport
    #: the clean offset as the checkpoint holds it (it may lie past a log end a crash cut)
    clean_offset: int
    clean_checkpoint: CleanerOffsetCheckpoint | None

    @classmethod
    def open(
        cls,
        fs: FileSystem,
        dir_path: str,
        config: LogConfig,
        *,
        clock: Clock,
        recovery_point: int,
        log_start_offset: int,
        had_clean_shutdown: bool,
    ) -> RecoveredLog:
        """Read and recover ``dir_path`` (creating it if needed; module docstring)."""
        try:
            fs.makedirs(dir_path)
            checkpoint = LeaderEpochCheckpointFile(fs, f"{dir_path}/{LEADER_EPOCH_CHECKPOINT_FILE}")
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
                # A batch the producer state must be rebuilt from is damaged (below the
                # recovery point nothing was checked at load): the log cannot open; nothing
                # was cut.
                for segment in loaded.segments.values():
                    segment.close_without_trim()
                raise
        except OSError as exc:
            raise StorageError(f"cannot open log {dir_path}: {exc}", dir_path) from exc
        return cls(
            segments=loaded.segments,
            epoch_cache=epoch_cache,
            producers=producers,
            log_start_offset=loaded.log_start_offset,
            log_end_offset=loaded.log_end_offset,
            recovery_point=loaded.recovery_point,
            report=loaded.report,
            clean_offset=clean_offset,
            clean_checkpoint=clean_checkpoint,
        )
