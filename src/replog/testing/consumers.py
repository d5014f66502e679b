"""The simulated consumers: one per partition, reading the way a Kafka consumer does.

A ``PartitionConsumer`` finds its partition's leader in the clients' ``ClientMetadataCache``,
starts at the log start (ListOffsets earliest), fetches with the leader epoch it knows, and --
when the seed says so -- inside an incremental fetch session (KIP-227: a full request opens
the session; later requests name a partition only when its fetch offset changed; an unknown
session or a wrong epoch starts over). When its metadata shows a newer leader epoch than the
one it last validated, it validates its position first (KIP-320: OffsetForLeaderEpoch with the
epoch of the last record it consumed). Only one request is in flight per consumer.

Consumers of the main topic are *checked*: their polls go to the ``History``, the HWs they are
told to the invariant checker, and a validation answer below their position is a violation
(``consumer-truncated``: a record a consumer read, below the HW, was truncated away). The
churned topic's consumers only exercise the read paths (log start moved by retention, a topic
deleted and recreated under them).

A consumer sees the simulation through ``ConsumerHost``, the members of ``Simulation`` it uses.
"""

from __future__ import annotations

from typing import Any, Protocol

import attrs

from replog.errors import ErrorCode
from replog.log.decoding import decode_records
from replog.log.records import iter_batches
from replog.protocol import messages as m
from replog.testing.clients import Rpc, code_of, records_bytes
from replog.testing.history import History
from replog.testing.invariants import InvariantChecker
from replog.testing.sim_ports import SimCore
from replog.testing.workload import REFRESH_ERRORS, ClientMetadataCache, LeaderInfo

__all__ = ["CONSUMER_NODE", "ConsumerHost", "PartitionConsumer", "decode_with_epochs"]

CONSUMER_NODE = 200
FETCH_MAX_BYTES = 4096
SESSION_ERRORS = frozenset(
    {ErrorCode.FETCH_SESSION_ID_NOT_FOUND, ErrorCode.INVALID_FETCH_SESSION_EPOCH}
)


class ConsumerHost(SimCore, Protocol):
    """What a consumer uses of the simulation."""

    @property
    def rpc(self) -> Rpc:
        """The clients' wire."""

    @property
    def view(self) -> ClientMetadataCache:
        """The clients' metadata (where the leaders are)."""

    @property
    def history(self) -> History:
        """The polls the history checker reads."""

    @property
    def checker(self) -> InvariantChecker:
        """The invariant checker (told of every HW a checked consumer is answered)."""


@attrs.define
class _FetchSession:
    """An open fetch session with one broker."""

    broker: int
    session_id: int
    epoch: int
    #: the fetch offset and leader epoch the broker's session cache holds for the partition
    sent: tuple[int, int]


