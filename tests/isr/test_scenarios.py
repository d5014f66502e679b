"""Kafka's replication behaviour case by case, one test each, all on real `Log`s: KIP-101's
acked write and divergence after a double crash, KIP-279's multi-round truncation, KAFKA-7415's
epoch recorded without writes, KAFKA-7128's ISR join inside the current epoch, ISR shrink of a
stuck follower but not of an idle or a slow but steady one, min ISR refusing acks=all before the
append, an ISR shrink after an acks=all append, acks semantics, KIP-320's fetch epoch fencing,
KAFKA-14704's diverging answer that leaves the HW alone, and followers out of range; plus the
two KIP-101 failures as the KIP tells them."""

from __future__ import annotations

from pathlib import Path

from replog.errors import ErrorCode
from replog.isr import (
    Acks,
    DurabilityMode,
    FollowerAction,
    LeaderEpochEnd,
    Partition,
    PartitionConfig,
    PartitionFetchResponse,
    truncation_offset,
)

from .support import (
    accept_alter_partition,
    batch,
    entries,
    epochs,
    fetch_once,
    follower_fetch,
    open_log,
    partition,
    reopen_after_crash,
    values,
    write,
)

A, B, C = 1, 2, 3
REPLICATED = PartitionConfig(durability=DurabilityMode.REPLICATED)


def test_scenario_01_kip101_acked_write_survives_follower_restart_and_leader_failure(
    tmp_path: Path,
) -> None:
    leader = partition(B, open_log(tmp_path, "b"))
    follower = partition(A, open_log(tmp_path, "a"))
    leader.become_leader(0, {A, B}, (B, A), 0)
    follower.become_follower(B, 0, 0)
    for value in (b"m0", b"m1"):
        assert leader.append_as_leader(batch(value), Acks.ALL, 0, request_id=1) is None
    leader.log.flush()  # type: ignore[attr-defined]
    leader.on_log_flushed(0)
    fetch_once(leader, follower, 1)  # A gets m0, m1
    fetch_once(leader, follower, 2)  # A fetches at 2: B's HW = 2, both acked
    assert leader.high_watermark == 2
    assert {r.error_code for r in leader.take_ready().produce_results} == {ErrorCode.NONE}
    # A restarts before learning HW 2; its checkpointed HW is 1.
    restarted = partition(A, reopen_after_crash(follower.log, high_watermark=1))  # type: ignore[arg-type]
    assert restarted.log.log_end_offset == 2 and restarted.high_watermark == 1
    restarted.become_follower(B, 0, 3)
    request = restarted.fetch_request()
    assert request is not None and request.fetch_offset == 2 and request.last_fetched_epoch == 0
    outcome = fetch_once(leader, restarted, 3)
    assert outcome.action is FollowerAction.APPENDED and restarted.log.log_end_offset == 2
    # B dies; A is elected at epoch 1 with ISR {A}.
    assert restarted.become_leader(1, {A}, (B, A), 4)
    assert restarted.high_watermark == 2
    assert values(restarted.log)[1] == b"m1"


def test_scenario_02_kip101_divergence_after_double_crash(tmp_path: Path) -> None:
    a_log, b_log = open_log(tmp_path, "a"), open_log(tmp_path, "b")
    write(a_log, 0, 5)
    a_log.flush()
    write(a_log, 0, 5)  # offsets 5-9 never reach A's disk
    write(b_log, 0, 10)
    b_log.flush()
    a = partition(A, reopen_after_crash(a_log), REPLICATED)
    b = partition(B, reopen_after_crash(b_log), REPLICATED)
    assert a.log.log_end_offset == 5 and b.log.log_end_offset == 10
    a.become_leader(1, {A}, (A, B), 0)
    for i in range(10):
        a.append_as_leader(batch(b"new%d" % i), Acks.LEADER, 0)
    b.become_follower(A, 1, 0)
    outcome = fetch_once(a, b, 1)
    assert outcome.action is FollowerAction.TRUNCATED and outcome.truncated_to == 5
    fetch_once(a, b, 2)
    assert entries(b.log) == entries(a.log)
    assert epochs(b.log) == epochs(a.log) == [(0, 0), (1, 5)]


