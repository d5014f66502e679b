"""The state one coordinator shard shares between its parts, and the three primitives they use
to act: ``reply``, ``park`` (answer later) and ``write`` (append records, continue when the owner
reports them written).

- Committed offsets live in ``OffsetStore`` and change only when a write carrying them is
  reported written, in write order: the store is always what replaying the acknowledged records
  gives. The store also counts writes in flight per partition, so readers can tell a partition
  whose offset is about to change (``require_stable``) and expiry leaves it alone.
- Every request handed in is *open* until replied to; at the end of an input each open request
  must be parked with a way to build its error response, which is what ``unload`` sends
  (NOT_COORDINATOR) when the shard is unloaded with requests still waiting.
- An input that raises partway is *abandoned* (``abandon_input``): the writes it asked for were
  never handed out, so they are reported failed, oldest first, and their continuations answer
  their requests; the request that raised is forgotten (its owner answers it), and no member
  keeps waiting on a request that is no longer open. What the input changed before it raised
  stays, but the write bookkeeping is again exactly what the handed-out writes carry.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping

import attrs

from replog.errors import ErrorCode, invariant, unreachable
from replog.groups.config import GroupConfig
from replog.groups.effects import Effects, GroupReply, RequestId, Write
from replog.groups.group import ClassicGroup, GroupState, SubscriptionReader
from replog.groups.records import (
    CoordinatorRecord,
    OffsetCommitValue,
    OffsetRecord,
    encode_record,
)
from replog.protocol.schema import Message
from replog.topics import TopicPartitionLike

__all__ = ["InputFailed", "CommittedOffset", "OffsetStore", "ShardCore", "TopicPartitionLike"]

WriteDone = Callable[[ErrorCode, int], None]
"""Runs when a write's outcome is reported: (error, now_ms)."""
ErrorResponse = Callable[[ErrorCode], Message]
ABANDON_ROUNDS_MAX = 8
"""Rounds of failing an abandoned input's writes (a continuation may write, and raise, again)."""


class InputFailed(Exception):
    """An input of a shard raised partway and was abandoned (``ShardCore.abandon_input``); the
    shard stays usable. Raised from the original exception (``__cause__``).

    ``effects`` is what the input still asks for and the owner must carry out: replies made
    before it failed and the failure replies of its abandoned writes. ``unanswered`` is the
    request that raised when it got no reply: the owner answers it (UNKNOWN_SERVER_ERROR)."""

    def __init__(self, effects: Effects, unanswered: RequestId | None, why: str) -> None:
        super().__init__(why)
        self.effects = effects
        self.unanswered = unanswered


@attrs.frozen
class CommittedOffset:
    """A committed offset as the coordinator keeps it (``leader_epoch`` -1: unknown;
    ``expire_timestamp_ms`` set only by OffsetCommit v2-v4 with an explicit retention)."""

    offset: int
    leader_epoch: int
    metadata: str
    commit_timestamp_ms: int
    expire_timestamp_ms: int | None = None

    @classmethod
    def from_value(cls, value: OffsetCommitValue) -> CommittedOffset:
        """From a stored record value."""
        expire = None if value.expire_timestamp == -1 else value.expire_timestamp
        return cls(value.offset, value.leader_epoch, value.metadata, value.commit_timestamp, expire)

    def to_value(self) -> OffsetCommitValue:
        """As a record value."""
        return OffsetCommitValue(
            offset=self.offset,
            leader_epoch=self.leader_epoch,
            metadata=self.metadata,
            commit_timestamp=self.commit_timestamp_ms,
            expire_timestamp=-1 if self.expire_timestamp_ms is None else self.expire_timestamp_ms,
        )


