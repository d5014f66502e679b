"""The quorum simulator's seeds (``python -m replog.testing.raft_sim.sim``) and its own
properties.

``test_seed`` runs seeds 0..SEED_COUNT-1, one test each, so a failure names its seed and prints
the command that replays it; ``make raft-sim SEEDS=N`` runs many more (100 here, down from 250:
the quorum sizes and faults below are all drawn within them).
"""

from __future__ import annotations

import pytest

from replog.testing.raft_sim.options import RaftSimOptions
from replog.testing.raft_sim.sim import main, reproduce_command, run_seed

pytestmark = pytest.mark.sim

SEED_COUNT = 100
FAST_SEEDS = 10  # the ones make check runs; the rest are marked system


@pytest.mark.parametrize(
    "seed",
    [
        pytest.param(s, marks=[pytest.mark.system] if s >= FAST_SEEDS else [])
        for s in range(SEED_COUNT)
    ],
)
def test_seed(seed: int) -> None:
    result = run_seed(seed)
    assert result.ok, f"seed {seed}: {result.violations[0]}\n  reproduce: {reproduce_command(seed)}"


def test_same_seed_same_run() -> None:
    a, b = run_seed(5), run_seed(5)
    assert (a.violations, a.events, a.end_ms, a.counters) == (
        b.violations,
        b.events,
        b.end_ms,
        b.counters,
    )
    assert a.operations_ok > 0


def test_seeds_cover_the_quorum_sizes_and_faults() -> None:
    drawn = [RaftSimOptions.draw(seed) for seed in range(SEED_COUNT)]
    assert {o.voters for o in drawn} == {1, 3, 5}
    assert any(o.observers for o in drawn)
    assert any(o.snapshot_interval for o in drawn)
    assert any(o.crash_after_send_rate for o in drawn)
    totals: dict[str, int] = {}
    for seed in range(10):
        for name, count in run_seed(seed).counters.items():
            totals[name] = totals.get(name, 0) + count
    happenings = ("InstallSnapshot", "TruncateTo", "AdvanceLogStart", "crash_power_loss")
    happenings += ("unreachable_report", "spurious_unreachable")  # E9, right and wrong
    for happened in happenings:
        assert totals.get(happened, 0) > 0, (happened, totals)
    assert totals["op_ok"] > totals["op_info"] > 0


def test_cli_replays_one_seed(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--seed", "7"]) == 0
    assert "1 seeds, 0 violations" in capsys.readouterr().out


def test_runs_release_their_files() -> None:
    """Regression: a long run died with EMFILE after 1329 seeds, each leaking its nodes'
    segment and index descriptors."""
    import os

    run_seed(1)
    before = len(os.listdir("/proc/self/fd"))
    for seed in range(2, 5):
        run_seed(seed)
    assert len(os.listdir("/proc/self/fd")) <= before


def test_module_runs_as_a_program() -> None:
    """``python -m replog.testing.raft_sim.sim`` (the command every failure prints) replays a
    seed."""
    import subprocess
    import sys

    done = subprocess.run(
        [sys.executable, "-m", "replog.testing.raft_sim.sim", "--seed", "3"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "1 seeds, 0 violations" in done.stdout
