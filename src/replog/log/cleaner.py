"""The log cleaner's heavy pass: one cleaning of one compacted log, off the event loop.

Theory of operation (Kafka's ``LogCleaner``, from its rules, not its code). A compacted log is a
*clean* section, already cleaned, followed by a *dirty* section; the part of the dirty section
the cleaner may touch ends at the *first uncleanable offset* (never the active segment, never
past the high watermark; see `replog.log.log_cleaner`, which plans cleanings and swaps their
output in). A cleaning:

1. **maps** the dirty section, ``[first_dirty_offset, first_uncleanable_offset)``: for every
   record with a key, key digest -> its latest offset (`OffsetMap`, bounded by the dedupe
   buffer). If the map fills, the cleaning ends where it stopped (``end_offset``) and the rest
   of the dirty section waits for the next round;
2. **groups** the segments below ``end_offset`` (clean section included) so that each group's
   log bytes stay within ``segment.bytes``, its index bytes within ``segment.index.bytes`` and
   its offsets within a relative offset's int32;
3. **copies** each group into one new segment named after the group's first base offset with
   the suffix ``.cleaned``, keeping a record when its offset is past the map's latest offset,
   or it has a key whose latest offset (per the map) is its own, and it has a value or is a
   tombstone still within its delete horizon. Records without a key go (a compacted topic
   refuses them at produce; older ones are dropped, as Kafka drops them). A batch keeps its
   base offset and last offset delta (`replog.log.batch_rewrite`); a batch that loses every
   record goes, except an empty header stays for the last batch of a producer that is still
   active (its sequence numbers) and for the batch that ends at the first uncleanable offset
   (the end of the cleaned offsets stays visible). Each new segment is indexed as it is
   written, then trimmed and fsynced before the pass reports.

Everything here reads and writes files through the `FileSystem` with descriptors of its own and
never touches the `Log` object, so it can run on a worker thread while the loop appends to the
active segment. The loop may abort it (`CleaningTask.abort`); the pass notices between chunks,
and no file is created, resized or closed by path after ``abort`` returns, so the loop may then
delete the log's directory.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator

import attrs

from replog.clock import Clock
from replog.errors import CorruptRecordError, ReplogError
from replog.log.batch_rewrite import delete_horizon_ms, empty_batch, rewrite_batch
from replog.log.config import LogConfig
from replog.log.decoding import decode_columns
from replog.log.fs import FileHandle, FileSystem
from replog.log.loader import CLEANED_SUFFIX
from replog.log.offset_map import OffsetMap, key_digest
from replog.log.records import (
    MAGIC,
    RECORD_BATCH_OVERHEAD,
    BatchHeader,
    read_header,
)
from replog.log.segment import BatchMeta, LogSegment, log_file_name

__all__ = [
    "CleanedGroup",
    "CleanerStats",
    "CleaningAbortedError",
    "CleaningOutcome",
    "CleaningPlan",
    "CleaningTask",
    "PRODUCER_ID_EXPIRATION_MS",
    "SourceSegment",
    "group_segments_by_size",
]

PRODUCER_ID_EXPIRATION_MS = 86_400_000
"""Kafka's ``producer.id.expiration.ms``: a producer whose last batch is older than this is no
longer active, and its last batch need not be kept."""
_CHUNK_BYTES = 1 << 20
_OUTPUT_FLUSH_BYTES = 1 << 20
_INT32_MAX = 2**31 - 1
_OFFSET_ENTRY_BYTES, _TIME_ENTRY_BYTES = 8, 12


class CleaningAbortedError(ReplogError):
    """The loop aborted the cleaning (the log was truncated, cut by retention, closed)."""


@attrs.frozen
class SourceSegment:
    """What the pass needs of one segment, captured on the loop when the cleaning is planned."""

    base_offset: int
    #: where its offsets end: the next segment's base offset
    next_base_offset: int
    size_bytes: int
    offset_index_bytes: int
    time_index_bytes: int
    last_modified_ms: int
    #: where the map phase starts reading it (the batch holding the first dirty offset)
    map_start_position: int = 0


@attrs.frozen
class CleaningPlan:
    """One cleaning, as planned on the loop (see the module docstring)."""

    dir_path: str
    fs: FileSystem
    config: LogConfig
    clock: Clock
    #: every segment below ``first_uncleanable_offset``, in offset order
    segments: tuple[SourceSegment, ...]
    first_dirty_offset: int
    first_uncleanable_offset: int
    #: the log's clean offset: below it the source may have offset gaps already
    gaps_below: int
    #: the cleaning's wall time: delete horizons are set from and compared with it
    now_ms: int
    map_memory_bytes: int
    producer_expiration_ms: int = PRODUCER_ID_EXPIRATION_MS


@attrs.frozen
class CleanedGroup:
    """Source segments ``old_bases`` became one segment, ``<first base>.log.cleaned``."""

    old_bases: tuple[int, ...]
    next_base_offset: int
    last_modified_ms: int

    @property
    def base_offset(self) -> int:
        """The new segment's base offset: the group's first."""
        return self.old_bases[0]


@attrs.define
class CleanerStats:
    """What a cleaning read and wrote (Kafka's cleaner log line)."""

    map_bytes_read: int = 0
    map_records_read: int = 0
    bytes_read: int = 0
    records_read: int = 0
    bytes_written: int = 0
    records_written: int = 0
    keyless_records: int = 0
    map_utilization: float = 0.0
    elapsed_ms: int = 0


@attrs.frozen
class CleaningOutcome:
    """A finished pass: the dirty section is clean up to ``end_offset`` (exclusive) once the
    ``groups`` are swapped in."""

    end_offset: int
    groups: tuple[CleanedGroup, ...]
    stats: CleanerStats


@attrs.define(eq=False)
class CleaningTask:
    """A cleaning between the loop and a worker: ``run`` once (any thread), then read
    ``outcome`` or ``error``. ``generation`` is the log's ``cleaning_generation`` when planned."""

    plan: CleaningPlan
    generation: int
    outcome: CleaningOutcome | None = None
    error: BaseException | None = None
    _aborted: bool = False
    _lock: threading.Lock = attrs.field(factory=threading.Lock)

    @property
    def aborted(self) -> bool:
        """Whether the loop aborted it."""
        return self._aborted

    def abort(self) -> None:
        """Stop the pass (loop side): once this returns the pass creates, resizes and closes no
        file by path; it gives up at its next chunk."""
        with self._lock:
            self._aborted = True

    def run(self) -> None:
        """Clean (worker side). Never raises: sets ``outcome``, or ``error``
        (`CleaningAbortedError` after an abort)."""
        try:
            self.outcome = _clean(self)
        except Exception as exc:
            self.error = CleaningAbortedError("cleaning aborted") if self._aborted else exc

    def check_aborted(self) -> None:
        """Raise `CleaningAbortedError` if the loop aborted the pass."""
        if self._aborted:
            raise CleaningAbortedError("cleaning aborted")

    @contextlib.contextmanager
    def guard(self) -> Iterator[None]:
        """Hold off ``abort`` while files are created, resized or closed by path; raise
        `CleaningAbortedError` instead if it came first."""
        with self._lock:
            self.check_aborted()
            yield

    def lock(self) -> threading.Lock:
        """The lock ``abort`` takes (hold it to look at ``aborted`` and act before it moves)."""
        return self._lock


# ------------------------------------------------------------------------------------ the pass


@attrs.define
class _Producers:
    """The last batch of each producer id seen so far: pid -> (last offset, max timestamp)."""

    last: dict[int, tuple[int, int]] = attrs.field(factory=dict)

    def note(self, header: BatchHeader) -> None:
        if header.producer_id >= 0:
            self.last[header.producer_id] = (header.last_offset, header.max_timestamp)

    def is_last_of_active(self, header: BatchHeader, now_ms: int, expiration_ms: int) -> bool:
        found = self.last.get(header.producer_id)
        return (
            found is not None
            and found[0] == header.last_offset
            and now_ms - found[1] <= expiration_ms
        )


def _clean(task: CleaningTask) -> CleaningOutcome:
    plan = task.plan
    started_ms = plan.clock.monotonic_ms()
    stats = CleanerStats()
    offset_map = OffsetMap.for_memory(plan.map_memory_bytes)
    producers = _Producers()
    _scan_clean_section(task, producers)
    _build_offset_map(task, offset_map, producers, stats)
    end_offset = offset_map.latest_offset + 1
    stats.map_utilization = offset_map.utilization
    groups = group_segments_by_size(
        [s for s in plan.segments if s.base_offset < end_offset],
        plan.config.segment_bytes,
        plan.config.segment_index_bytes,
        plan.first_uncleanable_offset,
    )
    cleaned = tuple(_clean_group(task, group, offset_map, producers, stats) for group in groups)
    stats.elapsed_ms = plan.clock.monotonic_ms() - started_ms
    return CleaningOutcome(end_offset, cleaned, stats)


def _scan_clean_section(task: CleaningTask, producers: _Producers) -> None:
    """Note the producers of the batches before the dirty section (headers only)."""
    plan = task.plan
    for source in plan.segments:
        if source.base_offset >= plan.first_dirty_offset:
            return
        with _source(plan, source) as handle:
            for header, _ in _batches(task, handle, source, 0):
                producers.note(header)


def _build_offset_map(
    task: CleaningTask, offset_map: OffsetMap, producers: _Producers, stats: CleanerStats
) -> None:
    """Map ``[first_dirty, first_uncleanable)`` until it ends or the map fills."""
    plan = task.plan
    start = plan.first_dirty_offset
    offset_map.update_latest_offset(start - 1)
    for source in plan.segments:
        if source.next_base_offset <= start:
            continue
        with _source(plan, source) as handle:
            for header, view in _batches(task, handle, source, source.map_start_position):
                stats.map_bytes_read += header.size_bytes
                producers.note(header)
                if header.last_offset < start:
                    continue
                full = not header.is_control and not _map_batch(
                    header, view, start, offset_map, stats
                )
                if full:
                    return  # the cleaning ends at the last record mapped
                offset_map.update_latest_offset(header.last_offset)
        offset_map.update_latest_offset(source.next_base_offset - 1)  # past a trailing gap


def _map_batch(
    header: BatchHeader, view: memoryview, start: int, offset_map: OffsetMap, stats: CleanerStats
) -> bool:
    """Put the keyed records of one batch at or past ``start`` (the first dirty offset); False
    if the map filled first (what fitted is in)."""
    columns = decode_columns(view)
    stats.map_records_read += len(columns)
    digests, offsets = [], []
    for offset, key in zip(columns.offsets, columns.keys, strict=True):
        if key is not None and offset >= start:
            digests.append(key_digest(key))
            offsets.append(offset)
    room = offset_map.capacity - offset_map.size
    if len(digests) <= room:
        offset_map.put_digests(digests, offsets)
        return True
    for digest, offset in zip(digests, offsets, strict=True):
        if offset_map.is_full:
            return False
        offset_map.put_digests([digest], [offset])
    return True


def group_segments_by_size(
    segments: list[SourceSegment],
    max_size_bytes: int,
    max_index_bytes: int,
    first_uncleanable_offset: int,
) -> list[list[SourceSegment]]:
    """Consecutive segments merged while the group's log bytes stay <= ``max_size_bytes``, its
    offset and time index bytes each <= ``max_index_bytes`` (with a slot to spare) and its
    offsets within int32 of its base (Kafka's groupSegmentsBySize)."""
    groups: list[list[SourceSegment]] = []
    rest = list(segments)
    while rest:
        group = [rest.pop(0)]
        size = group[0].size_bytes
        offset_index = group[0].offset_index_bytes + _OFFSET_ENTRY_BYTES
        time_index = group[0].time_index_bytes + _TIME_ENTRY_BYTES
        while rest:
            candidate = rest[0]
            last_offset = rest[1].base_offset - 1 if len(rest) > 1 else first_uncleanable_offset - 1
            if (
                size + candidate.size_bytes > max_size_bytes
                or offset_index + candidate.offset_index_bytes + _OFFSET_ENTRY_BYTES
                > max_index_bytes
                or time_index + candidate.time_index_bytes + _TIME_ENTRY_BYTES > max_index_bytes
                or (candidate.size_bytes > 0 and last_offset - group[0].base_offset > _INT32_MAX)
            ):
                break
            group.append(rest.pop(0))
            size += candidate.size_bytes
            offset_index += candidate.offset_index_bytes + _OFFSET_ENTRY_BYTES
            time_index += candidate.time_index_bytes + _TIME_ENTRY_BYTES
        groups.append(group)
    return groups


def _clean_group(
    task: CleaningTask,
    group: list[SourceSegment],
    offset_map: OffsetMap,
    producers: _Producers,
    stats: CleanerStats,
) -> CleanedGroup:
    """Copy what ``group`` keeps into ``<base>.log.cleaned`` (indexed, trimmed, fsynced)."""
    plan = task.plan
    base = group[0].base_offset
    with task.guard():
        for suffix in (".log", ".index", ".timeindex"):  # left by an earlier aborted pass
            plan.fs.remove(f"{plan.dir_path}/{log_file_name(base, suffix)}{CLEANED_SUFFIX}")
        cleaned = LogSegment.open(
            plan.fs,
            plan.dir_path,
            base,
            plan.config,
            plan.clock,
            create=True,
            file_suffix=CLEANED_SUFFIX,
        )
        cleaned.gaps_below = plan.gaps_below
        cleaned.offset_index  # noqa: B018 -- creates both index files now, under the guard
    try:
        output = _Output(cleaned, stats)
        for source in group:
            with _source(plan, source) as handle:
                for header, view in _batches(task, handle, source, 0):
                    output.add(_filter_batch(plan, header, view, offset_map, producers, stats))
        output.flush()
        with task.guard():
            cleaned.next_base_offset = group[-1].next_base_offset
            cleaned.on_become_inactive()  # the final time index entry; trimmed indexes
        cleaned.flush()
    finally:
        with task.lock():
            if task.aborted:
                cleaned.close_without_trim()  # the descriptor only: nothing by path
            else:
                cleaned.close()
    return CleanedGroup(
        tuple(s.base_offset for s in group), group[-1].next_base_offset, group[-1].last_modified_ms
    )


@attrs.define
class _Output:
    """Batches kept, appended to the new segment about a megabyte at a time."""

    segment: LogSegment
    stats: CleanerStats
    pieces: list[bytes | memoryview] = attrs.field(factory=list)
    metas: list[BatchMeta] = attrs.field(factory=list)
    pending_bytes: int = 0

    def add(self, kept: tuple[bytes | memoryview, BatchMeta, int] | None) -> None:
        if kept is None:
            return
        data, meta, records = kept
        self.pieces.append(data)
        self.metas.append(meta)
        self.pending_bytes += meta.size_bytes
        self.stats.bytes_written += meta.size_bytes
        self.stats.records_written += records
        if self.pending_bytes >= _OUTPUT_FLUSH_BYTES:
            self.flush()

    def flush(self) -> None:
        if self.metas:
            self.segment.append(b"".join(self.pieces), self.metas)
        self.pieces, self.metas, self.pending_bytes = [], [], 0


def _filter_batch(
    plan: CleaningPlan,
    header: BatchHeader,
    view: memoryview,
    offset_map: OffsetMap,
    producers: _Producers,
    stats: CleanerStats,
) -> tuple[bytes | memoryview, BatchMeta, int] | None:
    """What one batch becomes: itself, rewritten with fewer records (or a delete horizon),
    an empty header, or nothing; with its meta and the number of records kept."""
    stats.bytes_read += header.size_bytes
    meta = BatchMeta(header.last_offset, header.max_timestamp, header.size_bytes)
    columns = decode_columns(view)  # checks the CRC and every record's framing
    stats.records_read += len(columns)
    if header.is_control:
        return view, meta, len(columns)  # no transactions here: markers stay as they are
    latest = offset_map.latest_offset
    horizon = delete_horizon_ms(header)
    keep_tombstones = horizon is None or plan.now_ms < horizon
    kept: list[int] = []
    tombstone_kept = False
    for i, (offset, key, value) in enumerate(
        zip(columns.offsets, columns.keys, columns.values, strict=True)
    ):
        if offset > latest:
            kept.append(i)
            tombstone_kept = tombstone_kept or value is None
        elif key is None:
            stats.keyless_records += 1
        elif offset >= offset_map.get(key) and (value is not None or keep_tombstones):
            kept.append(i)
            tombstone_kept = tombstone_kept or value is None
    if kept:
        if horizon is None and tombstone_kept:
            horizon = plan.now_ms + plan.config.delete_retention_ms  # the first cleaning
        elif len(kept) == len(columns):
            return view, meta, len(kept)  # untouched: copied byte for byte
        data = rewrite_batch(header, columns, kept, horizon)
        return data, meta._replace(size_bytes=len(data)), len(kept)
    last_of_producer = header.producer_id >= 0 and producers.is_last_of_active(
        header, plan.now_ms, plan.producer_expiration_ms
    )
    if last_of_producer or header.next_offset == plan.first_uncleanable_offset:
        data = empty_batch(header)
        return data, meta._replace(size_bytes=len(data)), 0
    return None


@contextlib.contextmanager
def _source(plan: CleaningPlan, source: SourceSegment) -> Iterator[FileHandle]:
    """A descriptor of the pass's own on a source segment's ``.log`` (the loop may delete or
    close the segment meanwhile; this descriptor keeps reading what the plan saw)."""
    handle = plan.fs.open(
        f"{plan.dir_path}/{log_file_name(source.base_offset, '.log')}", create=False
    )
    try:
        yield handle
    finally:
        handle.close()


def _batches(
    task: CleaningTask, handle: FileHandle, source: SourceSegment, position: int
) -> Iterator[tuple[BatchHeader, memoryview]]:
    """The batches of a source segment from ``position`` to its planned size, with their
    framing and offsets checked (CRCs are checked when decoded): `CorruptRecordError` for a
    batch that does not frame, goes back in offsets, leaves the segment's offset range or
    follows a gap above the clean offset."""
    end = source.size_bytes
    expected: int | None = source.base_offset if position == 0 else None
    while position < end:
        task.check_aborted()
        chunk = handle.pread(position, min(_CHUNK_BYTES, end - position))
        cursor = 0
        while len(chunk) - cursor >= RECORD_BATCH_OVERHEAD:
            header = read_header(chunk, cursor)
            _check(task.plan, handle, source, header, expected, position + cursor)
            size = header.size_bytes
            if cursor + size > len(chunk):
                break  # the rest of it comes with the next chunk
            yield header, memoryview(chunk)[cursor : cursor + size]
            cursor += size
            expected = header.next_offset
        if cursor == 0:  # one batch larger than a chunk, or the file ends inside one
            if len(chunk) < RECORD_BATCH_OVERHEAD:
                raise _corrupt(handle, position, "the segment ends inside a batch")
            size = read_header(chunk).size_bytes
            chunk = handle.pread(position, size) if position + size <= end else b""
            if len(chunk) != size:
                raise _corrupt(handle, position, "the segment ends inside a batch")
            header = read_header(chunk)
            yield header, memoryview(chunk)
            cursor, expected = size, header.next_offset
        position += cursor


def _check(
    plan: CleaningPlan,
    handle: FileHandle,
    source: SourceSegment,
    header: BatchHeader,
    expected: int | None,
    position: int,
) -> None:
    """The framing and offsets of a source batch (module docstring of `_batches`)."""
    if header.magic != MAGIC or header.size_bytes < RECORD_BATCH_OVERHEAD:
        raise _corrupt(handle, position, "framing")
    base = header.base_offset
    if expected is not None and base != expected and not expected < base <= plan.gaps_below:
        raise _corrupt(handle, position, f"base offset {base}, not {expected}")
    if header.last_offset_delta < 0 or header.last_offset >= source.next_base_offset:
        raise _corrupt(handle, position, f"last offset {header.last_offset}")


def _corrupt(handle: FileHandle, position: int, what: str) -> CorruptRecordError:
    return CorruptRecordError(
        f"{handle.path}: the log cleaner found a bad batch at position {position} ({what})",
        position,
        path=handle.path,
    )
