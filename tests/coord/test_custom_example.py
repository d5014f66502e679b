"""The contract suite against the third-party-style SQLite backend in
``examples/custom_coordinator.py``, plus what the suite cannot see: ``connect`` through
``register_backend``, deadlines on the injected clock, two handles on one file, and the
example's self-check."""

from __future__ import annotations

import importlib.util
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from replog.coord import ManualClock, codec, registry
from replog.coord.contract import SessionFaults
from replog.coord.testing import CoordinatorFactory, SecondHandleContract
from replog.errors import InvalidConfigError
from replog.metadata.types import (
    BrokerChanged,
    ChangeBatch,
    PartitionState,
    SessionEvent,
    SessionState,
    TopicAssignment,
)

pytestmark = pytest.mark.system

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "custom_coordinator.py"


def _load_example() -> ModuleType:
    """Import the example by path: ``examples/`` is not a package."""
    spec = importlib.util.spec_from_file_location("custom_coordinator", EXAMPLE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


example = _load_example()
SqliteCoordinator: Any = example.SqliteCoordinator


class TestSqliteCoordinator(SecondHandleContract):
    """Every contract test (session tests included: it implements ``SessionFaults``) on a
    fresh database file with a manual clock and its background poller running."""

    @pytest.fixture
    def coordinator_factory(self, tmp_path: Path) -> CoordinatorFactory:
        path = tmp_path / "meta.db"

        def factory() -> Any:
            return SqliteCoordinator.open(path, clock=ManualClock())

        return factory

    @pytest.fixture
    def peer_factory(self, coordinator_factory: CoordinatorFactory) -> CoordinatorFactory:
        """The factory reopens this test's file: another handle on the same store."""
        return coordinator_factory


@pytest.fixture
def sqlite_scheme() -> Iterator[None]:
    """``sqlite`` registered with ``connect`` for one test."""
    registry.register_backend("sqlite", SqliteCoordinator.from_url, replace=True)
    try:
        yield
    finally:
        registry._registered.pop("sqlite", None)


def test_implements_session_faults(tmp_path: Path) -> None:
    with SqliteCoordinator.open(tmp_path / "m.db", poll_interval_ms=None) as coord:
        assert isinstance(coord, SessionFaults)


@pytest.mark.usefixtures("sqlite_scheme")
def test_connect_after_register_backend(tmp_path: Path) -> None:
    url = f"sqlite://{tmp_path / 'meta.db'}"
    assert "sqlite" in registry.known_schemes()
    with registry.connect(url, poll_interval_ms=None) as coord:  # the wall clock
        assert isinstance(coord, SqliteCoordinator)
        info = coord.register_broker(1, "h", 9092, session_timeout_ms=60_000)
        with registry.connect(url, poll_interval_ms=None) as other:  # a second handle, same file
            assert other.live_brokers() == {1: info}
    with pytest.raises(InvalidConfigError):
        registry.connect(url, no_such_option=1)
    with pytest.raises(InvalidConfigError):
        registry.connect("sqlite://")


def test_sessions_live_while_heartbeats_beat_the_deadline(tmp_path: Path) -> None:
    clock = ManualClock()
    with SqliteCoordinator.open(tmp_path / "m.db", clock=clock, poll_interval_ms=None) as coord:
        events: list[SessionEvent] = []
        coord.add_session_listener(1, events.append)
        info = coord.register_broker(1, "h", 9092, session_timeout_ms=1_000)
        for _ in range(3):
            clock.advance(900)
            assert coord.heartbeat(1, info.incarnation_epoch) is SessionState.CONNECTED
        clock.advance(1_000)
        coord.poll()
        assert coord.live_brokers() == {}
        assert [e.state for e in events] == [SessionState.CONNECTED, SessionState.LOST]


def test_a_handle_sees_what_another_wrote(tmp_path: Path) -> None:
    path = tmp_path / "m.db"
    clock = ManualClock()
    with (
        SqliteCoordinator.open(path, clock=clock, poll_interval_ms=None) as writer,
        SqliteCoordinator.open(path, clock=clock, poll_interval_ms=20) as reader,
    ):
        batches: list[ChangeBatch] = []
        reader.subscribe(batches.append, from_seq=0)
        events: list[SessionEvent] = []
        reader.add_session_listener(2, events.append)
        held = reader.register_broker(2, "h", 9093, session_timeout_ms=1_000)
        writer.register_broker(1, "h", 9092, session_timeout_ms=1_000)
        writer.expire_session(2)  # another handle ends the reader's session

        def seen() -> list[int]:
            return [c.broker_id for b in batches for c in b.changes if isinstance(c, BrokerChanged)]

        SecondHandleContract().eventually(lambda: seen() == [2, 1, 2], "feed pushed by the poller")
        SecondHandleContract().eventually(lambda: len(events) == 2, "LOST noticed by the poller")
        assert events[-1] == SessionEvent(2, held.incarnation_epoch, SessionState.LOST)


def test_the_self_check_runs() -> None:
    done = subprocess.run(
        [sys.executable, str(EXAMPLE)], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
    assert "CAS OK, retry VERSION_MISMATCH" in done.stdout


def _old_store(path: Path) -> None:
    """A file as the example made it before topics had configs, holding topic ``old``."""
    db = sqlite3.connect(path, isolation_level=None)
    try:
        db.execute("CREATE TABLE topics (name TEXT PRIMARY KEY, topic_id TEXT NOT NULL)")
        db.executescript(example.SCHEMA)  # CREATE TABLE IF NOT EXISTS keeps the old topics
        db.execute("INSERT INTO topics VALUES ('old', 'old-id')")
        state = codec.dumps(PartitionState.initial([1]))
        db.execute("INSERT INTO partitions VALUES ('old', 0, 0, ?)", (state,))
    finally:
        db.close()


def test_a_file_made_before_topic_configs_opens_and_reads(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    _old_store(path)
    with ThreadPoolExecutor(2) as pool:  # handles opening the old file at once both work
        handles = list(
            pool.map(lambda _: SqliteCoordinator.open(path, poll_interval_ms=None), range(2))
        )
    with handles[0] as coord, handles[1] as other:
        old = TopicAssignment(topic="old", topic_id="old-id", replicas=[[1]])
        assert coord.get_topic("old") == old and old.configs == ()
        assert other.snapshot().topics == {"old": old}
        broker = coord.register_broker(1, "h", 9092, session_timeout_ms=60_000)
        ctl = coord.elect_controller(1, broker.incarnation_epoch).controller_epoch
        grown = coord.add_partitions("old", [[1]], controller_epoch=ctl)
        assert grown == TopicAssignment(topic="old", topic_id="old-id", replicas=[[1], [1]])
        made = coord.create_topic("new", [[1]], controller_epoch=ctl, configs={"k": "v"})
        assert other.get_topic("new") == made and made.configs == (("k", "v"),)
        assert coord.delete_topic("old", controller_epoch=ctl) == grown
    with SqliteCoordinator.open(path, poll_interval_ms=None) as again:  # migrated already
        assert again.list_topics() == ["new"]
