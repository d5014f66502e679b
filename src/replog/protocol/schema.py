"""Declarative message schemas: each Kafka message is an attrs class whose fields say their wire
type and version range, and one interpreter here encodes and decodes them all.

Theory of operation. A message class is ``@attrs.frozen(kw_only=True)``; every attribute is made
with ``field(TYPE, "versions", ...)``, which stores a ``FieldSpec`` in the attrs metadata, in the
field order of Kafka's JSON schema (clients/src/main/resources/common/message/*.json). A type is a
``Scalar`` (``INT32``, ``STRING``, ``RECORDS``...), ``array(item)``, or another schema class (a
nested struct). The top-level request/response classes derive from ``Message`` and name their
``ApiInfo`` (api key, supported versions, first flexible version).

Rules, as Kafka's generated code applies them, for message version ``v``:

- a field whose ``versions`` exclude ``v`` is not on the wire and decodes to its default;
- encoding a non-default value in such a field raises ``EncodeError``. In a response, a field
  Kafka marks ``ignorable`` is dropped instead (the broker fills in what the newest version
  carries and an older client gets less, as Kafka's generated code does). A request never drops
  anything: its sender built it for the negotiated version, so a value that version cannot carry
  is a bug in the sender (a DeleteTopics v6 with ``topic_names`` would delete nothing), and
  Kafka's own request builders convert such fields before writing (``Request`` vs ``Response``);
- in flexible versions (``v >= flexible_from``) strings, bytes and arrays are compact and every
  struct ends with a tagged-field buffer; fields with a ``tag`` go there, in tag order, and only
  when they differ from their default (a ``None`` struct means "absent");
- unknown tags are skipped when decoding; a known tag must use exactly its announced size.

Encoding plans are computed once per (class, version) and cached.
"""

from __future__ import annotations

import enum
import operator
import struct
import uuid
from collections.abc import Callable
from typing import Any, ClassVar, Self

import attrs

from replog.errors import ProtocolError, invariant
from replog.protocol.exceptions import EncodeError
from replog.protocol.primitives import (
    _STRING_BYTES_MAX,
    ZERO_UUID,
    Buffer,
    Reader,
    RecordsRef,
    Writer,
)

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
    "Request",
    "Response",
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
    w: Writer,
    type_: WireType,
    value: Any,
    nullable: bool,
    version: int,
    flexible: bool,
    drop_ignorable: bool,
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
                _encode_value(w, type_.item, item, False, version, flexible, drop_ignorable)
            except EncodeError as e:
                raise _with_path(e, f"[{index}]") from None
    else:
        if value is None:
            raise EncodeError(f"null {type_.__name__} struct")
        _slow_encode_struct(w, value, version, flexible, drop_ignorable)


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


def _slow_encode_struct(
    w: Writer, obj: Any, version: int, flexible: bool, drop_ignorable: bool
) -> None:
    """The reference interpreter: reports errors with their field path (see ``encode_struct``)."""
    cls = type(obj)
    plan = _plan(cls, version, flexible)
    for name, spec, default in plan.absent:
        if getattr(obj, name) != default and not (drop_ignorable and spec.ignorable):
            why = "a request drops nothing" if spec.ignorable else "it is not ignorable"
            raise EncodeError(
                f"{cls.__name__}.{name} is not in version {version} and {why}, "
                f"but is set to {getattr(obj, name)!r}"
            )
    for f in plan.inline:
        try:
            _encode_value(
                w, f.spec.type, getattr(obj, f.name), f.nullable, version, flexible, drop_ignorable
            )
        except EncodeError as e:
            raise _with_path(e, f.name) from None
    if flexible:
        _encode_tagged(w, obj, plan, version, drop_ignorable)


def _encode_tagged(w: Writer, obj: Any, plan: _Plan, version: int, drop_ignorable: bool) -> None:
    fields: list[tuple[int, bytes]] = []
    for f in plan.tagged:
        value = getattr(obj, f.name)
        if value == f.default:
            continue
        sub = Writer()
        try:
            _encode_value(sub, f.spec.type, value, f.nullable, version, True, drop_ignorable)
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
    return _slow_decode_struct(r, type_, version, flexible)


def _slow_decode_struct(r: Reader, cls: type[Any], version: int, flexible: bool) -> Any:
    """The reference interpreter: reports errors with their field path (see ``decode_struct``)."""
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


