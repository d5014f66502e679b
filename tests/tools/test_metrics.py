"""The brokers' Prometheus endpoint (``BrokerConfig.metrics_port``) scraped over HTTP from a
live 3-broker cluster: the values follow a follower being killed and restarted (under-replicated
and offline partitions, ISR shrinks and expands), one broker reports itself the active
controller, and requests are counted and timed per API."""

from __future__ import annotations

import time
import urllib.request
from collections.abc import Callable, Iterator

import pytest
from prometheus_client.parser import text_string_to_metric_families

from replog import Admin, Cluster
from replog.broker.config import BrokerConfig
from replog.broker.metrics import GAUGES
from replog.errors import InvalidConfigError

pytestmark = pytest.mark.timeout(120)

Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


def scrape(port: int) -> Samples:
    """Every sample of ``/metrics`` on ``port``, by (name, labels)."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as answer:
        text = answer.read().decode()
    return {
        (sample.name, frozenset(sample.labels.items())): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def value(samples: Samples, name: str, **labels: str) -> float:
    return samples.get((name, frozenset(labels.items())), 0.0)


def wait_until(check: Callable[[], bool], what: str, timeout_s: float = 30.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not check():
        assert time.monotonic() < deadline, f"not reached in {timeout_s} s: {what}"
        time.sleep(0.1)


@pytest.fixture
def cluster() -> Iterator[Cluster]:
    with Cluster.local(3, metrics_port=0) as c:
        yield c


def port_of(cluster: Cluster, broker_id: int) -> int:
    port = cluster.brokers[broker_id].metrics_port
    assert port is not None
    return port


def test_metrics_follow_a_killed_and_restarted_follower(cluster: Cluster) -> None:
    ports = {b: port_of(cluster, b) for b in (1, 2, 3)}
    for b in ports:
        assert set(GAUGES) <= {name for name, _ in scrape(ports[b])}
    controllers = {
        b: value(scrape(p), "kafka_controller_kafkacontroller_activecontrollercount")
        for b, p in ports.items()
    }
    assert sorted(controllers.values()) == [0.0, 0.0, 1.0]
    controller = next(b for b, count in controllers.items() if count == 1.0)
    leader, victim = [b for b in (1, 2, 3) if b != controller]  # the victim: a follower
    with Admin(cluster.bootstrap) as admin:
        admin.create_topics("watched", 1, 3, replica_assignment=[[leader, controller, victim]])
        admin.create_topics("alone", 1, 1, replica_assignment=[[victim]])
    under = "kafka_server_replicamanager_underreplicatedpartitions"
    offline = "kafka_controller_kafkacontroller_offlinepartitionscount"
    wait_until(
        lambda: value(scrape(ports[leader]), "kafka_server_replicamanager_leadercount") >= 1,
        "the leader leads watched-0",
    )
    assert value(scrape(ports[leader]), under) == 0
    assert value(scrape(ports[controller]), offline) == 0
    elections = value(
        scrape(ports[controller]), "kafka_controller_controllerstats_leaderelections_total"
    )
    assert elections >= 2  # watched-0 and alone-0 got their first leaders

    cluster.kill(victim)
    wait_until(lambda: value(scrape(ports[leader]), under) == 1, "watched-0 under-replicated")
    assert value(scrape(ports[leader]), "kafka_server_replicamanager_isrshrinks_total") >= 1
    wait_until(lambda: value(scrape(ports[controller]), offline) == 1, "alone-0 offline")

    cluster.restart(victim)
    ports[victim] = port_of(cluster, victim)
    wait_until(lambda: value(scrape(ports[leader]), under) == 0, "watched-0 back in sync")
    assert value(scrape(ports[leader]), "kafka_server_replicamanager_isrexpands_total") >= 1
    wait_until(lambda: value(scrape(ports[controller]), offline) == 0, "alone-0 online again")


def test_requests_are_counted_and_timed_per_api(cluster: Cluster) -> None:
    with Admin(cluster.bootstrap) as admin:
        admin.create_topics("counted", 1, 3)
        admin.list_topics()
    samples = [scrape(port_of(cluster, b)) for b in (1, 2, 3)]

    def total(name: str, request: str) -> float:
        return sum(value(s, name, request=request) for s in samples)

    assert total("kafka_network_requestmetrics_requests_total", "CreateTopics") == 1
    metadata = total("kafka_network_requestmetrics_requests_total", "Metadata")
    assert metadata >= 2
    assert total("kafka_network_requestmetrics_totaltimems_count", "Metadata") == metadata
    buckets = [
        v
        for s in samples
        for (name, labels), v in s.items()
        if name == "kafka_network_requestmetrics_totaltimems_bucket"
        and ("request", "Metadata") in labels
        and ("le", "+Inf") in labels
    ]
    assert sum(buckets) == metadata


def test_metrics_are_off_unless_a_port_is_given() -> None:
    with Cluster.local(1) as cluster:
        assert cluster.brokers[1].metrics_port is None
    with pytest.raises(InvalidConfigError, match="metrics_port"):
        BrokerConfig(broker_id=1, log_dirs=("/tmp/x",), metrics_port=70_000)
