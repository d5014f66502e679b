"""The history checker and the invariant checks, each on a hand-made broken input."""

from __future__ import annotations

from replog.testing.history import History, check_history
from replog.testing.invariants import InvariantChecker, ReplicaView

TP = ("t", 0)


def _clean() -> History:
    h = History()
    for i in range(3):
        op = h.send(TP, f"v{i}".encode(), -1)
        op.status, op.offset = "ok", i
    h.poll(1, TP, [(0, b"v0"), (1, b"v1")])
    h.poll(1, TP, [(2, b"v2")])
    h.final_reads[TP] = [(0, b"v0"), (1, b"v1"), (2, b"v2")]
    return h


def _kinds(h: History) -> set[str]:
    return {a.kind for a in check_history(h)}


def test_clean_history_passes() -> None:
    assert check_history(_clean()) == []


def test_lost_write_detected() -> None:
    h = _clean()
    h.final_reads[TP] = [(0, b"v0"), (1, b"v1")]
    h.polls.pop()
    assert {"lost-write", "unseen"} <= _kinds(h)


def test_inconsistent_offset_detected() -> None:
    h = _clean()
    op = h.send(TP, b"x", 1)
    op.status = "info"
    h.poll(2, TP, [(1, b"x")])
    assert "inconsistent-offset" in _kinds(h)


def test_duplicate_detected() -> None:
    h = _clean()
    h.final_reads[TP].append((3, b"v2"))
    assert "duplicate" in _kinds(h)


def test_phantom_and_wrong_offset_detected() -> None:
    h = _clean()
    h.final_reads[TP].append((3, b"never-sent"))
    assert "phantom" in _kinds(h)
    h = _clean()
    h.sends[2].offset = 7
    assert "wrong-offset" in _kinds(h)


def test_consumer_backwards_and_skip_detected() -> None:
    h = _clean()
    h.poll(1, TP, [(1, b"v1")])
    assert "nonmonotonic-poll" in _kinds(h)
    h = _clean()
    h.polls[1] = h.polls[1].__class__(1, TP, ((2, b"v2"),))
    h.polls.insert(1, h.polls[0].__class__(1, TP, ()))
    h.polls[0] = h.polls[0].__class__(1, TP, ((0, b"v0"),))
    assert "skipped-poll" in _kinds(h)


def test_seek_allows_going_back() -> None:
    h = _clean()
    h.poll(1, TP, [(0, b"v0")], seek=0)
    assert check_history(h) == []


def test_unseen_acked_record_detected() -> None:
    h = _clean()
    op = h.send(TP, b"v3", -1)
    op.status, op.offset = "ok", 3
    h.final_reads = {}
    assert "unseen" in _kinds(h)


def _view(broker: int, **kw: object) -> ReplicaView:
    base: dict[str, object] = dict(
        broker_id=broker,
        incarnation=1,
        tp=TP,
        is_leader=False,
        leader_epoch=1,
        high_watermark=2,
        log_end_offset=2,
        isr=frozenset({1, 2}),
        assigned=(1, 2),
        records={0: b"a", 1: b"b"},
    )
    base.update(kw)
    return ReplicaView(**base)  # type: ignore[arg-type]


STORED = {TP: ((1, 2), (1, 2))}


def test_healthy_state_passes() -> None:
    checker = InvariantChecker()
    assert checker.check([_view(1, is_leader=True), _view(2)], STORED) == []


def test_two_leaders_in_one_epoch_detected() -> None:
    checker = InvariantChecker()
    checker.check([_view(1, is_leader=True)], STORED)
    problems = checker.check([_view(2, is_leader=True, current=False)], STORED)
    assert any(p.startswith("one-leader-per-epoch") for p in problems)


def test_leader_hw_decrease_detected() -> None:
    checker = InvariantChecker()
    checker.check([_view(1, is_leader=True)], STORED)
    problems = checker.check([_view(1, is_leader=True, high_watermark=1)], STORED)
    assert any(p.startswith("leader-hw-decreased") for p in problems)


def test_consumer_hw_decrease_detected() -> None:
    checker = InvariantChecker()
    assert checker.on_consumer_hw(TP, 5, client=1) == []
    assert checker.on_consumer_hw(TP, 4, client=2) == []  # another client's answer raced
    assert checker.on_consumer_hw(TP, 4, client=1)[0].startswith("consumer-hw-decreased")


def test_isr_outside_ar_detected() -> None:
    checker = InvariantChecker()
    problems = checker.check(
        [_view(1, is_leader=True, isr=frozenset({1, 3}))], {TP: ((1, 2), (1, 3))}
    )
    assert sum(p.startswith("isr-not-in-ar") for p in problems) == 2


def test_isr_logs_diverging_below_hw_detected() -> None:
    checker = InvariantChecker()
    problems = checker.check(
        [_view(1, is_leader=True), _view(2, records={0: b"a", 1: b"X"})], STORED
    )
    assert any(p.startswith("isr-logs-diverge") for p in problems)


def test_acked_record_missing_on_leader_detected() -> None:
    checker = InvariantChecker()
    assert checker.on_acked(TP, 1, b"b") == []
    assert checker.check([_view(1, is_leader=True)], STORED) == []
    problems = checker.check([_view(1, is_leader=True, records={0: b"a"})], STORED)
    assert any(p.startswith("acked-record-lost") for p in problems)
    assert checker.on_acked(TP, 1, b"other")[0].startswith("acked-record-lost")


def test_hw_moving_under_min_isr_detected() -> None:
    checker = InvariantChecker(min_isr=2)
    full = frozenset({1, 2})
    assert checker.check([_view(1, is_leader=True, high_watermark=1, isr=full)], STORED) == []
    # the ISR shrinks to the leader: the HW must stay where it is
    alone = frozenset({1})
    assert checker.check([_view(1, is_leader=True, high_watermark=1, isr=alone)], STORED) == []
    problems = checker.check([_view(1, is_leader=True, high_watermark=2, isr=alone)], STORED)
    assert any(p.startswith("hw-under-min-isr") for p in problems)


def test_hw_moving_just_before_a_shrink_in_one_step_passes() -> None:
    checker = InvariantChecker(min_isr=2)
    checker.check([_view(1, is_leader=True, high_watermark=1, isr=frozenset({1, 2}))], STORED)
    view = _view(1, is_leader=True, high_watermark=2, isr=frozenset({1}))
    assert checker.check([view], STORED) == []
