"""A quorum node's port answers Kafka's BrokerRegistration (62) and BrokerHeartbeat (63) -- and
ApiVersions -- on Kafka's own wire: the requests here are encoded by hand with ``struct``, byte
by byte as Kafka lays them out, so nothing of replog's protocol layer is on the sending side."""

from __future__ import annotations

import socket
import struct
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from replog.clock import SYSTEM_CLOCK
from replog.metadata.types import SessionState
from replog.quorum.client import RaftCoordinator
from replog.quorum.local import LocalQuorum

NOT_CONTROLLER = 41
STALE_BROKER_EPOCH = 77
DUPLICATE_BROKER_REGISTRATION = 101
BROKER_ID_NOT_REGISTERED = 102
INCONSISTENT_CLUSTER_ID = 104
REPLOG_TAG = 10_000


# ---------------------------------------------------------------------------- hand encoding


def uvarint(n: int) -> bytes:
    out = bytearray()
    while n > 0x7F:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def compact_string(s: str | None) -> bytes:
    if s is None:
        return uvarint(0)
    data = s.encode()
    return uvarint(len(data) + 1) + data


def header_v2(api_key: int, version: int, correlation_id: int) -> bytes:
    client_id = b"hand-made"
    return (
        struct.pack(">hhih", api_key, version, correlation_id, len(client_id))
        + client_id
        + uvarint(0)
    )


def registration(
    broker_id: int,
    *,
    cluster_id: str = "",
    port: int = 9092,
    rack: str | None = "r1",
    tags: dict[int, bytes] | None = None,
    correlation_id: int = 1,
) -> bytes:
    """BrokerRegistration v0: broker id, cluster id, incarnation id, one listener, no
    features, rack, then the tagged fields."""
    listener = (
        compact_string("PLAINTEXT")
        + compact_string("broker.example")
        + struct.pack(">Hh", port, 0)
        + uvarint(0)
    )
    tagged = b"".join(
        uvarint(tag) + uvarint(len(data)) + data for tag, data in sorted((tags or {}).items())
    )
    body = (
        struct.pack(">i", broker_id)
        + compact_string(cluster_id)
        + uuid.uuid4().bytes
        + uvarint(2)
        + listener
        + uvarint(1)
        + compact_string(rack)
        + uvarint(len(tags or {}))
        + tagged
    )
    return header_v2(62, 0, correlation_id) + body


def heartbeat(
    broker_id: int,
    epoch: int,
    metadata_offset: int,
    correlation_id: int = 2,
    *,
    want_fence: bool = False,
    want_shut_down: bool = False,
) -> bytes:
    """BrokerHeartbeat v0: broker id, epoch, metadata offset, want fence, want shut down."""
    body = struct.pack(">iqq??", broker_id, epoch, metadata_offset, want_fence, want_shut_down)
    body += uvarint(0)
    return header_v2(63, 0, correlation_id) + body


class Wire:
    """A plain socket to one voter."""

    def __init__(self, address: tuple[str, int]) -> None:
        self.sock = socket.create_connection(address, timeout=10)

    def send(self, request: bytes) -> None:
        self.sock.sendall(struct.pack(">i", len(request)) + request)

    def receive(self) -> bytes:
        size = struct.unpack(">i", self._exactly(4))[0]
        return self._exactly(size)

    def _exactly(self, n: int) -> bytes:
        data = b""
        while len(data) < n:
            chunk = self.sock.recv(n - len(data))
            assert chunk, "the node closed the connection"
            data += chunk
        return data

    def call(self, request: bytes) -> bytes:
        self.send(request)
        return self.receive()


