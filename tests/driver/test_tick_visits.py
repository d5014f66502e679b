"""``ReplicaManager.tick`` visits, between ISR shrink passes, only the partitions that have
something to do as time passes (a delayed produce, a HW below the LEO): an acks=all produce
still times out on time, by the first tick past its deadline, beside idle partitions."""

from __future__ import annotations

import pathlib

from replog.broker import ReplicaManager
from replog.clock import ManualClock
from replog.errors import ErrorCode
from replog.isr import DurabilityMode, PartitionConfig
from replog.log import encode_batch
from replog.log.manager import LogManager
from replog.metadata.types import PartitionState
from replog.topics import TopicPartition
from tests.metadata_feed import set_state

LAG_MS = 1_000  # ISR shrink passes every 500 ms


def test_a_delayed_produce_times_out_on_a_tick_between_shrink_passes(
    tmp_path: pathlib.Path,
) -> None:
    logs = LogManager.open([f"{tmp_path}/b1"], clock=ManualClock())
    config = PartitionConfig(replica_lag_ms_max=LAG_MS, durability=DurabilityMode.REPLICATED)
    rm = ReplicaManager(1, logs, config, broker_epoch=1)
    try:
        state = PartitionState(replicas=(1, 2), leader=1, leader_epoch=0, isr=(1, 2))
        for idle in range(20):
            set_state(rm, "idle", idle, state, 0)
        set_state(rm, "t", 0, state, 0)
        rm.tick(0)
        # acks=all: replica 2 never fetches, so only the timeout ends the produce
        request_id, result = rm.produce(
            "t", 0, encode_batch([b"v"], base_timestamp=10), -1, 10, timeout_ms=100
        )
        assert result is None
        rm.tick(50)
        assert rm.take_ready().produce_results == ()
        rm.tick(120)  # no shrink pass (the last was at 0 ms): only timed partitions visited
        (tp, done), *rest = rm.take_ready().produce_results
        assert not rest and tp == TopicPartition("t", 0) and done.request_id == request_id
        assert done.error_code is ErrorCode.REQUEST_TIMED_OUT
        assert rm.partition("idle", 0) is not None
    finally:
        logs.shutdown()
