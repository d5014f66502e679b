"""Hostile input: random bytes, truncated and mutated messages never raise anything but
ProtocolError (or decode to something)."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from replog.errors import ProtocolError
from replog.protocol import Message, RequestHeader, decode_request, encode_request
from replog.protocol.framing import decode_response

from .strategies import all_versions, case_id, message_strategy

CASES = all_versions()
FUZZ = settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@pytest.mark.parametrize("case", CASES, ids=[case_id(c) for c in CASES])
@FUZZ
@given(data=st.binary(max_size=200))
def test_random_bytes_decode_or_raise_protocol_error(
    case: tuple[type[Message], int], data: bytes
) -> None:
    cls, version = case
    try:
        cls.decode(data, version)
    except ProtocolError:
        pass


@pytest.mark.parametrize("case", CASES, ids=[case_id(c) for c in CASES])
@FUZZ
@given(data=st.data())
def test_truncated_or_mutated_bodies_raise_only_protocol_error(
    case: tuple[type[Message], int], data: st.DataObject
) -> None:
    cls, version = case
    encoded = data.draw(message_strategy(cls, version)).encode(version)
    # Decoding reads the same way whatever follows, so every strict prefix must fail.
    for cut in data.draw(st.lists(st.integers(0, len(encoded)), max_size=6)):
        if cut < len(encoded):
            with pytest.raises(ProtocolError):
                cls.decode(encoded[:cut], version)
    if not encoded:
        return
    mutated = bytearray(encoded)
    for _ in range(data.draw(st.integers(1, 4))):
        mutated[data.draw(st.integers(0, len(mutated) - 1))] = data.draw(st.integers(0, 255))
    try:
        cls.decode(bytes(mutated), version)
    except ProtocolError:
        pass


@settings(max_examples=500, deadline=None)
@given(frame=st.binary(max_size=300))
def test_random_request_frames_raise_only_protocol_error(frame: bytes) -> None:
    try:
        decode_request(frame)
    except ProtocolError:
        pass


@pytest.mark.parametrize("case", CASES[::2], ids=[case_id(c) for c in CASES[::2]])
@FUZZ
@given(body=st.binary(max_size=120), client_id=st.none() | st.text(max_size=5))
def test_served_header_with_random_body_raises_only_protocol_error(
    case: tuple[type[Message], int], body: bytes, client_id: str | None
) -> None:
    cls, version = case
    header = RequestHeader(
        api_key=cls.API.api_key, api_version=version, correlation_id=1, client_id=client_id
    )
    valid = encode_request(header, cls())
    head_bytes = len(valid) - len(cls().encode(version)) - 4
    try:
        decode_request(valid[4 : 4 + head_bytes] + body)
    except ProtocolError:
        pass


@pytest.mark.parametrize("case", CASES[::2], ids=[case_id(c) for c in CASES[::2]])
@FUZZ
@given(data=st.data())
def test_truncated_request_frames_raise_protocol_error(
    case: tuple[type[Message], int], data: st.DataObject
) -> None:
    cls, version = case
    request = data.draw(message_strategy(cls, version))
    header = RequestHeader(api_key=cls.API.api_key, api_version=version, correlation_id=9)
    frame = encode_request(header, request)[4:]
    assert decode_request(frame)[1] == request
    cut = data.draw(st.integers(0, len(frame) - 1))
    with pytest.raises(ProtocolError):
        decode_request(frame[:cut])


@settings(max_examples=200, deadline=None)
@given(frame=st.binary(max_size=200), version=st.integers(4, 12))
def test_random_fetch_response_frames_raise_only_protocol_error(frame: bytes, version: int) -> None:
    try:
        decode_response(frame, api_key=1, api_version=version)
    except ProtocolError:
        pass
