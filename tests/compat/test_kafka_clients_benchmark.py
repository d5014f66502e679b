"""``python -m benchmarks.kafka_clients`` with tiny sizes against replog alone (Tansu is an
optional benchmark dependency, never needed here): every case measures something through
confluent-kafka, and a Tansu binary that is not there leaves replog running alone with a note.
A smoke test so the module cannot rot: nothing here asserts a figure."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import pytest
from benchmarks import kafka_clients as bench

pytestmark = pytest.mark.system


def _args(**overrides: Any) -> argparse.Namespace:
    values: dict[str, Any] = {
        "duration": 0.3,
        "warmup": 0.1,
        "repeats": 1,
        "cases": ",".join(bench.CASES),
        "brokers": "replog",
        "partitions": 1,
        "window": 50,
        "replog_durability": "replicated",
        "tansu_bin": None,
        "profile_replog": None,
        "keep": False,
    }
    return argparse.Namespace(**{**values, **overrides})


def test_every_case_measures_replog_through_confluent_kafka() -> None:
    lines: list[dict[str, Any]] = []
    results = bench.run(_args(), lines.append)
    assert [r["case"] for r in results] == list(bench.CASES)
    for result in results:
        assert result["broker"] == "replog" and result["storage"] == "durability=replicated"
        assert result["errors"] == 0 and result["unsent_at_end"] == 0
        assert result["acked_records"] > 0 and result["records_per_s"] > 0
        assert result["p50_ms"] <= result["p99_ms"]
    summaries = [line for line in lines if "summary" in line]
    assert [s["summary"] for s in summaries] == list(bench.CASES)
    assert all("ratio_replog_over_tansu" not in s for s in summaries)
    target = lines[-1]
    assert target["targets"] and all(target[c]["met"] is None for c in bench.CASES)


def test_a_missing_tansu_binary_runs_replog_alone_and_says_so(tmp_path: Path) -> None:
    lines: list[dict[str, Any]] = []
    missing = tmp_path / "no-tansu"
    args = _args(cases="sync-batch1", brokers="replog,tansu", tansu_bin=str(missing))
    results = bench.run(args, lines.append)
    assert lines[0] == {"tansu": f"not run: --tansu-bin {missing} is no file; replog only"}
    assert [r["broker"] for r in results] == ["replog"]


def test_profile_top_counts_own_and_inclusive_samples(tmp_path: Path) -> None:
    stacks = tmp_path / "stacks.txt"
    stacks.write_text(
        "run (loop.py:10);handle (server.py:20);append (log.py:5) 3\n"
        "run (loop.py:10);handle (server.py:21) 1\n"
    )
    top = bench.profile_top(stacks)
    assert top["samples"] == 4
    assert top["own_pct"] == {"append (log.py)": 75.0, "handle (server.py)": 25.0}
    assert top["inclusive_pct"]["run (loop.py)"] == 100.0
    assert top["inclusive_pct"]["handle (server.py)"] == 100.0
