"""Metadata quorum benchmark: replog's built-in quorum (``raft://``) against
ZooKeeper and etcd, through the coordination API brokers use, in the same run.

    python -m benchmarks.quorum [--repeats 3] [--ops 200] [--failovers 1]
        [--deployments raft1,raft3,zk1,zk3,etcd1,etcd3]

Deployments: ``raftN`` is N ``replog controller`` processes (election timeout 500 ms, fetch
timeout 1000 ms; ``--raft-election-timeout-ms``/``--raft-fetch-timeout-ms``); ``zkN`` N
ZooKeeper servers (200 ms tick); ``etcdN`` N etcd members (500 ms election timeout). Every one
fsyncs its log before it acknowledges (ZooKeeper ``forceSync=yes``, etcd without
``--unsafe-no-fsync``; replog's quorum always does), all on loopback, one client in this
process. Cases, each measured on a fresh deployment:

- ``topic_creations``: ``--ops`` sequential ``create_topic`` calls (1 partition, RF 3), as the
  controller makes them; operations per second and p50/p99 latency.
- ``isr_changes``: ``--ops`` sequential ``compare_and_set_partition_state`` calls on one
  partition, shrinking and expanding its ISR, each expecting the partition epoch the last one
  returned -- the write a controller makes for every AlterPartition; ops/s and latency.
- ``failover`` (3 members): SIGKILL the leader (for ``raft3`` the active controller, i.e. the
  quorum's Raft leader), then retry ISR changes (500 ms call timeout, no pause) until one
  commits; seconds from the kill to that commit, as the client sees it. With 1 member the
  same case is ``restart``: SIGKILL the only server and start it again on its data; from the
  kill to the first commit (process start included; ``serving_again_s`` is the part until the
  restarted server answered its readiness check).

Every case is repeated ``--repeats`` times; the order of the deployments rotates from one
repeat to the next (interleaved, so a noisy stretch of the shared machine does not land on one
backend). One JSON line per measurement on stdout, then one ``summary`` line per (deployment,
case) with the median and the range. Figures are reported, never asserted.
"""

from __future__ import annotations

import argparse
import json
import logging
import shutil
import signal
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Protocol

import attrs

_ROOT = Path(__file__).resolve().parents[1]
if str(_ROOT) not in sys.path:  # the process launchers live under tests/
    sys.path.insert(0, str(_ROOT))

from tests.faults.harness import QuorumProcesses  # noqa: E402

from benchmarks.ensembles import EtcdCluster, ZkEnsemble  # noqa: E402
from replog.coord import connect  # noqa: E402
from replog.coord.contract import Coordinator  # noqa: E402
from replog.coord.errors import CoordinatorError  # noqa: E402
from replog.errors import RetriableError  # noqa: E402
from replog.metadata.types import ControllerInfo, PartitionState  # noqa: E402
from replog.quorum import commands as rc  # noqa: E402
from replog.quorum.channel import QuorumChannel  # noqa: E402

DEPLOYMENTS = ("raft1", "raft3", "zk1", "zk3", "etcd1", "etcd3")
SESSION_TIMEOUT_MS = 15_000  # outlives a failover: the benchmark's "controller" keeps its role
CALL_TIMEOUT_MS = 500
FAILOVER_LIMIT_S = 60.0
REPLICAS = (1, 2, 3)


class Deployment(Protocol):
    """What a case needs of a running metadata store."""

    def url(self) -> str: ...
    def leader(self) -> int | None: ...
    def kill9(self, member: int) -> None: ...
    def restart(self, member: int) -> None: ...
    def close(self) -> None: ...


@attrs.define
class RaftDeployment:
    """``replog controller`` processes."""

    quorum: QuorumProcesses

    @classmethod
    def start(cls, base: Path, n: int, args: list[str]) -> RaftDeployment:
        return cls(QuorumProcesses.start(base, n, args))

    def url(self) -> str:
        return self.quorum.url

    def leader(self) -> int | None:
        alive = [v.address for v in self.quorum.voters.values() if v.running]
        channel = QuorumChannel(alive)
        try:
            channel.call(rc.CurrentController(), timeout_ms=10_000, idempotent=True)
            address = channel.leader
        except CoordinatorError:
            return None
        finally:
            channel.close()
        return next((i for i, v in self.quorum.voters.items() if v.address == address), None)

    def kill9(self, member: int) -> None:
        self.quorum.voters[member].stop(signal.SIGKILL)

    def restart(self, member: int) -> None:
        voters = self.quorum.voters
        spec = ",".join(f"{i}@127.0.0.1:{v.port}" for i, v in voters.items())
        voters[member].spawn(spec)
        voters[member].wait_serving()

    def close(self) -> None:
        self.quorum.close()


@attrs.define
class ExternalDeployment:
    """A ZooKeeper ensemble or an etcd cluster (``benchmarks.ensembles``)."""

    servers: ZkEnsemble | EtcdCluster

    def url(self) -> str:
        return self.servers.url()

    def leader(self) -> int | None:
        return self.servers.leader()

    def kill9(self, member: int) -> None:
        self.servers.members[member].kill9()

    def restart(self, member: int) -> None:
        self.servers.members[member].spawn()
        self.servers.wait_ready()

    def close(self) -> None:
        self.servers.close()


