"""`QuorumFrontend` on real Raft nodes in virtual time (``raft_harness``): writes answered
only once committed, reads behind a barrier, leader changes, and sessions decided by the
leader's clock."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from replog.coord.errors import SessionExpiredError
from replog.metadata.types import BrokerInfo, ControllerInfo, SessionState
from replog.quorum.commands import (
    CurrentController,
    ElectController,
    GetBroker,
    Heartbeat,
    InitCluster,
    RegisterBroker,
)
from replog.quorum.frontend import ReplyError, ReplyNotLeader, ReplyOk, ReplyUnknown
from tests.coord.raft_harness import Quorum


def register(broker_id: int, timeout_ms: int = 1_000) -> RegisterBroker:
    return RegisterBroker(
        broker_id=broker_id,
        host="h",
        port=broker_id,
        rack=None,
        session_timeout_ms=timeout_ms,
        clean_shutdown=True,
        fenced=False,
    )


@pytest.fixture
def quorum(tmp_path: Path) -> Iterator[Quorum]:
    q = Quorum(tmp_path, 3)
    try:
        yield q
    finally:
        q.close()


def test_a_write_is_answered_only_once_committed(quorum: Quorum) -> None:
    leader = quorum.ready_leader()
    quorum.cut = set(quorum.voters) - {leader}  # the followers cannot fetch
    quorum.request(leader, "w", register(1))
    quorum.run(50)
    member = quorum.members[leader]
    assert "w" not in member.replies, "acknowledged before a majority has it"
    assert member.raft.core.log.end_offset > member.raft.core.high_watermark
    quorum.cut = set()
    quorum.run_until(lambda: "w" in member.replies)
    reply = member.replies["w"]
    assert isinstance(reply, ReplyOk) and isinstance(reply.value, BrokerInfo)


def test_a_read_waits_for_a_barrier_committed_after_it_arrived(quorum: Quorum) -> None:
    leader = quorum.ready_leader()
    member = quorum.members[leader]
    quorum.request(leader, "w", register(1))
    quorum.run_until(lambda: "w" in member.replies)
    end = member.raft.core.log.end_offset
    quorum.cut = set(quorum.voters) - {leader}
    quorum.request(leader, "r", GetBroker(1))
    quorum.run(50)
    assert "r" not in member.replies, "answered without proving it still leads"
    assert member.raft.core.log.end_offset == end + 1, "one barrier record proposed"
    assert member.frontend.counters["barriers"] >= 1
    quorum.cut = set()
    quorum.run_until(lambda: "r" in member.replies)
    reply = member.replies["r"]
    assert isinstance(reply, ReplyOk) and isinstance(reply.value, BrokerInfo)


def test_a_deposed_leader_never_answers_a_read(quorum: Quorum) -> None:
    old = quorum.ready_leader()
    quorum.cut = {old}
    quorum.request(old, "r", CurrentController())
    new = quorum.ready_leader()
    assert new != old
    quorum.request(new, "e", register(2))
    quorum.run_until(lambda: "e" in quorum.members[new].replies)
    quorum.run(200)
    assert "r" not in quorum.members[old].replies or not isinstance(
        quorum.members[old].replies["r"], ReplyOk
    )
    quorum.cut = set()
    quorum.run_until(lambda: "r" in quorum.members[old].replies)
    assert isinstance(quorum.members[old].replies["r"], ReplyNotLeader)


def test_proposals_lost_in_a_leader_change_are_answered_not_leader(quorum: Quorum) -> None:
    """Two writes proposed by a leader that is then cut off: the new leader's log is shorter,
    so the second write's offset may never be written again; both get NotLeader (definitely
    not executed) as soon as the old leader applies a record of the newer epoch."""
    old = quorum.ready_leader()
    quorum.cut = {old}
    quorum.request(old, "a", register(1))
    quorum.request(old, "b", register(2))
    new = quorum.ready_leader()
    quorum.cut = set()
    quorum.run_until(lambda: {"a", "b"} <= set(quorum.members[old].replies))
    replies = quorum.members[old].replies
    assert isinstance(replies["a"], ReplyNotLeader) and isinstance(replies["b"], ReplyNotLeader)
    quorum.request(new, "get", GetBroker(2))
    quorum.run_until(lambda: "get" in quorum.members[new].replies)
    assert quorum.members[new].replies["get"] == ReplyOk(None), "the lost write never happened"


def test_a_follower_redirects_to_the_leader(quorum: Quorum) -> None:
    leader = quorum.ready_leader()
    follower = min(set(quorum.voters) - {leader})
    quorum.request(follower, "w", register(1))
    assert quorum.members[follower].replies["w"] == ReplyNotLeader(leader)


def heartbeat(quorum: Quorum, leader: int, token: str, broker: BrokerInfo) -> object:
    member = quorum.members[leader]
    quorum.request(leader, token, Heartbeat(broker.broker_id, broker.incarnation_epoch))
    quorum.run_until(lambda: token in member.replies)
    return member.replies[token]


def test_sessions_expire_by_the_leader_clock(tmp_path: Path) -> None:
    quorum = Quorum(tmp_path, 1)
    try:
        member = quorum.members[quorum.ready_leader()]
        quorum.request(1, "reg", register(1, timeout_ms=1_000))
        reply = member.replies["reg"]
        assert isinstance(reply, ReplyOk) and isinstance(reply.value, BrokerInfo)
        broker = reply.value
        for i in range(3):  # heartbeats less than a timeout apart keep it alive
            quorum.run(800)
            assert heartbeat(quorum, 1, f"hb{i}", broker) == ReplyOk(SessionState.CONNECTED)
        quorum.run(990)
        assert 1 in member.frontend.machine.registrations()
        quorum.run(20)
        assert member.frontend.counters["expiries_proposed"] == 1
        assert 1 not in member.frontend.machine.registrations()
        expired = heartbeat(quorum, 1, "late", broker)
        assert isinstance(expired, ReplyError) and isinstance(expired.error, SessionExpiredError)
    finally:
        quorum.close()


def test_a_new_leader_gives_every_session_a_fresh_deadline(quorum: Quorum) -> None:
    old = quorum.ready_leader()
    quorum.request(old, "reg", register(1, timeout_ms=1_000))
    quorum.run_until(lambda: "reg" in quorum.members[old].replies)
    quorum.run(700)  # no heartbeat: 300 ms left on the old leader's clock
    quorum.cut = {old}
    new = quorum.ready_leader()
    became_ready_ms = quorum.now_ms
    member = quorum.members[new]
    quorum.run(900)
    assert 1 in member.frontend.machine.registrations(), "expired on the old leader's deadline"
    quorum.run_until(lambda: 1 not in member.frontend.machine.registrations(), 500)
    assert quorum.now_ms - became_ready_ms >= 1_000


def test_an_expired_controller_loses_its_role(tmp_path: Path) -> None:
    quorum = Quorum(tmp_path, 1)
    try:
        member = quorum.members[quorum.ready_leader()]
        quorum.request(1, "reg", register(1, timeout_ms=500))
        broker = member.replies["reg"]
        assert isinstance(broker, ReplyOk) and isinstance(broker.value, BrokerInfo)
        elect = ElectController(broker_id=1, incarnation_epoch=broker.value.incarnation_epoch)
        quorum.request(1, "elect", elect)
        assert isinstance(member.replies["elect"], ReplyOk)
        assert isinstance(member.replies["elect"].value, ControllerInfo)
        quorum.run(600)
        quorum.request(1, "ctl", CurrentController())
        quorum.run_until(lambda: "ctl" in member.replies)
        assert member.replies["ctl"] == ReplyOk(None)
    finally:
        quorum.close()


def test_a_write_that_never_commits_times_out_unknown(quorum: Quorum) -> None:
    leader = quorum.ready_leader()
    quorum.cut = set(quorum.voters) - {leader}
    quorum.request(leader, "w", register(1))
    member = quorum.members[leader]
    quorum.run_until(lambda: "w" in member.replies, 6_000)
    assert isinstance(member.replies["w"], (ReplyUnknown, ReplyNotLeader))


def test_a_new_quorum_names_itself_once_ahead_of_any_write(tmp_path: Path) -> None:
    """The first leader proposes an InitCluster before the writes of its epoch; every voter
    applies the same id, and a later leader, whose image has it, proposes none."""
    quorum = Quorum(tmp_path, 3, cluster_ids=True)
    try:
        leader = quorum.ready_leader()
        quorum.request(leader, "w", register(1))
        member = quorum.members[leader]
        quorum.run_until(lambda: "w" in member.replies)
        reply = member.replies["w"]
        assert isinstance(reply, ReplyOk) and isinstance(reply.value, BrokerInfo)
        assert reply.value.incarnation_epoch == 2  # offset 0: leader change, 1: InitCluster
        quorum.run(50)
        named = {m.frontend.machine.cluster_id for m in quorum.members.values()}
        assert named == {f"id-{leader}-0"}
        quorum.request(leader, "forged", InitCluster(cluster_id="mine"))
        assert isinstance(member.replies["forged"], ReplyError)  # only a leader proposes one
        quorum.stop(leader)
        successor = quorum.ready_leader()
        quorum.run(50)
        assert quorum.members[successor].frontend.counters.get("cluster_ids_proposed", 0) == 0
        assert {m.frontend.machine.cluster_id for m in quorum.members.values()} == named
    finally:
        quorum.close()
