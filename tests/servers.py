"""Test servers for the ZooKeeper backend: start a standalone ZooKeeper on a free loopback port
in a temp dir, and stop, crash, restart, pause and resume it by the PID this module started.

The server runs ``java ... QuorumPeerMain zoo.cfg`` (no zkServer.sh, no systemd) with a 200 ms
tick, loopback only, the admin server off and ``forceSync=no``. Readiness is the ``srvr``
four-letter word answering with a ``Mode:`` line. ``require_zookeeper()`` skips when java or the
jar is missing, and fails instead when ``REPLOG_REQUIRE_BACKENDS=1`` (CI). A server that is
installed but does not start is always an error naming its log.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path

import attrs
import pytest

from tests.ports import free_port

__all__ = ["ZOOKEEPER_JAR", "ZkServer", "free_port", "require_zookeeper", "start_zookeeper"]

ZOOKEEPER_JAR = "/usr/share/java/zookeeper.jar"
_CLASSPATH = ":".join(["/etc/zookeeper/conf", ZOOKEEPER_JAR, "/usr/share/java/slf4j-simple.jar"])
_START_TIMEOUT_S = 30.0


def require_zookeeper() -> None:
    """Skip (locally) or fail (``REPLOG_REQUIRE_BACKENDS=1``) unless java and the ZK jar exist."""
    missing = []
    if shutil.which("java") is None:
        missing.append("java on PATH")
    if not os.path.exists(ZOOKEEPER_JAR):
        missing.append(ZOOKEEPER_JAR)
    if not missing:
        return
    message = (
        f"ZooKeeper tests need {' and '.join(missing)} "
        "(apt-get install --no-install-recommends libzookeeper-java default-jre-headless)"
    )
    if os.environ.get("REPLOG_REQUIRE_BACKENDS") == "1":
        pytest.fail(f"REPLOG_REQUIRE_BACKENDS=1 but {message}", pytrace=False)
    pytest.skip(message)


def four_letter_word(host: str, port: int, word: str, timeout_s: float = 1.0) -> str:
    """Send a four-letter word and return the whole reply ('' if the server is not there)."""
    try:
        with socket.create_connection((host, port), timeout=timeout_s) as s:
            s.sendall(word.encode())
            chunks = []
            while chunk := s.recv(4096):
                chunks.append(chunk)
            return b"".join(chunks).decode(errors="replace")
    except OSError:
        return ""


@attrs.define
class ZkServer:
    """A standalone ZooKeeper this test process started (and only this process signals)."""

    host: str
    port: int
    base_dir: Path
    data_dir: Path
    log_path: Path
    proc: subprocess.Popen[bytes] | None = None
    paused: bool = False

    @property
    def pid(self) -> int:
        """The JVM's PID (the server must be running)."""
        if self.proc is None:
            raise RuntimeError("the ZooKeeper server is not running")
        return self.proc.pid

    @property
    def hosts(self) -> str:
        """The ``host:port`` connect string."""
        return f"{self.host}:{self.port}"

    def url(self, chroot: str) -> str:
        """A ``zookeeper://`` URL on this server with ``chroot``."""
        return f"zookeeper://{self.hosts}/{chroot.strip('/')}"

    def _spawn(self) -> None:
        log = open(self.log_path, "ab")  # noqa: SIM115 - the child keeps it open
        try:
            self.proc = subprocess.Popen(
                [
                    "java",
                    "-Xmx256m",
                    "-XX:+UseSerialGC",
                    "-XX:TieredStopAtLevel=1",
                    "-Dzookeeper.jmx.log4j.disable=true",
                    "-cp",
                    _CLASSPATH,
                    "org.apache.zookeeper.server.quorum.QuorumPeerMain",
                    str(self.base_dir / "zoo.cfg"),
                ],
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
            )
        finally:
            log.close()
        self.wait_ready()

    def wait_ready(self, timeout_s: float = _START_TIMEOUT_S) -> None:
        """Wait until ``srvr`` reports a Mode, else stop the server and raise with the log."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.proc is not None and self.proc.poll() is not None:
                break
            if "Mode:" in four_letter_word(self.host, self.port, "srvr", 0.5):
                return
            time.sleep(0.05)
        rc = None if self.proc is None else self.proc.poll()
        self.stop()
        raise RuntimeError(
            f"ZooKeeper on {self.hosts} did not start (exit code {rc}); see {self.log_path}"
        )

    def stop(self) -> None:
        """SIGTERM (after SIGCONT if paused) and wait; idempotent."""
        proc, self.proc = self.proc, None
        if proc is None:
            return
        if proc.poll() is None:
            if self.paused:
                os.kill(proc.pid, signal.SIGCONT)
            proc.terminate()
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=10)
        self.paused = False

    def kill9(self) -> None:
        """Crash the server (SIGKILL) and reap it."""
        proc, self.proc = self.proc, None
        if proc is not None and proc.poll() is None:
            proc.kill()
            proc.wait(timeout=10)
        self.paused = False

    def restart(self) -> None:
        """Start again on the same port and data dir (after ``stop`` or ``kill9``)."""
        if self.proc is not None:
            self.stop()
        self._spawn()

    def pause(self) -> None:
        """SIGSTOP the server (requests hang until ``resume``)."""
        os.kill(self.pid, signal.SIGSTOP)
        self.paused = True

    def resume(self) -> None:
        """SIGCONT a paused server."""
        if self.paused and self.proc is not None:
            os.kill(self.proc.pid, signal.SIGCONT)
        self.paused = False


def start_zookeeper(tmp_dir: Path | str, *, port: int | None = None) -> ZkServer:
    """Write ``zoo.cfg`` under ``tmp_dir`` and start a standalone server on a free port."""
    require_zookeeper()
    base = Path(tmp_dir)
    data = base / "data"
    data.mkdir(parents=True, exist_ok=True)
    chosen = port if port is not None else free_port()
    (base / "zoo.cfg").write_text(
        "\n".join(
            [
                "tickTime=200",
                "initLimit=20",
                "syncLimit=10",
                f"dataDir={data}",
                f"clientPort={chosen}",
                "clientPortAddress=127.0.0.1",
                "admin.enableServer=false",
                "4lw.commands.whitelist=ruok,srvr,mntr,stat,cons",
                "minSessionTimeout=400",
                "maxSessionTimeout=60000",
                "maxClientCnxns=0",
                "forceSync=no",
                "",
            ]
        )
    )
    server = ZkServer(
        host="127.0.0.1",
        port=chosen,
        base_dir=base,
        data_dir=data,
        log_path=base / "server.log",
    )
    server._spawn()
    return server
