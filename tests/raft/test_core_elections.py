"""Scripted tests of `RaftCore`'s epoch and election rules (R1-R2, E1-E8, F6 of core.py)."""

from __future__ import annotations

import pytest

from replog.errors import ErrorCode, InvalidConfigError, InvariantError
from replog.raft.entries import LEADER_CHANGE
from replog.raft.messages import (
    NO_LEADER,
    BeginQuorumEpochRequest,
    EndQuorumEpochRequest,
    RaftFetchRequest,
    RaftFetchResponse,
    VoteRequest,
    VoteResponse,
)
from replog.raft.ready import AppendBatches
from replog.raft.states import (
    Candidate,
    ElectionState,
    Follower,
    Leader,
    Prospective,
    Resigned,
    Unattached,
    Voted,
)

from .harness import MemoryLog, Quorum, of, to

VOTERS = frozenset({1, 2, 3})


def elected(q: Quorum, leader: int = 1) -> Quorum:
    """Make ``leader`` time out first and win; every node then follows it."""
    q.tick(250, nodes=[leader])
    q.settle()
    assert isinstance(q.core(leader).state, Leader), q.core(leader).state
    q.run(50)
    return q


def vote_request(epoch: int, candidate: int, last_epoch: int = 0, end: int = 0, pre: bool = False):
    return VoteRequest(epoch, candidate, last_epoch, end, pre)


# ------------------------------------------------------------------------------ R1: start


def test_fresh_node_starts_unattached_in_epoch_zero_and_writes_nothing() -> None:
    q = Quorum()
    for node in q.nodes.values():
        assert node.core.state == Unattached(0)
        assert node.log.elections_written == []


@pytest.mark.parametrize(
    ("stored", "expected"),
    [
        (ElectionState(4, 1, 1, VOTERS), Resigned(4, 1)),
        (ElectionState(4, NO_LEADER, 1, VOTERS), Candidate(4, frozenset({1}))),
        (ElectionState(4, 2, -1, VOTERS), Follower(4, 2)),
        (ElectionState(4, NO_LEADER, 3, VOTERS), Voted(4, 3)),
        (ElectionState(4, NO_LEADER, -1, VOTERS), Unattached(4)),
    ],
)
def test_restart_resumes_from_the_quorum_state(stored: ElectionState, expected: object) -> None:
    q = Quorum()
    q.nodes[1].log.election = stored
    assert q.restart(1).core.state == expected


def test_restart_with_an_epoch_behind_the_log_becomes_unattached_in_the_log_epoch() -> None:
    q = elected(Quorum())
    log = q.nodes[2].log
    log.election = ElectionState(0, NO_LEADER, -1, VOTERS)  # as if the file were older
    assert q.restart(2).core.state == Unattached(1)


def test_restart_with_another_voter_set_is_refused() -> None:
    q = Quorum()
    q.nodes[1].log.election = ElectionState(1, NO_LEADER, -1, frozenset({1, 2}))
    with pytest.raises(InvalidConfigError):
        q.restart(1)


def test_single_voter_elects_itself_at_once() -> None:
    q = Quorum(voters=[7])
    q.tick(0)
    core = q.core(7)
    assert isinstance(core.state, Leader) and core.state.epoch == 1
    assert core.high_watermark == 1  # its leader-change record, flushed


def test_single_voter_that_led_elects_itself_at_once_after_a_restart() -> None:
    """A restarted sole voter does not wait out a resignation (and then an election timeout)
    before it leads again: nobody else could take over meanwhile."""
    q = Quorum(voters=[7])
    q.tick(0)
    assert isinstance(q.core(7).state, Leader) and q.core(7).state.epoch == 1
    q.restart(7)
    q.tick(0)
    core = q.core(7)
    assert isinstance(core.state, Leader) and core.state.epoch == 3  # Unattached(2), then 3
    assert core.high_watermark == 2  # both leader-change records


# ------------------------------------------------------------------------------ E1-E3: pre-vote


