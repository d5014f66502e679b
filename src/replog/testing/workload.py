"""The simulated clients that write and probe: a metadata cache, a producer and an admin reader.

They behave like Kafka clients, over the Kafka protocol (``clients.Rpc``):

- ``ClientMetadataCache`` is the clients' metadata: Metadata requests to a random broker, refreshed
  when older than ``metadata_max_age_ms`` or after an error; a partition's entry only moves to
  a newer leader epoch (KIP-320), unless its topic was recreated (a new topic ID).
- ``UniqueValueProducer`` sends one-record batches to the leader its view names: to the main topic
  (recorded in the ``History``; acks=all acknowledgements feed the invariant checker) and, when
  the seed has one, to the churned topic (values tagged with the time they were sent).
- ``Probes`` asks what a monitoring or admin tool would: ListOffsets (latest: the HW, which never
  goes back; earliest: the main topic's log start, which never moves; by timestamp: the first
  record at or after it, with the timestamp it was produced with) and DescribeConfigs (the main
  topic's min ISR as created).

Each sees the simulation through a port declared here (``ClientHost`` for the cache,
``ProducerHost``, ``ProbeHost``): the members of ``Simulation`` it uses.
"""

from __future__ import annotations

from typing import Any, Protocol

import attrs

from replog.clock import Clock
from replog.errors import ErrorCode
from replog.log.encoding import encode_batch
from replog.protocol import messages as m
from replog.testing.clients import ClientHost, Rpc, code_of
from replog.testing.history import History, Send
from replog.testing.idempotence import Idempotence, Stamp
from replog.testing.invariants import InvariantChecker
from replog.testing.options import ACKS_ALL
from replog.testing.sim_ports import SimCore

__all__ = [
    "CHURN_TOPIC",
    "DEFINITE_FAILURES",
    "REFRESH_ERRORS",
    "TOPIC",
    "ClientMetadataCache",
    "LeaderInfo",
    "ProbeHost",
    "Probes",
    "ProducerHost",
    "UniqueValueProducer",
]

TOPIC = "sim"
CHURN_TOPIC = "churn"
METADATA_NODE = 90
PRODUCER_NODE = 100
PROBE_NODE = 400
METADATA_TIMEOUT_MS = 150
METADATA_BACKOFF_MS = 20

DEFINITE_FAILURES = frozenset(
    {
        ErrorCode.NOT_ENOUGH_REPLICAS,
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        ErrorCode.KAFKA_STORAGE_ERROR,
    }
)
"""Produce errors that mean "not written" (anything else but NONE may have been appended)."""

REFRESH_ERRORS = frozenset(
    {
        ErrorCode.NOT_LEADER_OR_FOLLOWER,
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        ErrorCode.LEADER_NOT_AVAILABLE,
        ErrorCode.FENCED_LEADER_EPOCH,
        ErrorCode.UNKNOWN_LEADER_EPOCH,
        ErrorCode.KAFKA_STORAGE_ERROR,
    }
)
"""Answers after which a client refreshes its metadata, as Kafka's clients do."""


@attrs.frozen
class LeaderInfo:
    """A partition's leader and leader epoch as the clients' metadata has them."""

    leader: int
    leader_epoch: int


