"""``GroupHost``: the broker's home for the sans-IO group coordinator (``replog.groups``).

Theory of operation. The coordinator of a group is the leader of partition
``partition_for(group)`` of ``__consumer_offsets``; this broker hosts a shard for every such
partition it leads. The host turns the broker's inputs into the coordinator's and carries out
the ``Effects`` it returns:

- **Leadership** (``reconcile``, after every metadata change and on every tick): a partition
  this broker starts to lead is *loading* (its groups' requests get
  COORDINATOR_LOAD_IN_PROGRESS) until its HW is current -- every record of earlier leaders is
  then below the HW and nothing of this leader's is above it -- and the partition has been read
  into a ``ShardLoader`` from its log start to the HW; then the shard serves. A partition it no
  longer leads, or leads under another leader epoch, is unloaded: its waiting requests get
  NOT_COORDINATOR (the client finds the new coordinator) and its writes in flight are forgotten.
- **Requests** (``handle``): a decoded group request goes to ``GroupCoordinator.handle`` under
  a fresh key; its answer is returned at once or delivered later through
  ``ClientRequests.on_reply`` (the handler returns ``AwaitReply(key)``). Replies to other
  parked requests that an input produces are delivered the same way.
- **Writes**: each ``Write`` is one record batch appended as leader with acks=all
  (``ReplicaManager.produce``, bounded by ``offsets_commit_timeout_ms``), in the order the
  coordinator returns them. Outcomes come back immediately or with the produce completions the
  driver drains (``on_produce_results``); successes are reported to the coordinator in write
  order per partition (the coordinator requires it), failures at once. Nothing a write changes
  is visible before it is reported, so a reply never acknowledges a commit a failover can lose.
- **Time**: the coordinator runs on ``now_ms`` plus a fixed offset to wall time, sampled once
  from the log manager's (injected) clock: commit timestamps and offset expiry are compared
  across brokers and restarts, so they must be wall time; the offset keeps them monotonic.
  ``on_tick`` runs the coordinator's timers once ``next_deadline_ms`` has come.
- **Stopping** (``stop``, when the broker halts, before its logs close): every shard is
  unloaded and none loads again, whatever leadership the metadata still reports: a load started
  later would read logs that are closing (a coordinator call in flight at the halt may still
  deliver a new leader epoch).
- **The topic** (``ensure_offsets_topic``): the first FindCoordinator creates
  ``__consumer_offsets`` through the controller (``offsets_topic_partitions`` partitions;
  replication factor and min ISR capped by the live brokers), one request at a time.
"""

from __future__ import annotations

import collections
import itertools
import logging
import uuid
from collections.abc import Callable, Iterable
from typing import Protocol

import attrs

from replog.broker.driver.client_requests import ClientRequests
from replog.broker.driver.metadata_channel import MetadataChannel
from replog.broker.driver.ports import DriverCore
from replog.broker.driver.requests import AwaitReply, Outcome, Reply, RequestContext
from replog.errors import CorruptRecordError, ErrorCode, StorageError, invariant
from replog.groups import (
    OFFSETS_TOPIC,
    Effects,
    GroupCoordinator,
    ShardLoader,
    Write,
)
from replog.isr import Acks, ProduceResult
from replog.log import decode_records, encode_batch, iter_batches
from replog.metadata.types import AdminRequestChanged, CreateTopic
from replog.protocol.consumer_protocol import subscribed_topics
from replog.protocol.schema import Message
from replog.topics import TopicPartition

__all__ = ["LOAD_READ_BYTES", "GroupHost", "offsets_topic_configs"]

_log = logging.getLogger(__name__)

LOAD_READ_BYTES = 1 << 20
"""How much of ``__consumer_offsets`` one read of a load takes (a load reads until the HW)."""


def offsets_topic_configs(min_insync_replicas: int) -> dict[str, str]:
    """The configs ``__consumer_offsets`` is created with: the one place they are set.

    Compacted, as Kafka creates it: the log cleaner keeps only the latest record per key (a
    group's metadata, one offset of one partition), and drops tombstones once they are older
    than ``delete.retention.ms``, so what a load replays stays bounded by the live state.
    """
    return {"min.insync.replicas": str(min_insync_replicas), "cleanup.policy": "compact"}


