"""Idempotent producer state across a leader change and a broker restart, over real TCP.

A producer that lost the answer to a batch retries it, possibly to a new leader or to a
restarted broker; that broker must know the batch (its producer state is built from the
replicated batches as a follower, and from its snapshot and log on restart) and answer with
the offsets the batch was first written at instead of appending it twice.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from replog.broker import Cluster
from replog.clock import SYSTEM_CLOCK
from replog.errors import ErrorCode
from replog.protocol import messages as m
from tests.broker.support import Client, fetch_values
from tests.broker.test_cluster import create_topic, wait_for
from tests.broker.test_producer_ids import idempotent_produce, producer_ids

pytestmark = [pytest.mark.system, pytest.mark.timeout(120)]


def produce(
    client: Client, topic: str, values: list[bytes], pid: int, seq: int
) -> m.PartitionProduceResponse:
    """An idempotent produce stamped with the wall time (so the producer has not expired)."""
    return idempotent_produce(client, topic, values, pid, seq, SYSTEM_CLOCK.wall_ms())


@pytest.fixture
def cluster(tmp_path: object) -> Iterator[Cluster]:
    c = Cluster.local(3, base_dir=str(tmp_path))
    try:
        yield c
    finally:
        c.close()


def leader(cluster: Cluster, topic: str) -> int:
    state = cluster.coordinator.get_partition_state(topic, 0)
    assert state is not None
    return state.leader


def test_api_versions_advertise_init_producer_id(cluster: Cluster) -> None:
    client = Client(cluster.brokers[1].address)
    answer = client.call(
        m.ApiVersionsRequest(client_software_name="t", client_software_version="1")
    )
    client.close()
    assert isinstance(answer, m.ApiVersionsResponse)
    served = {a.api_key: (a.min_version, a.max_version) for a in answer.api_keys}
    assert served[m.INIT_PRODUCER_ID.api_key] == (0, 5)
    assert served[m.PRODUCE.api_key][1] >= 3  # idempotent batches need produce v3+


def test_a_retry_to_the_new_leader_is_answered_with_its_first_offsets(cluster: Cluster) -> None:
    create_topic(cluster, "moved", [1, 2, 3])
    client = Client(cluster.brokers[1].address)
    (pid,) = producer_ids(client, 1)
    assert produce(client, "moved", [b"a", b"b"], pid, 0).base_offset == 0
    assert produce(client, "moved", [b"c"], pid, 2).base_offset == 2
    client.close()
    cluster.kill(1)
    wait_for(lambda: leader(cluster, "moved") in (2, 3), timeout_s=20)
    client = Client(cluster.brokers[leader(cluster, "moved")].address)
    # The answer to seq 2 was "lost": the producer sends it again, to the new leader.
    retry = produce(client, "moved", [b"c"], pid, 2)
    assert (retry.error_code, retry.base_offset) == (ErrorCode.NONE, 2)
    older = produce(client, "moved", [b"a", b"b"], pid, 0)
    assert (older.error_code, older.base_offset) == (ErrorCode.NONE, 0)
    gap = produce(client, "moved", [b"e"], pid, 4)
    assert gap.error_code == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    following = produce(client, "moved", [b"d"], pid, 3)
    assert (following.error_code, following.base_offset) == (ErrorCode.NONE, 3)
    assert fetch_values(client, "moved")[2] == [b"a", b"b", b"c", b"d"]
    client.close()


@pytest.mark.parametrize("crash", [False, True], ids=["clean-stop", "crash"])
def test_producer_state_survives_a_restart(cluster: Cluster, crash: bool) -> None:
    """A clean stop writes a snapshot; a crash leaves the state to be rebuilt from the log."""
    create_topic(cluster, "kept", [1])
    client = Client(cluster.brokers[1].address)
    (pid,) = producer_ids(client, 1)
    for seq in range(4):
        assert produce(client, "kept", [b"v%d" % seq], pid, seq).error_code == 0
    client.close()
    if crash:
        cluster.kill(1)
        cluster.start(1)
    else:
        cluster.restart(1)
    wait_for(lambda: cluster.brokers[1].state.value == "online", timeout_s=20)
    client = Client(cluster.brokers[1].address)
    wait_for(lambda: fetch_values(client, "kept")[0] == ErrorCode.NONE, timeout_s=20)
    producers = cluster.call(lambda: cluster.brokers[1].local_log("kept", 0).producers)
    if crash:  # the state is rebuilt from the log, past the last snapshot
        assert producers.replayed_batches > 0
    else:  # the snapshot written at shutdown covers the whole log
        assert (producers.loaded_from, producers.replayed_batches) == (4, 0)
    retry = produce(client, "kept", [b"v3"], pid, 3)
    assert (retry.error_code, retry.base_offset) == (ErrorCode.NONE, 3)
    gap = produce(client, "kept", [b"v9"], pid, 9)
    assert gap.error_code == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    assert produce(client, "kept", [b"v4"], pid, 4).base_offset == 4
    assert fetch_values(client, "kept")[2] == [b"v%d" % i for i in range(5)]
    client.close()
