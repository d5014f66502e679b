"""A broker's Prometheus endpoint (opt-in: ``BrokerConfig.metrics_port``), with Kafka's key
metrics under the names Prometheus' JMX exporter gives them (lower case, ``_`` for the JMX
separators, counters ending in ``_total``):

- gauges, read from the broker's state at scrape time (on the broker's event loop):
  ``kafka_server_replicamanager_underreplicatedpartitions`` (partitions this broker leads whose
  ISR is smaller than their replica set), ``..._underminisrpartitioncount`` (ISR below
  min.insync.replicas), ``..._partitioncount``, ``..._leadercount``,
  ``kafka_controller_kafkacontroller_activecontrollercount`` (1 on the active controller) and
  ``..._offlinepartitionscount`` (partitions without a leader; reported by the active
  controller only, as in Kafka, so a cluster-wide sum counts each once),
  ``kafka_server_delayedoperationpurgatory_purgatorysize{delayedOperation="Produce"}`` (acks=all
  produces waiting for the ISR) and ``kafka_server_replicafetchermanager_maxlag{clientId=
  "Replica"}`` (the largest lag, in offsets, of the partitions this broker follows: the
  leader's HW minus this replica's LEO, after the last fetch);
- counters: ``..._isrshrinks_total`` / ``..._isrexpands_total`` (committed ISR changes of the
  partitions this broker leads, as it applies them from the metadata: its own AlterPartition
  proposals and the controller's removals of fenced brokers alike) and
  ``kafka_controller_controllerstats_leaderelections_total`` (leaders this broker chose as
  the controller, new partitions included; from its state-change records),
  ``..._uncleanleaderelections_total`` (those elected from outside the ISR, Kafka's
  UncleanLeaderElectionsPerSec): ``rate()`` gives Kafka's per-second meters;
- Kafka's BrokerTopicMetrics, each as an all-topics series and one per topic (label
  ``topic``, dropped with the topic; ``replog.broker.shell.topic_meters``):
  ``kafka_server_brokertopicmetrics_bytesin_total`` (record batch bytes received in Produce
  requests, BytesInPerSec), ``..._messagesin_total`` (the records in them, MessagesInPerSec)
  and ``..._bytesout_total`` (record bytes sent to consumers, not followers, BytesOutPerSec);
- the replication quotas' measured rates (KIP-73; ``replog.broker.driver.replication_throttle``), in
  bytes/s over the quota windows, as Kafka's ``kafka.server:type=LeaderReplication,
  name=byte-rate`` and ``type=FollowerReplication``: ``kafka_server_leaderreplication_byte_rate``
  (bytes this broker sent to followers for the partitions of its leader throttled set) and
  ``kafka_server_followerreplication_byte_rate`` (bytes it fetched as a follower for those of
  its follower set); both gauges;
- the histogram ``kafka_log_logflushstats_logflushrateandtimems`` (time of each round of log
  flushes, ms: Kafka's LogFlushRateAndTimeMs);
- per API (label ``request``, Kafka's API name): ``kafka_network_requestmetrics_requests_total``
  and the histogram ``kafka_network_requestmetrics_totaltimems`` (receipt to response, ms).

Each broker has its own registry (several brokers share a process in ``Cluster.local``).
"""

from __future__ import annotations

import asyncio
import logging
import os
import threading
from collections.abc import Callable, Collection, Iterator, Mapping
from wsgiref.simple_server import WSGIServer

import attrs
from prometheus_client import CollectorRegistry, Counter, Histogram, start_http_server
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from replog.broker.driver import BrokerDriver
from replog.broker.shell.server import Response
from replog.broker.shell.topic_meters import (
    BYTES_IN,
    BYTES_OUT,
    MESSAGES_IN,
    TopicMeters,
    read_on_loop,
)
from replog.clock import SYSTEM_CLOCK, Clock
from replog.election.partition_change import UNCLEAN_ELECTION_NOTE
from replog.errors import CorruptRecordError
from replog.log.log import FetchSlice
from replog.log.manager import parse_partition_dir
from replog.log.records import iter_batches
from replog.metadata.types import NO_LEADER, PartitionState
from replog.protocol.messages import APIS, FetchRequest, ProduceRequest
from replog.protocol.primitives import RecordsRef
from replog.protocol.schema import Message
from replog.state_change import Phase, Role, StateChange, StateChangeKind
from replog.topics import TopicPartitionLike

