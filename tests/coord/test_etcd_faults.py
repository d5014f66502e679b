"""etcd backend under faults, each on a dedicated server: lease revoke, kill -9 and restart,
a paused server, and a zombie broker process paused past its lease."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import attrs
import pytest

from replog.coord.errors import FencedControllerError, SessionExpiredError
from replog.coord.etcd import EtcdCoordinator
from replog.metadata.types import (
    BrokerChanged,
    BrokerChangeReason,
    CasStatus,
    SessionEvent,
    SessionState,
)
from tests.coord.etcd_fixtures import dedicated_etcd, etcd_factory
from tests.servers_etcd import EtcdServer
from tests.waiting import eventually

pytestmark = pytest.mark.system

__all__ = ["dedicated_etcd"]  # the fixture, re-exported so pytest finds it here

SRC = str(Path(__file__).resolve().parents[2] / "src")


def wait_for(predicate: Callable[[], bool], what: str, timeout_s: float = 30.0) -> None:
    eventually(predicate, what=what, timeout_s=timeout_s)


@pytest.fixture
def coord(dedicated_etcd: EtcdServer) -> Iterator[EtcdCoordinator]:
    """A coordinator on the dedicated server (short background timeouts)."""
    coordinator = etcd_factory(dedicated_etcd, default_timeout_ms=3_000)()
    try:
        yield coordinator
    finally:
        dedicated_etcd.resume()
        coordinator.close()


def test_lease_revoke_loses_the_session_and_a_new_incarnation_follows(
    coord: EtcdCoordinator,
) -> None:
    events: list[SessionEvent] = []
    coord.add_session_listener(1, events.append)
    first = coord.register_broker(1, "127.0.0.1", 9001, session_timeout_ms=5_000)
    coord.expire_session(1)
    assert coord.session_state(1) is SessionState.LOST
    assert coord.get_broker(1) is None
    expired = [
        c
        for c in coord.changes_since(0).changes
        if isinstance(c, BrokerChanged) and c.reason is BrokerChangeReason.EXPIRED
    ]
    assert [c.incarnation_epoch for c in expired] == [first.incarnation_epoch]
    with pytest.raises(SessionExpiredError):
        coord.heartbeat(1, first.incarnation_epoch)
    second = coord.register_broker(1, "127.0.0.1", 9001, session_timeout_ms=5_000)
    assert second.incarnation_epoch > first.incarnation_epoch
    assert coord.heartbeat(1, second.incarnation_epoch) is SessionState.CONNECTED
    assert [e.state for e in events] == [
        SessionState.CONNECTED,
        SessionState.LOST,
        SessionState.CONNECTED,
    ]


def test_kill9_and_restart_keeps_the_data(
    coord: EtcdCoordinator, dedicated_etcd: EtcdServer
) -> None:
    broker = coord.register_broker(1, "127.0.0.1", 9001, session_timeout_ms=10_000)
    ctl = coord.elect_controller(1, broker.incarnation_epoch)
    created = coord.create_topic("t", [[1], [1]], controller_epoch=ctl.controller_epoch)
    before = coord.snapshot()
    dedicated_etcd.kill9()
    dedicated_etcd.restart()
    wait_for(lambda: _reachable(coord), "the coordinator reaches the restarted server")
    after = coord.snapshot()
    assert after == before
    assert coord.get_topic("t") == created
    state = coord.get_partition_state("t", 0)
    assert state is not None
    result = coord.compare_and_set_partition_state(
        "t", 0, 0, attrs.evolve(state, leader_epoch=1), controller_epoch=ctl.controller_epoch
    )
    assert result.ok and result.state is not None and result.state.partition_epoch == 1


def _reachable(coord: EtcdCoordinator) -> bool:
    try:
        coord.list_topics(timeout_ms=500)
    except Exception:
        return False
    return True


def test_paused_server_suspends_then_the_lease_is_expired_on_resume(
    coord: EtcdCoordinator, dedicated_etcd: EtcdServer
) -> None:
    events: list[SessionEvent] = []
    coord.add_session_listener(1, events.append)
    coord.register_broker(1, "127.0.0.1", 9001, session_timeout_ms=1_000)
    dedicated_etcd.pause()
    try:
        wait_for(lambda: coord.session_state(1) is SessionState.SUSPENDED, "SUSPENDED", timeout_s=5)
        time.sleep(2.0)  # well past the 1 s TTL
    finally:
        dedicated_etcd.resume()
    wait_for(lambda: coord.session_state(1) is SessionState.LOST, "LOST after resume")
    wait_for(lambda: coord.get_broker(1) is None, "registration gone")
    states = [e.state for e in events]
    assert states[0] is SessionState.CONNECTED and states[-1] is SessionState.LOST
    assert SessionState.SUSPENDED in states


ZOMBIE = textwrap.dedent(
    """
    import json, sys, time
    sys.path.insert(0, sys.argv[2])
    import attrs
    from replog.coord.etcd import EtcdCoordinator
    from replog.coord.errors import FencedControllerError, SessionExpiredError
    coord = EtcdCoordinator.from_url(sys.argv[1], default_timeout_ms=3000)
    b = coord.register_broker(1, "127.0.0.1", 9001, session_timeout_ms=1000)
    ctl = coord.elect_controller(1, b.incarnation_epoch)
    coord.create_topic("t", [[1, 2]], controller_epoch=ctl.controller_epoch)
    print(json.dumps({"inc": b.incarnation_epoch, "epoch": ctl.controller_epoch}), flush=True)
    sys.stdin.readline()  # paused (SIGSTOP) somewhere around here
    out = {}
    try:
        coord.create_topic("u", [[1]], controller_epoch=ctl.controller_epoch)
        out["create"] = "ok"
    except FencedControllerError as e:
        out["create"] = ["fenced", e.active_controller_epoch]
    state = coord.get_partition_state("t", 0)
    cas = coord.compare_and_set_partition_state(
        "t", 0, 0, attrs.evolve(state, leader_epoch=5), controller_epoch=ctl.controller_epoch
    )
    out["cas"] = cas.status.value
    deadline = time.monotonic() + 5
    while coord.session_state(1).value != "lost" and time.monotonic() < deadline:
        time.sleep(0.02)
    out["session"] = coord.session_state(1).value
    try:
        coord.heartbeat(1, b.incarnation_epoch)
        out["heartbeat"] = "ok"
    except SessionExpiredError:
        out["heartbeat"] = "expired"
    print(json.dumps(out), flush=True)
    coord.close()
    """
)


def test_zombie_broker_process_is_fenced(
    coord: EtcdCoordinator, dedicated_etcd: EtcdServer
) -> None:
    url = f"etcd://{dedicated_etcd.client_url.removeprefix('http://')}/{coord._p.strip('/')}"
    child = subprocess.Popen(
        [sys.executable, "-c", ZOMBIE, url, SRC],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert child.stdin is not None and child.stdout is not None
    try:
        hello = json.loads(child.stdout.readline())
        os.kill(child.pid, signal.SIGSTOP)
        try:
            wait_for(lambda: coord.get_broker(1) is None, "the zombie's lease expires")
            wait_for(lambda: coord.current_controller() is None, "controller role vacated")
            b2 = coord.register_broker(2, "127.0.0.1", 9002, session_timeout_ms=5_000)
            new = coord.elect_controller(2, b2.incarnation_epoch)
            assert new.controller_epoch == hello["epoch"] + 1
            before = coord.snapshot()
        finally:
            os.kill(child.pid, signal.SIGCONT)
        child.stdin.write("go\n")
        child.stdin.flush()
        report = json.loads(child.stdout.readline())
        assert report == {
            "create": ["fenced", new.controller_epoch],
            "cas": CasStatus.FENCED_CONTROLLER.value,
            "session": "lost",
            "heartbeat": "expired",
        }
        after = coord.snapshot()
        assert (after.topics, after.partitions) == (before.topics, before.partitions)
        with pytest.raises(FencedControllerError):
            coord.create_topic("v", [[2]], controller_epoch=hello["epoch"])
        assert child.wait(timeout=10) == 0
    finally:
        if child.poll() is None:
            os.kill(child.pid, signal.SIGCONT)
            child.kill()
            child.wait()
