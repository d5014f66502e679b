"""Declarative message schemas: each Kafka message is an attrs class whose fields say their wire
type and version range, and one interpreter here encodes and decodes them all.

Theory of operation. A message class is ``@attrs.frozen(kw_only=True)``; every attribute is made
with ``field(TYPE, "versions", ...)``, which stores a ``FieldSpec`` in the attrs metadata, in the
field order of Kafka's JSON schema (clients/src/main/resources/common/message/*.json). A type is a
``Scalar`` (``INT32``, ``STRING``, ``RECORDS``...), ``array(item)``, or another schema class (a
nested struct). The top-level request/response classes derive from ``Message`` and name their
``ApiInfo`` (api key, supported versions, first flexible version).

Rules, as Kafka's generated code applies them, for message version ``v``:

- a field whose ``versions`` exclude ``v`` is not on the wire and decodes to its default; encoding
  a non-default value there raises ``EncodeError`` unless the field is ``ignorable``;
- in flexible versions (``v >= flexible_from``) strings, bytes and arrays are compact and every
  struct ends with a tagged-field buffer; fields with a ``tag`` go there, in tag order, and only
  when they differ from their default (a ``None`` struct means "absent");
- unknown tags are skipped when decoding; a known tag must use exactly its announced size.

Encoding plans are computed once per (class, version) and cached.
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from typing import Any, ClassVar, Self

import attrs

from replog.errors import ProtocolError, invariant
from replog.protocol.exceptions import EncodeError
from replog.protocol.primitives import ZERO_UUID, Buffer, Reader, RecordsRef, Writer

__all__ = [
    "BOOL",
    "BYTES",
    "FLOAT64",
    "INT8",
    "INT16",
    "INT32",
    "INT64",
    "RECORDS",
    "STRING",
    "UINT32",
    "UUID",
    "ApiInfo",
    "ArrayOf",
    "FieldSpec",
    "Message",
    "Records",
    "Scalar",
    "Versions",
    "array",
    "decode_struct",
    "encode_struct",
    "field",
]

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
    UINT32 = "uint32"
    FLOAT64 = "float64"
    BOOL = "bool"
    UUID = "uuid"
    STRING = "string"
    BYTES = "bytes"
    RECORDS = "records"


INT8, INT16, INT32, INT64 = Scalar.INT8, Scalar.INT16, Scalar.INT32, Scalar.INT64
UINT32, FLOAT64, BOOL, UUID = Scalar.UINT32, Scalar.FLOAT64, Scalar.BOOL, Scalar.UUID
STRING, BYTES, RECORDS = Scalar.STRING, Scalar.BYTES, Scalar.RECORDS

_SCALAR_DEFAULTS: dict[Scalar, object] = {
    Scalar.INT8: 0,
    Scalar.INT16: 0,
    Scalar.INT32: 0,
    Scalar.INT64: 0,
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


# -- encoding -----------------------------------------------------------------------------------


def _encode_scalar(w: Writer, kind: Scalar, value: Any, nullable: bool, compact: bool) -> None:
    if kind is Scalar.STRING:
        if value is None and not nullable:
            raise EncodeError("null string in a non-nullable field")
        w.write_nullable_string(value, compact=compact)
    elif kind is Scalar.BYTES or kind is Scalar.RECORDS:
        if value is None and not nullable:
            raise EncodeError("null bytes in a non-nullable field")
        if isinstance(value, RecordsRef):
            w.write_records_ref(value, compact=compact)
        else:
            w.write_nullable_bytes(value, compact=compact)
    elif value is None:
        raise EncodeError(f"null {kind.value}")
    else:
        _SCALAR_WRITERS[kind](w, value)


_SCALAR_WRITERS: dict[Scalar, Callable[[Writer, Any], None]] = {
    Scalar.INT8: Writer.write_int8,
    Scalar.INT16: Writer.write_int16,
    Scalar.INT32: Writer.write_int32,
    Scalar.INT64: Writer.write_int64,
    Scalar.UINT32: Writer.write_uint32,
    Scalar.FLOAT64: Writer.write_float64,
    Scalar.BOOL: Writer.write_bool,
    Scalar.UUID: Writer.write_uuid,
}


def _encode_value(
    w: Writer, type_: WireType, value: Any, nullable: bool, version: int, flexible: bool
) -> None:
    if isinstance(type_, Scalar):
        _encode_scalar(w, type_, value, nullable, flexible)
    elif isinstance(type_, ArrayOf):
        if value is None:
            if not nullable:
                raise EncodeError("null array in a non-nullable field")
            w.write_array_length(None, compact=flexible)
            return
        w.write_array_length(len(value), compact=flexible)
        for index, item in enumerate(value):
            try:
                _encode_value(w, type_.item, item, False, version, flexible)
            except EncodeError as e:
                raise _with_path(e, f"[{index}]") from None
    else:
        if value is None:
            raise EncodeError(f"null {type_.__name__} struct")
        encode_struct(w, value, version, flexible)


def _with_path(error: Exception, step: str) -> Exception:
    """Prefix the field path of ``error`` with ``step`` ("topics", "[3]"), so the message reads
    "topics[3].partitions[0].fetch_offset: truncated int64 ..."."""
    detail = getattr(error, "_wire_detail", None)
    if detail is None:
        detail = str(error.args[0]) if error.args else type(error).__name__
        setattr(error, "_wire_detail", detail)  # noqa: B010 - not a declared attribute
    path = str(getattr(error, "_wire_path", ""))
    path = f"{step}{'' if not path or path.startswith('[') else '.'}{path}"
    setattr(error, "_wire_path", path)  # noqa: B010
    error.args = (f"{path}: {detail}",)
    return error


def _in_message(error: Exception, name: str, version: int) -> Exception:
    """Prefix the message with the top-level message name and version."""
    error.args = (f"{name} v{version}: {error.args[0] if error.args else ''}",)
    return error


def encode_struct(w: Writer, obj: Any, version: int, flexible: bool) -> None:
    """Append ``obj`` (an instance of a schema class) to ``w`` as encoded at ``version``."""
    cls = type(obj)
    plan = _plan(cls, version, flexible)
    for name, spec, default in plan.absent:
        if not spec.ignorable and getattr(obj, name) != default:
            raise EncodeError(
                f"{cls.__name__}.{name} is not in version {version} and is not ignorable, "
                f"but is set to {getattr(obj, name)!r}"
            )
    for f in plan.inline:
        try:
            _encode_value(w, f.spec.type, getattr(obj, f.name), f.nullable, version, flexible)
        except EncodeError as e:
            raise _with_path(e, f.name) from None
    if flexible:
        _encode_tagged(w, obj, plan, version)


def _encode_tagged(w: Writer, obj: Any, plan: _Plan, version: int) -> None:
    fields: list[tuple[int, bytes]] = []
    for f in plan.tagged:
        value = getattr(obj, f.name)
        if value == f.default:
            continue
        sub = Writer()
        try:
            _encode_value(sub, f.spec.type, value, f.nullable, version, True)
        except EncodeError as e:
            raise _with_path(e, f.name) from None
        fields.append((f.spec.tag or 0, sub.to_bytes()))
    w.write_tagged_fields(fields)


# -- decoding -----------------------------------------------------------------------------------


_SCALAR_READERS: dict[Scalar, Callable[[Reader], Any]] = {
    Scalar.INT8: Reader.read_int8,
    Scalar.INT16: Reader.read_int16,
    Scalar.INT32: Reader.read_int32,
    Scalar.INT64: Reader.read_int64,
    Scalar.UINT32: Reader.read_uint32,
    Scalar.FLOAT64: Reader.read_float64,
    Scalar.BOOL: Reader.read_bool,
    Scalar.UUID: Reader.read_uuid,
}


def _decode_value(r: Reader, type_: WireType, nullable: bool, version: int, flexible: bool) -> Any:
    if isinstance(type_, Scalar):
        if type_ is Scalar.STRING:
            if nullable:
                return r.read_nullable_string(compact=flexible)
            return r.read_string(compact=flexible)
        if type_ is Scalar.BYTES or type_ is Scalar.RECORDS:
            if nullable:
                return r.read_nullable_bytes(compact=flexible)
            return r.read_bytes(compact=flexible)
        return _SCALAR_READERS[type_](r)
    if isinstance(type_, ArrayOf):
        count = r.read_array_length(compact=flexible)
        if count < 0:
            if not nullable:
                raise ProtocolError("null array in a non-nullable field")
            return None
        items = []
        for index in range(count):
            try:
                items.append(_decode_value(r, type_.item, False, version, flexible))
            except ProtocolError as e:
                raise _with_path(e, f"[{index}]") from None
        return items
    return decode_struct(r, type_, version, flexible)


def decode_struct(r: Reader, cls: type[Any], version: int, flexible: bool) -> Any:
    """Read one ``cls`` (a schema class) at ``version`` from ``r``."""
    plan = _plan(cls, version, flexible)
    values: dict[str, Any] = {}
    for f in plan.inline:
        try:
            values[f.name] = _decode_value(r, f.spec.type, f.nullable, version, flexible)
        except ProtocolError as e:
            raise _with_path(e, f.name) from None
    if flexible:
        for tag, payload in r.read_tagged_fields():
            known = plan.tagged_by_tag.get(tag)
            if known is None:
                continue  # a newer peer's field: skip it, as Kafka does
            sub = Reader(payload)
            try:
                value = _decode_value(sub, known.spec.type, known.nullable, version, True)
                values[known.name] = value
                sub.expect_end(f"tagged field {tag}")
            except ProtocolError as e:
                raise _with_path(e, known.name) from None
    return cls(**values)


# -- top-level messages -------------------------------------------------------------------------


@attrs.frozen
class ApiInfo:
    """One API: its key, the versions replog serves, and the first flexible version."""

    api_key: int
    name: str
    min_version: int
    max_version: int
    flexible_from: int

    def supports(self, version: int) -> bool:
        """Whether replog serves ``version`` of this API."""
        return self.min_version <= version <= self.max_version

    def is_flexible(self, version: int) -> bool:
        """Whether ``version`` uses compact encodings and tagged fields."""
        return version >= self.flexible_from


def _check_version(api: ApiInfo, version: int, error: type[Exception]) -> None:
    if not api.supports(version):
        raise error(
            f"{api.name} v{version} is not supported "
            f"(replog serves v{api.min_version}-v{api.max_version})"
        )


class Message:
    """Base of request and response bodies: ``encode(version)`` / ``decode(data, version)``."""

    __slots__ = ()
    API: ClassVar[ApiInfo]

    def encode_into(self, w: Writer, version: int) -> None:
        """Append this message's body, encoded at ``version``, to ``w``."""
        _check_version(self.API, version, EncodeError)
        try:
            encode_struct(w, self, version, self.API.is_flexible(version))
        except EncodeError as e:
            raise _in_message(e, type(self).__name__, version) from None

    def encode(self, version: int) -> bytes:
        """The body encoded at ``version`` (records must be bytes, not ``RecordsRef``)."""
        w = Writer()
        self.encode_into(w, version)
        return w.to_bytes()

    @classmethod
    def decode(cls, data: Buffer, version: int) -> Self:
        """Decode a whole body at ``version``; trailing bytes are an error. Records fields come
        back as zero-copy ``memoryview`` slices of ``data``."""
        return cls.decode_from(Reader(data), version)

    @classmethod
    def decode_from(cls, r: Reader, version: int) -> Self:
        """Decode the body from the rest of ``r``, which must hold exactly one body."""
        _check_version(cls.API, version, ProtocolError)
        try:
            message: Self = decode_struct(r, cls, version, cls.API.is_flexible(version))
            r.expect_end(f"{cls.__name__} v{version}")
        except ProtocolError as e:
            raise _in_message(e, cls.__name__, version) from None
        return message
