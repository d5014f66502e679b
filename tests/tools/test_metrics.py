"""The brokers' Prometheus endpoint (``BrokerConfig.metrics_port``) scraped over HTTP from a
live 3-broker cluster: the values follow a follower being killed and restarted (under-replicated
and offline partitions, ISR shrinks and expands, the produce purgatory, the restarted follower's
max lag, an unclean election), one broker reports itself the active controller, requests are
counted and timed per API, bytes in and out follow what kafka-python produced and consumed, and
log flushes are timed."""

from __future__ import annotations

import time
import urllib.request
import warnings
from collections.abc import Callable, Iterator

import pytest
from prometheus_client.parser import text_string_to_metric_families

from replog import Admin, Cluster
from replog.broker.config import BrokerConfig
from replog.broker.shell.metrics import GAUGES
from replog.broker.shell.topic_meters import BYTES_IN, TopicMeters
from replog.clock import ManualClock
from replog.errors import InvalidConfigError
from tests.waiting import eventually

with warnings.catch_warnings():
    warnings.filterwarnings("ignore", ".*(read_text|open_text) is deprecated", DeprecationWarning)
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition

pytestmark = [
    pytest.mark.system,
    pytest.mark.timeout(180),
    pytest.mark.filterwarnings("ignore:.*(read_text|open_text) is deprecated:DeprecationWarning"),
]

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
    eventually(check, what=what, timeout_s=timeout_s)


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


def test_bytes_in_and_out_and_log_flushes_follow_traffic(cluster: Cluster) -> None:
    """Bytes in grow by what kafka-python produced, bytes out by what it consumed (followers'
    replication is not counted), and every round of fsyncs is timed."""
    leader, follower = 1, 2
    with Admin(cluster.bootstrap) as admin:
        admin.create_topics("traffic", 1, 2, replica_assignment=[[leader, follower]])
    ports = {b: port_of(cluster, b) for b in (leader, follower)}
    bytes_in = "kafka_server_brokertopicmetrics_bytesin_total"
    bytes_out = "kafka_server_brokertopicmetrics_bytesout_total"
    flushes = "kafka_log_logflushstats_logflushrateandtimems_count"
    before = {b: scrape(p) for b, p in ports.items()}
    producer = KafkaProducer(bootstrap_servers=cluster.bootstrap, acks="all")
    try:
        for _ in range(20):
            producer.send("traffic", value=b"x" * 1000, partition=0)
        producer.flush(timeout=30)
    finally:
        producer.close()
    after = scrape(ports[leader])
    grown_in = value(after, bytes_in) - value(before[leader], bytes_in)
    assert 20 * 1000 <= grown_in < 20 * 1000 + 20 * 200  # the records plus batch overhead
    assert value(after, flushes) > value(before[leader], flushes)
    assert value(scrape(ports[follower]), bytes_in) == value(before[follower], bytes_in)
    assert value(after, bytes_out) == value(before[leader], bytes_out)  # followers not counted
    consumer = KafkaConsumer(bootstrap_servers=cluster.bootstrap, auto_offset_reset="earliest")
    try:
        consumer.assign([TopicPartition("traffic", 0)])
        read = 0
        deadline = time.monotonic() + 30
        while read < 20 and time.monotonic() < deadline:
            read += sum(len(r) for r in consumer.poll(timeout_ms=500).values())
        assert read == 20
    finally:
        consumer.close()
    assert value(scrape(ports[leader]), bytes_out) - value(before[leader], bytes_out) >= 20 * 1000


