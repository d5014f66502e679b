"""Kafka wire primitives: a bounds-checked ``Reader`` and a ``Writer``.

Byte layouts (all integers big-endian, two's complement):

    int8/int16/int32/int64   1/2/4/8 bytes;  uint16/uint32: 2/4 bytes unsigned
    bool                     int8, non-zero = true
    uuid                     16 bytes
    unsigned varint          7 bits a byte, low group first, high bit = "more"; at most 5 bytes
    varint / varlong         zig-zag ((n << 1) ^ (n >> 31|63)) then unsigned varint; 5 / 10 bytes
    string                   int16 length N, then N UTF-8 bytes; nullable: N = -1 is null
    compact string           unsigned varint N+1, then N bytes; nullable: 0 is null
    bytes                    int32 length N, then N bytes; nullable: N = -1 is null
    compact bytes            unsigned varint N+1, then N bytes; nullable: 0 is null
    array                    int32 count N, then N items; nullable: -1 is null
    compact array            unsigned varint N+1, then N items; nullable: 0 is null
    tagged fields            unsigned varint count, then per field: uvarint tag, uvarint size,
                             size bytes (tags ascending when written)

Every read checks the bytes are there and raises ``ProtocolError`` saying what was being read and
where; no ``struct.error`` or ``IndexError`` escapes. Every write checks the value fits its type and
raises ``EncodeError``. The ``Writer`` can leave holes for record payloads (``RecordsRef``) that the
caller streams itself, e.g. with ``os.sendfile``.
"""

from __future__ import annotations

import struct
import uuid
from collections.abc import Callable
from typing import Any, Generic, TypeVar

import attrs

from replog.errors import ProtocolError
from replog.protocol.exceptions import EncodeError

__all__ = ["Buffer", "Reader", "RecordsRef", "Writer", "ZERO_UUID"]

Buffer = bytes | bytearray | memoryview
ZERO_UUID = uuid.UUID(int=0)

_T = TypeVar("_T")

_I8 = struct.Struct(">b")
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
_U16 = struct.Struct(">H")
_U32 = struct.Struct(">I")
_F64 = struct.Struct(">d")

_UVARINT_BYTES_MAX = 5
_VARLONG_BYTES_MAX = 10
_STRING_BYTES_MAX = 0x7FFF


@attrs.frozen
class RecordsRef(Generic[_T]):
    """A placeholder for ``size_bytes`` of record batches the caller will send itself.

    ``source`` is whatever the caller needs to find the bytes again (a ``FetchSlice``, a file
    handle and position...); the codec only uses ``size_bytes`` to write a correct length prefix.
    """

    size_bytes: int
    source: _T


