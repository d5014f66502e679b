"""The quorum node's Kafka-protocol side: BrokerRegistration (key 62), BrokerHeartbeat (key 63)
and ApiVersions (key 18), answered by the active controller -- the Raft leader (sans-IO; the
server does the IO).

Byte layout: Kafka's, unchanged (``replog.protocol.framing``)::

    request frame    size int32, request header (v2 for the flexible 62/63, v1 or v2 for
                     ApiVersions), then the body (``protocol.messages.broker_lifecycle``)
    response frame   size int32, correlation_id int32, then (62/63: response header v1) an
                     empty tagged-field buffer, then the body; ApiVersions: header v0

A connection is a Kafka one when its first frame is not the ``RLQ1`` hello (``quorum/wire.py``):
a request header starts with an api key, and ``RL`` read as an int16 is no api key.

Theory of operation. A request becomes one of the quorum's own requests, served by the
`QuorumFrontend` like any other, so the metadata log's records and the coordination contract are
the same whichever wire a broker uses:

- **BrokerRegistration** becomes ``RegisterBroker`` (a write): the first listener's host and
  port, the rack, replog's tagged session timeout / clean shutdown / fenced flags (absent: Kafka's
  default ``broker.session.timeout.ms``, a clean start, unfenced). The answer's ``broker_epoch`` is
  the offset the registration record was applied at -- the incarnation epoch, as in KRaft. A
  live registration of the same id is ``DUPLICATE_BROKER_REGISTRATION`` (its epoch in replog's
  tagged ``holder_broker_epoch``); a ``cluster_id`` that is not the quorum's is
  ``INCONSISTENT_CLUSTER_ID`` (an empty one is not checked: the broker does not know it yet).
- **BrokerHeartbeat** becomes the ``Heartbeat`` read: answered by the leader after its read
  barrier, and it renews the session's deadline there. A registration of another epoch is
  ``STALE_BROKER_EPOCH`` (with replog's tagged ``current_broker_epoch``), none at all
  ``BROKER_ID_NOT_REGISTERED`` (a session that expired ended its registration). ``is_fenced`` is
  the registration's flag; ``is_caught_up`` is Kafka's rule:
  the broker's ``current_metadata_offset`` reached its own registration record.
- A node that does not lead answers ``NOT_CONTROLLER`` (not executed: the caller tries another
  voter); a write whose outcome the node cannot tell, or a read that timed out,
  ``REQUEST_TIMED_OUT``.

**Fencing and controlled shutdown through the heartbeat.** A heartbeat answered OK whose
``want_fence`` / ``want_shut_down`` the registration does not reflect yet is followed by an
``UpdateBroker`` (``fenced`` / ``in_controlled_shutdown`` set: `follow_up`), the same write
``update_broker`` makes, so replog's controller moves the broker's leaderships away as for any
controlled shutdown. ``should_shut_down`` turns true once the registration is in controlled
shutdown and the broker leads no partition (a partition no other in-sync replica can take keeps
it false: the broker's own controlled-shutdown timeout ends the wait, as in Kafka). A heartbeat
never unfences: admission stays the controller's (``admit_broker``).

**DescribeQuorum** (key 55) is answered by the node itself from its Raft core
(`describe_quorum`): the leader gives its epoch, high watermark and each voter's log end and last
fetch / caught-up times (wall clock ms); a node that does not lead answers
NOT_LEADER_OR_FOLLOWER, so a tool asks the next voter. Only ``__cluster_metadata``-0 exists;
another partition is UNKNOWN_TOPIC_OR_PARTITION.

Kafka answers a connection's requests in order; `ReplyOrder` holds a reply until the ones
before it are out.
"""

from __future__ import annotations

import collections
from typing import Any

import attrs