# -- compiled codec ------------------------------------------------------------------------------
#
# The fast path. Per (class, version, flexible) the fields are compiled once into a list of
# closures, with runs of fixed-width scalars packed/unpacked by one precomputed ``struct.Struct``.
# It checks everything the interpreter checks but does not build error messages: on any failure
# the writer/reader is rewound and the interpreter above runs again, so errors (and their field
# paths) are exactly the interpreter's, and the bytes are the same by construction (tested
# against the interpreter in tests/protocol/test_compiled.py).

_EncodeOp = Callable[[Writer, Any], None]  # (writer, struct instance)
_ValueEncoder = Callable[[Writer, Any], None]  # (writer, field value)
_DecodeOp = Callable[[memoryview, int, dict[str, Any]], int]  # (buf, pos, kwargs) -> pos
_ValueDecoder = Callable[[memoryview, int], tuple[Any, int]]  # (buf, pos) -> (value, pos)

_FIXED_FORMATS: dict[Scalar, str] = {
    Scalar.INT8: "b",
    Scalar.INT16: "h",
    Scalar.INT32: "i",
    Scalar.INT64: "q",
    Scalar.UINT32: "I",
    Scalar.FLOAT64: "d",
}
_S_I16 = struct.Struct(">h")
_S_I32 = struct.Struct(">i")
_UVARINT_SMALL = [bytes((n,)) for n in range(0x80)]


class _Fallback(Exception):
    """Raised by the compiled path where the interpreter would raise; never escapes."""


def _uvarint(n: int) -> bytes:
    if n < 0x80:
        if n < 0:
            raise _Fallback
        return _UVARINT_SMALL[n]
    if n > 0xFFFFFFFF:
        raise _Fallback
    out = bytearray()
    while n > 0x7F:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def _read_uvarint(buf: memoryview, pos: int) -> tuple[int, int]:
    byte = buf[pos]  # IndexError past the end: the interpreter reports it
    if byte < 0x80:
        return byte, pos + 1
    value = byte & 0x7F
    shift = 7
    for _ in range(_UVARINT_BYTES_MAX - 1):
        pos += 1
        byte = buf[pos]
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            if value > 0xFFFFFFFF:
                raise _Fallback
            return value, pos + 1
        shift += 7
    raise _Fallback


_UVARINT_BYTES_MAX = 5


def _length_encoder(compact: bool, fmt: struct.Struct) -> Callable[[int], bytes]:
    if compact:
        return lambda n: _uvarint(n + 1)
    return fmt.pack


def _length_decoder(
    compact: bool, fmt: struct.Struct
) -> Callable[[memoryview, int], tuple[int, int]]:
    if compact:

        def compact_length(buf: memoryview, pos: int) -> tuple[int, int]:
            n, pos = _read_uvarint(buf, pos)
            return n - 1, pos

        return compact_length
    size = fmt.size
    unpack_from = fmt.unpack_from

    def classic_length(buf: memoryview, pos: int) -> tuple[int, int]:
        (n,) = unpack_from(buf, pos)
        if n < -1:
            raise _Fallback
        return n, pos + size

    return classic_length


def _value_encoder(
    type_: WireType, nullable: bool, version: int, flexible: bool, drop_ignorable: bool
) -> _ValueEncoder:
    if isinstance(type_, ArrayOf):
        return _array_encoder(type_, nullable, version, flexible, drop_ignorable)
    if not isinstance(type_, Scalar):
        return _nested_encoder(type_, version, flexible, drop_ignorable)
    if type_ is Scalar.STRING:
        string_length = _length_encoder(flexible, _S_I16)
        null_string = string_length(-1)

        def encode_string(w: Writer, value: Any) -> None:
            if value is None:
                if not nullable:
                    raise _Fallback
                w._buf += null_string
                return
            data = value.encode("utf-8")
            if len(data) > _STRING_BYTES_MAX:
                raise _Fallback
            buf = w._buf
            buf += string_length(len(data))
            buf += data

        return encode_string
    if type_ is Scalar.BYTES or type_ is Scalar.RECORDS:
        bytes_length = _length_encoder(flexible, _S_I32)
        null_bytes = bytes_length(-1)

        def encode_bytes(w: Writer, value: Any) -> None:
            if value is None:
                if not nullable:
                    raise _Fallback
                w._buf += null_bytes
            elif isinstance(value, RecordsRef):
                w.write_records_ref(value, compact=flexible)
            else:
                buf = w._buf
                buf += bytes_length(len(value))
                buf += value

        return encode_bytes
    if type_ is Scalar.BOOL:

        def encode_bool(w: Writer, value: Any) -> None:
            if value is None:
                raise _Fallback
            w._buf.append(1 if value else 0)

        return encode_bool
    if type_ is Scalar.UUID:

        def encode_uuid(w: Writer, value: Any) -> None:
            if value is None:
                raise _Fallback
            w._buf += value.bytes

        return encode_uuid
    pack = struct.Struct(">" + _FIXED_FORMATS[type_]).pack

    def encode_fixed(w: Writer, value: Any) -> None:
        w._buf += pack(value)

    return encode_fixed


