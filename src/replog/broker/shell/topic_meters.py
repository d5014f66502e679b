"""Kafka's BrokerTopicMetrics meters as Prometheus counters, for all topics and per topic.

Kafka keeps each meter twice: ``kafka.server:type=BrokerTopicMetrics,name=BytesInPerSec``
(every topic) and the same with ``topic=T``. Prometheus' JMX exporter turns both into one
family, so one scrape shows, for each meter of ``METERS``::

    kafka_server_brokertopicmetrics_bytesin_total 1234.0
    kafka_server_brokertopicmetrics_bytesin_total{topic="orders"} 1000.0
    kafka_server_brokertopicmetrics_bytesin_total{topic="audit"} 234.0

(sum either the unlabelled series or the ``topic`` ones, never both). ``rate()`` gives Kafka's
per-second meters. A topic's series exist only while the topic does: every scrape first asks
the broker's loop which topics its metadata holds and drops the others, so a deleted topic's
series disappear and a produce to a name that is not a topic never makes one (cardinality
stays that of the cluster's topics).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import threading
from collections.abc import Callable, Collection, Iterator, Mapping
from typing import TypeVar

from prometheus_client.core import CounterMetricFamily
from prometheus_client.registry import Collector

from replog.clock import SYSTEM_CLOCK, Clock

__all__ = ["BYTES_IN", "BYTES_OUT", "MESSAGES_IN", "METERS", "TopicMeters", "read_on_loop"]

_log = logging.getLogger(__name__)
_T = TypeVar("_T")

BYTES_IN = "kafka_server_brokertopicmetrics_bytesin"
BYTES_OUT = "kafka_server_brokertopicmetrics_bytesout"
MESSAGES_IN = "kafka_server_brokertopicmetrics_messagesin"

#: counter name (without ``_total``) -> help
METERS: Mapping[str, str] = {
    BYTES_IN: "record batch bytes received in Produce requests",
    BYTES_OUT: "record bytes sent to consumers (replication excluded)",
    MESSAGES_IN: "records received in Produce requests (MessagesInPerSec)",
}

_TOPIC = "topic"


def read_on_loop(
    loop: asyncio.AbstractEventLoop, read: Callable[[], _T], timeout_s: float
) -> _T | None:
    """``read()`` run on ``loop`` (the broker's state belongs to that thread), from a scrape's
    thread; None (logged) if the loop does not answer within ``timeout_s``."""

    async def on_loop() -> _T:
        return read()

    future = asyncio.run_coroutine_threadsafe(on_loop(), loop)
    try:
        return future.result(timeout=timeout_s)
    except concurrent.futures.TimeoutError:
        future.cancel()
        _log.warning("metrics: the broker's loop did not answer in %s s", timeout_s)
        return None


class TopicMeters(Collector):
    """The counters of ``METERS``: ``add`` counts (the broker's loop), a scrape reads (the HTTP
    server's thread), a lock between them. ``live_topics``, if set, names the topics that exist
    (run on the broker's loop at each scrape). Each series has its ``_created`` sample, as a
    ``prometheus_client`` counter's: when the meters (a topic's: its first count) started."""

    def __init__(self, clock: Clock = SYSTEM_CLOCK) -> None:
        self._clock = clock
        self._lock = threading.Lock()
        self._created_s = clock.wall_ms() / 1000
        self._totals: dict[str, float] = dict.fromkeys(METERS, 0.0)
        #: meter -> topic -> (count, created in s since the epoch)
        self._by_topic: dict[str, dict[str, tuple[float, float]]] = {name: {} for name in METERS}
        self.live_topics: Callable[[], Collection[str] | None] | None = None

    def add(self, name: str, amounts: Mapping[str | None, int]) -> None:
        """Count ``amounts`` (topic -> bytes or records) on meter ``name``, in the all-topics
        series and each topic's (None: no known topic, the all-topics series only)."""
        now_s = self._clock.wall_ms() / 1000
        with self._lock:
            self._totals[name] += sum(amounts.values())
            topics = self._by_topic[name]
            for topic, amount in amounts.items():
                if topic is not None:
                    count, created_s = topics.get(topic, (0.0, now_s))
                    topics[topic] = (count + amount, created_s)

    def total(self, name: str) -> float:
        """Meter ``name``'s all-topics count."""
        with self._lock:
            return self._totals[name]

    def retain(self, topics: Collection[str]) -> None:
        """Drop the series of every topic not in ``topics`` (all-topics counts stay)."""
        keep = set(topics)
        with self._lock:
            for by_topic in self._by_topic.values():
                for gone in [t for t in by_topic if t not in keep]:
                    del by_topic[gone]

    def describe(self) -> Iterator[CounterMetricFamily]:
        """The families' names, without reading anything."""
        for name, text in METERS.items():
            yield CounterMetricFamily(name, text, labels=[_TOPIC])

    def collect(self) -> Iterator[CounterMetricFamily]:
        live = self.live_topics() if self.live_topics is not None else None
        if live is not None:
            self.retain(live)
        with self._lock:
            totals = dict(self._totals)
            by_topic = {name: dict(topics) for name, topics in self._by_topic.items()}
        for name, text in METERS.items():
            family = CounterMetricFamily(name, text, labels=[_TOPIC])
            family.add_metric([], totals[name], created=self._created_s)  # all topics: no label
            for topic, (amount, created_s) in sorted(by_topic[name].items()):
                family.add_metric([topic], amount, created=created_s)
            yield family
