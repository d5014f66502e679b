"""``GroupConsumer``: the consumer-group side of ``AsyncConsumer`` (a consumer with a
``group_id``).

- **Subscribing** (``subscribe``): topics by name or a regular expression over the cluster's
  topic names (internal topics left out); the subscription is re-read from metadata before
  each poll, and a change makes the member rejoin, as does a change in the partition counts
  the leader assigned.
- **Rebalancing** (``before_fetch``, at the start of each poll; eager, as Kafka's range and
  round-robin assignors are): the member gives every partition up (committing their positions
  first with auto-commit, then ``on_revoke``), joins the next generation (``GroupMembership``),
  takes the assignment, starts each partition at its committed offset (or resets it by
  ``auto_offset_reset`` when none) and calls ``on_assign``. The rebalance runs as a task of its
  own: a poll waits for it at most its timeout, and the next poll waits on.
- **Offsets**: ``commit`` (the positions of the assigned partitions, or given offsets) carries
  the member's generation, so the coordinator refuses it once the partitions may be someone
  else's (``CommitFailedError``); ``committed`` reads them back. With ``enable_auto_commit`` the
  positions are committed every ``auto_commit_interval_ms`` from poll, before a rebalance gives
  partitions up, and at close.

Without ``subscribe`` (``assign`` users) commits go outside any generation, which the
coordinator accepts while the group has no members.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import logging
import re
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import Protocol

from replog.client.connection import now_ms
from replog.client.group import CommitFailedError, GroupClient, OffsetAndMetadata
from replog.client.membership import GroupMembership, MembershipConfig, MemberState
from replog.errors import InvalidConfigError, ReplogError, RequestTimeoutError
from replog.topics import TopicPartitionLike

__all__ = ["INTERNAL_TOPICS", "GroupConsumer", "PositionOwner", "RebalanceCallback"]

_log = logging.getLogger(__name__)

RebalanceCallback = Callable[[list[tuple[str, int]]], Awaitable[None] | None]
"""``on_assign`` / ``on_revoke``: called with the partitions, sorted; may be a coroutine."""
INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state"})
"""Never matched by a pattern subscription (Kafka's exclude.internal.topics)."""


class PositionOwner(Protocol):
    """What the group side needs of the consumer it serves."""

    def assign(self, partitions: Iterable[TopicPartitionLike]) -> None:
        """Read exactly these partitions."""
        ...

    def seek(self, tp: TopicPartitionLike, offset: int) -> None:
        """Read ``tp`` from ``offset``."""
        ...

    def consumed_offsets(self) -> dict[tuple[str, int], OffsetAndMetadata]:
        """The position of every assigned partition that has one."""
        ...

    async def partition_counts(self, topics: set[str]) -> dict[str, int]:
        """Partition counts of ``topics`` (those that exist) from fresh metadata."""
        ...

    async def topic_names(self) -> list[str]:
        """Every topic of the cluster (metadata, refreshed when due)."""
        ...


class GroupConsumer:
    """See the module docstring."""

    def __init__(
        self,
        owner: PositionOwner,
        group: GroupClient,
        membership: MembershipConfig,
        *,
        enable_auto_commit: bool,
        auto_commit_interval_ms: int,
    ) -> None:
        self._owner = owner
        self.group = group
        self.membership = GroupMembership(group, membership)
        self.auto_commit = enable_auto_commit
        self.auto_commit_interval_ms = auto_commit_interval_ms
        self._topics: frozenset[str] | None = None
        self._pattern: re.Pattern[str] | None = None
        self._subscription: frozenset[str] = frozenset()
        self._on_assign: RebalanceCallback | None = None
        self._on_revoke: RebalanceCallback | None = None
        self._assigned: list[tuple[str, int]] = []
        self._rebalance: asyncio.Task[None] | None = None
        self._next_auto_commit_ms = now_ms() + auto_commit_interval_ms
        self._last_committed: dict[tuple[str, int], OffsetAndMetadata] = {}

    @property
    def subscribed(self) -> bool:
        """Whether partitions come from the group (``subscribe``)."""
        return self._topics is not None or self._pattern is not None

    @property
    def subscription(self) -> frozenset[str]:
        """The topics subscribed to now (a pattern's matches as of the last poll)."""
        return self._subscription

    @property
    def member_id(self) -> str:
        """This member's id in the group ("" when not joined)."""
        return self.membership.member_id

    @property
    def generation(self) -> int:
        """The generation this member belongs to (-1: none)."""
        return self.membership.generation

    # -- subscribing ----------------------------------------------------------------------------

    def subscribe(
        self,
        topics: Iterable[str] | None,
        pattern: re.Pattern[str] | None,
        on_assign: RebalanceCallback | None,
        on_revoke: RebalanceCallback | None,
    ) -> None:
        """Subscribe to ``topics`` or to the topics ``pattern`` matches (one of them)."""
        if (topics is None) == (pattern is None):
            raise InvalidConfigError("subscribe to a list of topics or to a pattern")
        self._topics = None if topics is None else frozenset(topics)
        self._pattern = pattern
        self._subscription = self._topics or frozenset()
        self._on_assign, self._on_revoke = on_assign, on_revoke
        self.membership.request_rejoin("new subscription")

    async def unsubscribe(self) -> None:
        """Give the partitions up and leave the group."""
        await self._cancel_rebalance()
        await self._revoke()
        self._topics, self._pattern, self._subscription = None, None, frozenset()
        await self.membership.stop()
        await self.membership.leave("the consumer unsubscribed")

    # -- poll -----------------------------------------------------------------------------------

    async def before_fetch(self, deadline_ms: int) -> bool:
        """Run before each fetch of a poll: auto-commit when due, follow the subscription, and
        rebalance when needed (waiting for it until ``deadline_ms``). True once the assigned
        partitions may be fetched."""
        self.membership.note_poll()
        if self.auto_commit and now_ms() >= self._next_auto_commit_ms:
            await self._auto_commit()
        if not self.subscribed:
            return True
        if self._rebalance is None:
            await self._check_subscription()
            if self.membership.needs_join or self.membership.state is MemberState.UNJOINED:
                self._rebalance = asyncio.get_running_loop().create_task(self._run_rebalance())
        if self._rebalance is not None:
            task = self._rebalance
            await asyncio.wait({task}, timeout=max(0, deadline_ms - now_ms()) / 1000)
            if not task.done():
                return False
            self._rebalance = None
            task.result()  # a rebalance that cannot succeed raises here
        return True

    async def _check_subscription(self) -> None:
        if self._pattern is not None:
            pattern = self._pattern
            names = await self._owner.topic_names()
            matched = frozenset(
                n for n in names if pattern.fullmatch(n) and n not in INTERNAL_TOPICS
            )
            if matched != self._subscription:
                self._subscription = matched
                self.membership.request_rejoin(f"the pattern now matches {sorted(matched)}")
        counts = self.membership.assigned_counts
        if counts is not None and self.membership.state is MemberState.STABLE:
            now = await self._owner.partition_counts(set(counts))
            if now != counts:
                self.membership.request_rejoin("partition counts changed")

    async def _run_rebalance(self) -> None:
        await self._revoke()
        assignment = await self.membership.join(
            set(self._subscription), self._owner.partition_counts
        )
        committed = await self.group.fetch_committed(assignment)
        self._owner.assign(assignment)
        for tp, found in committed.items():
            if found is not None:
                self._owner.seek(tp, found.offset)
        self._assigned = list(assignment)
        self._last_committed = {tp: c for tp, c in committed.items() if c is not None}
        _log.info("group %s: member %s of generation %d owns %s", self.group.group_id,
                  self.membership.member_id, self.membership.generation, assignment)  # fmt: skip
        await _call(self._on_assign, list(assignment))

    async def _revoke(self) -> None:
        """Give every assigned partition up (eager): commit first with auto-commit."""
        if not self._assigned:
            return
        if self.auto_commit:
            await self._auto_commit()
        revoked, self._assigned = self._assigned, []
        try:
            await _call(self._on_revoke, revoked)
        finally:
            self._owner.assign([])

    async def _cancel_rebalance(self) -> None:
        task, self._rebalance = self._rebalance, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, ReplogError):
                await task

    # -- offsets --------------------------------------------------------------------------------

    async def commit(
        self,
        offsets: Mapping[TopicPartitionLike, int | OffsetAndMetadata] | None = None,
        *,
        timeout_ms: int | None = None,
    ) -> None:
        """Commit ``offsets`` (default: the position of every assigned partition)."""
        if offsets is None:
            chosen = self._owner.consumed_offsets()
        else:
            chosen = {
                (t, int(p)): o if isinstance(o, OffsetAndMetadata) else OffsetAndMetadata(o)
                for (t, p), o in offsets.items()
            }
        member = self.subscribed and self.membership.state is not MemberState.UNJOINED
        await self.group.commit(
            chosen,
            generation=self.membership.generation if member else -1,
            member_id=self.membership.member_id if member else "",
            group_instance_id=self.membership.config.group_instance_id if member else None,
            timeout_ms=timeout_ms,
        )
        self._last_committed.update(chosen)

    async def _auto_commit(self) -> None:
        self._next_auto_commit_ms = now_ms() + self.auto_commit_interval_ms
        changed = {
            tp: o
            for tp, o in self._owner.consumed_offsets().items()
            if self._last_committed.get(tp) != o
        }
        if not changed:
            return
        try:
            await self.commit(changed)
        except CommitFailedError as exc:
            _log.info("group %s: auto-commit refused: %s", self.group.group_id, exc)
        except RequestTimeoutError as exc:
            _log.warning("group %s: auto-commit timed out: %s", self.group.group_id, exc)

    async def committed(
        self, partitions: Iterable[TopicPartitionLike], *, timeout_ms: int | None = None
    ) -> dict[tuple[str, int], int | None]:
        """The group's committed offset of each partition (None: none)."""
        found = await self.group.fetch_committed(partitions, timeout_ms=timeout_ms)
        return {(t, int(p)): None if o is None else o.offset for (t, p), o in found.items()}

    # -- closing --------------------------------------------------------------------------------

    async def close(self) -> None:
        """Commit (auto-commit), give the partitions up, leave the group, close connections."""
        try:
            await self._cancel_rebalance()
            if self.subscribed:
                try:
                    await self._revoke()
                except ReplogError as exc:
                    _log.warning("group %s: closing: %s", self.group.group_id, exc)
                await self.membership.stop()
                await self.membership.leave("the consumer is closing")
            elif self.auto_commit:
                with contextlib.suppress(ReplogError):
                    await self._auto_commit()
        finally:
            await self.membership.stop()
            await self.group.close()


async def _call(callback: RebalanceCallback | None, tps: list[tuple[str, int]]) -> None:
    if callback is None:
        return
    result = callback(sorted(tps))
    if inspect.isawaitable(result):
        await result
