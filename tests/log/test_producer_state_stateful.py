"""Producer state of a real `Log` (fault-injecting filesystem) against a simple model, under
hypothesis.

The model is the list of batches in the log. The producer state a log holds must always be
what that list implies: every batch applied in order, a new epoch clearing a producer's
retained batches, the last five kept -- except that a state loaded from a snapshot knows only
each producer's last batch from before the snapshot's offset (Kafka's format). So the model
remembers the snapshot offset the log last (re)loaded from (which must be a snapshot file the
log had, at or below what it could trust) and derives the state from there.

Rules: idempotent producers append next batches, retries of recent batches, batches after a
gap, with an old or a new epoch; plain batches; roll; truncate; flush; close and reopen; crash
(losing unsynced writes, maybe tearing one) and reopen from the recovery point. Every leader
append's outcome (appended, duplicate with the original offsets, or which error) must be the
model's.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from typing import NamedTuple

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

from replog.clock import ManualClock
from replog.errors import (
    InvalidProducerEpochError,
    OutOfOrderSequenceError,
    ProducerStateError,
)
from replog.log import encode_batch
from replog.log.config import LogConfig
from replog.log.fault_fs import FaultInjectingFileSystem
from replog.log.log import Log
from replog.log.producer_snapshot import SNAPSHOT_SUFFIX
from replog.log.producer_state import BatchMetadata, ProducerEntry

CONFIG = LogConfig(segment_bytes=500, segment_index_bytes=96, index_interval_bytes=100)
_TMP_ROOT = "/dev/shm" if os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK) else None
PRODUCERS = (11, 12, 13)


class Written(NamedTuple):
    """One batch in the log, as the model sees it (pid -1: not an idempotent producer's)."""

    first_offset: int
    last_offset: int
    pid: int
    epoch: int
    first_seq: int
    timestamp: int

    @property
    def last_seq(self) -> int:
        return self.first_seq + self.last_offset - self.first_offset


def derive(batches: list[Written], snapshot_offset: int | None) -> dict[int, ProducerEntry]:
    """The state ``batches`` imply when loaded from a snapshot at ``snapshot_offset``."""
    state: dict[int, tuple[int, list[Written]]] = {}
    trimmed = snapshot_offset is None
    for b in batches:
        if not trimmed and b.first_offset >= (snapshot_offset or 0):
            state = {pid: (epoch, kept[-1:]) for pid, (epoch, kept) in state.items()}
            trimmed = True
        if b.pid < 0:
            continue
        epoch, kept = state.get(b.pid, (b.epoch, []))
        kept = kept if epoch == b.epoch else []
        state[b.pid] = (b.epoch, [*kept, b][-5:])
    if not trimmed:
        state = {pid: (epoch, kept[-1:]) for pid, (epoch, kept) in state.items()}
    return {
        pid: ProducerEntry(
            pid,
            epoch,
            tuple(
                BatchMetadata(
                    b.last_seq, b.last_offset, b.last_offset - b.first_offset, b.timestamp
                )
                for b in kept
            ),
            kept[-1].timestamp,
        )
        for pid, (epoch, kept) in state.items()
    }


def expected_outcome(
    entry: ProducerEntry | None, epoch: int, first: int, last: int
) -> BatchMetadata | type[ProducerStateError] | None:
    """The model's answer to a leader append: a duplicate's metadata, an error, or None."""
    if entry is not None and epoch == entry.producer_epoch:
        for meta in entry.batches:
            if (meta.first_sequence, meta.last_sequence) == (first, last):
                return meta
    if entry is None:
        return None  # any sequence starts an unknown producer (KIP-360)
    if epoch < entry.producer_epoch:
        return InvalidProducerEpochError
    if epoch > entry.producer_epoch:
        return None if first == 0 else OutOfOrderSequenceError
    return None if first == entry.last_sequence + 1 else OutOfOrderSequenceError


class ProducerLogMachine(RuleBasedStateMachine):
    """One log with idempotent producers, and the batches it should hold."""

    def __init__(self) -> None:
        super().__init__()
        self.root = tempfile.mkdtemp(prefix="replog-producers-", dir=_TMP_ROOT)
        self.fs = FaultInjectingFileSystem(self.root)
        self.clock = ManualClock(1_000, wall_offset_ms=1_700_000_000_000)
        self.log: Log | None = None
        self.written: list[Written] = []
        self.loaded_from: int | None = None
        #: per producer: (epoch, next sequence, history of (epoch, first seq, count) sent)
        self.producers = {pid: (0, 0, []) for pid in PRODUCERS}

    @initialize(seed=st.integers(0, 2**16))
    def open_log(self, seed: int) -> None:
        self.fs = FaultInjectingFileSystem(self.root, seed=seed)
        self.log = self._open(recovery_point=0, clean=False)

    def _open(self, *, recovery_point: int, clean: bool) -> Log:
        return Log.open(
            f"{self.root}/t-0",
            CONFIG,
            fs=self.fs,
            clock=self.clock,
            recovery_point=recovery_point,
            had_clean_shutdown=clean,
        )

    @property
    def current(self) -> Log:
        assert self.log is not None
        return self.log

    def teardown(self) -> None:
        if self.log is not None:
            self.log.abandon()
        shutil.rmtree(self.root, ignore_errors=True)

    # -- appends -------------------------------------------------------------------------------

    @rule(
        pid=st.sampled_from(PRODUCERS),
        kind=st.sampled_from(["next", "next", "next", "retry", "gap", "old_epoch", "new_epoch"]),
        count=st.integers(1, 3),
        back=st.integers(0, 6),
        payload=st.binary(min_size=1, max_size=40),
    )
    def produce(self, pid: int, kind: str, count: int, back: int, payload: bytes) -> None:
        epoch, next_seq, sent = self.producers[pid]
        if kind == "retry" and sent:
            epoch_sent, first, count = sent[max(0, len(sent) - 1 - back)]
            send_epoch = epoch_sent
        elif kind == "gap":
            send_epoch, first = epoch, next_seq + 1 + back
        elif kind == "old_epoch" and epoch > 0:
            send_epoch, first = epoch - 1, next_seq
        elif kind == "new_epoch":
            send_epoch, first = epoch + 1, 0
        else:
            send_epoch, first = epoch, next_seq
        self._send(pid, send_epoch, first, count, payload)

    def _send(self, pid: int, epoch: int, first: int, count: int, payload: bytes) -> None:
        log = self.current
        now_ms = self.clock.advance(7)
        data = encode_batch(
            [payload] * count,
            base_timestamp=self.clock.wall_ms(),
            producer_id=pid,
            producer_epoch=epoch,
            base_sequence=first,
        )
        expected = expected_outcome(
            derive(self.written, self.loaded_from).get(pid), epoch, first, first + count - 1
        )
        leo = log.log_end_offset
        try:
            info = log.append_as_leader(data, 0)
        except ProducerStateError as exc:
            assert expected is type(exc), (expected, exc)
            assert log.log_end_offset == leo
            return
        if isinstance(expected, BatchMetadata):
            assert info.duplicate and log.log_end_offset == leo
            assert (info.first_offset, info.last_offset) == (
                expected.first_offset,
                expected.last_offset,
            )
            assert info.max_timestamp == expected.timestamp
            return
        assert expected is None and not info.duplicate, expected
        assert (info.first_offset, info.last_offset) == (leo, leo + count - 1)
        self.written.append(Written(leo, leo + count - 1, pid, epoch, first, info.max_timestamp))
        _, _, sent = self.producers[pid]
        self.producers[pid] = (epoch, first + count, [*sent, (epoch, first, count)][-8:])
        del now_ms

    @rule(count=st.integers(1, 3))
    def plain(self, count: int) -> None:
        log = self.current
        leo = log.log_end_offset
        data = encode_batch([b"p"] * count, base_timestamp=self.clock.wall_ms())
        info = log.append_as_leader(data, 0)
        assert not info.duplicate
        self.written.append(Written(leo, leo + count - 1, -1, -1, -1, info.max_timestamp))

    # -- the log's other changes ---------------------------------------------------------------

    @rule()
    def roll(self) -> None:
        self.current.roll()

    @rule(where=st.integers(0, 10**6))
    def truncate(self, where: int) -> None:
        log = self.current
        had_producers = bool(log.producer_state.producers)
        snapshots = set(log.producers.snapshots.offsets)
        target = where % (log.log_end_offset + 2)
        if not log.truncate_to(target):
            return
        end = log.log_end_offset
        self.written = [b for b in self.written if b.last_offset < end]
        if had_producers:
            self.loaded_from = log.producers.loaded_from
            assert self.loaded_from is None or (
                self.loaded_from in snapshots and self.loaded_from <= end
            )
        else:
            self.loaded_from = end

    @rule()
    def flush(self) -> None:
        self.current.flush()

    @rule()
    def close_and_reopen(self) -> None:
        log = self.current
        log.flush()
        log.close()
        self.log = self._open(recovery_point=log.recovery_point, clean=True)
        assert self.log.producers.replayed_batches == 0
        self.loaded_from = self.log.producers.loaded_from
        assert self.loaded_from in (None, self.log.log_end_offset)

    @rule(tear=st.booleans())
    def crash(self, tear: bool) -> None:
        log = self.current
        flushed = log.recovery_point
        snapshots = set(log.producers.snapshots.offsets)
        self.fs.crash(tear=tear)
        log.abandon()
        self.log = self._open(recovery_point=flushed, clean=False)
        end = self.log.log_end_offset
        self.written = [b for b in self.written if b.last_offset < end]
        self.loaded_from = self.log.producers.loaded_from
        assert self.loaded_from is None or (
            self.loaded_from in snapshots and self.loaded_from <= min(flushed, end)
        )

    # -- invariants ----------------------------------------------------------------------------

    @invariant()
    def the_state_is_what_the_log_implies(self) -> None:
        if self.log is None:
            return
        log = self.current
        assert log.producer_state.producers == derive(self.written, self.loaded_from)
        assert log.producer_state.map_end_offset <= log.log_end_offset

    @invariant()
    def snapshot_files_are_the_ones_the_log_knows(self) -> None:
        if self.log is None:
            return
        log = self.current
        on_disk = sorted(
            int(name.split(".")[0])
            for name in os.listdir(log.dir_path)
            if name.endswith(SNAPSHOT_SUFFIX)
        )
        assert on_disk == log.producers.snapshots.offsets
        assert all(o <= log.log_end_offset for o in on_disk)


ProducerLogMachine.TestCase.settings = settings(
    max_examples=120,
    stateful_step_count=40,
    deadline=None,
    print_blob=True,
    suppress_health_check=[HealthCheck.too_slow],
)
test_producer_state_matches_the_model = ProducerLogMachine.TestCase