def start_deployment(name: str, base: Path, args: argparse.Namespace) -> Deployment:
    """Start ``raftN``, ``zkN`` or ``etcdN`` under ``base``."""
    kind, n = name.rstrip("0123456789"), int(name[len(name.rstrip("0123456789")) :])
    if kind == "raft":
        voter_args = ["--election-timeout-ms", str(args.raft_election_timeout_ms)]
        voter_args += ["--fetch-timeout-ms", str(args.raft_fetch_timeout_ms)]
        voter_args += ["--request-timeout-ms", str(args.raft_fetch_timeout_ms)]
        return RaftDeployment.start(base, n, voter_args)
    if kind == "zk":
        return ExternalDeployment(ZkEnsemble.start(base, n))
    if kind == "etcd":
        return ExternalDeployment(EtcdCluster.start(base, n))
    raise ValueError(f"unknown deployment {name!r} (known: {', '.join(DEPLOYMENTS)})")


def _become_controller(coord: Coordinator) -> ControllerInfo:
    """Register brokers 1-3 and make broker 1 the controller (the writer every case uses)."""
    infos = [
        coord.register_broker(b, "127.0.0.1", 9000 + b, session_timeout_ms=SESSION_TIMEOUT_MS)
        for b in REPLICAS
    ]
    controller = coord.elect_controller(1, infos[0].incarnation_epoch)
    if controller.controller_id != 1:
        raise RuntimeError(f"broker 1 did not become the controller: {controller}")
    return controller


def _latency_summary(op: str, latencies_s: list[float], elapsed_s: float) -> dict[str, Any]:
    ordered = sorted(latencies_s)

    def pct(p: float) -> float:
        return round(1000 * ordered[min(len(ordered) - 1, int(p * len(ordered)))], 3)

    return {
        "ops": len(ordered),
        "ops_per_s": round(len(ordered) / elapsed_s, 1),
        "p50_ms": pct(0.50),
        "p99_ms": pct(0.99),
        "op": op,
    }


def measure_topic_creations(coord: Coordinator, ctl: ControllerInfo, ops: int) -> dict[str, Any]:
    """``ops`` sequential topic creations."""
    latencies: list[float] = []
    start = time.perf_counter()
    for i in range(ops):
        t0 = time.perf_counter()
        coord.create_topic(f"t-{i}", [REPLICAS], controller_epoch=ctl.controller_epoch)
        latencies.append(time.perf_counter() - t0)
    return _latency_summary("create_topic", latencies, time.perf_counter() - start)


def _next_isr(state: PartitionState) -> PartitionState:
    """Shrink a full ISR to the leader and one follower; expand it back."""
    isr = REPLICAS[:2] if len(state.isr) == len(REPLICAS) else REPLICAS
    return attrs.evolve(state, isr=isr)


def measure_isr_changes(coord: Coordinator, ctl: ControllerInfo, ops: int) -> dict[str, Any]:
    """``ops`` sequential partition-state CAS writes on one partition."""
    coord.create_topic("isr", [REPLICAS], controller_epoch=ctl.controller_epoch)
    state = coord.get_partition_state("isr", 0)
    if state is None:
        raise RuntimeError("the partition just created is missing")
    latencies: list[float] = []
    start = time.perf_counter()
    for _ in range(ops):
        t0 = time.perf_counter()
        result = coord.compare_and_set_partition_state(
            "isr", 0, state.partition_epoch, _next_isr(state), controller_epoch=ctl.controller_epoch
        )
        latencies.append(time.perf_counter() - t0)
        if not result.ok or result.state is None:
            raise RuntimeError(f"an uncontended CAS failed: {result}")
        state = result.state
    return _latency_summary(
        "compare_and_set_partition_state", latencies, time.perf_counter() - start
    )


def _commit_one_isr_change(coord: Coordinator, ctl: ControllerInfo, deadline: float) -> int:
    """Retry read + CAS (short timeouts, no pause) until one commits; the attempts made."""
    attempts = 0
    while True:
        attempts += 1
        try:
            state = coord.get_partition_state("failover", 0, timeout_ms=CALL_TIMEOUT_MS)
            if state is None:
                raise RuntimeError("the failover partition is missing")
            result = coord.compare_and_set_partition_state(
                "failover",
                0,
                state.partition_epoch,
                _next_isr(state),
                controller_epoch=ctl.controller_epoch,
                timeout_ms=CALL_TIMEOUT_MS,
            )
            if result.ok:
                return attempts
        except RetriableError:
            pass
        if time.monotonic() > deadline:
            raise RuntimeError(f"no write committed within {FAILOVER_LIMIT_S} s of the kill")