def test_kip101_loss_case_acked_m2_is_not_lost(tmp_path: Path) -> None:
    """KIP-101 scenario 1 as the KIP tells it: the committed m2 survives."""
    b = partition(B, open_log(tmp_path, "b"))
    a = partition(A, open_log(tmp_path, "a"))
    b.become_leader(0, {A, B}, (B, A), 0)
    a.become_follower(B, 0, 0)
    for value in (b"m0", b"m1", b"m2"):
        b.append_as_leader(batch(value), Acks.ALL, 0)
    b.log.flush()  # type: ignore[attr-defined]
    fetch_once(b, a, 1)
    fetch_once(b, a, 2)
    assert b.high_watermark == 3 and a.high_watermark < 3
    a = partition(A, reopen_after_crash(a.log, high_watermark=a.high_watermark))  # type: ignore[arg-type]
    a.become_follower(B, 0, 3)
    fetch_once(b, a, 3)
    a.become_leader(1, {A}, (B, A), 4)  # B dies
    assert a.log.log_end_offset == 3 and a.high_watermark == 3
    assert values(a.log)[2] == b"m2"


def test_kip101_divergence_case_logs_converge(tmp_path: Path) -> None:
    """KIP-101 scenario 2 as the KIP tells it: B returns first with less data, leads, writes
    m3 where A holds m2; A's m2 is truncated away and the logs become identical."""
    a_log, b_log = open_log(tmp_path, "a"), open_log(tmp_path, "b")
    for log, flushed in ((a_log, 3), (b_log, 2)):
        for value in (b"m0", b"m1", b"m2")[:flushed]:
            log.append_as_leader(batch(value), 0)
        log.flush()
    a = partition(A, reopen_after_crash(a_log), REPLICATED)
    b = partition(B, reopen_after_crash(b_log), REPLICATED)
    b.become_leader(1, {B}, (A, B), 0)
    b.append_as_leader(batch(b"m3"), Acks.LEADER, 0)
    a.become_follower(B, 1, 0)
    outcome = fetch_once(b, a, 1)
    assert outcome.truncated_to == 2
    fetch_once(b, a, 2)
    assert entries(a.log) == entries(b.log)
    assert values(a.log)[2] == b"m3"


def test_scenario_03_kip279_multi_round_truncation(tmp_path: Path) -> None:
    leader_log = open_log(tmp_path, "l")
    write(leader_log, 0, 3)
    write(leader_log, 1, 3)
    leader = partition(A, leader_log, REPLICATED)
    leader.become_leader(3, {A}, (A, B), 0)
    for i in range(3):
        leader.append_as_leader(batch(b"e3-%d" % i), Acks.LEADER, 0)
    assert epochs(leader_log) == [(0, 0), (1, 3), (3, 6)] and leader_log.log_end_offset == 9
    follower_log = open_log(tmp_path, "f")
    write(follower_log, 0, 4)  # offsets 0-2 came from the leader; 3 is the follower's own
    write(follower_log, 2, 4, tag=b"x")
    follower = partition(B, follower_log, REPLICATED)
    follower.become_follower(A, 3, 0)
    hw_before = follower.high_watermark

    first = fetch_once(leader, follower, 1)  # leader: endOffsetFor(2) = (1, 6)
    assert (first.truncated_to, first.truncation_complete) == (4, False)
    assert epochs(follower_log) == [(0, 0)]
    second = fetch_once(leader, follower, 2)  # leader: (0, 3); follower: min(4, 3, 4)
    assert (second.truncated_to, second.truncation_complete) == (3, True)
    assert follower.high_watermark == hw_before  # diverging responses never set the HW
    fetch_once(leader, follower, 3)
    assert entries(follower_log) == entries(leader_log)
    assert epochs(follower_log) == epochs(leader_log)


def test_scenario_03_truncation_rule_rounds_in_isolation(tmp_path: Path) -> None:
    log = open_log(tmp_path, "f")
    write(log, 0, 4)
    write(log, 2, 4)
    assert truncation_offset(LeaderEpochEnd(1, 6), log).offset == 4
    assert not truncation_offset(LeaderEpochEnd(1, 6), log).complete
    log.truncate_to(4)
    decision = truncation_offset(LeaderEpochEnd(0, 3), log)
    assert (decision.offset, decision.complete) == (3, True)
    assert truncation_offset(LeaderEpochEnd(-1, 2), log).offset == 2  # no epoch protocol
    assert truncation_offset(LeaderEpochEnd(-1, -1), log).offset == log.high_watermark


