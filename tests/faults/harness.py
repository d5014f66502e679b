"""Real broker processes on loopback: start, stop, crash, pause and restart them by the PID this
module started (never by name).

Each broker runs ``python -m replog.broker --config FILE`` (or a wrapper module with the same
contract, such as ``tests.faults.powerloss_broker``), logs to ``broker-<id>.log`` and prints one
JSON line on stdout once serving; ``BrokerProcess.start`` waits for that line. The first start
takes any free port; the config is then rewritten with that port, so a restarted broker comes
back at the address clients and other brokers already know.

``QuorumProcesses`` runs the built-in metadata quorum the same way: ``replog controller``
voters, each printing one JSON line once it listens; brokers then use its ``raft://`` URL.

Used by the fault suite (``tests/faults``), ``tests/coord/test_raft_processes.py`` and
``benchmarks/replication.py``.
"""

from __future__ import annotations

import contextlib
import json
import os
import selectors
import signal
import subprocess
import sys
import time
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import IO, Any

import attrs

from replog.coord.errors import CoordinatorUnavailableError
from replog.quorum import commands as rc
from replog.quorum.channel import QuorumChannel
from tests.ports import free_port

__all__ = [
    "REPO_ROOT",
    "BrokerProcess",
    "ProcessCluster",
    "QuorumProcesses",
    "VoterProcess",
    "free_port",
]

REPO_ROOT = Path(__file__).resolve().parents[2]
_START_TIMEOUT_S = 60.0
_STOP_TIMEOUT_S = 30.0


@attrs.define
class BrokerProcess:
    """One broker process; see the module docstring."""

    broker_id: int
    base_dir: Path
    settings: dict[str, Any]
    module: str = "replog.broker"
    port: int = 0
    proc: subprocess.Popen[bytes] | None = None
    paused: bool = False
    starts: int = 0

    @property
    def config_path(self) -> Path:
        """The broker's JSON config file."""
        return self.base_dir / f"broker-{self.broker_id}.json"

    @property
    def log_path(self) -> Path:
        """Where the broker's stderr (its log) goes, appended across restarts."""
        return self.base_dir / f"broker-{self.broker_id}.log"

    @property
    def log_dir(self) -> Path:
        """The broker's (single) log dir."""
        return self.base_dir / f"broker-{self.broker_id}-data"

    @property
    def address(self) -> str:
        """``127.0.0.1:port`` (known after the first start)."""
        return f"127.0.0.1:{self.port}"

    @property
    def pid(self) -> int:
        """The running process's PID."""
        if self.proc is None:
            raise RuntimeError(f"broker {self.broker_id} is not running")
        return self.proc.pid

    @property
    def running(self) -> bool:
        """Whether the process exists and has not exited."""
        return self.proc is not None and self.proc.poll() is None

    def _write_config(self) -> None:
        config = {
            "broker_id": self.broker_id,
            "log_dirs": [str(self.log_dir)],
            "port": self.port,
            **self.settings,
        }
        self.config_path.write_text(json.dumps(config, indent=1))

    def spawn(self) -> None:
        """Start the process; ``wait_serving`` completes the start."""
        if self.running:
            raise RuntimeError(f"broker {self.broker_id} is already running")
        self._write_config()
        path = os.pathsep.join(p for p in (os.environ.get("PYTHONPATH"), str(REPO_ROOT)) if p)
        env = {**os.environ, "PYTHONPATH": path, "PYTHONUNBUFFERED": "1"}
        with open(self.log_path, "ab") as log:
            log.write(f"\n===== start #{self.starts + 1} ({self.module}) =====\n".encode())
            log.flush()
            self.proc = subprocess.Popen(
                [sys.executable, "-m", self.module, "--config", str(self.config_path)],
                stdout=subprocess.PIPE,
                stderr=log,
                stdin=subprocess.DEVNULL,
                cwd=str(REPO_ROOT),
                env=env,
            )
        self.starts += 1
        self.paused = False

    def wait_serving(self, timeout_s: float = _START_TIMEOUT_S) -> dict[str, Any]:
        """Read the "serving" line; on failure kill the process and raise with the log tail."""
        proc = self.proc
        if proc is None or proc.stdout is None:
            raise RuntimeError(f"broker {self.broker_id} was not spawned")
        line = _read_line(proc.stdout, time.monotonic() + timeout_s)
        try:
            info: dict[str, Any] = json.loads(line)
            if info.get("event") != "serving":
                raise ValueError(line)
        except ValueError:
            rc = proc.poll()
            self.kill9()
            raise RuntimeError(
                f"broker {self.broker_id} did not start (rc {rc}, stdout {line!r}):\n"
                + self.log_tail()
            ) from None
        self.port = int(info["port"])
        self._write_config()  # restarts keep the port
        return info

    def start(self, timeout_s: float = _START_TIMEOUT_S) -> dict[str, Any]:
        """Spawn and wait until serving."""
        self.spawn()
        return self.wait_serving(timeout_s)

    def terminate(self, timeout_s: float = _STOP_TIMEOUT_S) -> int | None:
        """SIGTERM (controlled shutdown) and wait; SIGKILL if it outlives ``timeout_s``."""
        proc = self.proc
        if proc is None:
            return None
        if proc.poll() is None:
            self.resume()
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout_s)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(10)
        return self._reap()

    def kill9(self) -> int | None:
        """SIGKILL (a crash: nothing flushed, the session left to expire) and reap."""
        proc = self.proc
        if proc is None:
            return None
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
        return self._reap()

    def send(self, signum: signal.Signals) -> None:
        """Send ``signum`` to the running process."""
        os.kill(self.pid, signum)

    def pause(self) -> None:
        """SIGSTOP (a GC pause, a zombie broker)."""
        self.send(signal.SIGSTOP)
        self.paused = True

    def resume(self) -> None:
        """SIGCONT after ``pause``."""
        if self.paused and self.running:
            self.send(signal.SIGCONT)
        self.paused = False

    def _reap(self) -> int | None:
        proc, self.proc = self.proc, None
        self.paused = False
        if proc is None:
            return None
        if proc.stdout is not None:
            proc.stdout.close()
        return proc.returncode

    def log_tail(self, lines: int = 40) -> str:
        """The last ``lines`` lines of the broker's log."""
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError:
            return f"(no log at {self.log_path})"
        tail = text.splitlines()[-lines:]
        return "\n".join(f"  [{self.broker_id}] {line}" for line in tail)