class Reader:
    """Reads primitives from a buffer, advancing a position; never reads past the end."""

    __slots__ = ("_buf", "_end", "_pos")

    def __init__(self, data: Buffer) -> None:
        view = memoryview(data)
        if view.format != "B" or view.ndim != 1:
            view = view.cast("B")
        self._buf = view
        self._pos = 0
        self._end = len(view)

    @property
    def position(self) -> int:
        """Bytes consumed so far."""
        return self._pos

    @property
    def remaining(self) -> int:
        """Bytes left to read."""
        return self._end - self._pos

    def expect_end(self, what: str) -> None:
        """Raise ``ProtocolError`` if bytes are left over after ``what``."""
        if self._pos != self._end:
            raise ProtocolError(f"{self._end - self._pos} unexpected trailing bytes after {what}")

    def _take(self, size_bytes: int, what: str) -> int:
        position = self._pos
        if size_bytes > self._end - position:
            raise ProtocolError(
                f"truncated {what}: need {size_bytes} bytes at position {position}, "
                f"{self._end - position} left"
            )
        self._pos = position + size_bytes
        return position

    def _unpack(self, fmt: struct.Struct, what: str) -> Any:
        position = self._take(fmt.size, what)
        return fmt.unpack_from(self._buf, position)[0]

    def read_int8(self) -> int:
        """Read a signed 8-bit integer."""
        return int(self._unpack(_I8, "int8"))

    def read_int16(self) -> int:
        """Read a signed 16-bit integer."""
        return int(self._unpack(_I16, "int16"))

    def read_int32(self) -> int:
        """Read a signed 32-bit integer."""
        return int(self._unpack(_I32, "int32"))

    def read_int64(self) -> int:
        """Read a signed 64-bit integer."""
        return int(self._unpack(_I64, "int64"))

    def read_uint16(self) -> int:
        """Read an unsigned 16-bit integer."""
        return int(self._unpack(_U16, "uint16"))

    def read_uint32(self) -> int:
        """Read an unsigned 32-bit integer."""
        return int(self._unpack(_U32, "uint32"))

    def read_float64(self) -> float:
        """Read an IEEE 754 double."""
        return float(self._unpack(_F64, "float64"))

    def read_bool(self) -> bool:
        """Read a boolean (one byte; any non-zero value is true, as in Kafka)."""
        return self.read_int8() != 0

    def read_uuid(self) -> uuid.UUID:
        """Read a 16-byte UUID."""
        position = self._take(16, "uuid")
        return uuid.UUID(bytes=bytes(self._buf[position : position + 16]))

    def read_raw(self, size_bytes: int, what: str = "bytes") -> memoryview:
        """Return a zero-copy view of the next ``size_bytes`` bytes."""
        position = self._take(size_bytes, what)
        return self._buf[position : position + size_bytes]

    def _varint_raw(self, bytes_max: int, what: str) -> int:
        value = 0
        shift = 0
        for _ in range(bytes_max):
            if self._pos >= self._end:
                raise ProtocolError(f"truncated {what} at position {self._pos}")
            byte = self._buf[self._pos]
            self._pos += 1
            value |= (byte & 0x7F) << shift
            if not byte & 0x80:
                return value
            shift += 7
        raise ProtocolError(f"{what} longer than {bytes_max} bytes at position {self._pos}")

    def read_unsigned_varint(self) -> int:
        """Read an unsigned varint of at most 32 bits."""
        value = self._varint_raw(_UVARINT_BYTES_MAX, "unsigned varint")
        if value > 0xFFFFFFFF:
            raise ProtocolError(f"unsigned varint {value} does not fit 32 bits")
        return value

    def read_varint(self) -> int:
        """Read a zig-zag varint of 32 bits."""
        raw = self.read_unsigned_varint()
        return (raw >> 1) ^ -(raw & 1)

    def read_varlong(self) -> int:
        """Read a zig-zag varint of 64 bits."""
        raw = self._varint_raw(_VARLONG_BYTES_MAX, "varlong")
        if raw > 0xFFFFFFFFFFFFFFFF:
            raise ProtocolError(f"varlong {raw} does not fit 64 bits")
        return (raw >> 1) ^ -(raw & 1)

    def _length(self, compact: bool, fmt: struct.Struct, what: str) -> int:
        """Length prefix: -1 means null; anything below -1 is an error."""
        if compact:
            return self.read_unsigned_varint() - 1
        length = int(self._unpack(fmt, f"{what} length"))
        if length < -1:
            raise ProtocolError(f"negative {what} length {length} at position {self._pos}")
        return length

    def _text(self, length: int) -> str:
        data = self.read_raw(length, "string")
        try:
            return str(data, "utf-8")
        except UnicodeDecodeError as e:
            raise ProtocolError(f"string is not valid UTF-8: {e.reason}") from None

    def read_string(self, *, compact: bool = False) -> str:
        """Read a non-nullable string (classic or compact)."""
        length = self._length(compact, _I16, "string")
        if length < 0:
            raise ProtocolError(f"null string where none is allowed, at position {self._pos}")
        return self._text(length)

    def read_nullable_string(self, *, compact: bool = False) -> str | None:
        """Read a nullable string (classic or compact)."""
        length = self._length(compact, _I16, "string")
        return None if length < 0 else self._text(length)

    def read_bytes(self, *, compact: bool = False) -> memoryview:
        """Read a non-nullable byte string as a zero-copy view."""
        length = self._length(compact, _I32, "bytes")
        if length < 0:
            raise ProtocolError(f"null bytes where none are allowed, at position {self._pos}")
        return self.read_raw(length)

    def read_nullable_bytes(self, *, compact: bool = False) -> memoryview | None:
        """Read a nullable byte string as a zero-copy view."""
        length = self._length(compact, _I32, "bytes")
        return None if length < 0 else self.read_raw(length)

    def read_array_length(self, *, compact: bool = False) -> int:
        """Read an array count (-1 for null). Rejects counts that cannot fit in the bytes left,
        so a forged count never makes the decoder allocate or loop for nothing (every item of
        every replog schema takes at least one byte)."""
        count = self._length(compact, _I32, "array")
        if count > self.remaining:
            raise ProtocolError(
                f"array of {count} items cannot fit in the {self.remaining} bytes left"
            )
        return count

    def read_array(self, read_item: Callable[[], _T], *, compact: bool = False) -> list[_T]:
        """Read a non-nullable array whose items ``read_item`` reads."""
        count = self.read_array_length(compact=compact)
        if count < 0:
            raise ProtocolError(f"null array where none is allowed, at position {self._pos}")
        return [read_item() for _ in range(count)]

    def read_nullable_array(
        self, read_item: Callable[[], _T], *, compact: bool = False
    ) -> list[_T] | None:
        """Read a nullable array whose items ``read_item`` reads."""
        count = self.read_array_length(compact=compact)
        return None if count < 0 else [read_item() for _ in range(count)]

    def read_tagged_fields(self) -> list[tuple[int, memoryview]]:
        """Read a tagged-field buffer as ``(tag, payload)`` pairs; the caller decodes the tags it
        knows and skips the rest (forward compatibility)."""
        count = self.read_unsigned_varint()
        if count > self.remaining:
            raise ProtocolError(f"{count} tagged fields cannot fit in {self.remaining} bytes")
        fields = []
        for _ in range(count):
            tag = self.read_unsigned_varint()
            size_bytes = self.read_unsigned_varint()
            fields.append((tag, self.read_raw(size_bytes, f"tagged field {tag}")))
        return fields

    def skip_tagged_fields(self) -> None:
        """Read and drop a tagged-field buffer."""
        self.read_tagged_fields()


