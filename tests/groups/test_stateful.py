"""A hypothesis state machine driving several members of a consumer group through joins, syncs,
heartbeats, leaves, commits, deletions, timeouts, write outcomes and unload/reload, checking:

- one leader per generation (within a coordinator's lifetime, and for every generation that
  handed out assignments, ever), and each such generation hands out one set of assignments;
- every member of a Stable group holds the assignment its generation's leader sent;
- generations never go back, except to the last one written when a coordinator fails over;
- acknowledged committed offsets are exactly what the coordinator serves, and survive
  unload/reload from the written records, never replaced by older ones;
- reloading from the written records rebuilds Stable and Empty groups as they were;
- every request is answered exactly once (unanswered ones when the shard is unloaded).

Writes the coordinator asks for wait until a rule completes (or fails) them, in order. At a
reload the writes still pending are either lost or found in the log (written, not acknowledged).
"""

from __future__ import annotations

import itertools
from typing import Any

import attrs
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from replog.errors import ErrorCode
from replog.groups.config import GroupConfig
from replog.groups.effects import Effects, Write
from replog.groups.group import ClassicGroup, GroupState
from replog.groups.records import GroupRecord, OffsetRecord, RawRecord, decode_record
from replog.groups.shard import GroupCoordinatorShard
from replog.protocol.messages import (
    HeartbeatRequest,
    JoinGroupRequest,
    JoinGroupRequestProtocol,
    MemberIdentity,
    OffsetCommitRequest,
    OffsetCommitRequestPartition,
    OffsetCommitRequestTopic,
    OffsetDeleteRequest,
    OffsetDeleteRequestPartition,
    OffsetDeleteRequestTopic,
    SyncGroupRequest,
    SyncGroupRequestAssignment,
)

from .harness import subscription

GROUP = "g"
SIMPLE = "simple"
SESSION_MS = 10_000
REBALANCE_MS = 20_000
CONFIG = GroupConfig(
    initial_rebalance_delay_ms=1_000,
    offsets_retention_ms=10**15,  # expiry has its own unit tests; here it would blur the model
    offsets_retention_check_interval_ms=10**15,
    new_member_join_timeout_ms=60_000,
)
TOPIC_PARTITIONS = [("t", 0), ("t", 1), ("u", 0)]
METADATA = {"range": subscription("t", "u"), "roundrobin": subscription("t", "u")}


@attrs.define
class Client:
    """A simulated consumer: what it knows of its membership."""

    name: str
    instance_id: str | None
    member_id: str = ""
    generation: int = -1
    leader: bool = False
    members: list[tuple[str, str | None]] = attrs.field(factory=list)
    waiting: int | None = None  # an unanswered JoinGroup or SyncGroup
    synced_generation: int = -1
    needs_join: bool = True

    def reset(self) -> None:
        self.member_id, self.generation, self.leader, self.needs_join = "", -1, False, True

    def identity(self) -> str:
        return self.instance_id or self.member_id


@attrs.frozen
class Sent:
    """What a request was, to interpret its reply."""

    kind: str
    client: Client | None = None
    generation: int = -1
    detail: Any = None


def _identity(member_id: str, instance_id: str | None) -> str:
    return instance_id or member_id