class ClientMetadataCache:
    """The clients' metadata cache (see the module docstring)."""

    def __init__(self, sim: ClientHost) -> None:
        self._sim = sim
        self.leaders: dict[tuple[str, int], LeaderInfo] = {}
        self.partition_counts: dict[str, int] = {}
        self.topic_ids: dict[str, str] = {}
        self._busy = False
        self._refreshed_ms = -(1 << 40)
        self._last_broker = 0

    def start(self, delay_ms: int) -> None:
        """Refresh every ``metadata_max_age_ms`` in the background, as clients do."""
        sim = self._sim

        def step() -> None:
            sim.after(sim.opts.metadata_max_age_ms, step)
            if sim.now_ms - self._refreshed_ms >= sim.opts.metadata_max_age_ms:
                self.refresh()

        sim.after(delay_ms, step)

    def leader(self, tp: tuple[str, int]) -> LeaderInfo | None:
        """The partition's leader as known (refreshing in the background when old)."""
        if self._sim.now_ms - self._refreshed_ms > self._sim.opts.metadata_max_age_ms:
            self.refresh()
        info = self.leaders.get(tp)
        return None if info is None or info.leader < 0 else info

    def refresh(self) -> None:
        """Ask a random broker for every topic's metadata (one request at a time)."""
        sim = self._sim
        if self._busy:
            return
        self._busy = True
        others = [b for b in sorted(sim.brokers) if b != self._last_broker] or sorted(sim.brokers)
        broker = self._last_broker = sim.rng.choice(others)
        body = m.MetadataRequest(
            topics=None,
            allow_auto_topic_creation=False,
            include_cluster_authorized_operations=False,
            include_topic_authorized_operations=False,
        )
        sim.rpc.call(
            METADATA_NODE,
            broker,
            body,
            self._on_answer,
            client_id="sim-metadata",
            timeout_ms=METADATA_TIMEOUT_MS,
        )

    def _on_answer(self, body: Any) -> None:
        self._busy = False
        if not isinstance(body, m.MetadataResponse):
            self._sim.after(METADATA_BACKOFF_MS, self.refresh)  # try another broker
            return
        self._refreshed_ms = self._sim.now_ms
        listed = set()
        for topic in body.topics:
            name = topic.name
            if name is None or code_of(topic.error_code) is not ErrorCode.NONE:
                continue
            listed.add(name)
            topic_id = topic.topic_id.hex
            recreated = self.topic_ids.get(name, topic_id) != topic_id
            self.topic_ids[name] = topic_id
            self.partition_counts[name] = len(topic.partitions)
            for part in topic.partitions:
                tp = (name, part.partition_index)
                known = self.leaders.get(tp)
                if recreated or known is None or part.leader_epoch >= known.leader_epoch:
                    self.leaders[tp] = LeaderInfo(part.leader_id, part.leader_epoch)
        for name in set(self.partition_counts) - listed:
            self._forget(name)

    def _forget(self, topic: str) -> None:
        self.partition_counts.pop(topic, None)
        self.topic_ids.pop(topic, None)
        for tp in [tp for tp in self.leaders if tp[0] == topic]:
            del self.leaders[tp]


class ProducerHost(ClientHost, Protocol):
    """What the producer uses of the simulation."""

    @property
    def phase(self) -> str:
        """``safety`` or ``liveness``."""

    @property
    def clock(self) -> Clock:
        """The simulation's clock (its wall time stamps the batches)."""

    @property
    def view(self) -> ClientMetadataCache:
        """The clients' metadata."""

    @property
    def history(self) -> History:
        """The sends and polls the history checker reads."""

    @property
    def checker(self) -> InvariantChecker:
        """The invariant checker (told of every acks=all acknowledgement)."""


