"""A coordination backend on SQLite: a worked example of a third-party ``Coordinator``.

``python examples/custom_coordinator.py`` runs a short self-check;
``tests/coord/test_custom_example.py`` runs the whole contract suite against it.

Writing a backend: subclass ``replog.coord.contract.Coordinator`` (its docstrings are the
contract) and write storage only; the semantics are shared by every backend.
``replog.coord.rules`` checks arguments and makes every decision from what a write read (is this
incarnation current, is this the active controller, the outcome of a CAS); ``records`` builds
the feed records of each write; ``admin`` checks requests and picks what a full queue drops;
``sessions`` and ``dispatch`` hold listeners and deliver callbacks in store order, off the lock;
``codec`` encodes every value as JSON. Each operation reads, calls the rule, and commits the new
state with its feed records in one atomic write. Then subclass
``replog.coord.testing.CoordinatorContract`` with a ``coordinator_factory`` fixture, and
implement ``replog.coord.SessionFaults`` so that its session tests run too.

Registering: ``register_backend("sqlite", SqliteCoordinator.from_url)`` makes
``connect("sqlite:///path/meta.db")`` work in this process. A packaged backend declares an entry
point instead, which ``connect`` finds once the package is installed::

    [project.entry-points."replog.coordinators"]
    sqlite = "replog_sqlite:SqliteCoordinator.from_url"

This backend: one database file (``SCHEMA``; ``open`` adds the columns added since to a file an
older version made, ``_MIGRATIONS``). Every write is one ``BEGIN IMMEDIATE`` transaction, which
takes SQLite's write lock before the first read, so nothing the write decided on changes before
it commits; its feed row is written in the same transaction. The feed has one row per atomic
write; ``AUTOINCREMENT`` never reuses a seq, even after ``trim_history``.
Incarnation epochs and admin request ids are the seq of their write. Partition states change by
``UPDATE ... WHERE partition_epoch = ?``. A session is a broker row with a deadline (last
heartbeat + session timeout) on an injected clock; every call first expires the rows past their
deadline, oldest first. Handles in several processes may share the file, hence the wall clock by
default. SUSPENDED is a handle's own view of its sessions (a test hook); the row is untouched. A
handle notices others' writes (its sessions ended, feed records for its subscribers) after each
of its calls and every ``poll_interval_ms``. The feed grows until ``trim_history``.
"""

from __future__ import annotations

import contextlib
import functools
import itertools
import json
import logging
import sqlite3
import sys
import tempfile
import threading
import time
import urllib.parse
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

import attrs

from replog.coord import codec, connect, register_backend, rules
from replog.coord.admin import requests_to_drop, validate_admin_request
from replog.coord.contract import (
    ADMIN_QUEUE_LIMIT,
    DEFAULT_TIMEOUT_MS,
    MAX_CHANGES_PER_BATCH,
    Coordinator,
    validate_partition_state,
)
from replog.coord.dispatch import Dispatcher
from replog.coord.errors import (
    BrokerIdInUseError,
    CoordinatorClosedError,
    CoordinatorUnavailableError,
    FencedControllerError,
    MustResyncError,
    SessionExpiredError,
    UnknownTopicError,
)
from replog.coord.sessions import SessionListeners, session_event
from replog.errors import (
    ErrorCode,
    InvalidConfigError,
    InvariantError,
    RequestTimeoutError,
    invariant,
)
from replog.metadata import records
from replog.metadata.types import (
    AdminPayload,
    AdminRequest,
    AlterPartitionResult,
    BrokerChangeReason,
    BrokerInfo,
    CasResult,
    ChangeBatch,
    ControllerInfo,
    MetadataChange,
    MetadataSnapshot,
    PartitionState,
    ProducerIdBlock,
    SessionEvent,
    SessionState,
    Subscription,
    TopicAssignment,
    TopicConfigs,
    topic_configs,
)

__all__ = ["SCHEMA", "SqliteCoordinator", "wall_clock_ms"]

_log = logging.getLogger(__name__)
T = TypeVar("T")

SCHEMA = """
BEGIN IMMEDIATE;
CREATE TABLE IF NOT EXISTS store (      -- one row
    one INTEGER PRIMARY KEY CHECK (one = 1),
    controller_epoch INTEGER NOT NULL,  -- the last epoch handed out (never reused)
    controller TEXT,                    -- the active ControllerInfo; NULL while vacant
    trimmed_before INTEGER NOT NULL     -- feed rows below this seq are gone
);
INSERT OR IGNORE INTO store VALUES (1, 0, NULL, 0);
CREATE TABLE IF NOT EXISTS brokers (    -- registrations; a row is a live (or SUSPENDED) session
    broker_id INTEGER PRIMARY KEY,
    incarnation_epoch INTEGER NOT NULL,
    info TEXT NOT NULL,                 -- BrokerInfo
    session_timeout_ms INTEGER NOT NULL,
    deadline_ms INTEGER NOT NULL        -- the session expires when the clock reaches it
);
CREATE TABLE IF NOT EXISTS topics (
    name TEXT PRIMARY KEY,
    topic_id TEXT NOT NULL,
    configs TEXT NOT NULL DEFAULT '{}'  -- per-topic configs, a JSON object (see _MIGRATIONS)
);
CREATE TABLE IF NOT EXISTS partitions (
    topic TEXT NOT NULL,
    partition INTEGER NOT NULL,
    partition_epoch INTEGER NOT NULL,   -- the CAS token (also inside state)
    state TEXT NOT NULL,                -- PartitionState
    PRIMARY KEY (topic, partition)
);
CREATE TABLE IF NOT EXISTS admin (      -- queued admin requests; request_id = submission seq
    request_id INTEGER PRIMARY KEY,
    target INTEGER NOT NULL,
    request TEXT NOT NULL               -- AdminRequest
);
CREATE TABLE IF NOT EXISTS producer_ids ( -- each broker's latest block of producer ids
    broker_id INTEGER PRIMARY KEY,
    block TEXT NOT NULL                 -- ProducerIdBlock
);
CREATE TABLE IF NOT EXISTS broker_configs (  -- dynamic broker configs; -1: the cluster default
    broker_id INTEGER PRIMARY KEY,
    configs TEXT NOT NULL               -- a JSON object
);
CREATE TABLE IF NOT EXISTS feed (       -- one row per atomic write
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    changes TEXT NOT NULL               -- its records, a JSON list
);
COMMIT;
"""
"""The tables; values are JSON from ``replog.coord.codec``."""

