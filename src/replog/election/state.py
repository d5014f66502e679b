"""The values every election decision reads: partition registrations and the brokers' liveness.

Theory of operation. The controller keeps one ``PartitionRegistration`` per partition (KRaft's
partition record) and a ``ClusterView`` of broker registrations. A decision in this package
reads both and returns the *next* registration; it never mutates anything. The driver writes the
new registration through the coordinator with compare-and-set on ``partition_epoch``, which is
why every real change bumps it.

Kafka's original replication vocabulary stays visible: ``assigned`` (AR), ``isr``, ``catching_up``
(CUR = AR - ISR) and ``reassigning`` (RAR, the target replicas of an ongoing reassignment), mapped
onto Kafka's current replicas/adding/removing model: during a reassignment ``replicas`` = target
replicas followed by the removing ones.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import attrs

from replog.errors import invariant
from replog.metadata.types import NO_LEADER, LeaderRecoveryState
from replog.topics import TopicPartition

__all__ = [
    "BrokerRegistration",
    "ClusterView",
    "PartitionRegistration",
    "TopicPartition",
    "format_ids",
]


def format_ids(values: Iterable[int]) -> str:
    """Broker ids as ``[1,2,3]``: the compact form used in describe() and state-change details."""
    return "[" + ",".join(str(v) for v in values) + "]"


def _int_tuple(values: Iterable[int]) -> tuple[int, ...]:
    return tuple(int(v) for v in values)


def _distinct(values: tuple[int, ...]) -> bool:
    return len(set(values)) == len(values)


@attrs.frozen(kw_only=True)
class PartitionRegistration:
    """One partition's replication state as the controller records it (KRaft's registration).

    ``replicas`` is the assignment in order (``replicas[0]`` is the preferred leader); ``isr``,
    ``elr`` and ``last_known_elr`` are sets kept as tuples. ``leader`` is ``NO_LEADER`` (-1) when
    offline. Construction checks the structural invariants; it raises ``InvariantError`` on a
    registration no decision may ever produce.
    """

    replicas: tuple[int, ...] = attrs.field(converter=_int_tuple)
    isr: tuple[int, ...] = attrs.field(converter=_int_tuple)
    leader: int = NO_LEADER
    leader_epoch: int = 0
    partition_epoch: int = 0
    leader_recovery_state: LeaderRecoveryState = LeaderRecoveryState.RECOVERED
    elr: tuple[int, ...] = attrs.field(default=(), converter=_int_tuple)
    last_known_elr: tuple[int, ...] = attrs.field(default=(), converter=_int_tuple)
    adding_replicas: tuple[int, ...] = attrs.field(default=(), converter=_int_tuple)
    removing_replicas: tuple[int, ...] = attrs.field(default=(), converter=_int_tuple)

    def __attrs_post_init__(self) -> None:
        replicas = set(self.replicas)
        invariant(len(self.replicas) > 0, "a partition has at least one replica")
        for name in ("replicas", "isr", "elr", "last_known_elr", "adding_replicas"):
            invariant(_distinct(getattr(self, name)), f"{name} has duplicates: {self}")
        invariant(_distinct(self.removing_replicas), f"removing has duplicates: {self}")
        invariant(set(self.isr) <= replicas, f"ISR {self.isr} not within replicas {self.replicas}")
        invariant(set(self.elr) <= replicas, f"ELR {self.elr} not within replicas {self.replicas}")
        invariant(not set(self.elr) & set(self.isr), f"ELR {self.elr} overlaps ISR {self.isr}")
        invariant(
            set(self.adding_replicas) <= replicas and set(self.removing_replicas) <= replicas,
            f"adding/removing not within replicas: {self}",
        )
        invariant(
            not set(self.adding_replicas) & set(self.removing_replicas),
            f"a replica is both adding and removing: {self}",
        )
        invariant(
            self.leader == NO_LEADER or self.leader in self.isr,
            f"leader {self.leader} not in ISR {self.isr}",
        )
        invariant(self.leader_epoch >= 0 and self.partition_epoch >= 0, f"negative epoch: {self}")
        invariant(
            self.leader_recovery_state is LeaderRecoveryState.RECOVERED or len(self.isr) <= 1,
            f"a RECOVERING partition has an ISR of at most its leader: {self}",
        )

    @classmethod
    def initial(
        cls, replicas: Iterable[int], isr: Iterable[int] | None = None, leader: int | None = None
    ) -> PartitionRegistration:
        """A freshly created partition at epochs 0/0: ISR defaults to every replica, the leader to
        the first ISR member in assignment order (use ``partition_change.create_partition`` to
        take broker liveness into account)."""
        replicas_t = _int_tuple(replicas)
        isr_t = replicas_t if isr is None else _int_tuple(isr)
        if leader is None:
            leader = next((r for r in replicas_t if r in isr_t), NO_LEADER)
        return cls(replicas=replicas_t, isr=isr_t, leader=leader)

    # -- AR, ISR, CUR, RAR -----------------------------------------------------------------

    @property
    def assigned(self) -> tuple[int, ...]:
        """AR: the assigned replicas in order (during a reassignment: target, then removing)."""
        return self.replicas

    @property
    def catching_up(self) -> tuple[int, ...]:
        """CUR = AR - ISR, in assignment order."""
        isr = set(self.isr)
        return tuple(r for r in self.replicas if r not in isr)

    @property
    def is_reassigning(self) -> bool:
        """Whether a reassignment is in progress (some replicas are being added or removed)."""
        return bool(self.adding_replicas or self.removing_replicas)

    @property
    def target_replicas(self) -> tuple[int, ...]:
        """The replicas this partition is heading to: ``replicas - removing``, in order."""
        removing = set(self.removing_replicas)
        return tuple(r for r in self.replicas if r not in removing)

    @property
    def reassigning(self) -> tuple[int, ...]:
        """RAR: the target replicas of an ongoing reassignment, or () when none is in progress."""
        return self.target_replicas if self.is_reassigning else ()

    @property
    def original_replicas(self) -> tuple[int, ...]:
        """OAR: the replicas before the ongoing reassignment (``replicas - adding``), in order."""
        adding = set(self.adding_replicas)
        return tuple(r for r in self.replicas if r not in adding)

    @property
    def preferred_leader(self) -> int:
        """``replicas[0]``, the leader a preferred election aims for."""
        return self.replicas[0]

    @property
    def has_leader(self) -> bool:
        """Whether the partition is online (has a leader)."""
        return self.leader != NO_LEADER

    def describe(self) -> str:
        """Compact text for logs and state-change details: ``leader=1 isr=[1,2] ...``."""
        fmt = format_ids
        text = (
            f"replicas={fmt(self.replicas)} leader={self.leader} isr={fmt(self.isr)}"
            f" leader_epoch={self.leader_epoch} partition_epoch={self.partition_epoch}"
        )
        if self.elr or self.last_known_elr:
            text += f" elr={fmt(self.elr)} last_known_elr={fmt(self.last_known_elr)}"
        if self.is_reassigning:
            text += f" adding={fmt(self.adding_replicas)} removing={fmt(self.removing_replicas)}"
        if self.leader_recovery_state is LeaderRecoveryState.RECOVERING:
            text += " RECOVERING"
        return text


@attrs.frozen(kw_only=True)
class BrokerRegistration:
    """One broker as the controller sees it: id, incarnation (broker epoch), liveness, rack.

    ``broker_epoch`` changes every time the broker registers again (a restart); a request that
    carries an older epoch comes from a previous incarnation (KIP-903).
    """

    broker_id: int
    broker_epoch: int = 0
    fenced: bool = False
    in_controlled_shutdown: bool = False
    rack: str | None = None

    @property
    def is_active(self) -> bool:
        """Unfenced and not shutting down: may lead, and may join an ISR (KIP-841)."""
        return not self.fenced and not self.in_controlled_shutdown


def _brokers_by_id(brokers: Iterable[BrokerRegistration]) -> Mapping[int, BrokerRegistration]:
    by_id: dict[int, BrokerRegistration] = {}
    for broker in brokers:
        invariant(broker.broker_id not in by_id, f"broker {broker.broker_id} registered twice")
        by_id[broker.broker_id] = broker
    return by_id


@attrs.frozen
class ClusterView:
    """The controller's liveness view: which brokers are registered, fenced, shutting down.

    Immutable; the ``with_*`` methods return an updated copy, so a decision can be computed
    against the view *after* an event without the driver mutating shared state.
    """

    brokers: Mapping[int, BrokerRegistration] = attrs.field(converter=_brokers_by_id)

    @classmethod
    def of(cls, *broker_ids: int, rack: str | None = None) -> ClusterView:
        """A view where each given broker is registered at epoch 0, unfenced, in ``rack``."""
        return cls(BrokerRegistration(broker_id=b, rack=rack) for b in broker_ids)

    def broker(self, broker_id: int) -> BrokerRegistration | None:
        """The registration of ``broker_id``, or None when it is not registered."""
        return self.brokers.get(broker_id)

    def is_acceptable_leader(self, broker_id: int) -> bool:
        """KRaft's leader acceptor: registered, not fenced, not in controlled shutdown."""
        broker = self.brokers.get(broker_id)
        return broker is not None and broker.is_active

    def is_isr_eligible(self, broker_id: int, broker_epoch: int = -1) -> bool:
        """May this broker be in a proposed ISR? Active, and (KIP-903) the broker epoch the
        proposal carries is -1 (unknown) or the current incarnation's."""
        broker = self.brokers.get(broker_id)
        if broker is None or not broker.is_active:
            return False
        return broker_epoch == -1 or broker_epoch == broker.broker_epoch

    @property
    def active_broker_ids(self) -> tuple[int, ...]:
        """Sorted ids of the brokers that may lead (unfenced, not shutting down)."""
        return tuple(sorted(b for b, reg in self.brokers.items() if reg.is_active))

    def _registered(self, broker_id: int) -> BrokerRegistration:
        broker = self.brokers.get(broker_id)
        if broker is None:
            raise ValueError(f"broker {broker_id} is not registered")
        return broker

    def with_fenced(self, broker_id: int) -> ClusterView:
        """The view after the broker is fenced (missed heartbeats)."""
        return self.with_registration(attrs.evolve(self._registered(broker_id), fenced=True))

    def with_unfenced(self, broker_id: int) -> ClusterView:
        """The view after the broker is unfenced (caught up with metadata, heartbeating)."""
        broker = self._registered(broker_id)
        return self.with_registration(
            attrs.evolve(broker, fenced=False, in_controlled_shutdown=False)
        )

    def with_controlled_shutdown(self, broker_id: int) -> ClusterView:
        """The view after the broker asks for a controlled shutdown."""
        broker = self._registered(broker_id)
        return self.with_registration(attrs.evolve(broker, in_controlled_shutdown=True))

    def with_registration(self, broker: BrokerRegistration) -> ClusterView:
        """The view after ``broker`` (re-)registers, replacing any older incarnation."""
        others = [reg for b, reg in sorted(self.brokers.items()) if b != broker.broker_id]
        return ClusterView([*others, broker])
