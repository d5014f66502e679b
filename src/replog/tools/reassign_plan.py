"""Reassignment plans for ``replog reassign``: where each partition's replicas should go.

Sans-IO and deterministic (no time, sockets, randomness): the caller reads the current
assignment and the brokers (with their racks) from the cluster and acts on the plan.

- ``plan_onto_brokers``: move partitions onto a set of brokers (Kafka's ``--generate`` with
  ``--broker-list``; also ``--remove-brokers``, whose set is every broker but the removed ones).
  Replicas already on an allowed broker stay (minimal movement); the rest are placed on the
  least loaded brokers, then replicas move from the most to the least loaded brokers until
  replica counts differ by at most one, and the preferred leaders (first replicas) are
  balanced by reordering replicas within partitions (which moves no data).
- ``plan_add_brokers``: give new brokers a fair share of the replicas with the fewest moves:
  only the new brokers receive replicas, each taken from the most loaded broker, until no
  new broker holds two fewer replicas than the most loaded one.

Rack awareness: when every allowed broker has a rack, a partition's replicas are spread over
as many racks as possible (replicas sharing a rack with another replica of the same partition
are moved when a free rack exists) and no move reduces a partition's rack count. Brokers with
and without racks mixed are an error unless ``rack_aware=False``.

A moved replica takes the place of the one it replaces in the replica list, so a moved
preferred leader is replaced by the broker that receives it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence, Set

import attrs

from replog.errors import ReplogError

__all__ = [
    "Assignment",
    "PlanError",
    "moved_replicas",
    "plan_add_brokers",
    "plan_onto_brokers",
]

#: replicas per partition, the first being the preferred leader
Assignment = Mapping[tuple[str, int], Sequence[int]]


class PlanError(ReplogError):
    """No plan satisfies the request (too few brokers for a replication factor, mixed racks)."""


@attrs.define
class _ReassignmentPlan:
    """The plan being built: replicas per partition, their original sets, the broker racks."""

    replicas: dict[tuple[str, int], list[int]]
    original: dict[tuple[str, int], frozenset[int]]
    racks: dict[int, str | None]
    rack_aware: bool

    def load(self) -> dict[int, int]:
        counts = dict.fromkeys(self.racks, 0)
        for brokers in self.replicas.values():
            for broker in brokers:
                if broker in counts:
                    counts[broker] += 1
        return counts

    def rack_count(self, brokers: Sequence[int]) -> int:
        return len({self.racks.get(b) for b in brokers}) if self.rack_aware else 0

    def move_keeps_racks(self, tp: tuple[str, int], old: int, new: int) -> bool:
        """Whether replacing ``old`` by ``new`` in ``tp`` keeps its number of racks."""
        now = self.replicas[tp]
        after = [new if b == old else b for b in now]
        return self.rack_count(after) >= self.rack_count(now)


def _racks_used(brokers: Mapping[int, str | None], rack_aware: bool) -> bool:
    with_rack = [b for b, rack in brokers.items() if rack is not None]
    if not rack_aware or not with_rack:
        return False
    if len(with_rack) != len(brokers):
        missing = sorted(b for b, rack in brokers.items() if rack is None)
        raise PlanError(
            f"brokers {missing} have no rack while others do; set racks on every broker "
            "or disable rack awareness"
        )
    return True


def moved_replicas(current: Assignment, proposed: Assignment) -> int:
    """How many replicas the plan copies to a broker that does not hold them yet."""
    return sum(len(set(proposed[tp]) - set(current.get(tp, ()))) for tp in proposed)


def plan_onto_brokers(
    current: Assignment, brokers: Mapping[int, str | None], *, rack_aware: bool = True
) -> dict[tuple[str, int], tuple[int, ...]]:
    """Every partition of ``current`` placed on ``brokers`` (id -> rack or None), keeping
    each partition's replication factor; see the module docstring."""
    if not brokers:
        raise PlanError("no brokers to place replicas on")
    plan = _ReassignmentPlan(
        replicas={},
        original={tp: frozenset(r) for tp, r in current.items()},
        racks=dict(brokers),
        rack_aware=_racks_used(brokers, rack_aware),
    )
    for tp in sorted(current):
        factor = len(current[tp])
        if factor > len(brokers):
            raise PlanError(
                f"{tp[0]}-{tp[1]} has {factor} replicas but only {len(brokers)} brokers remain"
            )
        plan.replicas[tp] = _kept(plan, current[tp])
    for tp in sorted(current, key=lambda tp: (-_open(plan, current, tp), tp)):
        _fill(plan, tp, len(current[tp]))
    _balance_replicas(plan, receivers=set(brokers))
    _balance_leaders(plan)
    return {tp: tuple(r) for tp, r in sorted(plan.replicas.items())}


