"""ZooKeeper and etcd with one or three members on loopback, for ``benchmarks.quorum``'s
baselines: start, find the leader, SIGKILL one member and start it again, stop -- always by the
PID this module started.

The single-server tests' launchers (``tests/servers.py``, ``tests/servers_etcd.py``) start one
member with fsync off; a benchmark against replog's quorum, which fsyncs every append before it
counts, needs the baselines to fsync too, and a failover needs three members. Settings follow
those launchers otherwise: ZooKeeper with a 200 ms tick on
``QuorumPeerMain`` (no zkServer.sh), etcd with a 50 ms heartbeat and a 500 ms election timeout.
``sync=False`` gives the tests' ``forceSync=no`` / ``--unsafe-no-fsync``.
"""

from __future__ import annotations

import json
import subprocess
import time
import urllib.request
import uuid
from pathlib import Path

import attrs
from tests.servers import ZOOKEEPER_JAR, four_letter_word, free_port, require_zookeeper
from tests.servers_etcd import require_etcd

__all__ = ["EtcdCluster", "Member", "ZkEnsemble"]

_CLASSPATH = ":".join(["/etc/zookeeper/conf", ZOOKEEPER_JAR, "/usr/share/java/slf4j-simple.jar"])
_READY_TIMEOUT_S = 30.0


@attrs.define
class Member:
    """One server process: its command, its log, its client port."""

    member_id: int
    argv: list[str]
    log_path: Path
    client_port: int
    proc: subprocess.Popen[bytes] | None = None

    @property
    def running(self) -> bool:
        """Whether the process exists and has not exited."""
        return self.proc is not None and self.proc.poll() is None

    def spawn(self) -> None:
        """Start the process (output appended to its log)."""
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(
                self.argv, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL
            )

    def kill9(self) -> None:
        """SIGKILL and reap."""
        proc, self.proc = self.proc, None
        if proc is not None and proc.poll() is None:
            proc.kill()
            proc.wait(10)

    def stop(self) -> None:
        """SIGTERM, SIGKILL after 10 s."""
        proc, self.proc = self.proc, None
        if proc is None or proc.poll() is not None:
            return
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)


def _wait(predicate: object, what: str, timeout_s: float = _READY_TIMEOUT_S) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if callable(predicate) and predicate():
            return
        time.sleep(0.02)
    raise RuntimeError(f"timed out waiting for {what}")


@attrs.define
class ZkEnsemble:
    """``n`` ZooKeeper servers (standalone when ``n`` is 1)."""

    base_dir: Path
    members: dict[int, Member]

    @classmethod
    def start(cls, base_dir: Path, n: int, *, sync: bool = True) -> ZkEnsemble:
        """Write each member's ``zoo.cfg`` (and ``myid``) and start them all."""
        require_zookeeper()
        peers = {i: (free_port(), free_port()) for i in range(1, n + 1)}
        members: dict[int, Member] = {}
        for i in peers:
            root = base_dir / f"zk-{i}"
            (root / "data").mkdir(parents=True, exist_ok=True)
            (root / "data" / "myid").write_text(f"{i}\n")
            port = free_port()
            lines = [
                "tickTime=200", "initLimit=20", "syncLimit=10",
                f"dataDir={root / 'data'}", f"clientPort={port}",
                "clientPortAddress=127.0.0.1", "admin.enableServer=false",
                "4lw.commands.whitelist=ruok,srvr,mntr,stat,cons",
                "minSessionTimeout=400", "maxSessionTimeout=60000", "maxClientCnxns=0",
                f"forceSync={'yes' if sync else 'no'}",
            ]  # fmt: skip
            if n > 1:
                lines += [f"server.{j}=127.0.0.1:{a}:{b}" for j, (a, b) in peers.items()]
            (root / "zoo.cfg").write_text("\n".join(lines) + "\n")
            argv = ["java", "-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1"]
            argv += ["-Dzookeeper.jmx.log4j.disable=true", "-cp", _CLASSPATH]
            argv += ["org.apache.zookeeper.server.quorum.QuorumPeerMain", str(root / "zoo.cfg")]
            members[i] = Member(i, argv, root / "server.log", port)
        ensemble = cls(base_dir, members)
        try:
            for member in members.values():
                member.spawn()
            ensemble.wait_ready()
        except BaseException:
            ensemble.close()
            raise
        return ensemble

    def _mode(self, member: Member) -> str:
        reply = four_letter_word("127.0.0.1", member.client_port, "srvr")
        for line in reply.splitlines():
            if line.startswith("Mode:"):
                return line.split(":", 1)[1].strip()
        return ""

    def leader(self) -> int | None:
        """The running member whose ``srvr`` says leader (or standalone)."""
        for i, member in self.members.items():
            if member.running and self._mode(member) in ("leader", "standalone"):
                return i
        return None

    def wait_ready(self) -> None:
        """Every running member serves and one leads."""

        def ready() -> bool:
            modes = [self._mode(m) for m in self.members.values() if m.running]
            leaders = sum(m in ("leader", "standalone") for m in modes)
            return all(modes) and leaders == 1

        _wait(ready, "a ZooKeeper leader")

    def url(self) -> str:
        """A ``zookeeper://`` URL on every member with a fresh chroot."""
        hosts = ",".join(f"127.0.0.1:{m.client_port}" for m in self.members.values())
        return f"zookeeper://{hosts}/bench-{uuid.uuid4().hex[:8]}"

    def close(self) -> None:
        """Stop every member."""
        for member in self.members.values():
            member.stop()


