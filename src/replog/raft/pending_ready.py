"""`PendingReady`: the `Ready` the core is building between two ``take_ready`` calls.

It holds the parts of a `Ready` in the order ``ready.py`` gives them (election state, log
operations, messages, high watermark, leader) and remembers what it handed out before: an
election state equal to the last one handed out is not persisted again, and a leader equal to
the last one reported is not reported again.
"""

from __future__ import annotations

import attrs

from replog.raft.messages import Message, Outbound
from replog.raft.ready import LeaderAndEpoch, LogOp, Ready
from replog.raft.states import ElectionState

__all__ = ["PendingReady"]


@attrs.define(eq=False)
class PendingReady:
    """What the core produced since the last `take` (see the module docstring)."""

    #: the election state last handed out to be persisted (or read at start)
    _persisted: ElectionState
    #: the leader last reported
    _known_leader: LeaderAndEpoch
    _election: ElectionState | None = None
    _log_ops: list[LogOp] = attrs.field(factory=list)
    _messages: list[Outbound] = attrs.field(factory=list)
    _high_watermark: int | None = None
    _leader: LeaderAndEpoch | None = None

    def persist(self, election: ElectionState) -> None:
        """Have ``election`` persisted, unless it is what was persisted last."""
        if election != self._persisted:
            self._persisted = election
            self._election = election

    def log_op(self, op: LogOp) -> None:
        """Have ``op`` applied to the log, after the ones before it."""
        self._log_ops.append(op)

    def send(self, dst: int, message: Message) -> None:
        """Have ``message`` sent to node ``dst`` (once everything before it is durable)."""
        self._messages.append(Outbound(dst, message))

    def report_high_watermark(self, high_watermark: int) -> None:
        """Report the new high watermark (the core has checked that it moved up)."""
        self._high_watermark = high_watermark

    def report_leader(self, known: LeaderAndEpoch) -> None:
        """Report the leader this node knows, unless it is the one reported last."""
        if known != self._known_leader:
            self._known_leader = known
            self._leader = known

    @property
    def is_empty(self) -> bool:
        """Nothing produced since the last `take`."""
        return (
            self._election is None
            and not self._log_ops
            and not self._messages
            and self._high_watermark is None
            and self._leader is None
        )

    def take(self) -> Ready:
        """Everything produced since the last call, as a `Ready`; starts over empty."""
        ready = Ready(
            election=self._election,
            log_ops=tuple(self._log_ops),
            messages=tuple(self._messages),
            high_watermark=self._high_watermark,
            leader=self._leader,
        )
        self._election, self._high_watermark, self._leader = None, None, None
        self._log_ops, self._messages = [], []
        return ready