class OffsetStore:
    """Acknowledged committed offsets per group, and writes in flight per partition."""

    def __init__(self) -> None:
        self._committed: dict[str, dict[TopicPartitionLike, CommittedOffset]] = {}
        self._in_flight: dict[str, dict[TopicPartitionLike, int]] = {}

    def committed(self, group_id: str) -> Mapping[TopicPartitionLike, CommittedOffset]:
        """The acknowledged offsets of ``group_id`` (empty if none)."""
        return self._committed.get(group_id, {})

    def group_ids(self) -> list[str]:
        """Groups with acknowledged offsets."""
        return list(self._committed)

    def has_any(self, group_id: str) -> bool:
        """Whether ``group_id`` has offsets, acknowledged or in flight."""
        return bool(self._committed.get(group_id)) or bool(self._in_flight.get(group_id))

    def in_flight(self, group_id: str, tp: TopicPartitionLike) -> bool:
        """Whether a write touching this offset is not yet acknowledged."""
        return tp in self._in_flight.get(group_id, {})

    def in_flight_counts(self) -> dict[str, dict[TopicPartitionLike, int]]:
        """Writes in flight per group and partition (a copy)."""
        return {group_id: dict(counts) for group_id, counts in self._in_flight.items()}

    def in_flight_partitions(self, group_id: str) -> list[TopicPartitionLike]:
        """Partitions of ``group_id`` with writes in flight."""
        return list(self._in_flight.get(group_id, {}))

    def mark(self, group_id: str, tps: Iterable[TopicPartitionLike], delta: int) -> None:
        """Count a write touching ``tps`` as started (+1) or finished (-1)."""
        counts = self._in_flight.setdefault(group_id, {})
        for tp in tps:
            counts[tp] = counts.get(tp, 0) + delta
            invariant(counts[tp] >= 0, f"{group_id} {tp}: more writes finished than started")
            if counts[tp] == 0:
                del counts[tp]
        if not counts:
            del self._in_flight[group_id]

    def apply(self, record: OffsetRecord) -> None:
        """Replay one acknowledged offset record (a tombstone deletes)."""
        tp = (record.topic, record.partition)
        if record.value is None:
            offsets = self._committed.get(record.group_id)
            if offsets is not None:
                offsets.pop(tp, None)
                if not offsets:
                    del self._committed[record.group_id]
            return
        self._committed.setdefault(record.group_id, {})[tp] = CommittedOffset.from_value(
            record.value
        )


@attrs.define
class _WriteInFlight:
    records: tuple[CoordinatorRecord, ...]
    on_done: WriteDone