_MIGRATIONS = (
    ("topics", "configs", "ALTER TABLE topics ADD COLUMN configs TEXT NOT NULL DEFAULT '{}'"),
)
"""Columns added since the first schema: (table, column, the statement adding it). ``open`` adds
any an existing file lacks (``CREATE TABLE IF NOT EXISTS`` leaves an old table as it is); the
defaults read as before (a topic stored without configs has none)."""


def wall_clock_ms() -> int:
    """The wall clock in ms: deadlines stored in a shared file need a clock all processes share."""
    return time.time_ns() // 1_000_000


def _value(cur: sqlite3.Cursor, sql: str, *args: Any) -> Any:
    """The first column of the first row (None if no row)."""
    row = cur.execute(sql, args).fetchone()
    return None if row is None else row[0]


def _decode(text: str, cls: type[T]) -> T:
    value = codec.loads(text)
    if not isinstance(value, cls):
        raise InvariantError(f"stored {type(value).__name__} where a {cls.__name__} belongs")
    return value


def _load(cur: sqlite3.Cursor, cls: type[T], sql: str, *args: Any) -> T | None:
    """The ``cls`` value stored (``codec`` JSON) in the first column of the first row, or None."""
    text = _value(cur, sql, *args)
    return None if text is None else _decode(text, cls)


def _load_all(cur: sqlite3.Cursor, cls: type[T], sql: str, *args: Any) -> list[T]:
    """The ``cls`` values stored in the first column of every row."""
    return [_decode(row[0], cls) for row in cur.execute(sql, args).fetchall()]


def _prepare_file(db: sqlite3.Connection, timeout_ms: int) -> None:
    """WAL mode, the schema and its migrations, retried while another handle holds the file:
    switching to WAL and upgrading a read lock can fail at once with "database is locked"
    (SQLite does not wait when waiting could deadlock), e.g. when two processes open a file
    made in rollback-journal mode together. Every step is idempotent."""
    deadline = time.monotonic() + timeout_ms / 1000
    while True:
        try:
            with _sqlite_errors():
                db.execute("PRAGMA journal_mode = WAL")
                db.executescript(SCHEMA)
                _migrate(db)
            return
        except RequestTimeoutError:
            if time.monotonic() >= deadline:
                raise
            time.sleep(0.01)


def _migrate(db: sqlite3.Connection) -> None:
    """Add the ``_MIGRATIONS`` columns a file made by an older version lacks, in one write
    transaction (so handles opening the file at once do not both add one)."""
    db.execute("BEGIN IMMEDIATE")
    try:
        for table, column, statement in _MIGRATIONS:
            columns = {row[1] for row in db.execute(f"PRAGMA table_info({table})")}
            if column not in columns:
                db.execute(statement)
        db.execute("COMMIT")
    except BaseException:
        if db.in_transaction:
            db.execute("ROLLBACK")
        raise


@contextlib.contextmanager
def _sqlite_errors() -> Iterator[None]:
    """SQLite's operational errors as the contract's retriable ones: a lock held past the
    call's timeout is a timeout, anything else (I/O) makes the store unavailable."""
    try:
        yield
    except sqlite3.OperationalError as e:
        if "locked" in str(e) or "busy" in str(e):
            raise RequestTimeoutError(f"sqlite store busy: {e}") from e
        raise CoordinatorUnavailableError(f"sqlite store failed: {e}") from e


@attrs.define
class _Held:
    """A session this handle holds: its incarnation and this handle's view of it."""

    incarnation_epoch: int
    state: SessionState


@attrs.define
class _Subscriber:
    callback: Callable[[ChangeBatch], None]
    cursor: int  # the next seq to push


