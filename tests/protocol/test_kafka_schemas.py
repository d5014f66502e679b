"""Every replog message schema against Kafka's own JSON message definitions.

Kafka's JSON schemas (clients/src/main/resources/common/message/*.json) ship with kafka-python 3
(``kafka/protocol/schemas/resources``). For every served API and every served version, the fields
replog puts on the wire must be Kafka's, in Kafka's order, with Kafka's wire type, nullability,
tag, default and ``ignorable`` flag; every field Kafka carries at that version must be there.
The few deliberate differences are listed in ``DEVIATIONS`` with the reason for each.
"""

from __future__ import annotations

import json
import re
import uuid
from importlib import resources
from typing import Any

import attrs
import pytest

from replog.protocol import APIS, ApiSpec
from replog.protocol.messages import CONTROLLER_APIS
from replog.protocol.primitives import ZERO_UUID
from replog.protocol.schema import ArrayOf, FieldSpec, Scalar, Versions

_RESOURCES = "kafka.protocol.schemas.resources"
_COMMENT = re.compile(r"(?m)^\s*//.*$")

#: (message name, field path) -> what differs, and why replog keeps it that way
DEVIATIONS: dict[tuple[str, str], str] = {
    # An empty list would mean "assign zero of the new partitions", which is an error; None lets
    # the broker place them, which is what a caller leaving the field out means.
    ("CreatePartitionsRequest", "topics.assignments"): "default None instead of []",
    # Kafka marks topic names ignorable because OffsetCommit v10 / OffsetFetch v10 name topics
    # by ID instead (KIP-848); replog serves up to v8, where every topic is named.
    ("OffsetCommitRequest", "topics.name"): "not ignorable below v10",
    ("OffsetCommitResponse", "topics.name"): "not ignorable below v10",
    ("OffsetFetchRequest", "groups.topics.name"): "not ignorable below v10",
    ("OffsetFetchResponse", "groups.topics.name"): "not ignorable below v10",
    # No message is sent as null (the field is nullable), which is what "no message" means.
    ("FindCoordinatorResponse", "error_message"): "default None instead of ''",
    ("FindCoordinatorResponse", "coordinators.error_message"): "default None instead of ''",
}


def kafka_schema(name: str) -> dict[str, Any]:
    """Kafka's JSON definition of message ``name`` (comments stripped), its ``commonStructs``
    written into the fields that use them, so they are audited like inline structs."""
    text = resources.files(_RESOURCES).joinpath(f"{name}.json").read_text()
    schema: dict[str, Any] = json.loads(_COMMENT.sub("", text))
    common = {s["name"]: s["fields"] for s in schema.get("commonStructs", [])}
    _inline_common(schema["fields"], common)
    return schema


def _inline_common(fields: list[dict[str, Any]], common: dict[str, Any]) -> None:
    for field in fields:
        struct = field["type"].removeprefix("[]")
        if "fields" not in field and struct in common:
            field["fields"] = common[struct]
        _inline_common(field.get("fields", []), common)


