"""An input that raises partway (a bug deep in its handling) fails that input alone: the shard
resolves the writes it had queued, in order, and goes on serving; the coordinator answers the
request UNKNOWN_SERVER_ERROR. Before, a commit whose record failed to encode left its write
pending forever, and the next write reported written broke the shard for good ("reported
written before an earlier write")."""

from __future__ import annotations

import itertools
from typing import Any

import pytest

from replog.errors import ErrorCode
from replog.groups import administration, core, rebalance
from replog.groups.config import GroupConfig
from replog.groups.coordinator import GroupCoordinator
from replog.groups.core import InputFailed
from replog.groups.effects import Effects
from replog.groups.group import GroupState
from replog.groups.rebalance import Rebalance
from replog.protocol.messages import (
    DeleteGroupsRequest,
    DeleteGroupsResponse,
    JoinGroupRequest,
    JoinGroupRequestProtocol,
    JoinGroupResponse,
    OffsetCommitRequest,
    OffsetCommitRequestPartition,
    OffsetCommitRequestTopic,
    OffsetCommitResponse,
    SyncGroupRequest,
    SyncGroupRequestAssignment,
)
from replog.protocol.schema import Message
from tests.inject import raise_once

from .harness import Harness


def _commit_errors(response: Message | None) -> list[int]:
    assert isinstance(response, OffsetCommitResponse)
    return [p.error_code for t in response.topics for p in t.partitions]


