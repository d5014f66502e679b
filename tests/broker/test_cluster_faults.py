"""``replog.testing.faults.ClusterFaults`` on one shared 3-broker test-mode cluster: each fault
is checked from outside with confluent-kafka or kafka-python (what a user's client meets), and
``heal`` after each test leaves the cluster whole for the next."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
from confluent_kafka import KafkaError, Producer

from replog.broker.shell.cluster import Cluster
from replog.client.admin import Admin, PartitionDescription
from replog.errors import ErrorCode
from replog.testing.faults import ClusterFaults
from tests.waiting import eventually

pytestmark = [pytest.mark.system, pytest.mark.timeout(120)]


@pytest.fixture(scope="module")
def cluster() -> Iterator[Cluster]:
    # A follower cut off leaves the ISR after 1.5 s, not 4 s.
    with Cluster.local(3, test_mode=True, replica_lag_ms_max=1_500) as cluster:
        yield cluster


@pytest.fixture
def faults(cluster: Cluster) -> Iterator[ClusterFaults]:
    faults = ClusterFaults(cluster)
    yield faults
    faults.heal()


_names = iter(range(1, 10_000))


@pytest.fixture
def topic(cluster: Cluster) -> str:
    name = f"faults-{next(_names)}"
    with Admin(cluster.bootstrap) as admin:
        admin.create_topics(name, 1, 3)
    eventually(lambda: _state(cluster, name).leader >= 0, what=f"{name} has a leader")
    return name


def _state(cluster: Cluster, topic: str, *, avoid: int | None = None) -> PartitionDescription:
    """``topic``'s partition 0 as the metadata has it, asked of brokers other than ``avoid``
    (a paused broker answers nothing: a client asking it waits out its request timeout)."""
    others = [b.address for i, b in sorted(cluster.brokers.items()) if i != avoid]
    with Admin(",".join(others)) as admin:
        return admin.describe_topics([topic])[topic].partitions[0]


def _deliver(cluster: Cluster, topic: str, value: bytes, **config: object) -> KafkaError | None:
    """Produce one record with a fresh librdkafka producer; its delivery error (None: acked)."""
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all", **config})
    outcome: list[KafkaError | None] = []
    producer.produce(topic, value, on_delivery=lambda err, msg: outcome.append(err))
    producer.flush(30)
    return outcome[0] if outcome else KafkaError(KafkaError._TIMED_OUT)


def test_injected_errors_are_retried_and_tracked(
    cluster: Cluster, faults: ClusterFaults, topic: str
) -> None:
    tracked = faults.track_requests()
    faults.inject_errors("Produce", ["NOT_LEADER_OR_FOLLOWER"], count=2)
    assert _deliver(cluster, topic, b"v") is None
    produces = [r for r in tracked if r.api == "Produce"]
    assert len(produces) == 3  # two answered with the error, the retry acknowledged
    assert all(r.client_id == "rdkafka" for r in produces)


def test_an_error_code_that_is_not_retriable_reaches_the_application(
    cluster: Cluster, faults: ClusterFaults, topic: str
) -> None:
    faults.inject_errors("Produce", [ErrorCode.MESSAGE_TOO_LARGE])
    error = _deliver(cluster, topic, b"v")
    assert error is not None and error.code() == KafkaError.MSG_SIZE_TOO_LARGE
    assert _deliver(cluster, topic, b"w") is None  # the rule was used up


def test_rules_for_one_client_leave_the_others_alone(
    cluster: Cluster, faults: ClusterFaults, topic: str
) -> None:
    faults.inject_errors("Produce", [ErrorCode.MESSAGE_TOO_LARGE], client_id="victim")
    assert _deliver(cluster, topic, b"other") is None
    error = _deliver(cluster, topic, b"mine", **{"client.id": "victim"})
    assert error is not None and error.code() == KafkaError.MSG_SIZE_TOO_LARGE


def test_latency_delays_each_request_of_the_api(
    cluster: Cluster, faults: ClusterFaults, topic: str
) -> None:
    tracked = faults.track_requests()
    faults.add_latency(400, api="Produce")
    started = time.monotonic()
    assert _deliver(cluster, topic, b"slow") is None
    assert time.monotonic() - started >= 0.4
    assert [r.api for r in tracked].count("Produce") == 1  # delayed, not failed and retried


def test_cut_clients_time_out_and_reconnect_after_heal(
    cluster: Cluster, faults: ClusterFaults, topic: str
) -> None:
    faults.cut_clients()
    error = _deliver(cluster, topic, b"lost", **{"message.timeout.ms": 1500})
    assert error is not None and error.code() == KafkaError._MSG_TIMED_OUT
    faults.heal()
    assert _deliver(cluster, topic, b"back") is None


def test_cut_brokers_shrink_the_isr_and_heal_restores_it(
    cluster: Cluster, faults: ClusterFaults, topic: str
) -> None:
    leader = _state(cluster, topic).leader
    follower = next(b for b in (1, 2, 3) if b != leader)
    faults.cut_brokers(leader, follower)
    assert _deliver(cluster, topic, b"during") is None  # acks=all waits for the ISR to shrink
    shrunk = eventually(
        lambda: _state(cluster, topic),
        what="the ISR dropped the cut follower",
        done=lambda s: follower not in s.isr,
    )
    assert leader in shrunk.isr
    faults.heal()
    eventually(
        lambda: _state(cluster, topic),
        what="the follower rejoined the ISR",
        done=lambda s: follower in s.isr,
    )


def test_a_paused_leader_loses_leadership_and_resumes_as_a_follower(
    cluster: Cluster, faults: ClusterFaults, topic: str
) -> None:
    leader = _state(cluster, topic).leader
    faults.pause(leader)
    eventually(
        lambda: _state(cluster, topic, avoid=leader),
        what="leadership moved off the paused broker",
        done=lambda s: s.leader not in (-1, leader),
    )
    assert _deliver(cluster, topic, b"after") is None
    faults.resume(leader)
    eventually(
        lambda: _state(cluster, topic),
        what="the resumed broker caught up",
        done=lambda s: leader in s.isr,
    )


def test_failed_fsyncs_stop_the_broker_and_leadership_moves(
    cluster: Cluster, faults: ClusterFaults, topic: str
) -> None:
    leader = _state(cluster, topic).leader
    faults.fail_fsyncs(leader)
    eventually(
        lambda: cluster.brokers[leader].state.value,
        what="the broker stopped",
        done="offline".__eq__,
    )
    assert isinstance(cluster.brokers[leader].failure, Exception)
    eventually(lambda: _state(cluster, topic).leader not in (-1, leader), what="a new leader")
    assert _deliver(cluster, topic, b"failover") is None
    faults.heal()
    assert cluster.brokers[leader].state.value == "online"


def test_a_full_disk_answers_storage_errors_then_the_broker_stops(
    cluster: Cluster, faults: ClusterFaults, topic: str
) -> None:
    leader = _state(cluster, topic).leader
    faults.fill_disk(leader)
    assert _deliver(cluster, topic, b"full") is None  # retried on the new leader
    assert cluster.brokers[leader].state.value == "offline"


def test_move_leader_and_kill(cluster: Cluster, faults: ClusterFaults, topic: str) -> None:
    state = _state(cluster, topic)
    target = next(b for b in state.isr if b != state.leader)
    faults.move_leader(topic, 0, target)
    assert _state(cluster, topic).leader == target
    faults.kill(target)
    eventually(lambda: _state(cluster, topic).leader not in (-1, target), what="failover")
    assert _deliver(cluster, topic, b"x") is None


def test_bad_arguments_are_clear_errors(faults: ClusterFaults, topic: str) -> None:
    with pytest.raises(ValueError, match="unknown API 'Produse'"):
        faults.inject_errors("Produse", ["NOT_LEADER_OR_FOLLOWER"])
    with pytest.raises(ValueError, match="unknown Kafka error 'NOT_A_CODE'"):
        faults.inject_errors("Produce", ["NOT_A_CODE"])
    with pytest.raises(ValueError, match="no broker 9"):
        faults.pause(9)
    with pytest.raises(ValueError, match="needs two different brokers"):
        faults.cut_brokers(1, 1)
    with pytest.raises(ValueError, match="has no partition 5"):
        faults.move_leader(topic, 5, 1)


def test_disk_faults_need_a_test_mode_cluster() -> None:
    with Cluster.local(1) as plain, pytest.raises(RuntimeError, match="test-mode cluster"):
        ClusterFaults(plain).fail_fsyncs(1)
