"""``Cluster``: several brokers in one process, on one background event-loop thread, behind a
synchronous facade (tests, demos, single-machine use).

``Cluster.local(3)`` starts brokers 1..3 on free ports of 127.0.0.1 with their own log dirs
under ``base_dir`` (a temp dir by default) and a shared in-memory coordinator. ``stop``,
``kill`` and ``restart`` act on one broker by id; ``close`` stops everything, ends the loop
thread and drops the in-memory store. ``reset`` empties it (topics, groups) for the next test.

``Cluster.local(n, test_mode=True)`` adds ``TEST_MODE_SETTINGS`` for test suites (what the pytest
plugin, ``replog.testing.pytest_plugin``, starts): consumer groups form at once (no initial
rebalance delay, Kafka's ``group.initial.rebalance.delay.ms`` 0, as Kafka's own test harness
sets it) and ``__consumer_offsets`` has one partition, so a group's first record comes in
milliseconds, not seconds. They are never a production broker's defaults; explicit overrides
win over them. A test-mode cluster also gives each broker a ``FailingFileSystem``, so
``replog.testing.faults.ClusterFaults`` can fail one broker's fsyncs or fill its disk; its
other faults (``broker_faults``, ``replog.broker.shell.faults``) work on any ``Cluster``.
"""

from __future__ import annotations

import asyncio
import itertools
import shutil
import tempfile
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

from replog.broker.config import BrokerConfig
from replog.broker.shell.broker import Broker
from replog.broker.shell.cluster_reset import reset
from replog.broker.shell.faults import BrokerFaults
from replog.coord import connect
from replog.coord.registry import drop_memory_store
from replog.event_loop import new_event_loop
from replog.log.failing_fs import FailingFileSystem
from replog.log.fs import REAL_FS, FileSystem

__all__ = ["TEST_MODE_SETTINGS", "Cluster"]

T = TypeVar("T")
_names = itertools.count(1)

#: what ``Cluster.local(..., test_mode=True)`` sets (module docstring)
TEST_MODE_SETTINGS: dict[str, Any] = {
    "groups": {"initial_rebalance_delay_ms": 0, "offsets_topic_partitions": 1},
}