def test_purgatory_max_lag_and_unclean_elections_follow_a_killed_follower() -> None:
    """An acks=all produce waits in the leader's purgatory while a dead follower is still in
    the ISR; a restarted follower reports its lag while it catches up (one small batch per
    fetch); an unclean election is counted by the controller."""
    settings = {"metrics_port": 0, "replica_lag_ms_max": 3_000, "replica_fetch_bytes_max": 1024}
    with Cluster.local(3, **settings) as cluster:
        ports = {b: port_of(cluster, b) for b in (1, 2, 3)}
        controller = next(
            b
            for b, p in ports.items()
            if value(scrape(p), "kafka_controller_kafkacontroller_activecontrollercount") == 1
        )
        leader, victim = [b for b in (1, 2, 3) if b != controller]
        with Admin(cluster.bootstrap) as admin:
            admin.create_topics(
                "lagged",
                1,
                2,
                {"unclean.leader.election.enable": "true"},
                replica_assignment=[[leader, victim]],
            )
        under = "kafka_server_replicamanager_underreplicatedpartitions"
        purgatory = "kafka_server_delayedoperationpurgatory_purgatorysize"
        max_lag = "kafka_server_replicafetchermanager_maxlag"
        unclean = "kafka_controller_controllerstats_uncleanleaderelections_total"
        wait_until(
            lambda: value(scrape(ports[leader]), "kafka_server_replicamanager_leadercount") >= 1,
            "the leader leads lagged-0",
        )
        assert value(scrape(ports[controller]), unclean) == 0

        cluster.kill(victim)
        producer = KafkaProducer(
            bootstrap_servers=cluster.bootstrap, acks="all", batch_size=1024, linger_ms=0
        )
        try:
            waiting = producer.send("lagged", value=b"w" * 100, partition=0)
            wait_until(
                lambda: value(scrape(ports[leader]), purgatory, delayedOperation="Produce") == 1,
                "the acks=all produce waits for the dead follower",
            )
            waiting.get(timeout=30)  # answered once the ISR shrinks
            assert value(scrape(ports[leader]), under) == 1
            assert value(scrape(ports[leader]), purgatory, delayedOperation="Produce") == 0
            for _ in range(3000):
                producer.send("lagged", value=b"r" * 900, partition=0)
            producer.flush(timeout=60)
        finally:
            producer.close()

        cluster.restart(victim)
        ports[victim] = port_of(cluster, victim)
        lags: list[float] = []

        def caught_up() -> bool:
            lags.append(value(scrape(ports[victim]), max_lag, clientId="Replica"))
            return value(scrape(ports[leader]), under) == 0

        wait_until(caught_up, "the follower catches up and rejoins the ISR", timeout_s=60)
        assert max(lags) > 0, lags  # it lagged while catching up
        assert value(scrape(ports[victim]), max_lag, clientId="Replica") == 0

        cluster.kill(victim)
        wait_until(lambda: value(scrape(ports[leader]), under) == 1, "the ISR shrinks again")
        cluster.kill(leader)
        cluster.restart(victim)
        ports[victim] = port_of(cluster, victim)
        wait_until(
            lambda: value(scrape(ports[controller]), unclean) == 1,
            "the out-of-sync follower is elected uncleanly",
        )


def produce(cluster: Cluster, topic: str, count: int, size_bytes: int = 1000) -> None:
    producer = KafkaProducer(bootstrap_servers=cluster.bootstrap, acks="all")
    try:
        for _ in range(count):
            producer.send(topic, value=b"x" * size_bytes, partition=0)
        producer.flush(timeout=30)
    finally:
        producer.close()


def consume(cluster: Cluster, topic: str, count: int) -> None:
    consumer = KafkaConsumer(bootstrap_servers=cluster.bootstrap, auto_offset_reset="earliest")
    try:
        consumer.assign([TopicPartition(topic, 0)])
        read = 0
        deadline = time.monotonic() + 30
        while read < count and time.monotonic() < deadline:
            read += sum(len(r) for r in consumer.poll(timeout_ms=500).values())
        assert read == count
    finally:
        consumer.close()