class GroupMachine(RuleBasedStateMachine):
    """See the module docstring."""

    def __init__(self) -> None:
        super().__init__()
        self.now_ms = 0
        suffixes = (str(n) for n in itertools.count(1))
        self.suffix = lambda: next(suffixes)
        self.shard = GroupCoordinatorShard(
            0, config=CONFIG, member_id_suffix=self.suffix, now_ms=self.now_ms
        )
        self.log: list[RawRecord] = []
        self.pending: list[Write] = []
        self.ids = itertools.count()
        self.sent: dict[int, Sent] = {}
        self.answered: set[int] = set()
        self.clients = [
            Client("dyn-0", None),
            Client("dyn-1", None),
            Client("static-0", "i-0"),
            Client("static-1", "i-1"),
        ]
        self.acked: dict[tuple[str, str, int], int] = {}
        # Per coordinator lifetime (a lost write may redo a generation after a fail-over):
        self.leaders_now: dict[int, str] = {}
        # What leaders sent, by (generation, leader member id). After a lost write a generation
        # may be redone, and a leader may send what it learned before the fail-over.
        self.plans: dict[tuple[int, str], list[dict[str, bytes]]] = {}
        # For good (until the group's tombstone reaches the log): generations whose assignment
        # was written. A group turned Dead in memory is not deleted yet: if its tombstone is
        # lost at a fail-over, the reload brings back the last generation written.
        self.written_plans: dict[int, dict[str, bytes]] = {}
        self.stable_leaders: dict[int, str] = {}
        self.last_generation = 0
        # Groups whose latest metadata write failed: memory is ahead of the log until the next
        # one succeeds (Kafka accepts this for a group becoming Empty).
        self.diverged: set[str] = set()

    # -- plumbing -------------------------------------------------------------------------------

    def absorb(self, effects: Effects) -> None:
        for reply in effects.replies:
            assert reply.request_id not in self.answered, f"second reply to {reply.request_id}"
            self.answered.add(reply.request_id)
            self.on_reply(self.sent[reply.request_id], reply.response)
        self.pending.extend(effects.writes)

    def send(self, sent: Sent, call: Any) -> int:
        request_id = next(self.ids)
        self.sent[request_id] = sent
        if sent.client is not None and sent.kind in ("join", "sync"):
            sent.client.waiting = request_id
        self.absorb(call(request_id))
        return request_id

    def on_reply(self, sent: Sent, response: Any) -> None:
        client = sent.client
        if client is not None and client.waiting is not None and sent.kind in ("join", "sync"):
            client.waiting = None
        handler = getattr(self, f"on_{sent.kind}_reply")
        handler(sent, response)

    def on_join_reply(self, sent: Sent, response: Any) -> None:
        client = sent.client
        assert client is not None
        error = response.error_code
        if error == ErrorCode.NONE:
            client.member_id = response.member_id
            client.generation = response.generation_id
            client.leader = response.leader == response.member_id
            client.members = [(m.member_id, m.group_instance_id) for m in response.members]
            client.needs_join = False
        elif error == ErrorCode.MEMBER_ID_REQUIRED:
            client.member_id = response.member_id
        elif error in (ErrorCode.UNKNOWN_MEMBER_ID, ErrorCode.FENCED_INSTANCE_ID):
            client.reset()

    def on_sync_reply(self, sent: Sent, response: Any) -> None:
        client = sent.client
        assert client is not None
        if response.error_code in (ErrorCode.UNKNOWN_MEMBER_ID, ErrorCode.FENCED_INSTANCE_ID):
            client.reset()
        if response.error_code != ErrorCode.NONE:
            client.needs_join = True
            return
        client.synced_generation = sent.generation
        generation = sent.generation
        group = self.shard.group(GROUP)
        assert group is not None and group.is_in(GroupState.STABLE)
        assert group.generation_id == generation
        expected = self._plan(group).get(client.identity(), b"")
        assert response.assignment == expected, (client, generation)

    def on_heartbeat_reply(self, sent: Sent, response: Any) -> None:
        client = sent.client
        assert client is not None
        if response.error_code in (ErrorCode.UNKNOWN_MEMBER_ID, ErrorCode.FENCED_INSTANCE_ID):
            client.reset()
        elif response.error_code != ErrorCode.NONE:
            client.needs_join = True

    def on_leave_reply(self, sent: Sent, response: Any) -> None:
        pass

    def on_commit_reply(self, sent: Sent, response: Any) -> None:
        group_id, offset = sent.detail
        for topic in response.topics:
            for partition in topic.partitions:
                if partition.error_code == ErrorCode.NONE:
                    self.acked[(group_id, topic.name, partition.partition_index)] = offset

    def on_offset_delete_reply(self, sent: Sent, response: Any) -> None:
        if response.error_code != ErrorCode.NONE:
            return
        for topic in response.topics:
            for partition in topic.partitions:
                if partition.error_code == ErrorCode.NONE:
                    self.acked.pop((SIMPLE, topic.name, partition.partition_index), None)

    def on_delete_groups_reply(self, sent: Sent, response: Any) -> None:
        for result in response.results:
            if result.error_code == ErrorCode.NONE:
                for key in [k for k in self.acked if k[0] == result.group_id]:
                    del self.acked[key]

    # -- rules ----------------------------------------------------------------------------------

    @precondition(lambda self: any(c.waiting is None for c in self.clients))
    @rule(
        data=st.data(),
        version=st.sampled_from([3, 4, 5, 8, 9]),
        commit=st.booleans(),
        deliver=st.booleans(),
    )
    def consumer_step(self, data: st.DataObject, version: int, commit: bool, deliver: bool) -> None:
        """Each client not waiting for an answer does what a consumer would do next: (re)join,
        sync, then heartbeat or commit; then, maybe, every pending write is written."""
        for client in data.draw(st.permutations(self.clients)):
            if client.waiting is None:
                self._consumer_step(data, client, version, commit)
        if deliver:
            self.complete_writes(len(self.pending), ErrorCode.NONE)

    def _consumer_step(
        self, data: st.DataObject, client: Client, version: int, commit: bool
    ) -> None:
        if client.needs_join or client.generation <= 0:
            self._join(client, version, change=False)
        elif client.synced_generation != client.generation:
            self._sync(client)
        elif commit:
            tp = data.draw(st.sampled_from(TOPIC_PARTITIONS))
            self._commit(client, tp, data.draw(st.integers(0, 1000)), simple=False)
        else:
            self._heartbeat(client)

    @precondition(lambda self: any(c.waiting is None for c in self.clients))
    @rule(
        data=st.data(),
        version=st.sampled_from([3, 4, 5, 8, 9]),
        change=st.booleans(),
        rare=st.integers(0, 1),
    )
    def join(self, data: st.DataObject, version: int, change: bool, rare: int) -> None:
        """Any client joins, possibly preferring another protocol."""
        if rare:
            return
        client = data.draw(st.sampled_from([c for c in self.clients if c.waiting is None]))
        self._join(client, version, change)

    def _join(self, client: Client, version: int, change: bool) -> None:
        if client.instance_id is not None:
            version = max(version, 5)
        names = ["roundrobin", "range"] if change else ["range", "roundrobin"]
        request = JoinGroupRequest(
            group_id=GROUP,
            session_timeout_ms=SESSION_MS,
            rebalance_timeout_ms=REBALANCE_MS,
            member_id=client.member_id,
            group_instance_id=client.instance_id,
            protocol_type="consumer",
            protocols=[JoinGroupRequestProtocol(name=n, metadata=METADATA[n]) for n in names],
        )
        self.send(
            Sent("join", client, detail=version),
            lambda rid: self.shard.on_join_group(
                rid,
                request,
                api_version=version,
                client_id=client.name,
                client_host="/h",
                now_ms=self.now_ms,
            ),
        )

    @precondition(lambda self: any(c.waiting is None and c.generation > 0 for c in self.clients))
    @rule(data=st.data())
    def sync(self, data: st.DataObject) -> None:
        candidates = [c for c in self.clients if c.waiting is None and c.generation > 0]
        self._sync(data.draw(st.sampled_from(candidates)))

    def _sync(self, client: Client) -> None:
        assignments = []
        if client.leader:
            planned = {
                _identity(m, i): f"{client.generation}:{_identity(m, i)}".encode()
                for m, i in client.members
            }
            self.plans.setdefault((client.generation, client.member_id), []).append(planned)
            assignments = [
                SyncGroupRequestAssignment(member_id=m, assignment=planned[_identity(m, i)])
                for m, i in client.members
            ]
        request = SyncGroupRequest(
            group_id=GROUP,
            generation_id=client.generation,
            member_id=client.member_id,
            group_instance_id=client.instance_id,
            assignments=assignments,
        )
        self.send(
            Sent("sync", client, client.generation),
            lambda rid: self.shard.on_sync_group(rid, request, api_version=3, now_ms=self.now_ms),
        )

    @rule(data=st.data())
    def heartbeat(self, data: st.DataObject) -> None:
        self._heartbeat(data.draw(st.sampled_from(self.clients)))

    def _heartbeat(self, client: Client) -> None:
        request = HeartbeatRequest(
            group_id=GROUP,
            generation_id=client.generation,
            member_id=client.member_id,
            group_instance_id=client.instance_id,
        )
        self.send(
            Sent("heartbeat", client),
            lambda rid: self.shard.on_heartbeat(rid, request, now_ms=self.now_ms),
        )

    @rule(data=st.data(), by_instance=st.booleans(), rare=st.integers(0, 2))
    def leave(self, data: st.DataObject, by_instance: bool, rare: int) -> None:
        if rare:
            return
        client = data.draw(st.sampled_from(self.clients))
        if by_instance and client.instance_id is not None:
            identity = MemberIdentity(member_id="", group_instance_id=client.instance_id)
        else:
            identity = MemberIdentity(
                member_id=client.member_id, group_instance_id=client.instance_id
            )
        self.send(
            Sent("leave", client),
            lambda rid: self.shard.on_leave_group(rid, GROUP, [identity], now_ms=self.now_ms),
        )
        client.reset()

    @rule(
        data=st.data(),
        tp=st.sampled_from(TOPIC_PARTITIONS),
        offset=st.integers(0, 1000),
        simple=st.booleans(),
    )
    def commit(self, data: st.DataObject, tp: tuple[str, int], offset: int, simple: bool) -> None:
        self._commit(data.draw(st.sampled_from(self.clients)), tp, offset, simple)

    def _commit(self, client: Client, tp: tuple[str, int], offset: int, simple: bool) -> None:
        group_id = SIMPLE if simple else GROUP
        request = OffsetCommitRequest(
            group_id=group_id,
            generation_id_or_member_epoch=-1 if simple else client.generation,
            member_id="" if simple else client.member_id,
            group_instance_id=None if simple else client.instance_id,
            topics=[
                OffsetCommitRequestTopic(
                    name=tp[0],
                    partitions=[
                        OffsetCommitRequestPartition(
                            partition_index=tp[1], committed_offset=offset, committed_metadata="m"
                        )
                    ],
                )
            ],
        )
        self.send(
            Sent("commit", client, detail=(group_id, offset)),
            lambda rid: self.shard.on_offset_commit(rid, request, now_ms=self.now_ms),
        )

    @rule(tp=st.sampled_from(TOPIC_PARTITIONS))
    def delete_simple_offset(self, tp: tuple[str, int]) -> None:
        request = OffsetDeleteRequest(
            group_id=SIMPLE,
            topics=[
                OffsetDeleteRequestTopic(
                    name=tp[0], partitions=[OffsetDeleteRequestPartition(partition_index=tp[1])]
                )
            ],
        )
        self.send(
            Sent("offset_delete"),
            lambda rid: self.shard.on_offset_delete(rid, request, now_ms=self.now_ms),
        )

    @rule(group_id=st.sampled_from([GROUP, SIMPLE]), rare=st.integers(0, 5))
    def delete_group(self, group_id: str, rare: int) -> None:
        if rare:
            return
        self.send(
            Sent("delete_groups"),
            lambda rid: self.shard.on_delete_groups(rid, [group_id], now_ms=self.now_ms),
        )

    @rule(ms=st.sampled_from([1, 300, 1_000, 1_000, 1_000, 2_000, 2_000, 3_000, 9_000, 60_000]))
    def advance(self, ms: int) -> None:
        self.now_ms += ms
        self.absorb(self.shard.on_tick(self.now_ms))

    @precondition(lambda self: bool(self.pending))
    @rule(
        count=st.integers(1, 3),
        error=st.sampled_from(
            [ErrorCode.NONE] * 4 + [ErrorCode.NOT_ENOUGH_REPLICAS, ErrorCode.REQUEST_TIMED_OUT]
        ),
    )
    def complete_writes(self, count: int, error: ErrorCode) -> None:
        """The oldest ``count`` pending writes are written, or fail."""
        for _ in range(min(count, len(self.pending))):
            write = self.pending.pop(0)
            groups_written = {
                _group_of(raw)
                for raw in write.records
                if isinstance(decode_record(*raw), GroupRecord)
            }
            if error is ErrorCode.NONE:
                self._written(write.records)
                self.diverged -= groups_written
            else:
                self.diverged |= groups_written
            self.absorb(self.shard.on_write_complete(write.write_id, error, now_ms=self.now_ms))

    def _written(self, records: tuple[RawRecord, ...]) -> None:
        """``records`` reached the log: note the assignment each generation wrote (one ever)."""
        self.log.extend(records)
        for raw in records:
            record = decode_record(*raw)
            if (
                isinstance(record, GroupRecord)
                and record.group_id == GROUP
                and record.value is None
            ):
                # Deleted for good: a new group starts its generations over.
                self.plans.clear()
                self.written_plans.clear()
                self.stable_leaders.clear()
            if isinstance(record, GroupRecord) and record.value and record.value.members:
                written = {
                    _identity(m.member_id, m.group_instance_id): bytes(m.assignment)
                    for m in record.value.members
                }
                previous = self.written_plans.setdefault(record.value.generation, written)
                assert previous == written, f"generation {record.value.generation} written twice"

    @rule(pending_reached_the_log=st.booleans(), rare=st.integers(0, 7))
    def fail_over(self, pending_reached_the_log: bool, rare: int) -> None:
        """Unload and reload from the log; pending writes are lost or were written."""
        if rare:
            return
        live = {g: _stored_view(self.shard.group(g)) for g in self.shard.group_ids()}
        touched = {_group_of(r) for w in self.pending for r in w.records}
        self.absorb(self.shard.unload())
        unanswered = set(self.sent) - self.answered
        assert not unanswered, f"unload left requests unanswered: {sorted(unanswered)}"
        expected = dict(self.acked)
        if pending_reached_the_log:
            for write in self.pending:
                self._written(write.records)
                for raw in write.records:
                    record = decode_record(*raw)
                    if isinstance(record, OffsetRecord):
                        key = (record.group_id, record.topic, record.partition)
                        if record.value is None:
                            expected.pop(key, None)
                        else:
                            expected[key] = record.value.offset
                    elif isinstance(record, GroupRecord) and record.value is None:
                        expected = {k: v for k, v in expected.items() if k[0] != record.group_id}
                    elif isinstance(record, GroupRecord) and record.value is not None:
                        self.diverged.discard(record.group_id)
        self.pending.clear()
        for client in self.clients:
            client.waiting = None
        self.shard, _ = GroupCoordinatorShard.load(
            0, self.log, config=CONFIG, member_id_suffix=self.suffix, now_ms=self.now_ms
        )
        assert self._served_offsets() == expected
        self.acked = expected
        for group_id, view in live.items():
            if group_id in touched or group_id in self.diverged or view is None:
                continue
            if view[0] == "Stable" or (view[0] == "Empty" and view[1] > 0):
                reloaded = self.shard.group(group_id)
                assert reloaded is not None and _stored_view(reloaded) == view, group_id
        self.leaders_now.clear()
        self.last_generation = _last_written_generation(self.log, GROUP)

    # -- invariants -----------------------------------------------------------------------------

    @invariant()
    def shard_is_consistent(self) -> None:
        self.shard.check_invariants()

    @invariant()
    def served_offsets_are_the_acknowledged_ones(self) -> None:
        assert self._served_offsets() == self.acked

    @invariant()
    def one_leader_per_generation(self) -> None:
        group = self.shard.group(GROUP)
        if group is None or not group.is_in(GroupState.COMPLETING_REBALANCE, GroupState.STABLE):
            return
        assert group.leader_id in group.members
        leader = group.members[group.leader_id]
        identity = _identity(leader.member_id, leader.group_instance_id)
        seen = self.leaders_now.setdefault(group.generation_id, identity)
        assert seen == identity, f"generation {group.generation_id}: {seen} and {identity}"
        if group.is_in(GroupState.STABLE):
            ever = self.stable_leaders.setdefault(group.generation_id, identity)
            assert ever == identity

    @invariant()
    def stable_members_hold_their_generations_assignment(self) -> None:
        group = self.shard.group(GROUP)
        if group is None or not group.is_in(GroupState.STABLE):
            return
        sent = self._plan(group)
        for member in group.members.values():
            identity = _identity(member.member_id, member.group_instance_id)
            assert member.assignment == sent.get(identity, b""), identity

    @invariant()
    def generations_never_go_back(self) -> None:
        group = self.shard.group(GROUP)
        if group is None:
            # Deleted (or never created): a new group starts its generations over. A Dead group
            # (tombstones pending) keeps its generation: joins are refused until it is gone,
            # and if the tombstone write fails it is Empty again.
            self.last_generation = 0
            self.leaders_now.clear()
            return
        assert group.generation_id >= self.last_generation
        self.last_generation = group.generation_id

    def teardown(self) -> None:
        self.absorb(self.shard.unload())
        assert set(self.sent) == self.answered

    def _plan(self, group: ClassicGroup) -> dict[str, bytes]:
        """The assignment of the Stable ``group``'s generation: the one written for it, which
        must be what its leader sent."""
        generation = group.generation_id
        written = self.written_plans[generation]
        # Some leader of this generation sent it (a replaced static leader has a new id now).
        sent = [plan for (g, _), plans in self.plans.items() if g == generation for plan in plans]
        assert written in sent, f"generation {generation}: written but never sent"
        return written

    def _served_offsets(self) -> dict[tuple[str, str, int], int]:
        served = {}
        for group_id in self.shard.group_ids():
            for (topic, partition), offset in self.shard.committed_offsets(group_id).items():
                served[(group_id, topic, partition)] = offset.offset
        return served