def measure_failover(
    deployment: Deployment, coord: Coordinator, ctl: ControllerInfo, members: int
) -> dict[str, Any]:
    """SIGKILL the leader (and, with one member, start it again); seconds to the next commit."""
    coord.create_topic("failover", [REPLICAS], controller_epoch=ctl.controller_epoch)
    _commit_one_isr_change(coord, ctl, time.monotonic() + FAILOVER_LIMIT_S)
    leader = deployment.leader()
    if leader is None:
        raise RuntimeError("no leader to kill")
    killed = time.monotonic()
    deployment.kill9(leader)
    restarted_s = None
    if members == 1:
        deployment.restart(leader)
        restarted_s = round(time.monotonic() - killed, 3)
    attempts = _commit_one_isr_change(coord, ctl, killed + FAILOVER_LIMIT_S)
    seconds = time.monotonic() - killed
    new_leader = deployment.leader()
    figures: dict[str, Any] = {
        "op": "kill -9 the leader, then compare_and_set_partition_state until one commits",
        "seconds": round(seconds, 3),
        "attempts": attempts,
        "killed": leader,
        "new_leader": new_leader,
    }
    if restarted_s is not None:  # the part spent starting the process again until it served
        figures["serving_again_s"] = restarted_s
    return figures


CASES = ("topic_creations", "isr_changes", "failover")


def run_case(name: str, case: str, base: Path, args: argparse.Namespace) -> dict[str, Any]:
    """One measurement of ``case`` on a fresh ``name`` deployment."""
    deployment = start_deployment(name, base, args)
    coord: Coordinator | None = None
    try:
        coord = connect(deployment.url())
        ctl = _become_controller(coord)
        members = int(name.lstrip("abcdefghijklmnopqrstuvwxyz"))
        if case == "topic_creations":
            figures = measure_topic_creations(coord, ctl, args.ops)
        elif case == "isr_changes":
            figures = measure_isr_changes(coord, ctl, args.ops)
        else:
            figures = measure_failover(deployment, coord, ctl, members)
            if members == 1:
                case = "restart"
        return {"deployment": name, "case": case, **figures}
    finally:
        if coord is not None:
            try:
                coord.close()
            except Exception:
                pass
        deployment.close()


def _key(result: dict[str, Any]) -> str:
    return "seconds" if "seconds" in result else "ops_per_s"


def summarize(results: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Median and range per (deployment, case), in the order first seen."""
    groups: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for result in results:
        groups.setdefault((result["deployment"], result["case"]), []).append(result)
    lines = []
    for (deployment, case), group in groups.items():
        key = _key(group[0])
        values = [r[key] for r in group]
        line: dict[str, Any] = {
            "summary": True,
            "deployment": deployment,
            "case": case,
            "metric": key,
            "median": round(statistics.median(values), 3),
            "min": min(values),
            "max": max(values),
            "runs": len(values),
        }
        if key == "ops_per_s":
            line["p50_ms_median"] = round(statistics.median(r["p50_ms"] for r in group), 3)
        lines.append(line)
    return lines


def run(args: argparse.Namespace, emit: Callable[[dict[str, Any]], None]) -> list[dict[str, Any]]:
    """Every (repeat, case, deployment), deployments rotated per repeat; returns the results."""
    names = [n for n in args.deployments.split(",") if n]
    cases = [c for c in args.cases.split(",") if c]
    unknown = sorted(set(cases) - set(CASES))
    if unknown:
        raise ValueError(f"unknown cases {unknown} (known: {', '.join(CASES)})")
    base = Path(tempfile.mkdtemp(prefix="replog-bench-quorum-"))
    results: list[dict[str, Any]] = []
    try:
        for repeat in range(args.repeats):
            order = names[repeat % len(names) :] + names[: repeat % len(names)]
            for case in cases:
                for name in order:
                    for i in range(args.failovers if case == "failover" else 1):
                        where = base / f"r{repeat}-{case}-{name}-{i}"
                        result = {"repeat": repeat, **run_case(name, case, where, args)}
                        results.append(result)
                        emit(result)
        for line in summarize(results):
            emit(line)
    finally:
        if not args.keep:
            shutil.rmtree(base, ignore_errors=True)
    return results


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m benchmarks.quorum``."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks.quorum", description=__doc__)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--ops", type=int, default=200, help="writes per throughput case")
    parser.add_argument("--failovers", type=int, default=1, help="kills per repeat")
    parser.add_argument("--deployments", default=",".join(DEPLOYMENTS))
    parser.add_argument("--cases", default=",".join(CASES))
    parser.add_argument("--raft-election-timeout-ms", type=int, default=500)
    parser.add_argument("--raft-fetch-timeout-ms", type=int, default=1_000)
    parser.add_argument("--keep", action="store_true", help="keep the data dirs and logs")
    args = parser.parse_args(argv)
    logging.getLogger("kazoo").setLevel(logging.CRITICAL)  # reconnect chatter after a kill
    print(json.dumps({"config": {k: v for k, v in vars(args).items() if k != "keep"}}), flush=True)
    run(args, lambda line: print(json.dumps(line), flush=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
