"""Bounded kazoo calls for the ZooKeeper backend: reads and guarded multi-op writes that honour
a deadline and raise the contract's errors.

Every feed-visible write is one ZooKeeper transaction that also compare-and-sets the feed head
(``/replog/head``, the next seq) and creates the feed node ``/replog/changes/c-<seq>``. So feed
seqs are contiguous, one per atomic write, in commit order, and a write whose reads went stale
(any op's version check failed, the head moved) is re-planned from fresh reads until it commits
or its deadline passes.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Sequence
from typing import Any, Generic, TypeVar

import attrs
import kazoo.exceptions as kze
from kazoo.handlers.threading import KazooTimeoutError

from replog.clock import monotonic_s, sleep_s
from replog.coord import codec
from replog.coord.errors import CoordinatorUnavailableError
from replog.errors import RequestTimeoutError
from replog.metadata.types import MetadataChange

__all__ = ["HEAD", "CHANGES", "Op", "Plan", "change_path", "kazoo_errors", "ZkIo"]

HEAD = "/replog/head"
CHANGES = "/replog/changes"

T = TypeVar("T")

Op = tuple[Any, ...]
"""A transaction op: ("check", path, version), ("create", path, data, ephemeral),
("set", path, data, version), ("delete", path, version)."""


def change_path(seq: int) -> str:
    """The feed node of ``seq`` (relative to the chroot)."""
    return f"{CHANGES}/c-{seq:010d}"


@attrs.define
class Plan(Generic[T]):
    """What one attempt of a write decided: its result, and (if ``write``) the ops and feed
    records to commit atomically."""

    result: T
    ops: list[Op] = attrs.Factory(list)
    records: list[MetadataChange] = attrs.Factory(list)
    write: bool = True


@contextlib.contextmanager
def kazoo_errors() -> Iterator[None]:
    """Map kazoo's connection and timeout errors to the contract's retriable errors."""
    try:
        yield
    except KazooTimeoutError as e:
        raise RequestTimeoutError(f"ZooKeeper call timed out: {e}") from e
    except (
        kze.ConnectionLoss,
        kze.OperationTimeoutError,
        kze.SessionExpiredError,
        kze.ConnectionClosedError,
        kze.SessionMovedError,
        kze.ZookeeperStoppedError,
    ) as e:
        raise CoordinatorUnavailableError(f"ZooKeeper unavailable: {type(e).__name__}") from e


class ZkIo:
    """Deadline-bounded operations on absolute paths under ``root`` (the chroot)."""

    def __init__(self, root: str) -> None:
        self.root = root

    def p(self, path: str) -> str:
        """The absolute path of ``path`` under the chroot."""
        return self.root + path if path != "/" or not self.root else self.root

    @staticmethod
    def wait(result: Any, deadline: float) -> Any:
        """Wait for a kazoo async result until ``deadline`` (monotonic seconds)."""
        remaining = deadline - monotonic_s()
        if remaining <= 0:
            raise RequestTimeoutError("ZooKeeper call ran out of time")
        return result.get(timeout=remaining)

    def get(self, client: Any, path: str, deadline: float) -> tuple[bytes, Any] | None:
        """(data, stat) of ``path``, or None if it does not exist."""
        try:
            data: bytes
            data, stat = self.wait(client.get_async(self.p(path)), deadline)
        except kze.NoNodeError:
            return None
        return data, stat

    def gets(
        self, client: Any, paths: Sequence[str], deadline: float
    ) -> list[tuple[bytes, Any] | None]:
        """Many ``get``s in flight at once."""
        pending = [client.get_async(self.p(path)) for path in paths]
        out: list[tuple[bytes, Any] | None] = []
        for result in pending:
            try:
                data: bytes
                data, stat = self.wait(result, deadline)
                out.append((data, stat))
            except kze.NoNodeError:
                out.append(None)
        return out

    def children(self, client: Any, path: str, deadline: float) -> list[str]:
        """Sorted child names of ``path`` ([] if it does not exist)."""
        try:
            names: list[str] = self.wait(client.get_children_async(self.p(path)), deadline)
        except kze.NoNodeError:
            return []
        return sorted(names)

    def ensure(self, client: Any, paths: Sequence[str], deadline: float) -> None:
        """Create persistent paths (and parents) that do not exist yet."""
        for path in paths:
            self.wait(client.ensure_path_async(self.p(path)), deadline)

    def delete_many(self, client: Any, paths: Sequence[str], deadline: float) -> None:
        """Delete nodes (missing ones are fine)."""
        pending = [client.delete_async(self.p(path)) for path in paths]
        for result in pending:
            with contextlib.suppress(kze.NoNodeError):
                self.wait(result, deadline)

    def _apply(self, tx: Any, op: Op) -> None:
        kind = op[0]
        if kind == "check":
            tx.check(self.p(op[1]), op[2])
        elif kind == "create":
            tx.create(self.p(op[1]), op[2], ephemeral=op[3])
        elif kind == "set":
            tx.set_data(self.p(op[1]), op[2], version=op[3])
        else:
            tx.delete(self.p(op[1]), version=op[2])

    def commit_unfed(self, client: Any, prepare: Callable[[], Plan[T]], deadline: float) -> T:
        """Like ``transact`` for a write that appends no feed record: commit ``prepare()``'s
        ops (their checks and versions guard it), planning again after a conflict."""
        attempt = 0
        while True:
            plan = prepare()
            if not plan.write:
                return plan.result
            tx = client.transaction()
            for op in plan.ops:
                self._apply(tx, op)
            results = self.wait(tx.commit_async(), deadline)
            if not any(isinstance(r, Exception) for r in results):
                return plan.result
            attempt += 1
            if monotonic_s() >= deadline:
                raise RequestTimeoutError(f"ZooKeeper write kept conflicting ({attempt} attempts)")

    def transact(self, client: Any, prepare: Callable[[int], Plan[T]], deadline: float) -> T:
        """Plan from fresh reads (``prepare(seq)`` gets the seq this write will have) and commit
        the plan with the feed head CAS and the feed node, retrying stale attempts."""
        attempt = 0
        last_failure: object = None
        while True:
            head = self.get(client, HEAD, deadline)
            if head is None:
                raise CoordinatorUnavailableError("the ZooKeeper layout is missing /replog/head")
            seq = int(head[0] or b"1")
            plan = prepare(seq)
            if not plan.write:
                return plan.result
            tx = client.transaction()
            for op in plan.ops:
                self._apply(tx, op)
            tx.set_data(self.p(HEAD), str(seq + 1).encode(), version=head[1].version)
            tx.create(self.p(change_path(seq)), codec.dumps_bytes(plan.records))
            results = self.wait(tx.commit_async(), deadline)
            failures = [r for r in results if isinstance(r, Exception)]
            if not failures:
                return plan.result
            last_failure = [type(f).__name__ for f in failures]
            attempt += 1
            if monotonic_s() >= deadline:
                raise RequestTimeoutError(
                    f"ZooKeeper write kept conflicting ({attempt} attempts, last {last_failure})"
                )
            if attempt > 3:
                sleep_s(min(0.001 * attempt, 0.02))
