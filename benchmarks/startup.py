"""Start-up benchmark: what a test suite pays to use replog as its Kafka.

    python -m benchmarks.startup [--repeats 5] [--cases import,first-produce,cluster,...]

The test-toolkit issue's figures, each the median of ``--repeats`` (with min and max):

- ``import``: ``import replog`` in a fresh interpreter (target <= 150 ms), and beside it
  ``client_import_ms``, ``from replog import Producer`` (what a client pays; no target);
- ``first-produce``: a fresh interpreter from before ``import replog`` to the first acks=all
  produce acknowledged on ``Cluster.local(1)`` (target <= 300 ms);
- ``cluster``: in a running process, a new ``Cluster.local(3)`` (start, the first one apart) and
  its ``close`` (targets <= 30 ms each);
- ``topic``: one topic per test, ``create_topics`` until every partition has a leader, at RF 1
  on ``Cluster.local(1)`` and at RF 3 on ``Cluster.local(3)`` (targets <= 10 ms, <= 30 ms);
- ``group``: ``subscribe()`` with a ``group_id`` to the first record polled, on
  ``Cluster.local(1, test_mode=True)``, what the pytest plugin's fixtures start (target
  <= 250 ms), and on the defaults (``group_defaults_ms``: the 3 s initial rebalance delay);
- ``reset``: ``Cluster.reset()`` on a test-mode ``Cluster.local(3)`` holding three topics and a
  consumer group's committed offsets (target <= 50 ms).

One JSON line per case, then a targets line (reported, never asserted). Fresh interpreters run
this checkout's ``src`` (``PYTHONPATH``).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

_ROOT = Path(__file__).resolve().parents[1]

TARGETS_MS = {
    "import_ms": 150,
    "first_produce_ms": 300,
    "cluster3_start_ms": 30,
    "cluster3_close_ms": 30,
    "topic_rf1_ms": 10,
    "topic_rf3_ms": 30,
    "subscribe_to_first_record_ms": 250,
    "reset_ms": 50,
}

_IMPORT = "import time; t = time.perf_counter(); import replog; print(time.perf_counter() - t)"
_CLIENT_IMPORT = (
    "import time; t = time.perf_counter(); from replog import Producer; "
    "print(time.perf_counter() - t)"
)
_FIRST_PRODUCE = """
import time
t = time.perf_counter()
import replog
with replog.Cluster.local(1) as cluster:
    with replog.Producer(cluster.bootstrap, acks="all") as producer:
        producer.send("first", b"v").result()
    print(time.perf_counter() - t)
