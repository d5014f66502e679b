"""``MetadataImage.apply`` returns what a feed batch changed (``MetadataDelta``)."""

from __future__ import annotations

from replog.metadata.delta import EMPTY_DELTA
from replog.metadata.image import MetadataImage
from replog.metadata.types import (
    BrokerChanged,
    BrokerChangeReason,
    BrokerInfo,
    PartitionChanged,
    PartitionState,
    TopicAssignment,
    TopicChanged,
    TopicChangeReason,
)
from replog.topics import TopicPartition

OLD = TopicAssignment(topic="t", topic_id="00000000000000000000000000000001", replicas=[[1]])
NEW = TopicAssignment(topic="t", topic_id="00000000000000000000000000000002", replicas=[[1]])
TP = TopicPartition("t", 0)


def _state(epoch: int) -> PartitionState:
    return PartitionState(replicas=(1,), leader=1, leader_epoch=epoch, isr=(1,),
                          partition_epoch=epoch)  # fmt: skip


def _topic(reason: TopicChangeReason, assignment: TopicAssignment) -> TopicChanged:
    return TopicChanged(seq=0, reason=reason, assignment=assignment)


def _partition(epoch: int) -> PartitionChanged:
    return PartitionChanged(seq=0, topic="t", partition=0, state=_state(epoch))


def _image_with_old_topic() -> MetadataImage:
    image = MetadataImage.empty()
    image.apply([_topic(TopicChangeReason.CREATED, OLD), _partition(0)], 1)
    return image


def test_a_created_topic_and_its_partitions_are_reported() -> None:
    image = MetadataImage.empty()
    delta = image.apply([_topic(TopicChangeReason.CREATED, OLD), _partition(0)], 5)
    assert delta.topics_changed == {"t"} and delta.partitions_changed == (TP,)
    assert delta.topics_reconfigured == frozenset() and not delta.topics_deleted
    assert image.seq == 5 and image.partitions[TP] == _state(0)


def test_a_delete_naming_another_incarnation_deletes_nothing() -> None:
    image = _image_with_old_topic()
    delta = image.apply([_topic(TopicChangeReason.DELETED, NEW)], 2)
    assert delta is EMPTY_DELTA and image.topics["t"] == OLD and TP in image.partitions


def test_deleted_and_created_again_in_one_batch_reports_both_incarnations() -> None:
    image = _image_with_old_topic()
    delta = image.apply(
        [_topic(TopicChangeReason.DELETED, OLD), _topic(TopicChangeReason.CREATED, NEW),
         _partition(0)], 2,
    )  # fmt: skip
    assert delta.topics_deleted == (OLD,) and delta.topics_changed == {"t"}
    assert delta.partitions_changed == (TP,) and image.topics["t"] == NEW


def test_a_partition_of_a_topic_deleted_later_in_the_batch_is_not_reported() -> None:
    image = _image_with_old_topic()
    delta = image.apply([_partition(1), _topic(TopicChangeReason.DELETED, OLD)], 2)
    assert delta.topics_deleted == (OLD,) and delta.partitions_changed == ()
    assert TP not in image.partitions and "t" not in image.topics


def test_a_stale_partition_state_changes_nothing() -> None:
    image = _image_with_old_topic()
    image.apply([_partition(3)], 2)
    delta = image.apply([_partition(2)], 3)
    assert delta is EMPTY_DELTA and image.partitions[TP] == _state(3) and image.seq == 3


def test_reconfigured_topics_and_changed_brokers_are_reported() -> None:
    image = _image_with_old_topic()
    configured = TopicAssignment(
        topic="t", topic_id=OLD.topic_id, replicas=[[1]], configs={"retention.ms": "5"}
    )
    broker = BrokerInfo(broker_id=1, incarnation_epoch=1, host="h", port=1)
    delta = image.apply(
        [_topic(TopicChangeReason.CONFIGS_ALTERED, configured),
         BrokerChanged(seq=0, reason=BrokerChangeReason.REGISTERED, broker_id=1,
                       incarnation_epoch=1, broker=broker)], 2,
    )  # fmt: skip
    assert delta.topics_reconfigured == {"t"} and delta.brokers_changed == {1}
    assert delta.image_changed and image.brokers[1] == broker
    assert image.batches_applied == 2