__all__ = ["GAUGES", "BrokerMetrics", "gauge_values", "live_topics"]

_log = logging.getLogger(__name__)

#: gauge name -> help; a broker's ``gauge_values`` answers every one
GAUGES: Mapping[str, str] = {
    "kafka_server_replicamanager_underreplicatedpartitions": (
        "partitions led here whose ISR is smaller than their replica set"
    ),
    "kafka_server_replicamanager_underminisrpartitioncount": (
        "partitions led here whose ISR is below min.insync.replicas"
    ),
    "kafka_server_replicamanager_partitioncount": "replicas hosted here",
    "kafka_server_replicamanager_leadercount": "partitions led here",
    "kafka_controller_kafkacontroller_activecontrollercount": "1 on the active controller",
    "kafka_controller_kafkacontroller_offlinepartitionscount": (
        "partitions without a leader (active controller only)"
    ),
    "kafka_server_delayedoperationpurgatory_purgatorysize": (
        "acks=all produces waiting for the ISR (delayedOperation=Produce)"
    ),
    "kafka_server_replicafetchermanager_maxlag": (
        "largest lag in offsets of the partitions followed here (clientId=Replica)"
    ),
    "kafka_server_leaderreplication_byte_rate": (
        "bytes/s sent to followers for the leader-throttled partitions (replication quota)"
    ),
    "kafka_server_followerreplication_byte_rate": (
        "bytes/s fetched as a follower for the follower-throttled partitions (replication quota)"
    ),
}
#: the labels of the gauges that carry one (Kafka's JMX key properties)
_GAUGE_LABELS: Mapping[str, Mapping[str, str]] = {
    "kafka_server_delayedoperationpurgatory_purgatorysize": {"delayedOperation": "Produce"},
    "kafka_server_replicafetchermanager_maxlag": {"clientId": "Replica"},
}

_SCRAPE_TIMEOUT_S = 5.0
_LATENCY_BUCKETS_MS = (1, 2, 5, 10, 25, 50, 100, 250, 500, 1_000, 2_500, 5_000, 10_000, 30_000)


def gauge_values(driver: BrokerDriver | None, now_ms: int) -> dict[str, float]:
    """Every gauge of ``GAUGES`` for the broker ``driver`` runs at ``now_ms`` (zeros before it
    registers). Call on the broker's loop: the replica manager is not thread-safe."""
    values = dict.fromkeys(GAUGES, 0.0)
    rm = None if driver is None else driver.rm_or_none
    if driver is None or rm is None:
        return values
    throttle = driver.replication_throttle
    values["kafka_server_leaderreplication_byte_rate"] = throttle.leader.rate_bytes_per_s(now_ms)
    values["kafka_server_followerreplication_byte_rate"] = throttle.follower.rate_bytes_per_s(
        now_ms
    )
    leading = [p for p in rm.partitions.values() if p.is_leader]
    active = driver.controller.is_controller
    values.update(
        {
            "kafka_server_replicamanager_underreplicatedpartitions": sum(
                len(p.isr) < len(p.assigned) for p in leading
            ),
            "kafka_server_replicamanager_underminisrpartitioncount": sum(
                len(p.isr) < p.effective_min_isr for p in leading
            ),
            "kafka_server_replicamanager_partitioncount": len(rm.partitions),
            "kafka_server_replicamanager_leadercount": len(leading),
            "kafka_controller_kafkacontroller_activecontrollercount": int(active),
            "kafka_controller_kafkacontroller_offlinepartitionscount": (
                sum(state.leader == NO_LEADER for state in rm.image.partitions.values())
                if active
                else 0
            ),
            "kafka_server_delayedoperationpurgatory_purgatorysize": rm.delayed_produces,
            "kafka_server_replicafetchermanager_maxlag": max(
                (
                    lag
                    for tp, lag in rm.follower_lag.items()
                    if tp in rm.partitions and not rm.partitions[tp].is_leader
                ),
                default=0,
            ),
        }
    )
    return values


