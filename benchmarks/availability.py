"""Availability under faults: the longest stretch without an acknowledged write after a fault.

    python -m benchmarks.availability [--seeds 3] [--faults 6] [--modes replicated,fsync]

Per (durability mode, seed): 3 broker processes on loopback with ZooKeeper, topic RF 3 / min
ISR 2 over 2 partitions, a producer with acks=all sending continuously (a bounded window in
flight, every acknowledgement time-stamped), and a seeded nemesis that applies ``--faults``
faults one after another. Each fault picks a kind and a target: kill -9 then restart, SIGSTOP
past the session timeout then SIGCONT, or a clean restart, of the leader of partition 0, of the
controller, or of a random broker. After each fault the run waits for every ISR to be full
again and for acknowledgements to flow, then measures the **longest gap between consecutive
acknowledgements** from the fault's start to that recovery. At the end every acknowledged
record must be consumed at its acknowledged offset (the fault suite's check): a run that loses
one reports it.

One JSON line per fault, then one summary line per mode with the worst gap per fault kind.
Figures are reported, never asserted (2-core machine, shared): session timeout 2 s, so a crash
of a leader costs about that much by design.
"""

from __future__ import annotations

import argparse
import itertools
import json
import random
import shutil
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import attrs

_ROOT = Path(__file__).resolve().parents[1]
if str(_ROOT) not in sys.path:  # the harness and the ZooKeeper helper live under tests/
    sys.path.insert(0, str(_ROOT))

from tests.faults.harness import ProcessCluster  # noqa: E402
from tests.faults.workload import (  # noqa: E402
    FAULT_SETTINGS,
    PARTITIONS,
    SESSION_TIMEOUT_MS,
    TOPIC,
    check_acked_records_consumed,
    controller_id,
    create_topic,
    describe,
    leader_of,
    wait_until,
)
from tests.servers import start_zookeeper  # noqa: E402

from replog.client import Producer  # noqa: E402

KINDS = ("kill_restart", "pause_resume", "clean_restart")
TARGETS = ("leader", "controller", "random")


@attrs.define
class TimedProducer:
    """acks=all records round-robin over the partitions, ``window`` in flight, each
    acknowledgement recorded with its monotonic time (the fault suite's check reads
    ``acked`` as (partition, offset, value))."""

    bootstrap: str
    window: int = 32
    acked: list[tuple[int, int, bytes]] = attrs.Factory(list)
    ack_times: list[float] = attrs.Factory(list)
    failed: int = 0
    _lock: threading.Lock = attrs.Factory(threading.Lock)
    _stop: threading.Event = attrs.Factory(threading.Event)
    _thread: threading.Thread | None = None

    def start(self) -> TimedProducer:
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()
        return self

    def _run(self) -> None:
        slots = threading.Semaphore(self.window)
        with Producer(
            self.bootstrap,
            acks="all",
            linger_ms=1,
            retries=1_000_000,
            retry_backoff_ms=100,
            request_timeout_ms=3_000,
        ) as producer:
            sent = 0
            while not self._stop.is_set():
                if not slots.acquire(timeout=0.2):
                    continue
                value = b"a%09d" % sent
                future = producer.send(TOPIC, value, partition=sent % PARTITIONS)
                future.add_done_callback(lambda f, v=value: self._done(f, v, slots))
                sent += 1
            producer.flush(60)

    def _done(self, future: Any, value: bytes, slots: threading.Semaphore) -> None:
        slots.release()
        try:
            meta = future.result()
        except Exception:
            with self._lock:
                self.failed += 1
            return
        with self._lock:
            self.acked.append((meta.partition, meta.offset, value))
            self.ack_times.append(time.monotonic())

    def acked_since(self, since: float) -> int:
        with self._lock:
            return sum(1 for t in self.ack_times if t >= since)

    def longest_gap(self, start: float, end: float) -> float:
        """The longest time in [start, end] with no acknowledgement (seconds)."""
        with self._lock:
            times = sorted(t for t in self.ack_times if start <= t <= end)
        points = [start, *times, end]
        return max(b - a for a, b in itertools.pairwise(points))

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(120)


def _target(cluster: ProcessCluster, role: str, rng: random.Random) -> int:
    if role == "leader":
        return leader_of(cluster, 0)
    if role == "controller":
        return controller_id(cluster)
    return rng.choice(sorted(cluster.brokers))


