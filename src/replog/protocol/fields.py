"""The building blocks of message schemas: wire types (``Scalar``, ``ArrayOf``), version
ranges, ``field()`` and its ``FieldSpec``, and the per-(class, version) encoding plan both
codecs follow. See ``replog.protocol.schema`` for the rules."""

from __future__ import annotations

import enum
from typing import Any

import attrs

from replog.errors import invariant
from replog.protocol.primitives import (
    ZERO_UUID,
    RecordsRef,
)

Records = bytes | bytearray | memoryview | RecordsRef[Any] | None
"""A records field: opaque record batches (zero-copy ``memoryview`` when decoded), a
``RecordsRef`` placeholder when encoding for ``sendfile``, or null."""


@attrs.frozen
class Versions:
    """An inclusive version range, parsed from Kafka's notation: "3+", "0-5", "7", "none"."""

    low: int
    high: int | None  # None: open-ended

    @classmethod
    def parse(cls, text: str) -> Versions:
        """Parse "N+", "N-M", "N" or "none"."""
        if text == "none":
            return cls(0, -1)
        if text.endswith("+"):
            return cls(int(text[:-1]), None)
        low, _, high = text.partition("-")
        return cls(int(low), int(high or low))

    def __contains__(self, version: object) -> bool:
        if not isinstance(version, int):
            return False
        return self.low <= version and (self.high is None or version <= self.high)


class Scalar(enum.Enum):
    """A wire type that is not an array or struct."""

    INT8 = "int8"
    INT16 = "int16"
    INT32 = "int32"
    INT64 = "int64"
    UINT16 = "uint16"
    UINT32 = "uint32"
    FLOAT64 = "float64"
    BOOL = "bool"
    UUID = "uuid"
    STRING = "string"
    BYTES = "bytes"
    RECORDS = "records"


INT8, INT16, INT32, INT64 = Scalar.INT8, Scalar.INT16, Scalar.INT32, Scalar.INT64
UINT16, UINT32 = Scalar.UINT16, Scalar.UINT32
FLOAT64, BOOL, UUID = Scalar.FLOAT64, Scalar.BOOL, Scalar.UUID
STRING, BYTES, RECORDS = Scalar.STRING, Scalar.BYTES, Scalar.RECORDS

_SCALAR_DEFAULTS: dict[Scalar, object] = {
    Scalar.INT8: 0,
    Scalar.INT16: 0,
    Scalar.INT32: 0,
    Scalar.INT64: 0,
    Scalar.UINT16: 0,
    Scalar.UINT32: 0,
    Scalar.FLOAT64: 0.0,
    Scalar.BOOL: False,
    Scalar.UUID: ZERO_UUID,
    Scalar.STRING: "",
    Scalar.BYTES: b"",
    Scalar.RECORDS: None,
}


@attrs.frozen
class ArrayOf:
    """An array of ``item`` (a scalar or a schema class)."""

    item: WireType


WireType = Scalar | ArrayOf | type


def array(item: WireType) -> ArrayOf:
    """The array type of ``item``."""
    return ArrayOf(item)


@attrs.frozen
class FieldSpec:
    """Wire metadata of one attribute (see the module docstring for the rules)."""

    type: WireType
    versions: Versions
    nullable: Versions
    tag: int | None
    ignorable: bool


def field(
    type_: WireType,
    versions: str = "0+",
    *,
    nullable: str = "none",
    tag: int | None = None,
    ignorable: bool = False,
    default: object = attrs.NOTHING,
) -> Any:
    """Declare a message attribute. Without ``default`` the Kafka default applies: 0, "", false,
    the zero UUID, an empty list for arrays, ``None`` for records and for (tagged) structs."""
    spec = FieldSpec(type_, Versions.parse(versions), Versions.parse(nullable), tag, ignorable)
    metadata = {"wire": spec}
    if default is not attrs.NOTHING:
        return attrs.field(default=default, metadata=metadata)
    if isinstance(type_, ArrayOf):
        return attrs.field(factory=list, metadata=metadata)
    if isinstance(type_, Scalar):
        return attrs.field(default=_SCALAR_DEFAULTS[type_], metadata=metadata)
    return attrs.field(default=None, metadata=metadata)


@attrs.frozen
class _PlannedField:
    name: str
    spec: FieldSpec
    nullable: bool
    default: object


@attrs.frozen
class _Plan:
    """The fields of one struct class at one version, split the way the wire needs them."""

    inline: tuple[_PlannedField, ...]
    tagged: tuple[_PlannedField, ...]  # ascending tag
    tagged_by_tag: dict[int, _PlannedField]
    absent: tuple[tuple[str, FieldSpec, object], ...]  # (name, spec, default) not in this version


_PLANS: dict[tuple[type, int, bool], _Plan] = {}


def _default_of(attribute: attrs.Attribute[Any]) -> object:
    default: Any = attribute.default
    if isinstance(default, attrs.Factory):  # type: ignore[arg-type]
        return default.factory()
    return default


def _plan(cls: type, version: int, flexible: bool) -> _Plan:
    key = (cls, version, flexible)
    plan = _PLANS.get(key)
    if plan is not None:
        return plan
    inline: list[_PlannedField] = []
    tagged: list[_PlannedField] = []
    absent: list[tuple[str, FieldSpec, object]] = []
    for attribute in attrs.fields(cls):
        spec: FieldSpec = attribute.metadata["wire"]
        if version not in spec.versions:
            absent.append((attribute.name, spec, _default_of(attribute)))
            continue
        planned = _PlannedField(
            attribute.name, spec, version in spec.nullable, _default_of(attribute)
        )
        if spec.tag is None:
            invariant(
                isinstance(spec.type, ArrayOf | Scalar) or not planned.nullable,
                f"{cls.__name__}.{attribute.name}: nullable structs are not supported",
            )
            inline.append(planned)
        else:
            invariant(flexible, f"{cls.__name__}.{attribute.name} tagged in a rigid version")
            tagged.append(planned)
    tagged.sort(key=lambda f: f.spec.tag or 0)
    plan = _Plan(tuple(inline), tuple(tagged), {f.spec.tag or 0: f for f in tagged}, tuple(absent))
    _PLANS[key] = plan
    return plan