def live_topics(driver: BrokerDriver | None) -> Collection[str] | None:
    """The topics in the broker's metadata (None before it registers): the per-topic series
    kept. Call on the broker's loop."""
    rm = None if driver is None else driver.rm_or_none
    return None if rm is None else set(rm.image.topics)


def _produced(body: ProduceRequest) -> tuple[dict[str | None, int], dict[str | None, int]]:
    """Per topic, the record batch bytes and the records of a Produce request (records of a
    batch that cannot be parsed are not counted; its bytes are)."""
    size_bytes: dict[str | None, int] = {}
    records: dict[str | None, int] = {}
    for topic in body.topic_data:
        for data in topic.partition_data:
            if not isinstance(data.records, (bytes, bytearray, memoryview)):
                continue
            size_bytes[topic.name] = size_bytes.get(topic.name, 0) + len(data.records)
            try:
                count = sum(header.records_count for _, header in iter_batches(data.records))
            except CorruptRecordError:
                count = 0
            records[topic.name] = records.get(topic.name, 0) + count
    return size_bytes, records


def _fetched(response: Response) -> dict[str | None, int]:
    """Per topic, the record bytes of a Fetch response: each zero-copy slice's topic is that of
    its log's partition directory (None: not one, counted in the all-topics series only)."""
    out: dict[str | None, int] = {}
    for part in response or ():
        if not isinstance(part, RecordsRef):
            continue
        source = part.source
        topic = None
        if isinstance(source, FetchSlice) and source.pieces:
            directory = os.path.basename(os.path.dirname(source.pieces[0].handle.path))
            tp = parse_partition_dir(directory)
            topic = None if tp is None else tp.topic
        out[topic] = out.get(topic, 0) + part.size_bytes
    return out


def _api_name(api_key: int) -> str:
    spec = APIS.get(api_key)
    return spec.info.name if spec is not None else f"api-{api_key}"


class _GaugeCollector(Collector):
    """Reads the gauges on the broker's loop when scraped (the state belongs to that thread)."""

    def __init__(
        self, loop: asyncio.AbstractEventLoop, read: Callable[[], Mapping[str, float]]
    ) -> None:
        self._loop = loop
        self._read = read

    def describe(self) -> Iterator[GaugeMetricFamily]:
        """The gauges' names, without reading them (registering must not wait on the loop)."""
        for name, text in GAUGES.items():
            yield GaugeMetricFamily(name, text)

    def collect(self) -> Iterator[GaugeMetricFamily]:
        values = read_on_loop(self._loop, self._read, _SCRAPE_TIMEOUT_S)
        if values is None:
            return
        for name, text in GAUGES.items():
            labels = _GAUGE_LABELS.get(name)
            if labels is None:
                yield GaugeMetricFamily(name, text, value=values[name])
                continue
            family = GaugeMetricFamily(name, text, labels=list(labels))
            family.add_metric(list(labels.values()), values[name])
            yield family