def _post(port: int, path: str, body: dict[str, object]) -> dict[str, object]:
    request = urllib.request.Request(
        f"http://127.0.0.1:{port}{path}", data=json.dumps(body).encode(), method="POST"
    )
    with urllib.request.urlopen(request, timeout=1) as response:
        reply: dict[str, object] = json.loads(response.read())
        return reply


@attrs.define
class EtcdCluster:
    """``n`` etcd members."""

    base_dir: Path
    members: dict[int, Member]

    @classmethod
    def start(cls, base_dir: Path, n: int, *, sync: bool = True) -> EtcdCluster:
        """Start ``n`` members as one new cluster."""
        binary = require_etcd()
        ports = {i: (free_port(), free_port()) for i in range(1, n + 1)}
        cluster_spec = ",".join(f"e{i}=http://127.0.0.1:{p}" for i, (_, p) in ports.items())
        token = f"bench-{uuid.uuid4().hex[:8]}"
        members: dict[int, Member] = {}
        for i, (client, peer) in ports.items():
            root = base_dir / f"etcd-{i}"
            root.mkdir(parents=True, exist_ok=True)
            c, p = f"http://127.0.0.1:{client}", f"http://127.0.0.1:{peer}"
            argv = [
                binary, "--name", f"e{i}", "--data-dir", str(root / "data"),
                "--listen-client-urls", c, "--advertise-client-urls", c,
                "--listen-peer-urls", p, "--initial-advertise-peer-urls", p,
                "--initial-cluster", cluster_spec, "--initial-cluster-state", "new",
                "--initial-cluster-token", token,
                "--heartbeat-interval", "50", "--election-timeout", "500",
                "--logger", "zap", "--log-level", "warn",
            ]  # fmt: skip
            if not sync:
                argv.append("--unsafe-no-fsync")
            members[i] = Member(i, argv, root / "etcd.log", client)
        cluster = cls(base_dir, members)
        try:
            for member in members.values():
                member.spawn()
            cluster.wait_ready()
        except BaseException:
            cluster.close()
            raise
        return cluster

    def _status(self, member: Member) -> tuple[str, str] | None:
        try:
            status = _post(member.client_port, "/v3/maintenance/status", {})
        except (OSError, ValueError):
            return None
        header = status.get("header")
        member_id = header.get("member_id") if isinstance(header, dict) else None
        return str(member_id), str(status.get("leader"))

    def leader(self) -> int | None:
        """The running member that is the Raft leader."""
        for i, member in self.members.items():
            status = self._status(member) if member.running else None
            if status is not None and status[0] == status[1]:
                return i
        return None

    def wait_ready(self) -> None:
        """Every running member answers and one leads."""

        def ready() -> bool:
            statuses = [self._status(m) for m in self.members.values() if m.running]
            if any(s is None for s in statuses):
                return False
            return sum(s is not None and s[0] == s[1] for s in statuses) == 1

        _wait(ready, "an etcd leader")

    def url(self) -> str:
        """An ``etcd://`` URL on every member with a fresh prefix."""
        hosts = ",".join(f"127.0.0.1:{m.client_port}" for m in self.members.values())
        return f"etcd://{hosts}/bench-{uuid.uuid4().hex[:8]}"

    def close(self) -> None:
        """Stop every member."""
        for member in self.members.values():
            member.stop()
