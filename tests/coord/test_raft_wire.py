"""The quorum's wire format and JSON encoding: every Raft message, every client frame and
every error an operation raises survives the trip; malformed input is a ``ProtocolError``."""

from __future__ import annotations

import pytest

from replog.coord.errors import (
    AdminQueueFullError,
    BrokerIdInUseError,
    CoordinatorUnavailableError,
    FencedControllerError,
    InvalidPartitionStateError,
    MustResyncError,
    SessionExpiredError,
    TopicExistsError,
    UnknownTopicError,
)
from replog.errors import ErrorCode, InvalidTopicError, ProtocolError
from replog.metadata.types import (
    BrokerInfo,
    CasResult,
    CasStatus,
    ChangeBatch,
    ControllerInfo,
    MetadataSnapshot,
    PartitionChanged,
    PartitionState,
    SessionState,
    TopicAssignment,
)
from replog.protocol.framing import FrameReader
from replog.quorum import codec as raft_codec
from replog.quorum import wire as raft_wire
from replog.quorum.commands import CasPartitionState, GetSnapshot, Watch
from replog.raft.messages import (
    BeginQuorumEpochRequest,
    BeginQuorumEpochResponse,
    EndQuorumEpochRequest,
    EndQuorumEpochResponse,
    FetchSnapshotRequest,
    FetchSnapshotResponse,
    Message,
    OffsetAndEpoch,
    RaftFetchRequest,
    RaftFetchResponse,
    RaftSnapshotId,
    VoteRequest,
    VoteResponse,
)

MESSAGES: list[Message] = [
    VoteRequest(3, 1, 2, 1 << 40, True),
    VoteResponse(3, -1, False, True, ErrorCode.FENCED_LEADER_EPOCH),
    BeginQuorumEpochRequest(4, 2),
    BeginQuorumEpochResponse(4, 2, ErrorCode.NONE),
    EndQuorumEpochRequest(4, 2, (3, 1)),
    EndQuorumEpochResponse(4, 2),
    RaftFetchRequest(4, 3, 17, 2, 8 << 20),
    RaftFetchResponse(4, 2, ErrorCode.NONE, 17, 2, 16, b"\x00batches\xff"),
    RaftFetchResponse(4, 2, ErrorCode.NONE, 17, 3, diverging=OffsetAndEpoch(2, 12)),
    RaftFetchResponse(4, 2, ErrorCode.NONE, 3, 1, snapshot_id=RaftSnapshotId(10, 2)),
    FetchSnapshotRequest(4, 3, RaftSnapshotId(10, 2), 4096, 1 << 20),
    FetchSnapshotResponse(4, 2, ErrorCode.NONE, RaftSnapshotId(10, 2), 4096, 9000, b"chunk"),
]


def only_frame(data: bytes) -> bytes:
    frames = FrameReader().feed(data)
    assert len(frames) == 1
    return frames[0]


@pytest.mark.parametrize("message", MESSAGES, ids=lambda m: type(m).__name__)
def test_every_raft_message_round_trips(message: Message) -> None:
    assert raft_wire.decode_message(only_frame(raft_wire.encode_message(message))) == message


def test_hello_and_malformed_frames() -> None:
    assert raft_wire.decode_hello(only_frame(raft_wire.encode_hello(raft_wire.PEER, 3))) == (0, 3)
    assert raft_wire.decode_hello(only_frame(raft_wire.encode_hello(raft_wire.CLIENT, -1)))[0] == 1
    for body in (b"XXXX\x00\x00\x00\x00\x01", b"RLQ1\x00\xff\xff\xff\xff", b"RLQ1"):
        with pytest.raises(ProtocolError):
            raft_wire.decode_hello(body)
    good = only_frame(raft_wire.encode_message(MESSAGES[0]))
    for body in (good[:-1], good + b"\x00", b"\x7f", b"\x09\x00"):
        with pytest.raises(ProtocolError):
            raft_wire.decode_message(body)


STATE = PartitionState.initial((1, 2, 3))
VALUES: list[object] = [
    None,
    True,
    [3, 4],
    SessionState.CONNECTED,
    ControllerInfo(1, 2, 3),
    {1: BrokerInfo(broker_id=1, incarnation_epoch=7, host="h", port=1)},
    CasResult(status=CasStatus.OK, state=STATE, seq=9),
    ChangeBatch((PartitionChanged(seq=4, topic="t", partition=0, state=STATE),), 5),
    MetadataSnapshot(
        seq=5,
        brokers={},
        topics={"t": TopicAssignment(topic="t", topic_id="ab" * 16, replicas=[[1, 2]])},
        partitions={("t", 0): STATE},
        controller=None,
        controller_epoch=0,
    ),
]


@pytest.mark.parametrize("value", VALUES, ids=lambda v: type(v).__name__)
def test_reply_values_round_trip(value: object) -> None:
    reply = raft_wire.decode_reply(only_frame(raft_wire.encode_reply(7, 0, value)))
    expected = tuple(value) if isinstance(value, list) else value
    assert (reply.correlation_id, reply.status, reply.body) == (7, 0, expected)


ERRORS: list[BaseException] = [
    SessionExpiredError(1, 2, None),
    BrokerIdInUseError(1, 5),
    FencedControllerError(3, 4),
    TopicExistsError("a.b", "a_b"),
    UnknownTopicError("t", 2),
    MustResyncError(1, 9),
    AdminQueueFullError(-1, 10),
    InvalidPartitionStateError("leader 1 not in ISR (2,)"),
    InvalidTopicError("bad name"),
    CoordinatorUnavailableError("busy"),
    ValueError("bad seq"),
]


@pytest.mark.parametrize("error", ERRORS, ids=lambda e: type(e).__name__)
def test_errors_round_trip_with_their_fields(error: BaseException) -> None:
    reply = raft_wire.decode_reply(only_frame(raft_wire.encode_reply(1, 1, error)))
    assert type(reply.body) is type(error)
    assert str(reply.body) == str(error)
    assert vars(reply.body) == vars(error)


def test_requests_redirects_and_unknowns() -> None:
    command = CasPartitionState(
        topic="t", partition=0, expected_partition_epoch=3, new_state=STATE, controller_epoch=2
    )
    for request in (command, GetSnapshot(), Watch(5, 100, 1000)):
        decoded = raft_wire.decode_request(only_frame(raft_wire.encode_request(9, 250, request)))
        assert decoded == raft_wire.RequestFrame(9, 250, request)
    redirect = raft_wire.decode_reply(only_frame(raft_wire.encode_reply(2, 2, "h:9093")))
    assert (redirect.status, redirect.body) == (raft_wire.Status.NOT_LEADER, "h:9093")
    nobody = raft_wire.decode_reply(only_frame(raft_wire.encode_reply(2, 2, None)))
    assert nobody.body is None
    unknown = raft_wire.decode_reply(only_frame(raft_wire.encode_reply(2, 3, "timed out")))
    assert (unknown.status, unknown.body) == (raft_wire.Status.UNKNOWN, "timed out")


def test_decoding_names_only_known_classes() -> None:
    for text in ('{"@": "Popen", "args": []}', '{"@e": "Signals", "v": 9}', '{"@x": "OSError"}'):
        with pytest.raises(ProtocolError):
            raft_codec.loads(text)
    with pytest.raises(ProtocolError):
        raft_codec.decode_error({"@x": "OSError", "a": []})
    with pytest.raises(ProtocolError):
        raft_wire.decode_reply(b"\x00\x00\x00\x01\x09null")
