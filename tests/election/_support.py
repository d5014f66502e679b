"""Shared helpers for the election tests: a partition name, short constructors, apply()."""

from __future__ import annotations

from collections.abc import Iterable

from replog.election import Decision, PartitionRegistration, TopicPartition

TP = TopicPartition("foo", 0)


def registration(
    replicas: Iterable[int],
    isr: Iterable[int],
    leader: int,
    *,
    leader_epoch: int = 5,
    partition_epoch: int = 9,
    **kwargs: object,
) -> PartitionRegistration:
    """A registration at arbitrary non-zero epochs (so +1 checks are meaningful)."""
    return PartitionRegistration(
        replicas=tuple(replicas),
        isr=tuple(isr),
        leader=leader,
        leader_epoch=leader_epoch,
        partition_epoch=partition_epoch,
        **kwargs,  # type: ignore[arg-type]
    )


def applied(decision: Decision) -> PartitionRegistration:
    """The registration a successful decision produces (fails the test on an error code)."""
    assert decision.ok, f"decision failed with {decision.error.name}"
    return decision.registration


def lines(decision: Decision) -> list[str]:
    """The one-line forms of a decision's state changes."""
    return [str(change) for change in decision.state_changes]
