"""Broker-level log settings and retention: old segments go on every replica, nothing past
the HW, and consumers see the new log start."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from replog.broker import BrokerConfig, Cluster
from replog.errors import ErrorCode, InvalidConfigError
from tests.broker.support import Client, fetch_values, produce
from tests.broker.test_cluster import create_topic, wait_for

pytestmark = [pytest.mark.system, pytest.mark.timeout(60)]

# A one-record batch of a 200-byte value is ~270 bytes: 1 KiB segments hold a few batches.
SEGMENT_BYTES = 1024
RETENTION_BYTES = 2048


@pytest.fixture
def cluster(tmp_path: object) -> Iterator[Cluster]:
    c = Cluster.local(
        3,
        base_dir=str(tmp_path),
        retention_check_interval_ms=100,
        log={"segment_bytes": SEGMENT_BYTES, "retention_bytes": RETENTION_BYTES},
    )
    try:
        yield c
    finally:
        c.close()


def test_retention_deletes_old_segments_on_every_replica(cluster: Cluster) -> None:
    create_topic(cluster, "ret", [1, 2, 3])
    client = Client(cluster.brokers[1].address)
    values = [b"%03d" % i + b"x" * 197 for i in range(40)]
    for value in values:
        assert produce(client, "ret", [value], acks=-1)[0] == 0

    def start_of(broker_id: int) -> int:
        log = cluster.brokers[broker_id].local_log("ret", 0)
        assert log is not None
        return int(cluster.call(lambda: log.log_start_offset))

    def size_of(broker_id: int) -> int:
        log = cluster.brokers[broker_id].local_log("ret", 0)
        assert log is not None
        return int(cluster.call(lambda: log.size_bytes))

    # retention_bytes keeps whole segments: at most one segment over the limit remains (a
    # pass may run while the last records arrive, so wait for the passes after them)
    limit = RETENTION_BYTES + SEGMENT_BYTES
    wait_for(lambda: all(start_of(b) > 0 and size_of(b) <= limit for b in (1, 2, 3)))
    for broker_id in (1, 2, 3):
        log = cluster.brokers[broker_id].local_log("ret", 0)
        assert log is not None
        assert cluster.call(lambda log=log: log.log_end_offset) == len(values)
    leader_start, read = start_of(1), []
    while leader_start + len(read) < len(values):  # a fetch reads within one segment
        error, high_watermark, got = fetch_values(client, "ret", leader_start + len(read))
        if error == ErrorCode.OFFSET_OUT_OF_RANGE and start_of(1) > leader_start:
            leader_start, read = start_of(1), []  # a later retention pass moved the start
            continue
        assert error == 0 and high_watermark == len(values) and got
        read += got
    assert read == values[leader_start:]
    assert fetch_values(client, "ret", 0)[0] != 0  # below the log start: out of range
    client.close()


def test_log_settings_are_validated_when_the_config_is_built(tmp_path: object) -> None:
    config = BrokerConfig(broker_id=1, log_dirs=(str(tmp_path),), log={"retention_ms": 60_000})
    assert config.log.retention_ms == 60_000
    with pytest.raises(InvalidConfigError, match="unknown log config keys"):
        BrokerConfig(broker_id=1, log_dirs=(str(tmp_path),), log={"retention_days": 7})
    with pytest.raises(InvalidConfigError, match="segment_bytes"):
        BrokerConfig(broker_id=1, log_dirs=(str(tmp_path),), log={"segment_bytes": 1})
    with pytest.raises(InvalidConfigError, match="retention_check_interval_ms"):
        BrokerConfig(broker_id=1, log_dirs=(str(tmp_path),), retention_check_interval_ms=0)