def read_uvarint(data: bytes, pos: int) -> tuple[int, int]:
    shift = value = 0
    while True:
        byte = data[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value, pos
        shift += 7


def read_tags(data: bytes, pos: int) -> dict[int, bytes]:
    count, pos = read_uvarint(data, pos)
    tags = {}
    for _ in range(count):
        tag, pos = read_uvarint(data, pos)
        size, pos = read_uvarint(data, pos)
        tags[tag] = data[pos : pos + size]
        pos += size
    assert pos == len(data), "bytes after the tagged fields"
    return tags


def parse_registration(frame: bytes, correlation_id: int = 1) -> tuple[int, int, dict[int, bytes]]:
    """(error code, broker epoch, tagged fields) of a BrokerRegistration v0 response."""
    corr, header_tags, _throttle, error, epoch = struct.unpack(">iBihq", frame[:19])
    assert (corr, header_tags) == (correlation_id, 0)
    return error, epoch, read_tags(frame, 19)


def parse_heartbeat(frame: bytes, correlation_id: int = 2) -> tuple[int, bool, bool, bool]:
    """(error code, is caught up, is fenced, should shut down) of a BrokerHeartbeat v0
    response."""
    corr, header_tags, _throttle, error, caught_up, fenced, shut_down = struct.unpack(
        ">iBih???", frame[:14]
    )
    assert (corr, header_tags) == (correlation_id, 0)
    read_tags(frame, 14)
    return error, caught_up, fenced, shut_down


# ---------------------------------------------------------------------------- tests


@pytest.fixture
def quorum(tmp_path: Path) -> Iterator[LocalQuorum]:
    with LocalQuorum.start(1, str(tmp_path / "quorum"), election_timeout_ms=150) as q:
        q.wait_for_leader()
        yield q


def test_a_broker_registers_and_heartbeats_with_kafka_requests(quorum: LocalQuorum) -> None:
    wire = Wire(quorum.configs[1].address)
    error, epoch, _ = parse_registration(wire.call(registration(7)))
    assert error == 0 and epoch > 0
    coord = RaftCoordinator.from_url(quorum.url)
    try:
        broker = coord.get_broker(7)
        assert broker is not None
        assert (broker.incarnation_epoch, broker.host, broker.port, broker.rack) == (
            epoch,
            "broker.example",
            9092,
            "r1",
        )
    finally:
        coord.close()
    assert parse_heartbeat(wire.call(heartbeat(7, epoch, epoch - 1))) == (0, False, False, False)
    assert parse_heartbeat(wire.call(heartbeat(7, epoch, epoch))) == (0, True, False, False)


def test_heartbeats_of_a_stale_epoch_or_an_unknown_broker_are_refused(
    quorum: LocalQuorum,
) -> None:
    wire = Wire(quorum.configs[1].address)
    _, epoch, _ = parse_registration(wire.call(registration(7)))
    error, _, fenced, _ = parse_heartbeat(wire.call(heartbeat(7, epoch - 1, epoch)))
    assert (error, fenced) == (STALE_BROKER_EPOCH, True)
    assert parse_heartbeat(wire.call(heartbeat(8, epoch, epoch)))[0] == BROKER_ID_NOT_REGISTERED


def test_a_live_broker_id_is_a_duplicate_registration(quorum: LocalQuorum) -> None:
    wire = Wire(quorum.configs[1].address)
    _, epoch, _ = parse_registration(wire.call(registration(7)))
    error, refused_epoch, tags = parse_registration(wire.call(registration(7)))
    assert (error, refused_epoch) == (DUPLICATE_BROKER_REGISTRATION, -1)
    assert tags == {REPLOG_TAG: struct.pack(">q", epoch)}  # the holder's epoch


def test_a_registration_from_another_cluster_is_refused(quorum: LocalQuorum) -> None:
    wire = Wire(quorum.configs[1].address)
    error, epoch, _ = parse_registration(wire.call(registration(7, cluster_id="someone-else")))
    assert (error, epoch) == (INCONSISTENT_CLUSTER_ID, -1)


def test_a_silent_broker_loses_its_registration_after_its_session_timeout(
    quorum: LocalQuorum,
) -> None:
    """replog's tagged session timeout (300 ms) is the registration's; with no heartbeat the
    controller expires it and the next heartbeat finds no registration."""
    wire = Wire(quorum.configs[1].address)
    tags = {REPLOG_TAG: struct.pack(">i", 300)}
    _, epoch, _ = parse_registration(wire.call(registration(7, tags=tags)))
    deadline_ms = SYSTEM_CLOCK.monotonic_ms() + 10_000
    coord = RaftCoordinator.from_url(quorum.url)
    try:
        while coord.get_broker(7) is not None:
            assert SYSTEM_CLOCK.monotonic_ms() < deadline_ms, "the session never expired"
    finally:
        coord.close()
    assert parse_heartbeat(wire.call(heartbeat(7, epoch, epoch)))[0] == BROKER_ID_NOT_REGISTERED


def test_api_versions_lists_the_controller_apis(quorum: LocalQuorum) -> None:
    wire = Wire(quorum.configs[1].address)
    frame = wire.call(struct.pack(">hhih", 18, 0, 5, -1))
    corr, error, count = struct.unpack(">ihi", frame[:10])
    assert (corr, error) == (5, 0)
    keys = [struct.unpack(">hhh", frame[10 + 6 * i : 16 + 6 * i]) for i in range(count)]
    assert keys == [(18, 0, 3), (55, 0, 1), (62, 0, 4), (63, 0, 1)]


def test_replies_come_back_in_request_order(quorum: LocalQuorum) -> None:
    """A registration (a write) then an ApiVersions (answered at once), pipelined: Kafka's
    order holds."""
    wire = Wire(quorum.configs[1].address)
    wire.send(registration(7, correlation_id=1))
    wire.send(struct.pack(">hhih", 18, 0, 2, -1))
    assert parse_registration(wire.receive())[0] == 0
    assert struct.unpack(">i", wire.receive()[:4])[0] == 2


def test_a_follower_answers_not_controller(tmp_path: Path) -> None:
    with LocalQuorum.start(3, str(tmp_path / "quorum"), election_timeout_ms=150) as quorum:
        leader = quorum.wait_for_leader()
        follower = next(i for i in quorum.configs if i != leader)
        wire = Wire(quorum.configs[follower].address)
        assert parse_registration(wire.call(registration(7)))[:2] == (NOT_CONTROLLER, -1)
        assert parse_heartbeat(wire.call(heartbeat(7, 1, 1)))[0] == NOT_CONTROLLER
        _, epoch, _ = parse_registration(Wire(quorum.configs[leader].address).call(registration(7)))
        assert epoch > 0


def _heartbeat_until(
    wire: Wire, request: bytes, done: Callable[[tuple[int, bool, bool, bool]], bool]
) -> None:
    deadline_ms = SYSTEM_CLOCK.monotonic_ms() + 10_000
    while not done(parse_heartbeat(wire.call(request))):
        assert SYSTEM_CLOCK.monotonic_ms() < deadline_ms, "the controller never agreed"


def test_want_shut_down_starts_a_controlled_shutdown_and_a_broker_leading_nothing_may_stop(
    quorum: LocalQuorum,
) -> None:
    wire = Wire(quorum.configs[1].address)
    _, epoch, _ = parse_registration(wire.call(registration(7)))
    request = heartbeat(7, epoch, epoch, want_shut_down=True)
    _heartbeat_until(wire, request, lambda answer: answer == (0, True, False, True))
    coord = RaftCoordinator.from_url(quorum.url)
    try:
        broker = coord.get_broker(7)
        assert broker is not None and broker.in_controlled_shutdown and not broker.fenced
    finally:
        coord.close()


def test_a_broker_still_leading_a_partition_is_not_told_to_shut_down(quorum: LocalQuorum) -> None:
    wire = Wire(quorum.configs[1].address)
    _, epoch, _ = parse_registration(wire.call(registration(7)))
    coord = RaftCoordinator.from_url(quorum.url)
    try:
        me = coord.register_broker(1, "localhost", 9093, session_timeout_ms=10_000)
        controller = coord.elect_controller(1, me.incarnation_epoch)
        coord.create_topic("t", [[7]], controller_epoch=controller.controller_epoch)
        state = coord.get_partition_state("t", 0)
        assert state is not None and state.leader == 7
        request = heartbeat(7, epoch, epoch, want_shut_down=True)
        coord_broker = lambda: coord.get_broker(7)  # noqa: E731
        _heartbeat_until(
            wire, request, lambda _: bool((b := coord_broker()) and b.in_controlled_shutdown)
        )
        assert parse_heartbeat(wire.call(request)) == (0, True, False, False)
    finally:
        coord.close()


def test_want_fence_fences_the_broker(quorum: LocalQuorum) -> None:
    wire = Wire(quorum.configs[1].address)
    _, epoch, _ = parse_registration(wire.call(registration(7)))
    request = heartbeat(7, epoch, epoch, want_fence=True)
    _heartbeat_until(wire, request, lambda answer: answer == (0, True, True, False))


def test_the_raft_handle_keeps_its_session_over_a_kafka_connection(quorum: LocalQuorum) -> None:
    """``register_broker`` and the keep-alive travel on a Kafka connection to the voter, and
    its heartbeats keep a 300 ms session alive for several timeouts."""
    coord = RaftCoordinator.from_url(quorum.url)
    try:
        me = coord.register_broker(3, "localhost", 9094, session_timeout_ms=300)
        assert quorum.nodes[1].call(lambda s: s.status())["kafka_connections"] >= 1
        until_ms = SYSTEM_CLOCK.monotonic_ms() + 1_500  # five session timeouts
        while SYSTEM_CLOCK.monotonic_ms() < until_ms:
            assert coord.get_broker(3) == me
        assert coord.session_state(3) is SessionState.CONNECTED
    finally:
        coord.close()


def test_an_unknown_api_versions_version_is_answered_at_v0_and_another_api_closes(
    quorum: LocalQuorum,
) -> None:
    wire = Wire(quorum.configs[1].address)
    frame = wire.call(struct.pack(">hhih", 18, 9, 6, -1))
    assert struct.unpack(">ihihhh", frame) == (6, 35, 1, 18, 0, 3)  # UNSUPPORTED_VERSION
    wire.send(header_v2(0, 9, 7))  # Produce: not served on the quorum port
    assert wire.sock.recv(1) == b""


def test_the_raft_handle_asks_for_a_controlled_shutdown_with_heartbeats(
    quorum: LocalQuorum,
) -> None:
    """``update_broker(in_controlled_shutdown=True)`` on ``raft://`` is Kafka's negotiation: the
    handle's BrokerHeartbeats want to shut down until the registration records it, with no
    UpdateBroker call of its own; the keep-alive heartbeats go on wanting it."""
    coord = RaftCoordinator.from_url(quorum.url)
    wanted: list[bool] = []
    writes: list[object] = []
    send, write = coord._brokers.heartbeat, coord._write

    def spy_heartbeat(*args: object, want_shut_down: bool = False, **kwargs: object) -> object:
        wanted.append(want_shut_down)
        return send(*args, want_shut_down=want_shut_down, **kwargs)  # type: ignore[arg-type]

    def spy_write(command: object, timeout_ms: int | None) -> object:
        writes.append(command)
        return write(command, timeout_ms)

    coord._brokers.heartbeat = spy_heartbeat  # type: ignore[method-assign]
    coord._write = spy_write  # type: ignore[method-assign]
    try:
        me = coord.register_broker(4, "localhost", 9095, session_timeout_ms=300)
        updated = coord.update_broker(4, me.incarnation_epoch, in_controlled_shutdown=True)
        assert updated.in_controlled_shutdown and not updated.fenced
        assert coord.get_broker(4) == updated
        assert wanted and wanted[-1] is True
        assert not [w for w in writes if type(w).__name__ == "UpdateBroker"]
        asked = len(wanted)
        until_ms = SYSTEM_CLOCK.monotonic_ms() + 600  # two session timeouts of keep-alives
        while SYSTEM_CLOCK.monotonic_ms() < until_ms:
            assert coord.get_broker(4) == updated
        assert len(wanted) > asked and all(wanted[asked:])
    finally:
        coord.close()


@pytest.mark.parametrize("version", [0, 1])
def test_describe_quorum_answers_kafka_pythons_encoder(quorum: LocalQuorum, version: int) -> None:
    """DescribeQuorum encoded and decoded by kafka-python (generated from Kafka's own JSON), at
    each version served: v0 leaves v1's timestamps out."""
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        from kafka.protocol.admin.cluster import DescribeQuorumRequest, DescribeQuorumResponse
    topic = DescribeQuorumRequest.TopicData
    request = DescribeQuorumRequest(
        version=version,
        topics=[
            topic(
                topic_name="__cluster_metadata",
                partitions=[topic.PartitionData(partition_index=0)],
            )
        ],
    )
    request.with_header(correlation_id=9, client_id="kafka-python")
    frame = bytes(request.encode(version=version, header=True, framed=True))
    wire = Wire(quorum.configs[1].address)
    answer = DescribeQuorumResponse.decode(wire.call(frame[4:]), version=version, header=True)
    (described,) = answer.to_dict()["topics"]
    (partition,) = described["partitions"]
    assert (answer.error_code, partition["error_code"], partition["leader_id"]) == (0, 0, 1)
    (voter,) = partition["current_voters"]
    assert voter["replica_id"] == 1 and voter["log_end_offset"] >= 1
    assert ("last_fetch_timestamp" in voter) == (version >= 1)
