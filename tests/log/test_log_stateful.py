"""The real `Log` on a `FaultInjectingFileSystem` against an in-memory model, under hypothesis.

The model is the list of ``(offset, value)`` the log should hold from its start to its LEO. Rules
append (as leader, random batch counts and sizes, sometimes a new epoch), read, roll, truncate,
flush, close and reopen cleanly, and crash (a power cut that may tear the first unsynced write,
then an unclean reopen from the recovery point the log had flushed to). After a crash everything
below that recovery point must be back, nothing that was never appended may be served, and the
model is cut to the recovered LEO. An invariant checks after every step that the log serves
exactly the model with dense offsets.

Small segments, indexes and index intervals give many segments, rolls on full indexes, and index
entries in every segment.
"""

from __future__ import annotations

import os
import shutil
import tempfile

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
)

from replog.clock import ManualClock
from replog.log import (
    FaultInjectingFileSystem,
    Log,
    LogConfig,
    decode_records,
    encode_batch,
    iter_batches,
)

CONFIG = LogConfig(segment_bytes=700, segment_index_bytes=96, index_interval_bytes=100)

# fsync is real under the fault-injecting filesystem; on tmpfs it costs nothing.
_TMP_ROOT = "/dev/shm" if os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK) else None

_values = st.lists(st.binary(max_size=60), min_size=1, max_size=6)


def _records(data: bytes) -> list[tuple[int, bytes | None, int]]:
    """(offset, value, leader epoch) of every record in the whole batches of ``data``."""
    found = []
    for position, header in iter_batches(data):
        for record in decode_records(data, position):
            found.append((record.offset, record.value, header.partition_leader_epoch))
    return found


class LogMachine(RuleBasedStateMachine):
    """One partition log, its files on a fault-injecting filesystem, and its model."""

    def __init__(self) -> None:
        super().__init__()
        self.root = tempfile.mkdtemp(prefix="replog-stateful-", dir=_TMP_ROOT)
        self.fs = FaultInjectingFileSystem(self.root)
        self.log: Log | None = None
        self.model: list[tuple[int, bytes]] = []  # (offset, value) from the log start
        self.epoch = 0
        self.clock = ManualClock(1_000, wall_offset_ms=0)

    @initialize(seed=st.integers(0, 2**16))
    def open_log(self, seed: int) -> None:
        self.fs = FaultInjectingFileSystem(self.root, seed=seed)
        self.log = self._open(recovery_point=0, clean=False)

    def _open(self, *, recovery_point: int, clean: bool) -> Log:
        return Log.open(
            f"{self.root}/topic-0",
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

    # -- rules ---------------------------------------------------------------------------------

    @rule(batches=st.lists(_values, min_size=1, max_size=3), new_epoch=st.booleans())
    def append(self, batches: list[list[bytes]], new_epoch: bool) -> None:
        log = self.current
        if new_epoch:
            self.epoch += 1
        now_ms = self.clock.advance(10)
        data = b"".join(encode_batch(values, base_timestamp=now_ms) for values in batches)
        first = log.log_end_offset
        info = log.append_as_leader(data, self.epoch)
        appended = [value for values in batches for value in values]
        assert (info.first_offset, info.last_offset) == (first, first + len(appended) - 1)
        self.model += [(first + i, value) for i, value in enumerate(appended)]
        assert log.epoch_cache.latest_epoch == self.epoch

    @rule(where=st.integers(0, 10**6), max_bytes=st.integers(1, 1500), min_one=st.booleans())
    def read(self, where: int, max_bytes: int, min_one: bool) -> None:
        log = self.current
        start = log.log_start_offset + where % (log.log_end_offset - log.log_start_offset + 1)
        fetched = log.read(start, max_bytes, min_one_batch=min_one)
        records = _records(fetched.to_bytes())
        expected = {offset: value for offset, value in self.model}
        assert [(o, v) for o, v, _ in records] == [(o, expected[o]) for o, _, _ in records]
        if records:
            offsets = [o for o, _, _ in records]
            assert offsets == list(range(offsets[0], offsets[-1] + 1))
            assert offsets[0] <= start <= offsets[-1]
        if min_one and start < log.log_end_offset:
            assert records, f"min_one_batch read at {start} returned no whole batch"
        if not min_one:
            assert fetched.size_bytes <= max_bytes

    @rule()
    def roll(self) -> None:
        log = self.current
        segment = log.roll()
        assert segment is log.active_segment
        assert segment.base_offset == log.log_end_offset

    @rule(where=st.integers(0, 10**6))
    def truncate(self, where: int) -> None:
        log = self.current
        end = log.log_end_offset
        target = where % (end + 3)
        removed = log.truncate_to(target)
        assert removed == (target < end)
        # The batch holding the target goes whole: the LEO lands on a batch boundary <= target.
        assert log.log_end_offset <= min(target, end)
        self.model = [(o, v) for o, v in self.model if o < log.log_end_offset]
        assert log.recovery_point <= log.log_end_offset

    @rule()
    def flush(self) -> None:
        log = self.current
        log.flush()
        assert log.recovery_point == log.log_end_offset

    @rule()
    def close_and_reopen(self) -> None:
        log = self.current
        log.flush()
        log.close()
        self.log = self._open(recovery_point=log.recovery_point, clean=True)
        assert not self.log.recovery_report.cut_anything
        assert self.log.log_end_offset == log.log_end_offset
        assert self.log.epoch_cache.entries == log.epoch_cache.entries

    @precondition(lambda self: self.log is not None)
    @rule(tear=st.booleans())
    def crash(self, tear: bool) -> None:
        log = self.current
        flushed, written = log.recovery_point, log.log_end_offset
        self.fs.crash(tear=tear)
        log.abandon()
        self.log = self._open(recovery_point=flushed, clean=False)
        recovered_end = self.log.log_end_offset
        assert flushed <= recovered_end <= written, self.log.recovery_report.describe()
        self.model = [(o, v) for o, v in self.model if o < recovered_end]
        assert self.log.recovery_point == flushed
        latest = self.log.epoch_cache.latest_entry
        assert latest is None or latest.start_offset < max(recovered_end, 1)
        if self.log.epoch_cache.latest_epoch is not None:
            self.epoch = max(self.epoch, self.log.epoch_cache.latest_epoch)

    # -- invariants ----------------------------------------------------------------------------

    @invariant()
    def serves_exactly_the_model_with_dense_offsets(self) -> None:
        if self.log is None:
            return
        log = self.current
        served = [(o, v) for batch in log.batches() for o, v, _ in _records(batch)]
        offsets = [o for o, _ in served]
        assert offsets == list(range(log.log_start_offset, log.log_end_offset))
        assert served == self.model

    @invariant()
    def offsets_stay_ordered(self) -> None:
        if self.log is None:
            return
        log = self.current
        assert log.log_start_offset <= log.high_watermark <= log.log_end_offset
        assert log.recovery_point <= log.log_end_offset
        bases = list(log.segments)
        assert bases == sorted(bases) and bases[-1] <= log.log_end_offset


LogMachine.TestCase.settings = settings(
    max_examples=100,
    stateful_step_count=30,
    deadline=None,
    print_blob=True,
    suppress_health_check=[HealthCheck.too_slow],
)
test_log_matches_the_model_through_crashes = LogMachine.TestCase
