"""Unit tests for replog.isr transitions not covered by the case-by-case tests of
``test_scenarios.py``."""

from __future__ import annotations

from pathlib import Path

import pytest

from replog.errors import ErrorCode, InvalidConfigError, InvariantError
from replog.isr import (
    CONSUMER_REPLICA_ID,
    DEBUGGING_CONSUMER_ID,
    Acks,
    DurabilityMode,
    FollowerAction,
    Partition,
    PartitionConfig,
    PartitionFetchRequest,
    Purgatory,
    ReplicaRole,
    StateChange,
)
from replog.log.records import iter_batches
from replog.metadata.types import AlterPartitionResult

from .support import (
    accept_alter_partition,
    batch,
    fetch_once,
    follower_fetch,
    open_log,
    partition,
    write,
)

A, B, C = 1, 2, 3
REPLICATED = PartitionConfig(durability=DurabilityMode.REPLICATED)


def _leader_with_pending_expand(tmp_path: Path) -> Partition:
    leader = partition(A, open_log(tmp_path, "l"), REPLICATED)
    leader.become_leader(0, {A}, (A, B), 0)
    follower_fetch(leader, B, 0, 1, last_fetched_epoch=-1)
    assert leader.pending_isr_change is not None
    return leader


def test_seed_vocabulary_ar_isr_cur_rar(tmp_path: Path) -> None:
    leader = partition(A, open_log(tmp_path, "l"))
    leader.become_leader(0, {A, B}, (A, B, C), 0, removing=frozenset({B}))
    assert leader.assigned == (A, B, C)
    assert leader.isr == {A, B} and leader.catching_up == {C}
    assert leader.reassigning == {A, C}
    assert leader.role is ReplicaRole.LEADER and leader.partition_epoch == -1


def test_alter_partition_rejected_reverts_to_committed_isr(tmp_path: Path) -> None:
    leader = _leader_with_pending_expand(tmp_path)
    (request,) = leader.take_ready().alter_partition
    assert leader.maximal_isr == {A, B}
    response = AlterPartitionResult(ErrorCode.INELIGIBLE_REPLICA)
    assert not leader.on_alter_partition_response(request, response, 2)
    assert leader.pending_isr_change is None and leader.maximal_isr == {A}


def test_alter_partition_fenced_stays_pending_until_metadata(tmp_path: Path) -> None:
    leader = _leader_with_pending_expand(tmp_path)
    (request,) = leader.take_ready().alter_partition
    fenced = AlterPartitionResult(ErrorCode.INVALID_UPDATE_VERSION)
    assert not leader.on_alter_partition_response(request, fenced, 2)
    assert leader.pending_isr_change == request
    assert not leader.maybe_shrink_isr(10**9)  # one change in flight at a time
    # Metadata at the same partition epoch keeps the pending change; a newer one ends it.
    leader.become_leader(0, {A}, (A, B), 3, partition_epoch=-1)
    assert leader.pending_isr_change == request
    leader.become_leader(0, {A, B}, (A, B), 3, partition_epoch=5)
    assert leader.pending_isr_change is None and leader.isr == {A, B}


def test_an_expansion_refused_for_a_newer_partition_epoch_is_proposed_again_at_once(
    tmp_path: Path,
) -> None:
    """An ELR-only change moved the partition epoch under an in-flight expansion;
    the refusal carries the newer state, which keeps this leader, so the leader commits it and
    proposes the expansion again on it at once instead of a metadata round trip later."""
    leader = _leader_with_pending_expand(tmp_path)
    (request,) = leader.take_ready().alter_partition
    newer = AlterPartitionResult(
        ErrorCode.INVALID_UPDATE_VERSION, leader=A, leader_epoch=0, partition_epoch=4, isr=(A,)
    )
    assert leader.on_alter_partition_response(request, newer, 2)
    assert leader.partition_epoch == 4 and leader.isr == {A}
    (again,) = leader.take_ready().alter_partition
    assert (again.partition_epoch, set(again.isr_ids)) == (4, {A, B})
    ok = AlterPartitionResult(ErrorCode.NONE, leader=A, leader_epoch=0, partition_epoch=5,
                              isr=(A, B))  # fmt: skip
    assert leader.on_alter_partition_response(again, ok, 3)
    assert leader.isr == {A, B} and leader.partition_epoch == 5


