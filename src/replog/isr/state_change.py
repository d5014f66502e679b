"""Structured state-change lines: who changed what, on which partition, at which epochs.

Every role change, ISR proposal/commit/revert and truncation of a ``Partition`` becomes a
``StateChange``. The driver supplies the sink (a logger, a file, a list in tests); the lines are
``key=value`` with a fixed key order so that the state-change log tool can merge the lines of
many brokers by ``time_ms`` and parse them back with ``StateChange.parse``.
"""

from __future__ import annotations

import re
from collections.abc import Callable

import attrs

__all__ = ["StateChange", "StateChangeSink", "discard_state_change"]

_UNESCAPE = re.compile(r"\\(.)")
_FIELDS = (
    "time_ms",
    "broker",
    "what",
    "topic",
    "partition",
    "leader_epoch",
    "partition_epoch",
    "detail",
)


@attrs.frozen
class StateChange:
    """One state change of one partition replica, as seen by ``broker``."""

    time_ms: int
    broker: int
    what: str
    topic: str
    partition: int
    leader_epoch: int
    partition_epoch: int
    detail: str = ""

    def to_line(self) -> str:
        """``time_ms=.. broker=.. what=.. topic=.. partition=.. leader_epoch=..
        partition_epoch=.. detail="..."`` on one line (``detail`` last, quoted)."""
        head = " ".join(f"{name}={getattr(self, name)}" for name in _FIELDS[:-1])
        detail = self.detail.replace("\\", "\\\\").replace('"', '\\"').replace("\n", " ")
        return f'{head} detail="{detail}"'

    @classmethod
    def parse(cls, line: str) -> StateChange:
        """Inverse of ``to_line`` (raises ``ValueError`` on a line it did not write)."""
        head, sep, detail = line.partition(' detail="')
        if not sep or not detail.endswith('"'):
            raise ValueError(f"not a state-change line: {line!r}")
        values = dict(part.split("=", 1) for part in head.split(" "))
        if tuple(values) != _FIELDS[:-1]:
            raise ValueError(f"unexpected fields in state-change line: {line!r}")
        text = _UNESCAPE.sub(r"\1", detail[:-1])
        return cls(
            time_ms=int(values["time_ms"]),
            broker=int(values["broker"]),
            what=values["what"],
            topic=values["topic"],
            partition=int(values["partition"]),
            leader_epoch=int(values["leader_epoch"]),
            partition_epoch=int(values["partition_epoch"]),
            detail=text,
        )


StateChangeSink = Callable[[StateChange], None]


def discard_state_change(change: StateChange) -> None:
    """The default sink: drop the line (the driver installs a real one)."""
    del change
