"""The simulator finds the defects that black-box runs found in replog's first version, when
they are put back.

Each test breaks one rule of the product (the way it was broken before its fix) and checks that
some of a fixed set of seeds reports the violation kind that defect produces. A test fails if
the simulator stops exercising the path (a workload or nemesis change that loses the case): then
``python -m tests.sim.test_catches`` finds new seeds for it.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from replog.broker.driver import requests
from replog.broker.driver.requests.base import Reply
from replog.errors import ErrorCode
from replog.groups import loading, offsets
from replog.log.log import Log
from replog.protocol import messages as m
from replog.testing.sim import run_seed

pytestmark = pytest.mark.sim


@contextmanager
def _delete_does_nothing() -> Iterator[None]:
    """DeleteTopics answers success without asking the controller (the first version's
    Admin.delete)."""

    def handle(ctx: Any, body: m.DeleteTopicsRequest, services: Any) -> Reply:
        del ctx, services
        return Reply(
            m.DeleteTopicsResponse(
                responses=[m.DeletableTopicResult(name=t.name, error_code=0) for t in body.topics]
            )
        )

    original = requests.HANDLERS[m.DeleteTopicsRequest]
    requests.HANDLERS[m.DeleteTopicsRequest] = handle
    try:
        yield
    finally:
        requests.HANDLERS[m.DeleteTopicsRequest] = original


@contextmanager
def _retries_appended_twice() -> Iterator[None]:
    """A leader appends an idempotent producer's batch again when it arrives twice (no
    duplicate check against the producer state; the first version had no producer state at
    all)."""
    original = Log._check_producers

    def check(self: Log, produced: Any) -> None:
        self.producers.state.check_append(produced)  # validated, but never a duplicate

    Log._check_producers = check  # type: ignore[method-assign,assignment]
    try:
        yield
    finally:
        Log._check_producers = original  # type: ignore[method-assign]


@contextmanager
def _offsets_not_loaded() -> Iterator[None]:
    """A broker that becomes leader of an ``__consumer_offsets`` partition serves its groups
    without loading their committed offsets (group metadata still loads)."""
    original = loading.ShardLoader.populate

    def populate(self: loading.ShardLoader, core: Any, now_ms: int) -> Any:
        self._offsets.clear()
        return original(self, core, now_ms)

    loading.ShardLoader.populate = populate  # type: ignore[method-assign]
    try:
        yield
    finally:
        loading.ShardLoader.populate = original  # type: ignore[method-assign]


@contextmanager
def _commits_not_fenced() -> Iterator[None]:
    """OffsetCommit checks neither the member nor the generation of a group with members."""
    original = offsets.Offsets._validate_commit

    def validate(self: offsets.Offsets, group: Any, request: Any) -> ErrorCode:
        del self, group, request
        return ErrorCode.NONE

    offsets.Offsets._validate_commit = validate  # type: ignore[method-assign]
    try:
        yield
    finally:
        offsets.Offsets._validate_commit = original  # type: ignore[method-assign]


BREAKS: dict[str, tuple[Callable[[], Any], tuple[str, ...], tuple[int, ...]]] = {
    "delete_does_nothing": (_delete_does_nothing, ("admin-effect-missing",), (34, 90)),
    "retries_appended_twice": (
        _retries_appended_twice,
        ("history duplicate", "history wrong-offset"),
        (17, 27),
    ),
    "commits_not_fenced": (_commits_not_fenced, ("fenced-commit-accepted",), (77, 312)),
    "offsets_not_loaded": (_offsets_not_loaded, ("committed-offset-lost",), (1, 8)),
}
"""break -> (context manager putting the defect back, violation kinds it causes, seeds)."""


def _kinds(seed: int, breaking: Callable[[], Any]) -> set[str]:
    with breaking():
        result = run_seed(seed)
    return {v.split(" ", 1)[1].split(":", 1)[0] for v in result.violations}


@pytest.mark.parametrize("name", sorted(BREAKS))
def test_catches(name: str) -> None:
    breaking, kinds, seeds = BREAKS[name]
    found = {seed: _kinds(seed, breaking) for seed in seeds}
    assert any(set(kinds) & k for k in found.values()), f"{name}: no seed caught it: {found}"


def main(argv: list[str]) -> int:
    """Search seeds ``0..N-1`` for ones that catch each break (to refresh ``BREAKS``)."""
    count = int(argv[0]) if argv else 100
    for name, (breaking, kinds, _) in sorted(BREAKS.items()):
        caught = [s for s in range(count) if set(kinds) & _kinds(s, breaking)]
        print(f"{name}: {caught}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
