"""Scripted tests of `RaftCore`'s replication rules (F1-F5 of core.py) and of `LogModel`."""

from __future__ import annotations

import pytest

from replog.errors import ErrorCode, InvariantError, RecordBatchTooLargeError
from replog.log.epoch_cache import EpochEntry
from replog.raft.entries import encode_snapshot
from replog.raft.log_model import FetchValidity, LogModel
from replog.raft.messages import (
    FetchSnapshotRequest,
    OffsetAndEpoch,
    RaftFetchRequest,
    RaftFetchResponse,
    RaftSnapshotId,
)
from replog.raft.states import Leader

from .harness import Quorum, to, values
from .test_core_elections import elected


def isolate(q: Quorum, node_id: int) -> None:
    """Drop everything queued to or from ``node_id``."""
    q.take(lambda s: node_id in (s.src, s.dst))


def run_without(q: Quorum, node_id: int, duration_ms: int) -> None:
    for _ in range(duration_ms // 5):
        q.tick(5)
        isolate(q, node_id)
        for _ in range(50):
            isolate(q, node_id)
            if not q.deliver(tick=True):
                break


# ------------------------------------------------------------------------------ F2-F3


def test_committed_once_a_majority_fetched_it() -> None:
    q = elected(Quorum())
    q.propose(1, b"a", b"b")
    assert q.core(1).high_watermark == 1
    q.run(30)
    for node_id in (1, 2, 3):
        assert q.core(node_id).high_watermark == 3
        assert values(q.nodes[node_id].log) == [b"a", b"b"]


def test_leader_counts_its_own_offset_only_once_flushed() -> None:
    q = elected(Quorum())
    q.nodes[1].auto_flush = False
    q.propose(1, b"a")
    run_without(q, 3, 30)  # 2 fetched "a" (durably): with the leader that is a majority
    leader = q.core(1)
    assert q.core(2).log.end_offset == 2
    assert leader.high_watermark == 1  # but the leader's own copy is not fsynced yet
    leader.on_flushed(2, q.now_ms)
    assert leader.high_watermark == 2


def test_old_epoch_records_are_not_committed_by_counting() -> None:
    """KRaft's rule (Raft's figure 8): a leader commits only by counting replicas of a record
    of its own epoch; older records are committed with it."""
    q = elected(Quorum(fetch_max_bytes=1))  # one batch per fetch
    q.propose(1, b"a")  # offset 1, epoch 1, on the leader only
    isolate(q, 2)
    isolate(q, 3)
    assert q.core(1).resign(q.now_ms)
    q.collect()
    q.take()
    q.tick(250, nodes=[1])  # Resigned -> Unattached(2)
    q.tick(250, nodes=[1])  # -> Prospective; its log is the longest, so it wins epoch 3
    q.settle()
    leader = q.core(1)
    assert leader.state == Leader(3, 2, 1)
    assert leader.high_watermark == 1
    q.take()
    q.tick(0, nodes=[2])  # 2 fetches from offset 1 ...
    q.deliver(to(1))
    q.deliver(to(2))  # ... gets "a" (epoch 1) only, and fetches again from offset 2
    q.deliver(to(1))
    assert q.core(2).log.end_offset == 2
    assert leader.high_watermark == 1  # a majority holds "a", but "a" is from epoch 1
    q.deliver(to(2))  # the epoch-3 leader-change record
    q.deliver(to(1))
    assert leader.high_watermark == 3  # a record of epoch 3 on a majority: both commit


def test_follower_takes_the_leader_hw_up_to_its_own_log_end() -> None:
    q = elected(Quorum(fetch_max_bytes=1))
    q.propose(1, b"a")
    q.propose(1, b"b")
    q.run(100)
    assert q.core(2).high_watermark == 3
    q.propose(1, b"c")
    q.core(2).on_message(
        1,
        RaftFetchResponse(1, 1, ErrorCode.NONE, 3, 1, high_watermark=9, records=b""),
        q.now_ms,
    )
    assert q.core(2).high_watermark == 3  # never past its own log end (nor for stale answers)


# ------------------------------------------------------------------------------ F4: divergence


def test_follower_with_a_divergent_suffix_truncates_and_catches_up() -> None:
    q = elected(Quorum())
    q.run(20)
    q.propose(1, b"lost-1", b"lost-2")  # never leaves node 1
    isolate(q, 1)
    run_without(q, 1, 600)  # 2 and 3 elect a new leader and write on
    new_leader = q.leader() if q.leader() != 1 else None
    assert new_leader in (2, 3)
    q.propose(new_leader, b"kept")
    run_without(q, 1, 50)
    assert values(q.nodes[1].log) == [b"lost-1", b"lost-2"]
    q.run(300)  # node 1 is back: Resigned/Unattached, then a follower that diverges
    for node_id in (1, 2, 3):
        assert values(q.nodes[node_id].log) == [b"kept"]
        assert q.nodes[node_id].log.entries() == q.nodes[new_leader].log.entries()


def test_diverging_answer_truncates_and_leaves_the_hw_alone() -> None:
    q = elected(Quorum())
    q.run(20)
    follower = q.core(2)
    hw = follower.high_watermark
    end = follower.log.end
    follower._fetch_loop().in_flight = (end.offset, end.epoch)  # as if it had asked
    follower.on_message(
        1,
        RaftFetchResponse(
            1, 1, ErrorCode.NONE, end.offset, end.epoch, 50, diverging=OffsetAndEpoch(1, 1)
        ),
        q.now_ms,
    )
    assert follower.high_watermark == hw


def test_truncation_below_the_high_watermark_is_a_bug() -> None:
    q = elected(Quorum())
    q.propose(1, b"a")
    q.run(30)
    follower = q.core(2)
    assert follower.high_watermark == 2
    end = follower.log.end
    follower._fetch_loop().in_flight = (end.offset, end.epoch)
    with pytest.raises(InvariantError):
        follower.on_message(
            1,
            RaftFetchResponse(
                1, 1, ErrorCode.NONE, end.offset, end.epoch, diverging=OffsetAndEpoch(0, 0)
            ),
            q.now_ms,
        )


def test_late_and_duplicated_fetch_answers_are_ignored() -> None:
    q = elected(Quorum())
    q.propose(1, b"a")
    q.tick(5, nodes=[2])
    q.deliver(to(1))
    (answer,) = q.take(to(2))
    q.deliver(lambda s: False)
    q.queue += [answer, answer, answer]  # duplicated by the network
    q.deliver(to(2))
    assert values(q.nodes[2].log) == [b"a"]


# ------------------------------------------------------------------------------ F5: snapshots


def snapshot_leader(q: Quorum, leader: int) -> RaftSnapshotId:
    """Make a local snapshot on ``leader`` at its HW (its log start moves there)."""
    core = q.core(leader)
    end = core.high_watermark
    snapshot_id = RaftSnapshotId(end, core.log.epoch_for_offset(end - 1))
    q.nodes[leader].log.snapshots[snapshot_id] = encode_snapshot(
        snapshot_id, [b"state-%d" % i for i in range(20)], 0
    )
    assert core.on_snapshot(snapshot_id)
    q.collect()
    return snapshot_id


def test_lagging_follower_fetches_the_snapshot_in_chunks_and_resumes() -> None:
    q = elected(Quorum(snapshot_chunk_bytes=100))
    q.propose(1, *[b"v%d" % i for i in range(10)])
    run_without(q, 3, 50)
    snapshot_id = snapshot_leader(q, 1)
    assert q.core(1).log.start_offset == snapshot_id.end_offset == 11
    q.propose(1, b"after")
    q.run(200)
    lagging = q.nodes[3]
    assert lagging.log.snapshot == snapshot_id
    assert lagging.log.snapshots[snapshot_id] == q.nodes[1].log.snapshots[snapshot_id]
    chunks = [
        s for s in lagging.readies for op in s.log_ops if type(op).__name__ == "WriteSnapshotChunk"
    ]
    assert len(chunks) > 1
    assert values(lagging.log) == [b"after"]
    assert lagging.core.high_watermark == q.core(1).high_watermark


def test_fetch_snapshot_of_a_deleted_snapshot_is_out_of_range() -> None:
    q = elected(Quorum())
    q.core(1).on_message(2, FetchSnapshotRequest(1, 2, RaftSnapshotId(5, 1), 0, 100), q.now_ms)
    answer = q.core(1).take_ready().messages[0].message
    assert answer.error is ErrorCode.OFFSET_OUT_OF_RANGE


def test_snapshot_past_the_high_watermark_is_a_bug() -> None:
    q = elected(Quorum())
    q.propose(1, b"a")
    with pytest.raises(InvariantError):
        q.core(1).on_snapshot(RaftSnapshotId(2, 1))


# ------------------------------------------------------------------------------ proposals


def test_propose_on_a_follower_names_the_leader() -> None:
    q = elected(Quorum())
    result = q.core(2).propose([b"x"], q.now_ms)
    assert result.error is ErrorCode.NOT_LEADER_OR_FOLLOWER
    assert (result.leader_id, result.epoch) == (1, 1)


def test_propose_over_the_batch_limit_is_refused() -> None:
    q = elected(Quorum(batch_bytes_max=100))
    with pytest.raises(RecordBatchTooLargeError):
        q.core(1).propose([b"x" * 200], q.now_ms)


def test_fetch_with_a_lower_epoch_is_fenced_and_a_higher_one_unknown() -> None:
    q = elected(Quorum())
    for epoch, error in ((0, ErrorCode.FENCED_LEADER_EPOCH), (2, ErrorCode.UNKNOWN_LEADER_EPOCH)):
        q.core(1).on_message(2, RaftFetchRequest(epoch, 2, 1, 1, 100), q.now_ms)
        assert q.core(1).take_ready().messages[0].message.error is error
    assert isinstance(q.core(1).state, Leader)


# ------------------------------------------------------------------------------ LogModel rules


def model(entries: list[tuple[int, int]], end: int, start: int = 0, snapshot=None) -> LogModel:
    return LogModel.of(start, end, [EpochEntry(e, o) for e, o in entries], snapshot)


def test_validate_fetch_follows_rules_a_to_d() -> None:
    leader = model([(1, 0), (2, 3), (4, 6)], end=9)
    assert leader.validate_fetch(0, 0).valid  # a: empty log, fetch from 0
    assert leader.validate_fetch(5, 2).valid  # d: epoch 2 holds offsets up to 6
    assert leader.validate_fetch(7, 3) == FetchValidity(OffsetAndEpoch(2, 6))  # c: no epoch 3
    assert leader.validate_fetch(10, 4) == FetchValidity(OffsetAndEpoch(4, 9))  # c: past the end
    snap = RaftSnapshotId(6, 2)
    compacted = model([(4, 6)], end=9, start=6, snapshot=snap)
    assert compacted.validate_fetch(4, 2) == FetchValidity(snapshot_id=snap)  # b: below start
    assert compacted.validate_fetch(6, 1) == FetchValidity(snapshot_id=snap)  # b: other epoch
    assert compacted.validate_fetch(8, 1) == FetchValidity(snapshot_id=snap)  # b: older epoch
    assert compacted.validate_fetch(6, 2).valid


def test_truncation_offset_follows_kip_279_over_several_rounds() -> None:
    leader = model([(1, 0), (2, 3), (4, 6)], end=9)
    follower = model([(1, 0), (3, 5)], end=8)
    answer = leader.validate_fetch(8, 3).diverging
    assert answer == OffsetAndEpoch(2, 6)
    assert follower.truncation_offset(answer) == 5  # b: it lacks epoch 2: end of epoch 1
    follower.truncate_to(5)
    answer = leader.validate_fetch(5, 1).diverging
    assert answer == OffsetAndEpoch(1, 3)
    assert follower.truncation_offset(answer) == 3  # c: min(own end, leader end, LEO)
    follower.truncate_to(3)
    assert leader.validate_fetch(3, 1).valid
    assert model([], end=0).truncation_offset(OffsetAndEpoch(1, 3)) == 0  # a


def test_end_offset_for_epoch_after_a_snapshot_install() -> None:
    log = model([], end=6, start=6, snapshot=RaftSnapshotId(6, 2))
    assert log.last_epoch == 2
    assert log.end_offset_for_epoch(2) == (2, 6)
    assert log.end_offset_for_epoch(1) == (1, 6)
    assert log.end_offset_for_epoch(3) == (-1, -1)
