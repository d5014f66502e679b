"""Advertised addresses: a broker tells clients and brokers an address other than the one it
binds. Used here to put a TCP fault proxy between a leader and everyone who reaches it, so a
network cut (not a crash: the leader keeps its coordinator session) drops the followers out
of the ISR, and healing it lets them catch up and rejoin."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from replog.broker import BrokerConfig, Cluster
from replog.errors import InvalidConfigError
from tests.broker.support import Client, produce
from tests.broker.test_cluster import create_topic, wait_for
from tests.faults.proxy import FaultProxy
from tests.ports import free_port

pytestmark = pytest.mark.timeout(90)

_SETTINGS = {
    "session_timeout_ms": 2_000,
    "heartbeat_interval_ms": 200,
    "replica_lag_ms_max": 1_500,
    "replica_fetch_wait_ms_max": 100,
    "replica_fetch_backoff_ms": 50,
}


@pytest.fixture
def proxied(tmp_path: object) -> Iterator[tuple[Cluster, FaultProxy, int]]:
    """Brokers 1-3; broker 1 binds ``bound`` and advertises the proxy's port."""
    bound = free_port()
    proxy = FaultProxy("127.0.0.1", bound)
    proxy.start()
    url = f"memory://advertised-{id(proxy)}"
    configs = [
        BrokerConfig(
            broker_id=i,
            log_dirs=(f"{tmp_path}/b{i}",),
            coordinator=url,
            **(
                {"port": bound, "advertised_host": "127.0.0.1", "advertised_port": proxy.port}
                if i == 1
                else {}
            ),
            **_SETTINGS,
        )
        for i in (1, 2, 3)
    ]
    cluster = Cluster(configs, base_dir=str(tmp_path), owns_base_dir=False)
    try:
        for broker_id in (1, 2, 3):
            cluster.start(broker_id)
        yield cluster, proxy, bound
    finally:
        cluster.close()
        proxy.close()


def test_followers_cut_off_from_the_leader_leave_and_rejoin_the_isr(
    proxied: tuple[Cluster, FaultProxy, int],
) -> None:
    cluster, proxy, bound = proxied
    assert cluster.brokers[1].address == f"127.0.0.1:{proxy.port}"
    registered = cluster.coordinator.live_brokers()[1]
    assert (registered.host, registered.port) == ("127.0.0.1", proxy.port)
    create_topic(cluster, "p", [1, 2, 3])

    def isr() -> tuple[int, ...]:
        state = cluster.coordinator.get_partition_state("p", 0)
        return () if state is None else tuple(sorted(state.isr))

    client = Client(f"127.0.0.1:{bound}")  # straight to the leader, around the proxy
    assert produce(client, "p", [b"before"], acks=-1)[0] == 0
    assert proxy.connections > 0  # the followers fetch through the proxy
    proxy.cut()
    for i in range(10):
        assert produce(client, "p", [b"cut%d" % i], acks=1)[0] == 0
    wait_for(lambda: isr() == (1,), timeout_s=20)  # the leader shrank the ISR to itself
    proxy.heal()
    wait_for(lambda: isr() == (1, 2, 3), timeout_s=20)
    for broker_id in (2, 3):
        log = cluster.brokers[broker_id].local_log("p", 0)
        assert log is not None
        assert cluster.call(lambda log=log: log.log_end_offset) == 11
    assert produce(client, "p", [b"after"], acks=-1)[0] == 0
    client.close()


def test_binding_every_interface_needs_an_advertised_host(tmp_path: object) -> None:
    with pytest.raises(InvalidConfigError, match="advertised_host"):
        BrokerConfig(broker_id=1, log_dirs=(str(tmp_path),), host="0.0.0.0")
    config = BrokerConfig(
        broker_id=1, log_dirs=(str(tmp_path),), host="0.0.0.0", advertised_host="localhost"
    )
    assert config.advertised_host == "localhost"
    with pytest.raises(InvalidConfigError, match="advertised_port"):
        BrokerConfig(broker_id=1, log_dirs=(str(tmp_path),), advertised_port=70_000)
