"""Per-topic configs end to end: stored with the topic, honoured by every broker (min ISR, log
settings), and refused with INVALID_CONFIG when replog would not honour them."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from replog.broker import Cluster
from replog.client import Admin, Producer
from replog.client.errors import BrokerResponseError
from replog.errors import ErrorCode, ReplogError
from tests.broker.test_cluster import wait_for

pytestmark = [pytest.mark.system, pytest.mark.timeout(60)]


@pytest.fixture(scope="module")
def cluster() -> Iterator[Cluster]:
    # Broker defaults: min ISR 1, no retention by size; the topics below override them.
    with Cluster.local(3, retention_check_interval_ms=100) as c:
        yield c


def _produce_error(cluster: Cluster, topic: str) -> Exception | None:
    with Producer(cluster.bootstrap, acks="all", retries=0, request_timeout_ms=5_000) as p:
        try:
            p.send(topic, b"x", partition=0).result(timeout=20)
        except Exception as exc:  # the acknowledgement's error, whatever its type
            return exc
    return None


def test_min_insync_replicas_of_the_topic_is_enforced(tmp_path: object) -> None:
    with Cluster.local(3, base_dir=str(tmp_path)) as cluster:
        with Admin(cluster.bootstrap) as admin:
            admin.create_topics("strict", 1, 3, {"min.insync.replicas": "3"})
            admin.create_topics("lenient", 1, 3)
        stored = cluster.coordinator.get_topic("strict")
        assert stored is not None and stored.config_map == {"min.insync.replicas": "3"}
        assert _produce_error(cluster, "strict") is None  # ISR of 3: acknowledged
        state = cluster.coordinator.get_partition_state("strict", 0)
        assert state is not None
        follower = next(b for b in state.replicas if b != state.leader)
        cluster.kill(follower)

        def isr_size(topic: str) -> int:
            current = cluster.coordinator.get_partition_state(topic, 0)
            return 0 if current is None else len(current.isr)

        wait_for(lambda: isr_size("strict") == 2 and isr_size("lenient") == 2)
        # An ISR of two is under the topic's min ISR of three: refused, never acknowledged;
        # the broker default (1) still lets the other topic through.
        error = _produce_error(cluster, "strict")
        assert error is not None and "NOT_ENOUGH_REPLICAS" in repr(error), repr(error)
        assert _produce_error(cluster, "lenient") is None


def test_log_settings_of_the_topic_apply_on_every_replica(cluster: Cluster) -> None:
    with Admin(cluster.bootstrap) as admin:
        admin.create_topics(
            "small-segments", 1, 3, {"segment.bytes": "1024", "retention.bytes": "2048"}
        )
        admin.create_topics("default-segments", 1, 3)
    with Producer(cluster.bootstrap, acks="all", linger_ms=0) as producer:
        for i in range(40):
            for topic in ("small-segments", "default-segments"):
                producer.send(topic, b"%03d" % i + b"x" * 200, partition=0)
            producer.flush()

    def starts(topic: str) -> list[int]:
        logs = [b.local_log(topic, 0) for b in cluster.brokers.values()]
        return [cluster.call(lambda log=log: log.log_start_offset) for log in logs if log]

    wait_for(lambda: len(starts("small-segments")) == 3 and min(starts("small-segments")) > 0)
    assert starts("default-segments") == [0, 0, 0]


@pytest.mark.parametrize(
    ("configs", "message"),
    [
        ({"message.downconversion.enable": "true"}, "unsupported topic config"),
        ({"compression.type": "brotli"}, "compression.type must be one of"),
        ({"cleanup.policy": "purge"}, "cleanup.policy must be"),
        ({"min.insync.replicas": "0"}, ">= 1"),
    ],
)
def test_configs_replog_would_not_honour_are_refused(
    cluster: Cluster, configs: dict[str, str], message: str
) -> None:
    with Admin(cluster.bootstrap) as admin:
        with pytest.raises(BrokerResponseError, match=message) as raised:
            admin.create_topics("refused", 1, 1, configs)
        assert raised.value.code == raised.value.error_code == ErrorCode.INVALID_CONFIG
        assert "refused" not in admin.list_topics()


def test_describe_configs_shows_what_applies(cluster: Cluster) -> None:
    with Admin(cluster.bootstrap) as admin:
        admin.create_topics("described-configs", 1, 3, {"retention.ms": "60000"})
        configs = admin.describe_configs(["described-configs"])["described-configs"]
        assert configs["retention.ms"] == "60000"  # the topic's own
        assert configs["min.insync.replicas"] == "1"  # the broker default
        assert configs["cleanup.policy"] == "delete"
        assert configs["segment.bytes"] == str(1024**3)
        with pytest.raises(ReplogError, match="UNKNOWN_TOPIC_OR_PARTITION"):
            admin.describe_configs(["no-such-topic"])