def _read_line(stream: IO[bytes], deadline: float) -> str:
    """One line from a pipe, or what arrived before ``deadline`` / EOF."""
    buffer = b""
    with selectors.DefaultSelector() as selector:
        selector.register(stream, selectors.EVENT_READ)
        while b"\n" not in buffer:
            remaining = deadline - time.monotonic()
            if remaining <= 0 or not selector.select(remaining):
                break
            chunk = os.read(stream.fileno(), 4096)
            if not chunk:
                break
            buffer += chunk
    return buffer.split(b"\n", 1)[0].decode(errors="replace")


@attrs.define
class ProcessCluster:
    """``n`` broker processes (ids 1..n) sharing one coordinator URL."""

    base_dir: Path
    brokers: dict[int, BrokerProcess]

    @classmethod
    def create(
        cls,
        base_dir: Path,
        coordinator_url: str,
        n: int,
        *,
        settings: Mapping[str, Any] | None = None,
        modules: Mapping[int, str] | None = None,
    ) -> ProcessCluster:
        """Describe the cluster (nothing starts yet); ``settings`` are ``BrokerConfig`` fields,
        ``modules`` picks a wrapper entry point per broker id."""
        base_dir.mkdir(parents=True, exist_ok=True)
        common = {"coordinator": coordinator_url, **(settings or {})}
        brokers = {
            i: BrokerProcess(
                i, base_dir, dict(common), module=(modules or {}).get(i, "replog.broker")
            )
            for i in range(1, n + 1)
        }
        return cls(base_dir, brokers)

    @classmethod
    @contextlib.contextmanager
    def running(
        cls,
        base_dir: Path,
        coordinator_url: str,
        n: int,
        *,
        settings: Mapping[str, Any] | None = None,
    ) -> Iterator[ProcessCluster]:
        """`create` and `start` ``n`` brokers; on an error in the block print their log tails;
        always stop them."""
        cluster = cls.create(base_dir, coordinator_url, n, settings=settings)
        cluster.start()
        try:
            yield cluster
        except BaseException:
            print(f"\n===== broker log tails =====\n{cluster.log_tails(60)}")
            raise
        finally:
            cluster.close()

    def start(self, ids: Iterable[int] | None = None) -> None:
        """Start brokers (all by default) in parallel and wait until each serves."""
        chosen = list(self.brokers) if ids is None else list(ids)
        try:
            for i in chosen:
                self.brokers[i].spawn()
            for i in chosen:
                self.brokers[i].wait_serving()
        except BaseException:
            self.close()
            raise

    @property
    def bootstrap(self) -> str:
        """Every broker's address (running or not: clients skip unreachable ones)."""
        return ",".join(b.address for b in self.brokers.values() if b.port)

    def close(self) -> None:
        """SIGCONT anything paused, SIGTERM everything, SIGKILL what lingers."""
        for broker in self.brokers.values():
            broker.resume()
            if broker.running:
                broker.send(signal.SIGTERM)
        deadline = time.monotonic() + _STOP_TIMEOUT_S
        for broker in self.brokers.values():
            proc = broker.proc
            if proc is not None:
                try:
                    proc.wait(max(0.1, deadline - time.monotonic()))
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait(10)
            broker._reap()

    def discard(self) -> None:
        """SIGKILL every broker at once: the end of a test whose checks are done. A controlled
        shutdown of three brokers costs ~6 s and checks nothing here (tests/broker covers it)."""
        for broker in self.brokers.values():
            broker.resume()
            if broker.running:
                broker.send(signal.SIGKILL)
        for broker in self.brokers.values():
            if broker.proc is not None:
                broker.proc.wait(10)
            broker._reap()

    def log_tails(self, lines: int = 40) -> str:
        """Every broker's log tail, for a failing test's report."""
        return "\n".join(
            f"--- broker {i} ({b.log_path}) ---\n{b.log_tail(lines)}"
            for i, b in self.brokers.items()
        )