@pytest.mark.parametrize(
    "result",
    [
        AlterPartitionResult(ErrorCode.INVALID_UPDATE_VERSION, leader=B, leader_epoch=1,
                             partition_epoch=4, isr=(B,)),  # another leader
        AlterPartitionResult(ErrorCode.INVALID_UPDATE_VERSION, leader=A, leader_epoch=0,
                             partition_epoch=-1, isr=(A,)),  # not newer
        AlterPartitionResult(ErrorCode.INVALID_UPDATE_VERSION, leader=A, leader_epoch=0,
                             partition_epoch=4, isr=(A, C)),  # outside the assignment
    ],
)  # fmt: skip
def test_a_refusal_whose_state_does_not_keep_this_leader_waits_for_metadata(
    tmp_path: Path, result: AlterPartitionResult
) -> None:
    leader = _leader_with_pending_expand(tmp_path)
    (request,) = leader.take_ready().alter_partition
    assert not leader.on_alter_partition_response(request, result, 2)
    assert leader.pending_isr_change == request and leader.partition_epoch == -1


def test_alter_partition_other_error_is_retried_and_late_answers_ignored(tmp_path: Path) -> None:
    leader = _leader_with_pending_expand(tmp_path)
    (request,) = leader.take_ready().alter_partition
    retry = AlterPartitionResult(ErrorCode.UNKNOWN_SERVER_ERROR)
    leader.on_alter_partition_response(request, retry, 2)
    assert leader.take_ready().alter_partition == (request,)
    ok = AlterPartitionResult(ErrorCode.NONE, leader_epoch=0, partition_epoch=0, isr=(A, B))
    assert leader.on_alter_partition_response(request, ok, 3)
    assert leader.isr == {A, B} and leader.partition_epoch == 0
    assert not leader.on_alter_partition_response(request, ok, 4)  # duplicate: ignored


def test_hw_waits_for_every_isr_follower_after_becoming_leader(tmp_path: Path) -> None:
    log = open_log(tmp_path, "l")
    write(log, 0, 5)
    leader = partition(A, log, REPLICATED)
    leader.become_leader(1, {A, B}, (A, B), 0)
    assert leader.high_watermark == 0  # B's LEO is unknown after the reset
    follower_fetch(leader, B, 5, 1, last_fetched_epoch=0)
    assert leader.high_watermark == 5


def test_fsync_mode_counts_only_the_leaders_flushed_offset(tmp_path: Path) -> None:
    leader = partition(A, open_log(tmp_path, "l"))
    leader.become_leader(0, {A}, (A,), 0)
    assert leader.append_as_leader(batch(b"x"), Acks.ALL, 0) is None
    assert leader.high_watermark == 0
    leader.log.flush()  # type: ignore[attr-defined]
    assert leader.on_log_flushed(1)
    assert leader.high_watermark == 1
    (result,) = leader.take_ready().produce_results
    assert result.error_code is ErrorCode.NONE


def test_become_follower_fails_pending_produces_without_truncating(tmp_path: Path) -> None:
    log = open_log(tmp_path, "l")
    leader = partition(A, log, REPLICATED)
    leader.become_leader(0, {A, B}, (A, B), 0)
    leader.append_as_leader(batch(b"x"), Acks.ALL, 0, request_id=9)
    assert leader.become_follower(B, 1, 1)
    (result,) = leader.take_ready().produce_results
    assert (result.request_id, result.error_code) == (9, ErrorCode.NOT_LEADER_OR_FOLLOWER)
    assert log.log_end_offset == 1 and leader.role is ReplicaRole.FOLLOWER
    assert not leader.become_follower(B, 0, 2)  # stale epoch


def test_stale_broker_epoch_fetch_is_rejected(tmp_path: Path) -> None:
    leader = partition(A, open_log(tmp_path, "l"))
    leader.become_leader(0, {A, B}, (A, B), 0, broker_epochs={B: 7})
    response = leader.on_fetch(PartitionFetchRequest(B, 0, 0, broker_epoch=6), 0)
    assert response is not None and response.error_code is ErrorCode.NOT_LEADER_OR_FOLLOWER
    response = leader.on_fetch(PartitionFetchRequest(B, 0, 0, broker_epoch=7), 0)
    assert response is not None and response.error_code is ErrorCode.NONE


