"""Bridge between replog's message classes and kafka-python's JSON-schema-driven codec.

kafka-python 3.x builds its codec from Kafka's own message JSON files, so a message that replog
encodes and kafka-python decodes to the same field values (and back) agrees with Kafka's schema,
field names and per-version presence included. Values are compared as "plain" trees: dicts of
the fields present at the version, lists, bytes and scalars.
"""

from __future__ import annotations

from typing import Any

import attrs
import kafka.protocol.admin as kp_admin
import kafka.protocol.consumer as kp_consumer
import kafka.protocol.metadata as kp_metadata

from replog.protocol.schema import FieldSpec, Message

_MODULES = (kp_consumer, kp_admin, kp_metadata)
_INT32_MIN = -(2**31)


def kafka_python_class(cls: type[Message]) -> Any:
    """kafka-python's class of the same name as ``cls`` (e.g. ``JoinGroupRequest``)."""
    for module in _MODULES:
        found = getattr(module, cls.__name__, None)
        if found is not None:
            return found
    raise LookupError(f"kafka-python has no {cls.__name__}")


def replog_plain(obj: Any, version: int) -> Any:
    """``obj`` (a replog schema instance) as a plain tree of the fields present at ``version``."""
    if isinstance(obj, list):
        return [replog_plain(item, version) for item in obj]
    if isinstance(obj, bytes | bytearray | memoryview):
        return bytes(obj)
    if not attrs.has(type(obj)):
        return obj
    plain = {}
    for attribute in attrs.fields(type(obj)):
        spec: FieldSpec = attribute.metadata["wire"]
        if version in spec.versions:
            plain[attribute.name] = replog_plain(getattr(obj, attribute.name), version)
    return plain


def kafka_python_plain(obj: Any, struct: Any, version: int) -> Any:
    """A decoded kafka-python object as the same kind of plain tree."""
    plain = {}
    for kp_field in struct.fields.values():
        if not kp_field.for_version_q(version):
            continue
        value = getattr(obj, kp_field.name)
        if kp_field.type_str == "bitfield":  # None there means INT32_MIN (bit 31 alone)
            plain[kp_field.name] = _bits_to_int32(value)
        elif value is None:
            plain[kp_field.name] = None
        elif kp_field.is_struct_array():
            plain[kp_field.name] = [
                kafka_python_plain(item, kp_field.array_of, version) for item in value
            ]
        elif kp_field.is_struct():
            plain[kp_field.name] = kafka_python_plain(value, kp_field, version)
        elif isinstance(value, bytes | bytearray | memoryview):
            plain[kp_field.name] = bytes(value)
        elif isinstance(value, list):
            plain[kp_field.name] = list(value)
        else:
            plain[kp_field.name] = value
    return plain


def to_kafka_python(obj: Message, version: int) -> Any:
    """A kafka-python object with the values of ``obj`` at ``version``."""
    kp_cls = kafka_python_class(type(obj))
    kwargs = _kp_kwargs(kp_cls._struct, replog_plain(obj, version), version)
    return kp_cls(version=version, **kwargs)


def _kp_kwargs(struct: Any, plain: dict[str, Any], version: int) -> dict[str, Any]:
    kwargs: dict[str, Any] = {}
    for kp_field in struct.fields.values():
        if not kp_field.for_version_q(version):
            continue
        value = plain[kp_field.name]
        if value is not None and kp_field.is_struct_array():
            item_cls = kp_field.data_class
            kwargs[kp_field.name] = [
                item_cls(version=version, **_kp_kwargs(kp_field.array_of, item, version))
                for item in value
            ]
        elif value is not None and kp_field.is_struct():
            kwargs[kp_field.name] = kp_field.data_class(
                version=version, **_kp_kwargs(kp_field, value, version)
            )
        elif kp_field.type_str == "bitfield":
            kwargs[kp_field.name] = _int32_to_bits(value)
        else:
            kwargs[kp_field.name] = value
    return kwargs


def _bits_to_int32(bits: set[int] | None) -> int:
    if bits is None:
        return _INT32_MIN
    value = sum(1 << bit for bit in bits)
    return value - (1 << 32) if value >= 1 << 31 else value


def _int32_to_bits(value: int) -> set[int] | None:
    if value == _INT32_MIN:
        return None
    unsigned = value & 0xFFFFFFFF
    return {bit for bit in range(32) if unsigned >> bit & 1}
