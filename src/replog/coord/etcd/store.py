"""The etcd backend's store access: the handle's keys under its prefix, reads at one revision,
and the write loop. Every write is one txn planned from one read (an ``attempt`` returning a
``TxnPlan``, a ``Done`` or ``RETRY``) and committed with a compare on ``feed/seq``'s mod_revision
plus the plan's own compares, putting ``feed/seq`` and the write's feed records
(``changes/<seq>``) in the same txn; a failed compare plans again from fresh reads until the
call's timeout (see ``replog.coord.etcd.coordinator``)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Generic, TypeVar

import attrs

from replog.clock import monotonic_s
from replog.coord import codec
from replog.coord.errors import CoordinatorClosedError
from replog.coord.etcd.client import EtcdClient, JsonObj, KeyValue, cmp_mod, op_put, op_range
from replog.errors import RequestTimeoutError
from replog.metadata.types import MetadataChange

__all__ = [
    "RETRY",
    "Done",
    "EtcdStore",
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


class EtcdStore:
    """The handle's view of its keys: ``client`` talks to etcd, every key is under ``prefix``
    (ending in "/"), a call without ``timeout_ms`` gets ``default_timeout_ms``, and
    ``on_commit`` runs after each committed write (it wakes the handle's feed push). Reads and
    writes raise ``CoordinatorClosedError`` once ``closed`` is set."""

    def __init__(
        self,
        client: EtcdClient,
        prefix: str,
        default_timeout_ms: int,
        on_commit: Callable[[], None],
    ) -> None:
        self.client = client
        self.prefix = prefix
        self.default_timeout_ms = default_timeout_ms
        self._on_commit = on_commit
        self.closed = False

    def k(self, name: str) -> str:
        """The full key of ``name``."""
        return self.prefix + name

    def check_open(self) -> None:
        """Raise ``CoordinatorClosedError`` if the handle is closed."""
        if self.closed:
            raise CoordinatorClosedError("the etcd coordinator is closed")

    def read(self, ops: Sequence[JsonObj], timeout_ms: int | None) -> list[list[KeyValue]]:
        """The ranges ``ops`` read at one revision."""
        self.check_open()
        return self.client.read(ops, timeout_ms=timeout_ms)

    def seq_read(
        self, ops: Sequence[JsonObj], timeout_ms: int | None
    ) -> tuple[int, int, list[list[KeyValue]]]:
        """Read ``feed/seq`` and ``ops`` at one revision: (last seq, its mod_revision, ranges)."""
        got = self.read([op_range(self.k("feed/seq")), *ops], timeout_ms)
        return last_int(got[0]), mod_rev(got[0]), got[1:]

    def run(self, timeout_ms: int | None, attempt: Callable[[], TxnPlan[T] | Done[T] | Retry]) -> T:
        """TxnPlan and commit until a commit succeeds, a plan needs no write, or time runs out."""
        budget = self.default_timeout_ms if timeout_ms is None else timeout_ms
        deadline = monotonic_s() + budget / 1000
        while True:
            self.check_open()
            attempt_plan = attempt()
            if isinstance(attempt_plan, Done):
                return attempt_plan.value
            if isinstance(attempt_plan, TxnPlan):
                seq = attempt_plan.last_seq + 1
                records = list(attempt_plan.records(seq))
                ops = [
                    *attempt_plan.ops,
                    op_put(self.k("feed/seq"), str(seq)),
                    op_put(self.k(f"changes/{seq:020d}"), codec.dumps(records)),
                ]
                compares = [
                    cmp_mod(self.k("feed/seq"), attempt_plan.seq_mod),
                    *attempt_plan.compares,
                ]
                left_ms = max(1, int((deadline - monotonic_s()) * 1000))
                if self.client.txn(compares, ops, timeout_ms=left_ms).succeeded:
                    self._on_commit()
                    return attempt_plan.result(seq)
            if monotonic_s() > deadline:
                raise RequestTimeoutError(f"etcd write kept conflicting for {budget} ms")
