"""replog as the Kafka of a test suite: a pytest plugin.

Installed with replog (the ``pytest11`` entry point ``replog``), so every pytest run of a
project that has replog installed can use its fixtures; nothing runs until a test asks:

- ``replog_cluster`` (session scope): a ``Cluster.local`` in test mode (groups form at once,
  a one-partition ``__consumer_offsets``; see ``replog.broker.shell.cluster``), one per
  pytest-xdist worker, ``--replog-brokers N`` brokers (1 by default);
- ``kafka_bootstrap``: its bootstrap address, ``"127.0.0.1:PORT,..."``, for any Kafka client;
- ``replog_topic``: a fresh topic per test, uniquely named after the test, deleted after it;
  ``@pytest.mark.replog_topic(partitions=3, replication_factor=1, config={...})`` shapes it
  (replication defaults to the cluster's size, at most 3);
- ``replog_cluster_factory``: ``make(n=1, **overrides)`` starts another test-mode cluster,
  closed after the test;
- ``kafka_clients``: clients of the installed Kafka libraries already pointed at the session
  cluster and closed after the test -- ``kafka_python_producer(**config)``,
  ``kafka_python_consumer(*topics, **config)``, ``confluent_producer(config)`` (flushed) and
  ``confluent_consumer(config)``, and ``aiokafka_producer(**config)`` /
  ``aiokafka_consumer(*topics, **config)`` (call them inside the test's coroutine and use them
  as ``async with``: aiokafka's clients belong to the loop that runs them); a library that is
  not installed skips the test that asks for it;
- ``replog_faults``: fault injection on the session cluster (``replog.testing.faults``: injected
  request errors, latency, cut clients or brokers, paused or killed brokers, failed fsyncs, a
  full disk, leadership moves, request tracking), every fault undone after the test and every
  broker it took down restarted.

    def test_round_trip(kafka_bootstrap, replog_topic):
        producer = KafkaProducer(bootstrap_servers=kafka_bootstrap)
        producer.send(replog_topic, b"hello").get(timeout=10)
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from replog.broker.shell.cluster import Cluster
    from replog.testing.faults import ClusterFaults

_topics = itertools.count(1)
_UNSAFE = re.compile(r"[^a-zA-Z0-9._-]+")


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("replog", "replog: an in-process Kafka-compatible cluster")
    group.addoption(
        "--replog-brokers",
        type=int,
        default=1,
        help="brokers of the replog_cluster fixture's cluster (default 1)",
    )


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "replog_topic(partitions=1, replication_factor=None, config=None): the shape of the "
        "replog_topic fixture's topic",
    )


@pytest.fixture(scope="session")
def replog_cluster(request: pytest.FixtureRequest) -> Iterator[Cluster]:
    """One test-mode ``Cluster.local`` for the session (module docstring)."""
    from replog.broker.shell.cluster import Cluster

    brokers = int(request.config.getoption("replog_brokers"))
    if brokers < 1:
        raise pytest.UsageError(f"--replog-brokers must be at least 1, got {brokers}")
    with Cluster.local(brokers, test_mode=True) as cluster:
        yield cluster


@pytest.fixture(scope="session")
def kafka_bootstrap(replog_cluster: Cluster) -> str:
    """The session cluster's bootstrap address."""
    return replog_cluster.bootstrap


@pytest.fixture
def replog_topic(request: pytest.FixtureRequest, replog_cluster: Cluster) -> Iterator[str]:
    """A fresh topic for this test (module docstring), deleted afterwards."""
    from replog.client.admin import Admin

    marker = request.node.get_closest_marker("replog_topic")
    shape: dict[str, Any] = dict(marker.kwargs) if marker is not None else {}
    unknown = sorted(set(shape) - {"partitions", "replication_factor", "config"})
    if unknown:
        raise pytest.UsageError(f"replog_topic marker: unknown arguments {unknown}")
    replication = shape.get("replication_factor") or min(3, len(replog_cluster.brokers))
    name = f"{_UNSAFE.sub('-', request.node.name)[:200]}-{next(_topics)}"
    with Admin(replog_cluster.bootstrap) as admin:
        admin.create_topics(name, shape.get("partitions", 1), replication, shape.get("config"))
    yield name
    with Admin(replog_cluster.bootstrap) as admin:
        admin.delete_topics([name])


class KafkaClients:
    """The ``kafka_clients`` fixture (module docstring)."""

    def __init__(self, bootstrap: str) -> None:
        self.bootstrap = bootstrap
        self._closers: list[Callable[[], Any]] = []

    def kafka_python_producer(self, **config: Any) -> Any:
        kafka = pytest.importorskip("kafka")
        return self._keep(kafka.KafkaProducer(bootstrap_servers=self.bootstrap, **config))

    def kafka_python_consumer(self, *topics: str, **config: Any) -> Any:
        kafka = pytest.importorskip("kafka")
        consumer = kafka.KafkaConsumer(*topics, bootstrap_servers=self.bootstrap, **config)
        return self._keep(consumer)

    def confluent_producer(self, config: dict[str, Any] | None = None) -> Any:
        confluent = pytest.importorskip("confluent_kafka")
        producer = confluent.Producer({"bootstrap.servers": self.bootstrap, **(config or {})})
        self._closers.append(lambda: producer.flush(10))
        return producer

    def confluent_consumer(self, config: dict[str, Any] | None = None) -> Any:
        confluent = pytest.importorskip("confluent_kafka")
        return self._keep(
            confluent.Consumer({"bootstrap.servers": self.bootstrap, **(config or {})})
        )

    def aiokafka_producer(self, **config: Any) -> Any:
        aiokafka = pytest.importorskip("aiokafka")
        return aiokafka.AIOKafkaProducer(bootstrap_servers=self.bootstrap, **config)

    def aiokafka_consumer(self, *topics: str, **config: Any) -> Any:
        aiokafka = pytest.importorskip("aiokafka")
        return aiokafka.AIOKafkaConsumer(*topics, bootstrap_servers=self.bootstrap, **config)

    def close(self) -> None:
        """Close every client made, newest first (errors of one do not stop the others)."""
        for closer in reversed(self._closers):
            try:
                closer()
            except Exception:  # a client already closed by the test, or a broken one
                pass
        self._closers.clear()

    def _keep(self, client: Any) -> Any:
        self._closers.append(client.close)
        return client


@pytest.fixture
def kafka_clients(kafka_bootstrap: str) -> Iterator[KafkaClients]:
    """Kafka clients pointed at the session cluster, closed after the test."""
    clients = KafkaClients(kafka_bootstrap)
    yield clients
    clients.close()


@pytest.fixture
def replog_faults(replog_cluster: Cluster) -> Iterator[ClusterFaults]:
    """Faults for the session cluster (``replog.testing.faults``), all healed afterwards."""
    from replog.testing.faults import ClusterFaults

    faults = ClusterFaults(replog_cluster)
    yield faults
    faults.heal()


@pytest.fixture
def replog_cluster_factory() -> Iterator[Callable[..., Cluster]]:
    """``make(n=1, **overrides)``: another test-mode cluster, closed after the test."""
    from replog.broker.shell.cluster import Cluster

    made: list[Cluster] = []

    def make(n: int = 1, **overrides: Any) -> Cluster:
        cluster = Cluster.local(n, test_mode=True, **overrides)
        made.append(cluster)
        return cluster

    yield make
    for cluster in reversed(made):
        cluster.close()