def _array_encoder(
    type_: ArrayOf, nullable: bool, version: int, flexible: bool, drop_ignorable: bool
) -> _ValueEncoder:
    array_length = _length_encoder(flexible, _S_I32)
    null_array = array_length(-1)
    item_encoder = _value_encoder(type_.item, False, version, flexible, drop_ignorable)

    def encode_array(w: Writer, value: Any) -> None:
        if value is None:
            if not nullable:
                raise _Fallback
            w._buf += null_array
            return
        w._buf += array_length(len(value))
        for item in value:
            item_encoder(w, item)

    return encode_array


def _nested_encoder(cls: type, version: int, flexible: bool, drop_ignorable: bool) -> _ValueEncoder:
    def encode_nested(w: Writer, value: Any) -> None:
        if value is None:
            raise _Fallback
        _compiled_encoder(type(value), version, flexible, drop_ignorable)(w, value)

    return encode_nested


_ENCODERS: dict[tuple[type, int, bool, bool], _EncodeOp] = {}


def _compiled_encoder(cls: type, version: int, flexible: bool, drop_ignorable: bool) -> _EncodeOp:
    key = (cls, version, flexible, drop_ignorable)
    encoder = _ENCODERS.get(key)
    if encoder is None:
        encoder = _ENCODERS[key] = _compile_encoder(cls, version, flexible, drop_ignorable)
    return encoder


def _compile_encoder(cls: type, version: int, flexible: bool, drop_ignorable: bool) -> _EncodeOp:
    plan = _plan(cls, version, flexible)
    checks = tuple(
        (name, default)
        for name, spec, default in plan.absent
        if not (drop_ignorable and spec.ignorable)
    )
    ops: list[_EncodeOp] = []
    run: list[_PlannedField] = []

    def flush_run() -> None:
        if not run:
            return
        packer = struct.Struct(">" + "".join(_FIXED_FORMATS[f.spec.type] for f in run))  # type: ignore[index]
        if len(run) == 1:
            name = run[0].name

            def pack_one(w: Writer, obj: Any) -> None:
                w._buf += packer.pack(getattr(obj, name))

            ops.append(pack_one)
        else:
            getter = operator.attrgetter(*(f.name for f in run))

            def pack_run(w: Writer, obj: Any) -> None:
                w._buf += packer.pack(*getter(obj))

            ops.append(pack_run)
        run.clear()

    for f in plan.inline:
        if isinstance(f.spec.type, Scalar) and f.spec.type in _FIXED_FORMATS:
            run.append(f)
            continue
        flush_run()
        encoder = _value_encoder(f.spec.type, f.nullable, version, flexible, drop_ignorable)
        ops.append(_field_encoder(f.name, encoder))
    flush_run()
    tagged = tuple(
        (
            f.name,
            f.default,
            f.spec.tag or 0,
            _value_encoder(f.spec.type, f.nullable, version, True, drop_ignorable),
        )
        for f in plan.tagged
    )

    def encode(w: Writer, obj: Any) -> None:
        for name, default in checks:
            if getattr(obj, name) != default:
                raise _Fallback
        for op in ops:
            op(w, obj)
        if not flexible:
            return
        present = [t for t in tagged if getattr(obj, t[0]) != t[1]] if tagged else None
        if not present:
            w._buf.append(0)
            return
        parts = [_uvarint(len(present))]
        for name, _, tag, encoder in present:
            sub = Writer()
            encoder(sub, getattr(obj, name))
            if sub._parts:
                raise _Fallback
            payload = bytes(sub._buf)
            parts += (_uvarint(tag), _uvarint(len(payload)), payload)
        w._buf += b"".join(parts)

    return encode


def _field_encoder(name: str, encoder: _ValueEncoder) -> _EncodeOp:
    def encode_field(w: Writer, obj: Any) -> None:
        encoder(w, getattr(obj, name))

    return encode_field