from replog.coord.errors import BrokerIdInUseError, SessionExpiredError
from replog.errors import ErrorCode, ProtocolError
from replog.protocol.exceptions import EncodeError
from replog.protocol.framing import RequestHeader, response_header_version
from replog.protocol.messages import (
    API_VERSIONS,
    CONTROLLER_APIS,
    METADATA_TOPIC,
    ApiVersion,
    ApiVersionsResponse,
    BrokerHeartbeatRequest,
    BrokerHeartbeatResponse,
    BrokerRegistrationRequest,
    BrokerRegistrationResponse,
    DescribeQuorumPartitionData,
    DescribeQuorumReplicaState,
    DescribeQuorumRequest,
    DescribeQuorumResponse,
    DescribeQuorumTopicData,
)
from replog.protocol.messages.broker_lifecycle import SESSION_TIMEOUT_MS_DEFAULT
from replog.protocol.primitives import Reader, Writer
from replog.protocol.schema import Message
from replog.quorum import wire as raft_wire
from replog.quorum.commands import Heartbeat, RegisterBroker, UpdateBroker
from replog.quorum.frontend import Reply, ReplyError, ReplyNotLeader, ReplyOk, ReplyUnknown
from replog.quorum.machine import MetadataMachine

__all__ = [
    "KafkaCall",
    "QuorumView",
    "VoterView",
    "describe_quorum",
    "ReplyOrder",
    "answer",
    "decode_call",
    "encode_answer",
    "follow_up",
    "is_kafka_first_frame",
    "plan",
]


def is_kafka_first_frame(body: bytes) -> bool:
    """Whether a connection's first frame is a Kafka request rather than the RLQ1 hello."""
    return body[: len(raft_wire.MAGIC)] != raft_wire.MAGIC


@attrs.frozen
class KafkaCall:
    """One decoded Kafka request."""

    header: RequestHeader
    body: Message


def decode_call(body: bytes) -> KafkaCall:
    """A request frame's body (after the size prefix); ``ProtocolError`` for an API or version
    the quorum's port does not serve (Kafka closes the connection), or anything malformed. An
    ApiVersions request of an unknown version decodes with an empty body (answered with
    ``UNSUPPORTED_VERSION``, KIP-511)."""
    r = Reader(body)
    api_key, api_version, correlation_id = r.read_int16(), r.read_int16(), r.read_int32()
    spec = CONTROLLER_APIS.get(api_key)
    if spec is None:
        raise ProtocolError(f"api key {api_key} is not served on the quorum port")
    header = RequestHeader(api_key=api_key, api_version=api_version, correlation_id=correlation_id)
    if not spec.info.supports(api_version):
        if api_key == API_VERSIONS.api_key:
            return KafkaCall(header, spec.request())
        raise ProtocolError(f"{spec.info.name} v{api_version} is not served on the quorum port")
    client_id = r.read_nullable_string()
    if spec.info.is_flexible(api_version):
        r.skip_tagged_fields()
    header = attrs.evolve(header, client_id=client_id)
    return KafkaCall(header, spec.request.decode_prefix(r, api_version))


def plan(call: KafkaCall, machine: MetadataMachine) -> RegisterBroker | Heartbeat | Message:
    """What serves ``call``: the quorum request to hand the frontend, or the response itself
    when none is needed (ApiVersions, a refused registration)."""
    body = call.body
    if isinstance(body, BrokerRegistrationRequest):
        return _plan_registration(body, machine)
    if isinstance(body, BrokerHeartbeatRequest):
        return Heartbeat(body.broker_id, body.broker_epoch)
    if not API_VERSIONS.supports(call.header.api_version):
        return ApiVersionsResponse(
            error_code=ErrorCode.UNSUPPORTED_VERSION,
            api_keys=[_api_version(API_VERSIONS.api_key)],
        )
    return ApiVersionsResponse(
        error_code=ErrorCode.NONE, api_keys=[_api_version(k) for k in sorted(CONTROLLER_APIS)]
    )


def _api_version(api_key: int) -> ApiVersion:
    info = CONTROLLER_APIS[api_key].info
    return ApiVersion(api_key=api_key, min_version=info.min_version, max_version=info.max_version)


