"""The simulated clients' wire: Kafka request frames over the simulated network.

``Rpc.call`` encodes a request body at the version a current client uses (``VERSIONS``), sends
the frame to a broker's ``SimBroker.on_frame`` over ``SimNetwork`` and decodes the answer
frame, so the simulator drives the product's request layer through the same codec as
kafka-python or librdkafka would. The callback gets the decoded response body, or None when the
connection closed or no answer came within the timeout (whichever happens first; a duplicated
answer is dropped). ``Rpc`` is handed what it uses: the network, the brokers by id and the
simulation's scheduler.

``ClientHost`` is what the simple clients (the metadata cache, the producer's idempotence) use of
the simulation: the shared ``SimCore``, the brokers' ids and the ``Rpc``.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Collection, Mapping
from typing import Any, Protocol

from replog.errors import ErrorCode
from replog.protocol import RequestHeader, decode_response, encode_request
from replog.protocol import messages as m
from replog.protocol.schema import Message, Request
from replog.simkit.net import SimNetwork
from replog.testing.sim_ports import SimCore

__all__ = [
    "VERSIONS",
    "ClientHost",
    "FrameReceiver",
    "Rpc",
    "code_of",
    "records_bytes",
    "request_frame",
]

VERSIONS: dict[type[Request], int] = {
    m.ProduceRequest: 9,
    m.FetchRequest: 12,
    m.MetadataRequest: 12,
    m.ListOffsetsRequest: 7,
    m.OffsetForLeaderEpochRequest: 4,
    m.DescribeConfigsRequest: 4,
    m.CreateTopicsRequest: 7,
    m.DeleteTopicsRequest: 6,
    m.CreatePartitionsRequest: 3,
    m.InitProducerIdRequest: 4,
    m.ElectLeadersRequest: 2,
    m.AlterPartitionReassignmentsRequest: 0,
    m.FindCoordinatorRequest: 4,
    m.JoinGroupRequest: 7,
    m.SyncGroupRequest: 5,
    m.HeartbeatRequest: 4,
    m.LeaveGroupRequest: 5,
    m.OffsetCommitRequest: 8,
    m.OffsetFetchRequest: 8,
}
"""The version the simulated clients send of each API (flexible versions where Kafka has them)."""

Answer = Callable[[Any], None]


class FrameReceiver(Protocol):
    """A node that takes request frames (``SimBroker.on_frame``)."""

    def on_frame(self, src: int, frame: bytes, reply: Callable[[bytes | None], None]) -> None:
        """A request frame from node ``src``; the answer frame goes to ``reply``."""


def request_frame(body: Message, version: int, correlation_id: int, client_id: str) -> bytes:
    """A request's framed payload (without the 4-byte size, as the network delivers it)."""
    header = RequestHeader(
        api_key=body.API.api_key,
        api_version=version,
        correlation_id=correlation_id,
        client_id=client_id,
    )
    return encode_request(header, body)[4:]


def code_of(value: int) -> ErrorCode:
    """An error code from the wire (an unknown one reads as UNKNOWN_SERVER_ERROR)."""
    try:
        return ErrorCode(value)
    except ValueError:
        return ErrorCode.UNKNOWN_SERVER_ERROR


def records_bytes(records: Any) -> bytes:
    """A fetch answer's records field as bytes (None and empty: no bytes)."""
    if isinstance(records, (bytes, bytearray, memoryview)):
        return bytes(records)
    return b""


class Rpc:
    """Sends requests from simulated client nodes to simulated brokers (``brokers``, by id)
    over ``net``; ``after`` schedules the timeouts."""

    def __init__(
        self,
        net: SimNetwork,
        brokers: Mapping[int, FrameReceiver],
        after: Callable[[int, Callable[[], None]], None],
    ) -> None:
        self._net = net
        self._brokers = brokers
        self._after = after
        self._correlation_ids = itertools.count(1)

    def call(
        self,
        node: int,
        broker_id: int,
        body: Request,
        on_answer: Answer,
        *,
        client_id: str,
        timeout_ms: int,
        duplicable: bool = True,
    ) -> None:
        """Send ``body`` from ``node`` to ``broker_id``; ``on_answer`` gets the decoded response
        body or None (closed or timed out), exactly once."""
        version = VERSIONS[type(body)]
        api_key = body.API.api_key
        frame = request_frame(body, version, next(self._correlation_ids), client_id)
        done = False

        def finish(answer: Any) -> None:
            nonlocal done
            if not done:
                done = True
                on_answer(answer)

        def reply(data: bytes | None) -> None:
            if data is None:
                finish(None)
            else:
                finish(decode_response(data, api_key=api_key, api_version=version)[1])

        target = self._brokers.get(broker_id)
        if target is not None:
            self._net.send(
                node,
                broker_id,
                lambda: target.on_frame(node, frame, reply),
                duplicable=duplicable,
            )
        self._after(timeout_ms, lambda: finish(None))


class ClientHost(SimCore, Protocol):
    """What the metadata cache and the producer's idempotence use of the simulation."""

    @property
    def brokers(self) -> Collection[int]:
        """The simulated brokers' ids."""

    @property
    def rpc(self) -> Rpc:
        """The clients' wire."""
