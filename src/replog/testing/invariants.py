"""Cluster invariants checked after every simulation step, on plain views of the replicas.

The simulator builds a ``ReplicaView`` per hosted replica of every running broker, and the
``InvariantChecker`` remembers what it needs across steps (who led which epoch, the HW each
leader term reached, the HW consumers saw, the acknowledged acks=all records). Each check
returns human-readable violations; an empty list is a pass. The views are plain values so the
checks can be unit-tested on deliberately broken states.

Checked:

- ``one-leader-per-epoch``: no two brokers ever lead one partition in one leader epoch;
- ``leader-hw-decreased``: a leader's HW never goes down while it leads one epoch;
- ``hw-under-min-isr``: a leader's HW moves only while its committed ISR has at least
  min(min ISR, replicas) members (checked against the ISR before and after the step and every
  ISR the metadata applied during the step gave it: the HW may move just before a shrink in
  the same step);
- ``consumer-hw-decreased``: the HW answered to one client never goes back for a partition;
- ``isr-not-in-ar``: ISR is a subset of AR (stored states and every leader's view);
- ``isr-logs-diverge``: ISR members' records below the leader's HW are identical;
- ``acked-record-lost``: the current leader holds every acknowledged acks=all record, unchanged.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import attrs

__all__ = ["InvariantChecker", "ReplicaView"]


@attrs.frozen
class ReplicaView:
    """One replica as the checker sees it. ``records``: offset -> value for every record in
    the log; ``current``: this leader's epoch is the stored one (it is not a deposed leader
    that has not heard yet)."""

    broker_id: int
    incarnation: int
    tp: tuple[str, int]
    is_leader: bool
    leader_epoch: int
    high_watermark: int
    log_end_offset: int
    isr: frozenset[int]
    assigned: tuple[int, ...]
    records: Mapping[int, bytes]
    current: bool = True
    #: the largest committed ISR this leader was given by metadata applied during the step (a
    #: feed batch may raise and lower it in one step; the HW may move in between)
    isr_size_max_in_step: int = 0


@attrs.define
class InvariantChecker:
    """Carries the cross-step memory of the invariants (see the module docstring)."""

    leaders: dict[tuple[tuple[str, int], int], int] = attrs.field(factory=dict)
    leader_hw: dict[tuple[int, int, tuple[str, int], int], int] = attrs.field(factory=dict)
    #: (client node, partition) -> the highest HW answered to that client
    consumer_hw: dict[tuple[int, tuple[str, int]], int] = attrs.field(factory=dict)
    #: tp -> offset -> value of every acknowledged acks=all record
    acked: dict[tuple[str, int], dict[int, bytes]] = attrs.field(factory=dict)
    #: the min.insync.replicas the run set (wherever it set it: the check is independent of
    #: how the configuration reaches the brokers)
    min_isr: int = 1
    leader_isr_size: dict[tuple[int, int, tuple[str, int], int], int] = attrs.field(factory=dict)

    def on_acked(self, tp: tuple[str, int], offset: int, value: bytes) -> list[str]:
        """Remember an acknowledged acks=all record (two acks for one offset are a violation)."""
        at = self.acked.setdefault(tp, {})
        if offset in at and at[offset] != value:
            return [f"acked-record-lost: {tp} offset {offset} acked as {at[offset]!r}, {value!r}"]
        at[offset] = value
        return []

    def on_consumer_hw(self, tp: tuple[str, int], high_watermark: int, *, client: int) -> list[str]:
        """An answer told the client at node ``client`` ``high_watermark``. Per client: answers
        to different clients race on the network (one computed earlier may arrive later), so
        only what one client sees of one partition must never go back."""
        previous = self.consumer_hw.get((client, tp), 0)
        if high_watermark < previous:
            return [f"consumer-hw-decreased: {tp} HW {previous} -> {high_watermark}"]
        self.consumer_hw[(client, tp)] = high_watermark
        return []

    def check(
        self,
        views: Iterable[ReplicaView],
        stored: Mapping[tuple[str, int], tuple[tuple[int, ...], tuple[int, ...]]],
    ) -> list[str]:
        """All per-step checks. ``stored``: tp -> (AR, ISR) as the coordinator holds them."""
        views = list(views)
        problems: list[str] = []
        problems += self.check_leaders(views)
        problems += self.check_isr_subset(views, stored)
        problems += check_isr_logs_agree(views)
        problems += check_acked_present(views, self.acked)
        return problems

    def check_leaders(self, views: list[ReplicaView]) -> list[str]:
        """One leader per (partition, epoch), ever; a leader's HW never decreases."""
        problems: list[str] = []
        for v in views:
            if not v.is_leader:
                continue
            key = (v.tp, v.leader_epoch)
            owner = self.leaders.setdefault(key, v.broker_id)
            if owner != v.broker_id:
                problems.append(
                    f"one-leader-per-epoch: {v.tp} epoch {v.leader_epoch} led by {owner} "
                    f"and {v.broker_id}"
                )
            term = (v.broker_id, v.incarnation, v.tp, v.leader_epoch)
            previous = self.leader_hw.get(term, -1)
            if v.high_watermark < previous:
                problems.append(
                    f"leader-hw-decreased: broker {v.broker_id} {v.tp} epoch {v.leader_epoch} "
                    f"HW {previous} -> {v.high_watermark}"
                )
            if 0 <= previous < v.high_watermark:
                needed = min(self.min_isr, len(v.assigned))
                before = self.leader_isr_size.get(term, len(v.isr))
                if max(before, len(v.isr), v.isr_size_max_in_step) < needed:
                    problems.append(
                        f"hw-under-min-isr: broker {v.broker_id} {v.tp} epoch {v.leader_epoch} "
                        f"HW {previous} -> {v.high_watermark} with ISR {sorted(v.isr)} "
                        f"(min ISR {needed})"
                    )
            self.leader_hw[term] = max(previous, v.high_watermark)
            self.leader_isr_size[term] = len(v.isr)
        return problems

    @staticmethod
    def check_isr_subset(
        views: list[ReplicaView],
        stored: Mapping[tuple[str, int], tuple[tuple[int, ...], tuple[int, ...]]],
    ) -> list[str]:
        """ISR within AR, in the store and in every leader."""
        problems = [
            f"isr-not-in-ar: stored {tp} ISR {sorted(isr)} AR {list(ar)}"
            for tp, (ar, isr) in sorted(stored.items())
            if not set(isr) <= set(ar)
        ]
        problems += [
            f"isr-not-in-ar: leader {v.broker_id} {v.tp} ISR {sorted(v.isr)} AR {list(v.assigned)}"
            for v in views
            if v.is_leader and not v.isr <= set(v.assigned)
        ]
        return problems