@attrs.define
class VoterProcess:
    """One ``replog controller`` process: a voter of the built-in metadata quorum."""

    node_id: int
    port: int
    base_dir: Path
    args: list[str]
    proc: subprocess.Popen[bytes] | None = None
    paused: bool = False

    @property
    def address(self) -> tuple[str, int]:
        """``(host, port)`` of the voter."""
        return ("127.0.0.1", self.port)

    @property
    def log_path(self) -> Path:
        """The voter's stderr (its log)."""
        return self.base_dir / f"voter-{self.node_id}.log"

    @property
    def running(self) -> bool:
        """Whether the process exists and has not exited."""
        return self.proc is not None and self.proc.poll() is None

    def spawn(self, voters: str) -> None:
        """Start ``replog controller`` (``wait_serving`` completes the start)."""
        replog = Path(sys.executable).parent / "replog"
        path = os.pathsep.join(p for p in (os.environ.get("PYTHONPATH"), str(REPO_ROOT)) if p)
        argv = [str(replog), "controller", "--node-id", str(self.node_id), "--voters", voters]
        argv += ["--data-dir", str(self.base_dir / f"voter-{self.node_id}"), *self.args]
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(
                argv,
                stdout=subprocess.PIPE,
                stderr=log,
                stdin=subprocess.DEVNULL,
                env={**os.environ, "PYTHONPATH": path, "PYTHONUNBUFFERED": "1"},
            )

    def wait_serving(self, timeout_s: float = _START_TIMEOUT_S) -> None:
        """Read the "serving" line; raise with the log tail if it does not come."""
        if self.proc is None or self.proc.stdout is None:
            raise RuntimeError(f"voter {self.node_id} was not spawned")
        line = _read_line(self.proc.stdout, time.monotonic() + timeout_s)
        info = json.loads(line) if line.startswith("{") else {}
        if info.get("event") != "serving" or info.get("port") != self.port:
            raise RuntimeError(f"voter {self.node_id} did not start ({line!r}):\n{self.tail()}")

    def stop(self, signum: signal.Signals = signal.SIGTERM, timeout_s: float = 20.0) -> None:
        """Send ``signum`` and wait for the exit (SIGKILL if it outlives ``timeout_s``)."""
        proc = self.proc
        if proc is None:
            return
        if proc.poll() is None:
            proc.send_signal(signum)
            try:
                proc.wait(timeout_s)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(10)
        if proc.stdout is not None:
            proc.stdout.close()
        self.proc = None

    def pause(self) -> None:
        """SIGSTOP: the voter keeps its sockets open and answers nothing."""
        if self.running and self.proc is not None:
            self.proc.send_signal(signal.SIGSTOP)
            self.paused = True

    def resume(self) -> None:
        """SIGCONT after ``pause`` (harmless on a running voter)."""
        if self.running and self.proc is not None:
            self.proc.send_signal(signal.SIGCONT)
        self.paused = False

    def tail(self, lines: int = 30) -> str:
        """The last ``lines`` lines of the voter's log."""
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError:
            return f"(no log at {self.log_path})"
        return "\n".join(f"  [voter {self.node_id}] {x}" for x in text.splitlines()[-lines:])


