"""The reference codec: encodes and decodes any schema class field by field, following its
plan, with precise errors that name the failing field path. The compiled codec
(``replog.protocol.compiled``) falls back to it on any failure, so errors are always these."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from replog.errors import ProtocolError
from replog.protocol.exceptions import EncodeError
from replog.protocol.fields import (
    ArrayOf,
    Scalar,
    WireType,
    _Plan,
    _plan,
)
from replog.protocol.primitives import (
    Reader,
    RecordsRef,
    Writer,
)

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
    Scalar.UINT16: Writer.write_uint16,
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
    Scalar.UINT16: Reader.read_uint16,
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