def encode_struct(
    w: Writer, obj: Any, version: int, flexible: bool, *, drop_ignorable: bool
) -> None:
    """Append ``obj`` (an instance of a schema class) to ``w`` as encoded at ``version``; with
    ``drop_ignorable`` (responses) ignorable fields the version lacks are dropped, without it
    (requests) they raise like any other (see the module docstring)."""
    parts_count = len(w._parts)
    buf_size = len(w._buf)
    try:
        _compiled_encoder(type(obj), version, flexible, drop_ignorable)(w, obj)
        return
    except Exception:
        if len(w._parts) > parts_count:
            first = w._parts[parts_count]
            w._buf = bytearray(first if isinstance(first, bytes) else b"")
            del w._parts[parts_count:]
        del w._buf[buf_size:]
    _slow_encode_struct(w, obj, version, flexible, drop_ignorable)


def _value_decoder(type_: WireType, nullable: bool, version: int, flexible: bool) -> _ValueDecoder:
    if isinstance(type_, ArrayOf):
        return _array_decoder(type_, nullable, version, flexible)
    if not isinstance(type_, Scalar):
        return _compiled_decoder(type_, version, flexible)
    if type_ is Scalar.STRING or type_ is Scalar.BYTES or type_ is Scalar.RECORDS:
        is_text = type_ is Scalar.STRING
        read_length = _length_decoder(flexible, _S_I16 if is_text else _S_I32)

        def decode_sized(buf: memoryview, pos: int) -> tuple[Any, int]:
            n, pos = read_length(buf, pos)
            if n < 0:
                if not nullable:
                    raise _Fallback
                return None, pos
            stop = pos + n
            if stop > len(buf):
                raise _Fallback
            data = buf[pos:stop]
            return (str(data, "utf-8") if is_text else data), stop

        return decode_sized
    if type_ is Scalar.BOOL:

        def decode_bool(buf: memoryview, pos: int) -> tuple[Any, int]:
            return _I8.unpack_from(buf, pos)[0] != 0, pos + 1

        return decode_bool
    if type_ is Scalar.UUID:

        def decode_uuid(buf: memoryview, pos: int) -> tuple[Any, int]:
            stop = pos + 16
            if stop > len(buf):
                raise _Fallback
            return uuid.UUID(bytes=bytes(buf[pos:stop])), stop

        return decode_uuid
    fixed = struct.Struct(">" + _FIXED_FORMATS[type_])
    unpack_from = fixed.unpack_from
    size = fixed.size
    convert: Callable[[Any], Any] = float if type_ is Scalar.FLOAT64 else int

    def decode_fixed(buf: memoryview, pos: int) -> tuple[Any, int]:
        return convert(unpack_from(buf, pos)[0]), pos + size

    return decode_fixed


_I8 = struct.Struct(">b")


def _array_decoder(type_: ArrayOf, nullable: bool, version: int, flexible: bool) -> _ValueDecoder:
    read_length = _length_decoder(flexible, _S_I32)
    item_decoder = _value_decoder(type_.item, False, version, flexible)

    def decode_array(buf: memoryview, pos: int) -> tuple[Any, int]:
        count, pos = read_length(buf, pos)
        if count > len(buf) - pos:
            raise _Fallback
        if count < 0:
            if not nullable:
                raise _Fallback
            return None, pos
        items = []
        for _ in range(count):
            item, pos = item_decoder(buf, pos)
            items.append(item)
        return items, pos

    return decode_array


_DECODERS: dict[tuple[type, int, bool], _ValueDecoder] = {}


def _compiled_decoder(cls: type, version: int, flexible: bool) -> _ValueDecoder:
    key = (cls, version, flexible)
    decoder = _DECODERS.get(key)
    if decoder is None:
        # Placeholder first, so recursive schemas would find themselves.
        def deferred(buf: memoryview, pos: int) -> tuple[Any, int]:
            return _DECODERS[key](buf, pos)

        _DECODERS[key] = deferred
        decoder = _DECODERS[key] = _compile_decoder(cls, version, flexible)
    return decoder


