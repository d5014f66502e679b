"""Replica placement for new topics and partitions (Kafka's AdminUtils).

Rack-unaware. Brokers are sorted by id; ``n`` is their number. Partition ``p`` gets its first
replica (the preferred leader) at ``brokers[(p + start_index) % n]``, and replica ``j + 1``
(``j = 0 .. RF-2``) at ``brokers[(first + 1 + (shift + j) % (n - 1)) % n]``, where ``shift``
starts at ``replica_shift`` and grows by one at every partition ``p > 0`` with ``p % n == 0``.
So leaders go round-robin over the brokers, and the followers of consecutive rounds are spread
by a different stride each round.

Rack-aware. The same walk over a *rack-alternated* broker list (racks sorted, brokers sorted
within a rack, taking one broker from each rack in turn), with the follower stride multiplied
by the number of racks, skipping a broker when its rack already holds a replica while another
rack holds none, or when it already holds one while another broker holds none.

``start_index`` and ``replica_shift`` are parameters: the driver passes random values in
``[0, n)`` (this module never draws random numbers); tests pass fixed ones.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from replog.election.state import BrokerRegistration
from replog.errors import ErrorCode, ReplogError

__all__ = [
    "InconsistentRackError",
    "InvalidReplicationFactorError",
    "assign_replicas",
    "assign_replicas_rack_aware",
    "assign_replicas_rack_unaware",
    "rack_alternated_brokers",
]


class InvalidReplicationFactorError(ReplogError, ValueError):
    """The replication factor is not positive, or larger than the number of brokers."""

    code = ErrorCode.INVALID_REPLICATION_FACTOR

    def __init__(self, replication_factor: int, broker_count: int) -> None:
        if replication_factor <= 0:
            message = f"replication factor must be larger than 0, got {replication_factor}"
        else:
            message = (
                f"replication factor {replication_factor} is larger than the"
                f" {broker_count} available broker{'s' if broker_count != 1 else ''}"
            )
        super().__init__(message)
        self.replication_factor = replication_factor
        self.broker_count = broker_count


class InconsistentRackError(ReplogError, ValueError):
    """Some brokers have a rack and some do not, so a rack-aware placement is impossible."""

    code = ErrorCode.INVALID_REPLICA_ASSIGNMENT

    def __init__(self, without_rack: Iterable[int]) -> None:
        ids = sorted(without_rack)
        super().__init__(
            f"brokers {ids} have no rack while others do; give every broker a rack"
            " or place replicas without racks (rack_aware=False)"
        )
        self.without_rack = ids


def _check(replication_factor: int, broker_count: int, start_index: int, shift: int) -> None:
    if replication_factor <= 0 or replication_factor > broker_count:
        raise InvalidReplicationFactorError(replication_factor, broker_count)
    if start_index < 0 or shift < 0:
        raise ValueError(f"start_index and replica_shift must be >= 0: {start_index}, {shift}")


def _follower_index(first: int, shift: int, j: int, n: int) -> int:
    """Index of follower ``j`` of the partition whose leader sits at ``first``: never ``first``,
    because the step ``1 + (shift + j) % (n - 1)`` lies in ``[1, n - 1]``."""
    return (first + 1 + (shift + j) % (n - 1)) % n


def assign_replicas_rack_unaware(
    brokers: Iterable[int],
    partition_count: int,
    replication_factor: int,
    *,
    start_index: int,
    replica_shift: int,
    first_partition: int = 0,
) -> dict[int, tuple[int, ...]]:
    """Partition id -> replicas (preferred leader first) for partitions ``first_partition ..
    first_partition + partition_count - 1``. Raises InvalidReplicationFactorError."""
    ordered = sorted(set(brokers))
    n = len(ordered)
    _check(replication_factor, n, start_index, replica_shift)
    shift = replica_shift
    out: dict[int, tuple[int, ...]] = {}
    for p in range(first_partition, first_partition + partition_count):
        if p > 0 and p % n == 0:
            shift += 1
        first = (p + start_index) % n
        followers = [
            ordered[_follower_index(first, shift, j, n)] for j in range(replication_factor - 1)
        ]
        out[p] = (ordered[first], *followers)
    return out


def rack_alternated_brokers(broker_racks: Mapping[int, str]) -> list[int]:
    """Brokers interleaved by rack: racks sorted, brokers sorted within each rack, one broker
    from each rack in turn (racks that run out are skipped)."""
    by_rack: dict[str, list[int]] = {}
    for broker, rack in sorted(broker_racks.items()):
        by_rack.setdefault(rack, []).append(broker)
    columns = [by_rack[rack] for rack in sorted(by_rack)]
    depth = max((len(c) for c in columns), default=0)
    return [column[i] for i in range(depth) for column in columns if i < len(column)]


def assign_replicas_rack_aware(
    broker_racks: Mapping[int, str],
    partition_count: int,
    replication_factor: int,
    *,
    start_index: int,
    replica_shift: int,
    first_partition: int = 0,
) -> dict[int, tuple[int, ...]]:
    """Like ``assign_replicas_rack_unaware`` but spreading each partition over as many racks as
    possible (``min(RF, racks)``), then over distinct brokers."""
    arranged = rack_alternated_brokers(broker_racks)
    n = len(arranged)
    _check(replication_factor, n, start_index, replica_shift)
    rack_count = len(set(broker_racks.values()))
    shift = replica_shift
    out: dict[int, tuple[int, ...]] = {}
    for p in range(first_partition, first_partition + partition_count):
        if p > 0 and p % n == 0:
            shift += 1
        first = (p + start_index) % n
        chosen = [arranged[first]]
        racks_used = {broker_racks[arranged[first]]}
        k = 0
        while len(chosen) < replication_factor:
            broker = arranged[_follower_index(first, shift * rack_count, k, n)]
            k += 1
            rack = broker_racks[broker]
            rack_ok = rack not in racks_used or len(racks_used) == rack_count
            broker_ok = broker not in chosen or len(chosen) == n
            if rack_ok and broker_ok:
                chosen.append(broker)
                racks_used.add(rack)
        out[p] = tuple(chosen)
    return out


def assign_replicas(
    brokers: Iterable[BrokerRegistration],
    partition_count: int,
    replication_factor: int,
    *,
    start_index: int,
    replica_shift: int,
    first_partition: int = 0,
    rack_aware: bool = True,
) -> dict[int, tuple[int, ...]]:
    """Place replicas on ``brokers`` (the driver passes the unfenced ones): rack-aware when every
    broker has a rack, rack-unaware when none has (or ``rack_aware=False``). A mix raises
    InconsistentRackError; too few brokers raise InvalidReplicationFactorError."""
    registrations = list(brokers)
    racks = {b.broker_id: b.rack for b in registrations if b.rack is not None}
    ids = [b.broker_id for b in registrations]
    if rack_aware and racks:
        missing = [b for b in ids if b not in racks]
        if missing:
            raise InconsistentRackError(missing)
        return assign_replicas_rack_aware(
            racks,
            partition_count,
            replication_factor,
            start_index=start_index,
            replica_shift=replica_shift,
            first_partition=first_partition,
        )
    return assign_replicas_rack_unaware(
        ids,
        partition_count,
        replication_factor,
        start_index=start_index,
        replica_shift=replica_shift,
        first_partition=first_partition,
    )
