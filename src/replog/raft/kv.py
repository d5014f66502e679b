"""A small replicated key-value register: the state machine the simulator and tests run on the
quorum (read, write and compare-and-set on integer registers).

Each operation is one data record, UTF-8 JSON::

    {"f": "read",  "k": "x"}
    {"f": "write", "k": "x", "v": 3}
    {"f": "cas",   "k": "x", "e": 3, "v": 4}      # set to 4 if it holds 3

Reads go through the log like writes, so every answer is linearizable by construction (no
lease or read-index shortcut to get wrong). Results: a read returns the value (None if the key
was never written), a write returns None, a cas returns whether it swapped. A snapshot is one
record ``{"k": key, "v": value}`` per key, in key order.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

import attrs

from replog.errors import CorruptRecordError
from replog.raft.entries import Entry

__all__ = ["KvOp", "KvStateMachine"]

_FUNCTIONS = ("read", "write", "cas")


@attrs.frozen
class KvOp:
    """One register operation (``value`` for write/cas, ``expected`` for cas)."""

    f: str
    key: str
    value: int | None = None
    expected: int | None = None

    def __attrs_post_init__(self) -> None:
        if self.f not in _FUNCTIONS:
            raise ValueError(f"unknown function {self.f!r}")

    def encode(self) -> bytes:
        """The record value."""
        doc: dict[str, object] = {"f": self.f, "k": self.key}
        if self.f != "read":
            doc["v"] = self.value
        if self.f == "cas":
            doc["e"] = self.expected
        return json.dumps(doc, separators=(",", ":")).encode()

    @classmethod
    def decode(cls, data: bytes) -> KvOp:
        """Parse a record value (`CorruptRecordError` if it is not an operation)."""
        try:
            doc = json.loads(data)
            return cls(doc["f"], doc["k"], doc.get("v"), doc.get("e"))
        except (ValueError, KeyError, TypeError) as exc:
            raise CorruptRecordError(f"not a register operation: {data!r}") from exc


@attrs.define
class KvStateMachine:
    """Registers by key; implements ``replog.raft.node.StateMachine``."""

    values: dict[str, int] = attrs.field(factory=dict)

    def apply(self, entry: Entry) -> object:
        """Apply one operation; its result (see the module docstring)."""
        return self.apply_op(KvOp.decode(entry.value))

    def apply_op(self, op: KvOp) -> object:
        """Apply ``op`` directly (the checker's reference model uses this)."""
        current = self.values.get(op.key)
        if op.f == "read":
            return current
        if op.f == "write":
            if op.value is not None:
                self.values[op.key] = op.value
            return None
        if current != op.expected or op.value is None:
            return False
        self.values[op.key] = op.value
        return True

    def snapshot(self) -> list[bytes]:
        """One record per key."""
        return [
            json.dumps({"k": k, "v": v}, separators=(",", ":")).encode()
            for k, v in sorted(self.values.items())
        ]

    def restore(self, records: Sequence[bytes]) -> None:
        """Replace the registers with a snapshot's."""
        values = {}
        for record in records:
            doc = json.loads(record)
            values[str(doc["k"])] = int(doc["v"])
        self.values = values

    def state(self) -> tuple[tuple[str, int], ...]:
        """The registers as a comparable value."""
        return tuple(sorted(self.values.items()))
