"""The voting rules of ``core.py`` as pure functions of a node's state: which Vote requests
are well formed, when a voter grants a pre-vote (E2) or a vote (E4), and how an answer is
counted (E3, E5). The core applies them after the epoch rules (R2) and makes the transitions.
"""

from __future__ import annotations

import attrs

from replog.raft.messages import NO_LEADER, VoteRequest
from replog.raft.states import (
    Candidate,
    EpochState,
    Follower,
    Leader,
    Prospective,
    Unattached,
    Voted,
)

__all__ = ["grants_pre_vote", "grants_vote", "is_well_formed", "record_vote"]


def is_well_formed(request: VoteRequest, src: int, voters: frozenset[int]) -> bool:
    """A Vote request from a voter for itself, with a log end that can be: non-negative, and
    a last epoch below the epoch asked for (at most equal to it for a pre-vote, which keeps
    the epoch)."""
    if request.pre_vote:
        valid_epochs = request.last_epoch <= request.epoch
    else:
        valid_epochs = request.last_epoch < request.epoch
    return (
        src in voters
        and request.candidate_id == src
        and valid_epochs
        and request.end_offset >= 0
        and request.last_epoch >= 0
    )


def grants_pre_vote(state: EpochState, up_to_date: bool, *, leader_is_live: bool) -> bool:
    """E2: the asker's log is at least as up to date, this node does not lead, and it is not
    the Follower of a leader that is live (answered within the fetch timeout, not reported
    gone) and has not resigned."""
    if not up_to_date or isinstance(state, Leader):
        return False
    if isinstance(state, Follower) and not state.leader_resigned:
        return not leader_is_live
    return True


def grants_vote(state: EpochState, candidate_id: int, up_to_date: bool) -> bool:
    """E4: no leader known in this epoch, no vote for another, an up-to-date log."""
    if isinstance(state, Unattached):
        return up_to_date
    if isinstance(state, Voted):
        return state.voted_id == candidate_id
    if isinstance(state, Prospective):
        if state.voted_id >= 0:
            return state.voted_id == candidate_id
        return state.last_leader_id == NO_LEADER and up_to_date
    return False


def record_vote(state: Prospective | Candidate, voter: int, granted: bool) -> EpochState:
    """``state`` with ``voter``'s answer counted."""
    if granted:
        return attrs.evolve(state, granted=state.granted | {voter})
    return attrs.evolve(state, rejected=state.rejected | {voter})