def test_scenario_04_kafka7415_new_epoch_recorded_without_writes(tmp_path: Path) -> None:
    a_log, b_log = open_log(tmp_path, "a"), open_log(tmp_path, "b")
    write(a_log, 1, 10)
    write(a_log, 3, 3, tag=b"local")
    write(b_log, 1, 10)
    assert epochs(a_log) == [(1, 0), (3, 10)] and a_log.log_end_offset == 13
    b = partition(B, b_log)
    b.become_leader(4, {B}, (A, B), 0)
    assert epochs(b_log) == [(1, 0), (4, 10)]
    assert b_log.end_offset_for_epoch(3) == (1, 10)
    a = partition(A, a_log)
    a.become_follower(B, 4, 0)
    outcome = fetch_once(b, a, 1)
    assert outcome.action is FollowerAction.TRUNCATED and outcome.truncated_to == 10
    assert a_log.log_end_offset == 10 and epochs(a_log) == [(1, 0)]


def test_scenario_05_kafka7128_join_isr_only_inside_current_epoch(tmp_path: Path) -> None:
    log = open_log(tmp_path, "l")
    write(log, 0, 5)
    log.update_high_watermark(1)
    leader = partition(A, log, REPLICATED)
    # C is in the ISR and has not fetched yet, so it holds the HW at 1.
    leader.become_leader(1, {A, C}, (A, B, C), 0)
    assert leader.leader_epoch_start_offset == 5 and leader.high_watermark == 1
    leader.append_as_leader(batch(b"5"), Acks.LEADER, 0)
    leader.append_as_leader(batch(b"6"), Acks.LEADER, 0)
    follower_fetch(leader, B, 1, 1, last_fetched_epoch=0)
    assert leader.pending_isr_change is None and B not in leader.maximal_isr
    follower_fetch(leader, B, 5, 2, last_fetched_epoch=0)
    pending = leader.pending_isr_change
    assert pending is not None and set(pending.isr_ids) == {A, B, C}
    assert leader.maximal_isr == {A, B, C} and leader.isr == {A, C}


def _leader_with_isr_abc(tmp_path: Path, now_ms: int) -> Partition:
    log = open_log(tmp_path, "l")
    write(log, 0, 100)
    leader = partition(A, log, REPLICATED)
    leader.become_leader(1, {A, B, C}, (A, B, C), now_ms)
    follower_fetch(leader, B, 100, now_ms, last_fetched_epoch=0)
    follower_fetch(leader, C, 100, now_ms, last_fetched_epoch=0)
    assert leader.high_watermark == 100
    return leader


def test_scenario_06_stuck_follower_is_shrunk_after_lag(tmp_path: Path) -> None:
    t0 = 1_000_000
    leader = _leader_with_isr_abc(tmp_path, t0)
    for tick in range(1, 4):
        now_ms = t0 + tick * 15_000
        leader.append_as_leader(batch(b"w"), Acks.LEADER, now_ms)
        follower_fetch(leader, B, leader.log.log_end_offset, now_ms, last_fetched_epoch=1)
        shrunk = leader.maybe_shrink_isr(now_ms)
        assert shrunk == (tick == 3), tick  # 45000 > 30000; 30000 is not
    assert leader.maximal_isr == {A, B, C} and leader.high_watermark == 100
    accept_alter_partition(leader, t0 + 45_001)
    assert leader.isr == {A, B}
    assert leader.high_watermark == leader.log.log_end_offset == 103


def test_scenario_07_idle_follower_is_not_shrunk(tmp_path: Path) -> None:
    t0 = 1_000_000
    leader = _leader_with_isr_abc(tmp_path, t0)
    for tick in range(1, 20):
        assert not leader.maybe_shrink_isr(t0 + tick * 15_000)
    assert leader.isr == {A, B, C}


def test_scenario_08_slow_but_steady_follower_stays_in_sync(tmp_path: Path) -> None:
    log = open_log(tmp_path, "l")
    leader = partition(A, log, REPLICATED)
    now_ms = 1_000_000
    leader.become_leader(0, {A, B}, (A, B), now_ms)
    previous_leo, previous_fetch_ms = 0, now_ms
    follower_fetch(leader, B, 0, now_ms, last_fetched_epoch=-1)
    for _ in range(10):
        now_ms += 20_000
        leader.append_as_leader(batch(b"x"), Acks.LEADER, now_ms)
        follower_fetch(leader, B, previous_leo, now_ms, last_fetched_epoch=0)
        state = leader.replica_state(B)
        assert state is not None and state.last_caught_up_ms == previous_fetch_ms
        assert not leader.maybe_shrink_isr(now_ms)
        previous_leo, previous_fetch_ms = log.log_end_offset, now_ms
    assert leader.isr == {A, B}


