"""A classic group's state: its members, generation, protocol and leader, and the rules that
only read or rearrange that state (no replies, no records, no timers firing).

Theory of operation (Kafka's ClassicGroup, which ``membership`` drives):

    Empty ──join──▶ PreparingRebalance ──all joined / timeout──▶ CompletingRebalance
      ▲                  ▲      │ (no members left)                  │ leader's SyncGroup,
      │                  │      ▼                                    ▼ group metadata written
      └──────────────────┴── Empty        Stable ◀───────────────────┘
                                          │ member joins/leaves/changes, leader rejoins
                                          ▼
                                   PreparingRebalance
    any state ──▶ Dead (being deleted or unloaded); Dead ──▶ Empty only when replog reverts a
    deletion whose tombstones could not be written.

- A generation is a set of members, one protocol every member supports (chosen by the members'
  votes, each voting for its most preferred candidate), and a leader who computes everyone's
  assignment. ``generation_id`` grows by one each time a join phase completes.
- Members awaiting a JoinGroup or SyncGroup response hold the request id of that request; the
  coordinator answers it later.
- Static members (KIP-345) carry a ``group_instance_id``; ``static_members`` maps it to the
  current member id, and a join with that instance id and no member id replaces the old member.
- ``pending_members`` are member ids handed out with MEMBER_ID_REQUIRED (KIP-394) that have not
  joined yet; each has a deadline (the session timeout).
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Iterable

import attrs

from replog.errors import invariant, unreachable
from replog.protocol.consumer_protocol import PROTOCOL_TYPE as CONSUMER_PROTOCOL_TYPE

__all__ = [
    "ClassicGroup",
    "GroupState",
    "JoinTimer",
    "Member",
    "Protocol",
    "SubscriptionReader",
    "SyncTimer",
]

SubscriptionReader = Callable[[bytes], frozenset[str] | None]
"""Reads the topics a member's selected-protocol metadata subscribes to (None: cannot tell)."""


class GroupState(enum.Enum):
    """Kafka's classic group states; the value is the name on the wire (ListGroups, Describe)."""

    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"


_VALID_PREVIOUS: dict[GroupState, frozenset[GroupState]] = {
    GroupState.PREPARING_REBALANCE: frozenset(
        {GroupState.STABLE, GroupState.COMPLETING_REBALANCE, GroupState.EMPTY}
    ),
    GroupState.COMPLETING_REBALANCE: frozenset({GroupState.PREPARING_REBALANCE}),
    GroupState.STABLE: frozenset({GroupState.COMPLETING_REBALANCE}),
    GroupState.DEAD: frozenset(GroupState),
    # Dead -> Empty is replog's: a deletion whose tombstones failed is undone.
    GroupState.EMPTY: frozenset({GroupState.PREPARING_REBALANCE, GroupState.DEAD}),
}


@attrs.frozen
class Protocol:
    """A protocol a member supports (an assignor name for consumers) and its opaque metadata."""

    name: str
    metadata: bytes


@attrs.frozen
class JoinTimer:
    """When the join phase ends. The initial rebalance of an empty group waits ``delay_ms``
    and extends itself (by at most the configured delay, within ``remaining_ms``) while new
    members keep arriving; other join phases end at the rebalance timeout or when all joined."""

    deadline_ms: int
    initial: bool
    delay_ms: int = 0
    remaining_ms: int = 0


@attrs.frozen
class SyncTimer:
    """When members of ``generation_id`` that have not sent SyncGroup are removed."""

    deadline_ms: int
    generation_id: int


@attrs.define(eq=False)
class Member:
    """One member of a classic group."""

    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    protocol_type: str
    protocols: tuple[Protocol, ...]
    assignment: bytes = b""
    awaiting_join: int | None = None
    awaiting_sync: int | None = None
    is_new: bool = False
    heartbeat_deadline_ms: int | None = None

    @property
    def is_static(self) -> bool:
        """Whether the member has a group instance id (KIP-345)."""
        return self.group_instance_id is not None

    def metadata(self, protocol_name: str) -> bytes:
        """The member's metadata for ``protocol_name`` (a protocol of the group's choosing)."""
        for protocol in self.protocols:
            if protocol.name == protocol_name:
                return protocol.metadata
        unreachable(f"member {self.member_id} does not support {protocol_name}")

    def matches(self, protocols: tuple[Protocol, ...]) -> bool:
        """Whether ``protocols`` are exactly the member's (names, metadata and order)."""
        return protocols == self.protocols

    def vote(self, candidates: frozenset[str]) -> str:
        """The member's most preferred protocol among ``candidates``."""
        for protocol in self.protocols:
            if protocol.name in candidates:
                return protocol.name
        unreachable(f"member {self.member_id} supports none of {sorted(candidates)}")

    def has_satisfied_heartbeat(self) -> bool:
        """Whether an expired session deadline spares the member: members waiting for a join
        or sync answer count as alive, except new members, who time out even while waiting."""
        if self.is_new:
            return False
        return self.awaiting_join is not None or self.awaiting_sync is not None


