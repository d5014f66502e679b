"""The fast codec: per (class, version, flexible) a schema's fields are compiled once into
closures, with runs of fixed-width scalars packed by one ``struct.Struct``; any failure falls
back to the interpreter (``replog.protocol.interpreter``) so errors are its own.
``encode_struct`` / ``decode_struct`` are the entry points."""

from __future__ import annotations

import operator
import struct
import uuid
from collections.abc import Callable
from typing import Any

from replog.protocol.fields import (
    ArrayOf,
    Scalar,
    WireType,
    _plan,
    _PlannedField,
)
from replog.protocol.fixed_layout import read_uvarint as _read_uvarint
from replog.protocol.fixed_layout import uvarint as _uvarint
from replog.protocol.interpreter import (
    _slow_decode_struct,
    _slow_encode_struct,
)
from replog.protocol.primitives import (
    _STRING_BYTES_MAX,
    Reader,
    RecordsRef,
    Writer,
)

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
    Scalar.UINT16: "H",
    Scalar.UINT32: "I",
    Scalar.FLOAT64: "d",
}
_S_I16 = struct.Struct(">h")
_S_I32 = struct.Struct(">i")


_FastEncoder = Callable[[Writer, Any], bool]  # (writer, message) -> written?
_FastDecoder = Callable[[memoryview, int], "tuple[Any, int] | None"]  # (buf, pos) -> (obj, pos)
#: hand-written codecs tried first for (class, version) (``replog.protocol.fetch_v12``); they
#: write or read nothing and answer False / None for whatever they leave to this codec
_FAST_ENCODERS: dict[tuple[type, int], _FastEncoder] = {}
_FAST_DECODERS: dict[tuple[type, int], _FastDecoder] = {}


def register_fast_codec(
    cls: type, version: int, encode: _FastEncoder, decode: _FastDecoder
) -> None:
    """Try ``encode`` / ``decode`` before the compiled codec for ``cls`` at ``version``: they
    must give the very bytes and values it gives, or decline."""
    _FAST_ENCODERS[(cls, version)] = encode
    _FAST_DECODERS[(cls, version)] = decode


class _Fallback(Exception):
    """Raised by the compiled path where the interpreter would raise; never escapes."""


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
    own: list[_EncodeOp] = []  # ``cls``'s encoder, compiled at first use (schemas may recurse)

    def encode_nested(w: Writer, value: Any) -> None:
        if type(value) is cls and own:
            own[0](w, value)
            return
        if value is None:
            raise _Fallback
        encoder = _compiled_encoder(type(value), version, flexible, drop_ignorable)
        if type(value) is cls:
            own.append(encoder)
        encoder(w, value)

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
        if flexible and isinstance(f.spec.type, ArrayOf):
            item_encoder = _value_encoder(
                f.spec.type.item, False, version, flexible, drop_ignorable
            )
            ops.append(_compact_array_field_encoder(f.name, encoder, item_encoder))
            continue
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


def _compact_array_field_encoder(
    name: str, encoder: _ValueEncoder, item_encoder: _ValueEncoder
) -> _EncodeOp:
    """``_field_encoder`` over a compact array's encoder in one call: a count under 0x7F (one
    length byte) is written inline, anything else (and null) by ``encoder``."""

    def encode_array_field(w: Writer, obj: Any) -> None:
        value = getattr(obj, name)
        if value is None or len(value) >= 0x7F:
            encoder(w, value)
            return
        w._buf.append(len(value) + 1)
        for item in value:
            item_encoder(w, item)

    return encode_array_field


def encode_struct(
    w: Writer, obj: Any, version: int, flexible: bool, *, drop_ignorable: bool
) -> None:
    """Append ``obj`` (an instance of a schema class) to ``w`` as encoded at ``version``; with
    ``drop_ignorable`` (responses) ignorable fields the version lacks are dropped, without it
    (requests) they raise like any other (see the module docstring)."""
    fast = _FAST_ENCODERS.get((type(obj), version))
    if fast is not None and fast(w, obj):
        return
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
        return _sized_decoder(type_ is Scalar.STRING, nullable, flexible)
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


