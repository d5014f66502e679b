"""A partition whose log cannot open because a batch its producer state is rebuilt from is
damaged (`CorruptRecordError` from `Log.open`) is kept out of service on its own: the broker's
other partitions, in the same log dir, open and serve, and the damage is reported."""

from __future__ import annotations

import os

from replog.broker import BrokerConfig, ReplicaManager
from replog.clock import ManualClock
from replog.errors import ErrorCode
from replog.log import LogManager, encode_batch, iter_batches
from replog.metadata.types import PartitionState
from tests.metadata_feed import set_state

WALL_MS = 1_700_000_000_000
STATE = PartitionState.initial((1,))


def _manager(tmp_path: object) -> ReplicaManager:
    config = BrokerConfig(broker_id=1, log_dirs=(f"{tmp_path}/b1",))
    clock = ManualClock(0, wall_offset_ms=WALL_MS)
    logs = LogManager.open(list(config.log_dirs), clock=clock)
    return ReplicaManager(1, logs, config.partition_config(), broker_epoch=1)


def _idem(seq: int) -> bytes:
    return encode_batch(
        [b"a%d" % seq, b"b%d" % seq],
        base_timestamp=WALL_MS,
        producer_id=9,
        producer_epoch=0,
        base_sequence=seq,
    )


def _produce(rm: ReplicaManager, partition: int, seq: int) -> ErrorCode:
    _, result = rm.produce("t", partition, _idem(seq), 1, 1)
    assert result is not None
    return result.error_code


def _damage_producer_rebuild(partition_dir: str) -> None:
    """Remove the producer snapshots (the rebuild scans the log) and flip the base offset of
    the second batch (offsets 2-3 read as 3-4: it overlaps the state)."""
    for name in os.listdir(partition_dir):
        if name.endswith(".snapshot"):
            os.remove(os.path.join(partition_dir, name))
    path = os.path.join(partition_dir, f"{0:020d}.log")
    with open(path, "rb") as f:
        position = [p for p, _ in iter_batches(f.read())][1]
    with open(path, "r+b") as f:
        f.seek(position + 7)
        byte = f.read(1)[0]
        f.seek(position + 7)
        f.write(bytes([byte ^ 0x01]))


def test_a_log_whose_producer_state_is_damaged_is_isolated_and_the_others_serve(
    tmp_path: object,
) -> None:
    rm = _manager(tmp_path)
    for partition in (0, 1):
        set_state(rm, "t", partition, STATE, 0)
        for seq in range(0, 8, 2):
            assert _produce(rm, partition, seq) is ErrorCode.NONE
    rm.log_manager.flush_all()
    rm.log_manager.shutdown(1)  # clean: the logs reopen trusted, below the recovery point
    _damage_producer_rebuild(f"{tmp_path}/b1/t-0")

    restarted = _manager(tmp_path)
    for partition in (0, 1):
        set_state(restarted, "t", partition, STATE, 0)

    assert restarted.partition("t", 0) is None
    assert _produce(restarted, 0, 8) is ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert restarted.take_ready().damaged == ((("t", 0), 2),)
    assert restarted.log_manager.offline_dirs == {}
    served = restarted.log("t", 1)
    assert served is not None and served.log_end_offset == 8
    assert _produce(restarted, 1, 6) is ErrorCode.NONE  # a retry: answered as a duplicate
    assert _produce(restarted, 1, 8) is ErrorCode.NONE
    assert served.log_end_offset == 10
