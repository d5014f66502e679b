"""The register linearizability checker on hand-built histories, good and bad."""

from __future__ import annotations

import itertools
import random

import pytest

from replog.simkit.linearizability import KvOperation, check_kv


def op(
    f: str,
    call: int,
    ret: int | None,
    *,
    value: object = None,
    expected: object = None,
    output: object = None,
    key: str = "x",
    process: int = 0,
) -> KvOperation:
    return KvOperation(process, f, key, call, ret, value, expected, output)


def w(call: int, ret: int | None, value: int, **kw: object) -> KvOperation:
    return op("write", call, ret, value=value, **kw)  # type: ignore[arg-type]


def r(call: int, ret: int | None, output: object, **kw: object) -> KvOperation:
    return op("read", call, ret, output=output, **kw)  # type: ignore[arg-type]


def cas(
    call: int, ret: int | None, expected: int, value: int, ok: bool, **kw: object
) -> KvOperation:
    return op("cas", call, ret, expected=expected, value=value, output=ok, **kw)  # type: ignore[arg-type]


def test_empty_and_sequential_histories_are_linearizable() -> None:
    assert check_kv([]).ok
    assert check_kv([w(0, 1, 1), r(2, 3, 1), w(4, 5, 2), r(6, 7, 2)]).ok


def test_a_read_concurrent_with_a_write_may_see_either_value() -> None:
    assert check_kv([w(0, 10, 1), r(1, 2, None)]).ok
    assert check_kv([w(0, 10, 1), r(1, 2, 1)]).ok


def test_stale_read_is_caught() -> None:
    result = check_kv([w(0, 1, 1), r(2, 3, None)])
    assert not result.ok and result.key == "x"
    assert "read() -> None" in result.detail


def test_lost_write_is_caught() -> None:
    # both writes were acknowledged in order; a later read sees the first one
    assert not check_kv([w(0, 1, 1), w(2, 3, 2), r(4, 5, 1)]).ok


def test_reads_must_agree_on_the_order_of_concurrent_writes() -> None:
    writes = [w(0, 10, 1, process=1), w(0, 10, 2, process=2)]
    assert check_kv([*writes, r(11, 12, 1), r(13, 14, 1)]).ok
    assert check_kv([*writes, r(11, 12, 2), r(13, 14, 2)]).ok
    assert not check_kv([*writes, r(11, 12, 2), r(13, 14, 1)]).ok


def test_compare_and_set_outcomes_must_match_the_state() -> None:
    assert check_kv([w(0, 1, 1), cas(2, 3, 1, 2, True), r(4, 5, 2)]).ok
    assert check_kv([w(0, 1, 1), cas(2, 3, 5, 2, False), r(4, 5, 1)]).ok
    assert not check_kv([w(0, 1, 1), cas(2, 3, 1, 2, False)]).ok  # it held 1: must swap
    assert not check_kv([w(0, 1, 1), cas(2, 3, 7, 2, True)]).ok  # it did not hold 7


def test_an_indefinite_write_may_or_may_not_take_effect() -> None:
    assert check_kv([w(0, None, 1), r(5, 6, 1)]).ok
    assert check_kv([w(0, None, 1), r(5, 6, None)]).ok
    assert check_kv([w(0, None, 1), r(5, 6, 1), r(7, 8, 1)]).ok
    # once seen, it cannot be unseen
    assert not check_kv([w(0, None, 1), r(5, 6, 1), r(7, 8, None)]).ok
    # and it cannot take effect before it was invoked
    assert not check_kv([r(0, 1, 1), w(2, None, 1)]).ok


def test_an_indefinite_cas_may_have_swapped_or_not() -> None:
    history = [w(0, 1, 1), cas(2, None, 1, 2, False)]
    assert check_kv([*history, r(5, 6, 2)]).ok
    assert check_kv([*history, r(5, 6, 1)]).ok
    assert not check_kv([*history, r(5, 6, 3)]).ok


def test_keys_are_checked_independently_and_the_bad_one_is_named() -> None:
    history = [
        w(0, 1, 1, key="a"),
        r(2, 3, 1, key="a"),
        w(0, 1, 5, key="b"),
        r(2, 3, 4, key="b"),
    ]
    result = check_kv(history)
    assert not result.ok and result.key == "b"


def test_an_operation_cannot_return_before_its_call() -> None:
    with pytest.raises(ValueError):
        check_kv([w(5, 4, 1)])


def _random_register_history(seed: int, ops: int, processes: int) -> list[KvOperation]:
    """A linearizable history: each operation takes effect at a random point of its interval,
    the effects applied to a real register in that order."""
    rng = random.Random(seed)
    clock = itertools.count()
    state: dict[str, int | None] = {"a": None, "b": None}
    pending: list[tuple[int, str, str, int | None, int | None, int]] = []
    history: list[KvOperation] = []
    values = itertools.count(1)
    busy: set[int] = set()
    while len(history) < ops or pending:
        if len(history) + len(pending) < ops and len(busy) < processes and rng.random() < 0.6:
            process = next(p for p in range(processes) if p not in busy)
            busy.add(process)
            f = rng.choice(["read", "write", "cas"])
            key = rng.choice("ab")
            value = next(values) if f != "read" else None
            expected = rng.choice([state[key], None, 1]) if f == "cas" else None
            pending.append((next(clock), f, key, value, expected, process))
            continue
        if not pending:
            continue
        call, f, key, value, expected, process = pending.pop(rng.randrange(len(pending)))
        output: object = None
        if f == "read":
            output = state[key]
        elif f == "write":
            state[key] = value
        else:
            output = state[key] == expected
            if output:
                state[key] = value
        ret = next(clock)
        indefinite = rng.random() < 0.05
        history.append(
            KvOperation(process, f, key, call, None if indefinite else ret, value, expected, output)
        )
        busy.discard(process)
    return history


@pytest.mark.parametrize("seed", range(5))
def test_generated_linearizable_histories_pass(seed: int) -> None:
    assert check_kv(_random_register_history(seed, 400, 4)).ok


def test_a_generated_history_with_one_read_changed_fails() -> None:
    history = _random_register_history(1, 200, 3)
    index = next(
        i
        for i, o in enumerate(history)
        if o.f == "read" and o.ret is not None and isinstance(o.output, int)
    )
    bad = history[index]
    history[index] = KvOperation(
        bad.process, "read", bad.key, bad.call, bad.ret, output=bad.output + 10_000
    )
    assert not check_kv(history).ok