class SqliteCoordinator(Coordinator):
    """A coordinator on one SQLite file; see the module docstring. Open it with ``open`` or
    ``from_url``. Implements ``SessionFaults`` for the contract suite."""

    def __init__(
        self,
        db: sqlite3.Connection,
        clock: Callable[[], int],
        default_timeout_ms: int,
        admin_queue_limit: int,
    ) -> None:
        self.clock = clock
        self._db = db
        self._default_timeout_ms = default_timeout_ms
        self._admin_queue_limit = admin_queue_limit
        self._lock = threading.Lock()  # one call at a time on this handle's connection
        self._dispatcher = Dispatcher()
        self._closed = False
        self._stop = threading.Event()
        self._held: dict[int, _Held] = {}
        self._on_commit: list[Callable[[], None]] = []
        self._subs: dict[int, _Subscriber] = {}
        self._tokens = itertools.count(1)
        self._listeners = SessionListeners()

    @classmethod
    def open(
        cls,
        path: str | Path,
        *,
        clock: Callable[[], int] = wall_clock_ms,
        default_timeout_ms: int = DEFAULT_TIMEOUT_MS,
        admin_queue_limit: int = ADMIN_QUEUE_LIMIT,
        poll_interval_ms: int | None = 100,
    ) -> SqliteCoordinator:
        """Open (creating if needed) the store in ``path``. ``clock`` returns ms (a
        ``ManualClock`` in tests); ``poll_interval_ms`` None: no background thread (expiry and
        pushes then happen only during calls)."""
        bad_poll = poll_interval_ms is not None and poll_interval_ms < 1
        if default_timeout_ms < 0 or admin_queue_limit < 1 or bad_poll:
            raise ValueError("timeout must be >= 0, admin_queue_limit and poll interval >= 1")
        db = sqlite3.connect(
            path, timeout=default_timeout_ms / 1000, isolation_level=None, check_same_thread=False
        )
        try:
            _prepare_file(db, default_timeout_ms)
        except BaseException:
            db.close()
            raise
        coordinator = cls(db, clock, default_timeout_ms, admin_queue_limit)
        if poll_interval_ms is not None:
            threading.Thread(
                target=coordinator._poll_loop, args=(poll_interval_ms / 1000,), daemon=True
            ).start()
        return coordinator

    @classmethod
    def from_url(cls, url: str, /, **options: Any) -> SqliteCoordinator:
        """The ``connect`` factory: ``sqlite:///absolute/path.db`` or ``sqlite://relative.db``,
        with ``open``'s keyword options."""
        parts = urllib.parse.urlsplit(url)
        path = parts.netloc + parts.path
        if not path or parts.query or parts.fragment:
            raise InvalidConfigError(f"a sqlite URL is sqlite:///path/to/file.db, not {url!r}")
        try:
            return cls.open(path, **options)
        except TypeError as e:
            raise InvalidConfigError(f"bad option for the sqlite backend: {e}") from e

    # ---- plumbing ----

    def _acquire(self, timeout_ms: int) -> None:
        if not self._lock.acquire(timeout=timeout_ms / 1000):
            raise RequestTimeoutError(f"coordinator busy for {timeout_ms} ms")

    @contextlib.contextmanager
    def _txn(self, timeout_ms: int | None, *, write: bool = True) -> Iterator[sqlite3.Cursor]:
        """One call: expire due sessions, run the body in one transaction, then (committed)
        run its ``_on_commit`` steps and tell this handle's listeners what changed. Callbacks
        run once the handle's lock is released."""
        timeout_ms = self._default_timeout_ms if timeout_ms is None else timeout_ms
        self._acquire(timeout_ms)
        try:
            if self._closed:
                raise CoordinatorClosedError("the sqlite coordinator is closed")
            with _sqlite_errors():
                self._db.execute(f"PRAGMA busy_timeout = {int(timeout_ms)}")
                self._on_commit.clear()
                try:
                    self._expire_due()
                    with self._transaction(write) as cur:
                        yield cur
                    for step in self._on_commit:
                        step()
                finally:
                    self._notice()
        finally:
            self._lock.release()
            self._dispatcher.run()

    @contextlib.contextmanager
    def _transaction(self, write: bool) -> Iterator[sqlite3.Cursor]:
        """``BEGIN IMMEDIATE`` (write) or ``BEGIN`` (a consistent read) ... ``COMMIT``;
        rolled back if the body raises."""
        cur = self._db.cursor()
        cur.execute("BEGIN IMMEDIATE" if write else "BEGIN")
        try:
            yield cur
            cur.execute("COMMIT")
        except BaseException:
            if self._db.in_transaction:
                cur.execute("ROLLBACK")
            raise

    def _head(self, cur: sqlite3.Cursor) -> int:
        """The seq of the newest write (0: none), kept by AUTOINCREMENT even after trims."""
        return int(_value(cur, "SELECT seq FROM sqlite_sequence WHERE name = 'feed'") or 0)

    def _next_seq(self, cur: sqlite3.Cursor) -> int:
        return self._head(cur) + 1

    def _append(self, cur: sqlite3.Cursor, changes: Sequence[MetadataChange]) -> int:
        """Add the feed row of this transaction's write (records built by ``records``)."""
        seq = changes[0].seq
        invariant(seq == self._next_seq(cur), "one feed row per write, at the next seq")
        invariant(all(c.seq == seq for c in changes), "records of one write share its seq")
        cur.execute("INSERT INTO feed (seq, changes) VALUES (?, ?)", (seq, codec.dumps(changes)))
        return seq

    def _read(self, cur: sqlite3.Cursor, seq: int, max_changes: int) -> ChangeBatch:
        """Feed records from ``seq``, about ``max_changes`` (whole rows: a write is never split)."""
        changes: list[MetadataChange] = []
        next_seq = seq
        sql = "SELECT seq, changes FROM feed WHERE seq >= ? ORDER BY seq LIMIT ?"
        for row_seq, text in cur.execute(sql, (seq, max_changes)).fetchall():
            changes.extend(codec.loads(text))
            next_seq = row_seq + 1
            if len(changes) >= max_changes:
                break
        return ChangeBatch(tuple(changes), next_seq)

    def _trimmed_before(self, cur: sqlite3.Cursor) -> int:
        return int(_value(cur, "SELECT trimmed_before FROM store"))

    def _controller(self, cur: sqlite3.Cursor) -> ControllerInfo | None:
        return _load(cur, ControllerInfo, "SELECT controller FROM store")

    def _set_controller(self, cur: sqlite3.Cursor, controller: ControllerInfo | None) -> None:
        """Set the active controller (its epoch is then the last one handed out)."""
        epoch = 0 if controller is None else controller.controller_epoch
        cur.execute(
            "UPDATE store SET controller = ?, controller_epoch = max(controller_epoch, ?)",
            (None if controller is None else codec.dumps(controller), epoch),
        )

    def _broker(self, cur: sqlite3.Cursor, broker_id: int) -> BrokerInfo | None:
        return _load(cur, BrokerInfo, "SELECT info FROM brokers WHERE broker_id = ?", broker_id)

    def _brokers(self, cur: sqlite3.Cursor) -> dict[int, BrokerInfo]:
        sql = "SELECT info FROM brokers ORDER BY broker_id"
        return {b.broker_id: b for b in _load_all(cur, BrokerInfo, sql)}

    def _partition(self, cur: sqlite3.Cursor, topic: str, partition: int) -> PartitionState | None:
        sql = "SELECT state FROM partitions WHERE topic = ? AND partition = ?"
        return _load(cur, PartitionState, sql, topic, partition)

    def _assignment(self, cur: sqlite3.Cursor, topic: str) -> TopicAssignment | None:
        row = cur.execute("SELECT topic_id, configs FROM topics WHERE name = ?", (topic,))
        found = row.fetchone()
        if found is None:
            return None
        topic_id, configs = found
        sql = "SELECT state FROM partitions WHERE topic = ? ORDER BY partition"
        replicas = [s.replicas for s in _load_all(cur, PartitionState, sql, topic)]
        return TopicAssignment(
            topic=topic, topic_id=topic_id, replicas=replicas, configs=json.loads(configs)
        )

    def _insert_partitions(
        self, cur: sqlite3.Cursor, topic: str, first: int, states: Sequence[PartitionState]
    ) -> None:
        rows = [(topic, first + i, s.partition_epoch, codec.dumps(s)) for i, s in enumerate(states)]
        cur.executemany("INSERT INTO partitions VALUES (?, ?, ?, ?)", rows)

    # ---- sessions ----

    def _expire_due(self) -> None:
        """End every session whose deadline has passed, oldest deadline first (ties by id)."""
        due = "SELECT info FROM brokers WHERE deadline_ms <= ? ORDER BY deadline_ms, broker_id"
        now_ms = self.clock()
        if self._db.execute(due, (now_ms,)).fetchone() is None:
            return
        with self._transaction(write=True) as cur:
            for (info,) in cur.execute(due, (now_ms,)).fetchall():
                self._end_session(cur, _decode(info, BrokerInfo), BrokerChangeReason.EXPIRED)

    def _end_session(
        self, cur: sqlite3.Cursor, broker: BrokerInfo, reason: BrokerChangeReason
    ) -> None:
        """Remove the registration and, atomically with it, the controller role it held."""
        broker_id = broker.broker_id
        controller = self._controller(cur)
        was_controller = controller is not None and controller.controller_id == broker_id
        if was_controller:
            self._set_controller(cur, None)
        cur.execute("DELETE FROM brokers WHERE broker_id = ?", (broker_id,))
        seq = self._next_seq(cur)
        self._append(
            cur,
            records.broker_gone(
                seq, reason, broker_id, broker.incarnation_epoch, was_controller=was_controller
            ),
        )

    def _session_for(
        self, cur: sqlite3.Cursor, broker_id: int, incarnation_epoch: int
    ) -> BrokerInfo:
        """The incarnation's registration, if a call may act as it now."""
        broker = rules.check_incarnation(broker_id, incarnation_epoch, self._broker(cur, broker_id))
        held = self._held.get(broker_id)
        if held is not None and held.state is SessionState.SUSPENDED:
            raise CoordinatorUnavailableError(f"broker {broker_id}'s session is suspended")
        return broker

    def _touch(self, cur: sqlite3.Cursor, broker_id: int) -> None:
        """A heartbeat: the session's deadline moves to now + its session timeout."""
        sql = "UPDATE brokers SET deadline_ms = ? + session_timeout_ms WHERE broker_id = ?"
        cur.execute(sql, (self.clock(), broker_id))

    def _held_current(self, cur: sqlite3.Cursor, broker_id: int) -> _Held | None:
        """This handle's session of the broker, if its registration is still in the store."""
        held, broker = self._held.get(broker_id), self._broker(cur, broker_id)
        if held is None or broker is None or broker.incarnation_epoch != held.incarnation_epoch:
            return None
        return held

    def _hold(self, broker: BrokerInfo) -> None:
        old = self._held.pop(broker.broker_id, None)
        if old is not None:
            self._emit(broker.broker_id, old, SessionState.LOST)
        self._held[broker.broker_id] = held = _Held(
            broker.incarnation_epoch, SessionState.CONNECTED
        )
        self._emit(broker.broker_id, held, SessionState.CONNECTED)

    def _emit(self, broker_id: int, held: _Held, state: SessionState) -> None:
        held.state = state
        event = session_event(broker_id, held.incarnation_epoch, state)
        for callback in self._listeners.callbacks(broker_id):
            self._dispatcher.enqueue(functools.partial(callback, event))

    def _notice(self) -> None:
        """After every call: LOST for held sessions whose registration is gone (whoever ended
        it), and new feed records (or a resync) for subscribers. A failed read is retried by
        the next call or poll."""
        if not (self._held or self._subs):
            return
        with contextlib.suppress(sqlite3.Error), self._transaction(write=False) as cur:
            rows = cur.execute("SELECT broker_id, incarnation_epoch FROM brokers").fetchall()
            current = dict(rows)
            for broker_id, held in list(self._held.items()):
                if current.get(broker_id) != held.incarnation_epoch:
                    del self._held[broker_id]
                    self._emit(broker_id, held, SessionState.LOST)
            head, trimmed = self._head(cur), self._trimmed_before(cur)
            for token, sub in list(self._subs.items()):
                if sub.cursor < trimmed:
                    batch = ChangeBatch((), head + 1, resync_required=True)
                else:
                    batch = self._read(cur, sub.cursor, sys.maxsize)
                    if not batch.changes:
                        continue
                sub.cursor = batch.next_seq
                self._dispatcher.enqueue(functools.partial(self._deliver, token, batch))

    def _deliver(self, token: int, batch: ChangeBatch) -> None:
        sub = self._subs.get(token)
        if sub is not None:
            sub.callback(batch)

    def _poll_loop(self, interval_s: float) -> None:
        while not self._stop.wait(interval_s):
            try:
                self.poll()
            except CoordinatorClosedError:
                return
            except Exception:
                _log.exception("sqlite coordinator poll failed; trying again")

    def poll(self) -> None:
        """What every call does first and last: expire due sessions, notice sessions ended by
        other handles, push new feed records. The background thread calls it."""
        with self._txn(None, write=False):
            pass

    # ---- SessionFaults (test hooks) ----

    def expire_session(self, broker_id: int) -> None:
        """Expire the broker's session now (no-op without one)."""
        with self._txn(None) as cur:
            broker = self._broker(cur, broker_id)
            if broker is not None:
                self._end_session(cur, broker, BrokerChangeReason.EXPIRED)

    def suspend_session(self, broker_id: int) -> None:
        """Cut this handle's session of the broker off (SUSPENDED); its deadline keeps running."""
        with self._txn(None, write=False) as cur:
            held = self._held_current(cur, broker_id)
            if held is not None and held.state is SessionState.CONNECTED:
                self._emit(broker_id, held, SessionState.SUSPENDED)

    def resume_session(self, broker_id: int) -> None:
        """Reconnect: CONNECTED with a fresh deadline, unless it expired meanwhile (LOST)."""
        with self._txn(None) as cur:
            held = self._held_current(cur, broker_id)
            if held is not None and held.state is SessionState.SUSPENDED:
                self._touch(cur, broker_id)
                self._on_commit.append(lambda: self._emit(broker_id, held, SessionState.CONNECTED))

    # ---- lifecycle ----

    def close(self) -> None:
        """See ``Coordinator.close``: this handle's sessions are unregistered (if the store
        cannot be reached, they expire), the poller and listeners stop."""
        self._acquire(self._default_timeout_ms)
        try:
            if self._closed:
                return
            with contextlib.suppress(sqlite3.Error), self._transaction(write=True) as cur:
                for broker_id, held in self._held.items():
                    broker = self._broker(cur, broker_id)
                    if broker is not None and broker.incarnation_epoch == held.incarnation_epoch:
                        self._end_session(cur, broker, BrokerChangeReason.UNREGISTERED)
            for broker_id, held in self._held.items():
                self._emit(broker_id, held, SessionState.LOST)
            self._held.clear()
            self._closed = True
            self._stop.set()
            self._db.close()
        finally:
            self._lock.release()
        self._dispatcher.run()
        self._subs.clear()
        self._listeners.clear()

    # ---- brokers ----

    def register_broker(
        self,
        broker_id: int,
        host: str,
        port: int,
        *,
        rack: str | None = None,
        session_timeout_ms: int,
        timeout_ms: int | None = None,
        clean_shutdown: bool = True,
        fenced: bool = False,
    ) -> BrokerInfo:
        """See ``Coordinator.register_broker``."""
        rules.check_registration(broker_id, session_timeout_ms)
        with self._txn(timeout_ms) as cur:
            holder = self._broker(cur, broker_id)
            if holder is not None:
                raise BrokerIdInUseError(broker_id, holder.incarnation_epoch)
            seq = self._next_seq(cur)
            broker = rules.registration(
                broker_id,
                seq,
                host,
                port,
                rack,
                clean_shutdown=clean_shutdown,
                fenced=fenced,
            )
            deadline_ms = self.clock() + session_timeout_ms
            row = (broker_id, seq, codec.dumps(broker), session_timeout_ms, deadline_ms)
            cur.execute("INSERT INTO brokers VALUES (?, ?, ?, ?, ?)", row)
            self._append(cur, records.broker_registered(seq, broker))
            self._on_commit.append(functools.partial(self._hold, broker))
            return broker

    def heartbeat(
        self, broker_id: int, incarnation_epoch: int, *, timeout_ms: int | None = None
    ) -> SessionState:
        """See ``Coordinator.heartbeat``: moves the deadline to now + session timeout."""
        with self._txn(timeout_ms) as cur:
            self._session_for(cur, broker_id, incarnation_epoch)
            self._touch(cur, broker_id)
            return SessionState.CONNECTED

    def update_broker(
        self,
        broker_id: int,
        incarnation_epoch: int,
        *,
        fenced: bool | None = None,
        in_controlled_shutdown: bool | None = None,
        timeout_ms: int | None = None,
    ) -> BrokerInfo:
        """See ``Coordinator.update_broker``."""
        with self._txn(timeout_ms) as cur:
            old = self._session_for(cur, broker_id, incarnation_epoch)
            new = rules.updated_broker(old, fenced, in_controlled_shutdown)
            if new != old:
                sql = "UPDATE brokers SET info = ? WHERE broker_id = ?"
                cur.execute(sql, (codec.dumps(new), broker_id))
                self._append(cur, records.broker_updated(self._next_seq(cur), new))
            return new

    def admit_broker(
        self,
        broker_id: int,
        incarnation_epoch: int,
        *,
        controller_epoch: int,
        timeout_ms: int | None = None,
    ) -> bool:
        """See ``Coordinator.admit_broker``."""
        with self._txn(timeout_ms) as cur:
            self._check_controller(cur, controller_epoch)
            old = self._broker(cur, broker_id)
            new = rules.admitted_broker(old, incarnation_epoch)
            if new is None:
                return False
            if new != old:
                sql = "UPDATE brokers SET info = ? WHERE broker_id = ?"
                cur.execute(sql, (codec.dumps(new), broker_id))
                self._append(cur, records.broker_updated(self._next_seq(cur), new))
            return True

    def unregister_broker(
        self, broker_id: int, incarnation_epoch: int, *, timeout_ms: int | None = None
    ) -> bool:
        """See ``Coordinator.unregister_broker``."""
        with self._txn(timeout_ms) as cur:
            try:
                broker = self._session_for(cur, broker_id, incarnation_epoch)
            except SessionExpiredError:
                return False
            self._end_session(cur, broker, BrokerChangeReason.UNREGISTERED)
            return True

    def get_broker(self, broker_id: int, *, timeout_ms: int | None = None) -> BrokerInfo | None:
        """See ``Coordinator.get_broker``."""
        with self._txn(timeout_ms, write=False) as cur:
            return self._broker(cur, broker_id)

    def live_brokers(self, *, timeout_ms: int | None = None) -> dict[int, BrokerInfo]:
        """See ``Coordinator.live_brokers``."""
        with self._txn(timeout_ms, write=False) as cur:
            return self._brokers(cur)

    def session_state(self, broker_id: int) -> SessionState:
        """See ``Coordinator.session_state``."""
        with self._txn(None, write=False) as cur:
            held = self._held_current(cur, broker_id)
            return SessionState.LOST if held is None else held.state

    def add_session_listener(
        self, broker_id: int, callback: Callable[[SessionEvent], None]
    ) -> Subscription:
        """See ``Coordinator.add_session_listener``."""
        if self._closed:
            raise CoordinatorClosedError("the sqlite coordinator is closed")
        return self._listeners.add(broker_id, callback)

    # ---- controller ----

    def elect_controller(
        self, broker_id: int, incarnation_epoch: int, *, timeout_ms: int | None = None
    ) -> ControllerInfo:
        """See ``Coordinator.elect_controller``."""
        with self._txn(timeout_ms) as cur:
            self._session_for(cur, broker_id, incarnation_epoch)
            active = self._controller(cur)
            if active is not None:
                return active
            epoch = int(_value(cur, "SELECT controller_epoch FROM store")) + 1
            controller = ControllerInfo(broker_id, epoch, incarnation_epoch)
            self._set_controller(cur, controller)
            self._append(cur, records.controller_changed(self._next_seq(cur), controller))
            return controller

    def resign_controller(
        self, broker_id: int, controller_epoch: int, *, timeout_ms: int | None = None
    ) -> bool:
        """See ``Coordinator.resign_controller``."""
        with self._txn(timeout_ms) as cur:
            active = self._controller(cur)
            if active is None or not rules.holds_controller(active, broker_id, controller_epoch):
                return False
            self._session_for(cur, broker_id, active.incarnation_epoch)
            self._set_controller(cur, None)
            self._append(cur, records.controller_changed(self._next_seq(cur), None))
            return True

    def current_controller(self, *, timeout_ms: int | None = None) -> ControllerInfo | None:
        """See ``Coordinator.current_controller``."""
        with self._txn(timeout_ms, write=False) as cur:
            return self._controller(cur)

    def _check_controller(self, cur: sqlite3.Cursor, controller_epoch: int) -> None:
        """Raise unless ``controller_epoch`` is the active controller's and it is reachable."""
        active = rules.check_controller_epoch(self._controller(cur), controller_epoch)
        self._session_for(cur, active.controller_id, active.incarnation_epoch)

    # ---- topics and partitions ----

    def create_topic(
        self,
        topic: str,
        replica_assignment: Sequence[Sequence[int]],
        *,
        controller_epoch: int,
        initial_states: Sequence[PartitionState] | None = None,
        configs: Mapping[str, str] | None = None,
        timeout_ms: int | None = None,
    ) -> TopicAssignment:
        """See ``Coordinator.create_topic``."""
        assignment, states, stored = rules.new_topic(
            topic, replica_assignment, initial_states, configs
        )
        with self._txn(timeout_ms) as cur:
            self._check_controller(cur, controller_epoch)
            rules.check_topic_free(topic, [n for (n,) in cur.execute("SELECT name FROM topics")])
            created = TopicAssignment(
                topic=topic, topic_id=uuid.uuid4().hex, replicas=assignment, configs=stored
            )
            cur.execute(
                "INSERT INTO topics (name, topic_id, configs) VALUES (?, ?, ?)",
                (topic, created.topic_id, json.dumps(dict(stored))),
            )
            self._insert_partitions(cur, topic, 0, states)
            self._append(cur, records.topic_created(self._next_seq(cur), created, states))
            return created

    def delete_topic(
        self, topic: str, *, controller_epoch: int, timeout_ms: int | None = None
    ) -> TopicAssignment:
        """See ``Coordinator.delete_topic``."""
        with self._txn(timeout_ms) as cur:
            self._check_controller(cur, controller_epoch)
            removed = self._assignment(cur, topic)
            if removed is None:
                raise UnknownTopicError(topic)
            cur.execute("DELETE FROM partitions WHERE topic = ?", (topic,))
            cur.execute("DELETE FROM topics WHERE name = ?", (topic,))
            self._append(cur, records.topic_deleted(self._next_seq(cur), removed))
            return removed

    def add_partitions(
        self,
        topic: str,
        new_replica_assignment: Sequence[Sequence[int]],
        *,
        controller_epoch: int,
        initial_states: Sequence[PartitionState] | None = None,
        timeout_ms: int | None = None,
    ) -> TopicAssignment:
        """See ``Coordinator.add_partitions``."""
        _, states = rules.new_partitions(new_replica_assignment, initial_states)
        with self._txn(timeout_ms) as cur:
            self._check_controller(cur, controller_epoch)
            current = self._assignment(cur, topic)
            if current is None:
                raise UnknownTopicError(topic)
            first = current.partition_count
            self._insert_partitions(cur, topic, first, states)
            grown = rules.grown_assignment(current, states)
            self._append(cur, records.partitions_added(self._next_seq(cur), grown, first, states))
            return grown

    # ---- dynamic configs ----

    def alter_topic_configs(
        self,
        topic: str,
        configs: Mapping[str, str],
        *,
        controller_epoch: int,
        timeout_ms: int | None = None,
    ) -> TopicAssignment:
        """See ``Coordinator.alter_topic_configs``."""
        stored = topic_configs(configs)
        with self._txn(timeout_ms) as cur:
            self._check_controller(cur, controller_epoch)
            current = self._assignment(cur, topic)
            if current is None:
                raise UnknownTopicError(topic)
            cur.execute(
                "UPDATE topics SET configs = ? WHERE name = ?", (json.dumps(dict(stored)), topic)
            )
            altered = attrs.evolve(current, configs=stored)
            self._append(cur, records.topic_configs_altered(self._next_seq(cur), altered))
            return altered

    def alter_broker_configs(
        self,
        broker_id: int,
        configs: Mapping[str, str],
        *,
        controller_epoch: int,
        timeout_ms: int | None = None,
    ) -> None:
        """See ``Coordinator.alter_broker_configs``."""
        stored = rules.broker_configs_to_store(broker_id, configs)
        with self._txn(timeout_ms) as cur:
            self._check_controller(cur, controller_epoch)
            cur.execute("DELETE FROM broker_configs WHERE broker_id = ?", (broker_id,))
            if stored:
                cur.execute(
                    "INSERT INTO broker_configs VALUES (?, ?)",
                    (broker_id, json.dumps(dict(stored))),
                )
            seq = self._next_seq(cur)
            self._append(cur, records.broker_configs_altered(seq, broker_id, stored))

    def broker_configs(self, *, timeout_ms: int | None = None) -> dict[int, TopicConfigs]:
        """See ``Coordinator.broker_configs``."""
        with self._txn(timeout_ms, write=False) as cur:
            return self._broker_configs(cur)

    def _broker_configs(self, cur: sqlite3.Cursor) -> dict[int, TopicConfigs]:
        rows = cur.execute("SELECT broker_id, configs FROM broker_configs ORDER BY broker_id")
        return {b: topic_configs(json.loads(c)) for b, c in rows.fetchall()}

    def list_topics(self, *, timeout_ms: int | None = None) -> list[str]:
        """See ``Coordinator.list_topics``."""
        with self._txn(timeout_ms, write=False) as cur:
            return [n for (n,) in cur.execute("SELECT name FROM topics ORDER BY name").fetchall()]

    def get_topic(self, topic: str, *, timeout_ms: int | None = None) -> TopicAssignment | None:
        """See ``Coordinator.get_topic``."""
        with self._txn(timeout_ms, write=False) as cur:
            return self._assignment(cur, topic)

    def get_partition_state(
        self, topic: str, partition: int, *, timeout_ms: int | None = None
    ) -> PartitionState | None:
        """See ``Coordinator.get_partition_state``."""
        with self._txn(timeout_ms, write=False) as cur:
            return self._partition(cur, topic, partition)

    def compare_and_set_partition_state(
        self,
        topic: str,
        partition: int,
        expected_partition_epoch: int,
        new_state: PartitionState,
        *,
        controller_epoch: int,
        timeout_ms: int | None = None,
    ) -> CasResult:
        """See ``Coordinator.compare_and_set_partition_state``."""
        validate_partition_state(new_state)
        with self._txn(timeout_ms) as cur:
            try:
                self._check_controller(cur, controller_epoch)
            except FencedControllerError as e:
                return rules.cas_fenced(e)
            current = self._partition(cur, topic, partition)
            stored = rules.cas_decision(current, expected_partition_epoch, new_state)
            if isinstance(stored, CasResult):
                return stored
            cur.execute(
                "UPDATE partitions SET state = ?, partition_epoch = ?"
                " WHERE topic = ? AND partition = ? AND partition_epoch = ?",
                (
                    codec.dumps(stored),
                    stored.partition_epoch,
                    topic,
                    partition,
                    expected_partition_epoch,
                ),
            )
            # BEGIN IMMEDIATE already keeps the epoch we read; the WHERE makes the CAS explicit.
            invariant(cur.rowcount == 1, "partition epoch changed inside a write transaction")
            seq = self._append(
                cur, records.partition_changed(self._next_seq(cur), topic, partition, stored)
            )
            return rules.cas_ok(stored, seq)

    # ---- the change feed ----

    def changes_since(
        self,
        seq: int,
        *,
        max_changes: int = MAX_CHANGES_PER_BATCH,
        timeout_ms: int | None = None,
    ) -> ChangeBatch:
        """See ``Coordinator.changes_since``."""
        rules.check_feed_read(seq, max_changes)
        with self._txn(timeout_ms, write=False) as cur:
            trimmed = self._trimmed_before(cur)
            if seq < trimmed:
                raise MustResyncError(seq, trimmed)
            return self._read(cur, seq, max_changes)

    def snapshot(self, *, timeout_ms: int | None = None) -> MetadataSnapshot:
        """See ``Coordinator.snapshot``: one read transaction, so one consistent image."""
        with self._txn(timeout_ms, write=False) as cur:
            names = [n for (n,) in cur.execute("SELECT name FROM topics ORDER BY name").fetchall()]
            rows = cur.execute("SELECT topic, partition, state FROM partitions").fetchall()
            return MetadataSnapshot(
                seq=self._head(cur) + 1,
                brokers=self._brokers(cur),
                topics={n: a for n in names if (a := self._assignment(cur, n)) is not None},
                partitions={(t, p): _decode(s, PartitionState) for t, p, s in sorted(rows)},
                controller=self._controller(cur),
                controller_epoch=int(_value(cur, "SELECT controller_epoch FROM store")),
                broker_configs=self._broker_configs(cur),
            )

    def subscribe(
        self, callback: Callable[[ChangeBatch], None], *, from_seq: int | None = None
    ) -> Subscription:
        """See ``Coordinator.subscribe``: the backlog (or a resync) is pushed when this call
        ends, later records after each call of this handle and on every poll."""
        with self._txn(None, write=False) as cur:
            token = next(self._tokens)
            cursor = self._head(cur) + 1 if from_seq is None else from_seq
            self._subs[token] = _Subscriber(callback, cursor)

        def cancel() -> None:
            self._subs.pop(token, None)

        return Subscription(cancel)

    def trim_history(self, before_seq: int, *, timeout_ms: int | None = None) -> int:
        """See ``Coordinator.trim_history``."""
        with self._txn(timeout_ms) as cur:
            before = min(before_seq, self._head(cur) + 1)
            cur.execute("DELETE FROM feed WHERE seq < ?", (before,))
            cur.execute("UPDATE store SET trimmed_before = max(trimmed_before, ?)", (before,))
            return self._trimmed_before(cur)

    # ---- admin queue ----

    def _pending(self, cur: sqlite3.Cursor, target: int) -> list[AdminRequest]:
        sql = "SELECT request FROM admin WHERE target = ? ORDER BY request_id"
        return _load_all(cur, AdminRequest, sql, target)

    def submit_admin_request(
        self, target: int, payload: AdminPayload, *, timeout_ms: int | None = None
    ) -> AdminRequest:
        """See ``Coordinator.submit_admin_request``."""
        validate_admin_request(target, payload)
        with self._txn(timeout_ms) as cur:
            dropped = requests_to_drop(self._pending(cur, target), target, self._admin_queue_limit)
            seq = self._next_seq(cur)
            request = AdminRequest(
                request_id=seq, target=target, payload=payload, submitted_seq=seq
            )
            sql = "DELETE FROM admin WHERE request_id = ?"
            cur.executemany(sql, [(r.request_id,) for r in dropped])
            cur.execute("INSERT INTO admin VALUES (?, ?, ?)", (seq, target, codec.dumps(request)))
            self._append(cur, records.admin_submitted(seq, request, dropped))
            return request

    def pending_admin_requests(
        self, target: int, *, timeout_ms: int | None = None
    ) -> list[AdminRequest]:
        """See ``Coordinator.pending_admin_requests``."""
        with self._txn(timeout_ms, write=False) as cur:
            return self._pending(cur, target)

    def complete_admin_request(
        self,
        request_id: int,
        *,
        outcome: ErrorCode = ErrorCode.NONE,
        message: str = "",
        result: AlterPartitionResult | None = None,
        controller_epoch: int | None = None,
        timeout_ms: int | None = None,
    ) -> bool:
        """See ``Coordinator.complete_admin_request`` (a controller's completion is checked in
        the same transaction as the removal)."""
        with self._txn(timeout_ms) as cur:
            if controller_epoch is not None:
                self._check_controller(cur, controller_epoch)
            sql = "SELECT request FROM admin WHERE request_id = ?"
            request = _load(cur, AdminRequest, sql, request_id)
            if request is None:
                return False
            cur.execute("DELETE FROM admin WHERE request_id = ?", (request_id,))
            self._append(
                cur, records.admin_completed(self._next_seq(cur), request, outcome, message, result)
            )
            return True

    # ---- producer ids ----

    def allocate_producer_ids(
        self,
        broker_id: int,
        broker_epoch: int,
        *,
        count: int = 1000,
        controller_epoch: int,
        timeout_ms: int | None = None,
    ) -> ProducerIdBlock:
        """See ``Coordinator.allocate_producer_ids``."""
        with self._txn(timeout_ms) as cur:
            self._check_controller(cur, controller_epoch)
            stored = _load_all(cur, ProducerIdBlock, "SELECT block FROM producer_ids")
            block, _ = rules.allocated_producer_ids(stored, broker_id, broker_epoch, count)
            sql = "INSERT OR REPLACE INTO producer_ids VALUES (?, ?)"
            cur.execute(sql, (broker_id, codec.dumps(block)))
            return block

    def producer_id_block(
        self, broker_id: int, *, timeout_ms: int | None = None
    ) -> ProducerIdBlock | None:
        """See ``Coordinator.producer_id_block``."""
        with self._txn(timeout_ms, write=False) as cur:
            sql = "SELECT block FROM producer_ids WHERE broker_id = ?"
            return _load(cur, ProducerIdBlock, sql, broker_id)


