"""``MetadataImage``: a snapshot advanced by the feed records after it is the store's later
snapshot (the in-memory store; the raft store is checked by the broker restart tests)."""

from __future__ import annotations

from collections.abc import Iterator

import attrs
import pytest

from replog.coord import connect
from replog.coord.contract import Coordinator
from replog.coord.registry import drop_memory_store
from replog.metadata.image import MetadataImage
from replog.metadata.types import ALL_BROKERS, MetadataSnapshot, PartitionState


@pytest.fixture
def store() -> Iterator[Coordinator]:
    coordinator = connect("memory://image-test")
    try:
        yield coordinator
    finally:
        coordinator.close()
        drop_memory_store("image-test")


def _advanced(store: Coordinator, start: MetadataSnapshot) -> MetadataSnapshot:
    image = MetadataImage.from_snapshot(start)
    while True:
        batch = store.changes_since(image.seq, max_changes=3)  # several batches
        image.apply(batch.changes, batch.next_seq)
        if not batch.changes:
            return image.snapshot()


def test_a_snapshot_advanced_by_the_feed_equals_the_later_snapshot(store: Coordinator) -> None:
    b1 = store.register_broker(1, "h", 1, session_timeout_ms=60_000)
    store.register_broker(2, "h", 2, session_timeout_ms=60_000)
    epoch = store.elect_controller(1, b1.incarnation_epoch).controller_epoch
    store.create_topic("gone", [[1, 2]], controller_epoch=epoch)
    start = store.snapshot()

    b3 = store.register_broker(3, "h", 3, session_timeout_ms=60_000, fenced=True)
    store.admit_broker(3, b3.incarnation_epoch, controller_epoch=epoch)
    store.create_topic("t", [[1, 2], [2, 1]], controller_epoch=epoch, configs={"retention.ms": "5"})
    store.add_partitions("t", [[1, 2], [2, 1], [3, 1]], controller_epoch=epoch)
    state = store.get_partition_state("t", 0)
    assert state is not None
    moved = PartitionState(
        replicas=(1, 2, 3), leader=1, leader_epoch=state.leader_epoch + 1, isr=(1, 2),
        partition_epoch=state.partition_epoch + 1, adding_replicas=(3,),
    )  # fmt: skip
    assert store.compare_and_set_partition_state(
        "t", 0, state.partition_epoch, moved, controller_epoch=epoch
    ).ok
    store.alter_topic_configs("t", {"retention.ms": "9"}, controller_epoch=epoch)
    store.delete_topic("gone", controller_epoch=epoch)
    store.alter_broker_configs(ALL_BROKERS, {"log.retention.ms": "7"}, controller_epoch=epoch)
    store.alter_broker_configs(2, {"log.retention.ms": "8"}, controller_epoch=epoch)
    store.alter_broker_configs(2, {}, controller_epoch=epoch)
    store.unregister_broker(2, store.live_brokers()[2].incarnation_epoch)
    store.resign_controller(1, epoch)
    new_epoch = store.elect_controller(3, b3.incarnation_epoch).controller_epoch

    expected = store.snapshot()
    advanced = _advanced(store, start)
    assert advanced == expected
    assert advanced.topics["t"].replicas[0] == (1, 2, 3)  # from the reassigned state
    assert advanced.controller_epoch == new_epoch


def test_an_image_at_the_head_does_not_move(store: Coordinator) -> None:
    store.register_broker(1, "h", 1, session_timeout_ms=60_000)
    head = store.snapshot()
    assert _advanced(store, head) == head
    assert attrs.evolve(head) == MetadataImage.from_snapshot(head).snapshot()