class PartitionConsumer:
    """One partition's consumer (see the module docstring)."""

    def __init__(self, sim: ConsumerHost, tp: tuple[str, int], node: int, *, checked: bool) -> None:
        self._sim = sim
        self.tp = tp
        self.node = node
        self.checked = checked
        self.position: int | None = None
        self.last_epoch = -1
        self.validated_epoch = -1
        self.topic_id: str | None = None
        self._session: _FetchSession | None = None
        self._busy = False

    def start(self, delay_ms: int) -> None:
        """Poll every ``consume_interval_ms`` (jittered) while the run lasts."""
        self._sim.after(delay_ms, self._step)

    def _step(self) -> None:
        sim = self._sim
        sim.after(sim.jitter(sim.opts.consume_interval_ms), self._step)
        if self._busy:
            return
        info = sim.view.leader(self.tp)
        if info is None:
            return
        topic_id = sim.view.topic_ids.get(self.tp[0])
        if topic_id != self.topic_id:  # first sight, or the topic was recreated
            if self.topic_id is not None and self.checked:
                sim.violation(f"topic-id-changed: {self.tp[0]} {self.topic_id} -> {topic_id}")
            self.topic_id = topic_id
            self._reset()
        if self.position is None:
            self._list_earliest(info)
        elif self.last_epoch >= 0 and info.leader_epoch > self.validated_epoch:
            self._validate(info)
        else:
            self._fetch(info, self.position)

    def _reset(self) -> None:
        self.position = None
        self.last_epoch = -1
        self.validated_epoch = -1
        self._session = None

    def _send(self, info: LeaderInfo, body: Any, then: Any) -> None:
        sim = self._sim
        self._busy = True

        def answered(answer: Any) -> None:
            self._busy = False
            then(answer)

        sim.rpc.call(
            self.node,
            info.leader,
            body,
            answered,
            client_id=f"sim-consumer-{self.tp[0]}-{self.tp[1]}",
            timeout_ms=sim.opts.request_timeout_ms,
        )

    def _refresh_on(self, error: ErrorCode) -> None:
        if error in REFRESH_ERRORS:
            self._session = None
            self._sim.view.refresh()

    # ------------------------------------------------------------------ ListOffsets

    def _list_earliest(self, info: LeaderInfo) -> None:
        body = m.ListOffsetsRequest(
            replica_id=-1,
            isolation_level=0,
            topics=[
                m.ListOffsetsTopic(
                    name=self.tp[0],
                    partitions=[
                        m.ListOffsetsPartition(
                            partition_index=self.tp[1],
                            current_leader_epoch=info.leader_epoch,
                            timestamp=m.EARLIEST_TIMESTAMP,
                        )
                    ],
                )
            ],
        )
        self._send(info, body, self._on_earliest)

    def _on_earliest(self, body: Any) -> None:
        if not isinstance(body, m.ListOffsetsResponse):
            return
        part = body.topics[0].partitions[0]
        error = code_of(part.error_code)
        self._refresh_on(error)
        if error is ErrorCode.NONE and part.offset >= 0:
            self.position = part.offset
            self.validated_epoch = part.leader_epoch
            if self.checked:
                self._sim.history.poll(self.node, self.tp, (), seek=part.offset)

    # ------------------------------------------------------------------ OffsetForLeaderEpoch

    def _validate(self, info: LeaderInfo) -> None:
        body = m.OffsetForLeaderEpochRequest(
            replica_id=-1,
            topics=[
                m.OffsetForLeaderTopic(
                    topic=self.tp[0],
                    partitions=[
                        m.OffsetForLeaderPartition(
                            partition=self.tp[1],
                            current_leader_epoch=info.leader_epoch,
                            leader_epoch=self.last_epoch,
                        )
                    ],
                )
            ],
        )
        position, last_epoch = self.position, self.last_epoch
        self._send(
            info, body, lambda answer: self._on_validated(info, position, last_epoch, answer)
        )

    def _on_validated(
        self, info: LeaderInfo, position: int | None, last_epoch: int, body: Any
    ) -> None:
        sim = self._sim
        if not isinstance(body, m.OffsetForLeaderEpochResponse) or position != self.position:
            return
        part = body.topics[0].partitions[0]
        error = code_of(part.error_code)
        self._refresh_on(error)
        if error is not ErrorCode.NONE:
            return
        self.validated_epoch = info.leader_epoch
        if position is not None and part.end_offset < position:
            if self.checked:
                sim.violation(
                    f"consumer-truncated: {self.tp} consumed up to {position - 1} in epoch "
                    f"{last_epoch}; leader {info.leader} (epoch {info.leader_epoch}) ends epoch "
                    f"{part.leader_epoch} at {part.end_offset}"
                )
            self._reset()

    # ------------------------------------------------------------------ Fetch

    def _fetch(self, info: LeaderInfo, position: int) -> None:
        sim = self._sim
        session = self._session if sim.opts.fetch_sessions else None
        if session is not None and session.broker != info.leader:
            session = self._session = None
        wanted = (position, info.leader_epoch)
        partitions = [
            m.FetchPartition(
                partition=self.tp[1],
                current_leader_epoch=info.leader_epoch,
                fetch_offset=position,
                last_fetched_epoch=-1,
                log_start_offset=-1,
                partition_max_bytes=FETCH_MAX_BYTES,
            )
        ]
        if session is None:
            session_id, epoch = 0, 0 if sim.opts.fetch_sessions else -1
        else:
            session_id, epoch = session.session_id, session.epoch
            if session.sent == wanted:
                partitions = []  # the session holds it already
        body = m.FetchRequest(
            replica_id=-1,
            max_wait_ms=0,
            min_bytes=1,
            max_bytes=FETCH_MAX_BYTES,
            isolation_level=0,
            session_id=session_id,
            session_epoch=epoch,
            topics=[m.FetchTopic(topic=self.tp[0], partitions=partitions)] if partitions else [],
            forgotten_topics_data=[],
            rack_id="",
        )
        self._send(info, body, lambda answer: self._on_fetched(info, position, wanted, answer))

    def _on_fetched(
        self, info: LeaderInfo, position: int, wanted: tuple[int, int], body: Any
    ) -> None:
        if not isinstance(body, m.FetchResponse) or position != self.position:
            return
        top_error = code_of(body.error_code)
        if top_error in SESSION_ERRORS:
            self._session = None
            return
        if top_error is not ErrorCode.NONE:
            return
        self._note_session(info, wanted, body.session_id)
        for topic in body.responses:
            for part in topic.partitions:
                if part.partition_index == self.tp[1]:
                    self._on_partition(position, part)

    def _note_session(self, info: LeaderInfo, wanted: tuple[int, int], session_id: int) -> None:
        if not self._sim.opts.fetch_sessions:
            return
        session = self._session
        if session is None:
            if session_id != 0:
                self._session = _FetchSession(info.leader, session_id, 1, wanted)
        else:
            session.epoch = session.epoch + 1 if session.epoch < (1 << 31) - 1 else 1
            session.sent = wanted

    def _on_partition(self, position: int, part: m.FetchResponsePartition) -> None:
        sim = self._sim
        error = code_of(part.error_code)
        if error is ErrorCode.OFFSET_OUT_OF_RANGE:
            if self.checked:
                sim.violation(f"fetch-out-of-range: {self.tp} at {position} (no retention here)")
            self._reset()
            return
        self._refresh_on(error)
        if error is not ErrorCode.NONE:
            return
        if self.checked:
            for problem in sim.checker.on_consumer_hw(
                self.tp, part.high_watermark, client=self.node
            ):
                sim.violation(problem)
        records = [r for r in decode_with_epochs(records_bytes(part.records)) if r[0] >= position]
        if not records:
            return
        if self.checked:
            sim.history.poll(self.node, self.tp, [(o, v) for o, v, _ in records])
        self.position = records[-1][0] + 1
        self.last_epoch = records[-1][2]


def decode_with_epochs(data: bytes) -> list[tuple[int, bytes, int]]:
    """(offset, value, the batch's partition leader epoch) of every record in ``data``."""
    out: list[tuple[int, bytes, int]] = []
    for position, header in iter_batches(data):
        for record in decode_records(data, position):
            out.append((record.offset, record.value or b"", header.partition_leader_epoch))
    return out