def test_election_timeout_starts_a_pre_vote_round_in_the_same_epoch() -> None:
    q = Quorum()
    q.tick(250, nodes=[1])
    state = q.core(1).state
    assert state == Prospective(0, NO_LEADER, -1, frozenset({1}))
    requests = q.take(of(VoteRequest))
    assert {s.dst for s in requests} == {2, 3}
    assert all(s.message.pre_vote and s.message.epoch == 0 for s in requests)
    assert q.nodes[1].log.elections_written == []  # a pre-vote round persists nothing


def test_pre_vote_majority_makes_a_candidate_with_a_persisted_vote_for_itself() -> None:
    q = Quorum()
    q.tick(250, nodes=[1])
    q.deliver(to(2))  # 2 grants the pre-vote
    q.deliver(to(1))
    state = q.core(1).state
    assert state == Candidate(1, frozenset({1}))
    assert q.nodes[1].log.election == ElectionState(1, NO_LEADER, 1, VOTERS)
    real = [s for s in q.queue if isinstance(s.message, VoteRequest) and not s.message.pre_vote]
    assert {s.dst for s in real} == {2, 3} and all(s.message.epoch == 1 for s in real)


def test_granting_a_pre_vote_changes_nothing() -> None:
    q = Quorum()
    q.tick(250, nodes=[1])
    q.deliver(to(2))
    assert q.core(2).state == Unattached(0)
    assert q.nodes[2].log.elections_written == []
    (answer,) = q.take(to(1))
    assert answer.message == VoteResponse(0, NO_LEADER, True, True)


def test_pre_vote_is_refused_to_a_less_up_to_date_log() -> None:
    q = elected(Quorum())
    q.propose(1, b"x")
    q.run(50)
    q.nodes[3].auto_flush = True
    core2 = q.core(2)
    core2.on_message(3, vote_request(1, 3, last_epoch=1, end=1, pre=True), q.now_ms + 1000)
    assert core2.take_ready().messages[0].message.vote_granted is False


def test_follower_that_hears_from_its_leader_refuses_pre_votes() -> None:
    q = elected(Quorum())
    end = q.core(3).log.end
    q.core(2).on_message(3, vote_request(1, 3, end.epoch, end.offset, pre=True), q.now_ms)
    assert q.core(2).take_ready().messages[0].message.vote_granted is False
    # once the leader has been silent for the fetch timeout, it grants
    q.core(2).on_message(3, vote_request(1, 3, end.epoch, end.offset, pre=True), q.now_ms + 200)
    assert q.core(2).take_ready().messages[0].message.vote_granted is True


def test_partitioned_node_cannot_disrupt_a_healthy_quorum() -> None:
    q = elected(Quorum())
    for _ in range(10):  # node 3 is cut off: its fetches and pre-votes are lost
        q.tick(50)
        q.take(lambda s: s.src == 3 or s.dst == 3)
        q.settle()
    assert isinstance(q.core(3).state, Prospective | Follower)
    assert q.core(3).state.epoch == 1  # pre-vote never raised the epoch
    q.run(200)  # healed: 3's pre-votes are refused by the follower of a live leader
    assert q.leader() == 1 and q.core(1).state.epoch == 1
    assert q.core(3).state == Follower(1, 1)


def test_lost_pre_vote_round_returns_to_following_the_old_leader() -> None:
    q = elected(Quorum())
    for _ in range(5):  # 3 misses the leader for 250 ms (fetch timeout); 1 and 2 go on
        q.tick(50, nodes=[1, 2])
        q.take(lambda s: 3 in (s.src, s.dst))
        q.settle(tick=True)
    q.tick(0, nodes=[3])
    assert isinstance(q.core(3).state, Prospective)
    q.deliver(to(2))  # 2 still hears from 1: refuses
    q.deliver(to(1))  # the leader refuses
    q.deliver(to(3))
    assert q.core(3).state == Follower(1, 1)


# ------------------------------------------------------------------------------ E4-E5: votes


def test_vote_is_persisted_in_the_same_ready_as_its_answer() -> None:
    q = Quorum()
    q.core(2).on_message(1, vote_request(1, 1), 0)
    ready = q.core(2).take_ready()
    assert ready.election == ElectionState(1, NO_LEADER, 1, VOTERS)
    assert ready.messages[0].message == VoteResponse(1, NO_LEADER, True, False)
    assert q.core(2).state == Voted(1, 1)