def _sized_decoder(is_text: bool, nullable: bool, flexible: bool) -> _ValueDecoder:
    """A string's or byte string's decoder; a compact length under 0x80 (one byte) is read
    inline, anything else by ``_length_decoder``."""
    read_length = _length_decoder(flexible, _S_I16 if is_text else _S_I32)

    def decode_sized(buf: memoryview, pos: int) -> tuple[Any, int]:
        n = buf[pos] if flexible else -2  # IndexError past the end: the interpreter reports it
        if 0 < n < 0x80:
            n -= 1
            pos += 1
        else:
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


def _array_decoder(type_: ArrayOf, nullable: bool, version: int, flexible: bool) -> _ValueDecoder:
    read_length = _length_decoder(flexible, _S_I32)
    item_decoder = _value_decoder(type_.item, False, version, flexible)

    def decode_array(buf: memoryview, pos: int) -> tuple[Any, int]:
        count = buf[pos] if flexible else -2  # (as in decode_sized)
        if 0 < count < 0x80:
            count -= 1
            pos += 1
        else:
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
        type_ = f.spec.type
        if type_ is Scalar.STRING or type_ is Scalar.BYTES or type_ is Scalar.RECORDS:
            ops.append(_sized_field_decoder(f.name, type_ is Scalar.STRING, f.nullable, flexible))
            continue
        if isinstance(type_, ArrayOf):
            ops.append(_array_field_decoder(f.name, type_, f.nullable, version, flexible))
            continue
        ops.append(_field_decoder(f.name, _value_decoder(type_, f.nullable, version, flexible)))
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


def _array_field_decoder(
    name: str, type_: ArrayOf, nullable: bool, version: int, flexible: bool
) -> _DecodeOp:
    """``_field_decoder`` over ``_array_decoder`` in one call: a one-byte compact count is
    read inline, anything else by the array decoder."""
    decoder = _array_decoder(type_, nullable, version, flexible)
    if not flexible:
        return _field_decoder(name, decoder)
    item_decoder = _value_decoder(type_.item, False, version, flexible)

    def decode_array_field(buf: memoryview, pos: int, kw: dict[str, Any]) -> int:
        count = buf[pos] - 1  # IndexError past the end: the interpreter reports it
        if count < 0 or count >= 0x7F or count > len(buf) - pos - 1:
            kw[name], pos = decoder(buf, pos)
            return pos
        pos += 1
        items = []
        for _ in range(count):
            item, pos = item_decoder(buf, pos)
            items.append(item)
        kw[name] = items
        return pos

    return decode_array_field


def _sized_field_decoder(name: str, is_text: bool, nullable: bool, flexible: bool) -> _DecodeOp:
    """``_field_decoder`` over ``_sized_decoder`` in one call: a one-byte compact length (every
    string and small batch of a flexible request) is read inline, the rest by the value
    decoder."""
    decoder = _sized_decoder(is_text, nullable, flexible)
    if not flexible:
        return _field_decoder(name, decoder)

    def decode_sized_field(buf: memoryview, pos: int, kw: dict[str, Any]) -> int:
        n = buf[pos] - 1  # IndexError past the end: the interpreter reports it
        if n < 0 or n >= 0x7F:
            if n == -1 and nullable:  # a compact null
                kw[name] = None
                return pos + 1
            kw[name], pos = decoder(buf, pos)
            return pos
        pos += 1
        stop = pos + n
        if stop > len(buf):
            raise _Fallback
        kw[name] = str(buf[pos:stop], "utf-8") if is_text else buf[pos:stop]
        return stop

    return decode_sized_field


def decode_struct(r: Reader, cls: type[Any], version: int, flexible: bool) -> Any:
    """Read one ``cls`` (a schema class) at ``version`` from ``r``."""
    start = r._pos
    buf = r._buf
    if r._end == len(buf):
        fast = _FAST_DECODERS.get((cls, version))
        if fast is not None:
            found = fast(buf, start)
            if found is not None:
                obj, r._pos = found
                return obj
        try:
            obj, r._pos = _compiled_decoder(cls, version, flexible)(buf, start)
            return obj
        except Exception:
            r._pos = start
    return _slow_decode_struct(r, cls, version, flexible)
