"""An in-memory cluster for replog.isr: one leader, N followers, a controller, a network.

Each replica is a real `Log` on its own `FaultInjectingFileSystem` under a temp dir, driven by
a `Partition`. Time is a manual clock. Messages (fetch requests and responses, AlterPartition
requests and responses) sit in ``network`` until the test delivers, duplicates or drops them,
in any order. The controller is played here: it elects leaders, applies AlterPartition with a
compare-and-set on the partition epoch, and sends metadata to the brokers synchronously.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

import attrs

from replog.errors import ErrorCode
from replog.isr import (
    Acks,
    DurabilityMode,
    Partition,
    PartitionConfig,
    PartitionFetchRequest,
    PartitionFetchResponse,
    PartitionReady,
    ProduceResult,
    StateChange,
)
from replog.log import Log, read_header
from replog.metadata.types import AlterPartition, AlterPartitionResult

from .support import TOPIC, batch, on_wire, open_log, reopen_after_crash


@attrs.frozen
class FetchMsg:
    """A fetch request from ``follower`` to ``leader``."""

    follower: int
    leader: int
    request: PartitionFetchRequest


@attrs.frozen
class FetchRespMsg:
    """A fetch response to ``follower``."""

    follower: int
    response: PartitionFetchResponse


@attrs.frozen
class AlterMsg:
    """An AlterPartition request to the controller."""

    request: AlterPartition


@attrs.frozen
class AlterRespMsg:
    """The controller's answer to ``request``, for broker ``leader``."""

    leader: int
    request: AlterPartition
    response: AlterPartitionResult


@attrs.frozen
class MetadataMsg:
    """The controller's partition state, for ``broker`` (current as of delivery)."""

    broker: int


Message = FetchMsg | FetchRespMsg | AlterMsg | AlterRespMsg | MetadataMsg


@attrs.define
class Node:
    """One broker hosting one replica."""

    broker_id: int
    log: Log
    partition: Partition
    broker_epoch: int


@attrs.define
class Controller:
    """The coordinator's stored partition state."""

    leader: int
    leader_epoch: int
    isr: frozenset[int]
    partition_epoch: int
    broker_epochs: dict[int, int]


