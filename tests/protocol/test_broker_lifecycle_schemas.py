"""BrokerRegistration (62) and BrokerHeartbeat (63): the schemas against Kafka's message
definitions, round trips at every served version, golden bytes, and replog's tagged fields.

kafka-python does not ship these two controller-listener schemas (tests/protocol/
test_kafka_schemas.py audits the rest against its copy), so Kafka's field lists are written out
below from BrokerRegistrationRequest/Response.json and BrokerHeartbeatRequest/Response.json."""

from __future__ import annotations

import uuid
from typing import Any

import attrs
import pytest

from replog.protocol import EncodeError
from replog.protocol.messages import (
    CONTROLLER_APIS,
    BrokerHeartbeatRequest,
    BrokerHeartbeatResponse,
    BrokerRegistrationFeature,
    BrokerRegistrationListener,
    BrokerRegistrationRequest,
    BrokerRegistrationResponse,
    supported_api_versions,
)
from replog.protocol.messages.broker_lifecycle import REPLOG_TAG_BASE
from replog.protocol.schema import ArrayOf, FieldSpec, Message, Scalar

#: Kafka's fields: (name, type, versions, tag or None, default)
KAFKA_FIELDS: dict[type, list[tuple[str, str, range, int | None, Any]]] = {
    BrokerRegistrationRequest: [
        ("broker_id", "int32", range(0, 5), None, 0),
        ("cluster_id", "string", range(0, 5), None, ""),
        ("incarnation_id", "uuid", range(0, 5), None, uuid.UUID(int=0)),
        ("listeners", "[]struct", range(0, 5), None, None),
        ("features", "[]struct", range(0, 5), None, None),
        ("rack", "string", range(0, 5), None, None),
        ("is_migrating_zk_broker", "bool", range(1, 5), None, False),
        ("log_dirs", "[]uuid", range(2, 5), None, None),
        ("previous_broker_epoch", "int64", range(3, 5), None, -1),
    ],
    BrokerRegistrationResponse: [
        ("throttle_time_ms", "int32", range(0, 5), None, 0),
        ("error_code", "int16", range(0, 5), None, 0),
        ("broker_epoch", "int64", range(0, 5), None, -1),
    ],
    BrokerHeartbeatRequest: [
        ("broker_id", "int32", range(0, 2), None, 0),
        ("broker_epoch", "int64", range(0, 2), None, -1),
        ("current_metadata_offset", "int64", range(0, 2), None, 0),
        ("want_fence", "bool", range(0, 2), None, False),
        ("want_shut_down", "bool", range(0, 2), None, False),
        ("offline_log_dirs", "[]uuid", range(1, 2), 0, None),
    ],
    BrokerHeartbeatResponse: [
        ("throttle_time_ms", "int32", range(0, 2), None, 0),
        ("error_code", "int16", range(0, 2), None, 0),
        ("is_caught_up", "bool", range(0, 2), None, False),
        ("is_fenced", "bool", range(0, 2), None, True),
        ("should_shut_down", "bool", range(0, 2), None, False),
    ],
}
LISTENER = [
    ("name", "string"),
    ("host", "string"),
    ("port", "uint16"),
    ("security_protocol", "int16"),
]
FEATURE = [
    ("name", "string"),
    ("min_supported_version", "int16"),
    ("max_supported_version", "int16"),
]


def _type_name(type_: Any) -> str:
    if isinstance(type_, Scalar):
        return type_.value
    if isinstance(type_, ArrayOf):
        return "[]" + _type_name(type_.item)
    return "struct"


def _kafka_fields_at(cls: type, version: int) -> list[tuple[str, str, int | None, Any]]:
    """replog's fields of ``cls`` at ``version``, without replog's own tagged ones."""
    present = []
    for a in attrs.fields(cls):
        spec: FieldSpec = a.metadata["wire"]
        if version not in spec.versions or (spec.tag or 0) >= REPLOG_TAG_BASE:
            continue
        default = None if isinstance(a.default, attrs.Factory) else a.default  # type: ignore[arg-type]
        present.append((a.name, _type_name(spec.type), spec.tag, default))
    return present


CASES = [
    (cls, version)
    for cls in KAFKA_FIELDS
    for version in range(cls.API.min_version, cls.API.max_version + 1)
]


@pytest.mark.parametrize("case", CASES, ids=[f"{c[0].__name__}-v{c[1]}" for c in CASES])
def test_fields_are_kafkas_at_every_served_version(case: tuple[type, int]) -> None:
    cls, version = case
    expected = [
        (name, kind, tag, default)
        for name, kind, versions, tag, default in KAFKA_FIELDS[cls]
        if version in versions
    ]
    assert _kafka_fields_at(cls, version) == expected