def plan_add_brokers(
    current: Assignment,
    brokers: Mapping[int, str | None],
    new_brokers: Set[int],
    *,
    rack_aware: bool = True,
) -> dict[tuple[str, int], tuple[int, ...]]:
    """``current`` with a fair share of its replicas moved onto ``new_brokers`` (which must be
    among ``brokers``), moving as few replicas as that takes; see the module docstring."""
    unknown = sorted(set(new_brokers) - set(brokers))
    if unknown:
        raise PlanError(f"brokers {unknown} are not in the cluster")
    plan = _ReassignmentPlan(
        replicas={tp: list(r) for tp, r in current.items()},
        original={tp: frozenset(r) for tp, r in current.items()},
        racks=dict(brokers),
        rack_aware=_racks_used(brokers, rack_aware),
    )
    _balance_replicas(plan, receivers=set(new_brokers))
    return {tp: tuple(r) for tp, r in sorted(plan.replicas.items())}


def _kept(plan: _ReassignmentPlan, replicas: Sequence[int]) -> list[int]:
    """The replicas that may stay: on an allowed broker, once each, and (rack-aware) not on a
    rack another kept replica uses while enough racks exist for one replica per rack."""
    distinct_racks = len(set(plan.racks.values()))
    kept: list[int] = []
    racks: set[str | None] = set()
    for broker in replicas:
        if broker not in plan.racks or broker in kept:
            continue
        rack = plan.racks[broker]
        if plan.rack_aware and rack in racks and distinct_racks >= len(replicas):
            continue
        kept.append(broker)
        racks.add(rack)
    return kept


def _open(plan: _ReassignmentPlan, current: Assignment, tp: tuple[str, int]) -> int:
    return len(current[tp]) - len(plan.replicas[tp])


def _fill(plan: _ReassignmentPlan, tp: tuple[str, int], factor: int) -> None:
    """Add brokers to ``tp`` until it has ``factor``: a new rack first, then the least loaded."""
    replicas = plan.replicas[tp]
    load = plan.load()
    while len(replicas) < factor:
        used_racks = {plan.racks[b] for b in replicas}
        candidates = [b for b in plan.racks if b not in replicas]
        best = min(
            candidates,
            key=lambda b: (plan.rack_aware and plan.racks[b] in used_racks, load[b], b),
        )
        replicas.append(best)
        load[best] += 1


def _balance_replicas(plan: _ReassignmentPlan, receivers: Set[int]) -> None:
    """Move replicas from the most loaded brokers to the least loaded ``receivers`` while two
    differ by more than one. Each move lowers the sum of squared loads, so this ends."""
    while True:
        load = plan.load()
        donors = sorted(load, key=lambda b: (-load[b], b))
        takers = sorted(receivers, key=lambda b: (load[b], b))
        move = next(
            (
                (tp, donor, taker)
                for taker in takers
                for donor in donors
                if load[donor] > load[taker] + 1
                for tp in _movable(plan, donor, taker)
            ),
            None,
        )
        if move is None:
            return
        tp, donor, taker = move
        replicas = plan.replicas[tp]
        replicas[replicas.index(donor)] = taker


def _movable(plan: _ReassignmentPlan, donor: int, taker: int) -> list[tuple[str, int]]:
    """Partitions whose replica on ``donor`` may move to ``taker``, cheapest first: replicas
    the plan already moves (no extra copy), then followers before preferred leaders."""
    found = [
        tp
        for tp, replicas in plan.replicas.items()
        if donor in replicas and taker not in replicas and plan.move_keeps_racks(tp, donor, taker)
    ]
    return sorted(
        found,
        key=lambda tp: (
            donor in plan.original[tp],
            plan.replicas[tp][0] == donor,
            tp,
        ),
    )


def _balance_leaders(plan: _ReassignmentPlan) -> None:
    """Reorder replicas so preferred leaders spread evenly: a partition keeps its first
    replica unless a follower leads at least two fewer partitions, then that follower moves
    to the front (each swap lowers the sum of squared leader counts, so this ends)."""
    changed = True
    while changed:
        changed = False
        leaders = dict.fromkeys(plan.racks, 0)
        for replicas in plan.replicas.values():
            leaders[replicas[0]] += 1
        for tp in sorted(plan.replicas):
            replicas = plan.replicas[tp]
            head = replicas[0]
            best = min(replicas[1:], key=lambda b: (leaders[b], b), default=head)
            if leaders[best] + 1 < leaders[head]:
                replicas.remove(best)
                replicas.insert(0, best)
                leaders[head] -= 1
                leaders[best] += 1
                changed = True