def test_one_vote_per_epoch_even_after_a_restart() -> None:
    q = Quorum()
    q.core(2).on_message(1, vote_request(1, 1), 0)
    q.collect()
    q.take()
    core = q.restart(2).core
    core.on_message(3, vote_request(1, 3), 1)
    assert core.take_ready().messages[0].message.vote_granted is False
    core.on_message(1, vote_request(1, 1), 2)  # the same candidate again: granted again
    assert core.take_ready().messages[0].message.vote_granted is True


def test_vote_refused_to_a_candidate_with_a_shorter_log_of_the_same_epoch() -> None:
    q = elected(Quorum())
    q.propose(1, b"a", b"b")
    q.run(50)
    core = q.core(2)
    core.on_message(3, vote_request(2, 3, last_epoch=1, end=1), q.now_ms)
    answer = core.take_ready().messages[0].message
    assert answer.vote_granted is False and answer.epoch == 2
    assert core.state == Unattached(2)  # it did learn the epoch (R2)


def test_lower_epoch_vote_request_is_fenced() -> None:
    q = elected(Quorum())
    q.core(2).on_message(3, vote_request(0, 3, pre=True), q.now_ms)
    answer = q.core(2).take_ready().messages[0].message
    assert answer.error is ErrorCode.FENCED_LEADER_EPOCH and answer.epoch == 1


def test_candidate_wins_with_a_majority_and_opens_its_epoch_with_a_leader_change() -> None:
    q = Quorum()
    q.tick(250, nodes=[1])
    q.settle()
    leader = q.core(1)
    assert leader.state == Leader(1, 0, 1)
    appends = [op for r in q.nodes[1].readies for op in r.log_ops if isinstance(op, AppendBatches)]
    (entry,) = [e for e in q.nodes[1].log.entries()]
    assert entry[3] == LEADER_CHANGE and entry[1] == 1 and appends
    assert q.nodes[1].log.election == ElectionState(1, 1, 1, VOTERS)
    assert {q.core(2).state, q.core(3).state} == {Follower(1, 1)}


def test_candidate_rejected_by_a_majority_backs_off_then_runs_a_new_pre_vote() -> None:
    q = Quorum(election_backoff_max_ms=30)
    q.tick(250, nodes=[1])
    q.deliver(to(2))
    q.deliver(to(1))
    assert isinstance(q.core(1).state, Candidate)
    q.take()
    for voter in (2, 3):
        q.core(1).on_message(voter, VoteResponse(1, NO_LEADER, False, False), q.now_ms)
    deadline = q.core(1).next_deadline_ms()
    assert deadline <= q.now_ms + 30  # a backoff, not a full election timeout
    q.tick(deadline - q.now_ms, nodes=[1])
    assert q.core(1).state == Prospective(1, NO_LEADER, 1, frozenset({1}))


def test_two_leaders_in_one_epoch_are_a_bug() -> None:
    q = elected(Quorum())
    with pytest.raises(InvariantError):
        q.core(2).on_message(3, BeginQuorumEpochRequest(1, 3), q.now_ms)


# ------------------------------------------------------------------------------ E6-E8, F6


def test_begin_quorum_epoch_makes_followers_and_is_repeated_until_acknowledged() -> None:
    q = Quorum()
    q.tick(250, nodes=[1])
    q.settle(pred=lambda s: s.dst != 3)  # 3 hears nothing: no vote, no BeginQuorumEpoch
    q.take(to(3))
    assert isinstance(q.core(1).state, Leader)
    assert q.core(3).state == Unattached(0)
    q.tick(100, nodes=[1])  # fetch_timeout / 2 later the leader tries again
    assert [s.dst for s in q.queue if isinstance(s.message, BeginQuorumEpochRequest)] == [3]
    q.settle()
    assert q.core(3).state == Follower(1, 1)


def test_graceful_resignation_hands_over_to_the_most_caught_up_voter() -> None:
    q = elected(Quorum())
    q.propose(1, b"a")
    q.take(to(3))  # 3 is behind
    q.run(20)
    assert q.core(1).resign(q.now_ms)
    q.collect()
    assert q.core(1).state == Resigned(1, 1, (2, 3))
    end_requests = q.take(of(EndQuorumEpochRequest))
    assert {s.dst for s in end_requests} == {2, 3}
    for sent in end_requests:
        q.core(sent.dst).on_message(1, sent.message, q.now_ms)
    q.collect()
    assert q.core(2).state == Follower(1, 1, leader_resigned=True)
    q.tick(0, nodes=[2])  # the first successor elects at once
    q.settle()
    assert q.leader() == 2 and q.core(2).state.epoch == 2