def check_isr_logs_agree(views: list[ReplicaView]) -> list[str]:
    """Below the current leader's HW, every ISR member holds the leader's records (up to its
    own LEO: a member may lag between fetches, never disagree)."""
    problems: list[str] = []
    by_tp: dict[tuple[str, int], list[ReplicaView]] = {}
    for v in views:
        by_tp.setdefault(v.tp, []).append(v)
    for tp, replicas in sorted(by_tp.items()):
        leaders = [v for v in replicas if v.is_leader and v.current]
        if len(leaders) != 1:
            continue
        leader = leaders[0]
        for member in replicas:
            if member is leader or member.broker_id not in leader.isr:
                continue
            upper = min(leader.high_watermark, member.log_end_offset, leader.log_end_offset)
            for offset in range(upper):
                mine, theirs = member.records.get(offset), leader.records.get(offset)
                if mine != theirs:
                    problems.append(
                        f"isr-logs-diverge: {tp} offset {offset}: leader {leader.broker_id} "
                        f"has {theirs!r}, ISR member {member.broker_id} has {mine!r} "
                        f"(HW {leader.high_watermark})"
                    )
                    break
    return problems


def check_acked_present(
    views: list[ReplicaView], acked: Mapping[tuple[str, int], Mapping[int, bytes]]
) -> list[str]:
    """The current leader of each partition holds every acknowledged acks=all record."""
    problems: list[str] = []
    for v in views:
        if not (v.is_leader and v.current):
            continue
        for offset, value in sorted(acked.get(v.tp, {}).items()):
            got = v.records.get(offset)
            if got != value:
                problems.append(
                    f"acked-record-lost: {v.tp} offset {offset} acked as {value!r}, leader "
                    f"{v.broker_id} (epoch {v.leader_epoch}, LEO {v.log_end_offset}) has {got!r}"
                )
                break
    return problems
