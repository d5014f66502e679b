"""InitProducerId and idempotent produces over real TCP: producer ids come from blocks the
controller allocates through the coordinator, so they are unique across brokers, blocks and
controller fail-overs; a retried idempotent batch is answered with its first offsets."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from replog.broker import Cluster
from replog.errors import ErrorCode
from replog.log import encode_batch
from replog.metadata.types import PRODUCER_ID_BLOCK_SIZE
from replog.protocol import messages as m
from tests.broker.support import Client, fetch_values
from tests.broker.test_cluster import create_topic, wait_for

pytestmark = [pytest.mark.system, pytest.mark.timeout(120)]


@pytest.fixture
def cluster(tmp_path: object) -> Iterator[Cluster]:
    c = Cluster.local(3, base_dir=str(tmp_path))
    try:
        yield c
    finally:
        c.close()


def producer_ids(client: Client, count: int) -> list[int]:
    ids = []
    for _ in range(count):
        answer = client.call(
            m.InitProducerIdRequest(transactional_id=None, transaction_timeout_ms=1)
        )
        assert isinstance(answer, m.InitProducerIdResponse)
        assert answer.error_code == ErrorCode.NONE and answer.producer_epoch == 0
        ids.append(answer.producer_id)
    return ids


def test_producer_ids_are_unique_across_blocks_and_brokers(cluster: Cluster) -> None:
    per_broker = PRODUCER_ID_BLOCK_SIZE + 50  # every broker needs a second block
    handed: dict[int, list[int]] = {}
    for broker_id, broker in sorted(cluster.brokers.items()):
        client = Client(broker.address)
        handed[broker_id] = producer_ids(client, per_broker)
        client.close()
    everything = [i for ids in handed.values() for i in ids]
    assert len(set(everything)) == len(everything) == 3 * per_broker
    for ids in handed.values():
        assert ids == sorted(ids)
        assert len({i // PRODUCER_ID_BLOCK_SIZE for i in ids}) == 2  # two whole blocks


def test_producer_ids_stay_unique_when_the_controller_fails_over(cluster: Cluster) -> None:
    coord = cluster.coordinator
    wait_for(lambda: coord.current_controller() is not None)
    old = coord.current_controller()
    assert old is not None
    before = []
    for broker in cluster.brokers.values():
        client = Client(broker.address)
        before += producer_ids(client, 10)
        client.close()
    cluster.kill(old.controller_id)
    wait_for(
        lambda: (
            (c := coord.current_controller()) is not None and c.controller_id != old.controller_id
        ),
        timeout_s=30,
    )
    after = []
    for broker_id, broker in cluster.brokers.items():
        if broker_id == old.controller_id:
            continue
        client = Client(broker.address)
        after += producer_ids(client, PRODUCER_ID_BLOCK_SIZE)  # a new block from the new one
        client.close()
    assert len(set(before + after)) == len(before) + len(after)


def test_a_transactional_id_is_refused(cluster: Cluster) -> None:
    client = Client(next(iter(cluster.brokers.values())).address)
    answer = client.call(
        m.InitProducerIdRequest(transactional_id="tx", transaction_timeout_ms=60_000)
    )
    assert isinstance(answer, m.InitProducerIdResponse)
    assert answer.error_code == ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    assert answer.producer_id == -1


def idempotent_produce(
    client: Client, topic: str, values: list[bytes], pid: int, seq: int, timestamp_ms: int = 1_000
) -> m.PartitionProduceResponse:
    """Produce one batch of producer ``pid`` (epoch 0) starting at sequence ``seq``, stamped
    ``timestamp_ms + seq`` (a producer whose last stamp is a day old has expired)."""
    batch = encode_batch(
        values,
        base_timestamp=timestamp_ms + seq,
        producer_id=pid,
        producer_epoch=0,
        base_sequence=seq,
    )
    response = client.call(
        m.ProduceRequest(
            acks=-1,
            timeout_ms=10_000,
            topic_data=[
                m.TopicProduceData(
                    name=topic, partition_data=[m.PartitionProduceData(index=0, records=batch)]
                )
            ],
        )
    )
    assert isinstance(response, m.ProduceResponse)
    return response.responses[0].partition_responses[0]


def test_a_retried_batch_is_answered_with_its_first_offsets(cluster: Cluster) -> None:
    create_topic(cluster, "idem", [1, 2, 3])
    client = Client(cluster.brokers[1].address)
    (pid,) = producer_ids(client, 1)
    first = idempotent_produce(client, "idem", [b"a", b"b"], pid, 0)
    second = idempotent_produce(client, "idem", [b"c"], pid, 2)
    retry = idempotent_produce(client, "idem", [b"a", b"b"], pid, 0)
    assert (first.error_code, first.base_offset, first.log_append_time_ms) == (0, 0, -1)
    assert (second.error_code, second.base_offset) == (0, 2)
    # Kafka answers a duplicate with the original batch's timestamp as the append time.
    assert (retry.error_code, retry.base_offset, retry.log_append_time_ms) == (0, 0, 1_000)
    gap = idempotent_produce(client, "idem", [b"d"], pid, 9)
    assert gap.error_code == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    # A producer the partition has no state for may start anywhere (Kafka since KIP-360).
    unknown = idempotent_produce(client, "idem", [b"e"], pid + 1, 4)
    assert (unknown.error_code, unknown.base_offset) == (0, 3)
    assert fetch_values(client, "idem") == (0, 4, [b"a", b"b", b"c", b"e"])