def _stored_view(group: ClassicGroup | None) -> tuple[Any, ...] | None:
    """What the group metadata record of a Stable or Empty group holds."""
    if group is None:
        return None
    members = tuple(
        (
            m.member_id,
            m.group_instance_id,
            m.client_id,
            m.session_timeout_ms,
            m.rebalance_timeout_ms,
            m.metadata(group.protocol_name) if group.protocol_name else b"",
            m.assignment,
        )
        for m in group.members.values()
    )
    timestamp = group.state_timestamp_ms if group.is_in(GroupState.EMPTY) else None
    return (
        group.state.value,
        group.generation_id,
        group.protocol_type,
        group.protocol_name,
        group.leader_id,
        members,
        timestamp,
    )


def _group_of(raw: RawRecord) -> str:
    record = decode_record(*raw)
    assert isinstance(record, OffsetRecord | GroupRecord)
    return record.group_id


def _last_written_generation(log: list[RawRecord], group_id: str) -> int:
    generation = 0
    for raw in log:
        record = decode_record(*raw)
        if isinstance(record, GroupRecord) and record.group_id == group_id:
            generation = 0 if record.value is None else record.value.generation
    return generation


def _check_invariants(machine: GroupMachine) -> None:
    machine.shard_is_consistent()
    machine.served_offsets_are_the_acknowledged_ones()
    machine.one_leader_per_generation()
    machine.stable_members_hold_their_generations_assignment()
    machine.generations_never_go_back()