class UniqueValueProducer:
    """Writes unique values, one record per batch (see the module docstring)."""

    def __init__(self, sim: ProducerHost) -> None:
        self._sim = sim
        self._values = 0
        #: value -> the timestamp it was produced with (main topic)
        self.timestamps: dict[bytes, int] = {}
        self.idempotence = Idempotence(sim)

    def start(self, delay_ms: int) -> None:
        """Produce every ``produce_interval_ms`` (jittered) during the safety phase."""
        self._sim.after(delay_ms, self._step)

    def _step(self) -> None:
        sim = self._sim
        if sim.phase != "safety":
            return
        sim.after(sim.jitter(sim.opts.produce_interval_ms), self._step)
        view = sim.view
        topic = TOPIC
        if CHURN_TOPIC in view.partition_counts and sim.rng.random() < 0.25:
            topic = CHURN_TOPIC
        count = view.partition_counts.get(topic, 0)
        if count == 0:
            view.refresh()
            return
        tp = (topic, sim.rng.randrange(count))
        info = view.leader(tp)
        if info is None:
            view.refresh()
            return
        acks = sim.rng.choice(sim.opts.acks)
        self._values += 1
        op: Send | None = None
        stamp: Stamp | None = None
        if topic == TOPIC:
            value = f"v{self._values}".encode()
            op = sim.history.send(tp, value, acks)
            self.timestamps[value] = sim.clock.wall_ms()
            if acks == ACKS_ALL:
                stamp = self.idempotence.stamp(tp)
        else:
            value = f"c{sim.now_ms}:{self._values}".encode()  # tagged with its send time
        producer_id, epoch, sequence = stamp or (-1, -1, -1)
        body = m.ProduceRequest(
            acks=acks,
            timeout_ms=sim.opts.produce_timeout_ms,
            topic_data=[
                m.TopicProduceData(
                    name=tp[0],
                    partition_data=[
                        m.PartitionProduceData(
                            index=tp[1],
                            records=encode_batch(
                                [value],
                                base_timestamp=sim.clock.wall_ms(),
                                producer_id=producer_id,
                                producer_epoch=epoch,
                                base_sequence=sequence,
                            ),
                        )
                    ],
                )
            ],
        )
        sim.rpc.call(
            PRODUCER_NODE,
            info.leader,
            body,
            lambda answer: self._on_answer(op, answer, tp, stamp),
            client_id="sim-producer",
            timeout_ms=sim.opts.client_timeout_ms,
            duplicable=stamp is not None,  # plain sends are attempted once
        )

    def _on_answer(
        self, op: Send | None, body: Any, tp: tuple[str, int], stamp: Stamp | None
    ) -> None:
        sim = self._sim
        if stamp is not None:
            answered = isinstance(body, m.ProduceResponse)
            code = (
                code_of(body.responses[0].partition_responses[0].error_code) if answered else None
            )
            self.idempotence.answered(tp, stamp, code)
        if not isinstance(body, m.ProduceResponse):
            sim.view.refresh()
            if op is not None and op.status == "pending":
                op.status = "info"  # no answer: the outcome is unknown
            return
        part = body.responses[0].partition_responses[0]
        error = code_of(part.error_code)
        if error in REFRESH_ERRORS:
            sim.view.refresh()
        if op is None or op.status != "pending":
            return
        if error is ErrorCode.NONE:
            op.status, op.offset = "ok", part.base_offset
            if op.acks == ACKS_ALL:
                for problem in sim.checker.on_acked(op.tp, op.offset, op.value):
                    sim.violation(problem)
        elif error in DEFINITE_FAILURES:
            op.status = "fail"
        else:
            op.status = "info"


class ProbeHost(SimCore, Protocol):
    """What the probes use of the simulation."""

    @property
    def rpc(self) -> Rpc:
        """The clients' wire."""

    @property
    def clock(self) -> Clock:
        """The simulation's clock (timestamps to look up)."""

    @property
    def view(self) -> ClientMetadataCache:
        """The clients' metadata."""

    @property
    def checker(self) -> InvariantChecker:
        """The invariant checker (its acknowledged records, and the HWs answered)."""

    @property
    def producer(self) -> UniqueValueProducer:
        """The producer (the timestamps it produced with)."""


