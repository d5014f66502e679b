"""Combined mode (Kafka's ``process.roles=broker,controller``): three broker processes that
each run a voter of the built-in metadata quorum form a cluster with no other service; SIGKILL
the one whose voter leads the quorum (KRaft's active controller) while kafka-python produces
with acks=all, and the other two go on without losing an acknowledged record.

Also the configuration rules: what combined mode needs, the ``raft://`` coordinator it
derives, and the broker process refusing a config that names no shared coordinator.

Real processes on loopback (this is where ``time.sleep`` is allowed); every process is one this
module started, stopped by its PID."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import NewTopic

from replog.broker.__main__ import load_process_config, main
from replog.broker.config import BrokerConfig
from replog.errors import InvalidConfigError
from replog.quorum import commands as rc
from replog.quorum.channel import QuorumChannel
from tests.faults.harness import ProcessCluster, free_port

pytestmark = pytest.mark.system

TOPIC = "combined"
SETTINGS = {
    "session_timeout_ms": 4_000,
    "heartbeat_interval_ms": 200,
    "replica_lag_ms_max": 4_000,
    "replica_fetch_wait_ms_max": 100,
    "default_replication_factor": 3,
    "default_min_insync_replicas": 2,
    "controlled_shutdown_timeout_ms": 5_000,
    "request_timeout_ms": 5_000,
    "quorum": {"election_timeout_ms": 300, "fetch_timeout_ms": 1_000, "request_timeout_ms": 500},
}


# ---------------------------------------------------------------- configuration


def test_combined_mode_derives_its_raft_coordinator(tmp_path: Path) -> None:
    config = BrokerConfig(
        broker_id=2,
        log_dirs=(str(tmp_path / "data"),),
        process_roles=["controller", "broker"],
        controller_voters="1@127.0.0.1:9101,2@127.0.0.1:9102,3@127.0.0.1:9103",
        quorum={"election_timeout_ms": 300},
    )
    assert config.is_controller and config.process_roles == ("broker", "controller")
    assert config.coordinator == "raft://127.0.0.1:9101,127.0.0.1:9102,127.0.0.1:9103"
    assert config.controller_data_path() == f"{tmp_path / 'data'}/controller"
    assert dict(config.quorum) == {"election_timeout_ms": 300}
    plain = BrokerConfig(broker_id=1, log_dirs=("x",))
    assert plain.coordinator == "memory://default" and not plain.is_controller
    client_only = BrokerConfig(broker_id=9, log_dirs=("x",), controller_voters="1@h:1,2@h:2")
    assert client_only.coordinator == "raft://h:1,h:2" and not client_only.is_controller


@pytest.mark.parametrize(
    ("settings", "says"),
    [
        ({"process_roles": ["controller"]}, "replog controller"),
        ({"process_roles": ["broker", "zookeeper"]}, "unknown process_roles"),
        ({"process_roles": ["broker", "controller"]}, "needs controller_voters"),
        (
            {"process_roles": ["broker", "controller"], "controller_voters": "2@h:1,3@h:2"},
            "not among controller_voters",
        ),
        (
            {
                "process_roles": ["broker", "controller"],
                "controller_voters": "1@h:1",
                "coordinator": "zookeeper://h:2181/x",
            },
            "uses its quorum",
        ),
        ({"controller_voters": "1@h"}, "<id>@<host>:<port>"),
        ({"quorum": {"election_timeout_ms": 300}}, "apply only with process_roles"),
        (
            {
                "process_roles": ["broker", "controller"],
                "controller_voters": "1@h:1",
                "quorum": {"vote_timeout_ms": 1},
            },
            "unknown quorum keys",
        ),
    ],
)
def test_combined_mode_settings_are_checked(settings: dict[str, object], says: str) -> None:
    with pytest.raises(InvalidConfigError, match=says):
        BrokerConfig.from_mapping({"broker_id": 1, "log_dirs": ["x"], **settings})


def test_a_broker_process_needs_a_shared_coordinator(tmp_path: Path) -> None:
    """No ``coordinator`` and no ``controller_voters``: refused (exit 2), saying what to use;
    an explicit ``memory://`` (one broker on purpose) is accepted."""
    path = tmp_path / "broker.json"
    path.write_text(json.dumps({"broker_id": 1, "log_dirs": [str(tmp_path / "d")]}))
    with pytest.raises(InvalidConfigError, match="raft://"):
        load_process_config(str(path))
    assert main(["--config", str(path)]) == 2
    path.write_text(
        json.dumps({"broker_id": 1, "log_dirs": [str(tmp_path / "d")], "coordinator": "memory://"})
    )
    assert load_process_config(str(path)).coordinator == "memory://"
    voters = {"broker_id": 1, "log_dirs": ["d"], "controller_voters": "1@127.0.0.1:9"}
    path.write_text(json.dumps(voters))
    assert load_process_config(str(path)).coordinator == "raft://127.0.0.1:9"


