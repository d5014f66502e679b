"""Loading a partition directory at open, and recovery after an unclean shutdown.

Theory of operation: the ``.log`` files are the truth; indexes and the epoch cache are caches
that can be rebuilt from them. After a clean shutdown (marker present) everything is trusted and
only the active segment's end is read, from its last index entry on: the segment is recovered if
those batches do not frame up to the end of the file or the last one's base offset does not
follow from their offset deltas (the log end offset is taken from it). Otherwise every segment
from the one holding the recovery point onwards is re-validated batch by batch (size, magic,
CRC-32C, dense offsets, a partition leader epoch that does not fall; see `BatchWalk`); the first
invalid or partial batch ends the log: its segment is cut there and every later segment is
deleted. So does a segment that ends before the next one begins (a crash loses the unsynced tail
of every rolled segment, not just the last one's), so offsets stay dense -- except below the
log's clean offset (``gaps_below``), where the log cleaner removed records and offsets may be
missing, between batches and at a segment's end. Data below the recovery point was fsynced and
is not scanned again here (reads check it, see `LogSegment`).

Before any of that, the leftovers of an interrupted cleaning are settled as Kafka does
(LogLoader): ``.cleaned`` files (a cleaning that never started its swap) are deleted, and so is
every ``.swap`` file at or above the lowest ``.cleaned`` offset (a swap that had not finished
renaming its files); each remaining ``.swap`` segment replaces the old segment files in
``[its base offset, its next offset)`` and is renamed into place. ``.deleted`` and ``.tmp``
files are deleted.

The loader never guesses: what it cut is returned in a `RecoveryReport`.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

import attrs
from sortedcontainers import SortedDict

from replog.clock import Clock
from replog.errors import CorruptIndexError, InvalidOffsetError
from replog.log.batch_walk import EpochStarts, scan_headers
from replog.log.config import LogConfig
from replog.log.epoch_cache import LeaderEpochCache
from replog.log.fs import FileSystem
from replog.log.records import NO_PARTITION_LEADER_EPOCH
from replog.log.segment import LogSegment, Recovered, offset_from_file_name
from replog.log.segment_list import SegmentList

__all__ = [
    "CLEANED_SUFFIX",
    "LoadedLog",
    "RecoveryReport",
    "SWAP_SUFFIX",
    "complete_interrupted_swaps",
    "load_segments",
]

_log = logging.getLogger(__name__)

_SEGMENT_SUFFIXES = (".log", ".index", ".timeindex")
_STRAY_SUFFIXES = (".deleted", ".tmp")
CLEANED_SUFFIX = ".cleaned"
SWAP_SUFFIX = ".swap"
#: the first read of `_log_end_misread` (the batches after the last index entry)
_TAIL_READ = 8 * 1024


@attrs.frozen
class RecoveryReport:
    """What loading a log did. ``bytes_truncated`` and ``deleted_segments`` are what was cut."""

    had_clean_shutdown: bool
    recovered_segments: tuple[int, ...] = ()
    bytes_truncated: int = 0
    truncated_segment: int | None = None
    truncation_reason: str | None = None
    deleted_segments: tuple[int, ...] = ()
    deleted_stray_files: tuple[str, ...] = ()
    #: base offsets of cleaned segments whose interrupted swap the load completed
    completed_swaps: tuple[int, ...] = ()
    rebuilt_indexes: tuple[int, ...] = ()
    restarted_at_log_start: bool = False
    log_end_offset: int = 0

    @property
    def interrupted_cleaning(self) -> bool:
        """Whether a log cleaning was cut short by a crash (its files were found)."""
        names = self.deleted_stray_files
        return bool(self.completed_swaps) or any(
            name.endswith((CLEANED_SUFFIX, SWAP_SUFFIX)) for name in names
        )

    @property
    def cut_anything(self) -> bool:
        """Whether recovery removed any data."""
        return bool(self.bytes_truncated or self.deleted_segments or self.restarted_at_log_start)

    def describe(self) -> str:
        """A one-paragraph human summary."""
        if not self.recovered_segments and not self.cut_anything:
            kind = "clean shutdown" if self.had_clean_shutdown else "nothing to recover"
            return f"{kind}; log end offset {self.log_end_offset}"
        parts = [f"recovered {len(self.recovered_segments)} segment(s)"]
        if self.bytes_truncated:
            parts.append(
                f"cut {self.bytes_truncated} byte(s) from segment {self.truncated_segment}"
                + (f" ({self.truncation_reason})" if self.truncation_reason else "")
            )
        if self.deleted_segments:
            parts.append(f"deleted later segment(s) {list(self.deleted_segments)}")
        if self.restarted_at_log_start:
            parts.append("log end was below the log start offset: restarted empty")
        parts.append(f"log end offset {self.log_end_offset}")
        return "; ".join(parts)


@attrs.frozen
class LoadedLog:
    """The result of `load_segments`: what the `Log` starts from."""

    segments: SegmentList
    log_end_offset: int
    log_start_offset: int
    recovery_point: int
    report: RecoveryReport


def load_segments(
    fs: FileSystem,
    dir_path: str,
    config: LogConfig,
    epoch_cache: LeaderEpochCache,
    *,
    clock: Clock,
    recovery_point: int,
    log_start_offset: int,
    had_clean_shutdown: bool,
    gaps_below: int = 0,
) -> LoadedLog:
    """Open every segment in ``dir_path`` and recover what needs it (module docstring, in order).
    Offsets below ``gaps_below`` (the log's clean offset) may be missing."""
    stray = _delete_stray_files(fs, dir_path)
    completed = complete_interrupted_swaps(fs, dir_path, stray)
    segments, needs_recovery = _open_segments(fs, dir_path, config, clock, stray)
    epoch_starts = EpochStarts.of(epoch_cache.entries)
    for segment in segments.values():
        segment.epoch_starts = epoch_starts
        segment.indexes_expected_valid = had_clean_shutdown
        segment.gaps_below = gaps_below
    _link_segments(segments)

    progress = _Progress()
    if had_clean_shutdown:
        for base in sorted(needs_recovery):
            _build_missing_indexes(segments[base])
            progress.rebuilt.append(base)
    else:
        _recover_unflushed(
            segments, needs_recovery, epoch_cache, recovery_point, gaps_below, progress
        )

    def new_start_segment() -> LogSegment:
        return LogSegment.open(fs, dir_path, log_start_offset, config, clock, create=True)

    if not segments:
        segments[log_start_offset] = new_start_segment()
    next_offset, restarted = _settle_end(
        segments, epoch_cache, progress, log_start_offset, new_start_segment
    )
    segments.peekitem(-1)[1].resize_indexes(config.segment_index_bytes)
    epoch_cache.truncate_from_end(next_offset)
    start = max(log_start_offset, segments.peekitem(0)[0])
    epoch_cache.truncate_from_start(start)
    point = next_offset if had_clean_shutdown else min(recovery_point, next_offset)
    report = RecoveryReport(
        had_clean_shutdown=had_clean_shutdown,
        recovered_segments=tuple(progress.recovered),
        bytes_truncated=progress.truncated_bytes,
        truncated_segment=progress.truncated_segment,
        truncation_reason=progress.truncation_reason,
        deleted_segments=tuple(progress.deleted),
        deleted_stray_files=tuple(stray),
        completed_swaps=tuple(completed),
        rebuilt_indexes=tuple(progress.rebuilt),
        restarted_at_log_start=restarted,
        log_end_offset=next_offset,
    )
    return LoadedLog(SegmentList(segments.values()), next_offset, start, max(point, 0), report)


@attrs.define
class _Progress:
    """What a load did so far (becomes the ``RecoveryReport``)."""

    recovered: list[int] = attrs.field(factory=list)
    rebuilt: list[int] = attrs.field(factory=list)
    deleted: list[int] = attrs.field(factory=list)
    truncated_bytes: int = 0
    truncated_segment: int | None = None
    truncation_reason: str | None = None

    def truncated(self, base: int, outcome: Recovered) -> None:
        self.truncated_bytes, self.truncated_segment = outcome.bytes_truncated, base
        self.truncation_reason = outcome.truncation_reason


def _open_segments(
    fs: FileSystem, dir_path: str, config: LogConfig, clock: Clock, stray: list[str]
) -> tuple[SortedDict, set[int]]:
    """Open every ``.log`` file; remove orphan index files (listed in ``stray``). Returns the
    segments by base offset and the bases whose offset index is missing."""
    segments: SortedDict = SortedDict()
    needs_recovery: set[int] = set()
    names = set(fs.listdir(dir_path))
    for name in sorted(names):
        suffix = name[name.find(".") :] if "." in name else ""
        if suffix not in _SEGMENT_SUFFIXES or not name[: name.find(".")].isdigit():
            continue
        base = offset_from_file_name(name)
        if suffix != ".log":
            if f"{base:020d}.log" not in names:
                fs.remove(f"{dir_path}/{name}")  # an orphan index
                stray.append(name)
            continue
        segments[base] = LogSegment.open(fs, dir_path, base, config, clock, create=False)
        if f"{base:020d}.index" not in names:
            needs_recovery.add(base)
    return segments, needs_recovery


def _recover_unflushed(
    segments: SortedDict,
    needs_recovery: set[int],
    epoch_cache: LeaderEpochCache,
    recovery_point: int,
    gaps_below: int,
    progress: _Progress,
) -> None:
    """After an unclean shutdown: recover every segment from the one holding the recovery
    point on, and cut the log where the first damaged or short segment ends."""
    start_key = _floor_key(segments, recovery_point)
    to_recover = [b for b in segments if start_key is None or b >= start_key]
    for base in sorted(needs_recovery):
        if base not in to_recover:
            _build_missing_indexes(segments[base])
            progress.rebuilt.append(base)
    # The epoch of the batch before the first recovered one (from the epoch cache, which
    # is written before the batches of a new epoch): no recovered batch may fall below it.
    last_epoch = _epoch_before(epoch_cache, to_recover[0]) if to_recover else -1
    for position, base in enumerate(to_recover):
        segment = segments[base]
        outcome = _recover_segment(segment, epoch_cache, last_epoch)
        cut, last_epoch = outcome.bytes_truncated, outcome.last_epoch
        progress.recovered.append(base)
        later_bases = to_recover[position + 1 :]
        # A crash loses the unsynced tail of *every* segment: a rolled segment can come back
        # short (even empty) without any bytes to cut, while later segments survive. The
        # log must end where this segment ends, or offsets would be missing in the middle.
        # (Below the clean offset the cleaner may have removed the segment's last batches.)
        ends_early = (
            bool(later_bases)
            and later_bases[0] > gaps_below
            and segment.read_next_offset() != later_bases[0]
        )
        if cut > 0 or ends_early:
            if cut > 0:
                progress.truncated(base, outcome)
            for later in later_bases:
                segments.pop(later).delete()
                progress.deleted.append(later)
            segment.next_base_offset = None
            return


def _settle_end(
    segments: SortedDict,
    epoch_cache: LeaderEpochCache,
    progress: _Progress,
    log_start_offset: int,
    new_start_segment: Callable[[], LogSegment],
) -> tuple[int, bool]:
    """Find the log end offset (recovering the active segment if its batches do not frame up
    to its end), and restart the log at ``log_start_offset`` if everything is below it.
    Returns the log end offset and whether the log was restarted."""
    active: LogSegment = segments.peekitem(-1)[1]
    next_offset, end_position = _read_end(active, progress.rebuilt)
    if active.base_offset not in progress.recovered and (
        end_position != active.size_bytes or _log_end_misread(active)
    ):
        # After a clean shutdown the active segment's end is read from its last index entry
        # on, by the batch headers; batches that do not frame up to the end of the file (a
        # damaged length), or a last batch whose base offset does not follow from the deltas
        # (flipped: it is outside the CRC), would give a wrong log end offset and bury the
        # next appends behind junk: recover it.
        outcome = active.recover(epoch_cache, _epoch_before(epoch_cache, active.base_offset))
        progress.recovered.append(active.base_offset)
        progress.truncated(active.base_offset, outcome)
        next_offset = active.read_next_offset()
    if next_offset >= log_start_offset:
        return next_offset, False
    # Segments were removed behind our back: nothing below the log start is trustworthy.
    for base in list(segments):
        segments.pop(base).delete()
        progress.deleted.append(base)
    segments[log_start_offset] = new_start_segment()
    epoch_cache.clear_and_flush()
    return log_start_offset, True


def _log_end_misread(active: LogSegment) -> bool:
    """Whether the log end offset `_read_end` took from the last batch's header (its base
    offset plus its last offset delta) disagrees with the one its batches' deltas give,
    counted from the active segment's last index entry (which names the last offset of the
    batch at its position; the segment's base with no entry). A base offset is outside the
    CRC: a flipped one in the last batch gives a wrong log end, while one further back
    changes nothing here (reads find it, as anywhere below the recovery point). Below the
    clean offset a batch may start later (offsets the cleaner removed). Only the headers from
    the last entry on are read: about ``index.interval.bytes``."""
    entry = active.offset_index.last_entry
    next_offset = None if entry.position > 0 else active.base_offset
    header_end = None
    for found in scan_headers(active.log_file, entry.position, active.size_bytes, _TAIL_READ):
        delta = found.last_offset - found.base_offset
        if delta < 0:
            return True
        if next_offset is None:  # the batch the entry names: it ends at the entry's offset
            next_offset = entry.offset - delta
        elif next_offset < found.base_offset <= active.gaps_below:
            next_offset = found.base_offset
        next_offset += delta + 1
        header_end = found.last_offset + 1
    return header_end is not None and header_end != next_offset


def _recover_segment(
    segment: LogSegment, epoch_cache: LeaderEpochCache, last_epoch: int
) -> Recovered:
    """Recover one segment; a segment whose indexes cannot be rebuilt is emptied."""
    try:
        return segment.recover(epoch_cache, last_epoch)
    except (InvalidOffsetError, CorruptIndexError) as exc:
        size = segment.size_bytes
        segment.log_file.truncate(0)
        segment.size_bytes = 0
        segment.recover(epoch_cache, last_epoch)
        return Recovered(max(size, 1), last_epoch, f"its indexes could not be rebuilt: {exc}")


def _read_end(active: LogSegment, rebuilt: list[int]) -> tuple[int, int]:
    """`LogSegment.read_end` of the active segment; a corrupt index there is rebuilt on the
    way (and reported)."""
    found = active.read_end()
    if active.indexes_rebuilt and active.base_offset not in rebuilt:
        rebuilt.append(active.base_offset)
    return found


def _epoch_before(epoch_cache: LeaderEpochCache, offset: int) -> int:
    """The leader epoch of the batch before ``offset`` per the epoch cache (-1 if none)."""
    epoch = epoch_cache.epoch_for_offset(offset - 1) if offset > 0 else None
    return NO_PARTITION_LEADER_EPOCH if epoch is None else epoch


def _build_missing_indexes(segment: LogSegment) -> None:
    """Index a segment whose ``.index`` is missing (Kafka recovers it; the data is not cut
    here: below the recovery point it was fsynced, and a bad batch is for reads to report)."""
    segment.rebuild_indexes("no index file", log_level=logging.INFO)


def _link_segments(segments: SortedDict) -> None:
    """Tell each segment where the next one starts (the end of its offset range)."""
    bases = list(segments)
    for position, base in enumerate(bases):
        segments[base].next_base_offset = bases[position + 1] if position + 1 < len(bases) else None


def _delete_stray_files(fs: FileSystem, dir_path: str) -> list[str]:
    """Remove leftovers of interrupted deletes and checkpoint writes."""
    removed = []
    for name in fs.listdir(dir_path):
        if name.endswith(_STRAY_SUFFIXES):
            fs.remove(f"{dir_path}/{name}")
            removed.append(name)
    return removed


def complete_interrupted_swaps(fs: FileSystem, dir_path: str, removed: list[str]) -> list[int]:
    """Settle an interrupted cleaning (module docstring): delete ``.cleaned`` files and the
    ``.swap`` files at or above the lowest of them, then let each remaining ``.swap`` segment
    replace the old files in its offset range. Deleted names go to ``removed``; returns the
    base offsets of the swaps completed."""
    names = fs.listdir(dir_path)
    cleaned = [n for n in names if n.endswith(CLEANED_SUFFIX) and _has_offset(n)]
    swaps = [n for n in names if n.endswith(SWAP_SUFFIX) and _has_offset(n)]
    min_cleaned = min((offset_from_file_name(n) for n in cleaned), default=None)
    valid_swaps = []
    for name in swaps:
        if min_cleaned is not None and offset_from_file_name(name) >= min_cleaned:
            fs.remove(f"{dir_path}/{name}")  # its swap never finished renaming its files
            removed.append(name)
        else:
            valid_swaps.append(name)
    for name in cleaned:
        fs.remove(f"{dir_path}/{name}")
        removed.append(name)
    ranges = []
    for name in valid_swaps:
        if name.endswith(".log" + SWAP_SUFFIX):
            base = offset_from_file_name(name)
            ranges.append((base, _next_offset_of(fs, f"{dir_path}/{name}", base)))
    if ranges:
        low, high = min(r[0] for r in ranges), max(r[1] for r in ranges)
        for name in fs.listdir(dir_path):
            suffix = name[name.find(".") :] if "." in name else ""
            in_range = _has_offset(name) and low <= offset_from_file_name(name) < high
            if suffix in _SEGMENT_SUFFIXES and in_range:
                # compacted, not yet deleted (or a cleaned index already renamed: the segment
                # finds it missing and rebuilds it)
                fs.remove(f"{dir_path}/{name}")
    for name in valid_swaps:
        fs.rename(f"{dir_path}/{name}", f"{dir_path}/{name.removesuffix(SWAP_SUFFIX)}")
    if valid_swaps or cleaned:
        fs.fsync_dir(dir_path)
    if ranges:
        _log.info("%s: completed the swap of cleaned segment(s) %s", dir_path, ranges)
    return sorted(r[0] for r in ranges)


def _next_offset_of(fs: FileSystem, path: str, base_offset: int) -> int:
    """The offset after the last whole batch of the ``.log`` file at ``path`` (its base
    offset if it has none), read from the batch headers (no index is opened or created)."""
    handle = fs.open(path, create=False)
    try:
        next_offset = base_offset
        for found in scan_headers(handle, 0, handle.size(), 64 * 1024):
            next_offset = found.last_offset + 1
        return next_offset
    finally:
        handle.close()


def _has_offset(name: str) -> bool:
    """Whether a file name starts with a segment's base offset (``<digits>.``)."""
    return "." in name and name[: name.find(".")].isdigit()


def _floor_key(segments: SortedDict, offset: int) -> int | None:
    """The base offset of the segment holding ``offset`` (the first one if it is below all)."""
    if not segments:
        return None
    index = segments.bisect_right(offset) - 1
    return int(segments.keys()[max(index, 0)])
