"""The log cleaner and idempotent producers' state: a cleaning keeps the last batch of every
producer that has not expired (emptied of records if need be), so producer state rebuilt from
the cleaned log still recognises that producer's retry; the producer id expiration it uses is
the log's ``producer_id_expiration_ms``."""

from __future__ import annotations

from pathlib import Path

import attrs
import pytest

from replog.clock import ManualClock
from replog.log import encode_batch, iter_batches
from replog.log.fault_fs import FaultInjectingFileSystem
from replog.log.log import Log
from replog.log.producer_snapshot import SNAPSHOT_SUFFIX
from tests.log.compaction_support import COMPACT, append, clean, commit, open_log


@pytest.fixture
def fs(tmp_path: Path) -> FaultInjectingFileSystem:
    return FaultInjectingFileSystem(str(tmp_path), seed=5)


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(1_000)


def _producer_ids_served(log: Log) -> list[int]:
    return [h.producer_id for data in log.batches() for _, h in iter_batches(data)]


def _overwritten_producer_log(log: Log, clock: ManualClock) -> None:
    """Producer 7 writes keys a (seq 0) and b (seq 1); a plain producer overwrites both."""
    append(log, [(b"a", b"1")], clock=clock, producer_id=7, producer_epoch=0, base_sequence=0)
    append(log, [(b"b", b"1")], clock=clock, producer_id=7, producer_epoch=0, base_sequence=1)
    clock.advance(1)
    append(log, [(b"a", b"2"), (b"b", b"2")], clock=clock)
    log.roll()
    append(log, [(b"z", b"active")], clock=clock)
    commit(log)


def test_state_rebuilt_from_a_cleaned_log_still_knows_the_producers_last_batch(
    fs: FaultInjectingFileSystem, clock: ManualClock
) -> None:
    log = open_log(fs, fs.root, clock=clock)
    _overwritten_producer_log(log, clock)
    clean(log, clock)
    assert _producer_ids_served(log) == [7, -1, -1]  # producer 7's last batch, emptied
    log.close()
    directory = Path(fs.root) / "topic-0"
    for snapshot in directory.glob(f"*{SNAPSHOT_SUFFIX}"):
        snapshot.unlink()  # the state must come from the log alone

    log = open_log(fs, fs.root, clock=clock)
    entry = log.producer_state.last_entry(7)
    assert entry is not None and (entry.last_sequence, entry.last_offset) == (1, 1)
    retry = encode_batch(
        [b"1"], keys=[b"b"], base_timestamp=1_000, producer_id=7, producer_epoch=0, base_sequence=1
    )
    answer = log.append_as_leader(retry, 0)
    assert (answer.duplicate, answer.first_offset) == (True, 1)
    assert log.log_end_offset == 5
    log.close()


def test_the_cleaner_expires_producers_by_the_logs_producer_id_expiration(
    fs: FaultInjectingFileSystem, clock: ManualClock
) -> None:
    config = attrs.evolve(COMPACT, producer_id_expiration_ms=60_000)
    log = open_log(fs, fs.root, config, clock=clock)
    _overwritten_producer_log(log, clock)
    clock.advance(59_999)
    clean(log, clock)
    assert _producer_ids_served(log) == [7, -1, -1]  # still active: its last batch stays
    clock.advance(2)  # a minute since it wrote: expired, though far less than a day
    log.roll()
    append(log, [(b"y", b"x")], clock=clock)
    commit(log)
    clean(log, clock)
    assert 7 not in _producer_ids_served(log)
    log.close()
