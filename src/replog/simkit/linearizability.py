"""A linearizability checker for histories of key-value registers (read, write, compare-and-set).

Theory of operation. A history is a list of completed or indefinite operations, each with the
moment it was invoked and, if it returned, the moment it returned (any totally ordered numbers:
the simulator uses its event counter). An operation that failed definitely (``fail``: it did
not take effect) is left out by the caller. An *indefinite* operation (``info``: the client
never learned the outcome) has no return: it may take effect at any moment after its call, or
never, and its output is unknown.

The search is Wing & Gong's, with Lowe's improvements as in Porcupine:

- **P-compositionality.** A register history is linearizable iff the sub-history of every key
  is, so each key is checked on its own (a much smaller search).
- **Just-in-time linearization.** Calls and returns form one doubly linked list in time order.
  Walking from the front, a call whose operation the model accepts in the current state is
  linearized: it and its return are lifted out of the list and the walk restarts. Reaching a
  return means its operation was not linearized before it returned: backtrack (undo the last
  linearization, try the next call after it).
- **Memoization.** The pair (set of linearized operations as a bit set, model state) is cached;
  reaching a pair seen before cannot lead anywhere new, so that branch is cut.
- **Indefinite operations** have no return entry, so they never force a backtrack: once no
  return remains, the rest can be linearized at the end (or not at all) and the history passes.
  The model accepts them with any output: an indefinite cas may or may not have swapped.

A failing key reports the operations it holds, in call order, so the counterexample can be read.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable, Sequence
from typing import Any

import attrs

__all__ = ["KvOperation", "LinearizabilityResult", "check_kv", "check_operations"]


@attrs.frozen
class KvOperation:
    """One register operation as a client saw it.

    ``f`` is read / write / cas. ``value``: what a write or cas writes. ``expected``: what a cas
    compares with. ``output``: a read's value or a cas's success (ignored when indefinite).
    ``ret`` is None for an indefinite (info) operation.
    """

    process: int
    f: str
    key: Hashable
    call: int
    ret: int | None
    value: Any = None
    expected: Any = None
    output: Any = None

    def describe(self) -> str:
        """One line for a counterexample."""
        args = {"read": "", "write": f"{self.value}", "cas": f"{self.expected}->{self.value}"}
        result = "?" if self.ret is None else repr(self.output)
        end = "inf" if self.ret is None else str(self.ret)
        return f"p{self.process} {self.f}({args[self.f]}) -> {result}  [{self.call}, {end}]"


@attrs.frozen
class LinearizabilityResult:
    """The verdict; on failure ``key`` and ``detail`` show the offending sub-history."""

    ok: bool
    key: Hashable = None
    detail: str = ""
    operations: int = 0


_State = Hashable
Step = Callable[[_State, KvOperation], Iterable[_State]]


def register_step(state: _State, op: KvOperation) -> list[_State]:
    """The register model: the states ``op`` can lead to from ``state`` ([] if impossible)."""
    indefinite = op.ret is None
    if op.f == "read":
        return [state] if indefinite or op.output == state else []
    if op.f == "write":
        return [op.value]
    if indefinite:
        return [op.value, state] if state == op.expected else [state]
    if op.output:
        return [op.value] if state == op.expected else []
    return [state] if state != op.expected else []


def check_kv(operations: Iterable[KvOperation], initial: _State = None) -> LinearizabilityResult:
    """Check a register history, key by key (every key starts at ``initial``)."""
    by_key: dict[Hashable, list[KvOperation]] = {}
    for op in operations:
        if op.f == "read" and op.ret is None:
            continue  # no effect and no output: it constrains nothing
        by_key.setdefault(op.key, []).append(op)
    total = 0
    for key in sorted(by_key, key=repr):
        ops = by_key[key]
        total += len(ops)
        if not check_operations(ops, initial, register_step):
            lines = [op.describe() for op in sorted(ops, key=lambda o: o.call)]
            detail = f"key {key!r}: no linearization of {len(ops)} operations:\n  " + (
                "\n  ".join(lines[:60]) + ("\n  ..." if len(lines) > 60 else "")
            )
            return LinearizabilityResult(False, key, detail, total)
    return LinearizabilityResult(True, operations=total)


@attrs.define(eq=False)
class _Node:
    """A call or return in the doubly linked history list."""

    op: int
    is_call: bool
    prev: _Node | None = None
    next: _Node | None = None
    match: _Node | None = None  # a call's return (None: indefinite)


def _build_list(ops: Sequence[KvOperation]) -> _Node:
    events: list[tuple[int, int, _Node]] = []
    for index, op in enumerate(ops):
        call = _Node(index, True)
        events.append((op.call, 0, call))
        if op.ret is not None:
            if op.ret < op.call:
                raise ValueError(f"operation returns before its call: {op}")
            call.match = _Node(index, False)
            events.append((op.ret, 1, call.match))
    events.sort(key=lambda e: (e[0], e[1]))
    head = _Node(-1, False)
    tail = head
    for _, _, node in events:
        tail.next, node.prev = node, tail
        tail = node
    return head


def _lift(call: _Node) -> None:
    for node in (call, call.match):
        if node is not None and node.prev is not None:
            node.prev.next = node.next
            if node.next is not None:
                node.next.prev = node.prev


def _unlift(call: _Node) -> None:
    for node in (call.match, call):
        if node is not None and node.prev is not None:
            node.prev.next = node
            if node.next is not None:
                node.next.prev = node


def check_operations(ops: Sequence[KvOperation], initial: _State, step: Step) -> bool:
    """Whether ``ops`` (one key) has a linearization under ``step`` from ``initial``."""
    head = _build_list(ops)
    returns_left = sum(1 for op in ops if op.ret is not None)
    cache: set[tuple[int, _State]] = set()
    # stack entries: (lifted call, state before it, linearized bits before it, other outcomes)
    stack: list[tuple[_Node, _State, int, list[_State]]] = []
    state, linearized = initial, 0
    entry = head.next
    while returns_left:
        if entry is not None and entry.is_call:
            bits = linearized | (1 << entry.op)
            outcomes = [s for s in step(state, ops[entry.op]) if (bits, s) not in cache]
            if outcomes:
                stack.append((entry, state, linearized, outcomes[1:]))
                state, linearized = outcomes[0], bits
                cache.add((bits, state))
                _lift(entry)
                returns_left -= entry.match is not None
                entry = head.next
            else:
                entry = entry.next
            continue
        # a return (or the end) reached before its call was linearized: backtrack
        if not stack:
            return False
        call, before, bits_before, others = stack.pop()
        _unlift(call)
        returns_left += call.match is not None
        bits = bits_before | (1 << call.op)
        others = [s for s in others if (bits, s) not in cache]
        if others:  # the same call, another outcome (an indefinite cas)
            stack.append((call, before, bits_before, others[1:]))
            state, linearized = others[0], bits
            cache.add((bits, state))
            _lift(call)
            returns_left -= call.match is not None
            entry = head.next
        else:
            state, linearized = before, bits_before
            entry = call.next
    return True
