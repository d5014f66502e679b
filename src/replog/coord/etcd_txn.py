"""The etcd backend's write machinery: every write is one txn planned from one read and
committed with a compare on ``feed/seq`` (see ``replog.coord.etcd``), retried on conflict.

``EtcdTxnBase`` is the base of the parts of ``EtcdCoordinator`` (sessions, feed, admin queue,
the coordinator itself): the handle's state, declared here, and the read/commit plumbing."""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Generic, TypeVar

import attrs

from replog.clock import monotonic_s
from replog.coord import codec
from replog.coord.contract import Coordinator
from replog.coord.dispatch import Dispatcher
from replog.coord.errors import CoordinatorClosedError
from replog.coord.etcd_client import EtcdClient, JsonObj, KeyValue, cmp_mod, op_put, op_range
from replog.errors import RequestTimeoutError
from replog.metadata.types import MetadataChange

__all__ = [
    "RETRY",
    "Done",
    "EtcdTxnBase",
    "TxnPlan",
    "Records",
    "Retry",
    "last_int",
    "mod_rev",
    "plan",
]

T = TypeVar("T")
Records = Callable[[int], Sequence[MetadataChange]]


@attrs.frozen
class TxnPlan(Generic[T]):
    """One write to attempt: extra compares and ops, its feed records, and its result."""

    seq_mod: int
    last_seq: int
    compares: list[JsonObj]
    ops: list[JsonObj]
    records: Records
    result: Callable[[int], T]


@attrs.frozen
class Done(Generic[T]):
    """No write needed: the call's result."""

    value: T


class Retry:
    """Something changed under the plan (e.g. an expiry was just recorded): read again."""


RETRY = Retry()


def last_int(kvs: list[KeyValue]) -> int:
    """The decimal value of a counter key (0: absent)."""
    return int(kvs[0].value) if kvs else 0


def mod_rev(kvs: list[KeyValue]) -> int:
    """The mod_revision of a key (0: absent, for a compare that it stays absent)."""
    return kvs[0].mod_revision if kvs else 0


def plan(
    last_seq: int,
    seq_mod: int,
    compares: list[JsonObj],
    ops: list[JsonObj],
    records: Records,
    result: Callable[[int], T],
) -> TxnPlan[T]:
    """A write to commit as seq ``last_seq + 1``, read when ``feed/seq`` had ``seq_mod``."""
    return TxnPlan(seq_mod, last_seq, compares, ops, records, result)


class EtcdTxnBase(Coordinator):
    """The handle's state and its read/commit plumbing (not instantiated on its own)."""

    _p: str
    _client: EtcdClient
    _default_timeout_ms: int
    _bg_timeout_ms: int
    _lock: threading.RLock
    _dispatcher: Dispatcher
    _closed: bool
    _wake: threading.Event

    def _k(self, name: str) -> str:
        return self._p + name

    def _check_open(self) -> None:
        if self._closed:
            raise CoordinatorClosedError("the etcd coordinator is closed")

    def _read(self, ops: Sequence[JsonObj], timeout_ms: int | None) -> list[list[KeyValue]]:
        self._check_open()
        return self._client.read(ops, timeout_ms=timeout_ms)

    def _seq_read(
        self, ops: Sequence[JsonObj], timeout_ms: int | None
    ) -> tuple[int, int, list[list[KeyValue]]]:
        """Read ``feed/seq`` and ``ops`` at one revision: (last seq, its mod_revision, ranges)."""
        got = self._read([op_range(self._k("feed/seq")), *ops], timeout_ms)
        return last_int(got[0]), mod_rev(got[0]), got[1:]

    def _run(
        self, timeout_ms: int | None, attempt: Callable[[], TxnPlan[T] | Done[T] | Retry]
    ) -> T:
        """Plan and commit until a commit succeeds, a plan needs no write, or time runs out."""
        budget = self._default_timeout_ms if timeout_ms is None else timeout_ms
        deadline = monotonic_s() + budget / 1000
        while True:
            self._check_open()
            attempt_plan = attempt()
            if isinstance(attempt_plan, Done):
                return attempt_plan.value
            if isinstance(attempt_plan, TxnPlan):
                seq = attempt_plan.last_seq + 1
                records = list(attempt_plan.records(seq))
                ops = [
                    *attempt_plan.ops,
                    op_put(self._k("feed/seq"), str(seq)),
                    op_put(self._k(f"changes/{seq:020d}"), codec.dumps(records)),
                ]
                compares = [
                    cmp_mod(self._k("feed/seq"), attempt_plan.seq_mod),
                    *attempt_plan.compares,
                ]
                left_ms = max(1, int((deadline - monotonic_s()) * 1000))
                if self._client.txn(compares, ops, timeout_ms=left_ms).succeeded:
                    self._wake.set()
                    return attempt_plan.result(seq)
            if monotonic_s() > deadline:
                raise RequestTimeoutError(f"etcd write kept conflicting for {budget} ms")

    if TYPE_CHECKING:  # provided by EtcdCoordinator; declared here for the type checker

        def _ensure_thread(self) -> None:
            """Start the background thread (renewals, expiry records, feed push) if needed."""
