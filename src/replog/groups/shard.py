"""The group coordinator of one ``__consumer_offsets`` partition, as a sans-IO machine.

The owner (the broker leading that partition) builds it by replaying the partition
(``GroupCoordinatorShard.load``), feeds it requests, write outcomes and time, and carries out
the ``Effects`` it returns; ``unload`` ends it when leadership moves. It reads no clock, opens
no socket and draws no randomness: every input carries ``now_ms``, and new member ids are
``"<client id or instance id>-<member_id_suffix()>"`` with a suffix the owner supplies (a UUID
in a broker; a counter in tests). See ``effects`` for the owner's obligations.

Inputs (each returns ``Effects``; ``request_id`` is the owner's name for the request):

    on_join_group / on_sync_group / on_heartbeat / on_leave_group      membership
    on_offset_commit / on_offset_delete / on_delete_groups             offsets and groups
    on_write_complete(write_id, error)                                 a Write's outcome
    on_tick(now_ms)                                                    time passed
    unload()                                                           leadership lost

An input that raises partway (a bug) raises ``InputFailed`` instead, carrying the effects the
owner must still carry out; the shard has resolved what the input started (``core``) and goes on
serving. The owner answers the failed request, if it is still unanswered, itself.

Reads answered at once (no effects): ``fetch_offsets``, ``list_groups``, ``describe_groups``.
Timers: ``next_deadline_ms()`` is the earliest time ``on_tick`` has something to do (session
deadlines, join and sync phases, pending member ids, the offsets retention check).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import NoReturn

from replog.errors import ErrorCode, invariant
from replog.groups.administration import Administration
from replog.groups.config import GroupConfig
from replog.groups.core import CommittedOffset, InputFailed, ShardCore, TopicPartitionLike
from replog.groups.effects import Effects, RequestId
from replog.groups.group import ClassicGroup, GroupState, SubscriptionReader
from replog.groups.loading import LoadSummary, ShardLoader
from replog.groups.membership import Membership
from replog.groups.offsets import Offsets
from replog.groups.rebalance import Rebalance
from replog.groups.records import RawRecord
from replog.protocol.messages import (
    DescribedGroup,
    HeartbeatRequest,
    JoinGroupRequest,
    ListedGroup,
    MemberIdentity,
    OffsetCommitRequest,
    OffsetDeleteRequest,
    OffsetFetchRequestGroup,
    OffsetFetchResponseGroup,
    SyncGroupRequest,
)

__all__ = ["GroupCoordinatorShard"]


_Due = tuple[int, int, str, str]
"""A timer: (deadline_ms, kind, group id, member id), ordered by time, then kind, group and
member (a plain tuple: the earliest is looked up after every input)."""

_JOIN, _SYNC, _PENDING_MEMBER, _SESSION = range(4)


class GroupCoordinatorShard:
    """The groups whose ids map to one ``__consumer_offsets`` partition (module docstring)."""

    def __init__(
        self,
        partition: int,
        *,
        config: GroupConfig,
        member_id_suffix: Callable[[], str],
        subscription_reader: SubscriptionReader | None = None,
        now_ms: int,
    ) -> None:
        self._core = ShardCore(partition, config, member_id_suffix, subscription_reader)
        self._rebalance = Rebalance(self._core)
        self._membership = Membership(self._core, self._rebalance)
        self._offsets = Offsets(self._core, self._rebalance)
        self._admin = Administration(self._core, self._offsets)
        self._next_expiry_ms = now_ms + config.offsets_retention_check_interval_ms
        self._seen_ms = now_ms  # the latest time an input carried
        self._earliest_by_group: dict[str, _Due] = {}
        self._timers_changed: set[str] = set()
        #: the groups the running input works on: rebalanced if it raises (``_abandon``)
        self._in_doubt: set[str] = set()
        self._unloaded = False

    @classmethod
    def load(
        cls,
        partition: int,
        records: Iterable[RawRecord],
        *,
        config: GroupConfig,
        member_id_suffix: Callable[[], str],
        subscription_reader: SubscriptionReader | None = None,
        now_ms: int,
    ) -> tuple[GroupCoordinatorShard, LoadSummary]:
        """Build the shard by replaying ``records`` (the partition from its start, in order)."""
        loader = ShardLoader()
        for key, value in records:
            loader.replay(key, value)
        return cls.from_loader(
            partition,
            loader,
            config=config,
            member_id_suffix=member_id_suffix,
            subscription_reader=subscription_reader,
            now_ms=now_ms,
        )

    @classmethod
    def from_loader(
        cls,
        partition: int,
        loader: ShardLoader,
        *,
        config: GroupConfig,
        member_id_suffix: Callable[[], str],
        subscription_reader: SubscriptionReader | None = None,
        now_ms: int,
    ) -> tuple[GroupCoordinatorShard, LoadSummary]:
        """Build the shard from a ``ShardLoader`` the owner fed incrementally. Groups loaded
        above ``group_size_max`` start a rebalance, so members can still commit and rejoin."""
        shard = cls(
            partition,
            config=config,
            member_id_suffix=member_id_suffix,
            subscription_reader=subscription_reader,
            now_ms=now_ms,
        )
        summary = loader.populate(shard._core, now_ms)
        shard._timers_changed.update(shard._core.groups)
        for group in shard._core.groups.values():
            if len(group.members) > config.group_size_max:
                shard._rebalance.prepare_rebalance(group, now_ms)
        invariant(not shard._core.take_effects().replies, "a fresh load answers nothing")
        return shard, summary

    @property
    def partition(self) -> int:
        """The ``__consumer_offsets`` partition this shard coordinates."""
        return self._core.partition

    # -- membership -----------------------------------------------------------------------------

    def on_join_group(
        self,
        request_id: RequestId,
        request: JoinGroupRequest,
        *,
        api_version: int,
        client_id: str,
        client_host: str,
        now_ms: int,
    ) -> Effects:
        """A JoinGroup at ``api_version`` from ``client_id`` at ``client_host``."""
        self._accept(request_id, now_ms, request.group_id)
        return self._run(
            request_id,
            now_ms,
            lambda: self._membership.join_group(
                request_id,
                request,
                api_version=api_version,
                client_id=client_id,
                client_host=client_host,
                now_ms=now_ms,
            ),
        )

    def on_sync_group(
        self, request_id: RequestId, request: SyncGroupRequest, *, api_version: int, now_ms: int
    ) -> Effects:
        """A SyncGroup at ``api_version``."""
        self._accept(request_id, now_ms, request.group_id)
        return self._run(
            request_id,
            now_ms,
            lambda: self._membership.sync_group(
                request_id, request, api_version=api_version, now_ms=now_ms
            ),
        )

    def on_heartbeat(
        self, request_id: RequestId, request: HeartbeatRequest, *, now_ms: int
    ) -> Effects:
        """A Heartbeat."""
        self._accept(request_id, now_ms, request.group_id)
        membership = self._membership
        return self._run(
            request_id, now_ms, lambda: membership.heartbeat(request_id, request, now_ms=now_ms)
        )

    def on_leave_group(
        self, request_id: RequestId, group_id: str, members: list[MemberIdentity], *, now_ms: int
    ) -> Effects:
        """A LeaveGroup of ``members`` (a v0-v2 request is one ``MemberIdentity``)."""
        self._accept(request_id, now_ms, group_id)
        return self._run(
            request_id,
            now_ms,
            lambda: self._membership.leave_group(request_id, group_id, members, now_ms=now_ms),
        )

    # -- offsets and groups ---------------------------------------------------------------------

    def on_offset_commit(
        self, request_id: RequestId, request: OffsetCommitRequest, *, now_ms: int
    ) -> Effects:
        """An OffsetCommit (any version: absent fields hold their defaults)."""
        self._accept(request_id, now_ms, request.group_id)
        return self._run(
            request_id, now_ms, lambda: self._offsets.commit(request_id, request, now_ms=now_ms)
        )

    def on_offset_delete(
        self, request_id: RequestId, request: OffsetDeleteRequest, *, now_ms: int
    ) -> Effects:
        """An OffsetDelete."""
        self._accept(request_id, now_ms, request.group_id)
        return self._run(request_id, now_ms, lambda: self._offsets.delete(request_id, request))

    def on_delete_groups(
        self, request_id: RequestId, group_ids: list[str], *, now_ms: int
    ) -> Effects:
        """A DeleteGroups for the ``group_ids`` this shard hosts (answered in that order)."""
        self._accept(request_id, now_ms, *group_ids)
        return self._run(
            request_id, now_ms, lambda: self._admin.delete_groups(request_id, group_ids, now_ms)
        )

    def on_partitions_deleted(
        self, partitions: Iterable[tuple[str, int]], *, now_ms: int
    ) -> Effects:
        """Topic partitions were deleted: tombstone every group's offsets for them."""
        self._check_loaded()
        self._seen_ms = max(self._seen_ms, now_ms)
        deleted = set(partitions)
        self._in_doubt = set()  # only offsets change
        return self._run(None, now_ms, lambda: self._offsets.delete_partitions(deleted))

    def fetch_offsets(
        self, request: OffsetFetchRequestGroup, *, require_stable: bool
    ) -> OffsetFetchResponseGroup:
        """The acknowledged offsets of one group."""
        self._check_loaded()
        return self._offsets.fetch(request, require_stable)

    def list_groups(self, states_filter: list[str]) -> list[ListedGroup]:
        """The hosted groups (ListGroups)."""
        self._check_loaded()
        return self._admin.list_groups(states_filter)

    def describe_groups(self, group_ids: list[str]) -> list[DescribedGroup]:
        """Descriptions of ``group_ids`` (DescribeGroups)."""
        self._check_loaded()
        return self._admin.describe_groups(group_ids)

    # -- writes, time, unloading ----------------------------------------------------------------

    def on_write_complete(self, write_id: int, error: ErrorCode, *, now_ms: int) -> Effects:
        """The outcome of ``Write`` ``write_id``: NONE once written with acks=all."""
        self._check_loaded()
        self._seen_ms = max(self._seen_ms, now_ms)
        # A write's continuation changes only the groups its records name.
        self._in_doubt = self._core.groups_of_write(write_id)
        self._timers_changed.update(self._in_doubt)
        self._core.check_outcome(write_id, error)  # the owner's mistake is not the input's
        return self._run(None, now_ms, lambda: self._core.complete_write(write_id, error, now_ms))

    def next_deadline_ms(self) -> int | None:
        """When ``on_tick`` next has something to do."""
        if self._unloaded:
            return None
        earliest = self._earliest_due()
        expiry = self._next_expiry_ms
        return expiry if earliest is None else min(earliest[0], expiry)

    def on_tick(self, now_ms: int) -> Effects:
        """Run every timer due at ``now_ms``, earliest first, each at its own deadline (or the
        latest time already seen, if later), so a late tick runs a chain of timers (the
        initial rebalance's extensions, say) as it would have run on time."""
        self._check_loaded()
        self._in_doubt = set()  # each timer's group, while it fires (``_fire``)
        return self._run(None, now_ms, lambda: self._tick(now_ms))

    def _tick(self, now_ms: int) -> None:
        while (due := self._earliest_due()) is not None and due[0] <= now_ms:
            self._seen_ms = max(self._seen_ms, due[0])
            self._fire(due, self._seen_ms)
        self._seen_ms = max(self._seen_ms, now_ms)
        if self._next_expiry_ms <= now_ms:
            self._in_doubt = set()  # expiry only writes tombstones
            self._timers_changed.update(self._core.groups)
            self._offsets.expire(now_ms)
            self._next_expiry_ms = now_ms + self._core.config.offsets_retention_check_interval_ms

    def unload(self) -> Effects:
        """Leadership moved: answer every waiting request NOT_COORDINATOR and stop. Writes in
        flight are forgotten (their outcomes need not be reported)."""
        self._check_loaded()
        self._core.fail_all_parked(ErrorCode.NOT_COORDINATOR)
        for group in self._core.groups.values():
            for member in group.members.values():
                member.awaiting_join = member.awaiting_sync = None
        self._unloaded = True
        return self._core.take_effects()

    # -- views (for tests and tools; do not mutate) ---------------------------------------------

    def group(self, group_id: str) -> ClassicGroup | None:
        """The live state of ``group_id``."""
        return self._core.groups.get(group_id)

    def group_ids(self) -> list[str]:
        """Every hosted group."""
        return list(self._core.groups)

    def committed_offsets(self, group_id: str) -> Mapping[TopicPartitionLike, CommittedOffset]:
        """The acknowledged offsets of ``group_id``."""
        return self._core.offsets.committed(group_id)

    def pending_write_count(self) -> int:
        """Writes handed out whose outcome is not reported yet."""
        return self._core.pending_write_count()

    def check_invariants(self) -> None:
        """Verify the shard's internal consistency (for tests and simulations; O(state)):
        cached timers match the groups, static ids map to members, leaders are members,
        awaited requests are open, and offsets in flight are what pending writes carry."""
        if self._unloaded:
            return
        self._earliest_due()  # bring the cache up to date as it would be when asked
        cached = dict(self._earliest_by_group)
        self._timers_changed.update(self._core.groups)
        self._timers_changed.update(cached)
        self._earliest_due()
        invariant(cached == self._earliest_by_group, "a group's timers changed unnoticed")
        for group in self._core.groups.values():
            statics = group.static_members.items()
            invariant(
                all(group.members[m].group_instance_id == i for i, m in statics),
                f"{group.group_id}: static members out of step",
            )
            invariant(
                not group.members or group.leader_id in group.members,
                f"{group.group_id}: the leader is not a member",
            )
            for member in group.members.values():
                for waiting in (member.awaiting_join, member.awaiting_sync):
                    invariant(
                        waiting is None or self._core.is_open(waiting),
                        f"{member.member_id} waits for an answered request",
                    )
        self._core.check_in_flight()

    # -- internals ------------------------------------------------------------------------------

    def _accept(self, request_id: RequestId, now_ms: int, *group_ids: str) -> None:
        self._check_loaded()
        self._seen_ms = max(self._seen_ms, now_ms)
        self._timers_changed.update(group_ids)
        self._in_doubt = set(group_ids)
        self._core.accept(request_id)

    def _run(self, request_id: RequestId | None, now_ms: int, step: Callable[[], None]) -> Effects:
        """Run one input's ``step`` (``request_id``: the request it handles, if any) and take its
        effects; if it raises, abandon it (``InputFailed``)."""
        first_write_id = self._core.next_write_id
        try:
            step()
        except Exception as exc:
            self._abandon(first_write_id, request_id, now_ms, exc)
        return self._core.take_effects()

    def _abandon(
        self, first_write_id: int, request_id: RequestId | None, now_ms: int, exc: Exception
    ) -> NoReturn:
        """Resolve what the failed input started (``ShardCore.abandon_input``), rebalance the
        groups it worked on, and raise ``InputFailed`` with what it still asks for.

        The input may have changed a group halfway (a member added to an Empty group, say):
        a rebalance is the classic protocol's remedy for a group in doubt -- every member
        rejoins, the ones that do not are dropped, and the next generation is consistent."""
        unanswered, failures = self._core.abandon_input(first_write_id, request_id, now_ms)
        for group_id in sorted(self._in_doubt):
            group = self._core.groups.get(group_id)
            if group is None or not group.members or not group.can_rebalance():
                continue
            try:
                self._rebalance.prepare_rebalance(group, now_ms)
            except Exception:  # resolve what the rebalance left; the group waits for a timer
                failures += 1 + self._core.fail_unsent_writes(first_write_id, now_ms)
                self._core.drop_dangling_waits()
        self._timers_changed.update(self._core.groups)  # any group may have changed
        why = f"shard {self.partition}: an input raised {exc!r}"
        if failures:
            why += f" ({failures} continuations or recovering rebalances raised too)"
        raise InputFailed(self._core.take_effects(), unanswered, why) from exc

    def _check_loaded(self) -> None:
        invariant(not self._unloaded, f"shard {self.partition} was unloaded")

    def _earliest_due(self) -> _Due | None:
        """The earliest timer of any group. Each group's earliest is cached and recomputed
        only for the groups an input may have changed (``_timers_changed``)."""
        for group_id in self._timers_changed:
            group = self._core.groups.get(group_id)
            earliest = min(_timers_of(group), default=None) if group is not None else None
            if earliest is None:
                self._earliest_by_group.pop(group_id, None)
            else:
                self._earliest_by_group[group_id] = earliest
        self._timers_changed.clear()
        return min(self._earliest_by_group.values(), default=None)

    def _fire(self, due: _Due, now_ms: int) -> None:
        _, kind, group_id, member_id = due
        group = self._core.groups[group_id]
        self._timers_changed.add(group_id)
        self._in_doubt = {group_id}  # the earlier timers' groups ran through
        if kind == _JOIN:
            self._rebalance.on_join_timer(group, now_ms)
        elif kind == _SYNC:
            self._rebalance.on_sync_timer(group, now_ms)
        elif kind == _PENDING_MEMBER:
            self._rebalance.on_pending_member_deadline(group, member_id, now_ms)
        else:
            self._rebalance.on_heartbeat_deadline(group, group.member(member_id), now_ms)
        self._core.discard_group_if_unused(group_id)


def _timers_of(group: ClassicGroup) -> Iterable[_Due]:
    if group.is_in(GroupState.DEAD):
        return
    group_id = group.group_id
    if group.join_timer is not None:
        yield (group.join_timer.deadline_ms, _JOIN, group_id, "")
    if group.sync_timer is not None:
        yield (group.sync_timer.deadline_ms, _SYNC, group_id, "")
    for member_id, deadline_ms in group.pending_members.items():
        yield (deadline_ms, _PENDING_MEMBER, group_id, member_id)
    for member in group.members.values():
        if member.heartbeat_deadline_ms is not None:
            yield (member.heartbeat_deadline_ms, _SESSION, group_id, member.member_id)