def test_ineligible_replica_neither_joins_nor_holds_hw(tmp_path: Path) -> None:
    log = open_log(tmp_path, "l")
    leader = partition(A, log, REPLICATED)
    leader.become_leader(0, {A}, (A, C), 0)
    leader.update_replica_eligibility(frozenset({C}))
    leader.append_as_leader(batch(b"x"), Acks.LEADER, 0)
    follower_fetch(leader, C, 1, 1, last_fetched_epoch=0)
    assert leader.pending_isr_change is None and leader.high_watermark == 1


def test_fetch_with_a_wait_is_answered_at_once(tmp_path: Path) -> None:
    """The machine keeps no fetches: a fetch finding no data is answered empty at once, whatever
    its max_wait_ms (the broker's request layer holds long polls)."""
    leader = partition(A, open_log(tmp_path, "l"), REPLICATED)
    leader.become_leader(0, {A, B}, (A, B), 0)
    response = leader.on_fetch(PartitionFetchRequest(B, 0, 0, min_bytes=1, max_wait_ms=500), 0)
    assert response.error_code is ErrorCode.NONE and response.size_bytes == 0
    assert leader.next_deadline_ms() is None
    assert leader.take_ready().is_empty


def test_consumer_reads_only_below_hw(tmp_path: Path) -> None:
    leader = partition(A, open_log(tmp_path, "l"), REPLICATED)
    leader.become_leader(0, {A, B}, (A, B), 0)
    leader.append_as_leader(batch(b"x"), Acks.LEADER, 0)
    response = leader.on_fetch(PartitionFetchRequest(-1, 0, 0), 0)
    assert response is not None and response.size_bytes == 0 and response.high_watermark == 0


def test_a_follower_serves_only_the_debugging_consumer_up_to_its_own_hw(tmp_path: Path) -> None:
    """Kafka's replica verification tool fetches with replica id -2 from every replica: a
    follower answers it from its own log, up to its own HW; an ordinary consumer and a replica
    still get NOT_LEADER_OR_FOLLOWER from it."""
    leader = partition(A, open_log(tmp_path, "l"), REPLICATED)
    follower = partition(B, open_log(tmp_path, "f"), REPLICATED)
    leader.become_leader(0, {A, B}, (A, B), 0)
    follower.become_follower(A, 0, 0)
    for value in (b"x", b"y"):
        leader.append_as_leader(batch(value), Acks.LEADER, 0)
    for now_ms in (1, 2, 3):  # copy both records, report LEO 2, learn HW 2
        fetch_once(leader, follower, now_ms)
    leader.append_as_leader(batch(b"z"), Acks.LEADER, 4)
    fetch_once(leader, follower, 5)  # copied; the follower's HW is still 2
    assert follower.log.log_end_offset == 3 and follower.high_watermark == 2
    debug = follower.on_fetch(PartitionFetchRequest(DEBUGGING_CONSUMER_ID, 0, -1), 6)
    assert debug.error_code is ErrorCode.NONE and debug.high_watermark == 2
    assert debug.records is not None
    read = [h.base_offset for _, h in iter_batches(debug.records.to_bytes())]
    assert read == [0, 1]  # not offset 2, above the follower's HW
    for replica_id in (CONSUMER_REPLICA_ID, C):
        refused = follower.on_fetch(PartitionFetchRequest(replica_id, 0, -1), 3)
        assert refused.error_code is ErrorCode.NOT_LEADER_OR_FOLLOWER
    offline = partition(C, open_log(tmp_path, "o"), REPLICATED)  # no role yet
    refused = offline.on_fetch(PartitionFetchRequest(DEBUGGING_CONSUMER_ID, 0, -1), 3)
    assert refused.error_code is ErrorCode.NOT_LEADER_OR_FOLLOWER


def test_duplicate_fetch_response_is_ignored(tmp_path: Path) -> None:
    leader = partition(A, open_log(tmp_path, "l"), REPLICATED)
    follower = partition(B, open_log(tmp_path, "f"), REPLICATED)
    leader.become_leader(0, {A, B}, (A, B), 0)
    follower.become_follower(A, 0, 0)
    leader.append_as_leader(batch(b"x"), Acks.LEADER, 0)
    request = follower.fetch_request()
    assert request is not None
    response = leader.on_fetch(request, 1)
    assert response is not None
    assert follower.on_fetch_response(response, 1).action is FollowerAction.APPENDED
    assert follower.on_fetch_response(response, 1).action is FollowerAction.IGNORED


