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

from typing import ClassVar, Self

import attrs

from replog.errors import ProtocolError
from replog.protocol.compiled import (
    decode_struct,
    encode_struct,
)
from replog.protocol.exceptions import EncodeError
from replog.protocol.fields import (
    BOOL,
    BYTES,
    FLOAT64,
    INT8,
    INT16,
    INT32,
    INT64,
    RECORDS,
    STRING,
    UINT16,
    UINT32,
    UUID,
    ArrayOf,
    FieldSpec,
    Records,
    Scalar,
    Versions,
    array,
    field,
)
from replog.protocol.interpreter import (
    _in_message,
)
from replog.protocol.primitives import (
    Buffer,
    Reader,
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
    "UINT16",
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
