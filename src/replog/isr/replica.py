"""The leader's view of one follower: ``ReplicaState`` and the caught-up rules.

A follower is "caught up" when its LEO equals the leader's, or when it last reached the leader's
LEO at most ``replica_lag_ms_max`` ago. ``last_caught_up_ms`` only moves forward, and only on a
fetch: the fetch offset proves the follower has every offset below it.
"""

from __future__ import annotations

import enum

import attrs

from replog.errors import invariant

__all__ = ["UNKNOWN_OFFSET", "ReplicaRole", "ReplicaState"]

#: A remote LEO / log start the leader has not learned yet (after becoming leader).
UNKNOWN_OFFSET = -1


@attrs.define
class ReplicaState:
    """Fetch state of one remote replica, as Kafka's ``Replica``/``ReplicaState`` keep it."""

    broker_id: int
    log_start_offset: int = UNKNOWN_OFFSET
    log_end_offset: int = UNKNOWN_OFFSET
    #: the leader's LEO when this replica last fetched (sampled before the read)
    last_fetch_leader_log_end_offset: int = UNKNOWN_OFFSET
    #: None: never (a replica the leader has not heard from in this role)
    last_fetch_ms: int | None = None
    last_caught_up_ms: int | None = None
    #: broker epoch carried by the last accepted fetch (-1: unknown or not sent)
    broker_epoch: int = -1

    def is_caught_up(self, leader_log_end_offset: int, now_ms: int, lag_ms_max: int) -> bool:
        """Equal LEO, or caught up within ``lag_ms_max`` (an idle follower stays in sync)."""
        if self.log_end_offset == leader_log_end_offset:
            return True
        if self.last_caught_up_ms is None:
            return False
        return now_ms - self.last_caught_up_ms <= lag_ms_max

    def update_fetch_state(
        self,
        *,
        fetch_offset: int,
        leader_log_end_offset: int,
        fetch_ms: int,
        log_start_offset: int,
        broker_epoch: int,
    ) -> bool:
        """Record an accepted fetch; returns whether the follower's LEO changed.

        ``leader_log_end_offset`` is the leader LEO sampled before the read. Reaching it proves
        the follower caught up now; reaching the LEO of the previous fetch proves it was caught
        up at that fetch, which keeps a slow but steady follower in sync.
        """
        invariant(fetch_offset >= 0, f"fetch offset {fetch_offset} is negative")
        if fetch_offset >= leader_log_end_offset:
            self._caught_up_at(fetch_ms)
        elif (
            fetch_offset >= self.last_fetch_leader_log_end_offset and self.last_fetch_ms is not None
        ):
            self._caught_up_at(self.last_fetch_ms)
        previous_end = self.log_end_offset
        self.log_end_offset = fetch_offset
        self.log_start_offset = log_start_offset
        self.last_fetch_leader_log_end_offset = max(
            leader_log_end_offset, self.last_fetch_leader_log_end_offset
        )
        self.last_fetch_ms = fetch_ms
        self.broker_epoch = broker_epoch
        return previous_end != fetch_offset

    def _caught_up_at(self, time_ms: int) -> None:
        if self.last_caught_up_ms is None or time_ms > self.last_caught_up_ms:
            self.last_caught_up_ms = time_ms

    def reset(
        self, *, now_ms: int, leader_log_end_offset: int, is_new_leader: bool, in_sync: bool
    ) -> None:
        """Reset on a new leader epoch (Kafka's resetReplicaState).

        A replica in the ISR counts as caught up now; one outside it as never (Kafka: time 0), so
        it cannot hold
        the HW back. A broker that just became leader forgets every remote LEO: the HW cannot
        advance until each maximal-ISR follower has fetched from it.
        """
        self.last_caught_up_ms = now_ms if in_sync else None
        if is_new_leader:
            self.log_start_offset = UNKNOWN_OFFSET
            self.log_end_offset = UNKNOWN_OFFSET
            self.last_fetch_leader_log_end_offset = UNKNOWN_OFFSET
            self.last_fetch_ms = None
            self.broker_epoch = -1
        else:
            self.last_fetch_leader_log_end_offset = leader_log_end_offset
            self.last_fetch_ms = now_ms if in_sync else None


class ReplicaRole(enum.Enum):
    """What this replica currently does for the partition."""

    OFFLINE = "offline"  # created, no role assigned yet
    LEADER = "leader"
    FOLLOWER = "follower"