def _plan_registration(
    body: BrokerRegistrationRequest, machine: MetadataMachine
) -> RegisterBroker | Message:
    cluster_id = machine.cluster_id
    if body.cluster_id and cluster_id is not None and body.cluster_id != cluster_id:
        return BrokerRegistrationResponse(error_code=ErrorCode.INCONSISTENT_CLUSTER_ID)
    timeout_ms = body.session_timeout_ms
    if timeout_ms == -1:
        timeout_ms = SESSION_TIMEOUT_MS_DEFAULT
    if not body.listeners or body.broker_id < 0 or timeout_ms <= 0:
        return BrokerRegistrationResponse(error_code=ErrorCode.INVALID_REQUEST)
    listener = body.listeners[0]
    return RegisterBroker(
        broker_id=body.broker_id,
        host=listener.host,
        port=listener.port,
        rack=body.rack,
        session_timeout_ms=timeout_ms,
        clean_shutdown=not body.unclean_shutdown,
        fenced=body.fenced,
    )


def answer(call: KafkaCall, reply: Reply, machine: MetadataMachine) -> Message:
    """The response to ``call`` once the frontend answered its quorum request with ``reply``
    (``machine``: the leader's image, for the heartbeat's flags)."""
    if isinstance(reply, ReplyNotLeader | ReplyUnknown):
        code = (
            ErrorCode.NOT_CONTROLLER
            if isinstance(reply, ReplyNotLeader)
            else ErrorCode.REQUEST_TIMED_OUT
        )
        if isinstance(call.body, BrokerRegistrationRequest):
            return BrokerRegistrationResponse(error_code=code)
        return BrokerHeartbeatResponse(error_code=code)
    if isinstance(call.body, BrokerRegistrationRequest):
        return _registration_answer(reply)
    heartbeat = call.body
    if not isinstance(heartbeat, BrokerHeartbeatRequest):
        raise ProtocolError(f"no quorum request serves {type(heartbeat).__name__}")
    if isinstance(reply, ReplyError):
        error = reply.error
        current = getattr(error, "current_incarnation_epoch", None)
        return BrokerHeartbeatResponse(
            error_code=_heartbeat_error(error),
            current_broker_epoch=-1 if current is None else current,
        )
    registration = machine.registrations().get(heartbeat.broker_id)
    broker = None if registration is None else registration.broker
    shut_down = (
        heartbeat.want_shut_down
        and broker is not None
        and broker.in_controlled_shutdown
        and not machine.leads_partitions(heartbeat.broker_id)
    )
    return BrokerHeartbeatResponse(
        error_code=ErrorCode.NONE,
        is_caught_up=heartbeat.current_metadata_offset >= heartbeat.broker_epoch,
        is_fenced=broker is None or broker.fenced,
        should_shut_down=shut_down,
    )


def follow_up(call: KafkaCall, reply: Reply, machine: MetadataMachine) -> UpdateBroker | None:
    """The write a heartbeat answered OK asks for: fence the broker (``want_fence``), start its
    controlled shutdown (``want_shut_down``), or nothing when the registration already says so."""
    heartbeat = call.body
    if not isinstance(heartbeat, BrokerHeartbeatRequest) or not isinstance(reply, ReplyOk):
        return None
    registration = machine.registrations().get(heartbeat.broker_id)
    if registration is None or registration.broker.incarnation_epoch != heartbeat.broker_epoch:
        return None
    broker = registration.broker
    fence = heartbeat.want_fence and not broker.fenced
    shut_down = heartbeat.want_shut_down and not broker.in_controlled_shutdown
    if not (fence or shut_down):
        return None
    return UpdateBroker(
        broker_id=heartbeat.broker_id,
        incarnation_epoch=heartbeat.broker_epoch,
        fenced=True if fence else None,
        in_controlled_shutdown=True if shut_down else None,
    )


def _registration_answer(reply: ReplyOk | ReplyError) -> BrokerRegistrationResponse:
    if isinstance(reply, ReplyOk):
        epoch = getattr(reply.value, "incarnation_epoch", None)
        if not isinstance(epoch, int):
            raise ProtocolError(f"a registration applied as {reply.value!r}")
        return BrokerRegistrationResponse(error_code=ErrorCode.NONE, broker_epoch=epoch)
    error = reply.error
    if isinstance(error, BrokerIdInUseError):
        return BrokerRegistrationResponse(
            error_code=ErrorCode.DUPLICATE_BROKER_REGISTRATION,
            holder_broker_epoch=error.holder_incarnation_epoch,
        )
    return BrokerRegistrationResponse(error_code=_error_code(error))


