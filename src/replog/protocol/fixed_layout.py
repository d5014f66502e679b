"""What the hand-written fixed-layout codecs (``fetch_v12``, ``produce_fast``) and the compiled
codec share: the exception that sends a body back to the generic codec, and unsigned varints
that decline (``OffShape``), rather than raise a protocol error, on what the reference
interpreter must judge (a value past 32 bits, a varint over five bytes)."""

from __future__ import annotations

__all__ = ["OffShape", "read_uvarint", "uvarint"]

_UVARINT_SMALL = [bytes((n,)) for n in range(0x80)]
_UINT32_MAX = 0xFFFFFFFF


class OffShape(Exception):
    """Not the common shape: the generic codec takes over."""


def uvarint(n: int) -> bytes:
    """``n`` (0 to 2**32 - 1) as an unsigned varint; ``OffShape`` outside that range."""
    if 0 <= n < 0x80:
        return _UVARINT_SMALL[n]
    if n < 0 or n > _UINT32_MAX:
        raise OffShape
    out = bytearray()
    while n > 0x7F:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def read_uvarint(buf: memoryview, pos: int) -> tuple[int, int]:
    """The unsigned varint at ``pos`` and the position after it (``IndexError`` past the end,
    ``OffShape`` over 32 bits or five bytes)."""
    byte = buf[pos]
    if byte < 0x80:
        return byte, pos + 1
    value = byte & 0x7F
    for shift in (7, 14, 21, 28):
        pos += 1
        byte = buf[pos]
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            if value > _UINT32_MAX:
                raise OffShape
            return value, pos + 1
    raise OffShape