def test_isr_shrink_then_expand_round_trip(tmp_path: Path) -> None:
    leader = partition(A, open_log(tmp_path, "l"), REPLICATED)
    leader.become_leader(0, {A, B}, (A, B), 0)
    leader.append_as_leader(batch(b"x"), Acks.LEADER, 0)
    assert leader.maybe_shrink_isr(30_001)
    accept_alter_partition(leader, 30_001)
    assert leader.isr == {A} and leader.high_watermark == 1
    follower_fetch(leader, B, 1, 30_002, last_fetched_epoch=0)
    accept_alter_partition(leader, 30_003)
    assert leader.isr == {A, B}


def test_state_change_lines_round_trip(tmp_path: Path) -> None:
    """A replica's records are the one state-change record type, in the one line format the
    state-change log tool merges and parses back (a change's life from request to completion:
    completed by the broker that acted on the metadata)."""
    from replog.state_change import Phase, StateChangeKind, parse_log_line

    changes: list[StateChange] = []
    leader = partition(A, open_log(tmp_path, "l"), REPLICATED, changes)
    leader.become_leader(3, {A}, (A, B), 42)
    (change,) = changes
    assert change.kind is StateChangeKind.BECOME_LEADER and change.phase is Phase.COMPLETED
    assert (str(change.target), change.leader_epoch, change.completed_ms) == ("broker 1", 3, 42)
    line = change.to_log_line()
    assert line.startswith("42 broker 1 completed become-leader for t-0 requested by controller -1")
    assert parse_log_line(line) == change
    leader.become_leader(2, {A}, (A, B), 43)  # stale: refused, and said so
    refused = changes[-1]
    assert refused.phase is Phase.REJECTED and refused.leader_epoch == 2
    assert parse_log_line(refused.to_log_line()) == refused


def test_purgatory_orders_by_deadline_and_watch_key() -> None:
    purgatory: Purgatory[tuple[str, int]] = Purgatory(3, watch_key=lambda op: op[1])
    assert purgatory.add(("a", 10), 300)
    assert purgatory.add(("b", 5), 200)
    assert purgatory.add(("c", 7), 100)
    assert not purgatory.add(("d", 1), 50)  # bounded
    assert purgatory.next_deadline_ms() == 100
    assert purgatory.pop_watched_through(7) == [("b", 5), ("c", 7)]
    assert purgatory.pop_expired(299) == []
    assert purgatory.pop_expired(300) == [("a", 10)] and len(purgatory) == 0


def test_invalid_config_and_bad_leader_input_raise() -> None:
    with pytest.raises(InvalidConfigError):
        PartitionConfig(min_insync_replicas=0)
    with pytest.raises(InvalidConfigError):
        PartitionConfig(replica_lag_ms_max=-1)


def test_leader_outside_isr_is_a_bug(tmp_path: Path) -> None:
    leader = partition(A, open_log(tmp_path, "l"))
    with pytest.raises(InvariantError):
        leader.become_leader(0, {B}, (A, B), 0)
    assert leader.role is ReplicaRole.OFFLINE


def test_new_leader_hides_its_stale_hw_from_consumers(tmp_path: Path) -> None:
    """A new leader's own HW can lag the one its predecessor showed consumers; until the HW
    reaches the start of its epoch it answers OFFSET_NOT_AVAILABLE rather than a HW that would
    go back (the simulator's seed-1 finding, pinned without the simulator)."""
    log = open_log(tmp_path, "b")
    write(log, 0, 3)  # replicated from the old leader; its HW never reached this replica
    assert log.high_watermark == 0
    new_leader = partition(B, log, REPLICATED)
    new_leader.become_leader(1, {A, B}, (A, B), 0)
    consumer = PartitionFetchRequest(-1, 0, current_leader_epoch=1)
    assert new_leader.on_fetch(consumer, 1).error_code is ErrorCode.OFFSET_NOT_AVAILABLE
    follower_fetch(new_leader, A, 3, 2, last_fetched_epoch=0)  # A has it all: the HW moves
    assert new_leader.high_watermark == 3
    answer = new_leader.on_fetch(consumer, 3)
    assert answer.error_code is ErrorCode.NONE and answer.high_watermark == 3