def test_scenario_09_min_isr_rejects_acks_all_before_append(tmp_path: Path) -> None:
    config = PartitionConfig(min_insync_replicas=2, durability=DurabilityMode.REPLICATED)
    leader = partition(A, open_log(tmp_path, "l"), config)
    leader.become_leader(0, {A}, (A, B, C), 0)
    result = leader.append_as_leader(batch(b"all"), Acks.ALL, 0)
    assert result is not None and result.error_code is ErrorCode.NOT_ENOUGH_REPLICAS
    assert leader.log.log_end_offset == 0
    result = leader.append_as_leader(batch(b"one"), Acks.LEADER, 0)
    assert result is not None and result.error_code is ErrorCode.NONE
    assert leader.log.log_end_offset == 1 and leader.high_watermark == 0
    # B catches up and joins: with ISR {A, B} the HW moves again.
    follower_fetch(leader, B, 1, 1, last_fetched_epoch=0)
    assert leader.high_watermark == 0  # committed ISR still {A}
    accept_alter_partition(leader, 2)
    assert leader.isr == {A, B} and leader.high_watermark == 1


def test_scenario_10_isr_shrinks_below_min_after_acks_all_append(tmp_path: Path) -> None:
    config = PartitionConfig(
        min_insync_replicas=2, durability=DurabilityMode.REPLICATED, request_timeout_ms=60_000
    )
    log = open_log(tmp_path, "l")
    write(log, 0, 10)
    leader = partition(A, log, config)
    t0 = 1_000_000
    leader.become_leader(1, {A, B}, (A, B), t0)
    follower_fetch(leader, B, 10, t0, last_fetched_epoch=0)
    assert leader.high_watermark == 10
    assert leader.append_as_leader(batch(b"ten"), Acks.ALL, t0, request_id=7) is None
    assert leader.maybe_shrink_isr(t0 + 30_001)
    accept_alter_partition(leader, t0 + 30_001)
    assert leader.isr == {A} and leader.is_under_min_isr
    follower_fetch(leader, B, 11, t0 + 30_002, last_fetched_epoch=1)
    assert leader.high_watermark == 10  # frozen under min ISR (KAFKA-15583)
    leader.on_tick(t0 + 59_999)
    assert leader.take_ready().produce_results == ()
    assert leader.next_deadline_ms() == t0 + 60_000
    leader.on_tick(t0 + 60_000)
    (result,) = leader.take_ready().produce_results
    assert (result.request_id, result.base_offset) == (7, 10)
    assert result.error_code is ErrorCode.REQUEST_TIMED_OUT


def test_scenario_11_acks_semantics(tmp_path: Path) -> None:
    leader = partition(A, open_log(tmp_path, "l"), REPLICATED)
    follower = partition(B, open_log(tmp_path, "f"), REPLICATED)
    leader.become_leader(0, {A, B}, (A, B), 0)
    follower.become_follower(A, 0, 0)
    zero = leader.append_as_leader(batch(b"0"), Acks.NONE, 0)
    assert zero is not None and zero.error_code is ErrorCode.NONE  # the driver sends nothing
    one = leader.append_as_leader(batch(b"1"), Acks.LEADER, 0)
    assert one is not None and (one.base_offset, one.error_code) == (1, ErrorCode.NONE)
    assert leader.high_watermark == 0  # acks=1 did not wait for the HW
    two = leader.append_as_leader(batch(b"2"), 2, 0)
    assert two is not None and two.error_code is ErrorCode.INVALID_REQUIRED_ACKS
    assert leader.log.log_end_offset == 2
    not_leader = follower.append_as_leader(batch(b"x"), Acks.NONE, 0)
    assert not_leader is not None
    assert not_leader.error_code is ErrorCode.NOT_LEADER_OR_FOLLOWER  # acks=0: close the conn