def test_a_lost_tombstone_brings_back_the_last_written_generation() -> None:
    """Regression (a Hypothesis counterexample): a Stable generation 1 is written, its members'
    sessions expire (generation 2, Empty, pending), the group is deleted (tombstones pending)
    and the coordinator fails over before either write lands. The log still holds generation 1
    with its members, so the reload is Stable at generation 1 with the written assignments,
    as Kafka loads it; the model once forgot that generation's assignment when the group
    turned Dead in memory."""
    machine = GroupMachine()
    for client in machine.clients:
        machine._join(client, 3, change=False)
    _check_invariants(machine)
    machine.advance(2_000)
    _check_invariants(machine)
    for client in machine.clients:
        machine._sync(client)
    machine.complete_writes(len(machine.pending), ErrorCode.NONE)
    _check_invariants(machine)
    machine.advance(60_000)
    _check_invariants(machine)
    machine.delete_group(GROUP, rare=0)
    group = machine.shard.group(GROUP)
    assert group is not None and group.is_in(GroupState.DEAD) and len(machine.pending) == 2
    _check_invariants(machine)
    machine.fail_over(pending_reached_the_log=False, rare=0)
    group = machine.shard.group(GROUP)
    assert group is not None and group.is_in(GroupState.STABLE) and group.generation_id == 1
    assert {m.member_id: m.assignment for m in group.members.values()} == {
        "dyn-0-1": b"1:dyn-0-1",
        "dyn-1-2": b"1:dyn-1-2",
        "i-0-3": b"1:i-0",
        "i-1-4": b"1:i-1",
    }
    _check_invariants(machine)
    machine.teardown()


GroupMachine.TestCase.settings = settings(
    max_examples=150,
    stateful_step_count=80,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
TestGroupMachine = GroupMachine.TestCase
