"""The acks=all path is event-driven: no step of produce -> follower fetch -> follower append ->
follower reports its LEO -> leader HW -> delayed produce completes -> response waits for a timer.

Not a speed assertion: every timer on the path (the replica fetch long poll, the tick, the
metadata poll, the fetch backoff) is set to 10 s, and 20 sequential acks=all produces must all
complete within 5 s. Any step that waited for one of those timers would take 10 s on its own.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from replog.broker import Cluster
from tests.broker.support import Client, produce
from tests.broker.test_cluster import create_topic

pytestmark = [pytest.mark.system, pytest.mark.timeout(120)]

_LONG_MS = 10_000
_PRODUCES = 20
_BUDGET_S = 5.0


@pytest.fixture(params=["replicated", "fsync"])
def slow_timer_cluster(request: pytest.FixtureRequest, tmp_path: object) -> Iterator[Cluster]:
    c = Cluster.local(
        3,
        base_dir=str(tmp_path),
        durability=request.param,
        replica_fetch_wait_ms_max=_LONG_MS,
        replica_fetch_backoff_ms=_LONG_MS,
        tick_interval_ms=_LONG_MS,
        metadata_poll_interval_ms=_LONG_MS,
        replica_lag_ms_max=60_000,
        session_timeout_ms=30_000,
        heartbeat_interval_ms=200,
        request_timeout_ms=60_000,
    )
    try:
        yield c
    finally:
        c.close()


def test_acks_all_round_trip_does_not_wait_for_timers(slow_timer_cluster: Cluster) -> None:
    cluster = slow_timer_cluster
    create_topic(cluster, "lat", [1, 2, 3])
    client = Client(cluster.brokers[1].address, timeout_s=60.0)
    try:
        # Warm-up: the followers' fetchers connect and the ISR is complete before timing.
        assert produce(client, "lat", [b"warm"], acks=-1) == (0, 0)
        started = time.monotonic()
        for i in range(_PRODUCES):
            assert produce(client, "lat", [f"v{i}".encode()], acks=-1) == (0, i + 1)
        elapsed = time.monotonic() - started
    finally:
        client.close()
    assert elapsed < _BUDGET_S, (
        f"{_PRODUCES} acks=all produces took {elapsed:.2f} s: a step waits for a timer"
    )