def test_per_topic_series_follow_their_topic_and_go_with_it(cluster: Cluster) -> None:
    """Bytes in, messages in and bytes out get a ``topic`` series beside the all-topics one: a
    topic's grow with its own traffic only, and a deleted topic's series disappear."""
    leader, follower = 1, 2
    with Admin(cluster.bootstrap) as admin:
        for name in ("hot", "cold"):
            admin.create_topics(name, 1, 2, replica_assignment=[[leader, follower]])
    port = port_of(cluster, leader)
    bytes_in = "kafka_server_brokertopicmetrics_bytesin_total"
    messages_in = "kafka_server_brokertopicmetrics_messagesin_total"
    bytes_out = "kafka_server_brokertopicmetrics_bytesout_total"
    produce(cluster, "cold", 1)
    before = scrape(port)
    assert value(before, messages_in, topic="cold") == 1
    produce(cluster, "hot", 20)
    consume(cluster, "hot", 20)
    after = scrape(port)
    grown_in = value(after, bytes_in, topic="hot") - value(before, bytes_in, topic="hot")
    assert 20 * 1000 <= grown_in < 20 * 1000 + 20 * 200
    assert value(after, bytes_in) - value(before, bytes_in) == grown_in  # all topics: the same
    assert value(after, messages_in, topic="hot") == 20
    assert value(after, messages_in) - value(before, messages_in) == 20
    assert value(after, bytes_out, topic="hot") >= 20 * 1000
    for name in (bytes_in, messages_in, bytes_out):
        assert value(after, name, topic="cold") == value(before, name, topic="cold"), name
    assert (bytes_out, frozenset({("topic", "cold")})) not in after  # never consumed
    assert value(scrape(port_of(cluster, follower)), bytes_in, topic="hot") == 0

    with Admin(cluster.bootstrap) as admin:
        admin.delete_topics(["hot"])
    hot = frozenset({("topic", "hot")})
    wait_until(
        lambda: all((name, hot) not in scrape(port) for name in (bytes_in, messages_in, bytes_out)),
        "the deleted topic's series disappear",
    )
    gone = scrape(port)
    assert value(gone, messages_in, topic="cold") == 1  # the others stay
    assert value(gone, messages_in) >= value(after, messages_in)  # so do the all-topics counts


def test_replication_byte_rates_count_the_throttled_topics_only(cluster: Cluster) -> None:
    """Kafka's LeaderReplication and FollowerReplication byte-rate: the leader's rate grows with
    what its followers fetch of a topic in its leader throttled set, the follower's with what
    it fetches of one in its follower set; a topic in neither moves neither."""
    leader, follower = 1, 2
    throttled = {
        "leader.replication.throttled.replicas": "*",
        "follower.replication.throttled.replicas": "*",
    }
    with Admin(cluster.bootstrap) as admin:
        admin.create_topics("free", 1, 2, replica_assignment=[[leader, follower]])
        admin.create_topics("held", 1, 2, throttled, replica_assignment=[[leader, follower]])
    ports = {b: port_of(cluster, b) for b in (leader, follower)}
    leader_rate = "kafka_server_leaderreplication_byte_rate"
    follower_rate = "kafka_server_followerreplication_byte_rate"
    produce(cluster, "free", 50)  # acks=all: the follower has fetched it all
    assert value(scrape(ports[leader]), leader_rate) == 0
    assert value(scrape(ports[follower]), follower_rate) == 0
    produce(cluster, "held", 50)
    assert value(scrape(ports[leader]), leader_rate) > 0
    assert value(scrape(ports[follower]), follower_rate) > 0
    assert value(scrape(ports[leader]), follower_rate) == 0  # it follows nothing throttled
    assert value(scrape(ports[follower]), leader_rate) == 0  # it leads nothing throttled


def test_topic_meters_keep_the_all_topics_count_when_a_topic_goes() -> None:
    meters = TopicMeters(ManualClock(0, wall_offset_ms=5_000))
    meters.add(BYTES_IN, {"a": 3, "b": 4, None: 1})
    meters.live_topics = lambda: {"b"}
    (family, *_) = meters.collect()
    samples = {(s.name, tuple(s.labels.items())): s.value for s in family.samples}
    assert samples == {
        ("kafka_server_brokertopicmetrics_bytesin_total", ()): 8,
        ("kafka_server_brokertopicmetrics_bytesin_created", ()): 5.0,
        ("kafka_server_brokertopicmetrics_bytesin_total", (("topic", "b"),)): 4,
        ("kafka_server_brokertopicmetrics_bytesin_created", (("topic", "b"),)): 5.0,
    }
    assert meters.total(BYTES_IN) == 8