def test_nested_structs_are_kafkas() -> None:
    for cls, fields in (
        (BrokerRegistrationListener, LISTENER),
        (BrokerRegistrationFeature, FEATURE),
    ):
        ours = [(a.name, _type_name(a.metadata["wire"].type)) for a in attrs.fields(cls)]
        assert ours == fields


def test_both_apis_are_flexible_from_v0_and_not_served_on_a_brokers_port() -> None:
    for key in (62, 63):
        assert CONTROLLER_APIS[key].info.flexible_from == 0
        assert key not in {v.api_key for v in supported_api_versions()}


def _registration(**changes: Any) -> BrokerRegistrationRequest:
    request = BrokerRegistrationRequest(
        broker_id=3,
        cluster_id="c1",
        incarnation_id=uuid.UUID(int=7),
        listeners=[
            BrokerRegistrationListener(name="PLAINTEXT", host="h", port=65535, security_protocol=0)
        ],
        features=[
            BrokerRegistrationFeature(
                name="metadata.version", min_supported_version=1, max_supported_version=20
            )
        ],
        rack="r",
    )
    return attrs.evolve(request, **changes)


SAMPLES: list[tuple[Message, range]] = [
    (_registration(session_timeout_ms=300, unclean_shutdown=True, fenced=True), range(0, 5)),
    (_registration(is_migrating_zk_broker=True), range(1, 5)),
    (_registration(log_dirs=[uuid.UUID(int=9)]), range(2, 5)),
    (_registration(previous_broker_epoch=41), range(3, 5)),
    (BrokerRegistrationResponse(error_code=101, holder_broker_epoch=12), range(0, 5)),
    (BrokerRegistrationResponse(broker_epoch=12), range(0, 5)),
    (
        BrokerHeartbeatRequest(
            broker_id=3,
            broker_epoch=12,
            current_metadata_offset=40,
            want_fence=True,
            want_shut_down=True,
        ),
        range(0, 2),
    ),
    (BrokerHeartbeatRequest(broker_id=3, offline_log_dirs=[uuid.UUID(int=1)]), range(1, 2)),
    (BrokerHeartbeatResponse(error_code=77, is_fenced=True, current_broker_epoch=30), range(0, 2)),
    (
        BrokerHeartbeatResponse(is_caught_up=True, is_fenced=False, should_shut_down=True),
        range(0, 2),
    ),
]


@pytest.mark.parametrize(
    "sample", SAMPLES, ids=[f"{type(s[0]).__name__}-{i}" for i, s in enumerate(SAMPLES)]
)
def test_round_trips(sample: tuple[Message, range]) -> None:
    message, versions = sample
    for version in versions:
        assert type(message).decode(message.encode(version), version) == message


def test_a_field_newer_than_the_version_is_an_encode_error() -> None:
    with pytest.raises(EncodeError):
        _registration(previous_broker_epoch=41).encode(2)
    with pytest.raises(EncodeError):
        BrokerHeartbeatRequest(broker_id=3, offline_log_dirs=[uuid.UUID(int=1)]).encode(0)


def test_heartbeat_v0_golden_bytes() -> None:
    """broker id, epoch, metadata offset, want fence, want shut down, no tagged fields."""
    request = BrokerHeartbeatRequest(
        broker_id=1,
        broker_epoch=2,
        current_metadata_offset=3,
        want_fence=False,
        want_shut_down=True,
    )
    assert request.encode(0) == bytes.fromhex("0000000100000000000000020000000000000003000100")
    response = BrokerHeartbeatResponse(is_caught_up=True, is_fenced=False)
    assert response.encode(0) == bytes.fromhex("00000000000001000000")


def test_registration_v0_golden_bytes_with_a_replog_tag() -> None:
    """Compact strings and arrays, a uint16 port, a nullable rack, and replog's session timeout
    as tag 10000 (uvarint 0x90 0x4e) of 4 bytes."""
    request = BrokerRegistrationRequest(
        broker_id=1,
        cluster_id="c",
        incarnation_id=uuid.UUID(int=0),
        listeners=[BrokerRegistrationListener(name="P", host="h", port=9092, security_protocol=0)],
        features=[],
        rack=None,
        session_timeout_ms=500,
    )
    assert request.encode(0) == bytes.fromhex(
        "000000010263" + "00" * 16 + "02025002682384000000010001904e04000001f4"
    )


def test_replog_tags_are_skipped_by_a_reader_that_does_not_know_them() -> None:
    """A stock Kafka reader knows no tag 10000: the same bytes without it decode to the
    defaults, and with it everything Kafka has is unchanged."""
    plain = _registration()
    tagged = _registration(session_timeout_ms=300, unclean_shutdown=True, fenced=True)
    decoded = BrokerRegistrationRequest.decode(tagged.encode(4), 4)
    assert (
        attrs.evolve(decoded, session_timeout_ms=-1, unclean_shutdown=False, fenced=False) == plain
    )
    assert BrokerRegistrationRequest.decode(plain.encode(4), 4).session_timeout_ms == -1
