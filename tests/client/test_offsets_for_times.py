"""``Consumer.offsets_for_times`` against a 3-broker cluster: the earliest offset at or after a
time, None past the last record, errors for bad input."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from replog.broker import Cluster
from replog.client import Admin, Consumer, Producer

pytestmark = pytest.mark.system

BASE_MS = 1_700_000_000_000


@pytest.fixture(scope="module")
def cluster() -> Iterator[Cluster]:
    with Cluster.local(3) as c:
        with Admin(c.bootstrap) as admin:
            admin.create_topics("timed", 2, 3, {"min.insync.replicas": "2"})
        with Producer(c.bootstrap, acks="all", linger_ms=0) as producer:
            for i in range(20):
                # partition 0: every 10 s from BASE; partition 1: the same, 5 s later
                for partition in (0, 1):
                    stamp = BASE_MS + i * 10_000 + partition * 5_000
                    producer.send("timed", b"v%d" % i, partition=partition, timestamp_ms=stamp)
                producer.flush()
        yield c


def test_offsets_for_times_finds_the_first_record_at_or_after(cluster: Cluster) -> None:
    with Consumer(cluster.bootstrap) as consumer:
        found = consumer.offsets_for_times(
            {("timed", 0): BASE_MS + 25_000, ("timed", 1): BASE_MS + 25_000}
        )
        assert found[("timed", 0)] == (3, BASE_MS + 30_000)
        assert found[("timed", 1)] == (2, BASE_MS + 25_000)
        assert consumer.offsets_for_times({("timed", 0): 0}) == {("timed", 0): (0, BASE_MS)}
        assert consumer.offsets_for_times({("timed", 1): BASE_MS + 10**9}) == {("timed", 1): None}
        # seek to the answer and read from that time on
        offset = found[("timed", 0)]
        assert offset is not None
        consumer.assign([("timed", 0)])
        consumer.seek(("timed", 0), offset.offset)
        records = consumer.poll(timeout_ms=5_000)
        assert records and records[0].offset == 3 and records[0].value == b"v3"


def test_offsets_for_times_rejects_negative_times(cluster: Cluster) -> None:
    with (
        Consumer(cluster.bootstrap) as consumer,
        pytest.raises(ValueError, match="timestamp must be an int >= 0"),
    ):
        consumer.offsets_for_times({("timed", 0): -1})