# ---------------------------------------------------------------- three combined processes


@pytest.fixture
def combined(tmp_path: Path) -> Iterator[ProcessCluster]:
    ports = {i: free_port() for i in (1, 2, 3)}
    voters = ",".join(f"{i}@127.0.0.1:{p}" for i, p in ports.items())
    settings = {"process_roles": ["broker", "controller"], "controller_voters": voters}
    cluster = ProcessCluster.create(tmp_path, "unused://", 3, settings={**SETTINGS, **settings})
    for broker in cluster.brokers.values():
        del broker.settings["coordinator"]  # derived from controller_voters
    cluster.start()
    try:
        yield cluster
    finally:
        cluster.close()


def _voters(cluster: ProcessCluster) -> dict[int, tuple[str, int]]:
    spec = str(cluster.brokers[1].settings["controller_voters"])
    parts = (p.split("@") for p in spec.split(","))
    return {int(i): ("127.0.0.1", int(a.rsplit(":", 1)[1])) for i, a in parts}


def _quorum_leader(cluster: ProcessCluster, alive: list[int]) -> int:
    """The node whose voter leads the quorum (a committed read through it)."""
    voters = _voters(cluster)
    channel = QuorumChannel([voters[i] for i in alive])
    try:
        channel.call(rc.CurrentController(), timeout_ms=30_000, idempotent=True)
        address = channel.leader
    finally:
        channel.close()
    return next(i for i, a in voters.items() if a == address)


def _create_topic(bootstrap: str) -> None:
    """RF 3, min ISR 2, asked for as soon as the brokers serve (each serves only once the
    controller counts it)."""
    admin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=10_000)
    try:
        admin.create_topics([NewTopic(TOPIC, 1, 3, topic_configs={"min.insync.replicas": "2"})])
    finally:
        admin.close()


def _produce(producer: KafkaProducer, value: bytes, acked: dict[int, bytes]) -> None:
    """Send until acknowledged (retrying what the cluster refuses meanwhile)."""
    deadline = time.monotonic() + 60
    while True:
        try:
            meta = producer.send(TOPIC, value, partition=0).get(timeout=10)
            acked[meta.offset] = value
            return
        except Exception:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)


def test_three_combined_processes_survive_the_loss_of_the_active_controller(
    combined: ProcessCluster,
) -> None:
    _create_topic(combined.bootstrap)
    acked: dict[int, bytes] = {}
    producer = KafkaProducer(
        bootstrap_servers=combined.bootstrap, acks="all", retries=5, request_timeout_ms=5_000
    )
    try:
        for i in range(20):
            _produce(producer, b"before-%d" % i, acked)
        leader = _quorum_leader(combined, [1, 2, 3])
        combined.brokers[leader].kill9()
        killed = time.monotonic()
        survivors = [i for i in (1, 2, 3) if i != leader]
        assert _quorum_leader(combined, survivors) in survivors
        for i in range(20):
            _produce(producer, b"after-%d" % i, acked)
        print(
            f"node {leader} killed: 20 acks=all records acknowledged "
            f"{time.monotonic() - killed:.2f} s later"
        )
    finally:
        producer.close()
    consumer = KafkaConsumer(
        bootstrap_servers=combined.bootstrap, enable_auto_commit=False, consumer_timeout_ms=10_000
    )
    try:
        partition = TopicPartition(TOPIC, 0)
        consumer.assign([partition])
        consumer.seek_to_beginning(partition)
        got: dict[int, bytes] = {}
        for record in consumer:
            got[record.offset] = record.value
            if len(got) > max(acked):
                break
    finally:
        consumer.close()
    lost = {o: v for o, v in acked.items() if got.get(o) != v}
    assert not lost, f"acknowledged records lost or changed: {lost}"
    assert len(acked) == 40