class Probes:
    """ListOffsets and DescribeConfigs checks (see the module docstring)."""

    def __init__(self, sim: ProbeHost) -> None:
        self._sim = sim

    def start(self, delay_ms: int) -> None:
        """Probe every ``probe_interval_ms`` (jittered) while the run lasts."""
        self._sim.after(delay_ms, self._step)

    def _step(self) -> None:
        sim = self._sim
        sim.after(sim.jitter(sim.opts.probe_interval_ms), self._step)
        count = sim.view.partition_counts.get(TOPIC, 0)
        if count == 0:
            return
        tp = (TOPIC, sim.rng.randrange(count))
        kind = sim.rng.choice(("latest", "earliest", "time", "time", "configs"))
        if kind == "configs":
            self._describe_configs()
            return
        info = sim.view.leader(tp)
        if info is None:
            return
        timestamp = {"latest": m.LATEST_TIMESTAMP, "earliest": m.EARLIEST_TIMESTAMP}.get(
            kind, sim.clock.wall_ms() - sim.rng.randint(0, max(0, sim.now_ms))
        )
        body = m.ListOffsetsRequest(
            replica_id=-1,
            isolation_level=0,
            topics=[
                m.ListOffsetsTopic(
                    name=TOPIC,
                    partitions=[
                        m.ListOffsetsPartition(
                            partition_index=tp[1],
                            current_leader_epoch=info.leader_epoch,
                            timestamp=timestamp,
                        )
                    ],
                )
            ],
        )
        sim.rpc.call(
            PROBE_NODE,
            info.leader,
            body,
            lambda answer: self._on_offsets(tp, kind, timestamp, answer),
            client_id="sim-probe",
            timeout_ms=sim.opts.request_timeout_ms,
        )

    def _on_offsets(self, tp: tuple[str, int], kind: str, timestamp: int, body: Any) -> None:
        sim = self._sim
        if not isinstance(body, m.ListOffsetsResponse):
            return
        part = body.topics[0].partitions[0]
        error = code_of(part.error_code)
        if error in REFRESH_ERRORS:
            sim.view.refresh()
        if error is not ErrorCode.NONE:
            return
        if kind == "latest":
            for problem in sim.checker.on_consumer_hw(tp, part.offset, client=PROBE_NODE):
                sim.violation(f"{problem} (ListOffsets latest)")
        elif kind == "earliest" and part.offset != 0:
            sim.violation(f"log-start-moved: {tp} earliest offset {part.offset}, expected 0")
        elif kind == "time" and part.offset >= 0:
            self._check_time_answer(tp, timestamp, part.offset, part.timestamp)

    def _check_time_answer(
        self, tp: tuple[str, int], timestamp: int, offset: int, found_ms: int
    ) -> None:
        sim = self._sim
        if found_ms < timestamp:
            sim.violation(
                f"offset-for-time: {tp} asked for {timestamp} ms, got offset {offset} at "
                f"{found_ms} ms"
            )
        value = sim.checker.acked.get(tp, {}).get(offset)
        produced_ms = None if value is None else sim.producer.timestamps.get(value)
        if produced_ms is not None and produced_ms != found_ms:
            sim.violation(
                f"offset-for-time: {tp} offset {offset} answered with timestamp {found_ms} ms, "
                f"produced at {produced_ms} ms"
            )

    def _describe_configs(self) -> None:
        sim = self._sim
        body = m.DescribeConfigsRequest(
            resources=[
                m.DescribeConfigsResource(
                    resource_type=m.RESOURCE_TOPIC,
                    resource_name=TOPIC,
                    configuration_keys=["min.insync.replicas"],
                )
            ],
            include_synonyms=False,
            include_documentation=False,
        )
        sim.rpc.call(
            PROBE_NODE,
            sim.rng.randint(1, sim.opts.brokers),
            body,
            self._on_configs,
            client_id="sim-admin-reader",
            timeout_ms=sim.opts.request_timeout_ms,
        )

    def _on_configs(self, body: Any) -> None:
        sim = self._sim
        if not isinstance(body, m.DescribeConfigsResponse) or not body.results:
            return
        result = body.results[0]
        if code_of(result.error_code) is not ErrorCode.NONE:
            return
        values = {c.name: c.value for c in result.configs}
        expected = str(sim.opts.min_isr) if sim.opts.min_isr_in_topic else None
        if expected is not None and values.get("min.insync.replicas") != expected:
            sim.violation(
                f"config-mismatch: {TOPIC} min.insync.replicas is "
                f"{values.get('min.insync.replicas')!r}, created with {expected}"
            )
