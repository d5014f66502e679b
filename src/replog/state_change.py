"""State-change records: who asked whom to do what, for which partition, at which epoch, when.

The one record type every package writes, so that the whole life of a state change can be
followed across brokers (requested by the controller, received and completed by the broker that
acts on it): the controller's decisions (``replog.election``) start records REQUESTED,
a broker's partition machines (``replog.isr``) record what they received and completed, and the
state-change log (``state-change.log``) holds them as lines. One record renders as one line::

    controller 0 requested become-leader for foo-0 to broker 1 at epoch 10
    broker 1 received become-leader for foo-0 from controller 0 at epoch 10
    broker 1 completed become-leader for foo-0 requested by controller 0 at epoch 10
    controller 0 rejected alter-partition for foo-0 requested by leader 1 at epoch 9: ...

``to_log_line()`` prefixes the phase time and appends the machine-readable fields, so a tool
can merge the logs of several brokers by time and ``parse_log_line()`` them back. Pure: no IO.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Callable

import attrs

from replog.errors import ErrorCode, invariant
from replog.topics import TopicPartition

__all__ = [
    "DEFAULT_REQUESTER",
    "Actor",
    "Phase",
    "Role",
    "StateChange",
    "StateChangeKind",
    "StateChangeSink",
    "discard_state_change",
    "parse_log_line",
]


class StateChangeKind(enum.Enum):
    """What was asked. Values are the words used in the one-line form."""

    BECOME_LEADER = "become-leader"
    BECOME_FOLLOWER = "become-follower"
    START_REPLICA = "start-replica"
    STOP_REPLICA = "stop-replica"
    ISR_CHANGE = "isr-change"
    UPDATE_PARTITION = "update-partition"
    PARTITION_OFFLINE = "partition-offline"
    ALTER_PARTITION = "alter-partition"
    CREATE_PARTITION = "create-partition"
    ELECT_LEADER = "elect-leader"
    REASSIGN_PARTITION = "reassign-partition"
    CANCEL_REASSIGNMENT = "cancel-reassignment"
    TRUNCATE_LOG = "truncate-log"


class Phase(enum.Enum):
    """Where a state change is in its lifecycle."""

    REQUESTED = "requested"
    RECEIVED = "received"
    COMPLETED = "completed"
    REJECTED = "rejected"


class Role(enum.Enum):
    """The role in which a broker (or an operator) takes part in a state change."""

    CONTROLLER = "controller"
    BROKER = "broker"
    LEADER = "leader"
    FOLLOWER = "follower"
    ADMIN = "admin"


@attrs.frozen
class Actor:
    """A participant: ``controller 0``, ``broker 3``, ``leader 1``, ``admin -1``."""

    role: Role
    broker_id: int

    def __str__(self) -> str:
        return f"{self.role.value} {self.broker_id}"

    @classmethod
    def controller(cls, broker_id: int) -> Actor:
        """The active controller, identified by its broker id."""
        return cls(Role.CONTROLLER, broker_id)

    @classmethod
    def broker(cls, broker_id: int) -> Actor:
        """A broker as the target of a request."""
        return cls(Role.BROKER, broker_id)

    @classmethod
    def leader(cls, broker_id: int) -> Actor:
        """A partition leader (for instance the sender of an AlterPartition)."""
        return cls(Role.LEADER, broker_id)

    @classmethod
    def admin(cls) -> Actor:
        """An operator or admin client (no broker id: -1)."""
        return cls(Role.ADMIN, -1)


DEFAULT_REQUESTER = Actor(Role.CONTROLLER, 0)
"""The requester decisions name when the caller names none: controller 0."""


@attrs.frozen(kw_only=True)
class StateChange:
    """One state change and the times of its phases (``*_ms``: the driver's clock)."""

    kind: StateChangeKind
    topic_partition: TopicPartition
    requester: Actor
    target: Actor | None
    leader_epoch: int
    partition_epoch: int
    requested_ms: int
    phase: Phase = Phase.REQUESTED
    received_ms: int | None = None
    completed_ms: int | None = None
    error: ErrorCode = ErrorCode.NONE
    detail: str = ""

    @property
    def at_ms(self) -> int:
        """The time of the current phase: when it was completed/received/requested."""
        if self.completed_ms is not None:
            return self.completed_ms
        if self.received_ms is not None:
            return self.received_ms
        return self.requested_ms

    def received(self, now_ms: int) -> StateChange:
        """This change as acknowledged by its target at ``now_ms``."""
        invariant(self.phase is Phase.REQUESTED, f"cannot receive a {self.phase.value} change")
        invariant(self.target is not None, "a change without a target cannot be received")
        invariant(now_ms >= self.requested_ms, "received before it was requested")
        return attrs.evolve(self, phase=Phase.RECEIVED, received_ms=now_ms)

    def completed(self, now_ms: int) -> StateChange:
        """This change as carried out by its target at ``now_ms``."""
        invariant(
            self.phase in (Phase.REQUESTED, Phase.RECEIVED),
            f"cannot complete a {self.phase.value} change",
        )
        invariant(self.target is not None, "a change without a target cannot complete")
        invariant(now_ms >= self.at_ms, "completed before it was requested or received")
        return attrs.evolve(self, phase=Phase.COMPLETED, completed_ms=now_ms)

    def rejected(self, now_ms: int, error: ErrorCode) -> StateChange:
        """This change as refused by its target at ``now_ms`` with ``error``."""
        invariant(error is not ErrorCode.NONE, "a rejection carries an error code")
        done = self.completed(now_ms)
        return attrs.evolve(done, phase=Phase.REJECTED, error=error)

    def __str__(self) -> str:
        kind = self.kind.value
        tp = self.topic_partition
        epoch = self.leader_epoch
        if self.phase is Phase.REQUESTED:
            to = f" to {self.target}" if self.target is not None else ""
            return f"{self.requester} requested {kind} for {tp}{to} at epoch {epoch}"
        if self.phase is Phase.RECEIVED:
            return f"{self.target} received {kind} for {tp} from {self.requester} at epoch {epoch}"
        text = f"{self.target} {self.phase.value} {kind} for {tp} requested by {self.requester}"
        text += f" at epoch {epoch}"
        if self.phase is Phase.REJECTED:
            text += f": {self.error.name}"
        return text

    def to_log_line(self) -> str:
        """``<at_ms> <sentence> | <fields> -- <detail>``: sortable by time, parseable back."""
        fields = [f"partition_epoch={self.partition_epoch}", f"requested_ms={self.requested_ms}"]
        if self.received_ms is not None:
            fields.append(f"received_ms={self.received_ms}")
        if self.completed_ms is not None:
            fields.append(f"completed_ms={self.completed_ms}")
        if self.error is not ErrorCode.NONE:
            fields.append(f"error={self.error.name}")
        line = f"{self.at_ms} {self} | {' '.join(fields)}"
        return f"{line} -- {self.detail}" if self.detail else line


_ACTOR = r"(?:{names}) -?\d+".format(names="|".join(r.value for r in Role))
_SENTENCE = re.compile(
    rf"^(?:(?P<req_a>{_ACTOR}) requested (?P<kind_a>[a-z-]+) for (?P<tp_a>\S+)"
    rf"(?: to (?P<tgt_a>{_ACTOR}))? at epoch (?P<epoch_a>-?\d+)"
    rf"|(?P<tgt_b>{_ACTOR}) received (?P<kind_b>[a-z-]+) for (?P<tp_b>\S+)"
    rf" from (?P<req_b>{_ACTOR}) at epoch (?P<epoch_b>-?\d+)"
    rf"|(?P<tgt_c>{_ACTOR}) (?P<phase_c>completed|rejected) (?P<kind_c>[a-z-]+) for (?P<tp_c>\S+)"
    rf" requested by (?P<req_c>{_ACTOR}) at epoch (?P<epoch_c>-?\d+)(?:: [A-Z_]+)?)$"
)


def _actor(text: str | None) -> Actor | None:
    if text is None:
        return None
    role, broker_id = text.split(" ")
    return Actor(Role(role), int(broker_id))


def parse_log_line(line: str) -> StateChange:
    """Inverse of ``StateChange.to_log_line()``; raises ValueError on a line it did not write."""
    head, sep, rest = line.partition(" | ")
    if not sep:
        raise ValueError(f"not a state-change log line: {line!r}")
    _, _, sentence = head.partition(" ")
    fields_text, _, detail = rest.partition(" -- ")
    match = _SENTENCE.match(sentence)
    if match is None:
        raise ValueError(f"not a state-change sentence: {sentence!r}")
    groups = match.groupdict()
    suffix = next(s for s in "abc" if groups[f"kind_{s}"] is not None)
    fields = dict(item.split("=", 1) for item in fields_text.split())
    phase = {"a": Phase.REQUESTED, "b": Phase.RECEIVED}.get(suffix)
    if phase is None:
        phase = Phase(groups["phase_c"])
    requester = _actor(groups[f"req_{suffix}"])
    if requester is None:
        raise ValueError(f"state-change line without a requester: {line!r}")
    optional = {k: int(fields[k]) if k in fields else None for k in ("received_ms", "completed_ms")}
    return StateChange(
        kind=StateChangeKind(groups[f"kind_{suffix}"]),
        topic_partition=TopicPartition.parse(groups[f"tp_{suffix}"]),
        requester=requester,
        target=_actor(groups[f"tgt_{suffix}"]),
        leader_epoch=int(groups[f"epoch_{suffix}"]),
        partition_epoch=int(fields["partition_epoch"]),
        requested_ms=int(fields["requested_ms"]),
        phase=phase,
        received_ms=optional["received_ms"],
        completed_ms=optional["completed_ms"],
        error=ErrorCode[fields["error"]] if "error" in fields else ErrorCode.NONE,
        detail=detail,
    )


StateChangeSink = Callable[[StateChange], None]
"""Where a component hands its records (a file, a logger, a list in tests)."""


def discard_state_change(change: StateChange) -> None:
    """The default sink: drop the record (the driver installs a real one)."""
    del change