class GroupHostPort(DriverCore, Protocol):
    """What the group host uses of the driver (see ``replog.broker.driver.ports``)."""

    @property
    def metadata(self) -> MetadataChannel:
        """The metadata channel (admin submissions)."""

    @property
    def requests(self) -> ClientRequests:
        """Client requests (replies to parked group requests)."""


@attrs.define
class _PendingWrite:
    """A coordinator write appended to its partition, waiting for its acks=all outcome."""

    write_id: int
    produce_id: int
    error: ErrorCode | None = None  # known once the produce completed


@attrs.define
class _Loading:
    """A partition being read into a ``ShardLoader`` (``next_offset`` None: not started)."""

    leader_epoch: int
    loader: ShardLoader = attrs.Factory(ShardLoader)
    next_offset: int | None = None


class GroupHost:
    """See the module docstring."""

    def __init__(
        self, driver: GroupHostPort, member_id_suffix: Callable[[], str] | None = None
    ) -> None:
        self._driver = driver
        config = driver.config
        self.config = config.groups
        self.coordinator = GroupCoordinator(
            config=config.groups,
            member_id_suffix=member_id_suffix or (lambda: str(uuid.uuid4())),
            subscription_reader=subscribed_topics,
        )
        clock = driver.log_manager.clock
        self._wall_offset_ms = clock.wall_ms() - clock.monotonic_ms()
        self._keys = itertools.count()
        self._epochs: dict[int, int] = {}  # hosted partition -> leader epoch (loading or served)
        self._loading: dict[int, _Loading] = {}
        self._writes: dict[int, collections.deque[_PendingWrite]] = {}
        self._produces: dict[tuple[TopicPartition, int], tuple[int, _PendingWrite]] = {}
        self._creating = False
        self._stopped = False
        self._topic_partitions: dict[str, int] | None = None  # topics seen, for deletions

    # ------------------------------------------------------------------ views

    def group_ms(self, now_ms: int) -> int:
        """The coordinator's time for the driver's ``now_ms`` (wall-clock milliseconds)."""
        return now_ms + self._wall_offset_ms

    @property
    def hosted(self) -> dict[int, int]:
        """Partitions this broker coordinates (loading or serving) -> their leader epoch."""
        return dict(self._epochs)

    @property
    def loading(self) -> list[int]:
        """Partitions still loading."""
        return sorted(self._loading)

    # ------------------------------------------------------------------ requests

    def handle(self, ctx: RequestContext, body: Message) -> Outcome:
        """A group request (``GroupServices.handle``)."""
        key = next(self._keys)
        effects = self.coordinator.handle(
            key,
            ctx.version,
            body,
            client_id=ctx.header.client_id or "",
            client_host=ctx.client_host,
            now_ms=self.group_ms(ctx.now_ms),
        )
        own = self._carry_out(effects, ctx.now_ms, own_key=key)
        return AwaitReply(key) if own is None else Reply(own)

    def ensure_offsets_topic(self, now_ms: int) -> bool:
        """``GroupServices.ensure_offsets_topic``."""
        rm = self._driver.rm
        if OFFSETS_TOPIC in rm.image.topics:
            return True
        if self._creating:
            return False
        live = sum(1 for b in rm.image.brokers.values() if not b.fenced)
        if live == 0:
            return False
        config = self._driver.config
        factor = min(config.offsets_topic_replication_factor, live)
        min_isr = min(config.offsets_topic_min_insync_replicas, factor)
        payload = CreateTopic(
            topic=OFFSETS_TOPIC,
            partition_count=self.config.offsets_topic_partitions,
            replication_factor=factor,
            configs=offsets_topic_configs(min_isr),
        )
        self._creating = True
        _log.info(
            "broker %s: creating %s (%d partitions, replication factor %d, min ISR %d)",
            self._driver.broker_id, OFFSETS_TOPIC, payload.partition_count, factor, min_isr,
        )  # fmt: skip

        def created(change: AdminRequestChanged | None, why: str) -> None:
            self._creating = False
            if change is None or change.outcome not in (
                ErrorCode.NONE,
                ErrorCode.TOPIC_ALREADY_EXISTS,
            ):
                _log.warning("broker %s: creating %s: %s", self._driver.broker_id,
                             OFFSETS_TOPIC, why)  # fmt: skip

        self._driver.metadata.submit(payload, now_ms + config.request_timeout_ms, created)
        return False

    # ------------------------------------------------------------------ leadership

    def reconcile(self, now_ms: int) -> None:
        """Load the ``__consumer_offsets`` partitions this broker leads, unload the others
        (see the module docstring); tell the coordinator of deleted topics."""
        rm = self._driver.rm_or_none
        if rm is None or self._stopped:
            return
        self._note_deleted_topics(now_ms)
        assignment = rm.image.topics.get(OFFSETS_TOPIC)
        count = 0 if assignment is None else assignment.partition_count
        led: dict[int, int] = {}
        for partition in range(count):
            replica = rm.partitions.get(TopicPartition(OFFSETS_TOPIC, partition))
            if replica is not None and replica.is_leader:
                led[partition] = replica.leader_epoch
        for partition, epoch in list(self._epochs.items()):
            if led.get(partition) != epoch:
                self._unload(partition, now_ms)
        for partition, epoch in led.items():
            if partition not in self._epochs:
                self._epochs[partition] = epoch
                self._loading[partition] = _Loading(epoch)
                self.coordinator.begin_loading(partition)
        self.advance_loading(now_ms)

    def _unload(self, partition: int, now_ms: int) -> None:
        self._epochs.pop(partition, None)
        self._loading.pop(partition, None)
        for pending in self._writes.pop(partition, ()):
            self._produces.pop((TopicPartition(OFFSETS_TOPIC, partition), pending.produce_id), None)
        _log.info("broker %s: unloading groups of %s-%d", self._driver.broker_id,
                  OFFSETS_TOPIC, partition)  # fmt: skip
        self._carry_out(self.coordinator.unload(partition), now_ms)

    def advance_loading(self, now_ms: int) -> None:
        """Read on in every loading partition whose HW is current; serve the ones read up to
        their HW."""
        for partition in list(self._loading):
            try:
                self._advance_one(partition, now_ms)
            except (CorruptRecordError, StorageError) as exc:
                # The partition stays loading (its groups get COORDINATOR_LOAD_IN_PROGRESS):
                # serving groups from a log that cannot be read would lose what it holds.
                _log.error("broker %s: cannot load %s-%d: %s", self._driver.broker_id,
                           OFFSETS_TOPIC, partition, exc)  # fmt: skip
                self._loading[partition].next_offset = None
                self._loading[partition].loader = ShardLoader()

    def _advance_one(self, partition: int, now_ms: int) -> None:
        loading = self._loading[partition]
        rm = self._driver.rm
        replica = rm.partition(OFFSETS_TOPIC, partition)
        log = rm.log(OFFSETS_TOPIC, partition)
        if replica is None or log is None or not replica.is_leader or not replica.hw_is_current:
            return
        if replica.leader_epoch != loading.leader_epoch:
            return  # reconcile unloads it
        end = log.high_watermark
        if loading.next_offset is None or loading.next_offset < log.log_start_offset:
            loading.next_offset, loading.loader = log.log_start_offset, ShardLoader()
        while loading.next_offset < end:
            data = log.read(loading.next_offset, LOAD_READ_BYTES, max_offset=end).to_bytes()
            read_to = loading.next_offset
            for position, header in iter_batches(data):
                if header.is_control:
                    read_to = max(read_to, header.last_offset + 1)
                    continue
                for record in decode_records(data, position):
                    if record.offset >= loading.next_offset and record.key is not None:
                        loading.loader.replay(record.key, record.value)
                read_to = max(read_to, header.last_offset + 1)
            if read_to == loading.next_offset:
                return  # nothing readable yet (a read stops at a segment's end): next input
            loading.next_offset = read_to
        del self._loading[partition]
        summary = self.coordinator.finish_loading(
            partition, loading.loader, now_ms=self.group_ms(now_ms)
        )
        _log.info(
            "broker %s: serving groups of %s-%d (epoch %d): %s", self._driver.broker_id,
            OFFSETS_TOPIC, partition, loading.leader_epoch, summary,
        )  # fmt: skip

    def _note_deleted_topics(self, now_ms: int) -> None:
        """Deleted topics' partitions: every group forgets its offsets for them (Kafka's
        ``onPartitionsDeleted``). Topics gone since the last look are the deleted ones."""
        rm = self._driver.rm
        current = {name: a.partition_count for name, a in rm.image.topics.items()}
        seen, self._topic_partitions = self._topic_partitions, current
        if seen is None or not self._epochs:
            return
        gone = [
            (name, p) for name, count in seen.items() if name not in current for p in range(count)
        ]
        if gone:
            effects = self.coordinator.on_partitions_deleted(gone, now_ms=self.group_ms(now_ms))
            self._carry_out(effects, now_ms)

    # ------------------------------------------------------------------ time and writes

    def on_tick(self, now_ms: int) -> None:
        """Leadership, loads, and the coordinator's timers once due (none once stopped)."""
        if self._stopped:
            return
        self.reconcile(now_ms)
        deadline = self.coordinator.next_deadline_ms()
        if deadline is not None and deadline <= self.group_ms(now_ms):
            self._carry_out(self.coordinator.on_tick(self.group_ms(now_ms)), now_ms)

    def on_produce_results(
        self, results: Iterable[tuple[TopicPartition, ProduceResult]], now_ms: int
    ) -> None:
        """acks=all produces completed; the ones of coordinator writes are reported."""
        touched: set[int] = set()
        for tp, result in results:
            entry = self._produces.pop((tp, result.request_id), None)
            if entry is not None:
                partition, pending = entry
                pending.error = result.error_code
                touched.add(partition)
        for partition in sorted(touched):
            self._report(partition, now_ms)

    def stop(self, now_ms: int) -> None:
        """The broker halts, its logs about to close: every shard is unloaded (its waiting
        requests answered, its writes in flight forgotten) and none loads again."""
        self._stopped = True
        for partition in list(self._epochs):
            self._unload(partition, now_ms)

    def _carry_out(
        self, effects: Effects, now_ms: int, *, own_key: int | None = None
    ) -> Message | None:
        """Deliver replies, append writes and report the outcomes already known, until the
        coordinator asks for nothing more; returns the reply to ``own_key`` if one came."""
        own: Message | None = None
        queue = collections.deque([effects])
        while queue:
            current = queue.popleft()
            for reply in current.replies:
                if reply.request_id == own_key:
                    own = reply.response
                else:
                    self._driver.requests.on_reply(reply.request_id, reply.response)
            for write in current.writes:
                self._append(write, now_ms)
            for partition in {w.partition for w in current.writes}:
                queue.extend(self._report(partition, now_ms, deliver=False))
        return own

    def _append(self, write: Write, now_ms: int) -> None:
        partition = write.partition
        pending_writes = self._writes.setdefault(partition, collections.deque())
        batch = encode_batch(
            [value for _, value in write.records],
            keys=[key for key, _ in write.records],
            base_timestamp=self.group_ms(now_ms),
        )
        produce_id, result = self._driver.rm.produce(
            OFFSETS_TOPIC,
            partition,
            batch,
            Acks.ALL,
            now_ms,
            timeout_ms=self._driver.config.offsets_commit_timeout_ms,
        )
        pending = _PendingWrite(write.write_id, produce_id)
        pending_writes.append(pending)
        if result is None:
            self._produces[(TopicPartition(OFFSETS_TOPIC, partition), produce_id)] = (
                partition,
                pending,
            )
        else:
            pending.error = result.error_code

    def _report(self, partition: int, now_ms: int, *, deliver: bool = True) -> list[Effects]:
        """Report the known outcomes of ``partition``'s writes: failures at once, successes in
        write order. Returns the coordinator's effects (carried out here when ``deliver``)."""
        pending_writes = self._writes.get(partition)
        if pending_writes is None or partition not in self._epochs:
            return []
        out: list[Effects] = []
        group_now = self.group_ms(now_ms)
        for pending in [p for p in pending_writes if p.error not in (None, ErrorCode.NONE)]:
            pending_writes.remove(pending)
            error = pending.error
            invariant(error is not None, "a failed write has its error")
            out.append(
                self.coordinator.on_write_complete(
                    partition,
                    pending.write_id,
                    error or ErrorCode.UNKNOWN_SERVER_ERROR,
                    now_ms=group_now,
                )
            )
        while pending_writes and pending_writes[0].error is ErrorCode.NONE:
            pending = pending_writes.popleft()
            out.append(
                self.coordinator.on_write_complete(
                    partition, pending.write_id, ErrorCode.NONE, now_ms=group_now
                )
            )
        if deliver:
            for effects in out:
                self._carry_out(effects, now_ms)
            return []
        return out