def test_resigned_leader_moves_to_the_next_epoch_after_an_election_timeout() -> None:
    q = elected(Quorum())
    q.core(1).resign(q.now_ms)
    q.collect()
    q.take()
    q.tick(250, nodes=[1])
    assert q.core(1).state == Unattached(2)
    assert q.nodes[1].log.election == ElectionState(2, NO_LEADER, -1, VOTERS)


def test_resigned_leader_answers_fetches_not_leader() -> None:
    q = elected(Quorum())
    q.core(1).resign(q.now_ms)
    q.collect()
    q.take()
    q.core(1).on_message(2, RaftFetchRequest(1, 2, 1, 1, 1000), q.now_ms)
    answer = q.core(1).take_ready().messages[0].message
    assert isinstance(answer, RaftFetchResponse)
    assert answer.error is ErrorCode.NOT_LEADER_OR_FOLLOWER and answer.leader_id == NO_LEADER


def test_leader_without_fetches_from_a_majority_resigns() -> None:
    q = elected(Quorum())
    q.take()
    deadline = q.core(1).next_deadline_ms()  # the check-quorum deadline
    assert deadline > q.now_ms
    q.tick(deadline - q.now_ms - 1, nodes=[1])
    assert isinstance(q.core(1).state, Leader)
    q.tick(1, nodes=[1])  # 1.5 x fetch timeout after the last majority of fetches
    assert isinstance(q.core(1).state, Resigned)


def test_leader_with_fetches_from_a_majority_stays() -> None:
    q = elected(Quorum())
    for _ in range(20):
        q.tick(50, nodes=[1, 2])  # 3 is down; 2 keeps fetching
        q.take(to(3))
        q.settle()
    assert isinstance(q.core(1).state, Leader)


# ------------------------------------------------------------------------------ observers


def test_observer_never_elects_and_finds_the_leader_through_any_voter() -> None:
    q = elected(Quorum(observers=[9]))
    q.run(1000)
    assert q.core(9).state == Follower(1, 1)
    assert q.core(9).high_watermark == q.core(1).high_watermark
    q.core(9).on_message(2, vote_request(2, 2, 1, 1), q.now_ms)
    assert q.core(9).take_ready().messages[0].message.vote_granted is False


def test_observer_that_loses_its_leader_looks_for_it_again() -> None:
    q = elected(Quorum(observers=[9]))
    q.run(200)
    q.tick(250, nodes=[9])
    assert q.core(9).state == Unattached(1)
    q.tick(100, nodes=[9])
    (probe,) = q.take(lambda s: s.src == 9)
    assert isinstance(probe.message, RaftFetchRequest) and probe.dst in VOTERS


def test_logs_start_empty() -> None:
    assert MemoryLog().model().end == MemoryLog().model().end


def test_waiting_voter_asks_to_be_woken_at_its_election_timeout_only() -> None:
    """Regression: an Unattached voter asked for a tick every millisecond."""
    q = Quorum()
    core = q.core(2)
    assert core.next_deadline_ms() >= 100  # the election timeout, not "now"
    core.on_message(1, vote_request(1, 1), 0)
    assert isinstance(core.state, Voted) and core.next_deadline_ms() >= 100


def test_survivors_of_a_crashed_leader_elect_one_of_them() -> None:
    """End to end: the leader crashes and the two survivors elect one of them (the scripted
    interleaving of E3's lost-leader rule is the next test)."""
    q = elected(Quorum())
    del q.nodes[1]  # the leader crashes; what it had in flight is lost
    q.take(lambda s: 1 in (s.src, s.dst))
    q.run(2_000)
    assert q.leader() in (2, 3)
    assert q.core(2).state.epoch == q.core(3).state.epoch >= 2