@attrs.define
class QuorumProcesses:
    """``n`` voters (ids 1..n) of the built-in metadata quorum, as processes; brokers use
    ``url``."""

    voters: dict[int, VoterProcess]

    @classmethod
    def start(cls, base_dir: Path, n: int, args: Iterable[str] = ()) -> QuorumProcesses:
        """Start the voters in parallel (``args``: extra ``replog controller`` options) and
        wait until each listens (a leader is elected shortly after)."""
        base_dir.mkdir(parents=True, exist_ok=True)
        voters = {i: VoterProcess(i, free_port(), base_dir, list(args)) for i in range(1, n + 1)}
        spec = ",".join(f"{i}@127.0.0.1:{v.port}" for i, v in voters.items())
        quorum = cls(voters)
        try:
            for voter in voters.values():
                voter.spawn(spec)
            for voter in voters.values():
                voter.wait_serving()
        except BaseException:
            quorum.close()
            raise
        return quorum

    @classmethod
    @contextlib.contextmanager
    def running(cls, base_dir: Path, n: int, args: Iterable[str] = ()) -> Iterator[QuorumProcesses]:
        """`start` the voters; on an error in the block print their log tails; always stop."""
        quorum = cls.start(base_dir, n, args)
        try:
            yield quorum
        except BaseException:
            print(f"\n===== voter log tails =====\n{quorum.log_tails(30)}")
            raise
        finally:
            quorum.close()

    def restart(self, node_id: int) -> None:
        """Start a stopped voter again on its port and data dir, and wait until it listens."""
        spec = ",".join(f"{i}@127.0.0.1:{v.port}" for i, v in self.voters.items())
        voter = self.voters[node_id]
        voter.spawn(spec)
        voter.wait_serving()

    def leader(self, timeout_s: float = 30.0) -> int:
        """The voter answering as leader (a committed read through it), waiting for one; a
        paused voter is not asked (a call to it would wait out its whole timeout)."""
        alive = [v.address for v in self.voters.values() if v.running and not v.paused]
        channel = QuorumChannel(alive)
        deadline = time.monotonic() + timeout_s
        try:
            while True:  # short calls: a follower's hint may still name a paused leader
                try:
                    channel.call(rc.CurrentController(), timeout_ms=1_000, idempotent=True)
                    break
                except CoordinatorUnavailableError:
                    if time.monotonic() > deadline:
                        raise
            address = channel.leader
        finally:
            channel.close()
        return next(i for i, v in self.voters.items() if v.address == address)

    @property
    def url(self) -> str:
        """``raft://host:port,...`` of every voter."""
        return "raft://" + ",".join(f"127.0.0.1:{v.port}" for v in self.voters.values())

    def close(self) -> None:
        """SIGTERM every voter (SIGKILL what lingers); a paused one is resumed first."""
        for voter in self.voters.values():
            voter.resume()
            voter.stop()

    def discard(self) -> None:
        """SIGKILL every voter at once (a paused one too): the end of a test whose checks are
        done."""
        for voter in self.voters.values():
            voter.resume()
            if voter.proc is not None and voter.proc.poll() is None:
                voter.proc.kill()
        for voter in self.voters.values():
            voter.stop()

    def log_tails(self, lines: int = 30) -> str:
        """Every voter's log tail, for a failing test's report."""
        return "\n".join(v.tail(lines) for v in self.voters.values())