@attrs.define(eq=False)
class ClassicGroup:
    """A classic (JoinGroup/SyncGroup) group; see the module docstring."""

    group_id: str
    state: GroupState
    state_timestamp_ms: int | None
    previous_state: GroupState | None = None
    generation_id: int = 0
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader_id: str | None = None
    members: dict[str, Member] = attrs.field(factory=dict)
    static_members: dict[str, str] = attrs.field(factory=dict)
    pending_members: dict[str, int] = attrs.field(factory=dict)
    pending_sync_members: set[str] = attrs.field(factory=set)
    new_member_added: bool = False
    join_timer: JoinTimer | None = None
    sync_timer: SyncTimer | None = None
    subscribed_topics: frozenset[str] | None = None

    # -- queries --------------------------------------------------------------------------------

    def is_in(self, *states: GroupState) -> bool:
        """Whether the group is in one of ``states``."""
        return self.state in states

    def member(self, member_id: str) -> Member:
        """The member ``member_id`` (which must exist)."""
        found = self.members.get(member_id)
        if found is None:
            unreachable(f"{self.group_id}: no member {member_id}")
        return found

    def is_leader(self, member_id: str) -> bool:
        """Whether ``member_id`` leads the current generation."""
        return self.leader_id == member_id

    def awaiting_join_count(self) -> int:
        """How many members have a JoinGroup parked."""
        return sum(1 for m in self.members.values() if m.awaiting_join is not None)

    def has_all_members_joined(self) -> bool:
        """Every member has rejoined and no handed-out member id is still to join."""
        return self.awaiting_join_count() == len(self.members) and not self.pending_members

    def rebalance_timeout_ms(self) -> int:
        """The longest rebalance timeout among the members (0 without members)."""
        return max((m.rebalance_timeout_ms for m in self.members.values()), default=0)

    def can_rebalance(self) -> bool:
        """Whether a rebalance can start from the current state."""
        return self.state in _VALID_PREVIOUS[GroupState.PREPARING_REBALANCE]

    def uses_consumer_protocol(self) -> bool:
        """Whether the members are consumers (protocol type "consumer")."""
        return self.protocol_type == CONSUMER_PROTOCOL_TYPE

    def is_subscribed_to(self, topic: str) -> bool:
        """Whether the group consumes ``topic``; unknown subscriptions count as subscribed for
        consumer groups (so their offsets are neither deleted nor expired) and as not
        subscribed for any other protocol type (Kafka's rule)."""
        if self.subscribed_topics is not None:
            return topic in self.subscribed_topics
        return self.uses_consumer_protocol()

    def supports_protocols(self, protocol_type: str, names: Iterable[str]) -> bool:
        """Whether a member with ``protocol_type`` and protocol ``names`` can be in the group:
        an empty group takes any non-empty type and list; otherwise the type must match and
        one of the names must be supported by every current member."""
        names = list(names)
        if self.state is GroupState.EMPTY:
            return protocol_type != "" and len(names) > 0
        if self.protocol_type != protocol_type:
            return False
        counts = self._protocol_counts()
        return any(counts.get(name, 0) == len(self.members) for name in names)

    def select_protocol(self) -> str:
        """The protocol of the next generation: among those every member supports, the one
        most members prefer; ties go to the candidate preferred by the earliest member (Kafka
        leaves ties unspecified)."""
        invariant(bool(self.members), f"{self.group_id}: no members to select a protocol for")
        counts = self._protocol_counts()
        candidates = frozenset(n for n, c in counts.items() if c == len(self.members))
        votes: dict[str, int] = {}
        for member in self.members.values():
            name = member.vote(candidates)
            votes[name] = votes.get(name, 0) + 1
        return max(votes, key=lambda name: votes[name])

    def _protocol_counts(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for member in self.members.values():
            for name in {p.name for p in member.protocols}:
                counts[name] = counts.get(name, 0) + 1
        return counts

    # -- changes --------------------------------------------------------------------------------

    def transition_to(self, state: GroupState, now_ms: int) -> None:
        """Move to ``state`` (a legal transition) and stamp the time."""
        invariant(
            self.state in _VALID_PREVIOUS[state],
            f"{self.group_id}: illegal transition {self.state.value} -> {state.value}",
        )
        self.previous_state = self.state
        self.state = state
        self.state_timestamp_ms = now_ms

    def add(self, member: Member) -> None:
        """Add ``member``; the first member sets the protocol type and becomes leader."""
        invariant(member.member_id not in self.members, f"{member.member_id} is a member")
        if member.group_instance_id is not None:
            invariant(
                member.group_instance_id not in self.static_members,
                f"{self.group_id}: instance {member.group_instance_id} already has a member",
            )
            self.static_members[member.group_instance_id] = member.member_id
        if not self.members:
            self.protocol_type = member.protocol_type
        invariant(self.protocol_type == member.protocol_type, "protocol type mismatch")
        if self.leader_id is None:
            self.leader_id = member.member_id
        self.members[member.member_id] = member
        self.pending_members.pop(member.member_id, None)

    def remove(self, member_id: str) -> Member | None:
        """Remove a member or pending member; a removed leader is replaced by the first
        remaining member. Returns the removed member, if it was one."""
        removed = self.members.pop(member_id, None)
        if removed is not None and removed.group_instance_id is not None:
            self.static_members.pop(removed.group_instance_id, None)
        if self.leader_id == member_id:
            self.leader_id = next(iter(self.members), None)
        self.pending_members.pop(member_id, None)
        self.pending_sync_members.discard(member_id)
        return removed

    def replace_static_member(self, instance_id: str, old_id: str, new_id: str) -> Member:
        """Give the static member ``old_id`` the id ``new_id`` (it keeps everything else, and
        leadership and pending sync if it had them). The caller answers anything the old id was
        waiting for first."""
        old = self.members.pop(old_id)
        member = attrs.evolve(old, member_id=new_id, awaiting_join=None, awaiting_sync=None)
        member.is_new = False
        self.members[new_id] = member
        if self.leader_id == old_id:
            self.leader_id = new_id
        if old_id in self.pending_sync_members:
            self.pending_sync_members.discard(old_id)
            self.pending_sync_members.add(new_id)
        self.static_members[instance_id] = new_id
        return member

    def maybe_elect_new_joined_leader(self) -> bool:
        """Keep the leader if it rejoined, else pick a member that did. False when nobody
        rejoined (or there are no members)."""
        if self.leader_id is None:
            return False
        if self.member(self.leader_id).awaiting_join is not None:
            return True
        for member in self.members.values():
            if member.awaiting_join is not None:
                self.leader_id = member.member_id
                return True
        return False

    def init_next_generation(self, now_ms: int, reader: SubscriptionReader | None) -> None:
        """Start the next generation: CompletingRebalance with a selected protocol, or Empty
        when no member is left."""
        before = self.generation_id
        self.generation_id += 1
        if self.members:
            self.protocol_name = self.select_protocol()
            self.transition_to(GroupState.COMPLETING_REBALANCE, now_ms)
        else:
            self.protocol_name = None
            self.transition_to(GroupState.EMPTY, now_ms)
        self.subscribed_topics = self.compute_subscribed_topics(reader)
        self.pending_sync_members.clear()
        invariant(self.generation_id == before + 1, "generation advances by one")

    def compute_subscribed_topics(self, reader: SubscriptionReader | None) -> frozenset[str] | None:
        """The topics a consumer group consumes: none when it has no members; read from the
        members' metadata when a ``reader`` is given; otherwise unknown (None)."""
        if not self.uses_consumer_protocol():
            return None
        if not self.members:
            return frozenset()
        if reader is None or self.protocol_name is None:
            return None
        topics: set[str] = set()
        for member in self.members.values():
            read = reader(member.metadata(self.protocol_name))
            if read is None:
                return None
            topics |= read
        return frozenset(topics)