def _isr_complete(cluster: ProcessCluster) -> bool:
    return all(len(p.isr) == 3 for p in describe(cluster).values())


def _apply(cluster: ProcessCluster, kind: str, broker_id: int, rng: random.Random) -> None:
    broker = cluster.brokers[broker_id]
    if kind == "kill_restart":
        broker.kill9()
        time.sleep(rng.uniform(0.5, 3.0))
        broker.start()
    elif kind == "pause_resume":
        broker.pause()
        time.sleep(SESSION_TIMEOUT_MS / 1000 * rng.uniform(1.2, 2.0))
        broker.resume()
    else:
        broker.terminate()
        broker.start()


def run_mode(mode: str, seed: int, faults: int, root: Path, zk_url: str) -> list[dict[str, Any]]:
    """One cluster, ``faults`` faults; a row per fault."""
    rng = random.Random(f"{mode}-{seed}")
    cluster = ProcessCluster.create(
        root / f"{mode}-{seed}",
        zk_url,
        3,
        settings={**FAULT_SETTINGS, "durability": mode},
    )
    rows: list[dict[str, Any]] = []
    cluster.start()
    producer: TimedProducer | None = None
    try:
        create_topic(cluster)
        wait_until("a full ISR", lambda: _isr_complete(cluster), cluster, 60)
        producer = TimedProducer(cluster.bootstrap).start()
        wait_until("acks flowing", lambda: producer.acked_since(0) > 200, cluster, 60)
        for number in range(faults):
            kind, role = rng.choice(KINDS), rng.choice(TARGETS)
            target = _target(cluster, role, rng)
            started = time.monotonic()
            _apply(cluster, kind, target, rng)
            wait_until("a full ISR again", lambda: _isr_complete(cluster), cluster, 120)
            since = time.monotonic()
            wait_until(
                "acks after recovery",
                lambda since=since: producer.acked_since(since) > 50,  # type: ignore[misc]
                cluster,
            )
            ended = time.monotonic()
            rows.append(
                {
                    "mode": mode,
                    "seed": seed,
                    "fault": number,
                    "kind": kind,
                    "role": role,
                    "broker": target,
                    "longest_gap_ms": round(producer.longest_gap(started, ended) * 1000),
                    "recovery_ms": round((since - started) * 1000),
                }
            )
            print(json.dumps(rows[-1]), flush=True)
        producer.stop()
        check_acked_records_consumed(cluster, producer)  # type: ignore[arg-type]
        rows.append({"mode": mode, "seed": seed, "acked": len(producer.acked), "lost": 0})
    except AssertionError as exc:
        rows.append({"mode": mode, "seed": seed, "error": str(exc)[:500]})
        print(json.dumps(rows[-1]), flush=True)
    finally:
        if producer is not None:
            producer.stop()
        cluster.close()
    return rows


def main(argv: list[str] | None = None) -> int:
    """Run every (mode, seed); print rows and a summary per mode."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks.availability", description=__doc__)
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--faults", type=int, default=6)
    parser.add_argument("--modes", default="replicated,fsync")
    args = parser.parse_args(argv)
    root = Path(tempfile.mkdtemp(prefix="replog-availability-"))
    zk = start_zookeeper(root / "zk")
    failures = 0
    try:
        for mode in args.modes.split(","):
            rows: list[dict[str, Any]] = []
            for seed in range(args.seeds):
                rows += run_mode(mode, seed, args.faults, root, zk.url(f"avail-{mode}-{seed}"))
            gaps: dict[str, int] = {}
            for row in rows:
                if "longest_gap_ms" in row:
                    key = f"{row['kind']}/{row['role']}"
                    gaps[key] = max(gaps.get(key, 0), row["longest_gap_ms"])
            errors = [r for r in rows if "error" in r]
            failures += len(errors)
            summary = {
                "mode": mode,
                "seeds": args.seeds,
                "faults": sum(1 for r in rows if "longest_gap_ms" in r),
                "worst_gap_ms": max(gaps.values(), default=0),
                "worst_gap_ms_by_fault": dict(sorted(gaps.items())),
                "runs_with_errors": len(errors),
            }
            print(json.dumps(summary), flush=True)
    finally:
        zk.stop()
        shutil.rmtree(root, ignore_errors=True)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