class Cluster:
    """Brokers of one process; build with ``Cluster.local``."""

    def __init__(
        self,
        configs: list[BrokerConfig],
        *,
        base_dir: str,
        owns_base_dir: bool,
        test_mode: bool = False,
    ) -> None:
        self.configs = {c.broker_id: c for c in configs}
        self.test_mode = test_mode
        #: each broker's faults, kept across its restarts (``faults`` sets them)
        self.broker_faults = {c.broker_id: BrokerFaults(c.broker_id) for c in configs}
        #: each broker's filesystem (a ``FailingFileSystem`` in test mode)
        self.filesystems: dict[int, FileSystem] = {
            c.broker_id: FailingFileSystem() if test_mode else REAL_FS for c in configs
        }
        self.base_dir = base_dir
        self._owns_base_dir = owns_base_dir
        self.coordinator_url = configs[0].coordinator
        self.coordinator = connect(self.coordinator_url)
        self.brokers: dict[int, Broker] = {}
        self._ports: dict[int, int] = {}
        self._loop = new_event_loop()
        self._thread = threading.Thread(
            target=self._loop.run_forever, name="replog-cluster-loop", daemon=True
        )
        self._thread.start()
        self._closed = False

    @classmethod
    def local(
        cls,
        n: int,
        *,
        base_dir: str | None = None,
        coordinator: str | None = None,
        test_mode: bool = False,
        **overrides: Any,
    ) -> Cluster:
        """Start ``n`` brokers (ids 1..n); ``overrides`` are ``BrokerConfig`` fields;
        ``test_mode`` adds ``TEST_MODE_SETTINGS`` under them (module docstring)."""
        owns = base_dir is None
        root = base_dir if base_dir is not None else tempfile.mkdtemp(prefix="replog-cluster-")
        url = coordinator or f"memory://cluster-{next(_names)}-{id(root)}"
        settings: dict[str, Any] = {
            "session_timeout_ms": 2_000,
            "heartbeat_interval_ms": 200,
            "replica_lag_ms_max": 4_000,
            "replica_fetch_wait_ms_max": 100,
            "default_replication_factor": min(3, n),
            **(TEST_MODE_SETTINGS if test_mode else {}),
            **overrides,
        }
        configs = [
            BrokerConfig(broker_id=i, log_dirs=(f"{root}/broker-{i}",), coordinator=url, **settings)
            for i in range(1, n + 1)
        ]
        cluster = cls(configs, base_dir=root, owns_base_dir=owns, test_mode=test_mode)
        try:
            cluster.start_all()
        except BaseException:
            cluster.close()
            raise
        return cluster

    def _run(self, coro: Coroutine[Any, Any, T], timeout_s: float = 60.0) -> T:
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result(timeout_s)

    def start(self, broker_id: int) -> Broker:
        """Start (or start again) one broker; it keeps its port across restarts if it can."""
        return self._run(self._start(broker_id))

    def start_all(self) -> None:
        """Start every configured broker at once (they register and unfence in parallel)."""

        async def go() -> None:
            await asyncio.gather(*(self._start(i) for i in self.configs))

        self._run(go())

    async def _start(self, broker_id: int) -> Broker:
        config = self.configs[broker_id]
        port = self._ports.get(broker_id, config.port)
        if port != config.port:
            config = _with_port(config, port)

        def new(config: BrokerConfig) -> Broker:
            return Broker(
                config,
                coordinator=self.coordinator,
                fs=self.filesystems[broker_id],
                faults=self.broker_faults[broker_id],
            )

        broker = new(config)
        try:
            await broker.start()
        except OSError:
            broker = new(_with_port(config, 0))  # the old port is taken: take any
            await broker.start()
        self.brokers[broker_id] = broker
        self._ports[broker_id] = broker.port
        return broker

    def stop(self, broker_id: int, *, controlled: bool = True) -> None:
        """Stop one broker cleanly (controlled shutdown by default)."""
        self._run(self.brokers[broker_id].stop(controlled=controlled))

    def kill(self, broker_id: int) -> None:
        """Crash one broker (no checkpoints; its session expires)."""
        self._run(self.brokers[broker_id].kill())

    def restart(self, broker_id: int) -> Broker:
        """Stop if running, then start again with the same log dirs."""
        broker = self.brokers.get(broker_id)
        if broker is not None and broker.state.value != "offline":
            self.stop(broker_id)
        return self.start(broker_id)

    def call(self, fn: Any, *args: Any) -> Any:
        """Run ``fn(*args)`` on the cluster's loop thread (inspect broker state safely)."""

        async def go() -> Any:
            return fn(*args)

        return self._run(go())

    def reset(self) -> None:
        """Empty the cluster for the next test: every topic but the internal ones and every
        consumer group deleted (``replog.broker.shell.cluster_reset``); ``ResetError`` names
        what could not be (a group whose consumer is still open)."""
        running = [
            (i, b.advertised_host, b.port)
            for i, b in sorted(self.brokers.items())
            if b.state.value != "offline"
        ]
        self._run(reset(running, self.configs[min(self.configs)].frame_bytes_max))

    def heal_brokers(self) -> None:
        """Undo every fault of every broker (on the loop thread: ``call(cluster.heal_brokers)``):
        paused brokers resume, cut links and clients heal (their connections are dropped, so
        clients reconnect), disks work again."""
        for broker_id, faults in self.broker_faults.items():
            dropped = faults.heal()
            broker = self.brokers.get(broker_id)
            if broker is not None:
                for conn_id in dropped:
                    broker.drop_connection(conn_id)
        for fs in self.filesystems.values():
            if isinstance(fs, FailingFileSystem):
                fs.clear()

    @property
    def bootstrap(self) -> str:
        """``127.0.0.1:port,...`` of the running brokers."""
        return ",".join(
            b.address for _, b in sorted(self.brokers.items()) if b.state.value != "offline"
        )

    def close(self) -> None:
        """Stop every broker (not controlled: fast), end the loop thread, drop the store."""
        if self._closed:
            return
        self._closed = True
        try:
            self.call(self.heal_brokers)  # a paused broker would not stop
        except Exception:
            pass  # closing must go on
        for broker in list(self.brokers.values()):
            try:
                self._run(broker.stop(controlled=False))
            except Exception:
                pass
        try:
            self._run(self._loop.shutdown_default_executor(), 10.0)  # fsync worker threads
        except Exception:
            pass  # closing must go on
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)
        self._loop.close()
        if self.coordinator_url.startswith("memory://"):
            drop_memory_store(self.coordinator_url.split("://", 1)[1] or "default")
        if self._owns_base_dir:
            shutil.rmtree(self.base_dir, ignore_errors=True)

    def __enter__(self) -> Cluster:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _with_port(config: BrokerConfig, port: int) -> BrokerConfig:
    import attrs

    fields = {a.name: getattr(config, a.name) for a in attrs.fields(BrokerConfig)}
    return BrokerConfig.from_mapping({**fields, "port": port})