def _compile_decoder(cls: type, version: int, flexible: bool) -> _ValueDecoder:
    plan = _plan(cls, version, flexible)
    ops: list[_DecodeOp] = []
    run: list[_PlannedField] = []

    def flush_run() -> None:
        if not run:
            return
        unpacker = struct.Struct(">" + "".join(_FIXED_FORMATS[f.spec.type] for f in run))  # type: ignore[index]
        names = tuple(f.name for f in run)
        size = unpacker.size
        unpack_from = unpacker.unpack_from
        floats = any(f.spec.type is Scalar.FLOAT64 for f in run)
        if floats:
            converters = tuple(float if f.spec.type is Scalar.FLOAT64 else int for f in run)

            def unpack_run_converted(buf: memoryview, pos: int, kw: dict[str, Any]) -> int:
                values = unpack_from(buf, pos)
                kw.update(
                    zip(names, (c(v) for c, v in zip(converters, values, strict=True)), strict=True)
                )
                return pos + size

            ops.append(unpack_run_converted)
        else:

            def unpack_run(buf: memoryview, pos: int, kw: dict[str, Any]) -> int:
                kw.update(zip(names, unpack_from(buf, pos), strict=True))
                return pos + size

            ops.append(unpack_run)
        run.clear()

    for f in plan.inline:
        if isinstance(f.spec.type, Scalar) and f.spec.type in _FIXED_FORMATS:
            run.append(f)
            continue
        flush_run()
        ops.append(
            _field_decoder(f.name, _value_decoder(f.spec.type, f.nullable, version, flexible))
        )
    flush_run()
    tagged = {
        f.spec.tag or 0: (f.name, _value_decoder(f.spec.type, f.nullable, version, True))
        for f in plan.tagged
    }

    def decode(buf: memoryview, pos: int) -> tuple[Any, int]:
        kw: dict[str, Any] = {}
        for op in ops:
            pos = op(buf, pos, kw)
        if flexible:
            if buf[pos] == 0:
                pos += 1
            else:
                pos = _decode_tagged(buf, pos, kw, tagged)
        return cls(**kw), pos

    return decode


def _decode_tagged(
    buf: memoryview, pos: int, kw: dict[str, Any], tagged: dict[int, tuple[str, _ValueDecoder]]
) -> int:
    count, pos = _read_uvarint(buf, pos)
    if count > len(buf) - pos:
        raise _Fallback
    for _ in range(count):
        tag, pos = _read_uvarint(buf, pos)
        size, pos = _read_uvarint(buf, pos)
        stop = pos + size
        if stop > len(buf):
            raise _Fallback
        known = tagged.get(tag)
        if known is not None:
            payload = buf[pos:stop]
            value, used = known[1](payload, 0)
            if used != size:
                raise _Fallback
            kw[known[0]] = value
        pos = stop
    return pos


def _field_decoder(name: str, decoder: _ValueDecoder) -> _DecodeOp:
    def decode_field(buf: memoryview, pos: int, kw: dict[str, Any]) -> int:
        kw[name], pos = decoder(buf, pos)
        return pos

    return decode_field


def decode_struct(r: Reader, cls: type[Any], version: int, flexible: bool) -> Any:
    """Read one ``cls`` (a schema class) at ``version`` from ``r``."""
    start = r._pos
    buf = r._buf
    if r._end == len(buf):
        try:
            obj, r._pos = _compiled_decoder(cls, version, flexible)(buf, start)
            return obj
        except Exception:
            r._pos = start
    return _slow_decode_struct(r, cls, version, flexible)


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
    """Base of request and response bodies: ``encode(version)`` / ``decode(data, version)``.
    Messages derive from ``Request`` or ``Response``, which differ in one encoding rule (see the
    module docstring): whether ignorable fields a version lacks are dropped or refused."""

    __slots__ = ()
    API: ClassVar[ApiInfo]
    #: drop ignorable fields the encoded version lacks (responses) instead of raising (requests)
    DROPS_IGNORABLE: ClassVar[bool]

    def encode_into(self, w: Writer, version: int) -> None:
        """Append this message's body, encoded at ``version``, to ``w``."""
        _check_version(self.API, version, EncodeError)
        try:
            encode_struct(
                w,
                self,
                version,
                self.API.is_flexible(version),
                drop_ignorable=self.DROPS_IGNORABLE,
            )
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
        message = cls.decode_prefix(r, version)
        try:
            r.expect_end(f"{cls.__name__} v{version}")
        except ProtocolError as e:
            raise _in_message(e, cls.__name__, version) from None
        return message

    @classmethod
    def decode_prefix(cls, r: Reader, version: int) -> Self:
        """Decode one body from ``r`` and leave whatever follows it unread (a broker reads a
        request this way: Kafka ignores bytes after a request's body)."""
        _check_version(cls.API, version, ProtocolError)
        try:
            message: Self = decode_struct(r, cls, version, cls.API.is_flexible(version))
        except ProtocolError as e:
            raise _in_message(e, cls.__name__, version) from None
        return message


class Request(Message):
    """A request body: encoding refuses any value its version cannot carry, ignorable or not."""

    __slots__ = ()
    DROPS_IGNORABLE = False


class Response(Message):
    """A response body: encoding drops ignorable fields its version lacks, as Kafka does."""

    __slots__ = ()
    DROPS_IGNORABLE = True