def _heartbeat_error(error: BaseException) -> ErrorCode:
    if isinstance(error, SessionExpiredError):
        if error.current_incarnation_epoch is None:
            return ErrorCode.BROKER_ID_NOT_REGISTERED
        return ErrorCode.STALE_BROKER_EPOCH
    return _error_code(error)


def _error_code(error: BaseException) -> ErrorCode:
    if isinstance(error, ValueError):
        return ErrorCode.INVALID_REQUEST
    code: Any = getattr(error, "code", ErrorCode.UNKNOWN_SERVER_ERROR)
    return code if isinstance(code, ErrorCode) else ErrorCode.UNKNOWN_SERVER_ERROR


@attrs.frozen
class VoterView:
    """One voter as DescribeQuorum reports it (times: wall clock ms, -1 unknown)."""

    voter_id: int
    log_end_offset: int
    last_fetch_ms: int = -1
    last_caught_up_ms: int = -1


@attrs.frozen
class QuorumView:
    """What the leading node knows of the quorum."""

    leader_id: int
    epoch: int
    high_watermark: int
    voters: tuple[VoterView, ...]


def describe_quorum(request: DescribeQuorumRequest, view: QuorumView | None) -> Message:
    """The DescribeQuorum answer (module docstring); ``view`` None: this node does not lead."""
    if view is None:
        return DescribeQuorumResponse(error_code=ErrorCode.NOT_LEADER_OR_FOLLOWER)
    topics = []
    for topic in request.topics:
        partitions = []
        for part in topic.partitions:
            if topic.topic_name != METADATA_TOPIC or part.partition_index != 0:
                partitions.append(
                    DescribeQuorumPartitionData(
                        partition_index=part.partition_index,
                        error_code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                    )
                )
                continue
            partitions.append(
                DescribeQuorumPartitionData(
                    partition_index=0,
                    error_code=ErrorCode.NONE,
                    leader_id=view.leader_id,
                    leader_epoch=view.epoch,
                    high_watermark=view.high_watermark,
                    current_voters=[
                        DescribeQuorumReplicaState(
                            replica_id=v.voter_id,
                            log_end_offset=v.log_end_offset,
                            last_fetch_timestamp=v.last_fetch_ms,
                            last_caught_up_timestamp=v.last_caught_up_ms,
                        )
                        for v in view.voters
                    ],
                    observers=[],
                )
            )
        topics.append(DescribeQuorumTopicData(topic_name=topic.topic_name, partitions=partitions))
    return DescribeQuorumResponse(error_code=ErrorCode.NONE, topics=topics)


def encode_answer(call: KafkaCall, response: Message) -> bytes:
    """The framed response to ``call`` (header v0 for ApiVersions, v1 for flexible versions)."""
    header = call.header
    version = header.api_version
    if header.api_key == API_VERSIONS.api_key and not API_VERSIONS.supports(version):
        version = 0
    if response.API.api_key != header.api_key:
        raise EncodeError(f"{type(response).__name__} answering api key {header.api_key}")
    w = Writer()
    w.write_int32(header.correlation_id)
    if response_header_version(header.api_key, version) >= 1:
        w.write_empty_tagged_fields()
    response.encode_into(w, version)
    return raft_wire.frame(w.to_bytes())


class ReplyOrder:
    """A connection's replies in the order of its requests: `expect` each request as it
    arrives, `complete` it when answered; out come the frames that may be written now."""

    def __init__(self) -> None:
        self._next = 0
        self._waiting: collections.OrderedDict[int, bytes | None] = collections.OrderedDict()

    def expect(self) -> int:
        """A ticket for the next request, in arrival order."""
        ticket = self._next
        self._next += 1
        self._waiting[ticket] = None
        return ticket

    def complete(self, ticket: int, data: bytes) -> list[bytes]:
        """Record ``ticket``'s reply; the replies now ready, in order."""
        if ticket not in self._waiting:
            return []
        self._waiting[ticket] = data
        ready = []
        while self._waiting:
            first, frame = next(iter(self._waiting.items()))
            if frame is None:
                break
            del self._waiting[first]
            ready.append(frame)
        return ready