def _snake(name: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()


def _kafka_default(kafka: dict[str, Any], kind: str) -> object:
    """The default Kafka's generated code gives a field (its "default", else the type's zero)."""
    given = kafka.get("default")
    if given == "null":
        return None
    if kind in ("int8", "int16", "int32", "int64", "uint16", "uint32"):
        return int(str(given), 0) if given is not None else 0
    if kind == "float64":
        return float(str(given)) if given is not None else 0.0
    if kind == "bool":
        return given == "true"
    if kind == "string":
        return given if given is not None else ""
    if kind == "uuid":
        return ZERO_UUID if given is None else uuid.UUID(given)
    if kind == "bytes":
        return b""
    if kind == "records":
        return None
    return [] if kind.startswith("[]") else attrs.NOTHING  # structs: not compared


def _wire_type_name(type_: Any) -> str:
    if isinstance(type_, Scalar):
        return type_.value
    if isinstance(type_, ArrayOf):
        return "[]" + _wire_type_name(type_.item)
    return "struct"


def _kafka_type_name(kind: str) -> str:
    if kind.startswith("[]"):
        return "[]" + _kafka_type_name(kind[2:])
    return kind if kind[0].islower() else "struct"


def _replog_default(attribute: attrs.Attribute[Any]) -> object:
    default: Any = attribute.default
    if isinstance(default, attrs.Factory):  # type: ignore[arg-type]
        return default.factory()
    return default


def compare_struct(
    message: str, path: str, kafka_fields: list[dict[str, Any]], cls: type, version: int
) -> list[str]:
    """Differences between Kafka's ``kafka_fields`` and ``cls`` as both are at ``version``."""
    problems: list[str] = []
    ours = {a.name: a for a in attrs.fields(cls)}
    theirs = {_snake(f["name"]): f for f in kafka_fields}
    for name in ours.keys() - theirs.keys():
        problems.append(f"{path}{name}: not in Kafka's schema")
    present_ours = [n for n, a in ours.items() if version in a.metadata["wire"].versions]
    present_theirs = [n for n, f in theirs.items() if version in Versions.parse(f["versions"])]
    if present_ours != present_theirs:
        problems.append(f"{path}*: v{version} fields {present_ours} != Kafka's {present_theirs}")
    for name in ours.keys() & theirs.keys():
        problems += _compare_field(message, path, ours[name], theirs[name], version)
    return problems


def _compare_field(
    message: str, path: str, attribute: attrs.Attribute[Any], kafka: dict[str, Any], version: int
) -> list[str]:
    spec: FieldSpec = attribute.metadata["wire"]
    where = f"{path}{attribute.name}"
    if (message, where.rstrip(".")) in DEVIATIONS:
        return []
    problems: list[str] = []
    kind = kafka["type"]
    in_kafka = version in Versions.parse(kafka["versions"])
    if in_kafka != (version in spec.versions):
        return problems  # reported by the field-list comparison
    if _wire_type_name(spec.type) != _kafka_type_name(kind):
        problems.append(f"{where}: type {_wire_type_name(spec.type)} != Kafka's {kind}")
    if bool(kafka.get("ignorable", False)) != spec.ignorable:
        problems.append(f"{where}: ignorable={spec.ignorable}, Kafka's is {not spec.ignorable}")
    if in_kafka:
        nullable = version in Versions.parse(kafka.get("nullableVersions", "none"))
        if nullable != (version in spec.nullable):
            problems.append(f"{where}: nullable at v{version} differs from Kafka")
        tagged = version in Versions.parse(kafka.get("taggedVersions", "none"))
        if (kafka.get("tag") if tagged else None) != spec.tag:
            problems.append(f"{where}: tag {spec.tag} != Kafka's {kafka.get('tag')}")
    expected = _kafka_default(kafka, kind)
    if expected is not attrs.NOTHING and _replog_default(attribute) != expected:
        problems.append(f"{where}: default {_replog_default(attribute)!r} != Kafka's {expected!r}")
    item = spec.type.item if isinstance(spec.type, ArrayOf) else spec.type
    if isinstance(item, type) and "fields" in kafka:
        problems += compare_struct(message, f"{where}.", kafka["fields"], item, version)
    return problems


def _cases() -> list[tuple[ApiSpec, str, int]]:
    cases = []
    # DescribeQuorum is served by the quorum's port only (BrokerRegistration and BrokerHeartbeat,
    # with replog's tagged fields, have their own audit: test_broker_lifecycle_schemas.py).
    for spec in [*APIS.values(), CONTROLLER_APIS[55]]:
        for version in range(spec.info.min_version, spec.info.max_version + 1):
            cases.append((spec, "request", version))
            cases.append((spec, "response", version))
    return cases


CASES = _cases()

pytestmark = pytest.mark.filterwarnings(
    # importing kafka-python loads its schemas with the deprecated importlib.resources API
    "ignore:.*(read_text|open_text) is deprecated:DeprecationWarning"
)


@pytest.mark.parametrize("case", CASES, ids=[f"{c[0].info.name}-{c[1]}-v{c[2]}" for c in CASES])
def test_schema_matches_kafkas_json_at_every_served_version(case: tuple[ApiSpec, str, int]) -> None:
    spec, kind, version = case
    cls = spec.request if kind == "request" else spec.response
    kafka = kafka_schema(cls.__name__)
    assert kafka["apiKey"] == spec.info.api_key
    assert version in Versions.parse(kafka["validVersions"])
    if kafka["flexibleVersions"] == "none":  # replog says "from past the last version"
        assert spec.info.flexible_from > spec.info.max_version
    else:
        assert Versions.parse(kafka["flexibleVersions"]).low == spec.info.flexible_from
    assert compare_struct(cls.__name__, "", kafka["fields"], cls, version) == []


def test_the_audit_catches_a_field_marked_ignorable_that_kafka_does_not() -> None:
    fields = [{"name": "LeaderEpoch", "type": "int32", "versions": "4+", "default": "-1"}]

    @attrs.frozen(kw_only=True)
    class Partition:
        leader_epoch: int = attrs.field(
            default=-1,
            metadata={
                "wire": FieldSpec(Scalar.INT32, Versions.parse("4+"), Versions(0, -1), None, True)
            },
        )

    assert compare_struct("X", "", fields, Partition, 4) == [
        "leader_epoch: ignorable=True, Kafka's is False"
    ]
