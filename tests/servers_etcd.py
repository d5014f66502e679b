"""Start and stop a throwaway single-node etcd 3.4 for tests.

``start_etcd(tmp_dir)`` runs ``etcd`` on two free loopback ports with a data dir in ``tmp_dir``,
waits for ``GET /health``, and returns an ``EtcdServer`` whose fault hooks act only on the PID
this module started. ``require_etcd()`` skips when the binary is missing, but fails under
``REPLOG_REQUIRE_BACKENDS=1`` (CI installs it). A server that is installed but does not come up
is always an error naming its log.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import time
import urllib.request
from pathlib import Path

import attrs
import pytest

from tests.ports import free_port

__all__ = ["EtcdServer", "free_port", "require_etcd", "start_etcd"]

READY_TIMEOUT_S = 15.0


def require_etcd() -> str:
    """The etcd binary's path; skip (or fail under REPLOG_REQUIRE_BACKENDS=1) without it."""
    path = shutil.which("etcd")
    if path is None:
        message = "etcd is not on PATH (apt-get install etcd-server)"
        if os.environ.get("REPLOG_REQUIRE_BACKENDS") == "1":
            pytest.fail(f"{message}; REPLOG_REQUIRE_BACKENDS=1 requires it", pytrace=False)
        pytest.skip(message)
    return path


@attrs.define
class EtcdServer:
    """One etcd process started by this module."""

    binary: str
    data_dir: Path
    log_path: Path
    client_port: int
    peer_port: int
    proc: subprocess.Popen[bytes] | None = None
    paused: bool = False

    @property
    def client_url(self) -> str:
        """``http://127.0.0.1:<client port>``."""
        return f"http://127.0.0.1:{self.client_port}"

    @property
    def pid(self) -> int:
        """The running server's PID."""
        if self.proc is None:
            raise RuntimeError("etcd is not running")
        return self.proc.pid

    def _command(self) -> list[str]:
        c, p = self.client_url, f"http://127.0.0.1:{self.peer_port}"
        return [
            self.binary,
            "--name", "n1",
            "--data-dir", str(self.data_dir),
            "--listen-client-urls", c,
            "--advertise-client-urls", c,
            "--listen-peer-urls", p,
            "--initial-advertise-peer-urls", p,
            "--initial-cluster", f"n1={p}",
            "--initial-cluster-state", "new",
            "--initial-cluster-token", "replog-test",
            "--heartbeat-interval", "50",
            "--election-timeout", "500",
            "--logger", "zap",
            "--log-level", "warn",
            "--unsafe-no-fsync",
        ]  # fmt: skip

    def start(self) -> None:
        """Spawn etcd and wait until ``/health`` says healthy."""
        log = self.log_path.open("ab")
        try:
            self.proc = subprocess.Popen(
                self._command(), stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL
            )
        finally:
            log.close()
        deadline = time.monotonic() + READY_TIMEOUT_S
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                break
            if self._healthy():
                return
            time.sleep(0.05)
        self._terminate()
        tail = self.log_path.read_text(errors="replace")[-2000:]
        raise RuntimeError(f"etcd did not become healthy; log {self.log_path}:\n{tail}")

    def _healthy(self) -> bool:
        try:
            with urllib.request.urlopen(f"{self.client_url}/health", timeout=1) as r:
                return bool(json.loads(r.read()).get("health") == "true")
        except (OSError, ValueError):
            return False

    def _terminate(self) -> None:
        proc, self.proc = self.proc, None
        if proc is None or proc.poll() is not None:
            return
        if self.paused:
            os.kill(proc.pid, signal.SIGCONT)
            self.paused = False
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()

    def stop(self) -> None:
        """SIGCONT if paused, then SIGTERM and wait (idempotent)."""
        self._terminate()

    def kill9(self) -> None:
        """SIGKILL the server and reap it."""
        proc, self.proc = self.proc, None
        if proc is not None and proc.poll() is None:
            proc.kill()
            proc.wait()
        self.paused = False

    def restart(self) -> None:
        """Start again on the same data dir and ports (after ``stop`` or ``kill9``)."""
        self._terminate()
        self.start()

    def pause(self) -> None:
        """SIGSTOP the server."""
        os.kill(self.pid, signal.SIGSTOP)
        self.paused = True

    def resume(self) -> None:
        """SIGCONT the server."""
        if self.paused:
            os.kill(self.pid, signal.SIGCONT)
            self.paused = False


def start_etcd(tmp_dir: Path | str) -> EtcdServer:
    """Start a fresh etcd under ``tmp_dir`` (data in ``tmp_dir/data``, log ``tmp_dir/etcd.log``)."""
    binary = require_etcd()
    root = Path(tmp_dir)
    root.mkdir(parents=True, exist_ok=True)
    server = EtcdServer(
        binary=binary,
        data_dir=root / "data",
        log_path=root / "etcd.log",
        client_port=free_port(),
        peer_port=free_port(),
    )
    server.start()
    return server
