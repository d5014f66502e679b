"""`BrokerRpcChannel` and its mapping of Kafka's answers onto the coordination contract."""

from __future__ import annotations

from pathlib import Path

import pytest

from replog.coord.errors import (
    BrokerIdInUseError,
    CoordinatorUnavailableError,
    SessionExpiredError,
)
from replog.errors import ErrorCode
from replog.metadata.types import SessionState
from replog.protocol.messages import (
    BrokerHeartbeatRequest,
    BrokerHeartbeatResponse,
    BrokerRegistrationResponse,
)
from replog.quorum.broker_channel import (
    BrokerRpcChannel,
    heartbeat_outcome,
    registered_broker,
    registration_request,
)
from replog.quorum.local import LocalQuorum


def test_a_registration_request_carries_the_contracts_arguments() -> None:
    request = registration_request(
        4, "h", 9092, "r", session_timeout_ms=700, clean_shutdown=False, fenced=True
    )
    listener = request.listeners[0]
    assert (request.broker_id, listener.host, listener.port, request.rack) == (4, "h", 9092, "r")
    assert (request.session_timeout_ms, request.unclean_shutdown, request.fenced) == (
        700,
        True,
        True,
    )
    other = registration_request(
        4, "h", 9092, "r", session_timeout_ms=700, clean_shutdown=True, fenced=False
    )
    assert other.incarnation_id != request.incarnation_id


def test_a_port_a_listener_cannot_carry_is_refused() -> None:
    with pytest.raises(ValueError):
        registration_request(
            4, "h", 70_000, None, session_timeout_ms=1, clean_shutdown=True, fenced=False
        )


def test_answers_become_the_contracts_values_and_errors() -> None:
    request = registration_request(
        4, "h", 9092, "r", session_timeout_ms=700, clean_shutdown=False, fenced=True
    )
    broker = registered_broker(request, BrokerRegistrationResponse(broker_epoch=17))
    assert (broker.broker_id, broker.incarnation_epoch, broker.fenced) == (4, 17, True)
    assert not broker.clean_shutdown and not broker.admitted
    duplicate = BrokerRegistrationResponse(
        error_code=ErrorCode.DUPLICATE_BROKER_REGISTRATION, holder_broker_epoch=9
    )
    with pytest.raises(BrokerIdInUseError) as in_use:
        registered_broker(request, duplicate)
    assert in_use.value.holder_incarnation_epoch == 9
    with pytest.raises(CoordinatorUnavailableError):
        registered_broker(
            request, BrokerRegistrationResponse(error_code=ErrorCode.REQUEST_TIMED_OUT)
        )

    beat = BrokerHeartbeatRequest(broker_id=4, broker_epoch=17)
    assert heartbeat_outcome(beat, BrokerHeartbeatResponse()) is SessionState.CONNECTED
    stale = BrokerHeartbeatResponse(
        error_code=ErrorCode.STALE_BROKER_EPOCH, current_broker_epoch=30
    )
    with pytest.raises(SessionExpiredError) as expired:
        heartbeat_outcome(beat, stale)
    assert (expired.value.incarnation_epoch, expired.value.current_incarnation_epoch) == (17, 30)
    gone = BrokerHeartbeatResponse(error_code=ErrorCode.BROKER_ID_NOT_REGISTERED)
    with pytest.raises(SessionExpiredError) as unknown:
        heartbeat_outcome(beat, gone)
    assert unknown.value.current_incarnation_epoch is None
    with pytest.raises(CoordinatorUnavailableError):
        heartbeat_outcome(beat, BrokerHeartbeatResponse(error_code=12345))


def test_the_channel_finds_the_active_controller_past_a_follower(tmp_path: Path) -> None:
    """Addresses listing a follower first: its NOT_CONTROLLER sends the call on, and the
    channel then keeps going to the leader."""
    with LocalQuorum.start(3, str(tmp_path / "quorum"), election_timeout_ms=150) as quorum:
        leader = quorum.wait_for_leader()
        order = sorted(quorum.configs, key=lambda i: i == leader)  # the leader last
        channel = BrokerRpcChannel([quorum.configs[i].address for i in order])
        try:
            request = registration_request(
                4, "h", 9092, None, session_timeout_ms=10_000, clean_shutdown=True, fenced=False
            )
            broker = channel.register(request, timeout_ms=5_000)
            state = channel.heartbeat(4, broker.incarnation_epoch, timeout_ms=5_000)
            assert state is SessionState.CONNECTED
        finally:
            channel.close()
        lonely = BrokerRpcChannel([quorum.configs[order[0]].address])  # a follower only
        try:
            with pytest.raises(CoordinatorUnavailableError, match="not the active controller"):
                lonely.heartbeat(4, 1, timeout_ms=300)
        finally:
            lonely.close()
