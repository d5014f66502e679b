"""The compiled codec (``compiled._compiled_encoder`` / ``_compiled_decoder``) against the reference
interpreter it replaces (``interpreter._slow_encode_struct`` / ``_slow_decode_struct``): same bytes,
same decoded messages, for random messages of every API at every served version."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from replog.protocol import Message, Reader, RecordsRef, Writer
from replog.protocol.compiled import _compiled_decoder, _compiled_encoder
from replog.protocol.interpreter import _slow_decode_struct, _slow_encode_struct
from replog.protocol.messages import FetchResponse, FetchResponsePartition, FetchResponseTopic

from .strategies import all_versions, case_id, message_strategy

CASES = all_versions()


def _reference_bytes(message: Any, version: int) -> bytes:
    w = Writer()
    _slow_encode_struct(
        w, message, version, message.API.is_flexible(version), message.DROPS_IGNORABLE
    )
    return w.to_bytes()


@pytest.mark.parametrize("case", CASES, ids=[case_id(c) for c in CASES])
@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_compiled_codec_matches_the_interpreter(
    case: tuple[type[Message], int], data: st.DataObject
) -> None:
    cls, version = case
    flexible = cls.API.is_flexible(version)
    message = data.draw(message_strategy(cls, version))
    expected = _reference_bytes(message, version)

    w = Writer()
    _compiled_encoder(cls, version, flexible, cls.DROPS_IGNORABLE)(
        w, message
    )  # no fallback: it must not raise
    assert w.to_bytes() == expected
    assert message.encode(version) == expected

    decoded, position = _compiled_decoder(cls, version, flexible)(memoryview(expected), 0)
    assert position == len(expected)
    assert decoded == _slow_decode_struct(Reader(expected), cls, version, flexible)


def test_records_ref_parts_match_the_interpreter() -> None:
    ref = RecordsRef(size_bytes=200, source="segment")
    partition = FetchResponsePartition(
        partition_index=0, error_code=0, high_watermark=5, records=ref
    )
    message = FetchResponse(responses=[FetchResponseTopic(topic="t", partitions=[partition])])
    for version in (11, 12):
        compiled, reference = Writer(), Writer()
        compiled.write_int32(7)
        reference.write_int32(7)
        message.encode_into(compiled, version)
        _slow_encode_struct(
            reference, message, version, FetchResponse.API.is_flexible(version), True
        )
        assert compiled.parts() == reference.parts()
