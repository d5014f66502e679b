"""Partition assignors: how a group's leader divides the subscribed partitions among members.

Pure functions of the members' subscriptions and the partition counts, with Kafka's names and
rules, so a group mixing replog consumers and Java/librdkafka consumers agrees on the protocol
("range", "roundrobin") and on the result:

- **range**: per topic, the members subscribed to it sorted by member id; with P partitions and
  M members each gets P // M consecutive partitions, and the first P % M members one more.
- **roundrobin**: every subscribed partition, sorted by (topic, partition), dealt in turn to the
  members sorted by member id, skipping a member not subscribed to that topic.

Every member appears in the result, possibly with nothing; every partition of a subscribed topic
goes to exactly one member subscribed to it.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from typing import Protocol

from replog.errors import InvalidConfigError

__all__ = [
    "ASSIGNORS",
    "Assignment",
    "Assignor",
    "RangeAssignor",
    "RoundRobinAssignor",
    "assignor_for",
]

Assignment = dict[str, list[tuple[str, int]]]
"""member id -> its (topic, partition)s, sorted."""


class Assignor(Protocol):
    """A named assignment strategy (the JoinGroup protocol name)."""

    name: str

    def assign(
        self, subscriptions: Mapping[str, Sequence[str]], partition_counts: Mapping[str, int]
    ) -> Assignment:
        """Divide the partitions of subscribed topics (``partition_counts``; a topic missing
        from it has no partitions yet) among the members (member id -> topics)."""
        ...


class RangeAssignor:
    """Kafka's ``range`` (module docstring)."""

    name = "range"

    def assign(
        self, subscriptions: Mapping[str, Sequence[str]], partition_counts: Mapping[str, int]
    ) -> Assignment:
        """See ``Assignor.assign``."""
        out: Assignment = {member: [] for member in subscriptions}
        topics = sorted({t for topics in subscriptions.values() for t in topics})
        for topic in topics:
            members = sorted(m for m, subscribed in subscriptions.items() if topic in subscribed)
            count = partition_counts.get(topic, 0)
            each, extra = divmod(count, len(members))
            start = 0
            for index, member in enumerate(members):
                size = each + (1 if index < extra else 0)
                out[member].extend((topic, p) for p in range(start, start + size))
                start += size
        return {member: sorted(tps) for member, tps in out.items()}


class RoundRobinAssignor:
    """Kafka's ``roundrobin`` (module docstring)."""

    name = "roundrobin"

    def assign(
        self, subscriptions: Mapping[str, Sequence[str]], partition_counts: Mapping[str, int]
    ) -> Assignment:
        """See ``Assignor.assign``."""
        out: Assignment = {member: [] for member in subscriptions}
        members = sorted(subscriptions)
        if not members:
            return out
        topics = sorted({t for topics in subscriptions.values() for t in topics})
        turn = itertools.cycle(members)
        for topic in topics:
            for partition in range(partition_counts.get(topic, 0)):
                member = next(turn)
                while topic not in subscriptions[member]:
                    member = next(turn)
                out[member].append((topic, partition))
        return {member: sorted(tps) for member, tps in out.items()}


ASSIGNORS: dict[str, Assignor] = {a.name: a for a in (RangeAssignor(), RoundRobinAssignor())}
"""The assignors replog's consumer offers, by protocol name."""


def assignor_for(name: str) -> Assignor:
    """The assignor called ``name`` (Kafka's class names are accepted too)."""
    short = {
        "org.apache.kafka.clients.consumer.RangeAssignor": "range",
        "org.apache.kafka.clients.consumer.RoundRobinAssignor": "roundrobin",
    }.get(name, name)
    assignor = ASSIGNORS.get(short)
    if assignor is None:
        raise InvalidConfigError(
            f"unknown partition assignor {name!r} (known: {sorted(ASSIGNORS)})"
        )
    return assignor
