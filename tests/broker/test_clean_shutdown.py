"""What a restarted broker tells the coordinator about its shutdown (KIP-966): a crash (no
clean-shutdown marker) registers ``clean_shutdown=False`` in REPLICATED mode; a clean stop, a
brand-new broker and FSYNC mode (nothing unflushed ever counted) register True."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from replog import Cluster
from tests.broker.test_cluster import wait_for
from tests.broker.test_resilience import create

pytestmark = [pytest.mark.system, pytest.mark.timeout(60)]


@pytest.fixture(params=["replicated", "fsync"])
def cluster(request: pytest.FixtureRequest, tmp_path: object) -> Iterator[Cluster]:
    c = Cluster.local(3, base_dir=str(tmp_path), durability=request.param)
    try:
        yield c
    finally:
        c.close()


def _clean(cluster: Cluster, broker_id: int) -> bool:
    info = cluster.coordinator.get_broker(broker_id)
    assert info is not None
    return info.clean_shutdown


def test_registration_says_whether_the_previous_run_ended_cleanly(cluster: Cluster) -> None:
    assert all(_clean(cluster, b) for b in (1, 2, 3))  # brand-new brokers, empty log dirs
    create(cluster, "marker")
    replicated = cluster.configs[1].durability.value == "replicated"

    cluster.kill(2)  # no clean-shutdown marker written
    cluster.start(2)
    wait_for(lambda: cluster.coordinator.get_broker(2) is not None)
    assert _clean(cluster, 2) is not replicated

    cluster.stop(3)  # flush, checkpoint, marker
    cluster.start(3)
    wait_for(lambda: cluster.coordinator.get_broker(3) is not None)
    assert _clean(cluster, 3)