def test_a_commit_whose_record_fails_to_encode_fails_alone_and_later_writes_go_on(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    h = Harness(auto_write=False)
    first = h.commit({("t", 0): 1})  # written later: a write in flight across the failure
    monkeypatch.setattr(core, "encode_record", raise_once(core.encode_record))
    with pytest.raises(InputFailed) as failed:
        h.commit({("t", 0): 2})
    assert isinstance(failed.value.__cause__, RuntimeError)
    # Its write was never handed out; it is resolved failed, which answers the commit.
    effects = failed.value.effects
    assert effects.writes == () and failed.value.unanswered is None
    (reply,) = effects.replies
    assert _commit_errors(reply.response) == [ErrorCode.UNKNOWN_SERVER_ERROR]
    h.shard.check_invariants()
    third = h.commit({("t", 0): 3})
    h.complete_writes()  # in order: before, the third broke the shard's write ordering
    assert _commit_errors(h.reply(first)) == [ErrorCode.NONE]
    assert _commit_errors(h.reply(third)) == [ErrorCode.NONE]
    assert h.fetch() == {("t", 0): (3, 0)}
    assert h.shard.pending_write_count() == 0
    h.shard.check_invariants()


def test_a_commit_raising_after_its_write_was_queued_resolves_that_write(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    h = Harness(auto_write=False)

    def write_then_raise(self: core.ShardCore, *args: Any) -> int:
        real_write(self, *args)
        raise RuntimeError("injected after the write was queued")

    real_write = core.ShardCore.write
    monkeypatch.setattr(core.ShardCore, "write", write_then_raise)
    with pytest.raises(InputFailed) as failed:
        h.commit({("t", 0): 1})
    monkeypatch.setattr(core.ShardCore, "write", real_write)
    assert failed.value.effects.writes == ()  # dropped from the output, reported failed
    assert h.shard.pending_write_count() == 0
    assert not h.shard.committed_offsets("g")
    h.shard.check_invariants()
    h.auto_write = True
    assert _commit_errors(h.reply(h.commit({("t", 0): 5}))) == [ErrorCode.NONE]
    assert h.fetch() == {("t", 0): (5, 0)}


# -- through the coordinator: the failed request is answered, every other one goes on ---------

CONFIG = GroupConfig(offsets_topic_partitions=1)


class _Owner:
    """One coordinator hosting partition 0, writes completed in order on demand."""

    def __init__(self) -> None:
        suffixes = (str(n) for n in itertools.count(1))
        self.coordinator = GroupCoordinator(config=CONFIG, member_id_suffix=lambda: next(suffixes))
        self.coordinator.load(0, [], now_ms=0)
        self.ids = itertools.count()
        self.pending: list[Any] = []
        self.replies: dict[int, Message] = {}

    def absorb(self, effects: Effects) -> None:
        for reply in effects.replies:
            assert reply.request_id not in self.replies, "a second reply"
            self.replies[reply.request_id] = reply.response
        self.pending.extend(effects.writes)

    def send(self, request: Message, version: int) -> int:
        request_id = next(self.ids)
        self.absorb(
            self.coordinator.handle(
                request_id, version, request, client_id="app", client_host="/h", now_ms=0
            )
        )
        return request_id

    def complete_writes(self) -> None:
        while self.pending:
            write = self.pending.pop(0)
            self.absorb(
                self.coordinator.on_write_complete(0, write.write_id, ErrorCode.NONE, now_ms=0)
            )


def _join(member_id: str = "") -> JoinGroupRequest:
    return JoinGroupRequest(
        group_id="g",
        session_timeout_ms=10_000,
        rebalance_timeout_ms=20_000,
        member_id=member_id,
        protocol_type="consumer",
        protocols=[JoinGroupRequestProtocol(name="range", metadata=b"m")],
    )


def _commit(offset: int, member_id: str = "", generation: int = -1) -> OffsetCommitRequest:
    partition = OffsetCommitRequestPartition(
        partition_index=0, committed_offset=offset, committed_metadata=""
    )
    return OffsetCommitRequest(
        group_id="g",
        generation_id_or_member_epoch=generation,
        member_id=member_id,
        topics=[OffsetCommitRequestTopic(name="t", partitions=[partition])],
    )


def test_a_join_that_raises_is_answered_unknown_server_error_and_the_group_still_forms(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    owner = _Owner()
    required = owner.replies[owner.send(_join(), 5)]
    assert isinstance(required, JoinGroupResponse)
    member_id = required.member_id
    # The join parks, then raises on its way to the join phase.
    flaky = raise_once(Rebalance.maybe_prepare_rebalance_or_complete_join)
    monkeypatch.setattr(rebalance.Rebalance, "maybe_prepare_rebalance_or_complete_join", flaky)
    failed_join = owner.send(_join(member_id), 5)
    response = owner.replies[failed_join]
    assert isinstance(response, JoinGroupResponse)
    assert response.error_code == ErrorCode.UNKNOWN_SERVER_ERROR
    assert "injected" in caplog.text
    shard = owner.coordinator.shard(0)
    assert shard is not None
    shard.check_invariants()  # no member waits on the answered request
    group = shard.group("g")
    assert group is not None and group.state is GroupState.PREPARING_REBALANCE  # in doubt
    rejoin = owner.send(_join(member_id), 5)
    deadline = owner.coordinator.next_deadline_ms()
    assert deadline is not None
    owner.absorb(owner.coordinator.on_tick(deadline))
    joined = owner.replies[rejoin]
    assert isinstance(joined, JoinGroupResponse) and joined.error_code == ErrorCode.NONE
    generation = joined.generation_id
    sync = SyncGroupRequest(
        group_id="g",
        generation_id=generation,
        member_id=member_id,
        assignments=[SyncGroupRequestAssignment(member_id=member_id, assignment=b"a")],
    )
    synced = owner.send(sync, 3)
    owner.complete_writes()
    assert owner.replies[synced].error_code == ErrorCode.NONE  # type: ignore[attr-defined]
    commit = owner.send(_commit(7, member_id, generation), 8)
    owner.complete_writes()
    assert _commit_errors(owner.replies[commit]) == [ErrorCode.NONE]
    assert shard.committed_offsets("g")[("t", 0)].offset == 7


def test_a_commit_that_raises_fails_alone_while_earlier_writes_are_in_flight(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    owner = _Owner()
    first = owner.send(_commit(1), 8)
    monkeypatch.setattr(core, "encode_record", raise_once(core.encode_record))
    failed = owner.send(_commit(2), 8)
    assert _commit_errors(owner.replies[failed]) == [ErrorCode.UNKNOWN_SERVER_ERROR]
    third = owner.send(_commit(3), 8)
    owner.complete_writes()
    assert _commit_errors(owner.replies[first]) == [ErrorCode.NONE]
    assert _commit_errors(owner.replies[third]) == [ErrorCode.NONE]
    shard = owner.coordinator.shard(0)
    assert shard is not None and shard.committed_offsets("g")[("t", 0)].offset == 3
    shard.check_invariants()


def test_a_timer_that_raises_is_logged_and_the_next_tick_runs_it(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    owner = _Owner()
    member_id = owner.replies[owner.send(_join(), 5)].member_id  # type: ignore[attr-defined]
    owner.send(_join(member_id), 5)  # parked until the initial rebalance delay ends
    flaky = raise_once(Rebalance.on_join_timer)
    monkeypatch.setattr(rebalance.Rebalance, "on_join_timer", flaky)
    deadline = owner.coordinator.next_deadline_ms()
    assert deadline is not None
    owner.absorb(owner.coordinator.on_tick(deadline))
    assert "injected" in caplog.text
    later = owner.coordinator.next_deadline_ms()
    assert later is not None
    owner.absorb(owner.coordinator.on_tick(max(later, deadline)))
    joined = [r for r in owner.replies.values() if isinstance(r, JoinGroupResponse)]
    assert joined[-1].error_code == ErrorCode.NONE and joined[-1].generation_id == 1


def test_a_delete_groups_part_that_raises_answers_its_groups_unknown_server_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    owner = _Owner()
    owner.send(_commit(1), 8)
    owner.complete_writes()
    flaky = raise_once(administration.Administration.delete_groups)
    monkeypatch.setattr(administration.Administration, "delete_groups", flaky)
    failed = owner.replies[owner.send(DeleteGroupsRequest(groups_names=["g"]), 2)]
    assert isinstance(failed, DeleteGroupsResponse)
    assert [(r.group_id, r.error_code) for r in failed.results] == [
        ("g", ErrorCode.UNKNOWN_SERVER_ERROR)
    ]
    deleted = owner.send(DeleteGroupsRequest(groups_names=["g"]), 2)
    owner.complete_writes()
    response = owner.replies[deleted]
    assert isinstance(response, DeleteGroupsResponse)
    assert [r.error_code for r in response.results] == [ErrorCode.NONE]