def main() -> int:
    """The self-check: a one-broker cluster on a temporary file, through ``connect``."""
    register_backend("sqlite", SqliteCoordinator.from_url, replace=True)
    with tempfile.TemporaryDirectory() as tmp, connect(f"sqlite://{Path(tmp, 'm.db')}") as coord:
        broker = coord.register_broker(1, "127.0.0.1", 9092, session_timeout_ms=30_000)
        ctl = coord.elect_controller(1, broker.incarnation_epoch)
        configs = {"retention.ms": "86400000"}
        coord.create_topic("orders", [[1]], controller_epoch=ctl.controller_epoch, configs=configs)
        topic = coord.get_topic("orders")
        if topic is None or topic.config_map != configs:
            raise SystemExit(f"topic orders was not stored with its configs: {topic}")
        state = coord.get_partition_state("orders", 0)
        if state is None:
            raise SystemExit("partition orders-0 was not created")
        bumped = attrs.evolve(state, leader_epoch=state.leader_epoch + 1)
        result = coord.compare_and_set_partition_state(
            "orders", 0, state.partition_epoch, bumped, controller_epoch=ctl.controller_epoch
        )
        stale = coord.compare_and_set_partition_state(
            "orders", 0, state.partition_epoch, bumped, controller_epoch=ctl.controller_epoch
        )
        if not result.ok or stale.ok:
            raise SystemExit(f"CAS went wrong: {result}, then {stale}")
        print(f"controller {ctl}; CAS {result.status.name}, retry {stale.status.name}")
        for change in coord.changes_since(0).changes:
            print(f"  {change}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