def _encoded_text(value: str) -> bytes:
    try:
        return value.encode("utf-8")
    except UnicodeEncodeError as e:
        raise EncodeError(f"string cannot be encoded as UTF-8: {e.reason}") from None


class Writer:
    """Accumulates an encoding. Bytes go into a buffer; a ``RecordsRef`` closes the current
    chunk and becomes its own part, so ``parts()`` is bytes and refs in wire order."""

    __slots__ = ("_buf", "_parts", "_ref_bytes")

    def __init__(self) -> None:
        self._buf = bytearray()
        self._parts: list[bytes | RecordsRef[Any]] = []
        self._ref_bytes = 0

    @property
    def size_bytes(self) -> int:
        """Total encoded size so far, including the bytes ``RecordsRef`` holes stand for."""
        return len(self._buf) + sum(
            p.size_bytes if isinstance(p, RecordsRef) else len(p) for p in self._parts
        )

    @property
    def has_refs(self) -> bool:
        """Whether any ``RecordsRef`` was written."""
        return any(isinstance(p, RecordsRef) for p in self._parts)

    def to_bytes(self) -> bytes:
        """The whole encoding; only valid when no ``RecordsRef`` was written."""
        if self.has_refs:
            raise EncodeError("encoding holds RecordsRef placeholders; use parts() instead")
        return b"".join([*(p for p in self._parts if isinstance(p, bytes)), bytes(self._buf)])

    def parts(self) -> list[bytes | RecordsRef[Any]]:
        """Bytes chunks and ``RecordsRef`` placeholders in wire order (no empty chunks)."""
        tail: list[bytes | RecordsRef[Any]] = [bytes(self._buf)] if self._buf else []
        return [*self._parts, *tail]

    def _pack(self, fmt: struct.Struct, value: int | float, what: str) -> None:
        try:
            self._buf += fmt.pack(value)
        except struct.error:
            raise EncodeError(f"{value!r} does not fit {what}") from None

    def write_int8(self, value: int) -> None:
        """Write a signed 8-bit integer."""
        self._pack(_I8, value, "int8")

    def write_int16(self, value: int) -> None:
        """Write a signed 16-bit integer."""
        self._pack(_I16, value, "int16")

    def write_int32(self, value: int) -> None:
        """Write a signed 32-bit integer."""
        self._pack(_I32, value, "int32")

    def write_int64(self, value: int) -> None:
        """Write a signed 64-bit integer."""
        self._pack(_I64, value, "int64")

    def write_uint16(self, value: int) -> None:
        """Write an unsigned 16-bit integer."""
        self._pack(_U16, value, "uint16")

    def write_uint32(self, value: int) -> None:
        """Write an unsigned 32-bit integer."""
        self._pack(_U32, value, "uint32")

    def write_float64(self, value: float) -> None:
        """Write an IEEE 754 double."""
        self._pack(_F64, value, "float64")

    def write_bool(self, value: bool) -> None:
        """Write a boolean as one byte, 1 or 0."""
        self._buf.append(1 if value else 0)

    def write_uuid(self, value: uuid.UUID) -> None:
        """Write a 16-byte UUID."""
        self._buf += value.bytes

    def write_raw(self, data: Buffer) -> None:
        """Append bytes as they are."""
        self._buf += data

    def write_unsigned_varint(self, value: int) -> None:
        """Write an unsigned varint of at most 32 bits."""
        if not 0 <= value <= 0xFFFFFFFF:
            raise EncodeError(f"{value!r} does not fit an unsigned varint")
        self._varint_raw(value)

    def _varint_raw(self, value: int) -> None:
        while value > 0x7F:
            self._buf.append((value & 0x7F) | 0x80)
            value >>= 7
        self._buf.append(value)

    def write_varint(self, value: int) -> None:
        """Write a zig-zag varint of 32 bits."""
        if not -(2**31) <= value < 2**31:
            raise EncodeError(f"{value!r} does not fit a varint")
        self._varint_raw(((value << 1) ^ (value >> 31)) & 0xFFFFFFFF)

    def write_varlong(self, value: int) -> None:
        """Write a zig-zag varint of 64 bits."""
        if not -(2**63) <= value < 2**63:
            raise EncodeError(f"{value!r} does not fit a varlong")
        self._varint_raw(((value << 1) ^ (value >> 63)) & 0xFFFFFFFFFFFFFFFF)

    def _length(self, length: int, compact: bool, fmt: struct.Struct, what: str) -> None:
        if compact:
            self.write_unsigned_varint(length + 1)
        else:
            self._pack(fmt, length, f"{what} length")

    def write_string(self, value: str, *, compact: bool = False) -> None:
        """Write a non-null string (classic or compact)."""
        data = _encoded_text(value)
        if len(data) > _STRING_BYTES_MAX:
            raise EncodeError(f"string of {len(data)} bytes exceeds {_STRING_BYTES_MAX}")
        self._length(len(data), compact, _I16, "string")
        self._buf += data

    def write_nullable_string(self, value: str | None, *, compact: bool = False) -> None:
        """Write a string or null (classic or compact)."""
        if value is None:
            self._length(-1, compact, _I16, "string")
        else:
            self.write_string(value, compact=compact)

    def write_bytes(self, value: Buffer, *, compact: bool = False) -> None:
        """Write a non-null byte string."""
        self._length(len(value), compact, _I32, "bytes")
        self._buf += value

    def write_nullable_bytes(self, value: Buffer | None, *, compact: bool = False) -> None:
        """Write a byte string or null."""
        if value is None:
            self._length(-1, compact, _I32, "bytes")
        else:
            self.write_bytes(value, compact=compact)

    def write_records_ref(self, ref: RecordsRef[Any], *, compact: bool = False) -> None:
        """Write the length prefix of a bytes field and leave a hole of ``ref.size_bytes``."""
        if ref.size_bytes < 0:
            raise EncodeError(f"RecordsRef of negative size {ref.size_bytes}")
        self._length(ref.size_bytes, compact, _I32, "bytes")
        self._parts.append(bytes(self._buf))
        self._buf = bytearray()
        self._parts.append(ref)

    def write_array_length(self, count: int | None, *, compact: bool = False) -> None:
        """Write an array count; ``None`` writes null."""
        self._length(-1 if count is None else count, compact, _I32, "array")

    def write_empty_tagged_fields(self) -> None:
        """Write a tagged-field buffer with no fields."""
        self._buf.append(0)

    def write_tagged_fields(self, fields: list[tuple[int, bytes]]) -> None:
        """Write a tagged-field buffer; ``fields`` must be in strictly ascending tag order."""
        self.write_unsigned_varint(len(fields))
        previous = -1
        for tag, payload in fields:
            if tag <= previous:
                raise EncodeError(f"tagged fields out of order: {tag} after {previous}")
            previous = tag
            self.write_unsigned_varint(tag)
            self.write_unsigned_varint(len(payload))
            self._buf += payload
