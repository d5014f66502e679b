"""The periodic offset checkpoints (HW, recovery points, log start offsets) leave the driver as
a ``RunCheckpoints`` effect, to be written off the event loop: each file costs two fsyncs, and
on the loop a slow disk stalled every broker sharing it until their sessions expired (seen in
CI). The driver computes the round at once, asks for one write at a time, and takes a failed
write's log dir offline."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from replog.log import encode_batch
from replog.log.checkpoints import OffsetCheckpointFile
from replog.log.manager import HW_CHECKPOINT, RECOVERY_POINT_CHECKPOINT
from replog.topics import TopicPartition

from .shell import ScriptedShell

INTERVAL_MS = 1_000


def _hw_file(shell: ScriptedShell) -> dict[tuple[str, int], int]:
    log_dir = shell.driver.config.log_dirs[0]
    return OffsetCheckpointFile(shell.driver.log_manager.fs, f"{log_dir}/{HW_CHECKPOINT}").read()


def _started(tmp_path: Any) -> tuple[ScriptedShell, Any]:
    shell = ScriptedShell(tmp_path, checkpoint_interval_ms=INTERVAL_MS)
    shell.start()
    shell.hold_checkpoints = True
    log = shell.driver.log_manager.get_or_create_log(TopicPartition("t", 0))
    log.append_as_leader(encode_batch([b"a", b"b"], base_timestamp=0), 0)
    log.maybe_increment_high_watermark(2)
    return shell, log


def test_a_round_is_written_by_the_shell_not_in_the_tick(tmp_path: Path) -> None:
    shell, _ = _started(tmp_path)
    for _ in range(3):
        shell.tick(INTERVAL_MS)
    assert len(shell.checkpoints) == 1  # one round at a time: the next waits for this one
    assert _hw_file(shell).get(("t", 0)) != 2  # the tick wrote nothing itself
    effect = shell.checkpoints.pop()
    shell.driver.on_checkpoints_done(effect.token, effect.round.write(), shell.now_ms)
    assert _hw_file(shell)[("t", 0)] == 2
    shell.tick(INTERVAL_MS)
    assert len(shell.checkpoints) == 1  # the next round, once the first reported


def test_an_older_round_never_replaces_a_newer_write(tmp_path: Path) -> None:
    shell, log = _started(tmp_path)
    shell.tick(INTERVAL_MS)
    (older,) = shell.checkpoints
    log.append_as_leader(encode_batch([b"c"], base_timestamp=0), 0)
    log.maybe_increment_high_watermark(3)
    shell.driver.log_manager.checkpoint_high_watermarks()  # a synchronous write overtakes it
    assert _hw_file(shell)[("t", 0)] == 3
    assert older.round.write() == []
    assert _hw_file(shell)[("t", 0)] == 3


def test_a_failed_write_takes_its_log_dir_offline(tmp_path: Path) -> None:
    shell, _ = _started(tmp_path)
    shell.tick(INTERVAL_MS)
    (effect,) = shell.checkpoints
    log_dir = shell.driver.config.log_dirs[0]
    Path(log_dir, RECOVERY_POINT_CHECKPOINT + ".tmp").mkdir()  # the tmp file cannot be written
    failures = effect.round.write()
    assert [path for path, _ in failures] == [log_dir]
    shell.driver.on_checkpoints_done(effect.token, failures, shell.now_ms)
    (dir_state,) = shell.driver.log_manager.dirs
    assert dir_state.offline_reason is not None and "checkpoint" in dir_state.offline_reason