class Cluster:
    """One partition replicated on ``replica_count`` brokers (broker 0 leads first)."""

    def __init__(self, replica_count: int, config: PartitionConfig) -> None:
        self.root = Path(tempfile.mkdtemp(prefix="replog-isr-"))
        self.config = config
        self.clock_ms = 1_000_000
        self.assigned = tuple(range(replica_count))
        self.changes: list[StateChange] = []
        self.network: list[Message] = []
        self.nodes: dict[int, Node] = {}
        self.controller = Controller(0, 0, frozenset(self.assigned), 0, {})
        for broker_id in self.assigned:
            log = open_log(self.root, f"b{broker_id}")
            self.nodes[broker_id] = self._node(broker_id, log, broker_epoch=1)
        self.next_request_id = 1
        self.produced: dict[int, bytes] = {}  # request id -> value, acks=all only
        self.acked: dict[int, bytes] = {}  # offset -> batch bytes, acks=all acknowledged
        self.committed: dict[int, bytes] = {}  # offset -> batch bytes below some leader HW
        self.leader_hw: dict[tuple[int, int], int] = {}  # (broker, leader epoch) -> HW
        self._publish_metadata()

    def close(self) -> None:
        """Remove the temp dir."""
        shutil.rmtree(self.root, ignore_errors=True)

    def _node(self, broker_id: int, log: Log, broker_epoch: int) -> Node:
        partition = Partition(
            topic=TOPIC,
            partition=0,
            broker_id=broker_id,
            log=log,
            config=self.config,
            broker_epoch=broker_epoch,
            state_change_sink=self.changes.append,
        )
        self.controller.broker_epochs[broker_id] = broker_epoch
        return Node(broker_id, log, partition, broker_epoch)

    @property
    def leader(self) -> Node:
        """The node the controller says leads."""
        return self.nodes[self.controller.leader]

    # ------------------------------------------------------------------ controller

    def _publish_metadata(self) -> None:
        for broker_id in self.nodes:
            self._send_metadata(broker_id)
        self.pump()

    def _send_metadata(self, broker_id: int) -> None:
        ctrl = self.controller
        node = self.nodes[broker_id]
        node.partition.update_replica_eligibility(frozenset(), dict(ctrl.broker_epochs))
        if node.broker_id == ctrl.leader:
            node.partition.become_leader(
                ctrl.leader_epoch,
                ctrl.isr,
                self.assigned,
                self.clock_ms,
                partition_epoch=ctrl.partition_epoch,
                broker_epochs=dict(ctrl.broker_epochs),
            )
        else:
            node.partition.become_follower(
                ctrl.leader,
                ctrl.leader_epoch,
                self.clock_ms,
                isr=ctrl.isr,
                assigned=self.assigned,
                partition_epoch=ctrl.partition_epoch,
            )

    def elect(self, candidate: int) -> None:
        """Controlled leader change to an ISR member: new leader epoch, same ISR."""
        ctrl = self.controller
        assert candidate in ctrl.isr
        ctrl.leader = candidate
        ctrl.leader_epoch += 1
        ctrl.partition_epoch += 1
        self._publish_metadata()

    def _alter_partition(self, request: AlterPartition) -> AlterPartitionResult:
        ctrl = self.controller
        if request.leader_id != ctrl.leader:
            return AlterPartitionResult(ErrorCode.INVALID_REQUEST)
        if request.leader_epoch != ctrl.leader_epoch:
            return AlterPartitionResult(ErrorCode.FENCED_LEADER_EPOCH)
        if request.partition_epoch != ctrl.partition_epoch:
            return AlterPartitionResult(ErrorCode.INVALID_UPDATE_VERSION)
        for member in request.new_isr:
            registered = ctrl.broker_epochs[member.broker_id]
            if member.broker_epoch not in (-1, registered):
                return AlterPartitionResult(ErrorCode.INELIGIBLE_REPLICA)
        ctrl.isr = frozenset(request.isr_ids)
        ctrl.partition_epoch += 1
        return AlterPartitionResult(
            ErrorCode.NONE,
            leader=ctrl.leader,
            leader_epoch=ctrl.leader_epoch,
            partition_epoch=ctrl.partition_epoch,
            isr=tuple(sorted(ctrl.isr)),
        )

    # ------------------------------------------------------------------ brokers

    def restart(self, broker_id: int) -> None:
        """Power-cut a follower (it loses unsynced data) and start it as a new incarnation."""
        node = self.nodes[broker_id]
        assert broker_id != self.controller.leader
        log = reopen_after_crash(node.log, high_watermark=node.log.high_watermark)
        self.nodes[broker_id] = self._node(broker_id, log, node.broker_epoch + 1)
        ctrl = self.controller
        if self.config.durability is DurabilityMode.REPLICATED and broker_id in ctrl.isr:
            # What it reported may be gone: an unclean shutdown leaves the ISR (KIP-966).
            ctrl.isr = ctrl.isr - {broker_id}
            ctrl.partition_epoch += 1
        self._publish_metadata()

    def produce(self, acks: int, value: bytes) -> None:
        """A client produce to the current leader."""
        request_id = self.next_request_id
        self.next_request_id += 1
        leader = self.leader.partition
        result = leader.append_as_leader(batch(value), acks, self.clock_ms, request_id=request_id)
        if acks == Acks.ALL:
            self.produced[request_id] = value
        if result is not None:
            self._on_produce_result(result)
        self.pump()

    def send_fetch(self, broker_id: int) -> None:
        """A follower sends its next fetch (flushing first in FSYNC mode)."""
        node = self.nodes[broker_id]
        request = node.partition.fetch_request()
        if request is None:
            return
        if request.requires_flush:
            node.log.flush()
        leader = node.partition.leader_id
        self.network.append(FetchMsg(broker_id, leader, attrs.evolve(request, max_wait_ms=0)))

    def flush_leader(self) -> None:
        """The leader's group commit completes."""
        self.leader.log.flush()
        self.leader.partition.on_log_flushed(self.clock_ms)
        self.pump()

    def resend_alter_partition(self) -> None:
        """The leader's AlterPartition manager re-sends a change nobody answered."""
        pending = self.leader.partition.pending_isr_change
        if pending is not None:
            self.network.append(AlterMsg(pending))

    def advance(self, delta_ms: int) -> None:
        """Time passes: delayed operations expire, the ISR-expiration task runs."""
        self.clock_ms += delta_ms
        for node in self.nodes.values():
            node.partition.on_tick(self.clock_ms)
        self.leader.partition.maybe_shrink_isr(self.clock_ms)
        self.pump()

    def deliver(self, index: int, *, duplicate: bool = False) -> None:
        """Deliver the message at ``index``; keep a copy in flight when ``duplicate``."""
        message = self.network[index] if duplicate else self.network.pop(index)
        if isinstance(message, FetchMsg):
            response = self.nodes[message.leader].partition.on_fetch(message.request, self.clock_ms)
            self.network.append(FetchRespMsg(message.follower, on_wire(response)))
        elif isinstance(message, FetchRespMsg):
            self.nodes[message.follower].partition.on_fetch_response(
                message.response, self.clock_ms
            )
        elif isinstance(message, AlterMsg):
            answer = self._alter_partition(message.request)
            self.network.append(AlterRespMsg(message.request.leader_id, message.request, answer))
            if answer.error is ErrorCode.NONE:
                self.network.extend(MetadataMsg(broker_id) for broker_id in self.nodes)
        elif isinstance(message, MetadataMsg):
            self._send_metadata(message.broker)
        else:
            self.nodes[message.leader].partition.on_alter_partition_response(
                message.request, message.response, self.clock_ms
            )
        self.pump()

    def settle(self, rounds: int) -> None:
        """Let the cluster make progress: the leader flushes, then ``rounds`` times every
        follower fetches and every message in flight is delivered in order."""
        self.flush_leader()
        for _ in range(rounds):
            for broker_id in self.nodes:
                self.send_fetch(broker_id)
            while self.network:
                self.deliver(0)
            for node in self.nodes.values():
                node.log.flush()

    def pump(self) -> None:
        """Move every node's ``PartitionReady`` outputs onto the network / into the results."""
        for node in self.nodes.values():
            ready: PartitionReady = node.partition.take_ready()
            for request in ready.alter_partition:
                self.network.append(AlterMsg(request))
            for result in ready.produce_results:
                self._on_produce_result(result)
        self._observe_leader()

    def _on_produce_result(self, result: ProduceResult) -> None:
        value = self.produced.pop(result.request_id, None)
        if value is None or result.error_code is not ErrorCode.NONE:
            return
        data = self.leader.log.read(result.base_offset, 1 << 20).to_bytes()
        self.acked[result.base_offset] = batch_at(data)
        assert value in data

    def _observe_leader(self) -> None:
        node = self.leader
        partition = node.partition
        if not partition.is_leader:
            return
        key = (node.broker_id, partition.leader_epoch)
        hw = partition.high_watermark
        assert hw >= self.leader_hw.get(key, 0), f"leader HW went back to {hw} in {key}"
        self.leader_hw[key] = hw
        for offset, data in batches_below(node.log, hw):
            known = self.committed.setdefault(offset, data)
            assert known == data, f"committed offset {offset} changed on the leader"


def batch_at(data: bytes) -> bytes:
    """The first batch in ``data``."""
    return data[: read_header(data).size_bytes]


def batches_below(log: Log, end_offset: int) -> list[tuple[int, bytes]]:
    """(base offset, batch bytes) of the single-record batches below ``end_offset``."""
    found = []
    for data in log.batches():
        header = read_header(data)
        if header.base_offset >= end_offset:
            break
        found.append((header.base_offset, data))
    return found


__all__ = ["Cluster", "Message", "Node"]
