"""The leader side of the replication quota (KIP-73) on a real ``BrokerDriver`` in virtual
time: a follower's Fetch served through the Fetch handler, the quota's configs written to the
coordinator as the controller writes them."""

from __future__ import annotations

from typing import Any

import pytest

from replog.broker.config import BrokerConfig
from replog.broker.driver.convert import follower_fetch_request
from replog.broker.driver.replication_throttle import ReplicationThrottle
from replog.broker.driver.requests.base import Reply, RequestContext
from replog.broker.driver.requests.fetch import handle_fetch
from replog.broker.driver.services import DriverServices
from replog.isr import PartitionFetchRequest
from replog.log import encode_batch
from replog.metadata.types import ALL_BROKERS, PartitionState
from replog.protocol import RequestHeader
from replog.protocol import messages as m
from replog.protocol.primitives import RecordsRef

from .shell import ScriptedShell

RATE_BYTES_PER_S = 1_000


def _started(tmp_path: Any, isr: tuple[int, ...], throttled: str) -> ScriptedShell:
    """One broker leading ``t``-0 (replicas 1, 2; ``isr``) with 3000 bytes of records and
    a leader rate of ``RATE_BYTES_PER_S`` on broker 1, ``throttled`` its leader list."""
    shell = ScriptedShell(tmp_path)
    shell.start()
    coordinator, controller = shell.coordinator, shell.driver.rm.image.controller
    assert controller is not None
    epoch = controller.controller_epoch
    state = PartitionState(replicas=(1, 2), leader=1, leader_epoch=0, isr=isr)
    coordinator.create_topic("t", [[1, 2]], controller_epoch=epoch, initial_states=[state])
    configs = {"leader.replication.throttled.replicas": throttled}
    coordinator.alter_topic_configs("t", configs, controller_epoch=epoch)
    rate = {"leader.replication.throttled.rate": str(RATE_BYTES_PER_S)}
    coordinator.alter_broker_configs(1, rate, controller_epoch=epoch)
    for _ in range(30):  # past a metadata poll
        shell.tick(20)
    replica = shell.driver.rm.partition("t", 0)
    assert replica is not None and replica.is_leader and replica.isr == frozenset(isr)
    for _ in range(3):
        batch = encode_batch([b"x" * 1_000], base_timestamp=shell.clock.wall_ms())
        shell.driver.rm.produce("t", 0, batch, 1, shell.now_ms)
    shell.tick(1)  # flushed: with ISR {1} the HW reaches the log end
    return shell


def _fetch(shell: ScriptedShell, replica_id: int, fetch_offset: int) -> m.FetchResponsePartition:
    request = PartitionFetchRequest(
        replica_id=replica_id,
        fetch_offset=fetch_offset,
        current_leader_epoch=0,
        max_bytes=1_100,  # one batch per fetch
    )
    body = follower_fetch_request(
        replica_id, [(("t", 0), request)], max_wait_ms=0, min_bytes=1, max_bytes=1_100
    )
    header = RequestHeader(api_key=m.FETCH.api_key, api_version=12, correlation_id=1)
    outcome = handle_fetch(RequestContext(header, shell.now_ms), body, DriverServices(shell.driver))
    assert isinstance(outcome, Reply)
    (topic,) = outcome.message.responses
    (partition,) = topic.partitions
    return partition


def _size(records: Any) -> int:
    """Bytes of a wire ``records`` value: a zero-copy ``RecordsRef`` or bytes."""
    return records.size_bytes if isinstance(records, RecordsRef) else len(records or b"")


def test_an_out_of_sync_follower_gets_no_records_past_the_leader_quota(tmp_path: Any) -> None:
    shell = _started(tmp_path, isr=(1,), throttled="0:1")
    first = _fetch(shell, 2, 0)
    assert first.error_code == 0 and _size(first.records) > 1_000  # under the quota: data
    held = _fetch(shell, 2, 1)  # ~1070 B recorded in one window: above 1000 B/s
    assert held.error_code == 0 and _size(held.records) == 0
    assert (held.high_watermark, held.log_start_offset) == (3, 0)  # the rest still comes
    consumer = _fetch(shell, -1, 1)  # consumers are never throttled
    assert consumer.error_code == 0 and _size(consumer.records) > 1_000
    shell.tick(1_100)  # the ~1070 B now spread over 1.1 s: under the rate again
    again = _fetch(shell, 2, 1)
    assert _size(again.records) > 1_000
    quota = shell.driver.replication_throttle.leader
    assert quota.is_exceeded(shell.now_ms)  # both sends are recorded


@pytest.mark.parametrize(
    ("isr", "throttled"),
    [((1, 2), "0:1"), ((1,), "0:2"), ((1,), "")],
    ids=["in-sync", "other-broker-listed", "not-listed"],
)
def test_a_follower_is_not_held_when_in_sync_or_not_in_the_leader_list(
    tmp_path: Any, isr: tuple[int, ...], throttled: str
) -> None:
    shell = _started(tmp_path, isr=isr, throttled=throttled)
    for offset in range(3):
        answer = _fetch(shell, 2, offset)
        assert answer.error_code == 0 and _size(answer.records) > 1_000
    recorded = shell.driver.replication_throttle.leader.rate_bytes_per_s(shell.now_ms)
    assert (recorded > 0) is (throttled == "0:1")  # in the set: counted though in sync


def test_rates_come_from_this_brokers_dynamic_config_else_the_cluster_default() -> None:
    throttle = ReplicationThrottle.for_config(BrokerConfig(broker_id=1, log_dirs=("-",)))
    assert throttle.leader.window_count == 11 and throttle.leader.window_ms == 1_000
    throttle.sync_rates({})
    assert throttle.leader.bound_bytes_per_s is None  # unthrottled by default
    configs = {
        ALL_BROKERS: (("follower.replication.throttled.rate", "7"),),
        1: (("leader.replication.throttled.rate", "5"),),
        2: (("follower.replication.throttled.rate", "9"),),
    }
    throttle.sync_rates(configs)
    assert (throttle.leader.bound_bytes_per_s, throttle.follower.bound_bytes_per_s) == (5, 7)
    throttle.sync_rates({1: (("leader.replication.throttled.rate", str(2**63 - 1)),)})
    assert throttle.leader.bound_bytes_per_s is None
