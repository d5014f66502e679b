"""The built-in quorum as processes: three ``replog controller`` voters, three brokers on
``raft://`` (``replog broker`` processes), a kafka-python producer with acks=all. Stop the
quorum's leader voter: the two survivors elect another, the brokers' coordinator calls follow
it, and the producer is acknowledged again.

Real processes on loopback (this is where ``time.sleep`` is allowed); every process is one this
module started, stopped by its PID."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import attrs
import pytest
from kafka import KafkaAdminClient, KafkaProducer
from kafka.admin import NewTopic

from replog.coord.errors import CoordinatorUnavailableError
from replog.quorum import commands as rc
from replog.quorum.channel import QuorumChannel
from tests.faults.harness import REPO_ROOT, ProcessCluster, _read_line

#: quick elections so a case fits in seconds (the CLI defaults are 1 s / 2 s)
VOTER_ARGS = ["--election-timeout-ms", "300", "--fetch-timeout-ms", "1000"]
VOTER_ARGS += ["--request-timeout-ms", "500"]
BROKER_SETTINGS = {
    "session_timeout_ms": 4_000,
    "heartbeat_interval_ms": 200,
    "replica_lag_ms_max": 4_000,
    "replica_fetch_wait_ms_max": 100,
    "default_replication_factor": 3,
    "default_min_insync_replicas": 2,
    "controlled_shutdown_timeout_ms": 5_000,
    "request_timeout_ms": 5_000,
}
TOPIC = "quorum-failover"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@attrs.define
class Voter:
    """One ``replog controller`` process."""

    node_id: int
    port: int
    base_dir: Path
    proc: subprocess.Popen[bytes] | None = None

    @property
    def address(self) -> tuple[str, int]:
        return ("127.0.0.1", self.port)

    @property
    def log_path(self) -> Path:
        return self.base_dir / f"voter-{self.node_id}.log"

    def spawn(self, voters: str) -> None:
        replog = Path(sys.executable).parent / "replog"
        path = os.pathsep.join(p for p in (os.environ.get("PYTHONPATH"), str(REPO_ROOT)) if p)
        args = [str(replog), "controller", "--node-id", str(self.node_id), "--voters", voters]
        args += ["--data-dir", str(self.base_dir / f"voter-{self.node_id}"), *VOTER_ARGS]
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(
                args,
                stdout=subprocess.PIPE,
                stderr=log,
                stdin=subprocess.DEVNULL,
                env={**os.environ, "PYTHONPATH": path, "PYTHONUNBUFFERED": "1"},
            )

    def wait_serving(self) -> None:
        assert self.proc is not None and self.proc.stdout is not None
        line = _read_line(self.proc.stdout, time.monotonic() + 30)
        info = json.loads(line) if line.startswith("{") else {}
        assert info.get("event") == "serving", f"voter {self.node_id}: {line!r}\n{self.tail()}"
        assert info["port"] == self.port

    def stop(self, signum: signal.Signals) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signum)
            self.proc.wait(20)

    def terminate(self) -> int | None:
        proc = self.proc
        if proc is None:
            return None
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(20)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(10)
        if proc.stdout is not None:
            proc.stdout.close()
        return proc.returncode

    def tail(self) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-30:])
        except OSError:
            return ""


@attrs.define
class Quorum:
    voters: dict[int, Voter]

    @property
    def url(self) -> str:
        return "raft://" + ",".join(f"127.0.0.1:{v.port}" for v in self.voters.values())

    def leader(self, timeout_s: float = 30.0) -> int:
        """The voter answering as leader (a committed read through it), waiting for one."""
        alive = [v.address for v in self.voters.values() if v.proc and v.proc.poll() is None]
        channel = QuorumChannel(alive)
        try:
            channel.call(rc.CurrentController(), timeout_ms=int(timeout_s * 1000), idempotent=True)
            address = channel.leader
        finally:
            channel.close()
        return next(i for i, v in self.voters.items() if v.address == address)

    def close(self) -> None:
        for voter in self.voters.values():
            voter.terminate()


@pytest.fixture
def quorum(tmp_path: Path) -> Iterator[Quorum]:
    voters = {i: Voter(i, _free_port(), tmp_path) for i in (1, 2, 3)}
    spec = ",".join(f"{i}@127.0.0.1:{v.port}" for i, v in voters.items())
    q = Quorum(voters)
    try:
        for voter in voters.values():
            voter.spawn(spec)
        for voter in voters.values():
            voter.wait_serving()
        yield q
    finally:
        q.close()


@pytest.fixture
def cluster(quorum: Quorum, tmp_path: Path) -> Iterator[ProcessCluster]:
    brokers = ProcessCluster.create(tmp_path / "brokers", quorum.url, 3, settings=BROKER_SETTINGS)
    brokers.start()
    try:
        yield brokers
    finally:
        brokers.close()


def _produce(producer: KafkaProducer, value: bytes, timeout_s: float) -> float:
    """Send until acknowledged (retrying what the cluster refuses meanwhile); seconds taken."""
    start = time.monotonic()
    while True:
        try:
            producer.send(TOPIC, value, partition=0).get(timeout=10)
            return time.monotonic() - start
        except Exception:
            if time.monotonic() - start > timeout_s:
                raise
            time.sleep(0.2)


@pytest.mark.parametrize("signum", [signal.SIGKILL, signal.SIGTERM], ids=["kill", "term"])
def test_produce_survives_the_loss_of_the_quorum_leader(
    quorum: Quorum, cluster: ProcessCluster, signum: signal.Signals
) -> None:
    """SIGKILL: the followers stand after their fetch timeout; SIGTERM: the leader resigns
    first and a successor is elected at once."""
    admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap, request_timeout_ms=10_000)
    try:
        admin.create_topics([NewTopic(TOPIC, 1, 3, topic_configs={"min.insync.replicas": "2"})])
    finally:
        admin.close()
    producer = KafkaProducer(
        bootstrap_servers=cluster.bootstrap,
        acks="all",
        enable_idempotence=False,  # replog does not implement InitProducerId
        retries=5,
        request_timeout_ms=5_000,
    )
    try:
        _produce(producer, b"before", timeout_s=30)
        leader = quorum.leader()
        quorum.voters[leader].stop(signum)
        signalled = time.monotonic()
        new_leader = quorum.leader()
        elected_s = time.monotonic() - signalled
        assert new_leader != leader
        for i in range(20):
            _produce(producer, b"after-%d" % i, timeout_s=30)
        acked_s = time.monotonic() - signalled
        # the figures a run reports with -s
        print(f"leader {leader} got {signum.name}: {new_leader} leads after {elected_s:.2f} s")
        print(f"20 acks=all records acknowledged {acked_s:.2f} s after the signal")
    finally:
        producer.close()
    # the brokers' sessions lived through the failover: every one is still registered
    channel = QuorumChannel([v.address for i, v in quorum.voters.items() if i != leader])
    try:
        live = channel.call(rc.LiveBrokers(), timeout_ms=10_000, idempotent=True)
    finally:
        channel.close()
    assert sorted(live) == [1, 2, 3]
    dead = QuorumChannel([quorum.voters[leader].address])
    try:
        with pytest.raises(CoordinatorUnavailableError):
            dead.call(rc.CurrentController(), timeout_ms=500, idempotent=True)
    finally:
        dead.close()