@attrs.define
class BrokerMetrics:
    """One broker's registry, its counters and the HTTP server that exposes them."""

    registry: CollectorRegistry
    requests: Counter
    request_time_ms: Histogram
    isr_shrinks: Counter
    isr_expands: Counter
    leader_elections: Counter
    unclean_leader_elections: Counter
    topics: TopicMeters
    log_flush_time_ms: Histogram
    broker_id: int
    #: the last state of each partition this broker leads (to tell shrinks from expansions)
    _led: dict[tuple[str, int], PartitionState] = attrs.field(factory=dict)
    _server: WSGIServer | None = None
    _thread: threading.Thread | None = None

    @classmethod
    def create(cls, broker_id: int, clock: Clock = SYSTEM_CLOCK) -> BrokerMetrics:
        """A registry with every counter at zero and no server (``serve`` starts one);
        ``clock`` dates the per-topic series."""
        registry = CollectorRegistry()
        topics = TopicMeters(clock)
        registry.register(topics)
        return cls(
            broker_id=broker_id,
            registry=registry,
            requests=Counter(
                "kafka_network_requestmetrics_requests",
                "requests answered, per API",
                ["request"],
                registry=registry,
            ),
            request_time_ms=Histogram(
                "kafka_network_requestmetrics_totaltimems",
                "time from receipt to response, ms, per API",
                ["request"],
                buckets=_LATENCY_BUCKETS_MS,
                registry=registry,
            ),
            isr_shrinks=Counter(
                "kafka_server_replicamanager_isrshrinks",
                "ISR shrinks this broker proposed as a leader",
                registry=registry,
            ),
            isr_expands=Counter(
                "kafka_server_replicamanager_isrexpands",
                "ISR expansions this broker proposed as a leader",
                registry=registry,
            ),
            leader_elections=Counter(
                "kafka_controller_controllerstats_leaderelections",
                "leaders chosen by this broker as the active controller",
                registry=registry,
            ),
            unclean_leader_elections=Counter(
                "kafka_controller_controllerstats_uncleanleaderelections",
                "leaders this broker, as the controller, chose from outside the ISR",
                registry=registry,
            ),
            topics=topics,
            log_flush_time_ms=Histogram(
                "kafka_log_logflushstats_logflushrateandtimems",
                "time of one round of log flushes, ms",
                buckets=_LATENCY_BUCKETS_MS,
                registry=registry,
            ),
        )

    def serve(
        self,
        host: str,
        port: int,
        loop: asyncio.AbstractEventLoop,
        gauge_values: Callable[[], Mapping[str, float]],
        live_topics: Callable[[], Collection[str] | None],
    ) -> int:
        """Register the gauges (``gauge_values`` runs on ``loop``) and serve ``/metrics`` on
        ``host:port`` (0: a free port) in a daemon thread; returns the bound port. Each scrape
        keeps the per-topic series of the topics ``live_topics`` (run on ``loop``) names."""
        self.registry.register(_GaugeCollector(loop, gauge_values))
        self.topics.live_topics = lambda: read_on_loop(loop, live_topics, _SCRAPE_TIMEOUT_S)
        server, thread = start_http_server(port, addr=host, registry=self.registry)
        self._server, self._thread = server, thread
        return int(server.server_port)

    def on_request(self, api_key: int, time_ms: int) -> None:
        """Count one answered request of ``api_key`` that took ``time_ms``."""
        name = _api_name(api_key)
        self.requests.labels(request=name).inc()
        self.request_time_ms.labels(request=name).observe(time_ms)

    def on_traffic(self, body: Message, response: Response) -> None:
        """Count the record bytes and records of an answered Produce (in) and the record bytes
        of a consumer Fetch (out), for all topics and per topic."""
        if isinstance(body, ProduceRequest):
            size_bytes, records = _produced(body)
            self.topics.add(BYTES_IN, size_bytes)
            self.topics.add(MESSAGES_IN, records)
        elif isinstance(body, FetchRequest) and body.replica_id < 0 and response is not None:
            self.topics.add(BYTES_OUT, _fetched(response))

    def on_log_flush(self, time_ms: int) -> None:
        """Time one round of log flushes."""
        self.log_flush_time_ms.observe(time_ms)

    def on_state_change(self, change: StateChange) -> None:
        """Count the leaders chosen (and those chosen uncleanly) among the broker's state-change
        records."""
        if (
            change.phase is Phase.REQUESTED
            and change.kind is StateChangeKind.BECOME_LEADER
            and change.requester.role is Role.CONTROLLER
        ):
            self.leader_elections.inc()
            if UNCLEAN_ELECTION_NOTE in change.detail:
                self.unclean_leader_elections.inc()

    def on_partition_state(self, tp: TopicPartitionLike, state: PartitionState) -> None:
        """Count a shrink or expansion when a partition this broker leads keeps its leader
        epoch and its ISR gets smaller or larger (a new epoch is an election, not an ISR
        change)."""
        key = (tp[0], tp[1])
        before = self._led.pop(key, None)
        if state.leader != self.broker_id:
            return
        self._led[key] = state
        if before is None or before.leader_epoch != state.leader_epoch:
            return
        if len(state.isr) < len(before.isr):
            self.isr_shrinks.inc()
        elif len(state.isr) > len(before.isr):
            self.isr_expands.inc()

    def close(self) -> None:
        """Stop serving. Idempotent."""
        server, self._server = self._server, None
        if server is not None:
            server.shutdown()
            server.server_close()
        thread, self._thread = self._thread, None
        if thread is not None:
            thread.join(timeout=5)
