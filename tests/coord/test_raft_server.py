"""`QuorumServer` behaviour that needs real voters on loopback (`LocalQuorum`)."""

from __future__ import annotations

import asyncio
import socket
from pathlib import Path

import pytest

from replog import Admin, Cluster
from replog.clock import SYSTEM_CLOCK
from replog.coord.errors import CoordinatorUnavailableError
from replog.quorum import commands as rc
from replog.quorum.channel import QuorumChannel, parse_addresses
from replog.quorum.client import RaftCoordinator
from replog.quorum.local import LocalQuorum
from replog.quorum.server import _PeerLink

#: a fetch timeout far above the election timeout: a follower that is not told the leader
#: left waits this long before it stands
FETCH_TIMEOUT_MS = 5_000


def test_a_stopping_leader_hands_over_without_the_fetch_timeout(tmp_path: Path) -> None:
    """SIGTERM on the leader voter (``stop``) resigns first (E8): the others hear
    EndQuorumEpoch and elect a successor well inside their fetch timeout."""
    with LocalQuorum.start(
        3,
        str(tmp_path / "quorum"),
        election_timeout_ms=150,
        fetch_timeout_ms=FETCH_TIMEOUT_MS,
        request_timeout_ms=600,
    ) as quorum:
        leader = quorum.wait_for_leader()
        start_ms = SYSTEM_CLOCK.monotonic_ms()
        quorum.stop_node(leader)
        successor = quorum.wait_for_leader(timeout_ms=FETCH_TIMEOUT_MS // 2)
        handover_ms = SYSTEM_CLOCK.monotonic_ms() - start_ms
        assert successor != leader
        assert handover_ms < FETCH_TIMEOUT_MS // 2


def test_a_crashed_leader_is_replaced_without_the_fetch_timeout(tmp_path: Path) -> None:
    """A crash (``kill_node``: no resignation) closes the leader's connections and its port:
    the followers' links see the close, their reconnects are refused, and they elect well
    inside the fetch timeout (E9) -- without that they wait all of it."""
    with LocalQuorum.start(
        3,
        str(tmp_path / "quorum"),
        election_timeout_ms=150,
        fetch_timeout_ms=FETCH_TIMEOUT_MS,
        request_timeout_ms=600,
    ) as quorum:
        leader = quorum.wait_for_leader()
        _write_through(quorum.url)  # the followers have fetched from it
        start_ms = SYSTEM_CLOCK.monotonic_ms()
        quorum.kill_node(leader)
        successor = quorum.wait_for_leader(timeout_ms=FETCH_TIMEOUT_MS * 2)
        failover_ms = SYSTEM_CLOCK.monotonic_ms() - start_ms
        assert successor != leader
        assert failover_ms < FETCH_TIMEOUT_MS // 2


def test_a_peer_link_reports_a_refused_reconnect_but_not_a_dropped_connection() -> None:
    """The grace of E9's shell side: a connection the live peer drops is made again and nothing
    is reported; once the peer's port is closed, the refusal is."""

    async def scenario() -> list[int]:
        accepted: list[asyncio.StreamWriter] = []
        reconnected, reported = asyncio.Event(), asyncio.Event()
        refused: list[int] = []

        async def on_connection(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            accepted.append(writer)
            if len(accepted) == 1:
                writer.close()  # a live peer drops the first connection
            else:
                reconnected.set()

        def on_refused(peer_id: int) -> None:
            refused.append(peer_id)
            reported.set()

        server = await asyncio.start_server(on_connection, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        link = _PeerLink(1, 2, ("127.0.0.1", port), on_refused, SYSTEM_CLOCK)
        link.start()
        try:
            await asyncio.wait_for(reconnected.wait(), 10)
            assert refused == []
            server.close()  # the peer's process is gone: its port and connections close
            for writer in accepted:
                writer.close()
            await server.wait_closed()
            await asyncio.wait_for(reported.wait(), 10)
        finally:
            await link.close()
        return refused

    assert set(asyncio.run(scenario())) == {2}


def test_voters_start_again_on_their_data_after_a_stop_or_a_crash(tmp_path: Path) -> None:
    """A follower comes back as Follower of the leader it knew, which its node reports while it
    opens (before the frontend is attached); a crashed leader comes back Resigned and a sole
    voter leads again. Each serves writes afterwards."""
    with LocalQuorum.start(
        3, str(tmp_path / "three"), election_timeout_ms=150, fetch_timeout_ms=600
    ) as quorum:
        leader = quorum.wait_for_leader()
        follower = next(i for i in quorum.nodes if i != leader)
        quorum.stop_node(follower)
        quorum.start_node(follower)
        quorum.kill_node(follower)
        quorum.start_node(follower)
        quorum.kill_node(leader)
        quorum.start_node(leader)
        _write_through(quorum.url)
    with LocalQuorum.start(1, str(tmp_path / "one")) as quorum:
        _write_through(quorum.url)
        quorum.kill_node(1)
        quorum.start_node(1)
        _write_through(quorum.url)


def test_a_quorum_keeps_one_cluster_id_and_its_brokers_report_it(tmp_path: Path) -> None:
    """The first leader names the store (a random id in Kafka's form); every voter keeps it
    across a restart of them all, and a broker on ``raft://`` reports it in DescribeCluster
    (and Metadata) instead of the fixed name."""
    with LocalQuorum.start(
        3, str(tmp_path / "quorum"), election_timeout_ms=150, fetch_timeout_ms=600
    ) as quorum:
        cluster_id = _cluster_id(quorum.url)
        assert cluster_id is not None and len(cluster_id) == 22
        for node_id in sorted(quorum.nodes):
            quorum.stop_node(node_id)
        for node_id in sorted(quorum.configs):
            quorum.start_node(node_id)
        assert _cluster_id(quorum.url) == cluster_id
        with Cluster.local(1, base_dir=str(tmp_path / "brokers"), coordinator=quorum.url) as c:
            admin = Admin(c.bootstrap)
            try:
                assert admin.describe_cluster().cluster_id == cluster_id
            finally:
                admin.close()


def _cluster_id(url: str) -> str | None:
    coord = RaftCoordinator.from_url(url)
    try:
        return coord.snapshot().cluster_id
    finally:
        coord.close()


def _write_through(url: str) -> None:
    coord = RaftCoordinator.from_url(url)
    try:
        info = coord.register_broker(1, "127.0.0.1", 9001, session_timeout_ms=10_000)
        assert coord.elect_controller(1, info.incarnation_epoch).controller_id == 1
        assert coord.unregister_broker(1, info.incarnation_epoch)
    finally:
        coord.close()


def test_a_channel_stops_waiting_on_a_voter_that_answers_nothing(tmp_path: Path) -> None:
    """A voter that keeps its connection open but answers nothing (a paused process) costs one
    call its deadline; the channel then stops believing it leads and the next call asks the
    other voters (it used to go back to the mute one for good, which kept brokers cut off from a
    quorum that had elected another leader)."""
    with (
        socket.create_server(("127.0.0.1", 0)) as mute,
        LocalQuorum.start(1, str(tmp_path / "quorum"), election_timeout_ms=150) as quorum,
    ):
        quorum.wait_for_leader()
        real = parse_addresses(quorum.url.removeprefix("raft://"))[0]
        channel = QuorumChannel([mute.getsockname(), real])
        try:
            with pytest.raises(CoordinatorUnavailableError, match="no reply"):
                channel.call(rc.CurrentController(), timeout_ms=300, idempotent=True)
            channel.call(rc.CurrentController(), timeout_ms=5_000, idempotent=True)
            assert channel.leader == real
        finally:
            channel.close()
