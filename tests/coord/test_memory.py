"""Memory-backend specifics: clock-driven expiry, retention, queue limits, listener safety."""

from __future__ import annotations

import threading

import pytest

from replog.coord.errors import AdminQueueFullError, MustResyncError
from replog.coord.feed import ManualClock
from replog.coord.memory import MemoryCoordinator
from replog.errors import ErrorCode, RequestTimeoutError
from replog.metadata.types import (
    AdminRequestChanged,
    AdminRequestChangeReason,
    BrokerChanged,
    BrokerChangeReason,
    ChangeBatch,
    CloseReplica,
    ControllerChanged,
    CreateTopic,
    SessionEvent,
    SessionState,
    StartReplica,
)


def expiries(coord: MemoryCoordinator) -> list[int]:
    return [
        c.broker_id
        for c in coord.changes_since(0).changes
        if isinstance(c, BrokerChanged) and c.reason is BrokerChangeReason.EXPIRED
    ]


def test_session_expires_exactly_at_its_deadline() -> None:
    coord = MemoryCoordinator()
    info = coord.register_broker(1, "h", 1, session_timeout_ms=1000)
    assert coord.advance(999) == []
    coord.heartbeat(1, info.incarnation_epoch)  # deadline moves to 1999
    assert coord.advance(1998) == []
    assert 1 in coord.live_brokers()
    assert coord.advance(1999) == [1]
    assert coord.live_brokers() == {}
    assert expiries(coord) == [1]


def test_expiry_order_is_deadline_then_broker_id() -> None:
    coord = MemoryCoordinator()
    for broker_id, timeout_ms in ((3, 500), (1, 500), (2, 400)):
        coord.register_broker(broker_id, "h", 1, session_timeout_ms=timeout_ms)
    assert coord.advance(10_000) == [2, 1, 3]
    assert expiries(coord) == [2, 1, 3]


def test_each_broker_has_its_own_session_timeout() -> None:
    coord = MemoryCoordinator()
    coord.register_broker(1, "h", 1, session_timeout_ms=100)
    coord.register_broker(2, "h", 1, session_timeout_ms=300)
    assert coord.advance(200) == [1]
    assert set(coord.live_brokers()) == {2}


def test_expiry_of_the_controller_vacates_the_role_in_the_same_write() -> None:
    coord = MemoryCoordinator()
    info = coord.register_broker(1, "h", 1, session_timeout_ms=100)
    coord.elect_controller(1, info.incarnation_epoch)
    coord.advance(100)
    last = coord.changes_since(0).changes[-2:]
    assert isinstance(last[0], BrokerChanged) and isinstance(last[1], ControllerChanged)
    assert last[0].seq == last[1].seq and last[1].controller is None


def test_suspended_session_expires_when_its_deadline_passes() -> None:
    coord = MemoryCoordinator()
    events: list[SessionEvent] = []
    coord.add_session_listener(1, events.append)
    coord.register_broker(1, "h", 1, session_timeout_ms=100)
    coord.suspend_session(1)
    coord.advance(100)
    coord.resume_session(1)  # too late: already LOST
    assert [e.state for e in events] == [
        SessionState.CONNECTED,
        SessionState.SUSPENDED,
        SessionState.LOST,
    ]


def test_resume_refreshes_the_deadline() -> None:
    coord = MemoryCoordinator()
    coord.register_broker(1, "h", 1, session_timeout_ms=100)
    coord.suspend_session(1)
    coord.advance(90)
    coord.resume_session(1)
    assert coord.advance(150) == []
    assert coord.advance(190) == [1]


def test_an_injected_clock_expires_sessions_at_the_next_call() -> None:
    now = [0]
    coord = MemoryCoordinator(clock=lambda: now[0])
    coord.register_broker(1, "h", 1, session_timeout_ms=100)
    now[0] = 100
    assert coord.session_state(1) is SessionState.LOST
    with pytest.raises(TypeError):
        coord.advance(200)


