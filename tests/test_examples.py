"""The examples run as users run them (``make demo``): as subprocesses, exiting 0."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.system

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


def run_example(name: str, timeout_s: float) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    return subprocess.run(
        [sys.executable, str(EXAMPLES / name)],
        capture_output=True,
        text=True,
        timeout=timeout_s,
        env=env,
        check=False,
    )


@pytest.mark.timeout(90)
def test_cluster_demo_reads_back_every_acknowledged_record() -> None:
    done = run_example("demo.py", timeout_s=80)
    assert done.returncode == 0, done.stdout + done.stderr
    out = done.stdout
    assert "created topic 'orders': 3 partitions, replication factor 3, min ISR 2" in out
    assert "killing broker" in out
    assert "new leader" in out
    acked = [line for line in out.splitlines() if line.startswith("acknowledged:")]
    read = [line for line in out.splitlines() if line.startswith("read back:")]
    assert len(acked) == 1 and len(read) == 1
    assert acked[0].split()[1] == read[0].split()[2] == "3000"
    assert "OK: every acknowledged record was read back" in out
    assert "producing [" in done.stderr  # the progress bar


@pytest.mark.timeout(60)
def test_storage_demo_recovers_every_fsynced_record() -> None:
    done = run_example("storage_demo.py", timeout_s=50)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "-- power loss" in done.stdout
    assert "recovery:" in done.stdout
    assert "fsynced records survived the crash" in done.stdout
