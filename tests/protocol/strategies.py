"""Hypothesis strategies built from the protocol schemas: any valid message at any version."""

from __future__ import annotations

from typing import Any

import attrs
from hypothesis import strategies as st

from replog.protocol.fields import WireType
from replog.protocol.messages import APIS, ApiSpec
from replog.protocol.schema import ArrayOf, FieldSpec, Message, Scalar

_INT_BITS = {Scalar.INT8: 8, Scalar.INT16: 16, Scalar.INT32: 32, Scalar.INT64: 64}

# Text that UTF-8 can encode (no lone surrogates), short enough to keep examples fast.
TEXT = st.text(st.characters(codec="utf-8"), max_size=12)


def _scalar(kind: Scalar) -> st.SearchStrategy[Any]:
    if kind in _INT_BITS:
        bits = _INT_BITS[kind]
        return st.integers(-(2 ** (bits - 1)), 2 ** (bits - 1) - 1)
    if kind is Scalar.UINT32:
        return st.integers(0, 2**32 - 1)
    if kind is Scalar.FLOAT64:
        return st.floats(allow_nan=False)
    if kind is Scalar.BOOL:
        return st.booleans()
    if kind is Scalar.UUID:
        return st.uuids()
    if kind is Scalar.STRING:
        return TEXT
    return st.binary(max_size=40)  # BYTES, RECORDS


def _value(type_: WireType, version: int, flexible: bool) -> st.SearchStrategy[Any]:
    if isinstance(type_, Scalar):
        return _scalar(type_)
    if isinstance(type_, ArrayOf):
        return st.lists(_value(type_.item, version, flexible), max_size=2)
    return struct_strategy(type_, version, flexible)


def struct_strategy(cls: type[Any], version: int, flexible: bool) -> st.SearchStrategy[Any]:
    """Instances of ``cls`` whose every field present at ``version`` is random; fields absent
    at ``version`` keep their defaults (so they encode, and decode back equal)."""
    kwargs: dict[str, st.SearchStrategy[Any]] = {}
    for attribute in attrs.fields(cls):
        spec: FieldSpec = attribute.metadata["wire"]
        if version not in spec.versions:
            continue
        strategy = _value(spec.type, version, flexible)
        if version in spec.nullable or (spec.tag is not None and is_struct(spec.type)):
            strategy = st.none() | strategy
        kwargs[attribute.name] = strategy
    return st.builds(cls, **kwargs)


def is_struct(type_: WireType) -> bool:
    """Whether ``type_`` is a nested struct class."""
    return isinstance(type_, type)


_CACHE: dict[tuple[str, int], st.SearchStrategy[Any]] = {}


def message_strategy(cls: type[Message], version: int) -> st.SearchStrategy[Any]:
    """Any ``cls`` body valid at ``version`` (built once per class and version)."""
    key = (cls.__qualname__, version)
    if key not in _CACHE:
        _CACHE[key] = struct_strategy(cls, version, cls.API.is_flexible(version))
    return _CACHE[key]


def all_versions(apis: dict[int, ApiSpec] = APIS) -> list[tuple[type[Message], int]]:
    """Every (request or response class, version) of ``apis`` (default: those replog serves)."""
    cases: list[tuple[type[Message], int]] = []
    for spec in apis.values():
        for version in range(spec.info.min_version, spec.info.max_version + 1):
            cases.append((spec.request, version))
            cases.append((spec.response, version))
    return cases


def case_id(case: tuple[type[Message], int]) -> str:
    """A readable test id: FetchRequest-v12."""
    return f"{case[0].__name__}-v{case[1]}"