def test_pre_vote_granted_by_a_follower_of_the_lost_leader_is_counted() -> None:
    """E3: 3 still follows 1 (it has not ticked
    since 1 fell silent) and grants 2's pre-vote, naming 1. 2 counts the grant and stands;
    going back to following 1 would leave the quorum leaderless until 3 times out too."""
    q = elected(Quorum())
    del q.nodes[1]
    q.take(lambda s: 1 in (s.src, s.dst))
    q.tick(600, nodes=[2])  # only 2 notices the silence
    assert isinstance(q.core(2).state, Prospective)
    assert isinstance(q.core(3).state, Follower)
    q.deliver(lambda s: s.dst == 3 and isinstance(s.message, VoteRequest))
    answers = q.take(lambda s: s.dst == 2 and isinstance(s.message, VoteResponse))
    assert [(a.message.vote_granted, a.message.leader_id) for a in answers] == [(True, 1)]
    q.queue.extend(answers)
    q.deliver(to(2))
    assert isinstance(q.core(2).state, Candidate)
    assert q.core(2).state.epoch == 2


# ------------------------------------------------------------------------------ E9: unreachable


def test_unreachable_leader_starts_a_pre_vote_within_the_election_timeout() -> None:
    q = elected(Quorum())  # fetch timeout 200 ms, election timeout 100 ms
    q.core(2).leader_unreachable(1, q.now_ms)
    q.tick(99, nodes=[2])  # rng(100) < 100: due by now, long before the fetch timeout
    assert isinstance(q.core(2).state, Prospective)
    assert q.core(2).state.epoch == 1  # a pre-vote round: nothing raised yet


def test_survivors_told_the_leader_is_gone_elect_before_the_fetch_timeout() -> None:
    q = elected(Quorum())
    del q.nodes[1]  # killed: its connections close and reconnects are refused
    q.take(lambda s: 1 in (s.src, s.dst))
    start_ms = q.now_ms
    for node_id in (2, 3):
        q.core(node_id).leader_unreachable(1, q.now_ms)
    while q.leader() is None and q.now_ms - start_ms < 200:
        q.run(5)
    assert q.leader() in (2, 3)
    assert q.now_ms - start_ms < 200  # the fetch timeout would not even have started one


def test_spurious_unreachable_report_does_not_disrupt_a_healthy_quorum() -> None:
    """One follower is wrongly told its (live) leader is gone: it runs a pre-vote round, the
    leader and the other follower (which hears from the leader) refuse it, and it follows the
    same leader again in the same epoch."""
    q = elected(Quorum())
    q.core(3).leader_unreachable(1, q.now_ms)
    q.tick(100, nodes=[3])
    assert isinstance(q.core(3).state, Prospective)
    q.deliver(lambda s: s.src == 3 and isinstance(s.message, VoteRequest))
    q.deliver(to(3))
    assert q.core(3).state == Follower(1, 1)
    q.run(400)
    assert q.leader() == 1 and q.core(1).state.epoch == 1
    assert q.core(2).state == q.core(3).state == Follower(1, 1)


def test_follower_told_its_leader_is_unreachable_grants_pre_votes_until_it_answers() -> None:
    q = elected(Quorum())
    end = q.core(3).log.end
    pre_vote = vote_request(1, 3, end.epoch, end.offset, pre=True)
    q.core(2).leader_unreachable(1, q.now_ms)
    q.core(2).on_message(3, pre_vote, q.now_ms)
    assert q.core(2).take_ready().messages[0].message.vote_granted is True
    q.run(20)  # the leader answers 2's fetch: the report was wrong
    assert q.core(2).state == Follower(1, 1)
    q.core(2).on_message(3, pre_vote, q.now_ms)
    assert q.core(2).take_ready().messages[0].message.vote_granted is False


def test_unreachable_report_about_another_node_changes_nothing() -> None:
    q = elected(Quorum())
    deadline_ms = q.core(2).next_deadline_ms()
    q.core(2).leader_unreachable(3, q.now_ms)  # not its leader
    q.core(1).leader_unreachable(2, q.now_ms)  # the leader follows nobody
    assert q.core(2).next_deadline_ms() == deadline_ms
    q.tick(150, nodes=[1, 2])
    assert q.core(2).state == Follower(1, 1) and isinstance(q.core(1).state, Leader)