"""


def _fresh(code: str) -> float:
    """Seconds a fresh interpreter running ``code`` prints."""
    env = {**os.environ, "PYTHONPATH": str(_ROOT / "src")}
    out = subprocess.run(
        [sys.executable, "-c", code], env=env, check=True, capture_output=True, text=True
    )
    return float(out.stdout.strip().splitlines()[-1])


def _stats_ms(seconds: Sequence[float]) -> dict[str, float]:
    ms = [s * 1000 for s in seconds]
    return {
        "median": round(statistics.median(ms), 1),
        "min": round(min(ms), 1),
        "max": round(max(ms), 1),
    }


def _timed(action: Callable[[], Any]) -> tuple[float, Any]:
    started = time.perf_counter()
    result = action()
    return time.perf_counter() - started, result


def case_import(repeats: int) -> dict[str, Any]:
    return {
        "case": "import",
        "import_ms": _stats_ms([_fresh(_IMPORT) for _ in range(repeats)]),
        "client_import_ms": _stats_ms([_fresh(_CLIENT_IMPORT) for _ in range(repeats)]),
    }


def case_first_produce(repeats: int) -> dict[str, Any]:
    runs = [_fresh(_FIRST_PRODUCE) for _ in range(repeats)]
    return {"case": "first-produce", "first_produce_ms": _stats_ms(runs)}


def case_cluster(repeats: int) -> dict[str, Any]:
    import replog

    first_s, cluster = _timed(lambda: replog.Cluster.local(3))
    first_close_s, _ = _timed(cluster.close)
    starts, closes = [], []
    for _ in range(repeats):
        start_s, cluster = _timed(lambda: replog.Cluster.local(3))
        close_s, _ = _timed(cluster.close)
        starts.append(start_s)
        closes.append(close_s)
    return {
        "case": "cluster",
        "first_cluster3_start_ms": round(first_s * 1000, 1),
        "first_cluster3_close_ms": round(first_close_s * 1000, 1),
        "cluster3_start_ms": _stats_ms(starts),
        "cluster3_close_ms": _stats_ms(closes),
    }


def case_topic(repeats: int) -> dict[str, Any]:
    import replog

    line: dict[str, Any] = {"case": "topic"}
    for brokers, key in ((1, "topic_rf1_ms"), (3, "topic_rf3_ms")):
        with replog.Cluster.local(brokers) as cluster, replog.Admin(cluster.bootstrap) as admin:
            admin.create_topics("warm-up", 1, brokers)
            runs = [
                _timed(lambda n=n, rf=brokers: admin.create_topics(f"t{n}", 1, rf))[0]
                for n in range(repeats)
            ]
        line[key] = _stats_ms(runs)
    return line


def case_group(repeats: int) -> dict[str, Any]:
    return {
        "case": "group",
        "subscribe_to_first_record_ms": _stats_ms(_first_records(repeats, test_mode=True)),
        "group_defaults_ms": _stats_ms(_first_records(min(repeats, 2), test_mode=False)),
    }


def _first_records(repeats: int, *, test_mode: bool) -> list[float]:
    import replog

    runs = []
    with replog.Cluster.local(1, test_mode=test_mode) as cluster:
        with replog.Producer(cluster.bootstrap, acks="all") as producer:
            producer.send("grouped", b"v").result()
        for n in range(repeats):
            consumer = replog.Consumer(
                cluster.bootstrap, group_id=f"g{n}", auto_offset_reset="earliest"
            )
            try:
                started = time.perf_counter()
                consumer.subscribe(["grouped"])
                while not consumer.poll(timeout_ms=100):
                    if time.perf_counter() - started > 30:
                        raise RuntimeError("no record 30 s after subscribe()")
                runs.append(time.perf_counter() - started)
            finally:
                consumer.close()
    return runs


def case_reset(repeats: int) -> dict[str, Any]:
    import replog

    runs = []
    with replog.Cluster.local(3, test_mode=True) as cluster:
        for n in range(repeats):
            with replog.Admin(cluster.bootstrap) as admin:
                for t in range(3):
                    admin.create_topics(f"r{n}-{t}", 1, 3)
            with replog.Producer(cluster.bootstrap, acks="all") as producer:
                producer.send(f"r{n}-0", b"v").result()
            consumer = replog.Consumer(
                cluster.bootstrap, group_id=f"g{n}", auto_offset_reset="earliest"
            )
            try:
                consumer.subscribe([f"r{n}-0"])
                while not consumer.poll(timeout_ms=100):
                    pass
                consumer.commit()
            finally:
                consumer.close()
            runs.append(_timed(cluster.reset)[0])
    return {"case": "reset", "reset_ms": _stats_ms(runs)}


CASES: dict[str, Callable[[int], dict[str, Any]]] = {
    "import": case_import,
    "first-produce": case_first_produce,
    "cluster": case_cluster,
    "topic": case_topic,
    "group": case_group,
    "reset": case_reset,
}


def main(argv: Sequence[str] | None = None) -> int:
    """Command-line entry point."""
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.startup",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--repeats", type=int, default=5, help="runs per figure")
    parser.add_argument("--cases", default=",".join(CASES), help="comma list of cases")
    args = parser.parse_args(argv)
    wanted = [c for c in args.cases.split(",") if c]
    unknown = sorted(set(wanted) - set(CASES))
    if unknown:
        parser.error(f"unknown cases {unknown} (known: {sorted(CASES)})")
    if args.repeats < 1:
        parser.error("--repeats must be positive")
    figures: dict[str, float] = {}
    for name in wanted:
        line = CASES[name](args.repeats)
        print(json.dumps(line), flush=True)
        figures.update({k: v["median"] for k, v in line.items() if isinstance(v, dict)})
    targets: dict[str, Any] = {"targets": "medians (reported, not asserted)"}
    for key, target in TARGETS_MS.items():
        if key in figures:
            met = figures[key] <= target
            targets[key] = {"value": figures[key], "target": f"<= {target}", "met": met}
    print(json.dumps(targets), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