def test_manual_clock_never_goes_back() -> None:
    clock = ManualClock(50)
    assert clock.advance(10) == 60
    with pytest.raises(ValueError):
        clock.set(59)


def test_feed_retention_trims_whole_writes() -> None:
    coord = MemoryCoordinator(feed_retention_max=2)
    for broker_id in range(1, 5):
        coord.register_broker(broker_id, "h", 1, session_timeout_ms=100)
    with pytest.raises(MustResyncError) as e:
        coord.changes_since(0)
    assert e.value.oldest_seq == 3
    assert [c.seq for c in coord.changes_since(3).changes] == [3, 4]
    assert coord.trim_history(1) == 3  # the boundary never moves back


def test_full_admin_queue_drops_superseded_requests_visibly() -> None:
    coord = MemoryCoordinator(admin_queue_limit=3)
    start = coord.submit_admin_request(1, StartReplica(topic="t", partition=0))
    old_close = coord.submit_admin_request(1, CloseReplica(topic="t", partition=0, leader_epoch=1))
    new_close = coord.submit_admin_request(1, CloseReplica(topic="t", partition=0, leader_epoch=2))
    create = coord.submit_admin_request(
        1, CreateTopic(topic="u", partition_count=1, replication_factor=1)
    )
    assert coord.pending_admin_requests(1) == [new_close, create]
    dropped = [
        (c.request, c.outcome)
        for c in coord.changes_since(0).changes
        if isinstance(c, AdminRequestChanged) and c.reason is AdminRequestChangeReason.COMPLETED
    ]
    assert dropped == [
        (start, ErrorCode.OPERATION_NOT_ATTEMPTED),
        (old_close, ErrorCode.OPERATION_NOT_ATTEMPTED),
    ]
    coord.submit_admin_request(1, CreateTopic(topic="v", partition_count=1, replication_factor=1))
    with pytest.raises(AdminQueueFullError):
        coord.submit_admin_request(
            1, CreateTopic(topic="w", partition_count=1, replication_factor=1)
        )
    assert len(coord.pending_admin_requests(1)) == 3


def test_a_raising_listener_does_not_break_the_store_or_other_listeners() -> None:
    coord = MemoryCoordinator()
    seen: list[ChangeBatch] = []

    def broken(batch: ChangeBatch) -> None:
        raise RuntimeError("listener bug")

    coord.subscribe(broken)
    coord.subscribe(seen.append)
    coord.register_broker(1, "h", 1, session_timeout_ms=100)
    assert len(seen) == 1 and 1 in coord.live_brokers()


def test_listeners_may_write_and_still_see_every_change_in_order() -> None:
    coord = MemoryCoordinator()
    seqs: list[int] = []

    def on_batch(batch: ChangeBatch) -> None:
        for change in batch.changes:
            seqs.append(change.seq)
            if isinstance(change, BrokerChanged) and change.broker_id == 1:
                coord.register_broker(2, "h", 1, session_timeout_ms=100)

    coord.subscribe(on_batch)
    coord.register_broker(1, "h", 1, session_timeout_ms=100)
    assert seqs == [1, 2]
    assert set(coord.live_brokers()) == {1, 2}


def test_a_call_that_cannot_get_the_lock_times_out() -> None:
    coord = MemoryCoordinator()
    coord._lock.acquire(1000)  # another thread is inside a call
    try:
        result: list[BaseException] = []

        def call() -> None:
            try:
                coord.live_brokers(timeout_ms=20)
            except RequestTimeoutError as e:
                result.append(e)

        t = threading.Thread(target=call)
        t.start()
        t.join(timeout=10)
        assert len(result) == 1
    finally:
        coord._lock.release()


def test_close_ends_sessions() -> None:
    coord = MemoryCoordinator()
    events: list[SessionEvent] = []
    coord.add_session_listener(1, events.append)
    coord.register_broker(1, "h", 1, session_timeout_ms=100)
    coord.close()
    assert coord.closed
    assert [e.state for e in events] == [SessionState.CONNECTED, SessionState.LOST]
