"""State-change records: who asked whom to do what, for which partition, at which epoch, when.

Every election decision returns, next to its outcome, the state changes it implies (seed 000
section 7: "monitoring the entire lifecycle of a state change"). A record starts REQUESTED by the
decision; the driver moves it to RECEIVED and COMPLETED (or REJECTED) as the target broker acts,
each phase stamped with ``now_ms``. One record renders as one line::

    controller 0 requested become-leader for foo-0 to broker 1 at epoch 10
    broker 1 received become-leader for foo-0 from controller 0 at epoch 10
    broker 1 completed become-leader for foo-0 requested by controller 0 at epoch 10
    controller 0 rejected alter-partition for foo-0 requested by leader 1 at epoch 9: ...

``to_log_line()`` prefixes the phase time and appends the machine-readable fields, so a later tool
can merge the logs of several brokers by time and ``parse_log_line()`` them back.
"""

from __future__ import annotations

import enum
import re

import attrs

from replog.election.state import NO_LEADER, PartitionRegistration, TopicPartition
from replog.errors import ErrorCode, invariant

__all__ = [
    "DEFAULT_REQUESTER",
    "Actor",
    "Phase",
    "Role",
    "StateChange",
    "StateChangeKind",
    "parse_log_line",
    "handled_request",
    "transition_changes",
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


def transition_changes(
    topic_partition: TopicPartition,
    old: PartitionRegistration | None,
    new: PartitionRegistration,
    requester: Actor,
    now_ms: int,
    note: str = "",
) -> list[StateChange]:
    """The requests a controller sends for the move ``old`` -> ``new`` (``old`` None: created).

    New replicas get start-replica; a set leader field gives become-leader to the leader and
    become-follower to every other replica (or partition-offline when the leader is -1); any
    other change goes to the leader as isr-change (ISR/ELR/recovery only) or update-partition;
    replicas dropped from the assignment get stop-replica (their data is deleted). ``note``
    goes into the leader's (or offline) record, e.g. what an unclean election may have lost.
    """
    detail = new.describe() + (f"; {note}" if note else "")

    def change(kind: StateChangeKind, target: int | None, text: str = detail) -> StateChange:
        return StateChange(
            kind=kind,
            topic_partition=topic_partition,
            requester=requester,
            target=None if target is None else Actor.broker(target),
            leader_epoch=new.leader_epoch,
            partition_epoch=new.partition_epoch,
            requested_ms=now_ms,
            detail=text,
        )

    old_replicas = () if old is None else old.replicas
    out = [change(StateChangeKind.START_REPLICA, r) for r in new.replicas if r not in old_replicas]
    leader_set = old is None or new.leader_epoch != old.leader_epoch
    if leader_set and new.leader == NO_LEADER:
        out.append(change(StateChangeKind.PARTITION_OFFLINE, None))
    elif leader_set:
        out.append(change(StateChangeKind.BECOME_LEADER, new.leader))
        out.extend(
            change(StateChangeKind.BECOME_FOLLOWER, r, new.describe())
            for r in new.replicas
            if r != new.leader
        )
    elif old is not None:
        same_assignment = (old.replicas, old.adding_replicas, old.removing_replicas) == (
            new.replicas,
            new.adding_replicas,
            new.removing_replicas,
        )
        kind = StateChangeKind.ISR_CHANGE if same_assignment else StateChangeKind.UPDATE_PARTITION
        out.append(change(kind, new.leader if new.has_leader else None))
    out.extend(
        change(StateChangeKind.STOP_REPLICA, r, f"delete=true; {new.describe()}")
        for r in old_replicas
        if r not in new.replicas
    )
    return out


def handled_request(
    kind: StateChangeKind,
    topic_partition: TopicPartition,
    *,
    requester: Actor,
    handler: Actor,
    registration: PartitionRegistration | None,
    requested_ms: int,
    now_ms: int,
    error: ErrorCode = ErrorCode.NONE,
    detail: str = "",
) -> StateChange:
    """The record of a request the controller handled at ``now_ms``: COMPLETED, or REJECTED with
    ``error``. Epochs are those of ``registration`` (the resulting or current one; -1 if none)."""
    record = StateChange(
        kind=kind,
        topic_partition=topic_partition,
        requester=requester,
        target=handler,
        leader_epoch=-1 if registration is None else registration.leader_epoch,
        partition_epoch=-1 if registration is None else registration.partition_epoch,
        requested_ms=min(requested_ms, now_ms),
        detail=detail,
    )
    if error is ErrorCode.NONE:
        return record.completed(now_ms)
    return record.rejected(now_ms, error)