def test_scenario_19_fetch_epoch_fencing(tmp_path: Path) -> None:
    leader = partition(A, open_log(tmp_path, "l"))
    leader.become_leader(7, {A, B}, (A, B), 0)
    from replog.isr import PartitionFetchRequest

    def code(replica_id: int, epoch: int) -> ErrorCode:
        response = leader.on_fetch(PartitionFetchRequest(replica_id, 0, epoch), 0)
        assert response is not None
        return response.error_code

    assert code(B, 6) is ErrorCode.FENCED_LEADER_EPOCH
    assert code(B, 8) is ErrorCode.UNKNOWN_LEADER_EPOCH
    assert code(99, 7) is ErrorCode.UNKNOWN_LEADER_EPOCH
    assert code(99, -1) is ErrorCode.NOT_LEADER_OR_FOLLOWER
    assert code(B, 7) is ErrorCode.NONE


def test_scenario_20_diverging_response_does_not_bump_hw(tmp_path: Path) -> None:
    a_log, b_log = open_log(tmp_path, "a"), open_log(tmp_path, "b")
    write(a_log, 5, 13, tag=b"old")
    a_log.update_high_watermark(10)
    write(b_log, 5, 11, tag=b"old")
    b = partition(B, b_log, REPLICATED)
    b.become_leader(6, {B}, (A, B), 0)
    for i in range(4):
        b.append_as_leader(batch(b"new%d" % i), Acks.LEADER, 0)
    assert b.high_watermark == 15
    a = partition(A, a_log, REPLICATED)
    a.become_follower(B, 6, 0)
    request = a.fetch_request()
    assert request is not None and (request.fetch_offset, request.last_fetched_epoch) == (13, 5)
    response = b.on_fetch(request, 1)
    assert response is not None and response.diverging_epoch == LeaderEpochEnd(5, 11)
    outcome = a.on_fetch_response(response, 1)
    assert outcome.truncated_to == 11
    assert a_log.log_end_offset == 11 and a.high_watermark == 10
    fetch_once(b, a, 2)
    assert a_log.log_end_offset == 15 and a.high_watermark == 15
    assert entries(a_log) == entries(b_log)


def test_scenario_21_follower_out_of_range(tmp_path: Path) -> None:
    # Follower LEO 50 > leader LEO 40 (unclean election): truncate to 40, fetch from 40.
    f_log = open_log(tmp_path, "f")
    write(f_log, 3, 50)
    follower = partition(B, f_log, REPLICATED)
    follower.become_follower(A, 4, 0)
    request = follower.fetch_request()
    assert request is not None
    response = PartitionFetchResponse(
        request.request_id,
        ErrorCode.OFFSET_OUT_OF_RANGE,
        request.fetch_offset,
        log_start_offset=0,
        log_end_offset=40,
    )
    outcome = follower.on_fetch_response(response, 1)
    assert (outcome.action, outcome.truncated_to) == (FollowerAction.TRUNCATED, 40)
    next_request = follower.fetch_request()
    assert next_request is not None and next_request.fetch_offset == 40

    # Follower LEO 5 < leader log start 100: restart the log at 100.
    l_log = open_log(tmp_path, "l")
    l_log.truncate_fully_and_start_at(100)
    leader = partition(A, l_log, REPLICATED)
    leader.become_leader(4, {A}, (A, C), 0)
    for i in range(5):
        leader.append_as_leader(batch(b"%d" % i), Acks.LEADER, 0)
    c_log = open_log(tmp_path, "c")
    write(c_log, 2, 5)
    lagging = partition(C, c_log, REPLICATED)
    lagging.become_follower(A, 4, 0)
    outcome = fetch_once(leader, lagging, 1)
    assert (outcome.action, outcome.truncated_to) == (FollowerAction.RESTARTED, 100)
    assert c_log.log_start_offset == c_log.log_end_offset == 100
    fetch_once(leader, lagging, 2)
    assert entries(c_log) == entries(l_log)


def test_scenario_21_unclean_leader_behind_follower_via_divergence(tmp_path: Path) -> None:
    l_log, f_log = open_log(tmp_path, "l"), open_log(tmp_path, "f")
    write(l_log, 3, 40)
    write(f_log, 3, 50)
    leader = partition(A, l_log, REPLICATED)
    leader.become_leader(4, {A}, (A, B), 0)
    follower = partition(B, f_log, REPLICATED)
    follower.become_follower(A, 4, 0)
    outcome = fetch_once(leader, follower, 1)
    assert outcome.truncated_to == 40 and f_log.log_end_offset == 40