class ShardCore:
    """Shared state of one ``__consumer_offsets`` partition's coordinator."""

    def __init__(
        self,
        partition: int,
        config: GroupConfig,
        member_id_suffix: Callable[[], str],
        subscription_reader: SubscriptionReader | None,
    ) -> None:
        self.partition = partition
        self.config = config
        self.member_id_suffix = member_id_suffix
        self.subscription_reader = subscription_reader
        self.groups: dict[str, ClassicGroup] = {}
        self.offsets = OffsetStore()
        self._writes: dict[int, _WriteInFlight] = {}
        self._next_write_id = 0
        self._open: set[RequestId] = set()
        self._parked: dict[RequestId, ErrorResponse] = {}
        self._replies: list[GroupReply] = []
        self._out: list[Write] = []

    # -- requests -------------------------------------------------------------------------------

    def accept(self, request_id: RequestId) -> None:
        """A new request enters; it must be answered now or parked before the input ends."""
        invariant(request_id not in self._open, f"request id {request_id} is already open")
        self._open.add(request_id)

    def park(self, request_id: RequestId, error_response: ErrorResponse) -> None:
        """Answer ``request_id`` later; ``error_response`` builds its answer if the shard is
        unloaded first."""
        invariant(request_id in self._open, f"request {request_id} is not open")
        self._parked[request_id] = error_response

    def reply(self, request_id: RequestId, response: Message) -> None:
        """Answer an open request (once)."""
        invariant(request_id in self._open, f"request {request_id} answered twice or unknown")
        self._open.discard(request_id)
        self._parked.pop(request_id, None)
        self._replies.append(GroupReply(request_id, response))

    def discard_group_if_unused(self, group_id: str) -> None:
        """Forget a group that never held anything: Empty at generation 0, with no members,
        no handed-out member ids and no offsets. No record was ever written for it, so dropping
        it keeps memory equal to what the log replays to."""
        group = self.groups.get(group_id)
        if (
            group is not None
            and group.is_in(GroupState.EMPTY)
            and group.generation_id == 0
            and not group.members
            and not group.pending_members
            and not self.offsets.has_any(group_id)
        ):
            del self.groups[group_id]

    def is_open(self, request_id: RequestId) -> bool:
        """Whether ``request_id`` still awaits its reply."""
        return request_id in self._open

    # -- abandoning an input ------------------------------------------------------------------

    @property
    def next_write_id(self) -> int:
        """The id the next write gets: an input's writes are the ones from here on."""
        return self._next_write_id

    def abandon_input(
        self, first_write_id: int, request_id: RequestId | None, now_ms: int
    ) -> tuple[RequestId | None, int]:
        """Resolve what an input that raised had started (module docstring). Its writes
        (``first_write_id`` on) were never handed out: they leave the output and are reported
        failed, oldest first. Returns the request that raised if it is still unanswered (now
        forgotten), and how many continuations raised in turn (their writes are resolved
        all the same)."""
        self._out.clear()
        continuations_failed = self.fail_unsent_writes(first_write_id, now_ms)
        unanswered = None
        if request_id is not None and request_id in self._open:
            self._open.discard(request_id)
            self._parked.pop(request_id, None)
            unanswered = request_id
        self.drop_dangling_waits()
        return unanswered, continuations_failed

    def fail_unsent_writes(self, first_write_id: int, now_ms: int) -> int:
        """Report failed every pending write from ``first_write_id`` on that is not in the
        output, oldest first; returns how many continuations raised."""
        continuations_failed = 0
        for _ in range(ABANDON_ROUNDS_MAX):  # a continuation may write again, and fail again
            unsent = self._unsent_writes(first_write_id)
            if not unsent:
                break
            for write_id in unsent:
                try:
                    self.complete_write(write_id, ErrorCode.UNKNOWN_SERVER_ERROR, now_ms)
                except Exception:  # the write is resolved before its continuation runs
                    continuations_failed += 1
        invariant(
            not self._unsent_writes(first_write_id),
            "an abandoned input left a write that is neither handed out nor resolved",
        )
        return continuations_failed

    def drop_dangling_waits(self) -> None:
        """No member waits on a request that is no longer open."""
        for group in self.groups.values():
            for member in group.members.values():
                if member.awaiting_join is not None and member.awaiting_join not in self._open:
                    member.awaiting_join = None
                if member.awaiting_sync is not None and member.awaiting_sync not in self._open:
                    member.awaiting_sync = None

    def _unsent_writes(self, first_write_id: int) -> list[int]:
        """Pending writes from ``first_write_id`` on that are not in the output."""
        handed_out = {write.write_id for write in self._out}
        return sorted(w for w in self._writes if w >= first_write_id and w not in handed_out)

    # -- writes ---------------------------------------------------------------------------------

    def write(self, records: list[CoordinatorRecord], on_done: WriteDone) -> int:
        """Ask for ``records`` to be appended; ``on_done(error, now_ms)`` runs when the outcome
        is reported."""
        invariant(bool(records), "a write needs records")
        write_id = self._next_write_id
        self._next_write_id += 1
        for group_id, tps in _offsets_touched(records).items():
            self.offsets.mark(group_id, tps, +1)
        self._writes[write_id] = _WriteInFlight(tuple(records), on_done)
        raw = tuple(encode_record(record) for record in records)
        self._out.append(Write(self.partition, write_id, raw))
        return write_id

    def groups_of_write(self, write_id: int) -> set[str]:
        """The groups whose records ``write_id`` carries (empty if it is not pending)."""
        pending = self._writes.get(write_id)
        return set() if pending is None else {r.group_id for r in pending.records}

    def check_outcome(self, write_id: int, error: ErrorCode) -> None:
        """Raise, changing nothing, if reporting ``write_id`` breaks the owner's contract: it
        is not pending, or it succeeded before an earlier write was reported."""
        if write_id not in self._writes:
            unreachable(f"write {write_id} is not pending")
        if error is ErrorCode.NONE:
            # Ids grow and the dict keeps insertion order: the first key is the oldest.
            invariant(
                write_id == next(iter(self._writes)),
                f"write {write_id} reported written before an earlier write",
            )

    def complete_write(self, write_id: int, error: ErrorCode, now_ms: int) -> None:
        """The owner reports ``write_id`` written (NONE) or failed; successes come in order."""
        self.check_outcome(write_id, error)
        pending = self._writes.pop(write_id)
        for group_id, tps in _offsets_touched(pending.records).items():
            self.offsets.mark(group_id, tps, -1)
        if error is ErrorCode.NONE:
            for record in pending.records:
                if isinstance(record, OffsetRecord):
                    self.offsets.apply(record)
        pending.on_done(error, now_ms)

    def check_in_flight(self) -> None:
        """The offsets counted in flight are exactly those the pending writes carry."""
        expected: dict[str, dict[TopicPartitionLike, int]] = {}
        for pending in self._writes.values():
            for group_id, tps in _offsets_touched(pending.records).items():
                for tp in tps:
                    counts = expected.setdefault(group_id, {})
                    counts[tp] = counts.get(tp, 0) + 1
        invariant(expected == self.offsets.in_flight_counts(), "offsets in flight out of step")

    def pending_write_count(self) -> int:
        """Writes handed out and not yet reported."""
        return len(self._writes)

    # -- effects --------------------------------------------------------------------------------

    def take_effects(self) -> Effects:
        """The replies and writes of the input that just ran; checks every open request is
        either answered or parked."""
        invariant(
            self._open <= self._parked.keys(),
            f"requests neither answered nor parked: {sorted(self._open - self._parked.keys())}",
        )
        effects = Effects(tuple(self._replies), tuple(self._out))
        self._replies.clear()
        self._out.clear()
        return effects

    def fail_all_parked(self, error: ErrorCode) -> None:
        """Answer every waiting request with ``error`` (the shard is going away)."""
        for request_id, error_response in list(self._parked.items()):
            self.reply(request_id, error_response(error))
        self._writes.clear()


def _offsets_touched(records: Iterable[CoordinatorRecord]) -> dict[str, list[TopicPartitionLike]]:
    touched: dict[str, list[TopicPartitionLike]] = {}
    for record in records:
        if isinstance(record, OffsetRecord):
            touched.setdefault(record.group_id, []).append((record.topic, record.partition))
    return touched
