"""A parked request's answer (a long-poll fetch, an acks=all produce) is written to its
connection straight from the driver's ``Respond`` effect: no future, no task while it waits, and
the connection's later requests answered behind it in order."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from replog.broker import Cluster
from replog.protocol import messages as m
from tests.broker.support import Client, produce, produce_request
from tests.broker.test_cluster import create_topic, wait_for

pytestmark = [pytest.mark.system, pytest.mark.timeout(60)]


@pytest.fixture
def cluster(tmp_path: object) -> Iterator[Cluster]:
    c = Cluster.local(2, base_dir=str(tmp_path))
    try:
        yield c
    finally:
        c.close()


def long_poll(topic: str, offset: int) -> m.FetchRequest:
    return m.FetchRequest(
        replica_id=-1,
        max_wait_ms=20_000,
        min_bytes=1,
        max_bytes=1 << 20,
        isolation_level=0,
        session_id=0,
        session_epoch=-1,
        topics=[
            m.FetchTopic(
                topic=topic,
                partitions=[
                    m.FetchPartition(partition=0, fetch_offset=offset, partition_max_bytes=1 << 20)
                ],
            )
        ],
        forgotten_topics_data=[],
        rack_id="",
    )


def test_parked_fetch_holds_no_task_and_answers_in_request_order(cluster: Cluster) -> None:
    create_topic(cluster, "pk", [1, 2])
    broker = cluster.brokers[1]
    consumer, producer = Client(broker.address), Client(broker.address)
    # Pipelined on one connection: a long poll (parked), then a metadata request behind it.
    fetch_cid = consumer.send(long_poll("pk", 0))
    meta_cid = consumer.send(m.MetadataRequest(topics=None))

    def parked_without_a_task() -> bool:
        def check() -> bool:
            conns = list(broker._server.connections)
            parked = [c for c in conns if c._parked]
            return len(parked) == 1 and all(c.task is None for c in conns)

        return bool(cluster.call(check))

    wait_for(parked_without_a_task)
    assert produce(producer, "pk", [b"x"], acks=-1)[0] == 0  # acks=all: parked, then answered
    answers = [consumer.receive_any() for _ in range(2)]
    assert [cid for cid, _ in answers] == [fetch_cid, meta_cid]
    fetch = answers[0][1]
    assert isinstance(fetch, m.FetchResponse)
    assert fetch.responses[0].partitions[0].high_watermark == 1
    assert isinstance(answers[1][1], m.MetadataResponse)
    # acks=0 (no answer) pipelined before an acks=all produce: only the latter is answered.
    producer.send(produce_request("pk", [b"y"], acks=0))
    assert produce(producer, "pk", [b"z"], acks=-1) == (0, 2)
    consumer.close()
    producer.close()
