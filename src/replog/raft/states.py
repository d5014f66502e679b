"""The quorum states of one node, as immutable values, and what of them is persisted.

Theory of operation. A node is always in exactly one state for one epoch (KIP-595's
``QuorumState``, with KIP-996's Prospective). ``RaftCore`` swaps these values; a state never
changes in place. The persisted part of any state is an `ElectionState` (epoch, leader, vote),
which the driver writes to the ``quorum-state`` file before it sends anything that depends on it.

============  ==================================================  ==========================
state         meaning                                             persisted as
============  ==================================================  ==========================
Unattached    knows the epoch, not its leader; has not voted      (epoch, -, -)
Voted         granted its vote in this epoch to ``voted_id``      (epoch, -, voted_id)
Prospective   pre-vote round (no epoch change), keeps what it     unchanged from before
              knew: the leader it followed, its vote
Candidate     asked for votes in this (its own new) epoch         (epoch, -, self)
Leader        won this epoch                                      (epoch, self, self)
Follower      fetches from ``leader_id`` in this epoch            (epoch, leader_id, -)
Resigned      was leader of this epoch and stepped down (or       (epoch, self, self)
              restarted after leading it): no new leader may be
              elected by it in this epoch
============  ==================================================  ==========================

Transitions (the rules are in ``core.py``; an epoch never goes down):

- Unattached -> Voted (grants a vote, E4), Prospective (election timeout, E1), Follower (learns
  a leader, R2), Unattached (a higher epoch, R2).
- Voted -> Prospective (E1), Follower, Unattached (R2).
- Prospective -> Candidate (a majority of pre-votes, E3), back to Follower / Voted / Unattached
  (lost round, E3), Voted (grants a real vote while it knows no leader and has not voted),
  Follower, Unattached (R2).
- Candidate -> Leader (a majority, E5), Prospective (election timeout or backoff, E1/E5),
  Follower, Unattached (R2).
- Leader -> Resigned (``resign`` or check quorum, E8/F6), Follower, Unattached (R2).
- Follower -> Prospective (fetch timeout, E1, brought forward if the leader is unreachable,
  E9), Follower with ``leader_resigned`` (E8), Follower, Unattached (R2).
- Resigned -> Unattached in epoch + 1 (election timeout, E8), Follower, Unattached (R2).

Observers (non-voters) only ever are Unattached or Follower; an observer whose leader went
quiet for the fetch timeout returns to Unattached in the same epoch to look for it again.
"""

from __future__ import annotations

import attrs

from replog.raft.messages import NO_LEADER

__all__ = [
    "Candidate",
    "ElectionState",
    "EpochState",
    "Follower",
    "Leader",
    "Prospective",
    "Resigned",
    "Unattached",
    "Voted",
]


@attrs.frozen
class ElectionState:
    """What the ``quorum-state`` file holds: the epoch, its leader and this node's vote in it
    (``NO_LEADER`` / ``-1`` when absent), and the static voter set."""

    epoch: int
    leader_id: int
    voted_id: int
    voters: frozenset[int]

    def __attrs_post_init__(self) -> None:
        if self.epoch < 0:
            raise ValueError(f"epoch must be >= 0, got {self.epoch}")


@attrs.frozen
class Unattached:
    """The epoch is known, its leader is not, and this node has not voted in it."""

    epoch: int

    @property
    def leader_id(self) -> int:
        """No leader known."""
        return NO_LEADER

    def election(self, local_id: int, voters: frozenset[int]) -> ElectionState:
        """The persisted form."""
        return ElectionState(self.epoch, NO_LEADER, -1, voters)


@attrs.frozen
class Voted:
    """This node granted its vote in ``epoch`` to ``voted_id``."""

    epoch: int
    voted_id: int

    @property
    def leader_id(self) -> int:
        """No leader known."""
        return NO_LEADER

    def election(self, local_id: int, voters: frozenset[int]) -> ElectionState:
        """The persisted form."""
        return ElectionState(self.epoch, NO_LEADER, self.voted_id, voters)


@attrs.frozen
class Prospective:
    """A pre-vote round in ``epoch`` (KIP-996). ``last_leader_id`` and ``voted_id`` are kept
    from the state it came from: losing the round returns there, and they still bind this
    node in this epoch (no second vote, no vote while a leader is known)."""

    epoch: int
    last_leader_id: int
    voted_id: int
    granted: frozenset[int]
    rejected: frozenset[int] = frozenset()

    @property
    def leader_id(self) -> int:
        """No leader is current while the round runs."""
        return NO_LEADER

    def election(self, local_id: int, voters: frozenset[int]) -> ElectionState:
        """The persisted form: the same as the state before the round."""
        return ElectionState(self.epoch, self.last_leader_id, self.voted_id, voters)


@attrs.frozen
class Candidate:
    """Standing for election in ``epoch`` (which it created by adding one)."""

    epoch: int
    granted: frozenset[int]
    rejected: frozenset[int] = frozenset()
    retries: int = 1

    @property
    def leader_id(self) -> int:
        """No leader known."""
        return NO_LEADER

    def election(self, local_id: int, voters: frozenset[int]) -> ElectionState:
        """The persisted form: a vote for itself."""
        return ElectionState(self.epoch, NO_LEADER, local_id, voters)


@attrs.frozen
class Leader:
    """Leader of ``epoch``; its first record is at ``epoch_start_offset``."""

    epoch: int
    epoch_start_offset: int
    local_id: int

    @property
    def leader_id(self) -> int:
        """This node."""
        return self.local_id

    def election(self, local_id: int, voters: frozenset[int]) -> ElectionState:
        """The persisted form."""
        return ElectionState(self.epoch, local_id, local_id, voters)


@attrs.frozen
class Follower:
    """Follows ``leader_id`` in ``epoch``. ``leader_resigned`` after the leader's
    EndQuorumEpoch: the leader is gone, so this node grants pre-votes and elects soon."""

    epoch: int
    leader_id: int
    leader_resigned: bool = False

    def election(self, local_id: int, voters: frozenset[int]) -> ElectionState:
        """The persisted form."""
        return ElectionState(self.epoch, self.leader_id, -1, voters)


@attrs.frozen
class Resigned:
    """Was leader of ``epoch`` and stepped down, or restarted after leading it. It neither
    leads nor votes in ``epoch`` again; ``successors`` are the voters it asked to elect."""

    epoch: int
    local_id: int
    successors: tuple[int, ...] = ()

    @property
    def leader_id(self) -> int:
        """Nobody leads this epoch any more."""
        return NO_LEADER

    def election(self, local_id: int, voters: frozenset[int]) -> ElectionState:
        """The persisted form: the same as the leadership it ended."""
        return ElectionState(self.epoch, local_id, local_id, voters)


EpochState = Unattached | Voted | Prospective | Candidate | Leader | Follower | Resigned
